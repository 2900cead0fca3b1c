"""TensorBoard's loaders and ``_ProcessEvent`` bookkeeping (file version, source writer, most
recent step, restart and out-of-order purges), replayed over native record heads."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from tbscope import _core
from tbscope.compat._wire import _EMPTY_IDX

# --------------------------------------------------------------------------------------------
# TensorBoard's loaders and event processing, replayed over record heads
# --------------------------------------------------------------------------------------------

# Event.what field numbers (event.proto), as _core.record_heads reports them
_W_FILE_VERSION, _W_GRAPH, _W_SUMMARY, _W_SESSION, _W_TAGGED, _W_META = 3, 4, 5, 7, 8, 9
_SESSION_START = 1
#: event_util._MAX_WRITER_NAME_LEN: a longer source writer name is dropped (None).
_MAX_WRITER_NAME_LEN = 128


def _is_event_file(path: str) -> bool:
    """``io_wrapper.IsSummaryEventsFile``: a name containing ``tfevents``, not a profile marker."""
    return "tfevents" in os.path.basename(path) and not path.endswith(".profile-empty")


def _event_files(path: str) -> list[str]:
    """The event files TensorBoard's loaders read for ``path``, in their (sorted) order."""
    if _is_event_file(path) and not os.path.isdir(path):
        return [path]
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [os.path.join(path, n) for n in names if _is_event_file(os.path.join(path, n))]


@dataclasses.dataclass
class _Heads:
    """The heads of one file's whole records (``_core.record_heads``)."""

    offsets: np.ndarray[Any, Any]
    steps: np.ndarray[Any, Any]
    walls: np.ndarray[Any, Any]
    what: np.ndarray[Any, Any]
    status: np.ndarray[Any, Any]
    versions: dict[int, str]
    writers: dict[int, str]

    @staticmethod
    def read(path: str) -> _Heads:
        try:
            off, step, wall, what, status, versions, writers = _core.record_heads(path)
        except FileNotFoundError:
            off = step = wall = what = status = b""
            versions = writers = []
        return _Heads(
            np.frombuffer(off, dtype="<u8").astype(np.int64),
            np.frombuffer(step, dtype="<i8"),
            np.frombuffer(wall, dtype="<f8"),
            np.frombuffer(what, dtype=np.uint8),
            np.frombuffer(status, dtype="<i4"),
            dict(versions),
            dict(writers),
        )


__all__ = ["DirectoryDeletedError"]

try:
    from tensorboard.backend.event_processing.directory_watcher import DirectoryDeletedError
except Exception:  # noqa: BLE001 - a TensorBoard that fails to import is no TensorBoard  # pragma: no cover

    class DirectoryDeletedError(Exception):  # type: ignore[no-redef]  # TensorBoard's when installed
        """Raised by ``Reload`` when the run's directory is gone (TensorBoard's own class when
        TensorBoard is installed, so ``except directory_watcher.DirectoryDeletedError`` works)."""


class _Loader:
    """Which records TensorBoard's loader has handed its accumulator, Reload by Reload.

    ``DirectoryWatcher`` (a directory, the default) reads one file at a time in name order and
    never goes back: a file that appears sorting before the one being read is never read, and
    appends to a file it has moved past are ignored. ``DirectoryLoader`` (the plugin
    accumulator's ``event_file_active_filter``) polls every file each time until the filter
    calls the newest wall time seen in it inactive. A path to one file reads that file.

    Each file keeps the (end, epoch) of each read: its records before ``end`` were handed over
    at Reload number ``epoch``. TensorBoard processes them in (epoch, file, offset) order.
    """

    def __init__(self, path: str, active_filter: Any = None) -> None:
        self.path = path
        self.single = _is_event_file(path) and not os.path.isdir(path)
        self.active_filter = active_filter
        self.epoch = 0
        self.current: str | None = None
        self.heads: dict[str, _Heads] = {}
        self.bounds: dict[str, list[tuple[int, int]]] = {}
        self.inactive: set[str] = set()
        self.max_wall: dict[str, float] = {}

    def _consume(self, f: str) -> None:
        h = self.heads[f] = _Heads.read(f)
        end = int(h.offsets[-1]) + 1 if len(h.offsets) else 0
        b = self.bounds.setdefault(f, [])
        if end > (b[-1][0] if b else 0):
            b.append((end, self.epoch))

    def advance(self) -> None:
        """One Reload's worth of reading."""
        self.epoch += 1
        if self.single:
            if os.path.exists(self.path):
                self._consume(self.path)
            return
        if not os.path.isdir(self.path):
            raise DirectoryDeletedError(f"Directory {self.path} has been permanently deleted")
        files = _event_files(self.path)
        if self.active_filter is None:
            for f in files:
                if self.current is None or f >= self.current:
                    self._consume(f)
                    self.current = f
            return
        for f in files:
            if f in self.inactive:
                continue
            if f in self.max_wall and not self.active_filter(self.max_wall[f]):
                self.inactive.add(f)
                continue
            self._consume(f)
            h = self.heads[f]
            taken = h.offsets < self.bounds[f][-1][0] if f in self.bounds and self.bounds[f] else np.zeros(0, bool)
            if taken.any():
                top = float(h.walls[taken].max())
                self.max_wall[f] = max(top, self.max_wall.get(f, top))
                if not self.active_filter(self.max_wall[f]):
                    self.inactive.add(f)

    def peek(self, i: int) -> tuple[float, bool, str | None, str, int, int] | None:
        """(wall_time, has source metadata, raw source writer, file, offset, Event.what field) of
        record number ``i`` in the order TensorBoard's loader reads them before any Reload (file
        by file), or None past the end. ``FirstEventTimestamp`` and ``GetSourceWriter`` read
        records this way, one more per call, before the first Reload."""
        for f in [self.path] if self.single else _event_files(self.path):
            h = self.heads.get(f) or _Heads.read(f)
            if i < len(h.offsets):
                off = int(h.offsets[i])
                return float(h.walls[i]), off in h.writers, h.writers.get(off), f, off, int(h.what[i])
            i -= len(h.offsets)
        return None


@dataclasses.dataclass
class _Replay:
    """What TensorBoard's ``_ProcessEvent`` made of the records handed over so far, without the
    values: file version, source writer, most recent step, and the purges, as positions in
    processing order (a purge at position *q* with step *s* drops earlier items with step >= *s*).
    """

    files: list[str]  # event files by path, in the order of ``file_codes``
    by_file: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]  # file -> (offsets, positions)
    codes: np.ndarray[Any, Any]  # per position: the file, an index into ``files``
    offsets: np.ndarray[Any, Any]  # per position: the record's offset in its file
    steps: np.ndarray[Any, Any]  # per position
    first_wall: float | None
    writer: str | None
    file_version: float | None
    most_recent_step: int
    most_recent_wall_time: float
    purge_pos: np.ndarray[Any, Any]  # purges of every tag
    purge_step: np.ndarray[Any, Any]
    tag_purge_pos: np.ndarray[Any, Any]  # purges of the tags in that event only
    tag_purge_step: np.ndarray[Any, Any]

    def positions(self, path: str, offsets: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Position of the record at each of ``offsets`` in ``path`` (-1: not handed over)."""
        got = self.by_file.get(path)
        out = np.full(len(offsets), -1, dtype=np.int64)
        if got is None or not len(offsets):
            return out
        offs, pos = got
        i = np.searchsorted(offs, offsets)
        i = np.minimum(i, len(offs) - 1) if len(offs) else i
        if len(offs):
            hit = offs[i] == offsets
            out[hit] = pos[i[hit]]
        return out


def _replay(loader: _Loader, purge: bool, plugin: bool) -> _Replay:
    """Replay TensorBoard's ``_ProcessEvent`` bookkeeping over every record handed over.

    The legacy accumulator and the plugin accumulator differ in three ways: the legacy one purges
    on every ``SessionLog.START`` (the plugin one skips the first it sees), it moves
    ``most_recent_step`` only in the out-of-order rule (so it stays -1 for file_version 2 logs)
    while the plugin one moves it on every summary event, and the plugin accumulator sees graph
    and tagged run metadata events as summaries (``dataclass_compat`` migrates them into one).
    """
    parts = []
    files = sorted(loader.bounds)
    for code, f in enumerate(files):
        h = loader.heads[f]
        prev = 0
        for end, epoch in loader.bounds[f]:
            sel = np.flatnonzero((h.offsets >= prev) & (h.offsets < end))
            prev = end
            if len(sel):
                parts.append((epoch, code, sel))
    epochs = np.concatenate([np.full(len(s), e, dtype=np.int64) for e, _, s in parts]) if parts else _EMPTY_IDX
    codes = np.concatenate([np.full(len(s), c, dtype=np.int64) for _, c, s in parts]) if parts else _EMPTY_IDX

    def gather(attr: str, dtype: Any) -> np.ndarray[Any, Any]:
        if not parts:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([getattr(loader.heads[files[c]], attr)[s] for _, c, s in parts]).astype(dtype)

    offsets = gather("offsets", np.int64)
    order = np.lexsort((offsets, codes, epochs))
    codes, offsets = codes[order], offsets[order]
    steps, walls = gather("steps", np.int64)[order], gather("walls", np.float64)[order]
    what, status = gather("what", np.uint8)[order], gather("status", np.int32)[order]
    n = len(order)
    by_file = {}
    for code, f in enumerate(files):
        mine = np.flatnonzero(codes == code)
        by_file[f] = (offsets[mine], mine)

    # file_version and source writer: the last one seen wins (each event sets them)
    version_at = np.full(n, np.nan)
    has_version = np.zeros(n, dtype=bool)
    writer: str | None = None
    last_writer = -1
    for i in np.flatnonzero(what == _W_FILE_VERSION).tolist():
        v = loader.heads[files[codes[i]]].versions.get(int(offsets[i]))
        if v is not None:
            version_at[i] = _parse_file_version(v)
            has_version[i] = True
    for f in files:
        ws = loader.heads[f].writers
        if ws:
            offs, pos = by_file[f]
            for off, w in ws.items():
                j = np.searchsorted(offs, off)
                if j < len(offs) and offs[j] == off and int(pos[j]) > last_writer:
                    last_writer = int(pos[j])
                    writer = w if w and len(w) <= _MAX_WRITER_NAME_LEN else None
    if has_version.any():
        idx = np.where(has_version, np.arange(n), -1)
        np.maximum.accumulate(idx, out=idx)
        version = np.where(idx >= 0, version_at[np.maximum(idx, 0)], np.nan)
        file_version: float | None = float(version_at[has_version][-1])
    else:
        version = np.full(n, np.nan)
        file_version = None
    # ``if self.file_version and self.file_version >= 2``: None, 0 and NaN fail; -1 (a version
    # that does not parse) is true but < 2
    session_rule = (version >= 2) & ~np.isnan(version)
    summary = what == _W_SUMMARY
    if plugin:
        summary = summary | (what == _W_GRAPH) | (what == _W_TAGGED)
    starts = (what == _W_SESSION) & (status == _SESSION_START)
    mrs, mrw = -1, -1.0
    purge_pos = tag_pos = _EMPTY_IDX
    if purge and n:
        restarts = np.flatnonzero(session_rule & starts)
        purge_pos = restarts[1:] if plugin else restarts
        if plugin:
            # most_recent_step: the step of the latest summary event, whichever rule applies
            last = np.where(summary, np.arange(n), -1)
            np.maximum.accumulate(last, out=last)
            before = np.concatenate([[-1], last[:-1]])
            recent = np.where(before >= 0, steps[np.maximum(before, 0)], -1)
            tag_pos = np.flatnonzero(~session_rule & summary & (steps < recent))
            if last[-1] >= 0:
                mrs, mrw = int(steps[last[-1]]), float(walls[last[-1]])
        else:
            # the out-of-order rule: an event that does not purge becomes the most recent
            found = []
            ooo = np.flatnonzero(~session_rule)
            for i, s, is_sum in zip(ooo.tolist(), steps[ooo].tolist(), summary[ooo].tolist()):
                if is_sum and s < mrs:
                    found.append(i)
                else:
                    mrs, mrw = s, float(walls[i])
            tag_pos = np.asarray(found, dtype=np.int64)
    first_wall = float(walls[0]) if n else None
    return _Replay(
        files,
        by_file,
        codes,
        offsets,
        steps,
        first_wall,
        writer,
        file_version,
        mrs,
        mrw,
        purge_pos,
        steps[purge_pos],
        tag_pos,
        steps[tag_pos],
    )


def _parse_file_version(v: str) -> float:
    """``event_util.ParseFileVersion``: the number after ``brain.Event:``, -1 if none parses."""
    try:
        return float(v.split("brain.Event:")[-1])
    except ValueError:
        return -1.0
