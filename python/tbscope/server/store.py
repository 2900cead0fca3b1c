"""The server's data: its logdirs, read by a background thread, and what changed when.

Each logdir is one :class:`tbscope.Logdir` (through the incremental cache unless turned off).
A reload thread reads them (the first time everything, then only new bytes), and after each
read takes a :class:`Snapshot`: the run and series tables and the report, with run names
prefixed for several logdirs. Requests read snapshots, never a Logdir that is being read, so
the server answers at once while a large logdir loads. Point tables (scalars, histograms, ...)
are taken from the Logdir between reloads, under its lock, and kept with the snapshot.

Through the cache, a read publishes its rows at once and the cache is written after, by a
thread of its own that holds the reader only to copy its state (docs/server.md, "The cache"):
the first answer never waits for the write, and reloads and requests go on during it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tbscope.server.config import Config, Source

if TYPE_CHECKING:
    import pyarrow as pa

    from tbscope import _projector
    from tbscope._reader import Logdir

log = logging.getLogger("tbscope.server")

#: 24 colours for runs (Tableau 10, then darker and lighter companions): a run's colour is a
#: CRC-32 of its name into this list, the same for every user and session.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
    "#e6550d", "#31a354", "#756bb1", "#636363", "#6baed6", "#fd8d3c", "#74c476", "#9e9ac8",
)  # fmt: skip

#: Bytes of encoded answers a snapshot keeps for repeated requests (a dashboard's refresh,
#: many viewers of one logdir), and the largest one kept.
ANSWER_BUDGET = 128 << 20
ANSWER_MAX = 32 << 20

KINDS = ("scalars", "histograms", "images", "audio", "text", "hparams", "blobs", "tensors")


def series_kind(kind: str, plugin: str) -> str:
    """The API kind of a series: tensors of the PR-curve and custom-scalar plugins are their own."""
    if kind == "tensors" and plugin in ("pr_curves", "custom_scalars"):
        return plugin
    return kind


def status_body(store: Store) -> dict[str, Any]:
    """The ``status`` answer: version, generation, load progress, logdirs, kinds present."""
    from tbscope import __version__

    snap = store.snapshot
    return {
        "version": __version__,
        "generation": snap.generation,
        "loading": store.progress.as_dict(),
        "logdirs": [
            {"name": st.source.name, "path": st.source.path, "exists": st.logdir is not None} for st in store.sources
        ],
        "token_required": store.config.token is not None,
        "reload_interval": store.config.reload_interval,
        # Once per snapshot: a dashboard asks for the status after every change notice, and
        # with many runs the series table and the projector configs are long to go through.
        "kinds": store.cached(("status-kinds",), lambda: _kind_counts(store, snap), snap),
    }


def _kind_counts(store: Store, snap: Snapshot) -> dict[str, int | bool]:
    """Tags per kind, whether there are hparams and custom-scalar layouts, and the projector's
    embeddings (as listed by ``api/v1/embeddings`` when the snapshot was first asked about)."""
    series = snap.series
    counts: dict[str, set[str]] = {}
    for tag, kind, plugin in zip(
        series.column("tag").to_pylist(), series.column("kind").to_pylist(), series.column("plugin").to_pylist()
    ):
        counts.setdefault(series_kind(kind, plugin), set()).add(tag)
    out: dict[str, int | bool] = {
        k: len(counts.get(k, ())) for k in ("scalars", "histograms", "images", "audio", "text", "tensors", "pr_curves")
    }
    out["hparams"] = bool(counts.get("hparams"))
    out["custom_scalars"] = bool(counts.get("custom_scalars"))
    out["embeddings"] = len(all_embeddings(store, snap)[1])
    return out


def stat_key(path: str) -> tuple[int, int] | None:
    """(modification time, size) of a file, None when missing: what a fingerprint compares."""
    try:
        s = os.stat(path)
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size


def source_embeddings(
    store: Store, st: SourceState, snap: Snapshot | None = None
) -> tuple[str, list[_projector.EmbeddingInfo]]:
    """(fingerprint, embeddings) of one logdir's runs in the snapshot. Projector configs are
    files beside the events, not events: the fingerprint is their paths, sizes and
    modification times, and the listing is made again only when it changes. Takes no reader's
    lock (a reload may be running), so the status never waits for one."""
    import hashlib

    from tbscope import _projector

    snap = snap or store.snapshot
    root = None if st.logdir is None else _projector.local_root(st.logdir.path)
    if root is None:
        return "", []
    runs = _local_runs(snap, st)
    configs = _projector.config_paths(root, runs)
    fp = hashlib.blake2b(
        repr(sorted((r, p, stat_key(p)) for r, p in configs.items())).encode("utf-8", "surrogatepass"), digest_size=12
    ).hexdigest()
    infos: list[_projector.EmbeddingInfo] = store.cached(
        ("embeddings", st.index, fp), lambda: _projector.embedding_infos(root, runs), snap
    )
    return fp, infos


def _local_runs(snap: Snapshot, st: SourceState) -> list[str]:
    """The runs of one logdir in the snapshot, by their names inside it."""
    names = [str(r) for r in snap.runs.column("run").to_pylist()]
    prefix = st.source.name
    if prefix is None:
        return names
    return ["." if r == prefix else r[len(prefix) + 1 :] for r in names if r == prefix or r.startswith(prefix + "/")]


def all_embeddings(
    store: Store, snap: Snapshot | None = None
) -> tuple[str, list[tuple[str, _projector.EmbeddingInfo]]]:
    """(fingerprint, [(API run name, info)]) over every logdir that has been read."""
    fps, out = [], []
    for st in store.sources:
        if st.logdir is None or not st.ready:
            continue
        fp, infos = source_embeddings(store, st, snap)
        fps.append(fp)
        out += [(st.full_name(i.run), i) for i in infos]
    return "-".join(fps), out


def color(run: str) -> str:
    return PALETTE[zlib.crc32(run.encode("utf-8", "surrogatepass")) % len(PALETTE)]


def _proc_read_bytes() -> int | None:
    """Bytes this process has read so far (Linux), for load progress."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Progress:
    """How far the first load is: totals from a listing of event files and ``bytes_done`` from
    the process's read counter while loading (an estimate: the process reads other files too);
    once done, the files and bytes of the runs the load read."""

    done: bool = False
    files_total: int = 0
    bytes_total: int = 0
    _start_read: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def listed(self, files: int, size: int) -> None:
        """The listing's totals, unless the load has already finished (its figures are exact)."""
        with self._lock:
            if not self.done:
                self.files_total, self.bytes_total = files, size

    def finish(self, files: int, size: int) -> None:
        with self._lock:
            self.files_total, self.bytes_total, self.done = files, size, True

    def as_dict(self) -> dict[str, Any]:
        if self.done:
            return {
                "done": True,
                "files_done": self.files_total,
                "files_total": self.files_total,
                "bytes_done": self.bytes_total,
                "bytes_total": self.bytes_total,
            }
        now = _proc_read_bytes()
        done_bytes = 0 if now is None or self._start_read is None else max(0, now - self._start_read)
        done_bytes = min(done_bytes, self.bytes_total)
        files = int(self.files_total * done_bytes / self.bytes_total) if self.bytes_total else 0
        return {
            "done": False,
            "files_done": files,
            "files_total": self.files_total,
            "bytes_done": done_bytes,
            "bytes_total": self.bytes_total,
        }


@dataclass
class SourceState:
    """One logdir and its reader."""

    source: Source
    index: int
    logdir: Logdir | None = None
    exists: bool = False
    # Set once its first read is done: until then requests do not wait for it (the reader is
    # busy reading) and see no rows of it.
    ready: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def full_name(self, run: str) -> str:
        """A run's name in the API."""
        if self.source.name is None:
            return run
        return self.source.name if run == "." else f"{self.source.name}/{run}"


@dataclass
class Snapshot:
    """What the server shows, as of one generation. Tables are Arrow (zero-copy views of the
    readers' columns); ``runs`` and ``series`` have API run names and a ``source`` column."""

    generation: int
    runs: pa.Table
    series: pa.Table
    report: list[dict[str, Any]]
    # (source index, kind) -> table, taken on first use.
    tables: dict[tuple[int, str], Any] = field(default_factory=dict)
    extras: dict[Any, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A lock per value being computed: concurrent requests for it wait for one computation.
    flights: dict[Any, threading.Lock] = field(default_factory=dict)
    # Encoded answers (most recently used last) and their bytes, within ANSWER_BUDGET.
    answers: OrderedDict[Any, Any] = field(default_factory=OrderedDict)
    answer_bytes: int = 0


@dataclass(frozen=True)
class Change:
    generation: int
    runs: tuple[str, ...]
    kinds: tuple[str, ...]


class Store:
    """The logdirs, the reload thread and the current snapshot."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.sources = [SourceState(s, i) for i, s in enumerate(config.sources)]
        self.generation = 0
        self.progress = Progress()
        self.snapshot = self._empty_snapshot()
        self.changes: deque[Change] = deque(maxlen=1000)
        self._listeners: list[Callable[[Change], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loaded = threading.Event()
        self._facts: dict[str, tuple[Any, ...]] = {}
        self.load_seconds: float | None = None
        # The cache writer: woken after each reload, idle when every reader's cache is written.
        self._writer: threading.Thread | None = None
        self._write_wanted = threading.Event()
        self._write_idle = threading.Event()
        self._write_idle.set()
        self._write_lock = threading.Lock()

    # ---------------------------------------------------------------------------- lifecycle

    @property
    def loading(self) -> bool:
        return not self._loaded.is_set()

    def start(self) -> None:
        """Start reading (in the background) and reloading every ``reload_interval`` seconds."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tbscope-reload", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop reading; a cache write under way is abandoned (nothing of it is published: the
        cache keeps its last generation, and the next start reads what that lacks). Returns at
        once: :meth:`join` waits for the threads."""
        self._stop.set()
        self._write_wanted.set()
        for st in self.sources:
            if st.logdir is not None:
                st.logdir._abandon_cache_write()

    def join(self, timeout: float = 5.0) -> bool:
        """After :meth:`stop`: wait (up to ``timeout``) for an abandoned cache write to remove
        its temporary files. Whether it has."""
        w = self._writer
        if w is not None:
            w.join(timeout)
            return not w.is_alive()
        return True

    def wait_cache_written(self, timeout: float | None = None) -> bool:
        """Wait until the cache holds everything read so far (True at once without a cache)."""
        return self._write_idle.wait(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout)

    def subscribe(self, fn: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``fn`` after each reload that found something; returns the unsubscribe."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            self._first_load()
        except Exception:  # a reader failure must not kill the server thread
            log.exception("reading the logdirs failed")
        self.load_seconds = time.monotonic() - t0
        runs = self.snapshot.runs
        self.progress.finish(
            sum(n or 0 for n in runs.column("files").to_pylist()), sum(n or 0 for n in runs.column("bytes").to_pylist())
        )
        self._loaded.set()
        interval = self.config.reload_interval
        while interval > 0 and not self._stop.wait(interval):
            try:
                self.reload()
            except Exception:  # same: log, try again next time
                log.exception("reloading the logdirs failed")

    def _first_load(self) -> None:
        totals = threading.Thread(target=self._count_files, daemon=True, name="tbscope-list")
        totals.start()
        self.progress._start_read = _proc_read_bytes()
        self.reload()

    def _count_files(self) -> None:
        """The load's totals for its progress: the event files the reader will find (its own
        discovery, natively, while the reader reads)."""
        from tbscope import _core

        files = size = 0
        for st in self.sources:
            if not os.path.exists(st.source.path):
                continue  # not there yet, or a URL (its listing is the reader's to make)
            try:
                found = _core.event_files(st.source.path)
            except OSError:
                continue
            files += len(found)
            size += sum(b for _run, _file, b in found)
        self.progress.listed(files, size)

    # ---------------------------------------------------------------------------- reading

    def _open(self, st: SourceState) -> bool:
        if st.logdir is not None:
            return True
        from tbscope._mirror import is_url
        from tbscope._reader import scan

        if is_url(st.source.path):
            try:
                st.logdir = scan(
                    st.source.path,
                    cache=True if self.config.cache else None,
                    storage_options=self.config.storage_options,
                )
                st.logdir._defer_cache_writes()
            except OSError as e:
                # Unreachable or not there yet: the page says so, and the next reload tries again.
                log.warning("cannot read %s yet: %s", st.source.path, e)
                return False
            st.exists = True
            return True
        if not os.path.exists(st.source.path):
            return False
        st.logdir = scan(st.source.path, cache=True if self.config.cache else None)
        st.logdir._defer_cache_writes()
        st.exists = True
        return True

    def reload(self) -> Change | None:
        """Read what is new in every logdir; a new snapshot and a change notice if anything
        changed. Returns the change (None when nothing changed)."""
        # A reload that read no file and listed no directory changed nothing the snapshot
        # holds (a directory that became unreadable is listed, a remote logdir's fetch
        # problems are not the reader's): then the snapshot is not built again, which on a
        # logdir of many runs costs more than the reload.
        same = self.generation > 0
        for st in self.sources:
            if not self._open(st):
                continue
            assert st.logdir is not None
            with st.lock:
                try:
                    stats = st.logdir.reload()
                    same &= stats.files_read == 0 and stats.dirs_listed == 0 and st.logdir.url is None
                except FileNotFoundError:
                    # Deleted under us: show what was read, look again next time.
                    log.warning("logdir %s disappeared", st.source.path)
                    same = False
            same &= st.ready
            st.ready = True
        change = None if same else self._publish()
        if self.config.cache and any(st.logdir is not None for st in self.sources):
            self._want_cache_write()
        return change

    # ---------------------------------------------------------------------------- the cache

    def _want_cache_write(self) -> None:
        """Wake the cache writer (started on first use): the reload may have left data that
        the cache does not hold yet."""
        if self._stop.is_set():
            return
        with self._write_lock:
            self._write_idle.clear()
            self._write_wanted.set()
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_caches, name="tbscope-cache", daemon=True)
                self._writer.start()

    def _write_caches(self) -> None:
        """The cache writer: writes what reloads left unwritten, one logdir after another, at
        a lower CPU priority than requests (a first answer computed meanwhile goes first)."""
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while not self._stop.is_set():
            self._write_wanted.wait()
            self._write_wanted.clear()
            for st in self.sources:
                if st.logdir is None or self._stop.is_set():
                    continue
                try:
                    st.logdir._write_cache()
                except Exception:  # logged; the data is served all the same, the next reload tries again
                    log.exception("writing the cache of %s failed", st.source.path)
            with self._write_lock:
                if not self._write_wanted.is_set():
                    self._write_idle.set()
        self._write_idle.set()

    def _publish(self) -> Change | None:
        import pyarrow as pa

        run_tables, series_tables, report = [], [], []
        for st in self.sources:
            if st.logdir is None or not st.ready:
                continue
            with st.lock:
                runs = st.logdir.run_info().to_arrow()
                series = st.logdir.series().to_arrow()
                problems = st.logdir.report.problems
            run_tables.append(_prefixed(runs, st))
            series_tables.append(_prefixed(series, st))
            for p in problems:
                report.append(
                    {
                        "file": p.file,
                        "run": st.full_name(p.run) if p.run else p.run,
                        "offset": p.offset,
                        "end": p.offset + p.length,
                        "severity": p.severity,
                        "reason": p.reason,
                    }
                )
        runs = pa.concat_tables(run_tables, promote_options="default") if run_tables else _empty_runs()
        series = pa.concat_tables(series_tables, promote_options="default") if series_tables else _empty_series()
        facts = _run_facts(runs)
        changed = sorted(r for r in facts.keys() | self._facts.keys() if facts.get(r) != self._facts.get(r))
        kinds = sorted({k for r in changed for k, n in _kind_deltas(self._facts.get(r), facts.get(r))})
        first = self.generation == 0
        if not changed and not first and len(report) == len(self.snapshot.report):
            return None
        self._facts = facts
        self.generation += 1
        self.snapshot = Snapshot(self.generation, _by_run(runs), series, report)
        change = Change(self.generation, tuple(changed), tuple(kinds))
        self.changes.append(change)
        for fn in list(self._listeners):
            try:
                fn(change)
            except Exception:  # a listener's failure is its own
                log.exception("change listener failed")
        return change

    def _empty_snapshot(self) -> Snapshot:
        return Snapshot(0, _empty_runs(), _empty_series(), [])

    # ---------------------------------------------------------------------------- lookups

    def changes_since(self, generation: int) -> tuple[list[str], list[str], bool]:
        """(runs, kinds, reset) changed after ``generation``; reset when it is too old."""
        if generation >= self.generation:
            return [], [], False
        have = list(self.changes)
        if not have or have[0].generation > generation + 1:
            return [], [], True
        runs: set[str] = set()
        kinds: set[str] = set()
        for c in have:
            if c.generation > generation:
                runs.update(c.runs)
                kinds.update(c.kinds)
        return sorted(runs), sorted(kinds), False

    def resolve(self, run: str) -> tuple[SourceState, str] | None:
        """The logdir of an API run name and the run's name inside it."""
        for st in self.sources:
            name = st.source.name
            if name is None:
                return (st, run) if st.ready else None
            if run == name:
                return st, "."
            if run.startswith(name + "/"):
                return st, run[len(name) + 1 :]
        return None

    def table(self, st: SourceState, kind: str, snap: Snapshot | None = None) -> pa.Table:
        """One kind's rows of a logdir, as of the snapshot (taken once per snapshot)."""
        snap = snap or self.snapshot
        key = (st.index, kind)
        with snap.lock:
            got = snap.tables.get(key)
        if got is not None:
            return got
        if st.logdir is None or not st.ready:
            from tbscope.server.tables import empty_kind_table

            return empty_kind_table(kind)
        with st.lock:
            if kind == "pr_curves":
                got = st.logdir.pr_curves().to_arrow()
            else:
                got = getattr(st.logdir, kind if kind != "hparams" else "hparams_records")().to_arrow()
        with snap.lock:
            snap.tables.setdefault(key, got)
            return snap.tables[key]

    def cached(self, key: Any, make: Callable[[], Any], snap: Snapshot | None = None) -> Any:
        """A value computed once per snapshot (per-tag scalar indexes, the hparams table...);
        a request asking for it while another computes it waits for that one."""
        snap = snap or self.snapshot
        with snap.lock:
            if key in snap.extras:
                return snap.extras[key]
            flight = snap.flights.setdefault(key, threading.Lock())
        with flight:
            with snap.lock:
                if key in snap.extras:
                    return snap.extras[key]
            value = make()
            with snap.lock:
                snap.flights.pop(key, None)
                return snap.extras.setdefault(key, value)

    def answer(self, key: Any, make: Callable[[], Any], snap: Snapshot | None = None) -> Any:
        """An encoded answer (bytes or a buffer) for a request, computed once per snapshot
        while it fits the budget: the same request again costs nothing until the data
        changes. The least recently used answers give way to new ones."""
        snap = snap or self.snapshot
        full = ("answer", key)
        with snap.lock:
            if key in snap.answers:
                snap.answers.move_to_end(key)
                return snap.answers[key]
            flight = snap.flights.setdefault(full, threading.Lock())
        with flight:
            with snap.lock:
                if key in snap.answers:
                    return snap.answers[key]
            body = make()
            size = len(memoryview(body))
            with snap.lock:
                snap.flights.pop(full, None)
                if size <= ANSWER_MAX:
                    snap.answers[key] = body
                    snap.answer_bytes += size
                    while snap.answer_bytes > ANSWER_BUDGET and snap.answers:
                        _, old = snap.answers.popitem(last=False)
                        snap.answer_bytes -= len(memoryview(old))
            return body

    @contextlib.contextmanager
    def with_logdir(self, st: SourceState) -> Iterator[Logdir]:
        """A logdir's reader, under its lock (no reload runs meanwhile)."""
        with st.lock:
            assert st.logdir is not None and st.ready
            yield st.logdir


def _prefixed(table: pa.Table, st: SourceState) -> pa.Table:
    """``table`` with API run names (prefixed for a named logdir)."""
    if st.source.name is None:
        return table
    from tbscope.server.tables import strings

    names = strings([st.full_name(str(r)) for r in table.column("run").to_pylist()])
    return table.set_column(table.schema.get_field_index("run"), "run", names)


def _by_run(runs: pa.Table) -> pa.Table:
    """The runs table sorted by name. A logdir's runs come sorted (only several logdirs mix
    them), so this is usually a check: Table.sort_by would import pyarrow.compute on the
    start-up path for nothing."""
    names = [str(r) for r in runs.column("run").to_pylist()]
    if all(a <= b for a, b in zip(names, names[1:])):
        return runs
    import numpy as np

    from tbscope.server.tables import numeric

    order = sorted(range(len(names)), key=names.__getitem__)
    return runs.take(numeric(np.array(order, dtype=np.int64)))


def _run_facts(runs: pa.Table) -> dict[str, tuple[Any, ...]]:
    """Per run, what a change notice compares: points per kind, bytes, max step."""
    cols = ["bytes", "max_step", *KINDS]
    data = [runs.column(c).to_pylist() for c in cols]
    return {str(r): tuple(d[i] for d in data) for i, r in enumerate(runs.column("run").to_pylist())}


def _kind_deltas(old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> list[tuple[str, int]]:
    if new is None:
        return [(k, 0) for k in KINDS]
    out = []
    for i, k in enumerate(KINDS):
        a = 0 if old is None else (old[2 + i] or 0)
        b = new[2 + i] or 0
        if a != b:
            out.append((k, b - a))
    return out


def _empty_runs() -> pa.Table:
    import numpy as np

    from tbscope.server.tables import numeric, strings, table

    ints = numeric(np.zeros(0, np.int64))
    floats = numeric(np.zeros(0, np.float64))
    cols: dict[str, Any] = {
        "run": strings([]),
        "files": ints,
        "bytes": ints,
        "first_wall_time": floats,
        "last_wall_time": floats,
        "max_step": ints,
    }
    for k in KINDS:
        cols[k] = ints
    return table(cols)


def _empty_series() -> pa.Table:
    import numpy as np

    from tbscope.server.tables import numeric, strings, table

    ints = numeric(np.zeros(0, np.int64))
    text = strings([])
    return table(
        {
            "run": text,
            "tag": text,
            "kind": text,
            "plugin": text,
            "display_name": text,
            "description": text,
            "points": ints,
            "first_step": ints,
            "last_step": ints,
        }
    )
