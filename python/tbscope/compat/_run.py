"""One run as the accumulators see it: tbscope's tables indexed by tag, the records behind
them and where each falls in TensorBoard's processing order."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from tbscope._pb import walk as _walk
from tbscope._reader import Logdir
from tbscope.compat._loader import _event_files, _Replay
from tbscope.compat._wire import _EMPTY_IDX, _NO_PROBE, _Files, _Probe, _probe_event, _scan_file_for_tag

if TYPE_CHECKING:
    import pyarrow as pa


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
    """One run opened by an accumulator: tables, kinds per tag, records and probes, all lazy,
    and where each record falls in TensorBoard's processing order (``_Replay``).

    Rebuilt after every ``Reload`` (the caches describe one state of the files).
    """

    def __init__(self, logdir: Logdir, path: str, replay: _Replay) -> None:
        import pandas as pd

        self.logdir = logdir
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self.replay = replay
        self.event_files = [os.path.basename(p) for p in _event_files(path)]
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
        self._positions: dict[str, np.ndarray[Any, Any]] = {}
        #: tag -> (file, offset) of records whose values of that tag TensorBoard never saw
        self.dropped: dict[str, set[tuple[str, int]]] = {}

    def path(self, rel: str) -> str:
        return os.path.join(self.dir, rel)

    def table(self, kind: str) -> _Table:
        t = self._tables.get(kind)
        if t is None:
            frame = getattr(self.logdir, _KIND_METHOD[kind])()
            t = self._tables[kind] = _Table(frame.to_arrow())
        return t

    def positions(self, kind: str) -> np.ndarray[Any, Any]:
        """Per row of ``kind``'s table, its record's position in processing order (-1: not
        handed over to the accumulator)."""
        got = self._positions.get(kind)
        if got is None:
            t = self.table(kind)
            got = np.full(t.n, -1, dtype=np.int64)
            for code, rel in enumerate(t.files):
                mine = np.flatnonzero(t.file_codes == code)
                got[mine] = self.replay.positions(self.path(rel), t.offsets[mine])
            self._positions[kind] = got
        return got

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

    def seen_records(self, tag: str) -> _Records:
        """``records(tag)`` less those whose value of ``tag`` TensorBoard never saw (``dropped``)."""
        rec = self.records(tag)
        gone = self.dropped.get(tag)
        if not gone:
            return rec
        keep = np.array([(rec.file(i), int(rec.offsets[i])) not in gone for i in range(len(rec))], dtype=bool)
        return _Records(rec.names, rec.file_codes[keep], rec.offsets[keep])

    def _scan_records(self, tag: str) -> _Records:
        found: list[tuple[int, int]] = []  # (file index, offset)
        for i, rel in enumerate(self.event_files):
            found.extend((i, off) for off, _, _ in _scan_file_for_tag(self.path(rel), tag))
        return _Records(
            list(self.event_files),
            np.array([r[0] for r in found], dtype=np.int64),
            np.array([r[1] for r in found], dtype=np.int64),
        )

    def record_positions(self, rec: _Records) -> np.ndarray[Any, Any]:
        out = np.full(len(rec), -1, dtype=np.int64)
        for rel, which in rec.per_file():
            out[which] = self.replay.positions(self.path(rel), rec.offsets[which])
        return out

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

    def first_metadata(self, tag: str) -> bytes | None:
        for p in self.probes(tag).values():
            if p.metadata is not None:
                return p.metadata
        return None

    def tag_rows(self, tag: str, kind: str, field: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(rows, positions) of ``tag`` in ``kind``'s table that TensorBoard was handed, from
        files that hold the tag as ``field``, in processing order."""
        if self.kinds.get(tag) != kind:
            return _EMPTY_IDX, _EMPTY_IDX
        t = self.table(kind)
        idx = self.rows(tag)
        probes = self.probes(tag)
        ok = [i for i, rel in enumerate(t.files) if probes.get(rel, _NO_PROBE).field == field]
        idx = idx[np.isin(t.file_codes[idx], ok)]
        pos = self.positions(kind)[idx]
        keep = pos >= 0
        idx, pos = idx[keep], pos[keep]
        order = np.argsort(pos, kind="stable")
        return idx[order], pos[order]

    def tag_records(self, tag: str, fields: frozenset[int]) -> tuple[_Records, np.ndarray[Any, Any]]:
        """(records, positions) of ``tag`` handed over, from files holding it as one of
        ``fields``, in processing order."""
        rec = self.seen_records(tag)
        probes = self.probes(tag)
        pos = self.record_positions(rec)
        ok = np.array([probes.get(rec.file(i), _NO_PROBE).field in fields for i in range(len(rec))], dtype=bool)
        sel = np.flatnonzero(ok & (pos >= 0))
        sel = sel[np.argsort(pos[sel], kind="stable")]
        return _Records(rec.names, rec.file_codes[sel], rec.offsets[sel]), pos[sel]

    def blob_rows(self, tag: str, field: int) -> list[tuple[str, int, int]]:
        """(file, blob offset, blob length) of the blobs of ``tag`` held as ``field`` that
        TensorBoard was handed, in processing order."""
        if self.kinds.get(tag) != "blobs":
            return []
        idx, _ = self.tag_rows(tag, "blobs", field)
        return _blob_locations(self.table("blobs"), idx) if len(idx) else []

    def read_blob(self, where: tuple[str, int, int]) -> bytes:
        with _Files() as files:
            return files.read(self.path(where[0]), where[1], where[2])

    def value_order(self, tags: list[str], at: int) -> list[str]:
        """``tags`` in the order their values come in the record at position ``at``."""
        r = self.replay
        path, offset = r.files[int(r.codes[at])], int(r.offsets[at])
        with _Files() as files:
            data = files.record(path, offset)
        seen: list[str] = []
        for f, wt, _, b in _walk(data):
            if f == 5 and wt == 2:
                for g, gwt, _, vb in _walk(b):
                    if g == 1 and gwt == 2:
                        vtag = node = ""
                        for h, _, _, hb in _walk(vb):
                            if h == 1:
                                vtag = hb.decode("utf-8", "replace")
                            elif h == 7:
                                node = hb.decode("utf-8", "replace")
                        t = vtag or node
                        if t in tags and t not in seen:
                            seen.append(t)
        return seen + [t for t in tags if t not in seen]

    def ordered(self, firsts: dict[str, int]) -> list[str]:
        """Tags by the position of their first item, ties in value order within the record."""
        by_pos: dict[int, list[str]] = {}
        for tag, p in firsts.items():
            by_pos.setdefault(p, []).append(tag)
        out: list[str] = []
        for p in sorted(by_pos):
            group = by_pos[p]
            out.extend(self.value_order(group, p) if len(group) > 1 else group)
        return out


def _blob_locations(t: _Table, idx: np.ndarray[Any, Any]) -> list[tuple[str, int, int]]:
    """(file, offset, length) of the blobs of rows ``idx`` (images, audio, blobs tables)."""
    rels = [str(r) for r in t.column("blob_file", idx).tolist()]
    return list(zip(rels, t.column("blob_offset", idx).tolist(), t.column("blob_length", idx).tolist()))


def _read_blobs(directory: str, where: list[tuple[str, int, int]]) -> list[bytes]:
    with _Files() as files:
        return [files.read(os.path.join(directory, r), o, n) for r, o, n in where]


def _blobs(run: _Run, t: _Table, idx: np.ndarray[Any, Any]) -> list[bytes]:
    return _read_blobs(run.dir, _blob_locations(t, idx))
