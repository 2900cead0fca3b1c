"""Drop-in replacements for TensorBoard's ``EventAccumulator`` and tbparse's ``SummaryReader``.

Change one import and an existing script reads through tbscope::

    # from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tbscope.compat import EventAccumulator
    # from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tbscope.compat import PluginEventAccumulator as EventAccumulator
    # from tbparse import SummaryReader
    from tbscope.compat import SummaryReader

``import tbscope.compat as event_accumulator`` also works: the tag-type constants, the size
guidances and the event classes (``ScalarEvent``, ``TensorEvent``, ...) are exported here.

How it answers, and why it is fast
----------------------------------
TensorBoard's accumulators and tbparse parse every event of every tag with protobuf in Python and
then keep what they sampled. Here tbscope's native scan reads the files once, in parallel, into
columnar tables that carry each record's file and byte offset (``scan(..., provenance=True)``).
Scalars, legacy histograms, images and audio are answered from those columns. Two things the
tables do not keep are read straight from the files, at the recorded offsets:

* which ``Summary.Value`` field a series used. The legacy accumulator (and tbparse, built on it)
  puts ``simple_value`` in ``Scalars`` but a rank-0 ``tensor`` (what TF2 and ``tf.summary``
  write) in ``Tensors``, while tbscope migrates both to its ``scalars`` table. One record per
  (tag, file) is enough to tell ("probe"; about 10 microseconds each).
* the exact ``TensorProto`` behind ``Tensors(tag)``: only the requested tag's records are read
  and parsed, so the proto is byte-for-byte the one on disk (dtype, typed fields or
  ``tensor_content``), and the plugin accumulator applies TensorBoard's own migration to it.

Differences from the originals, on purpose
------------------------------------------
* **Nothing is sampled.** ``size_guidance`` (and ``tensor_size_guidance``) are validated and
  otherwise ignored: every point is kept, whatever the limits say. TensorBoard samples a
  reservoir at random, so no script can rely on *which* points it kept; a superset in file
  order is the safe answer, and tbscope never drops data silently. Memory is not the concern it
  was: nothing is materialised until a tag is asked for, and image/audio bytes stay on disk until
  ``Images``/``Audio`` return them.
* **Restarts.** With ``purge_orphaned_data=True`` (the default, as in TensorBoard) a run is read
  whole unless TensorBoard would purge something: its files lack a modern file_version
  (TensorBoard then purges out-of-order steps), or it restarted (a second ``SessionLog.START``,
  counted by tbscope). Those runs get the rule TensorBoard's current loader (RustBoard) applies,
  tbscope's ``restarts="preempt"``: a record at step *s* drops earlier records of the same series
  with step >= *s*. That is exact for writers that never log ``SessionLog`` (TF2, PyTorch,
  Keras: TensorBoard purges nothing there either) and close for the rest; the Python
  accumulators purged every tag at a START's step (the legacy one only scalars, histograms,
  images and audio, never tensors, and also at a run's first START). Pass
  ``purge_orphaned_data=False`` to keep everything (what the cross-check tests compare).
* **Legacy histograms** (``HistogramProto``): ``bucket_limit[-1]`` is the histogram's ``max``, not
  the writer's last limit (usually DBL_MAX): tbscope stores RustBoard's bucket edges, where the
  right edge of the last bucket is ``max``. Every other limit, count and statistic is exact.
  ``CompressedHistograms`` is the same as TensorBoard's whenever the writer's last limit is >=
  ``max`` (TensorBoard clamps that edge to ``max`` too); only a histogram whose values overflow
  its last limit (tensorboardX with explicit ``bins``) interpolates differently in its last
  bucket.
* **Wall times** that are NaN or +-inf in a file are NaN here (tbscope stores them as null), except
  in ``Tensors``, which reads them from the record.
* **Zero-element records** (an image summary of zero images, an empty text tensor) have no row in
  tbscope's tables; the accumulators find them by scanning the run's files for that tag (only when
  the series' point count says some are missing). ``SummaryReader`` does not scan and leaves them
  out (tbparse raises on most of them).

``SummaryReader``-specific differences are listed in its docstring.
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from tbscope import _core
from tbscope.frames import to_ndarray
from tbscope.reader import Logdir, Restarts, scan

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "AUDIO",
    "COMPRESSED_HISTOGRAMS",
    "DEFAULT_SIZE_GUIDANCE",
    "GRAPH",
    "HISTOGRAMS",
    "IMAGES",
    "META_GRAPH",
    "NORMAL_HISTOGRAM_BPS",
    "RUN_METADATA",
    "SCALARS",
    "STORE_EVERYTHING_SIZE_GUIDANCE",
    "TENSORS",
    "AudioEvent",
    "CompressedHistogramEvent",
    "EventAccumulator",
    "HistogramEvent",
    "HistogramValue",
    "ImageEvent",
    "PluginEventAccumulator",
    "ScalarEvent",
    "SummaryReader",
    "TensorEvent",
]

# --------------------------------------------------------------------------------------------
# Constants (tensorboard.backend.event_processing.tag_types / event_accumulator)
# --------------------------------------------------------------------------------------------

TENSORS = "tensors"
GRAPH = "graph"
META_GRAPH = "meta_graph"
RUN_METADATA = "run_metadata"
COMPRESSED_HISTOGRAMS = "distributions"
HISTOGRAMS = "histograms"
IMAGES = "images"
AUDIO = "audio"
SCALARS = "scalars"

#: Normal CDF at (-inf, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, inf) standard deviations, in basis points.
NORMAL_HISTOGRAM_BPS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)

#: TensorBoard's defaults, accepted for compatibility; tbscope keeps every point regardless.
DEFAULT_SIZE_GUIDANCE = {COMPRESSED_HISTOGRAMS: 500, IMAGES: 4, AUDIO: 4, SCALARS: 10000, HISTOGRAMS: 1, TENSORS: 10}
STORE_EVERYTHING_SIZE_GUIDANCE = {COMPRESSED_HISTOGRAMS: 0, IMAGES: 0, AUDIO: 0, SCALARS: 0, HISTOGRAMS: 0, TENSORS: 0}

# --------------------------------------------------------------------------------------------
# Event classes: TensorBoard's own when it is importable (so isinstance checks pass), else
# identical frozen dataclasses (TensorBoard >= 2.17 defines them as frozen dataclasses; older
# releases used namedtuples with the same fields in the same order, built the same way).
# --------------------------------------------------------------------------------------------

try:
    from tensorboard.backend.event_processing import event_accumulator as _tb_ea
except Exception:  # pragma: no cover - depends on the environment
    _tb_ea = None

if TYPE_CHECKING or _tb_ea is None:

    @dataclasses.dataclass(frozen=True)
    class ScalarEvent:
        wall_time: float
        step: int
        value: float

    @dataclasses.dataclass(frozen=True)
    class CompressedHistogramEvent:
        wall_time: float
        step: int
        compressed_histogram_values: Sequence[tuple[float, float]]

    @dataclasses.dataclass(frozen=True)
    class HistogramValue:
        min: float
        max: float
        num: int
        sum: float
        sum_squares: float
        bucket_limit: Sequence[float]
        bucket: Sequence[int]

    @dataclasses.dataclass(frozen=True)
    class HistogramEvent:
        wall_time: float
        step: int
        histogram_value: HistogramValue

    @dataclasses.dataclass(frozen=True)
    class ImageEvent:
        wall_time: float
        step: int
        encoded_image_string: bytes
        width: int
        height: int

    @dataclasses.dataclass(frozen=True)
    class AudioEvent:
        wall_time: float
        step: int
        encoded_audio_string: bytes
        content_type: str
        sample_rate: float
        length_frames: int

    @dataclasses.dataclass(frozen=True)
    class TensorEvent:
        wall_time: float
        step: int
        tensor_proto: Any

else:
    ScalarEvent = _tb_ea.ScalarEvent
    CompressedHistogramEvent = _tb_ea.CompressedHistogramEvent
    HistogramValue = _tb_ea.HistogramValue
    HistogramEvent = _tb_ea.HistogramEvent
    ImageEvent = _tb_ea.ImageEvent
    AudioEvent = _tb_ea.AudioEvent
    TensorEvent = _tb_ea.TensorEvent


def _tb(what: str) -> Any:
    """TensorBoard's protos and migration code, imported when first needed.

    Only proto objects (``TensorProto``, ``GraphDef``, ``SummaryMetadata``, ...) need TensorBoard;
    reading scalars, histograms, images and audio does not.
    """
    try:
        from tensorboard import data_compat, dataclass_compat
        from tensorboard.compat.proto import (
            config_pb2,
            event_pb2,
            graph_pb2,
            meta_graph_pb2,
            summary_pb2,
            tensor_pb2,
            tensor_shape_pb2,
        )
        from tensorboard.util import tensor_util
    except ImportError as e:
        raise ImportError(
            f"{what} returns TensorBoard protocol buffers, which need the `tensorboard` package "
            "(pip install tensorboard). Scalars, histograms, images and audio work without it."
        ) from e
    return SimpleNamespace(
        data_compat=data_compat,
        dataclass_compat=dataclass_compat,
        config_pb2=config_pb2,
        event_pb2=event_pb2,
        graph_pb2=graph_pb2,
        meta_graph_pb2=meta_graph_pb2,
        summary_pb2=summary_pb2,
        tensor_pb2=tensor_pb2,
        tensor_shape_pb2=tensor_shape_pb2,
        tensor_util=tensor_util,
    )


# --------------------------------------------------------------------------------------------
# Protobuf wire format: just enough to classify a record without TensorBoard's protos
# --------------------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ValueError("malformed varint")


def _walk(buf: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(field number, wire type, varint value, bytes value) of each field of a message."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
            yield field, wt, val, b""
        elif wt == 1:
            yield field, wt, 0, buf[pos : pos + 8]
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            yield field, wt, 0, buf[pos : pos + ln]
            pos += ln
        elif wt == 5:
            yield field, wt, 0, buf[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")


# Summary.Value payload fields (summary.proto) ...
_SIMPLE, _OBSOLETE_HISTO, _IMAGE, _HISTO, _AUDIO, _TENSOR = 2, 3, 4, 5, 6, 8
_VALUE_FIELDS = frozenset((_SIMPLE, _OBSOLETE_HISTO, _IMAGE, _HISTO, _AUDIO, _TENSOR))
# ... and event-level records, negated Event field numbers (event.proto)
_EV_GRAPH, _EV_RUN_METADATA, _EV_META_GRAPH = -4, -8, -9
# tbscope's names for event-level blobs (docs/schema.md)
_RUN_GRAPH_TAG = "__run_graph__"
_META_GRAPH_TAG = "__meta_graph__"
# DataType enum values whose rank-0 values are Python ints / bools (types.proto)
_INT_DTYPES = frozenset((3, 4, 5, 6, 9, 17, 22, 23))
_DT_BOOL = 10


@dataclasses.dataclass(frozen=True)
class _Probe:
    """How one record holds a tag: which field, its raw SummaryMetadata, its tensor dtype."""

    field: int  # one of _VALUE_FIELDS, one of _EV_*, or 0 (the value carries no payload)
    metadata: bytes | None  # serialized SummaryMetadata when the value has one
    dtype: int  # TensorProto.dtype for tensor payloads, else 0


_NO_PROBE = _Probe(0, None, 0)


def _probe_event(data: bytes, tag: str) -> _Probe:
    """Classify how the serialized Event ``data`` holds ``tag``."""
    tag_b = tag.encode("utf-8")
    for f, wt, _, b in _walk(data):
        if wt != 2:
            continue
        if f == 4 and tag == _RUN_GRAPH_TAG:
            return _Probe(_EV_GRAPH, None, 0)
        if f == 9 and tag == _META_GRAPH_TAG:
            return _Probe(_EV_META_GRAPH, None, 0)
        if f == 8:
            if any(g == 1 and gb == tag_b for g, _, _, gb in _walk(b)):
                return _Probe(_EV_RUN_METADATA, None, 0)
        elif f == 5:
            for g, gwt, _, vb in _walk(b):
                if g == 1 and gwt == 2:
                    p = _probe_value(vb, tag_b)
                    if p is not None:
                        return p
    return _NO_PROBE


def _probe_value(vb: bytes, tag_b: bytes) -> _Probe | None:
    vtag = node = b""
    field = dtype = 0
    md: bytes | None = None
    for f, _, _, b in _walk(vb):
        if f == 1:
            vtag = b
        elif f == 7:
            node = b
        elif f == 9:
            md = b
        elif f in _VALUE_FIELDS:
            field = f
            if f == _TENSOR:
                dtype = next((iv for g, _, iv, _ in _walk(b) if g == 1), 0)
    if vtag == tag_b or (not vtag and node == tag_b):
        return _Probe(field, md, dtype)
    return None


def _plugin_of(metadata: bytes) -> tuple[str, bytes]:
    """(plugin_name, content) of a serialized SummaryMetadata."""
    name, content = b"", b""
    for f, wt, _, b in _walk(metadata):
        if f == 1 and wt == 2:
            for g, _, _, gb in _walk(b):
                if g == 1:
                    name = gb
                elif g == 2:
                    content = gb
    return name.decode("utf-8", "replace"), content


def _event_header(data: bytes) -> tuple[float, int, str | None, str | None]:
    """(wall_time, step, file_version, source writer) of a serialized Event."""
    wall, step = 0.0, 0
    version: str | None = None
    writer: str | None = None
    for f, _, iv, b in _walk(data):
        if f == 1 and len(b) == 8:
            wall = struct.unpack("<d", b)[0]
        elif f == 2:
            step = iv - (1 << 64) if iv >= 1 << 63 else iv
        elif f == 3:
            version = b.decode("utf-8", "replace")
        elif f == 10:
            for g, _, _, gb in _walk(b):
                if g == 1:
                    writer = gb.decode("utf-8", "replace") or None
    return wall, step, version, writer


class _Files:
    """Event files opened once each, for reading blobs at known offsets; records come from the
    native reader's framing (``_core.read_records``), which checks their CRCs again."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def __enter__(self) -> _Files:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def read(self, path: str, offset: int, length: int) -> bytes:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise OSError(f"{path}: file is shorter than when it was read; data at {offset} is gone")
        return data

    def record(self, path: str, offset: int) -> bytes:
        """The payload of the record that starts at ``offset``."""
        return self.records(path, [offset])[0]

    def records(self, path: str, offsets: Sequence[int]) -> list[bytes]:
        """The payloads of the records that start at ``offsets``, in that order."""
        return [data for _, data in _core.read_records(path, list(offsets))]


def _scan_file_for_tag(path: str, tag: str) -> list[tuple[int, int, float]]:
    """(offset, step, wall_time) of every record of ``path`` that holds ``tag``.

    A slow path, used only for records tbscope's tables cannot show: zero-element
    images/audio/text/blob summaries. The native reader's framing returns only the records whose
    payload mentions the tag; each is then probed.
    """
    out: list[tuple[int, int, float]] = []
    try:
        found = _core.read_records(path, containing=tag.encode("utf-8"))
    except OSError:
        return out
    for offset, rec in found:
        try:
            if _probe_event(rec, tag) is not _NO_PROBE:
                wall, step, _, _ = _event_header(rec)
                out.append((offset, step, wall))
        except ValueError:  # a payload that is not a valid Event
            continue
    return out


def _event_files(path: str) -> list[str]:
    """The event files TensorBoard's DirectoryWatcher loads for ``path``, in its order."""
    if os.path.isfile(path):
        return [path]
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [os.path.join(path, n) for n in names if "tfevents" in n and os.path.isfile(os.path.join(path, n))]


def _compress_histogram(h: Any, bps: Sequence[float]) -> list[tuple[float, float]]:
    """TensorBoard's ``compressor.compress_histogram_proto``: the value at each basis point of the
    cumulative distribution, interpolated inside buckets (same algorithm, same edge rules)."""
    if not h.num:
        return [(b, 0.0) for b in bps]
    bucket = np.array(h.bucket, dtype=np.float64)
    limits = list(h.bucket_limit)
    weights = (bucket * bps[-1] / (bucket.sum() or 1.0)).cumsum()
    values: list[tuple[float, float]] = []
    j = 0
    while j < len(bps):
        i = int(np.searchsorted(weights, bps[j], side="right"))
        while i < len(weights):
            cumsum = weights[i]
            prev = weights[i - 1] if i > 0 else 0.0
            if cumsum == prev:
                i += 1
                continue
            lhs = h.min if (not i or not prev) else max(limits[i - 1], h.min)
            rhs = min(limits[i], h.max)
            values.append((bps[j], lhs + (bps[j] - prev) * float(rhs - lhs) / (cumsum - prev)))
            j += 1
            break
        else:
            break
    while j < len(bps):
        values.append((bps[j], h.max))
        j += 1
    return values


def _check_size_guidance(size_guidance: Mapping[str, int] | None) -> dict[str, int]:
    """Validate a size guidance the way TensorBoard reads it. The values never limit anything:
    tbscope keeps every point (see the module docstring)."""
    if size_guidance is None:
        return {}
    if not isinstance(size_guidance, Mapping):
        raise TypeError(f"size_guidance takes a dict of tag type -> count, got {type(size_guidance).__name__}")
    for k, v in size_guidance.items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            raise ValueError(f"size_guidance[{k!r}] must be an int >= 0 (0 = keep everything), got {v!r}")
    return dict(size_guidance)


# --------------------------------------------------------------------------------------------
# Tables indexed by tag
# --------------------------------------------------------------------------------------------

_KIND_METHOD = {
    "scalars": "scalars",
    "histograms": "histograms",
    "images": "images",
    "audio": "audio",
    "text": "text",
    "hparams": "hparams_records",
    "blobs": "blobs",
    "tensors": "tensors",
}
# Kinds whose tables have one row per element: a record with zero elements has no row.
_SPARSE_KINDS = frozenset(("images", "audio", "text", "blobs"))
_EMPTY_IDX = np.zeros(0, dtype=np.int64)


def _codes(column: Any) -> tuple[np.ndarray[Any, Any], list[str]]:
    """Integer codes and their strings for a (dictionary-encoded) Arrow string column."""
    import pandas as pd

    s = column.to_pandas()
    cat = s.cat if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category").cat
    return cat.codes.to_numpy().astype(np.int64), [str(c) for c in cat.categories]


class _Table:
    """One tbscope table (with provenance) as numpy index columns plus rows grouped by tag."""

    def __init__(self, arrow: pa.Table) -> None:
        self.arrow = arrow
        self.n = arrow.num_rows
        self.tag_codes, self.tags = _codes(arrow.column("tag"))
        self.file_codes, self.files = _codes(arrow.column("file"))
        self.offsets: np.ndarray[Any, Any] = arrow.column("offset").to_numpy()
        self.steps: np.ndarray[Any, Any] = arrow.column("step").to_numpy()
        self.walls: np.ndarray[Any, Any] = arrow.column("wall_time").to_numpy(zero_copy_only=False).astype(np.float64)
        self._by_tag: dict[str, np.ndarray[Any, Any]] | None = None

    def column(self, name: str, idx: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
        """A value column as numpy (list columns as object arrays of arrays), all rows or ``idx``."""
        import pyarrow as pa

        col = self.arrow.column(name)
        if idx is not None:
            col = col.take(pa.array(idx, type=pa.int64()))
        arr: np.ndarray[Any, Any] = col.to_numpy(zero_copy_only=False) if hasattr(col, "to_numpy") else np.asarray(col)
        return arr

    def by_tag(self) -> dict[str, np.ndarray[Any, Any]]:
        """Row indices of each tag, in record order (one stable sort for the whole table)."""
        if self._by_tag is None:
            order = np.argsort(self.tag_codes, kind="stable")
            counts = np.bincount(self.tag_codes, minlength=len(self.tags))
            bounds = np.concatenate([[0], np.cumsum(counts)])
            self._by_tag = {t: order[bounds[i] : bounds[i + 1]] for i, t in enumerate(self.tags) if counts[i]}
        return self._by_tag


@dataclasses.dataclass
class _Records:
    """The records (not rows) holding one tag, in file and record order."""

    names: list[str]  # file names, indexed by ``file_codes``
    file_codes: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]

    def __len__(self) -> int:
        return len(self.offsets)

    def file(self, i: int) -> str:
        return self.names[int(self.file_codes[i])]

    def per_file(self) -> list[tuple[str, np.ndarray[Any, Any]]]:
        """(file, indices of its records) for each file, in order of first record."""
        if not len(self):
            return []
        starts = np.flatnonzero(np.concatenate([[True], self.file_codes[1:] != self.file_codes[:-1]]))
        ends = np.append(starts[1:], len(self))
        return [(self.file(a), np.arange(a, b)) for a, b in zip(starts.tolist(), ends.tolist())]


_NO_RECORDS = _Records([], _EMPTY_IDX, _EMPTY_IDX)


class _Run:
    """One run opened by an accumulator: tables, kinds per tag, records and probes, all lazy.

    Rebuilt after every ``Reload`` (the caches describe one state of the files).
    """

    def __init__(self, logdir: Logdir, path: str, restarts: str) -> None:
        import pandas as pd

        self.logdir = logdir
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self.restarts = restarts
        self.event_files = [os.path.basename(p) for p in _event_files(path)]
        self._file_rank = {f: i for i, f in enumerate(self.event_files)}
        s = logdir.series().to_pandas()
        s = s[s["run"].astype(str) == "."] if len(s) else s
        self.kinds: dict[str, str] = {}
        self.points: dict[str, int] = {}
        for tag, kind, points in zip(s["tag"].astype(str), s["kind"].astype(str), s["points"]):
            self.kinds[tag] = kind
            self.points[tag] = int(points) if not pd.isna(points) else 0
        self._tables: dict[str, _Table] = {}
        self._records: dict[str, _Records] = {}
        self._probes: dict[str, dict[str, _Probe]] = {}
        self._order: list[str] | None = None

    def path(self, rel: str) -> str:
        return os.path.join(self.dir, rel)

    def table(self, kind: str) -> _Table:
        t = self._tables.get(kind)
        if t is None:
            frame = getattr(self.logdir, _KIND_METHOD[kind])()
            t = self._tables[kind] = _Table(frame.to_arrow())
        return t

    def rows(self, tag: str) -> np.ndarray[Any, Any]:
        kind = self.kinds.get(tag)
        if kind is None:
            return _EMPTY_IDX
        return self.table(kind).by_tag().get(tag, _EMPTY_IDX)

    def records(self, tag: str) -> _Records:
        rec = self._records.get(tag)
        if rec is not None:
            return rec
        kind = self.kinds.get(tag)
        if kind is None:
            rec = _NO_RECORDS
        else:
            t = self.table(kind)
            idx = self.rows(tag)
            fc, off = t.file_codes[idx], t.offsets[idx]
            first = np.ones(len(idx), dtype=bool)
            first[1:] = (fc[1:] != fc[:-1]) | (off[1:] != off[:-1])
            rec = _Records(t.files, fc[first], off[first])
            if kind in _SPARSE_KINDS and len(rec) < self.points.get(tag, 0):
                rec = self._scan_records(tag)
        self._records[tag] = rec
        return rec

    def _scan_records(self, tag: str) -> _Records:
        found: list[tuple[int, int, int]] = []  # (file index, offset, step)
        for i, rel in enumerate(self.event_files):
            found.extend((i, off, step) for off, step, _ in _scan_file_for_tag(self.path(rel), tag))
        if self.restarts == "preempt":
            kept: list[tuple[int, int, int]] = []
            for r in found:
                while kept and kept[-1][2] >= r[2]:
                    kept.pop()
                kept.append(r)
            found = kept
        return _Records(
            list(self.event_files),
            np.array([r[0] for r in found], dtype=np.int64),
            np.array([r[1] for r in found], dtype=np.int64),
        )

    def probes(self, tag: str) -> dict[str, _Probe]:
        """file -> how the first record of ``tag`` in that file holds it."""
        p = self._probes.get(tag)
        if p is None:
            p = {}
            rec = self.records(tag)
            with _Files() as files:
                for rel, which in rec.per_file():
                    if rel not in p:
                        p[rel] = _probe_event(files.record(self.path(rel), int(rec.offsets[which[0]])), tag)
            self._probes[tag] = p
        return p

    def fields(self, tag: str) -> set[int]:
        return {p.field for p in self.probes(tag).values()}

    def tags_in_order(self) -> list[str]:
        """Tags by first record (file order, then offset), like TensorBoard's arrival order."""
        if self._order is None:
            keyed = []
            for i, tag in enumerate(self.kinds):
                rec = self.records(tag)
                if len(rec):
                    keyed.append((self._file_rank.get(rec.file(0), len(self._file_rank)), int(rec.offsets[0]), i, tag))
            self._order = [k[-1] for k in sorted(keyed)]
        return self._order

    def first_metadata(self, tag: str) -> bytes | None:
        for p in self.probes(tag).values():
            if p.metadata is not None:
                return p.metadata
        return None

    def bucket_rows(self, tag: str, kind: str, field: int) -> np.ndarray[Any, Any]:
        """Rows of ``tag`` in ``kind``'s table whose file holds the tag as ``field``."""
        if self.kinds.get(tag) != kind:
            raise KeyError(f"Key {tag} was not found in Reservoir")
        t = self.table(kind)
        idx = self.rows(tag)
        probes = self.probes(tag)
        ok = [i for i, rel in enumerate(t.files) if probes.get(rel, _NO_PROBE).field == field]
        idx = idx[np.isin(t.file_codes[idx], ok)]
        if not len(idx):
            raise KeyError(f"Key {tag} was not found in Reservoir")
        return idx

    def blob_rows(self, tag: str, field: int) -> list[tuple[str, int, int]]:
        """(file, blob offset, blob length) of the blobs of ``tag`` held as ``field``."""
        if self.kinds.get(tag) != "blobs":
            return []
        t = self.table("blobs")
        idx = self.rows(tag)
        probes = self.probes(tag)
        keep = [i for i in idx.tolist() if probes.get(t.files[t.file_codes[i]], _NO_PROBE).field == field]
        if not keep:
            return []
        k = np.asarray(keep, dtype=np.int64)
        return _blob_locations(t, k)

    def read_blob(self, where: tuple[str, int, int]) -> bytes:
        with _Files() as files:
            return files.read(self.path(where[0]), where[1], where[2])


def _blob_locations(t: _Table, idx: np.ndarray[Any, Any]) -> list[tuple[str, int, int]]:
    """(file, offset, length) of the blobs of rows ``idx`` (images, audio, blobs tables)."""
    rels = [str(r) for r in t.column("blob_file", idx).tolist()]
    return list(zip(rels, t.column("blob_offset", idx).tolist(), t.column("blob_length", idx).tolist()))


def _read_blobs(directory: str, where: list[tuple[str, int, int]]) -> list[bytes]:
    with _Files() as files:
        return [files.read(os.path.join(directory, r), o, n) for r, o, n in where]


def _blobs(run: _Run, t: _Table, idx: np.ndarray[Any, Any]) -> list[bytes]:
    return _read_blobs(run.dir, _blob_locations(t, idx))


# --------------------------------------------------------------------------------------------
# Accumulators
# --------------------------------------------------------------------------------------------


class _Accumulator:
    """What both accumulators share: loading, first event, plugin assets, graphs."""

    def __init__(self, path: str | os.PathLike[str], purge_orphaned_data: bool) -> None:
        if not path:
            raise ValueError("path must be a valid string")
        self.path = os.fspath(path)
        self.purge_orphaned_data = purge_orphaned_data
        self.most_recent_step = -1
        self.most_recent_wall_time: float = -1
        self.file_version: float | None = None
        self._logdir: Logdir | None = None
        self._run: _Run | None = None
        self._first: tuple[float, int, str | None, str | None] | None = None
        self._mode: Restarts = "all"

    def Reload(self) -> Any:
        """Read what was written since the last call (everything, the first time).

        As in TensorBoard, nothing is read before the first ``Reload``. Later calls read only the
        bytes appended since (tbscope's incremental reload) and drop the per-tag caches.
        """
        info = self._first_event()
        if info is not None and info[2] is not None:
            self.file_version = _parse_file_version(info[2])
        if self._logdir is None:
            self._logdir = scan(self.path, runs=".", restarts=self._restarts_mode(info is not None), provenance=True)
        self._logdir.reload()
        runs = self._logdir.run_info().to_pandas()
        row = runs.iloc[0] if len(runs) else None
        if self._mode == "all" and self.purge_orphaned_data and row is not None and int(row.get("restarts", 0) or 0) > 0:
            # the run restarted (a second SessionLog.START): read it again with the purge rule
            self._mode = "preempt"
            self._logdir = scan(self.path, runs=".", restarts="preempt", provenance=True)
            self._logdir.reload()
        self._run = _Run(self._logdir, self.path, self._mode)
        if row is not None:
            if row.get("max_step") == row.get("max_step") and row.get("max_step") is not None:
                self.most_recent_step = int(row["max_step"])
            if row.get("last_wall_time") == row.get("last_wall_time") and row.get("last_wall_time") is not None:
                self.most_recent_wall_time = float(row["last_wall_time"])
        return self

    def _restarts_mode(self, have_files: bool) -> Restarts:
        """Which tbscope restart rule stands in for TensorBoard's purge.

        TensorBoard purges on a restart ``SessionLog.START`` when the files have file_version
        >= 2 (every writer of the last decade), and on out-of-order steps otherwise. Runs with
        no such restart are read whole (exactly what TensorBoard keeps); files without a modern
        file_version, and runs that restarted, get tbscope's ``preempt`` rule.
        """
        self._mode = "all"
        if self.purge_orphaned_data and have_files and (self.file_version is None or self.file_version < 2):
            self._mode = "preempt"
        return self._mode

    def _first_event(self) -> tuple[float, int, str | None, str | None] | None:
        if self._first is None:
            for p in _event_files(self.path):
                try:
                    with _Files() as files:
                        self._first = _event_header(files.record(p, 0))
                    break
                except (OSError, ValueError, struct.error):
                    continue
        return self._first

    def FirstEventTimestamp(self) -> float:
        """Wall time of the first event of the first file (usually the file_version event)."""
        info = self._first_event()
        if info is None:
            raise ValueError("No event timestamp could be found")
        return info[0]

    def GetSourceWriter(self) -> str | None:
        """The writer named in the first event's ``source_metadata`` (None when absent)."""
        info = self._first_event()
        return None if info is None else info[3]

    def PluginAssets(self, plugin_name: str) -> list[str]:
        d = os.path.join(self.path, "plugins", plugin_name)
        try:
            return [x.rstrip("/") for x in os.listdir(d)]
        except OSError:
            return []

    def RetrievePluginAsset(self, plugin_name: str, asset_name: str) -> str:
        p = os.path.join(self.path, "plugins", plugin_name, asset_name)
        try:
            with open(p) as f:
                return f.read()
        except OSError as e:
            raise KeyError(f"Asset path {p} not found") from e

    def _graph_bytes(self) -> bytes | None:
        """TensorBoard's rule: the newest graph_def event; failing that, the graph inside the
        newest meta graph."""
        run = self._run
        if run is None:
            return None
        graphs = run.blob_rows(_RUN_GRAPH_TAG, _EV_GRAPH)
        if graphs:
            return run.read_blob(graphs[-1])
        meta = run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH)
        if meta:
            tb = _tb("Graph()")
            mg = tb.meta_graph_pb2.MetaGraphDef.FromString(run.read_blob(meta[-1]))
            data: bytes = mg.graph_def.SerializeToString()
            return data
        return None

    def _has_meta_graph(self) -> bool:
        return self._run is not None and bool(self._run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH))

    def Graph(self) -> Any:
        """The run's ``GraphDef`` (TensorBoard's protos)."""
        data = self._graph_bytes()
        if data is None:
            raise ValueError("There is no graph in this EventAccumulator")
        return _tb("Graph()").graph_pb2.GraphDef.FromString(data)

    def SerializedGraph(self) -> bytes | None:
        return self._graph_bytes()

    def MetaGraph(self) -> Any:
        run = self._run
        meta = run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH) if run is not None else []
        if run is None or not meta:
            raise ValueError("There is no metagraph in this EventAccumulator")
        return _tb("MetaGraph()").meta_graph_pb2.MetaGraphDef.FromString(run.read_blob(meta[-1]))


def _parse_file_version(v: str) -> float:
    try:
        return float(v.split("brain.Event:")[-1])
    except ValueError:
        return -1.0


class EventAccumulator(_Accumulator):
    """TensorBoard's legacy ``event_accumulator.EventAccumulator``, answered by tbscope.

    Same constructor, same methods, same event classes and the same bucketing: ``Scalars`` holds
    ``simple_value`` series (tensorboardX, PyTorch, TF1 ``tf.summary.scalar``), ``Tensors`` every
    value written as a tensor (TF2 ``tf.summary.*``, text, hparams, pr curves, ...), ``Histograms``
    / ``Images`` / ``Audio`` the legacy ``HistogramProto`` / ``Summary.Image`` / ``Summary.Audio``.
    The path is one run: a directory (its own event files, not subdirectories) or one file.

    See the module docstring for what differs (no sampling, restart rule, last histogram limit).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        size_guidance: Mapping[str, int] | None = None,
        compression_bps: Sequence[float] = NORMAL_HISTOGRAM_BPS,
        purge_orphaned_data: bool = True,
    ) -> None:
        super().__init__(path, purge_orphaned_data)
        self.size_guidance = _check_size_guidance(size_guidance)
        self._compression_bps = tuple(compression_bps)

    def __repr__(self) -> str:
        return f"<tbscope.compat.EventAccumulator {self.path!r}>"

    def Tags(self) -> dict[str, Any]:
        """``{tag type: [tags]}``, plus ``graph``/``meta_graph`` flags, like TensorBoard's."""
        out: dict[str, Any] = {
            IMAGES: [],
            AUDIO: [],
            HISTOGRAMS: [],
            SCALARS: [],
            COMPRESSED_HISTOGRAMS: [],
            TENSORS: [],
            GRAPH: False,
            META_GRAPH: False,
            RUN_METADATA: [],
        }
        run = self._run
        if run is None:
            return out
        where = {_SIMPLE: SCALARS, _IMAGE: IMAGES, _AUDIO: AUDIO, _HISTO: HISTOGRAMS, _TENSOR: TENSORS}
        for tag in run.tags_in_order():
            fields = run.fields(tag)
            for f, bucket in where.items():
                if f in fields:
                    out[bucket].append(tag)
            if _EV_RUN_METADATA in fields:
                out[RUN_METADATA].append(tag)
        out[COMPRESSED_HISTOGRAMS] = list(out[HISTOGRAMS])
        out[META_GRAPH] = self._has_meta_graph()
        out[GRAPH] = out[META_GRAPH] or bool(run.blob_rows(_RUN_GRAPH_TAG, _EV_GRAPH))
        return out

    def _require(self) -> _Run:
        if self._run is None:
            raise KeyError("nothing loaded yet: call Reload() first")
        return self._run

    def Scalars(self, tag: str) -> list[ScalarEvent]:
        """Every ``simple_value`` of ``tag`` as ``ScalarEvent(wall_time, step, value)``."""
        run = self._require()
        t = run.table("scalars")
        idx = run.bucket_rows(tag, "scalars", _SIMPLE)
        vals = t.column("value", idx)
        return list(map(ScalarEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), vals.tolist()))

    def Histograms(self, tag: str) -> list[HistogramEvent]:
        """Every legacy ``HistogramProto`` of ``tag``; ``bucket_limit[-1]`` is ``max`` (see module doc)."""
        run = self._require()
        t = run.table("histograms")
        idx = run.bucket_rows(tag, "histograms", _HISTO)
        cols = [t.column(c, idx).tolist() for c in ("min", "max", "num", "sum", "sum_squares")]
        rights = t.column("right", idx)
        counts = t.column("count", idx)
        out = []
        for i, (w, s) in enumerate(zip(t.walls[idx].tolist(), t.steps[idx].tolist())):
            limits, bucket = np.asarray(rights[i]).tolist(), np.asarray(counts[i]).tolist()
            if limits:
                # The reader keeps a last bucket from running backwards; the proto's last limit
                # is max (see the module doc).
                limits[-1] = cols[1][i]
            hv = HistogramValue(cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], limits, bucket)
            out.append(HistogramEvent(w, s, hv))
        return out

    def CompressedHistograms(self, tag: str) -> list[CompressedHistogramEvent]:
        bps = self._compression_bps
        return [
            CompressedHistogramEvent(e.wall_time, e.step, _compress_histogram(e.histogram_value, bps))
            for e in self.Histograms(tag)
        ]

    def Images(self, tag: str) -> list[ImageEvent]:
        """Every legacy ``Summary.Image`` of ``tag``, bytes read from the files now."""
        run = self._require()
        t = run.table("images")
        idx = run.bucket_rows(tag, "images", _IMAGE)
        data = _blobs(run, t, idx)
        w, h = t.column("width", idx).tolist(), t.column("height", idx).tolist()
        return list(map(ImageEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), data, w, h))

    def Audio(self, tag: str) -> list[AudioEvent]:
        """Every legacy ``Summary.Audio`` of ``tag``, bytes read from the files now."""
        run = self._require()
        t = run.table("audio")
        idx = run.bucket_rows(tag, "audio", _AUDIO)
        data = _blobs(run, t, idx)
        ct = [str(c) for c in t.column("content_type", idx).tolist()]
        sr = t.column("sample_rate", idx).tolist()
        lf = t.column("length_frames", idx).tolist()
        return list(map(AudioEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), data, ct, sr, lf))

    def Tensors(self, tag: str) -> list[TensorEvent]:
        """Every tensor value of ``tag``, with the ``TensorProto`` exactly as written."""
        run = self._require()
        rec = run.records(tag)
        probes = run.probes(tag)
        keep = [(rel, which) for rel, which in rec.per_file() if probes.get(rel, _NO_PROBE).field == _TENSOR]
        if not keep:
            raise KeyError(f"Key {tag} was not found in Reservoir")
        tb = _tb("Tensors()")
        parse = tb.event_pb2.Event.FromString
        out = []
        with _Files() as files:
            for rel, which in keep:
                for data in files.records(run.path(rel), rec.offsets[which].tolist()):
                    ev = parse(data)
                    for v in ev.summary.value:
                        if (v.tag or v.node_name) == tag and v.HasField("tensor"):
                            out.append(TensorEvent(ev.wall_time, ev.step, v.tensor))
        return out

    def RunMetadata(self, tag: str) -> Any:
        run = self._run
        rows = run.blob_rows(tag, _EV_RUN_METADATA) if run is not None else []
        if run is None or not rows:
            raise ValueError("There is no run metadata with this tag name")
        return _tb("RunMetadata()").config_pb2.RunMetadata.FromString(run.read_blob(rows[-1]))

    @property
    def summary_metadata(self) -> dict[str, Any]:
        """tag -> first ``SummaryMetadata`` (TensorBoard's public attribute of the same name)."""
        run = self._run
        out: dict[str, Any] = {}
        for tag in run.tags_in_order() if run is not None else []:
            md = run.first_metadata(tag) if run is not None else None
            if md is not None:
                out[tag] = _tb("summary_metadata").summary_pb2.SummaryMetadata.FromString(md)
        return out

    def SummaryMetadata(self, tag: str) -> Any:
        """The first ``SummaryMetadata`` written for ``tag``, as on disk (no migration)."""
        run = self._run
        md = run.first_metadata(tag) if run is not None and tag in run.kinds else None
        if md is None:
            raise KeyError(tag)
        return _tb("SummaryMetadata()").summary_pb2.SummaryMetadata.FromString(md)

    def _plugin_contents(self) -> dict[str, dict[str, bytes]]:
        out: dict[str, dict[str, bytes]] = {}
        run = self._run
        if run is None:
            return out
        for tag in run.tags_in_order():
            md = run.first_metadata(tag)
            if md is not None:
                name, content = _plugin_of(md)
                if name:
                    out.setdefault(name, {})[tag] = content
        return out

    def PluginTagToContent(self, plugin_name: str) -> dict[str, bytes]:
        contents = self._plugin_contents()
        if plugin_name not in contents:
            raise KeyError(f"Plugin {plugin_name!r} could not be found.")
        return contents[plugin_name]

    def ActivePlugins(self) -> frozenset[str]:
        return frozenset(self._plugin_contents())


class PluginEventAccumulator(_Accumulator):
    """TensorBoard's ``plugin_event_accumulator.EventAccumulator`` (what TensorBoard's own plugins
    read), answered by tbscope.

    Every series is a tensor series: ``Tags()`` is ``{tensors, graph, meta_graph, run_metadata}``
    and ``Tensors(tag)`` returns ``TensorEvent``s whose protos went through TensorBoard's
    ``data_compat`` and ``dataclass_compat`` migration, exactly as TensorBoard would build them
    (legacy scalars become float32 tensors, legacy histograms ``[k, 3]`` float32 buckets, images
    ``[w, h, png]`` strings, graphs a ``__run_graph__`` series ...). ``SummaryMetadata`` is the
    migrated metadata. As in TensorBoard, ``RunMetadata`` always raises: migration turns tagged
    run metadata into tensor series. Requires ``tensorboard`` for the protos.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        size_guidance: Mapping[str, int] | None = None,
        tensor_size_guidance: Mapping[str, int] | None = None,
        purge_orphaned_data: bool = True,
        event_file_active_filter: Any = None,
        detect_file_replacement: bool | None = None,
    ) -> None:
        super().__init__(path, purge_orphaned_data)
        self.size_guidance = _check_size_guidance(size_guidance)
        self.tensor_size_guidance = _check_size_guidance(tensor_size_guidance)
        self._metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<tbscope.compat.PluginEventAccumulator {self.path!r}>"

    def Reload(self) -> Any:
        self._metadata = None
        return super().Reload()

    def _tensor_tags(self) -> list[str]:
        run = self._run
        if run is None:
            return []
        out = []
        for tag in run.tags_in_order():
            fields = run.fields(tag)
            if (
                fields & {_SIMPLE, _IMAGE, _HISTO, _AUDIO, _TENSOR, _EV_GRAPH, _EV_RUN_METADATA}
                or (0 in fields and run.kinds.get(tag) == "hparams")  # migration adds a null tensor
            ):
                out.append(tag)
        return out

    def Tags(self) -> dict[str, Any]:
        run = self._run
        has_meta = self._has_meta_graph()
        return {
            TENSORS: self._tensor_tags(),
            GRAPH: has_meta or (run is not None and bool(run.blob_rows(_RUN_GRAPH_TAG, _EV_GRAPH))),
            META_GRAPH: has_meta,
            RUN_METADATA: [],
        }

    def _migrated(self, tag: str, firsts_only: bool, files: Sequence[str] | None = None) -> Iterator[tuple[float, int, Any]]:
        """(wall_time, step, migrated Summary.Value) of ``tag``'s records, file by file (migration
        remembers each tag's first metadata per file, as TensorBoard's loaders do)."""
        run = self._run
        if run is None:
            return
        tb = _tb("PluginEventAccumulator")
        parse = tb.event_pb2.Event.FromString
        rec = run.records(tag)
        with _Files() as fs:
            for rel, which in rec.per_file():
                if files is not None and rel not in files:
                    continue
                initial: dict[str, Any] = {}
                for data in fs.records(run.path(rel), rec.offsets[which[:1] if firsts_only else which].tolist()):
                    ev = tb.data_compat.migrate_event(parse(data))
                    for e in tb.dataclass_compat.migrate_event(ev, initial):
                        if e.HasField("summary"):
                            for v in e.summary.value:
                                if (v.tag or v.node_name) == tag:
                                    yield e.wall_time, e.step, v

    def _simple_value_tensors(self, tag: str, rel: str) -> list[TensorEvent] | None:
        """The migrated tensors of a ``simple_value`` series in one file, built from tbscope's
        columns: migration makes each value ``make_tensor_proto(value)``, a rank-0 DT_FLOAT in
        ``float_val``, which is rebuilt here without reading the records (20x faster than
        migrating them). None when a wall time is not finite (only the record has it exactly)."""
        run = self._run
        if run is None:
            return None
        t = run.table("scalars")
        idx = run.rows(tag)
        idx = idx[t.file_codes[idx] == t.files.index(rel)] if rel in t.files else idx[:0]
        walls = t.walls[idx]
        if np.isnan(walls).any():
            return None
        tb = _tb("PluginEventAccumulator")
        proto, shape = tb.tensor_pb2.TensorProto, tb.tensor_shape_pb2.TensorShapeProto()
        values = t.column("value", idx).astype(np.float32).tolist()
        return [
            TensorEvent(w, s, proto(dtype=1, tensor_shape=shape, float_val=[v]))
            for w, s, v in zip(walls.tolist(), t.steps[idx].tolist(), values)
        ]

    def Tensors(self, tag: str) -> list[TensorEvent]:
        """Every tensor of ``tag`` after TensorBoard's migration, in file order."""
        run = self._run
        out: list[TensorEvent] = []
        if run is not None:
            probes = run.probes(tag) if run.kinds.get(tag) == "scalars" else {}
            for rel, _ in run.records(tag).per_file():
                fast = self._simple_value_tensors(tag, rel) if probes.get(rel, _NO_PROBE).field == _SIMPLE else None
                if fast is not None:
                    out.extend(fast)
                else:
                    out.extend(TensorEvent(w, s, v.tensor) for w, s, v in self._migrated(tag, False, [rel]) if v.HasField("tensor"))
        if not out:
            raise KeyError(tag)
        return out

    def AllSummaryMetadata(self) -> dict[str, Any]:
        """tag -> first (migrated) ``SummaryMetadata``."""
        if self._metadata is None:
            md: dict[str, Any] = {}
            run = self._run
            for tag in run.tags_in_order() if run is not None else []:
                for _, _, v in self._migrated(tag, True):
                    if v.HasField("metadata"):
                        md[tag] = v.metadata
                        break
            self._metadata = md
        return dict(self._metadata)

    @property
    def summary_metadata(self) -> dict[str, Any]:
        return self.AllSummaryMetadata()

    def SummaryMetadata(self, tag: str) -> Any:
        return self.AllSummaryMetadata()[tag]

    def PluginTagToContent(self, plugin_name: str) -> dict[str, bytes]:
        metadata = self.AllSummaryMetadata().items()
        out = {t: m.plugin_data.content for t, m in metadata if m.plugin_data.plugin_name == plugin_name}
        if not out:
            raise KeyError(f"Plugin {plugin_name!r} could not be found.")
        return out

    def ActivePlugins(self) -> frozenset[str]:
        return frozenset(m.plugin_data.plugin_name for m in self.AllSummaryMetadata().values() if m.plugin_data.plugin_name)

    def RunMetadata(self, tag: str) -> Any:
        raise ValueError("There is no run metadata with this tag name")


# --------------------------------------------------------------------------------------------
# tbparse
# --------------------------------------------------------------------------------------------

HPARAMS = "hparams"
TEXT = "text"
ALL_EVENT_TYPES = frozenset((SCALARS, TENSORS, HISTOGRAMS, IMAGES, AUDIO, HPARAMS, TEXT))
ALL_EXTRA_COLUMNS = frozenset(
    ("dir_name", "file_name", "wall_time", "min", "max", "num", "sum", "sum_squares",
     "width", "height", "content_type", "length_frames", "sample_rate")
)
_TYPE_ORDER = (IMAGES, AUDIO, HISTOGRAMS, SCALARS, TENSORS, HPARAMS, TEXT)
_SSI_TAG = "_hparams_/session_start_info"
_TEXT_SUFFIX = "/text_summary"
_HIST_FIELDS = ("counts", "limits", "max", "min", "num", "sum", "sum_squares")


def _split_key(rel: str) -> tuple[str, ...]:
    """Sort key giving tbparse's file order: a depth-first walk over ``sorted(os.listdir())``."""
    return tuple(rel.split("/"))


def _ranks(strings: Sequence[str], key: Any = None) -> np.ndarray[Any, Any]:
    """Rank of each string in sorted order (equal strings share a rank)."""
    uniq = sorted(set(strings), key=key)
    pos = {s: i for i, s in enumerate(uniq)}
    return np.array([pos[s] for s in strings], dtype=np.int64)


@dataclasses.dataclass
class _Long:
    """Rows of one tbparse event type before sorting: per-row arrays plus output fields.

    ``files``/``tags`` are the distinct strings, ``file_codes``/``tag_codes`` index them;
    ``offset``/``row`` give record order within a file.
    """

    files: list[str]
    file_codes: np.ndarray[Any, Any]
    tags: list[str]
    tag_codes: np.ndarray[Any, Any]
    offset: np.ndarray[Any, Any]
    row: np.ndarray[Any, Any]
    step: np.ndarray[Any, Any] | None
    wall: np.ndarray[Any, Any]
    fields: dict[str, Any]
    #: names shown in DataFrames when they differ from ``tags`` (tbparse renames text tags in
    #: its DataFrames but not in ``tags``)
    labels: list[str] | None = None
    #: rows of each file are contiguous and in record order (true for one table's rows)
    ordered: bool = True

    def __len__(self) -> int:
        return len(self.offset)

    def shown(self) -> list[str]:
        return self.tags if self.labels is None else self.labels


def _concat_long(parts: list[_Long]) -> _Long:
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
        return parts[0]
    files = sorted({f for p in parts for f in p.files})
    tags = sorted({t for p in parts for t in p.tags})
    fpos = {f: i for i, f in enumerate(files)}
    tpos = {t: i for i, t in enumerate(tags)}

    def remap(codes: np.ndarray[Any, Any], names: list[str], pos: dict[str, int]) -> np.ndarray[Any, Any]:
        table = np.array([pos[n] for n in names], dtype=np.int64)
        return table[codes] if len(codes) else codes.astype(np.int64)

    names = list(parts[0].fields) if parts else []
    fields: dict[str, Any] = {}
    for n in names:
        vals = [p.fields[n] for p in parts]
        if all(isinstance(v, np.ndarray) and v.dtype != object for v in vals) and len({v.dtype for v in vals}) == 1:
            fields[n] = np.concatenate(vals)
        else:
            # Python scalars, as tbparse's per-row lists hold them
            objs = [v if isinstance(v, np.ndarray) and v.dtype == object else _objects(np.asarray(v).tolist()) for v in vals]
            fields[n] = np.concatenate(objs)
    steps = [p.step for p in parts]
    merged = _Long(
        files,
        np.concatenate([remap(p.file_codes, p.files, fpos) for p in parts]) if parts else _EMPTY_IDX,
        tags,
        np.concatenate([remap(p.tag_codes, p.tags, tpos) for p in parts]) if parts else _EMPTY_IDX,
        np.concatenate([p.offset for p in parts]) if parts else _EMPTY_IDX,
        np.concatenate([p.row for p in parts]) if parts else _EMPTY_IDX,
        None if any(s is None for s in steps) else np.concatenate([s for s in steps if s is not None]),
        np.concatenate([p.wall for p in parts]) if parts else np.zeros(0),
        fields,
    )
    merged.ordered = False
    return merged


def _file_ranks(long: _Long) -> np.ndarray[Any, Any]:
    """Per row, the rank of its file in tbparse's depth-first order."""
    if not long.files:
        return np.zeros(len(long), dtype=np.int64)
    ranks: np.ndarray[Any, Any] = _ranks(long.files, key=_split_key)[long.file_codes]
    return ranks


def _pre_order(long: _Long) -> np.ndarray[Any, Any]:
    """Row indices in tbparse's concatenation order: files depth-first, then record order."""
    frank = _file_ranks(long)
    if long.ordered:
        small = frank.astype(np.uint16) if len(long.files) < 1 << 16 else frank
        pre: np.ndarray[Any, Any] = np.argsort(small, kind="stable")  # radix sort for small ints
        return pre
    return np.lexsort((long.row, long.offset, frank))


def _sort_rows(long: _Long, keys: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Row indices sorted by ``keys`` (most significant first), ties in concatenation order.

    The keys are folded into one int64 when their ranges allow (the usual case), so one stable
    argsort replaces a lexsort over every key.
    """
    pre = _pre_order(long)
    if not keys or not len(pre):
        return pre
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows)]
    total = 1
    for sp in spans:
        total *= sp
    if total < 1 << 62:
        comp = np.zeros(len(pre), dtype=np.int64)
        for k, lo, sp in zip(keys, lows, spans):
            comp = comp * sp + (k[pre] - lo)
        return pre[np.argsort(comp, kind="stable")]
    rank = np.empty(len(pre), dtype=np.int64)
    rank[pre] = np.arange(len(pre))
    return np.lexsort([rank] + keys[::-1])


def _pairs(long: _Long) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(pair code per row, first row of each pair, pairs in order of first appearance) for the
    (file, tag) pairs: the order of a tag within its file, then files depth-first."""
    import pandas as pd

    key = long.file_codes * (len(long.tags) + 1) + long.tag_codes
    codes = pd.factorize(key)[0].astype(np.int64)
    # Codes number pairs in order of first appearance, and a pair's rows come from one table in
    # record order, so its first row is where the running maximum of the codes first reaches it.
    running = np.maximum.accumulate(codes)
    firsts = np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))
    frank = _file_ranks(long)
    order = np.lexsort((long.row[firsts], long.offset[firsts], frank[firsts]))
    return codes, firsts, order


def _objects(items: Sequence[Any]) -> np.ndarray[Any, Any]:
    """A 1-D object array holding ``items`` as they are (``np.array`` would stack equal-shape
    arrays into one 2-D array)."""
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out


def _from_table(t: _Table, mask: np.ndarray[Any, Any] | None, fields: dict[str, Any]) -> _Long:
    """Rows of ``t`` selected by ``mask`` (boolean or indices); ``fields`` already selected."""
    sel: Any = slice(None) if mask is None else mask
    return _Long(
        t.files,
        t.file_codes[sel],
        t.tags,
        t.tag_codes[sel],
        t.offsets[sel],
        np.arange(t.n, dtype=np.int64)[sel],
        t.steps[sel],
        t.walls[sel],
        fields,
    )


def _empty_long(fields: Sequence[str], with_step: bool = True) -> _Long:
    z = np.zeros(0, dtype=np.int64)
    return _Long([], z, [], z, z, z, z if with_step else None, np.zeros(0), {f: np.zeros(0) for f in fields})


def _is_null(x: Any) -> bool:
    """tbparse's ``_merge_values`` skips numpy scalars that pandas calls null: NaN, in practice
    (``None`` is not a numpy scalar, so it is kept)."""
    if isinstance(x, (float, np.floating)):
        return bool(x != x)
    return False


def _merge(g: np.ndarray[Any, Any], vals: Any, n_groups: int) -> Any:
    """One wide column: per group, the non-null values (rows already sorted by group): none ->
    NaN, one -> the value, several -> a list (tbparse's ``_merge_values``)."""
    import pandas as pd

    numeric = isinstance(vals, np.ndarray) and vals.dtype.kind == "f"
    valid = ~np.isnan(vals) if numeric else np.array([not _is_null(x) for x in vals], dtype=bool)
    gv = g[valid]
    vv = vals[valid] if isinstance(vals, np.ndarray) else np.asarray(vals, dtype=object)[valid]
    counts = np.bincount(gv, minlength=n_groups) if len(gv) else np.zeros(n_groups, dtype=np.int64)
    if numeric and (not len(counts) or counts.max() <= 1):
        out = np.full(n_groups, np.nan)
        out[gv] = vv
        return out
    cells = np.empty(n_groups, dtype=object)
    cells[:] = np.nan
    single = counts[gv] == 1
    if single.any():
        cells[gv[single]] = vv[single] if not numeric else vv[single].astype(object)
    multi = ~single
    if multi.any():
        gm, vm = gv[multi], vv[multi]
        starts = np.flatnonzero(np.concatenate([[True], gm[1:] != gm[:-1]]))
        ends = np.append(starts[1:], len(gm))
        values = vm.tolist()  # one conversion; slicing a list is cheap, slicing numpy is not
        for a, b, where in zip(starts.tolist(), ends.tolist(), gm[starts].tolist()):
            cells[where] = values[a:b]
        return pd.Series(cells, dtype=object)
    return cells.tolist()


_STR_DTYPE: list[Any] = []


def _str_column(names: Sequence[str], codes: np.ndarray[Any, Any]) -> Any:
    """``names[codes]`` as the column type pandas gives a list of Python strings (``str`` in
    pandas 3, ``object`` before), built in Arrow when pandas stores strings in Arrow: creating
    a million Python strings only for pandas to copy them into Arrow costs ~1 s per column."""
    import pandas as pd

    if not _STR_DTYPE:
        _STR_DTYPE.append(pd.Series(["x"]).dtype)
    dtype = _STR_DTYPE[0]
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        import pyarrow as pa

        taken = pa.array(list(names), type=pa.large_string()).take(pa.array(codes, type=pa.int64()))
        return pd.array(taken, dtype=dtype)
    return np.asarray(list(names), dtype=object)[codes] if len(names) else np.empty(len(codes), dtype=object)


def _decode_image(data: bytes) -> np.ndarray[Any, Any]:
    """An encoded image as ``uint8 [height, width, channels]`` (4-D for animated GIF), as
    ``tf.image.decode_image`` returns it, decoded with Pillow instead of TensorFlow."""
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("SummaryReader.images decodes images with Pillow: pip install pillow") from e
    with Image.open(io.BytesIO(data)) as im:
        frames = []
        for i in range(getattr(im, "n_frames", 1)):
            im.seek(i)
            frame: Image.Image = im
            if im.mode.startswith("I;16"):
                # 16-bit grey: TensorFlow scales to 8 bits (keeps the high byte); PIL would clip
                arr = (np.asarray(im).astype(np.uint16) >> 8).astype(np.uint8)
                frames.append(arr[:, :, None])
                continue
            if im.format == "GIF" or im.mode == "P":
                frame = im.convert("RGBA" if ("transparency" in im.info and im.format != "GIF") else "RGB")
            elif im.mode in ("1", "I", "F"):
                frame = im.convert("L")
            elif im.mode not in ("L", "LA", "RGB", "RGBA"):
                frame = im.convert("RGB")
            arr = np.asarray(frame, dtype=np.uint8)
            frames.append(arr[:, :, None] if arr.ndim == 2 else arr)
        return np.stack(frames) if im.format == "GIF" else frames[0]


def _decode_wav(data: bytes) -> np.ndarray[Any, Any]:
    """PCM WAV as ``float32 [frames, channels]`` in [-1, 1), as ``tf.audio.decode_wav`` returns it."""
    import wave

    with wave.open(io.BytesIO(data)) as w:
        nch, width = w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width == 1:
        x = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v) / float(1 << 23)).astype(np.float32)
    else:
        x = (np.frombuffer(raw, dtype="<i4").astype(np.float64) / 2.0**31).astype(np.float32)
    return x.reshape(-1, nch)


def _hparams_items(content: bytes) -> list[tuple[str, Any]]:
    """(name, value) of a session-start-info plugin content, in the order tbparse lists them.

    With TensorBoard installed this is its proto's map order and values (what tbparse returns);
    without it, wire order and plain Python values.
    """
    try:
        from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    except ImportError:
        HParamsPluginData = None
    if HParamsPluginData is not None:
        ssi = HParamsPluginData.FromString(content).session_start_info
        return [(k, ssi.hparams[k].ListFields()[0][1]) for k in ssi.hparams.keys() if ssi.hparams[k].ListFields()]
    out: list[tuple[str, Any]] = []
    for f, _, _, b in _walk(content):
        if f != 3:
            continue
        for g, _, _, entry in _walk(b):
            if g != 1:
                continue
            key, val = "", b""
            for h, _, _, hb in _walk(entry):
                if h == 1:
                    key = hb.decode("utf-8", "replace")
                elif h == 2:
                    val = hb
            for k, _, kv, kb in _walk(val):
                if k == 1:
                    out.append((key, kv))
                elif k == 2:
                    out.append((key, struct.unpack("<d", kb)[0]))
                elif k == 3:
                    out.append((key, kb.decode("utf-8", "replace")))
                elif k == 4:
                    out.append((key, bool(kv)))
    return out


class _Tree:
    """Everything under one tbparse ``log_path``, scanned once; per-type long tables on demand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.logdir = scan(path, provenance=True)
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self._tables: dict[str, _Table] = {}
        self._probes: dict[tuple[str, str], _Probe] = {}
        self._long: dict[str, _Long] = {}

    def table(self, kind: str) -> _Table:
        t = self._tables.get(kind)
        if t is None:
            t = self._tables[kind] = _Table(getattr(self.logdir, _KIND_METHOD[kind])().to_arrow())
        return t

    def row_probes(self, t: _Table) -> tuple[list[_Probe], np.ndarray[Any, Any]]:
        """The distinct probes of ``t``'s (tag, file) pairs and, per row, the index of its pair's.

        A pair's probe reads its first record. Pairs are found in O(rows) with a hash
        factorisation: codes come out in order of first appearance, so a pair's first row is
        where the running maximum of the codes first reaches it.
        """
        import pandas as pd

        if not t.n:
            return [], _EMPTY_IDX
        key = t.tag_codes * (len(t.files) + 1) + t.file_codes
        codes, _ = pd.factorize(key)
        running = np.maximum.accumulate(codes)
        first = np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))
        probes = []
        with _Files() as files:
            for i in first.tolist():
                rel, tag = t.files[t.file_codes[i]], t.tags[t.tag_codes[i]]
                p = self._probes.get((rel, tag))
                if p is None:
                    data = files.record(os.path.join(self.dir, rel), int(t.offsets[i]))
                    p = self._probes[(rel, tag)] = _probe_event(data, tag)
                probes.append(p)
        return probes, codes.astype(np.int64)

    def row_fields(self, t: _Table) -> np.ndarray[Any, Any]:
        probes, which = self.row_probes(t)
        return np.array([p.field for p in probes], dtype=np.int64)[which] if probes else _EMPTY_IDX

    def long(self, event_type: str, extra: frozenset[str]) -> _Long:
        key = event_type + ("+" + ",".join(sorted(extra)) if event_type in (HISTOGRAMS, IMAGES, AUDIO) else "")
        got = self._long.get(key)
        if got is None:
            got = self._long[key] = getattr(self, "_" + event_type)(extra)
        return got

    def _scalars(self, extra: frozenset[str]) -> _Long:
        t = self.table("scalars")
        m = self.row_fields(t) == _SIMPLE
        return _from_table(t, m, {"value": t.column("value")[m] if t.n else np.zeros(0)})

    def _tensors(self, extra: frozenset[str]) -> _Long:
        parts = []
        # TF2-style scalars: rank-0 tensors that tbscope keeps as float64; back to their dtype.
        t = self.table("scalars")
        probes, which = self.row_probes(t)
        m = np.array([p.field == _TENSOR for p in probes], dtype=bool)[which] if probes else np.zeros(0, dtype=bool)
        if m.any():
            vals = t.column("value")[m]
            dts = np.array([p.dtype for p in probes], dtype=np.int64)[which[m]]
            if np.isin(dts, list(_INT_DTYPES | {_DT_BOOL})).any():
                obj = np.empty(len(vals), dtype=object)
                obj[:] = vals.tolist()
                isint = np.isin(dts, list(_INT_DTYPES))
                if isint.any():
                    obj[isint] = [int(v) for v in vals[isint].tolist()]
                isbool = dts == _DT_BOOL
                if isbool.any():
                    obj[isbool] = [bool(v) for v in vals[isbool].tolist()]
                value: Any = obj
            else:
                value = vals
            parts.append(_from_table(t, m, {"value": value}))
        # Tensors proper, decoded from tbscope's columns.
        t = self.table("tensors")
        if t.n:
            m = self.row_fields(t) == _TENSOR
            idx = np.flatnonzero(m)
            cols = [t.column(c, idx).tolist() for c in ("dtype", "shape", "content", "strings")]
            out = np.empty(len(idx), dtype=object)
            for i, (dt, shape, content, strings) in enumerate(zip(*cols)):
                arr = to_ndarray(str(dt), tuple(shape), content, strings)
                out[i] = arr.item() if arr.shape == () else arr
            parts.append(_from_table(t, idx, {"value": out}))
        # Tensor-form histograms, images, audio and blob sequences: read from the records.
        for kind in ("histograms", "images", "audio", "blobs"):
            parts.append(self._reparsed(kind))
        return _concat_long(parts) if any(len(p) for p in parts) else _empty_long(["value"])

    def _reparsed(self, kind: str) -> _Long:
        t = self.table(kind)
        if not t.n:
            return _empty_long(["value"])
        fields = self.row_fields(t)
        idx = np.flatnonzero(fields == _TENSOR)
        if len(idx):
            fc, tc, off = t.file_codes[idx], t.tag_codes[idx], t.offsets[idx]
            first = np.ones(len(idx), dtype=bool)
            first[1:] = (fc[1:] != fc[:-1]) | (off[1:] != off[:-1]) | (tc[1:] != tc[:-1])
            idx = idx[first]
        if not len(idx):
            return _empty_long(["value"])
        tb = _tb(f"SummaryReader.tensors (tensor-form {kind})")
        parse = tb.event_pb2.Event.FromString
        rows: list[int] = []
        values: list[Any] = []
        with _Files() as files:
            for i in idx.tolist():
                tag = t.tags[t.tag_codes[i]]
                ev = parse(files.record(os.path.join(self.dir, t.files[t.file_codes[i]]), int(t.offsets[i])))
                for v in ev.summary.value:
                    if (v.tag or v.node_name) == tag and v.HasField("tensor"):
                        arr = tb.tensor_util.make_ndarray(v.tensor)
                        rows.append(i)
                        values.append(arr.item() if arr.shape == () else arr)
        return _from_table(t, np.asarray(rows, dtype=np.int64), {"value": _objects(values)})

    def _histograms(self, extra: frozenset[str]) -> _Long:
        t = self.table("histograms")
        if not t.n:
            return _empty_long(_HIST_FIELDS)
        idx = np.flatnonzero(self.row_fields(t) == _HISTO)
        fields: dict[str, Any] = {}
        fields["counts"] = _objects([np.asarray(a, dtype=np.float64) for a in t.column("count", idx)])
        # The proto's last limit is max (the reader keeps a last bucket from running backwards).
        limits = []
        for a, top in zip(t.column("right", idx), t.column("max", idx).tolist()):
            arr = np.array(a, dtype=np.float64)
            if len(arr):
                arr[-1] = top
            limits.append(arr)
        fields["limits"] = _objects(limits)
        for name in _HIST_FIELDS[2:]:
            if name in extra:
                fields[name] = t.column(name, idx).astype(np.float64)
        return _from_table(t, idx, fields)

    def _images(self, extra: frozenset[str]) -> _Long:
        t = self.table("images")
        if not t.n:
            return _empty_long(["value", "height", "width"])
        idx = np.flatnonzero(self.row_fields(t) == _IMAGE)
        data = _read_blobs(self.dir, _blob_locations(t, idx))
        fields: dict[str, Any] = {"value": _objects([_decode_image(d) for d in data])}
        for name in ("height", "width"):
            if name in extra:
                fields[name] = t.column(name, idx).astype(np.int64)
        return _from_table(t, idx, fields)

    def _audio(self, extra: frozenset[str]) -> _Long:
        t = self.table("audio")
        if not t.n:
            return _empty_long(["value", "content_type", "length_frames", "sample_rate"])
        idx = np.flatnonzero(self.row_fields(t) == _AUDIO)
        data = _read_blobs(self.dir, _blob_locations(t, idx))
        fields: dict[str, Any] = {"value": _objects([_decode_wav(d) for d in data])}
        if "content_type" in extra:
            fields["content_type"] = _objects([str(c) for c in t.column("content_type", idx).tolist()])
        if "length_frames" in extra:
            fields["length_frames"] = t.column("length_frames", idx).astype(np.int64)
        if "sample_rate" in extra:
            fields["sample_rate"] = t.column("sample_rate", idx).astype(np.float64)
        return _from_table(t, idx, fields)

    def _text(self, extra: frozenset[str]) -> _Long:
        t = self.table("text")
        if not t.n:
            return _empty_long(["value"])
        fc, tc, off = t.file_codes, t.tag_codes, t.offsets
        first = np.ones(t.n, dtype=bool)
        first[1:] = (fc[1:] != fc[:-1]) | (off[1:] != off[:-1]) | (tc[1:] != tc[:-1])
        starts = np.flatnonzero(first)
        ends = np.append(starts[1:], t.n)
        texts = t.column("text")
        out = np.empty(len(starts), dtype=object)
        single = (ends - starts) == 1
        out[single] = texts[starts[single]]
        for j in np.flatnonzero(~single).tolist():
            out[j] = np.array(texts[starts[j] : ends[j]].tolist(), dtype=object)
        long = _from_table(t, starts, {"value": out})
        long.labels = [tag[: -len(_TEXT_SUFFIX)] if tag.endswith(_TEXT_SUFFIX) else tag for tag in long.tags]
        return long

    def _hparams(self, extra: frozenset[str]) -> _Long:
        t = self.table("hparams")
        if not t.n:
            return _empty_long(["value"], with_step=False)
        ssi = [i for i, c in enumerate(t.tag_codes.tolist()) if t.tags[c] == _SSI_TAG]
        seen: set[int] = set()
        files: list[int] = []
        names: list[str] = []
        values: list[Any] = []
        order: list[int] = []
        contents = t.column("plugin_content", np.asarray(ssi, dtype=np.int64)).tolist() if ssi else []
        for i, content in zip(ssi, contents):
            fcode = int(t.file_codes[i])
            if fcode in seen:
                continue  # tbparse reads the first session start info of each file
            seen.add(fcode)
            for k, (name, value) in enumerate(_hparams_items(content or b"")):
                files.append(fcode)
                names.append(name)
                values.append(value)
                order.append(k)
        tags = sorted(set(names))
        tpos = {n: i for i, n in enumerate(tags)}
        vals = _objects(values)
        n = len(names)
        return _Long(
            t.files,
            np.asarray(files, dtype=np.int64),
            tags,
            np.asarray([tpos[x] for x in names], dtype=np.int64),
            np.asarray(order, dtype=np.int64),
            np.arange(n, dtype=np.int64),
            None,
            np.full(n, np.nan),
            {"value": vals},
        )


class SummaryReader:
    """tbparse's ``SummaryReader`` (0.0.9), answered by tbscope.

    Same constructor, properties and DataFrames: ``scalars``, ``tensors``, ``histograms``,
    ``images``, ``audio``, ``hparams``, ``text``, ``tags``, ``get_tags()``, ``get_events()``,
    ``children``; long format (``step, tag, value`` + ``extra_columns``) or ``pivot=True`` wide
    format, with tbparse's column names, order, dtypes, row order and merging of several values
    per step into lists. Like tbparse, ``scalars`` holds ``simple_value`` series only; scalars
    written as tensors (TF2, ``tf.summary``, TensorBoard's writers) are in ``tensors``.

    The whole tree is scanned once, natively, instead of once per file in Python; every event type
    is built with vectorised pandas/numpy from tbscope's tables, so scalars stay fast at millions
    of rows.

    Differences from tbparse, on purpose:

    * images and audio need no TensorFlow: images are decoded with Pillow, WAV with the standard
      library. ``event_types`` therefore defaults to all seven types. JPEG decoders may differ
      from TensorFlow's in the last bit of some pixels.
    * legacy histograms' last ``limits`` entry is ``max`` (see the module docstring).
    * multi-element text tensors, on which tbparse raises, give a 1-D array of their strings;
      zero-element ones (tbparse raises) are left out. bfloat16 and other dtypes tbparse cannot
      decode are decoded (bfloat16 as float32).
    * tensors in typed integer/bool fields (``int_val``, ``bool_val``, ...), on which tbparse's
      decoder raises, are decoded. TF2-style scalars come back as Python scalars of their dtype
      (float, int, bool) from tbscope's float64 column, so 64-bit integers beyond 2**53 are
      rounded (``EventAccumulator.Tensors`` keeps them exact).
    * no restart purging: tbparse's per-file accumulator drops legacy values that precede a
      ``SessionLog.START`` with a higher step *within one file*; tbscope keeps them.
    * wall times that are +-inf in a file are NaN.
    * in ``pivot=True`` output, several values of one tag at one step are listed in file and
      record order; tbparse's order there comes from an unstable sort.
    * hparams names of one file are listed in TensorBoard's protobuf map order, as tbparse lists
      them (that order is not stable across processes, for tbparse either); without TensorBoard
      installed, in the order they were written.
    """

    def __init__(
        self,
        log_path: str | os.PathLike[str],
        *,
        pivot: bool = False,
        extra_columns: set[str] | None = None,
        event_types: set[str] | None = None,
    ) -> None:
        self._log_path = os.fspath(log_path)
        extra = (extra_columns or set()).copy()
        if not isinstance(extra, set):
            raise ValueError(f"`columns` should be a {set} instead of {type(extra)}")
        diff = extra - ALL_EXTRA_COLUMNS
        if diff:
            raise KeyError(f"Invalid columns entries: {diff}")
        types = (event_types or set(ALL_EVENT_TYPES)).copy()
        if not isinstance(types, set):
            raise ValueError(f"`event_types` should be a {set} instead of {type(types)}")
        diff = types - ALL_EVENT_TYPES
        if diff:
            raise KeyError(f"Invalid event types: {diff}")
        self._pivot = pivot
        self._extra_columns = frozenset(extra)
        self._event_types = frozenset(types)
        if not os.path.exists(self._log_path):
            raise ValueError(f"File or directory not found: {self._log_path}")
        self._tree: _Tree | None = None
        self._children: dict[str, SummaryReader] | None = None

    def __repr__(self) -> str:
        return f"SummaryReader(log_path='{self.log_path}')"

    def __getitem__(self, child_idx: str) -> SummaryReader:
        return self.children[child_idx]

    @property
    def log_path(self) -> str:
        return self._log_path

    def _data(self) -> _Tree:
        if self._tree is None:
            self._tree = _Tree(self._log_path)
        return self._tree

    @property
    def children(self) -> dict[str, SummaryReader]:
        """One reader per directory entry (files and directories), as tbparse builds them."""
        if self._children is None:
            self._children = {}
            if os.path.isdir(self._log_path):
                for name in sorted(os.listdir(self._log_path)):
                    self._children[name] = SummaryReader(
                        os.path.join(self._log_path, name),
                        pivot=self._pivot,
                        extra_columns=set(self._extra_columns),
                        event_types=set(self._event_types),
                    )
        return dict(self._children)

    # ---- tags ---------------------------------------------------------------------------------

    @property
    def tags(self) -> dict[str, list[str]]:
        """``{event type: [tags]}`` in tbparse's order: files depth-first, first appearance."""
        out = self.get_tags()
        assert isinstance(out, dict)
        return out

    def get_tags(self, event_type: str | None = None) -> list[str] | dict[str, list[str]]:
        if event_type is not None and event_type not in ALL_EVENT_TYPES:
            raise ValueError(f"Unknown event_type: {event_type}")
        if event_type is not None:
            return self._tags_of(event_type)
        return {et: self._tags_of(et) for et in _TYPE_ORDER}

    def _tags_of(self, event_type: str) -> list[str]:
        if event_type not in self._event_types:
            return []
        long = self._data().long(event_type, self._extra_columns)
        if not len(long):
            return []
        _, firsts, pair_order = _pairs(long)
        seen: dict[str, None] = {}
        for i in firsts[pair_order].tolist():
            seen.setdefault(long.tags[long.tag_codes[i]], None)
        return list(seen)

    # ---- events -------------------------------------------------------------------------------

    def get_events(self, event_type: str) -> pd.DataFrame:
        """All ``event_type`` events under ``log_path`` as a DataFrame (tbparse's layout)."""
        import pandas as pd

        if event_type not in ALL_EVENT_TYPES:
            raise ValueError(f"Unknown event_type: {event_type}")
        if event_type not in self._event_types:
            raise ValueError(f"event_type is ignored by user: {event_type}")
        long = self._data().long(event_type, self._extra_columns)
        if not len(long):
            return pd.DataFrame()
        if event_type == HISTOGRAMS:
            fields = [f for f in _HIST_FIELDS if f in ("counts", "limits") or f in self._extra_columns]
            suffixes = fields
        elif event_type == IMAGES:
            fields = ["value"] + [f for f in ("height", "width") if f in self._extra_columns]
            suffixes = [""] + fields[1:]
        elif event_type == AUDIO:
            fields = ["value"] + [f for f in ("content_type", "length_frames", "sample_rate") if f in self._extra_columns]
            suffixes = [""] + fields[1:]
        else:
            fields, suffixes = ["value"], [""]
        if self._pivot:
            return self._wide(long, fields, suffixes, event_type != HPARAMS)
        return self._longform(long, fields, event_type != HPARAMS)

    def _file_columns(self, long: _Long) -> tuple[list[str], list[str]]:
        dirs = [os.path.dirname(f) for f in long.files]
        names = [os.path.basename(f) for f in long.files]
        return dirs, names

    def _longform(self, long: _Long, fields: list[str], wall: bool) -> pd.DataFrame:
        """tbparse's long format: sorted by [dir_name, file_name,] tag, step; ties in file
        (depth-first) and record order, as its stable multi-column sort leaves them."""
        import pandas as pd

        extra = self._extra_columns
        dirs, names = self._file_columns(long)
        keys: list[np.ndarray[Any, Any]] = []
        if "dir_name" in extra:
            keys.append(_ranks(dirs)[long.file_codes])
        if "file_name" in extra:
            keys.append(_ranks(names)[long.file_codes])
        keys.append(_ranks(long.shown())[long.tag_codes])
        if long.step is not None:
            keys.append(long.step)
        order = _sort_rows(long, keys)
        cols: dict[str, Any] = {}
        if long.step is not None:
            cols["step"] = long.step[order]
        cols["tag"] = _str_column(long.shown(), long.tag_codes[order])
        for f in fields:
            v = long.fields[f][order]
            cols[f] = v.tolist() if v.dtype == object else v
        if wall and "wall_time" in extra:
            cols["wall_time"] = long.wall[order]
        if "dir_name" in extra:
            cols["dir_name"] = _str_column(dirs, long.file_codes[order])
        if "file_name" in extra:
            cols["file_name"] = _str_column(names, long.file_codes[order])
        return pd.DataFrame(cols)

    def _wide(self, long: _Long, fields: list[str], suffixes: list[str], wall: bool) -> pd.DataFrame:
        """tbparse's wide format: one row per [dir_name, file_name,] step, one column per tag
        (or tag/field), several values of a cell merged into a list."""
        import pandas as pd

        extra = self._extra_columns
        dirs, names = self._file_columns(long)
        # tbparse concatenates files depth-first, each file tag by tag (first appearance), then
        # sorts by step: inside a step, rows keep (file, tag, record) order.
        pair_codes, _, pair_order = _pairs(long)
        pair_rank = np.empty(len(pair_order), dtype=np.int64)
        pair_rank[pair_order] = np.arange(len(pair_order))
        group_keys: list[np.ndarray[Any, Any]] = []
        if "dir_name" in extra:
            group_keys.append(_ranks(dirs)[long.file_codes])
        if "file_name" in extra:
            group_keys.append(_ranks(names)[long.file_codes])
        if long.step is not None:
            group_keys.append(long.step)
        order = _sort_rows(long, group_keys + [pair_rank[pair_codes]])
        n = len(order)
        if group_keys:
            change = np.zeros(n, dtype=bool)
            change[:1] = True
            for k in group_keys:
                ks = k[order]
                change[1:] |= ks[1:] != ks[:-1]
            g = np.cumsum(change) - 1
        else:
            change = np.zeros(n, dtype=bool)
            change[:1] = True
            g = np.zeros(n, dtype=np.int64)
        n_groups = int(g[-1]) + 1 if n else 0
        heads = order[change]
        cols: dict[str, Any] = {}
        if long.step is not None:
            cols["step"] = long.step[heads]
        # rows of each tag, still in group order (one stable sort, not a scan per tag)
        tag_sorted = long.tag_codes[order]
        by_tag = np.argsort(tag_sorted, kind="stable")
        bounds = np.flatnonzero(np.concatenate([[True], tag_sorted[by_tag][1:] != tag_sorted[by_tag][:-1], [True]]))
        sorted_fields = {f: long.fields[f][order] for f in fields}
        middle: dict[str, Any] = {}
        shown = long.shown()
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            sel = by_tag[a:b]
            tag = shown[tag_sorted[sel[0]]]
            for f, suffix in zip(fields, suffixes):
                middle[f"{tag}/{suffix}" if suffix else tag] = _merge(g[sel], sorted_fields[f][sel], n_groups)
        for name in sorted(middle):
            cols[name] = middle[name]
        if wall and "wall_time" in extra:
            cols["wall_time"] = _merge(g, long.wall[order], n_groups)
        if "dir_name" in extra:
            cols["dir_name"] = _str_column(dirs, long.file_codes[heads])
        if "file_name" in extra:
            cols["file_name"] = _str_column(names, long.file_codes[heads])
        return pd.DataFrame(cols)

    @property
    def scalars(self) -> pd.DataFrame:
        return self.get_events(SCALARS)

    @property
    def tensors(self) -> pd.DataFrame:
        return self.get_events(TENSORS)

    @property
    def histograms(self) -> pd.DataFrame:
        return self.get_events(HISTOGRAMS)

    @property
    def images(self) -> pd.DataFrame:
        return self.get_events(IMAGES)

    @property
    def audio(self) -> pd.DataFrame:
        return self.get_events(AUDIO)

    @property
    def hparams(self) -> pd.DataFrame:
        return self.get_events(HPARAMS)

    @property
    def text(self) -> pd.DataFrame:
        return self.get_events(TEXT)

    # ---- raw access (event files only), through the compat accumulator ------------------------

    def _raw_acc(self) -> EventAccumulator:
        if os.path.isdir(self._log_path):
            raise ValueError(f"Not an event file: {self._log_path}")
        acc = EventAccumulator(self._log_path, STORE_EVERYTHING_SIZE_GUIDANCE)
        acc.Reload()
        return acc

    @property
    def raw_tags(self) -> dict[str, Any]:
        out = self.get_raw_tags()
        assert isinstance(out, dict)
        return out

    def get_raw_tags(self, event_type: str | None = None, event_acc: EventAccumulator | None = None) -> Any:
        """The underlying accumulator's tags (event files only), plus ``hparams`` and ``text``."""
        valid = {None, IMAGES, AUDIO, HISTOGRAMS, SCALARS, TENSORS, GRAPH, META_GRAPH, RUN_METADATA, HPARAMS, TEXT}
        if event_type not in valid:
            raise ValueError(f"Unknown event_type: {event_type}")
        acc = event_acc if event_acc is not None else self._raw_acc()
        tags = acc.Tags()
        contents = acc._plugin_contents()
        for plugin in (HPARAMS, TEXT):
            tags[plugin] = list(contents.get(plugin, {}))
        return tags if event_type is None else tags[event_type]

    @property
    def raw_events(self) -> dict[str, Any]:
        out = self.get_raw_events()
        assert isinstance(out, dict)
        return out

    def get_raw_events(
        self, event_type: str | None = None, tag: str | None = None, event_acc: EventAccumulator | None = None
    ) -> Any:
        """The accumulator's events (event files only): ``{type: {tag: [events]}}``, one type's
        ``{tag: [events]}``, or one tag's list, as tbparse returns them."""
        acc = event_acc if event_acc is not None else self._raw_acc()
        if event_type is None:
            if tag is not None:
                raise ValueError("tag shouldn't be set if event_type is None")
            return {et: self.get_raw_events(et, None, acc) for et in _TYPE_ORDER}
        getters: dict[str, Any] = {
            SCALARS: acc.Scalars,
            TENSORS: acc.Tensors,
            HISTOGRAMS: acc.Histograms,
            IMAGES: acc.Images,
            AUDIO: acc.Audio,
            HPARAMS: lambda t: acc.PluginTagToContent(HPARAMS)[t],
            TEXT: acc.Tensors,
        }
        get = getters[event_type]
        if tag is not None:
            return get(tag)
        return {t: get(t) for t in self.get_raw_tags(event_type, acc)}

    # ---- tbparse's static helpers, delegated (pure functions of their arguments) ---------------

    @staticmethod
    def _tbparse() -> Any:
        try:
            from tbparse import SummaryReader as _TbparseReader
        except ImportError as e:
            raise ImportError("this helper is tbparse's own: pip install tbparse") from e
        return _TbparseReader

    @staticmethod
    def tensor_to_histogram(tensor: Any) -> dict[str, Any]:
        out: dict[str, Any] = SummaryReader._tbparse().tensor_to_histogram(tensor)
        return out

    @staticmethod
    def buckets_to_histogram_dict(lst: Any) -> dict[str, Any]:
        out: dict[str, Any] = SummaryReader._tbparse().buckets_to_histogram_dict(lst)
        return out

    @staticmethod
    def histogram_to_pdf(counts: Any, limits: Any, x: Any) -> Any:
        return SummaryReader._tbparse().histogram_to_pdf(counts, limits, x)

    @staticmethod
    def histogram_to_cdf(counts: Any, limits: Any, x: Any) -> Any:
        return SummaryReader._tbparse().histogram_to_cdf(counts, limits, x)

    @staticmethod
    def histogram_to_bins(
        counts: Any, limits: Any, lower_bound: float | None = None, upper_bound: float | None = None, n_bins: int = 30
    ) -> Any:
        return SummaryReader._tbparse().histogram_to_bins(counts, limits, lower_bound, upper_bound, n_bins)
