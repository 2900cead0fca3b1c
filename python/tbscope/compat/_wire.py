"""Just enough of the protobuf wire format to classify a record without TensorBoard's protos,
and the records themselves, read with the native reader's framing."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Sequence

import numpy as np

from tbscope import _core
from tbscope._pb import walk as _walk  # the package's one protobuf wire decoder

# --------------------------------------------------------------------------------------------
# Protobuf wire format: just enough to classify a record without TensorBoard's protos
# --------------------------------------------------------------------------------------------


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
_EMPTY_IDX = np.zeros(0, dtype=np.int64)


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


def _last_limits(
    directory: str, files: Sequence[str], offsets: Sequence[int], tags: Sequence[str]
) -> list[float | None]:
    """The writer's last ``bucket_limit`` of the legacy histogram of each (file, offset, tag):
    tbscope's table keeps ``max`` there (RustBoard's edges), TensorBoard and tbparse the limit
    as written (often DBL_MAX)."""
    out: list[float | None] = []
    with _Files() as fs:
        for rel, off, tag in zip(files, offsets, tags):
            data = fs.record(os.path.join(directory, rel), int(off))
            out.append(_histo_last_limit(data, tag.encode("utf-8")))
    return out


def _histo_last_limit(data: bytes, tag_b: bytes) -> float | None:
    for f, wt, _, b in _walk(data):
        if f != 5 or wt != 2:
            continue
        for g, gwt, _, vb in _walk(b):
            if g != 1 or gwt != 2:
                continue
            vtag = node = histo = b""
            for h, _, _, hb in _walk(vb):
                if h == 1:
                    vtag = hb
                elif h == 7:
                    node = hb
                elif h == _HISTO:
                    histo = hb
            if (vtag or node) != tag_b or not histo:
                continue
            last: float | None = None
            for k, kwt, _, kb in _walk(histo):
                if k == 6 and kwt == 2 and len(kb) >= 8:
                    last = struct.unpack("<d", kb[-8:])[0]
                elif k == 6 and kwt == 1:
                    last = struct.unpack("<d", kb)[0]
            return last
    return None
