"""Expected tables for a logdir, computed with TensorBoard's own Python loaders.

Sources, per run directory:

* ``plugin_event_accumulator.EventAccumulator`` (what TensorBoard's Python server uses, with
  ``data_compat`` + ``dataclass_compat`` migration) with every size guidance 0 (= keep all) and
  ``purge_orphaned_data=False``: the record set, per-tag arrival order, step, wall_time, the first
  SummaryMetadata per tag (which decides the kind) and the migrated tensors.
* ``event_accumulator.EventAccumulator`` (the legacy one, ``STORE_EVERYTHING_SIZE_GUIDANCE``,
  no purge): the raw ``HistogramProto`` of legacy histograms (float64, untrimmed, with
  min/max/num/sum/sum_squares).
* ``event_file_loader.LegacyEventFileLoader`` (TensorBoard's raw event reader, no migration):
  the few fields migration throws away: ``Summary.Image.colorspace``,
  ``Summary.Audio.num_channels``/``sample_rate``/``length_frames``/``content_type`` and the audio
  labels (``dataclass_compat`` projects the ``[k, 2]`` audio tensor down to ``[k]``).

Where tbscope differs from TensorBoard *by design*, the oracle follows tbscope's documented
semantics and says so:

* legacy histograms: float64 edges, no trimming of empty end buckets; the outer edges are
  replaced by ``min``/``max`` as RustBoard does (``LEGACY_OUTER_EDGES``), except where that
  would make an empty end bucket run backwards (left > right): there the outer edge is clamped
  to the inner one. TensorBoard's Python
  view (trimmed, float32) is kept in ``tb_left``/``tb_right``/``tb_count`` for reference.
* wall times that are NaN or ±Inf become NaN (tbscope: null).
* ``bfloat16`` and ``uint32_val``/``uint64_val`` tensors, which TensorBoard's ``make_ndarray``
  cannot decode without TensorFlow, are decoded by ``_decode_fallback`` (column ``decoder``).

Run names: every directory holding a file whose name contains ``tfevents``
(``io_wrapper.GetLogdirSubdirectories``), relative to the logdir with ``/`` separators, ``.``
for the logdir itself.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

# TensorBoard logs a warning for every tag without a plugin, etc.; keep test output readable.
logging.getLogger("tensorboard").setLevel(logging.ERROR)

#: How legacy HistogramProto buckets become (left, right, count) rows.
#: "minmax" (RustBoard, tbscope): left = [min] + limit[:-1], right = limit[:-1] + [max].
#: "raw": lefts = [min] + limit[:-1], rights = limit (keeps the writer's last limit, often
#: DBL_MAX, as the right edge of the last bucket).
LEGACY_OUTER_EDGES = "minmax"

PLUGIN_KIND = {
    "scalars": "scalars",
    "histograms": "histograms",
    "images": "images",
    "audio": "audio",
    "text": "text",
    "hparams": "hparams",
    "graphs": "blobs",
    "graph_run_metadata": "blobs",
    "graph_run_metadata_graph": "blobs",
    "graph_keras_model": "blobs",
    "graph_tagged_run_metadata": "blobs",
}

#: tbscope extension: meta_graph_def events as a blob series (TensorBoard keeps only the latest).
META_GRAPH_TAG = "__meta_graph__"
META_GRAPH_PLUGIN = "meta_graph"

_AUDIO_MIME = {11: "audio/wav"}  # AudioPluginData.Encoding -> audio_plugin._MIME_TYPES
_DEFAULT_MIME = "application/octet-stream"

# DataType enum -> tbscope dtype name
_DTYPE_NAME = {
    1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
    8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16", 18: "complex128",
    19: "float16", 22: "uint32", 23: "uint64",
}


def kind_of(metadata) -> str:
    """Kind of a series from its first (migrated) SummaryMetadata (None: no metadata)."""
    if metadata is None:
        return "tensors"
    plugin = metadata.plugin_data.plugin_name
    if plugin in PLUGIN_KIND:
        return PLUGIN_KIND[plugin]
    return {1: "scalars", 3: "blobs"}.get(int(metadata.data_class), "tensors")


def _finite_or_nan(x: float) -> float:
    x = float(x)
    return x if np.isfinite(x) else float("nan")


# --------------------------------------------------------------------------------------------
# tensor decoding
# --------------------------------------------------------------------------------------------


def _decode_fallback(tp) -> np.ndarray:
    """Decode what TensorBoard's make_ndarray cannot (no TensorFlow): bfloat16 (as float32
    values), uint32_val / uint64_val typed fields. Same fill rule as make_ndarray."""
    shape = [d.size for d in tp.tensor_shape.dim]
    n = int(np.prod(shape, dtype=np.int64))
    if tp.dtype == 14:  # DT_BFLOAT16
        if tp.tensor_content:
            bits = np.frombuffer(tp.tensor_content, dtype="<u2")
        else:
            bits = np.array(list(tp.half_val), dtype=np.uint32).astype(np.uint16)
            if bits.size == 1:
                bits = np.repeat(bits, n)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if tp.dtype in (22, 23):
        dt = np.uint32 if tp.dtype == 22 else np.uint64
        vals = list(tp.uint32_val if tp.dtype == 22 else tp.uint64_val)
        arr = np.array(vals, dtype=dt)
        if arr.size == 1:
            arr = np.repeat(arr, n)
        return arr.reshape(shape)
    raise TypeError(f"no fallback decoder for dtype {tp.dtype}")


def decode_tensor(tp) -> tuple[np.ndarray, str]:
    """(array, decoder) with TensorBoard's make_ndarray, else the fallback."""
    from tensorboard.util import tensor_util

    if tp.dtype == 14:
        return _decode_fallback(tp), "fallback"
    try:
        return tensor_util.make_ndarray(tp), "make_ndarray"
    except TypeError:
        return _decode_fallback(tp), "fallback"


def dtype_name(tp) -> str:
    return _DTYPE_NAME.get(int(tp.dtype), f"DT_{int(tp.dtype)}")


def content_bytes(arr: np.ndarray, dtype: str) -> bytes | None:
    """Little-endian element bytes (tbscope's ``content`` column); None for strings."""
    if dtype == "string":
        return None
    if dtype == "bfloat16":
        f = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)
        return (f.view(np.uint32) >> 16).astype("<u2").tobytes()
    a = np.ascontiguousarray(arr).reshape(-1)
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------


def discover_runs(logdir) -> list[tuple[str, str]]:
    """[(run name, directory)] sorted by run name, found by TensorBoard's io_wrapper."""
    from tensorboard.backend.event_processing import io_wrapper

    logdir = os.path.abspath(str(logdir))
    out = []
    for d in io_wrapper.GetLogdirSubdirectories(logdir):
        rel = os.path.relpath(d, logdir)
        out.append((rel.replace(os.sep, "/"), d))
    return sorted(out)


def _event_files(run_dir: str) -> list[str]:
    from tensorboard.backend.event_processing import io_wrapper

    return sorted(
        os.path.join(run_dir, f)
        for f in os.listdir(run_dir)
        if io_wrapper.IsSummaryEventsFile(os.path.join(run_dir, f))
        and os.path.isfile(os.path.join(run_dir, f))
    )


@dataclass
class RunData:
    name: str
    path: str
    acc: Any
    # tag -> raw (unmigrated) Summary.Value objects that become a tensor, in arrival order
    raw: dict = field(default_factory=dict)
    # every Event.meta_graph_def as (step, wall_time, bytes), in file order
    meta_graphs: list = field(default_factory=list)
    # tag -> (step, wall_time) of values with no payload and no metadata, in file order
    empty: dict = field(default_factory=dict)

    @cached_property
    def legacy(self):
        from tensorboard.backend.event_processing import event_accumulator as ea

        acc = ea.EventAccumulator(self.path, size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE,
                                  purge_orphaned_data=False)
        acc.Reload()
        return acc

    def metadata(self, tag):
        try:
            return self.acc.SummaryMetadata(tag)
        except KeyError:
            return None

    def tags(self) -> list[str]:
        return list(self.acc.Tags()["tensors"])

    def events(self, tag):
        return list(self.acc.Tensors(tag))

    def raw_values(self, tag, n: int):
        raw = self.raw.get(tag, [])
        if len(raw) != n:
            raise AssertionError(
                f"oracle: run {self.name!r} tag {tag!r}: {n} accumulator events but "
                f"{len(raw)} raw values; cannot align")
        return raw


def _load_run(name: str, path: str) -> RunData:
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    guidance = {k: 0 for k in ("tensors", "scalars", "histograms", "images", "audio",
                               "compressedHistograms")}
    acc = pea.EventAccumulator(path, size_guidance=guidance, purge_orphaned_data=False)
    acc.Reload()
    rd = RunData(name=name, path=path, acc=acc)
    for f in _event_files(path):
        for ev in event_file_loader.LegacyEventFileLoader(f).Load():
            if ev.HasField("meta_graph_def"):
                rd.meta_graphs.append((ev.step, ev.wall_time, bytes(ev.meta_graph_def)))
            if not ev.HasField("summary"):
                continue
            for v in ev.summary.value:
                which = v.WhichOneof("value")
                if which is None and not v.HasField("metadata") and v.tag not in rd.acc.Tags()["tensors"]:
                    rd.empty.setdefault(v.tag, []).append((ev.step, ev.wall_time))
                if which not in ("tensor", "image", "audio", "histo", "simple_value"):
                    continue
                tag = v.tag or (v.node_name if which == "tensor" else v.tag)
                rd.raw.setdefault(tag, []).append(v)
    return rd


_CACHE: dict[str, "Oracle"] = {}


def load(logdir, cache: bool = True) -> "Oracle":
    key = os.path.abspath(str(logdir))
    if cache and key in _CACHE:
        return _CACHE[key]
    o = Oracle(key)
    if cache:
        _CACHE[key] = o
    return o


_BASE = ["run", "tag", "step", "wall_time"]


_NULLABLE_INT = {"colorspace": "Int32", "num_channels": "Int64", "length_frames": "Int64",
                 "index": "int32", "width": "int32", "height": "int32"}


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c, t in _NULLABLE_INT.items():
        if c in df.columns:
            df[c] = df[c].astype(t)
    df["step"] = df["step"].astype("int64")
    df["wall_time"] = df["wall_time"].astype("float64")
    df["timestamp"] = pd.to_datetime(df["wall_time"], unit="s", utc=True)
    return df


def _cached(method):
    """Compute a table once per Oracle (per argument tuple); hand out copies."""

    def wrapper(self, *args, **kwargs):
        key = (method.__name__, args, tuple(sorted(kwargs.items())))
        if key not in self._tables:
            self._tables[key] = method(self, *args, **kwargs)
        return self._tables[key].copy()

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class Oracle:
    """Expected tables for one logdir. Rows: runs sorted by name, tags in TensorBoard's order,
    and per (run, tag) the accumulator's arrival order (= file order, then record order)."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self.runs = [_load_run(n, p) for n, p in discover_runs(logdir)]
        self._tables: dict = {}

    # ---- per-series -------------------------------------------------------------------------
    def _series(self, kind: str):
        for rd in self.runs:
            for tag in rd.tags():
                md = rd.metadata(tag)
                if kind_of(md) == kind:
                    yield rd, tag, md, rd.events(tag)

    @_cached
    def series(self) -> pd.DataFrame:
        rows = []
        for rd in self.runs:
            for tag in rd.tags():
                md = rd.metadata(tag)
                evs = rd.events(tag)
                rows.append(dict(
                    run=rd.name, tag=tag, kind=kind_of(md),
                    plugin=md.plugin_data.plugin_name if md else "",
                    plugin_content=bytes(md.plugin_data.content) if md else b"",
                    data_class=int(md.data_class) if md else 0,
                    points=len(evs),
                    first_step=min(e.step for e in evs) if evs else None,
                    last_step=max(e.step for e in evs) if evs else None,
                ))
            for tag, pts in rd.empty.items():
                steps = [p[0] for p in pts]
                rows.append(dict(run=rd.name, tag=tag, kind="tensors", plugin="",
                                 plugin_content=b"", data_class=0, points=len(steps),
                                 first_step=min(steps), last_step=max(steps)))
            if rd.meta_graphs:
                steps = [m[0] for m in rd.meta_graphs]
                rows.append(dict(run=rd.name, tag=META_GRAPH_TAG, kind="blobs",
                                 plugin=META_GRAPH_PLUGIN, plugin_content=b"", data_class=3,
                                 points=len(steps), first_step=min(steps),
                                 last_step=max(steps)))
        return pd.DataFrame(rows, columns=["run", "tag", "kind", "plugin", "plugin_content",
                                           "data_class", "points", "first_step", "last_step"])

    # ---- scalars ----------------------------------------------------------------------------
    @_cached
    def scalars(self) -> pd.DataFrame:
        """value = make_ndarray(t).item() as float64 (TensorBoard's Python data provider);
        records whose tensor is not a single numeric element are left out (TB would raise)."""
        rows = []
        for rd, tag, md, evs in self._series("scalars"):
            for e in evs:
                arr, dec = decode_tensor(e.tensor_proto)
                if arr.size != 1 or arr.dtype.kind not in "biuf":
                    continue
                rows.append(dict(run=rd.name, tag=tag, step=e.step,
                                 wall_time=_finite_or_nan(e.wall_time),
                                 value=float(arr.reshape(-1)[0].item()),
                                 dtype=dtype_name(e.tensor_proto), decoder=dec))
        return _frame(rows, _BASE + ["value", "dtype", "decoder"])

    # ---- tensors ----------------------------------------------------------------------------
    @_cached
    def tensors(self, kinds=("tensors",)) -> pd.DataFrame:
        rows = []
        for kind in kinds:
            for rd, tag, md, evs in self._series(kind):
                plugin = md.plugin_data.plugin_name if md else ""
                for e in evs:
                    tp = e.tensor_proto
                    arr, dec = decode_tensor(tp)
                    dt = dtype_name(tp)
                    rows.append(dict(
                        run=rd.name, tag=tag, step=e.step, wall_time=_finite_or_nan(e.wall_time),
                        plugin=plugin, dtype=dt, shape=tuple(int(d.size) for d in
                                                             tp.tensor_shape.dim),
                        value=arr, content=content_bytes(arr, dt),
                        strings=[bytes(x) for x in arr.reshape(-1)] if dt == "string" else None,
                        decoder=dec, kind=kind))
        if "tensors" in kinds:
            # tbscope extension: a value with no payload and no metadata is a null tensor
            # (float32, shape [0]) as in TensorBoard's Rust loader; the Python loader drops it.
            for rd in self.runs:
                for tag, pts in rd.empty.items():
                    for step, wall in pts:
                        rows.append(dict(
                            run=rd.name, tag=tag, step=step, wall_time=_finite_or_nan(wall),
                            plugin="", dtype="float32", shape=(0,),
                            value=np.zeros(0, np.float32), content=b"", strings=None,
                            decoder="empty", kind="tensors"))
        return _frame(rows, _BASE + ["plugin", "dtype", "shape", "value", "content", "strings",
                                     "decoder", "kind"])

    # ---- histograms -------------------------------------------------------------------------
    @_cached
    def histograms(self) -> pd.DataFrame:
        rows = []
        nan = float("nan")
        for rd, tag, md, evs in self._series("histograms"):
            raw = rd.raw_values(tag, len(evs))
            legacy_iter = iter(rd.legacy.Histograms(tag)) if any(
                r.WhichOneof("value") == "histo" for r in raw) else iter(())
            for e, r in zip(evs, raw):
                tb = np.asarray(decode_tensor(e.tensor_proto)[0], dtype=np.float64)
                tb = tb if (tb.ndim == 2 and tb.shape[1] == 3) else np.zeros((0, 3))
                row = dict(run=rd.name, tag=tag, step=e.step,
                           wall_time=_finite_or_nan(e.wall_time),
                           tb_left=tb[:, 0], tb_right=tb[:, 1], tb_count=tb[:, 2])
                if r.WhichOneof("value") == "histo":
                    le = next(legacy_iter)
                    assert (le.step, le.wall_time) == (e.step, e.wall_time) or (
                        np.isnan(e.wall_time)), "oracle: legacy accumulator out of step"
                    h = le.histogram_value
                    limit = np.asarray(h.bucket_limit, dtype=np.float64)
                    count = np.asarray(h.bucket, dtype=np.float64)
                    k = len(count)
                    if len(limit) != k:
                        continue  # RustBoard: DataLoss
                    if k == 0:
                        left = right = np.zeros(0)
                    elif LEGACY_OUTER_EDGES == "minmax":
                        left = np.concatenate([[h.min], limit[: k - 1]])
                        right = np.concatenate([limit[: k - 1], [h.max]])
                        # tbscope: where RustBoard's outer edges would run backwards (an empty
                        # end bucket beyond min or max), the outer edge is clamped to the inner
                        # one, so that no bucket has left > right.
                        if k > 1 and right[-1] < limit[k - 2]:
                            right[-1] = limit[k - 2]
                        if left[0] > right[0]:
                            left[0] = right[0]
                    else:
                        left = np.concatenate([[h.min], limit[: k - 1]])
                        right = limit
                    row.update(left=left, right=right, count=count, min=h.min, max=h.max,
                               num=h.num, sum=h.sum, sum_squares=h.sum_squares, source="legacy")
                else:
                    arr, _ = decode_tensor(e.tensor_proto)
                    if not (arr.ndim == 2 and arr.shape[1] == 3) or arr.dtype.kind not in "fiu":
                        continue
                    arr = arr.astype(np.float64)
                    row.update(left=arr[:, 0].copy(), right=arr[:, 1].copy(),
                               count=arr[:, 2].copy(), min=nan, max=nan, num=nan, sum=nan,
                               sum_squares=nan, source="tensor")
                rows.append(row)
        return _frame(rows, _BASE + ["left", "right", "count", "min", "max", "num", "sum",
                                     "sum_squares", "source", "tb_left", "tb_right",
                                     "tb_count"])

    # ---- images -----------------------------------------------------------------------------
    @_cached
    def images(self) -> pd.DataFrame:
        from tensorboard.util import img_mime_type_detector

        rows = []
        for rd, tag, md, evs in self._series("images"):
            raw = rd.raw_values(tag, len(evs))
            for e, r in zip(evs, raw):
                arr, _ = decode_tensor(e.tensor_proto)
                flat = arr.reshape(-1)
                if flat.size < 2:
                    continue
                width, height = int(flat[0]), int(flat[1])
                cs = None
                if r.WhichOneof("value") == "image" and r.image.colorspace != 0:
                    cs = int(r.image.colorspace)
                for i, blob in enumerate(flat[2:]):
                    blob = bytes(blob)
                    rows.append(dict(run=rd.name, tag=tag, step=e.step,
                                     wall_time=_finite_or_nan(e.wall_time), index=i,
                                     width=width, height=height, colorspace=cs,
                                     content_type=img_mime_type_detector.from_bytes(blob),
                                     data=blob))
        return _frame(rows, _BASE + ["index", "width", "height", "colorspace", "content_type",
                                     "data"])

    # ---- audio ------------------------------------------------------------------------------
    @_cached
    def audio(self) -> pd.DataFrame:
        from tensorboard.plugins.audio import metadata as audio_metadata

        rows = []
        for rd, tag, md, evs in self._series("audio"):
            raw = rd.raw_values(tag, len(evs))
            try:
                enc = audio_metadata.parse_plugin_metadata(md.plugin_data.content).encoding
            except Exception:
                enc = 0
            for e, r in zip(evs, raw):
                base = dict(run=rd.name, tag=tag, step=e.step,
                            wall_time=_finite_or_nan(e.wall_time))
                migrated = decode_tensor(e.tensor_proto)[0].reshape(-1)
                if r.WhichOneof("value") == "audio":
                    a = r.audio
                    assert bytes(migrated[0]) == a.encoded_audio_string
                    rows.append(dict(base, index=0, sample_rate=float(a.sample_rate),
                                     num_channels=int(a.num_channels),
                                     length_frames=int(a.length_frames),
                                     content_type=a.content_type, label=None,
                                     data=bytes(a.encoded_audio_string), source="legacy"))
                    continue
                arr, _ = decode_tensor(r.tensor)
                if arr.ndim == 2:
                    clips, labels = arr[:, 0], arr[:, 1]
                else:
                    clips, labels = arr.reshape(-1), [None] * arr.size
                assert [bytes(x) for x in clips] == [bytes(x) for x in migrated], \
                    "oracle: raw audio clips differ from the accumulator's"
                for i, (clip, label) in enumerate(zip(clips, labels)):
                    rows.append(dict(base, index=i, sample_rate=float("nan"),
                                     num_channels=None, length_frames=None,
                                     content_type=_AUDIO_MIME.get(int(enc), _DEFAULT_MIME),
                                     label=None if label is None else bytes(label).decode(
                                         "utf-8", errors="replace"),
                                     data=bytes(clip), source="tensor"))
        return _frame(rows, _BASE + ["index", "sample_rate", "num_channels", "length_frames",
                                     "content_type", "label", "data", "source"])

    # ---- text -------------------------------------------------------------------------------
    @_cached
    def text(self) -> pd.DataFrame:
        """One row per element of the string tensor, row-major (fill rule applied). TensorBoard
        decodes with strict UTF-8 when rendering; ``strict_utf8`` says whether that works."""
        rows = []
        for rd, tag, md, evs in self._series("text"):
            for e in evs:
                arr, _ = decode_tensor(e.tensor_proto)
                for i, s in enumerate(arr.reshape(-1)):
                    s = bytes(s)
                    try:
                        txt, ok = s.decode("utf-8"), True
                    except UnicodeDecodeError:
                        txt, ok = s.decode("utf-8", errors="replace"), False
                    rows.append(dict(run=rd.name, tag=tag, step=e.step,
                                     wall_time=_finite_or_nan(e.wall_time), index=i, text=txt,
                                     shape=list(arr.shape), strict_utf8=ok))
        return _frame(rows, _BASE + ["index", "text", "shape", "strict_utf8"])

    # ---- blobs (graphs & co) ----------------------------------------------------------------
    @_cached
    def blobs(self) -> pd.DataFrame:
        """Blob-sequence series (graphs & co), one row per element.

        tbscope extension (not a series in TensorBoard): every ``Event.meta_graph_def`` becomes a
        record of series ``META_GRAPH_TAG`` with plugin ``META_GRAPH_PLUGIN``. TensorBoard only
        keeps the latest one (``EventAccumulator.MetaGraph()``); the raw events give all of them,
        and the last one is checked against the accumulator."""
        rows = []
        for rd, tag, md, evs in self._series("blobs"):
            plugin = md.plugin_data.plugin_name if md else ""
            for e in evs:
                arr, _ = decode_tensor(e.tensor_proto)
                for i, b in enumerate(arr.reshape(-1)):
                    rows.append(dict(run=rd.name, tag=tag, step=e.step,
                                     wall_time=_finite_or_nan(e.wall_time), plugin=plugin,
                                     index=i, data=bytes(b)))
        for rd in self.runs:
            if not rd.meta_graphs:
                continue
            from tensorboard.compat.proto import meta_graph_pb2

            assert meta_graph_pb2.MetaGraphDef.FromString(rd.meta_graphs[-1][2]) == \
                rd.acc.MetaGraph(), "oracle: last raw meta graph differs from the accumulator's"
            for step, wall, b in rd.meta_graphs:
                rows.append(dict(run=rd.name, tag=META_GRAPH_TAG, step=step,
                                 wall_time=_finite_or_nan(wall), plugin=META_GRAPH_PLUGIN,
                                 index=0, data=b))
        return _frame(rows, _BASE + ["plugin", "index", "data"])

    # ---- hparams (session start info per run) ------------------------------------------------
    def hparams(self) -> dict[str, dict[str, Any]]:
        """{run: {hparam: value}} from ``_hparams_/session_start_info`` (first metadata)."""
        from tensorboard.plugins.hparams import metadata as hp_metadata

        out = {}
        for rd in self.runs:
            content = rd.acc.PluginTagToContent("hparams") if "hparams" in \
                rd.acc.ActivePlugins() else {}
            c = content.get(hp_metadata.SESSION_START_INFO_TAG)
            if c is None:
                continue
            ssi = hp_metadata.parse_session_start_info_plugin_data(c)
            vals = {}
            for k, v in ssi.hparams.items():
                which = v.WhichOneof("kind")
                vals[k] = getattr(v, which) if which else None
            out[rd.name] = vals
        return out


# --------------------------------------------------------------------------------------------
# module-level shortcuts
# --------------------------------------------------------------------------------------------


def scalars(logdir) -> pd.DataFrame:
    return load(logdir).scalars()


def tensors(logdir) -> pd.DataFrame:
    return load(logdir).tensors()


def histograms(logdir) -> pd.DataFrame:
    return load(logdir).histograms()


def images(logdir) -> pd.DataFrame:
    return load(logdir).images()


def audio(logdir) -> pd.DataFrame:
    return load(logdir).audio()


def text(logdir) -> pd.DataFrame:
    return load(logdir).text()


def blobs(logdir) -> pd.DataFrame:
    return load(logdir).blobs()


def series(logdir) -> pd.DataFrame:
    return load(logdir).series()


def preempt(df: pd.DataFrame) -> pd.DataFrame:
    """RustBoard's reservoir preemption with unlimited capacity, applied to an oracle table.

    Per (run, tag), in the table's (arrival) order: a record at step s removes every earlier
    kept record with step >= s, then is kept. Rows of one record (same series, consecutive,
    ``index`` increasing) are treated as one record. Row order of the survivors is unchanged.
    """
    if df.empty:
        return df.copy()
    keep: list[Any] = []
    has_index = "index" in df.columns
    for _, g in df.groupby(["run", "tag"], sort=False, observed=True):
        records: list[list[Any]] = []  # [step, [row labels]]
        prev_index = None
        for label, step, idx in zip(g.index, g["step"],
                                    g["index"] if has_index else [None] * len(g)):
            if has_index and prev_index is not None and idx > prev_index and records \
                    and records[-1][0] == step:
                records[-1][1].append(label)
                prev_index = idx
                continue
            while records and records[-1][0] >= step:
                records.pop()
            records.append([step, [label]])
            prev_index = idx
        for _, labels in records:
            keep.extend(labels)
    keep_set = set(keep)
    return df.loc[[lbl for lbl in df.index if lbl in keep_set]]


__all__ = [
    "LEGACY_OUTER_EDGES",
    "Oracle",
    "audio",
    "blobs",
    "content_bytes",
    "decode_tensor",
    "discover_runs",
    "histograms",
    "images",
    "kind_of",
    "load",
    "preempt",
    "scalars",
    "series",
    "tensors",
    "text",
]
