"""Remote logdirs (``s3://``, ``gs://``, ``az://``, ``memory://``, any fsspec protocol): a local
mirror of their event files, kept up to date with concurrent ranged reads, that the Rust
reader then reads like any logdir (``docs/scale.md`` says why).

A refresh lists the logdir once, compares sizes with the mirror's manifest, fetches the new
bytes of every new or grown file in pieces on a thread pool (each response written where it
belongs as it arrives, so no object is ever held whole in memory), retries a failed piece with
backoff, and rolls a file that still fails back to the bytes it had: it is reported, the rest
is read. A scan's first refresh runs in the background (:meth:`Mirror.start`): new files enter
the mirror in the reader's order, the first of those not whole yet as soon as its first piece is
in, and the first read parses them in rounds as they arrive, that one up to the bytes it has
(:meth:`Mirror.follow`). ``file://`` URLs are plain paths and need no mirror.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tbscope import _transport

__all__ = [
    "Mirror",
    "is_url",
    "local",
    "open_mirror",
    "parse_storage_option",
    "run_file",
    "split_url",
    "use_storage_options",
]

#: Bytes per ranged request, and requests in flight per refresh: at most their product is
#: held in memory while fetching.
PIECE_BYTES = 8 << 20
CONCURRENCY = 16
#: Largest write of a piece as it streams in (S3): what a request in flight holds at most.
STREAM_BYTES = 1 << 20
#: Tries per piece (the store's own client may retry inside each), and the first backoff.
TRIES = 4
BACKOFF = 0.25

#: The storage options a command line gave (``--storage-option``), used when a call gives none.
_default_options: dict[str, Any] = {}


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def is_url(path: object) -> bool:
    """``proto://...`` (a str; an ``os.PathLike`` is always local)."""
    return isinstance(path, str) and _URL.match(path) is not None


def split_url(path: str) -> tuple[str, bool]:
    """(local path or URL, is_remote). ``file://`` URLs are local paths."""
    m = _URL.match(path)
    if m is None:
        return path, False
    if m.group(1).lower() == "file":
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        return url2pathname(urlparse(path).path), False
    return path, True


def parse_storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from a command line: VALUE as JSON when it is JSON (``true``, ``3``,
    ``{"region_name": "x"}``), else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--storage-option takes KEY=VALUE (e.g. endpoint_url=http://127.0.0.1:9000), not {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip(), parsed


@contextlib.contextmanager
def use_storage_options(options: Mapping[str, Any]) -> Iterator[None]:
    """Within: remote paths opened without ``storage_options=`` take these (the CLI's
    ``--storage-option``; threads started meanwhile, such as the server's, see them too)."""
    global _default_options
    before = _default_options
    _default_options = dict(options)
    try:
        yield
    finally:
        _default_options = before


@dataclass
class FetchProblem:
    """A file (or the listing) that could not be fetched: reported, never raised. ``file`` is
    relative to the logdir ("" for the listing), as in the reader's own report."""

    run: str
    file: str
    reason: str


@dataclass
class SyncStats:
    files: int = 0
    files_fetched: int = 0
    bytes_fetched: int = 0
    problems: list[FetchProblem] = field(default_factory=list)


def _mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, datetime):
            return v.timestamp()
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, str):
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
    return None


#: Storage options that are tbscope's own (where the mirror is, which transport), not the store's.
OWN_OPTIONS = ("mirror", "transport")


def fsspec_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``storage_options`` without tbscope's own keys: what the store's filesystem takes."""
    return {k: v for k, v in options.items() if k not in OWN_OPTIONS}


def _fs(url: str, options: Mapping[str, Any]) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            f"reading {url!r} needs fsspec (and the store's package, e.g. s3fs): pip install 'tbscope[remote]'"
        ) from None
    return fsspec.core.url_to_fs(url, **options)  # type: ignore[no-any-return]


class Mirror:
    """The local copy of one remote logdir (or event file)."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        options = dict(_default_options if storage_options is None else storage_options)
        root = options.pop("mirror", None)
        self._asked = _transport.mode(options)
        self.url = url
        #: Lists and fetches natively (s3:// with options it maps), else None: fsspec does.
        self._native = _transport.choose(url, options, self._asked)
        self._fs_options = options
        self._fs: Any = None
        if self._native is None:
            self._fs, self.root = _fs(url, options)
        else:
            # The filesystem (and s3fs's imports) only if a key needs it (see `fs`).
            self.root = url.split("://", 1)[1]
        self.root = self.root.rstrip("/")
        #: The S3-compatible server (if the options name one), in the manifest for `tbscope cache ls`.
        self._endpoint = str(options.get("endpoint_url") or options.get("client_kwargs") or "")
        if root is None:
            from tbscope._cache_root import default_root

            # Keyed by the URL and the endpoint: the same bucket name on two servers differs.
            key = json.dumps([url.rstrip("/"), self._endpoint])
            name = posixpath.basename(self.root) or "root"
            root = os.path.join(
                default_root(), "remote", f"{name[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
            )
        self.dir = os.path.abspath(os.fspath(root))
        self.files_dir = os.path.join(self.dir, "logdir")
        self._manifest_path = os.path.join(self.dir, "manifest.json")
        self._lock = threading.Lock()
        self.single = False  # the URL names one event file
        self._problems: list[FetchProblem] = []
        self._last = SyncStats()
        self._thread: threading.Thread | None = None  # a first fetch going on (start())
        self._failure: BaseException | None = None

    @property
    def fs(self) -> Any:
        """The logdir's fsspec filesystem, made on first use: with the native transport, only
        for what it cannot do (a key it cannot name, a client it could not make)."""
        if self._fs is None:
            self._fs = _fs(self.url, self._fs_options)[0]
        return self._fs

    # -- where things are ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """What the Rust reader opens: the mirror's logdir, or its one event file (once a
        background fetch is over)."""
        self.wait()
        return self._path_now

    @property
    def _path_now(self) -> str:
        """As :attr:`path`, without waiting for a background fetch."""
        if self.single:
            return os.path.join(self.files_dir, posixpath.basename(self.root))
        return self.files_dir

    # -- refresh ------------------------------------------------------------------------------

    def list_files(self) -> dict[str, dict[str, Any]]:
        """Event files: path relative to the root → {size, mtime}. One listing call; sets
        :attr:`single` when the URL names one event file; FileNotFoundError when nothing is
        there."""
        found = self._find_native()
        if found is None:
            found = self.fs.find(self.root, detail=True, withdirs=False)
            if not found:
                info = self.fs.info(self.root)  # a single object, or FileNotFoundError
                if info.get("type") == "file":
                    found = {self.root: info}
        if len(found) == 1 and self.root in {p.rstrip("/") for p in found}:
            self.single = True
            info = next(iter(found.values()))
            return {posixpath.basename(self.root): {"size": int(info["size"]), "mtime": _mtime(info)}}
        out: dict[str, dict[str, Any]] = {}
        prefix = self.root + "/"
        for p, info in found.items():
            p = p.rstrip("/")
            if not p.startswith(prefix) or "tfevents" not in posixpath.basename(p):
                continue
            rel = p[len(prefix) :]
            if any(part in ("", ".", "..") for part in rel.split("/")):
                continue  # never write outside the mirror
            out[rel] = {"size": int(info.get("size") or 0), "mtime": _mtime(info)}
        return out

    def _find_native(self) -> dict[str, dict[str, Any]] | None:
        """The listing through the native client, as fsspec's ``find`` gives it (the object
        itself when the URL names one, FileNotFoundError when nothing is there); None when
        fsspec must list (no native transport, or a key the native client spells otherwise)."""
        client = self._client()
        if client is None:
            return None
        bucket, _, prefix = self.root.partition("/")
        try:
            objects = client.list(prefix)
            if not objects and prefix:
                objects = [client.head(prefix)]  # FileNotFoundError: nothing there
        except ValueError:  # a prefix object_store cannot name
            return None
        if any("%" in key for key, _, _ in objects):
            # object_store percent-encodes characters it refuses in keys: fsspec names them.
            return None
        return {f"{bucket}/{key}": {"size": size, "mtime": mtime} for key, size, mtime in objects}

    def _client(self) -> Any:
        """The native client of the logdir's bucket, or None (fsspec then, unless the native
        transport was asked for: its failure is raised)."""
        if self._native is None:
            return None
        try:
            return self._native.fetcher(self.root.split("/", 1)[0])
        except Exception:
            if self._asked == "native":
                raise
            # No client (AWS would not say the bucket's region, ...): fsspec says what is wrong.
            self._native = None
            return None

    def _read_manifest(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self._manifest_path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("url") == self.url and isinstance(data.get("files"), dict):
                return data["files"]  # type: ignore[no-any-return]
        except (OSError, ValueError):
            pass
        return {}

    def _write_manifest(self, files: Mapping[str, Mapping[str, Any]]) -> None:
        tmp = self._manifest_path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"url": self.url, "endpoint": self._endpoint, "files": files}, f)
        os.replace(tmp, self._manifest_path)

    def sync(self, first: bool = False) -> SyncStats:
        """Bring the mirror up to date. ``first``: a listing failure raises (nothing to read
        yet); later it is reported and the mirror keeps what it had."""
        self.wait()
        with self._lock, self._locked():
            return self._finish(self._sync(first))

    def start(self) -> None:
        """The first refresh of a logdir, fetching in the background: the listing is done here
        (its failure raises), and new files appear in the mirror in (run, file) order, so a
        reader can parse the first files while the others are still being fetched
        (:meth:`follow`). The first file not whole yet appears as soon as its first piece is in,
        and :meth:`follow` says how many of its bytes are there: a large file is parsed as its
        bytes arrive. Anything that reads the mirror otherwise first calls :meth:`wait`."""
        with contextlib.ExitStack() as setup:
            setup.enter_context(self._lock)
            setup.enter_context(self._locked())
            plan = self._plan(first=True)
            held = setup.pop_all()  # released by the fetching thread when it is done
        if any(start > 0 for _, start, _ in plan[3]):
            # A mirror fetched before grows its files in place, in any order: no read until
            # the fetch is done.
            with held:
                self._finish(self._apply(*plan))
            return
        self._progress = threading.Condition()
        self._published = 0
        self._fetching: dict[str, int] = {}
        self._done = False
        if self.single and plan[3]:
            # The reader of one event file opens it now: it is there from the start, empty,
            # and filled in place (follow() says how much of it is there).
            local = self._path_now
            with contextlib.suppress(FileNotFoundError):
                os.remove(local)  # left by an interrupted refresh
            os.close(os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

        def run() -> None:
            try:
                self._finish(self._apply(*plan, publish=self._publish))
            except BaseException as e:  # noqa: BLE001 - raised by wait()/follow() in the reader's thread
                self._failure = e
            finally:
                held.close()
                with self._progress:
                    self._done = True
                    self._progress.notify_all()

        self._thread = threading.Thread(target=run, name="tbscope-mirror", daemon=True)
        self._thread.start()

    def _publish(self, fetching: Mapping[str, int]) -> None:
        with self._progress:
            self._published += 1
            self._fetching = dict(fetching)
            self._progress.notify_all()

    def wait(self) -> None:
        """Until a background refresh (:meth:`start`) is over; re-raises what broke it."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join()
        self._thread = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def follow(self, load: Callable[[dict[str, int]], tuple[int, ...]]) -> list[tuple[int, ...]]:
        """Calls ``load(fetching)`` (a reader's read of what is new in the mirror; ``fetching``:
        the mirror file still being filled in, if any, and how many of its first bytes are
        there, the rest may be holes) each time bytes have arrived, while a background refresh
        runs, and once more after it with ``{}``: the files fetched first are parsed while the
        others are still being fetched. Returns what each call returned."""
        if self._thread is None:
            return [load({})]
        out = []
        seen = 0
        # A read whenever files have arrived since the last one began: a read of the mirror
        # that finds nothing new costs under a millisecond, so rounds follow the fetch as
        # closely as the parse keeps up, and once the last byte is in only the files that
        # arrived during the last round are left to parse (in fixed steps of an eighth of the
        # files, up to an eighth of the logdir was).
        while True:
            with self._progress:
                while self._published == seen and not self._done:
                    self._progress.wait()
                seen, done, fetching = self._published, self._done, self._fetching
            if done:
                break
            out.append(load(fetching))
        self.wait()
        out.append(load({}))
        return out

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Two processes refreshing one mirror take turns (a mirror cleared meanwhile is made again)."""
        from tbscope._cache_root import flocked

        with contextlib.ExitStack() as held:
            while True:
                os.makedirs(self.files_dir, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):  # cleared between the two
                    held.enter_context(flocked(os.path.join(self.dir, "lock")))
                    break
            os.makedirs(self.files_dir, exist_ok=True)  # cleared while this waited for the lock
            yield

    def _finish(self, stats: SyncStats) -> SyncStats:
        self._problems = stats.problems
        self._last = stats
        return stats

    @property
    def problems(self) -> list[FetchProblem]:
        """What the last refresh could not fetch (once it is over)."""
        self.wait()
        return self._problems

    @property
    def last(self) -> SyncStats:
        """What the last refresh did (once it is over)."""
        self.wait()
        return self._last

    def _sync(self, first: bool) -> SyncStats:
        return self._apply(*self._plan(first))

    def _plan(
        self, first: bool
    ) -> tuple[SyncStats, dict[str, dict[str, Any]], dict[str, dict[str, Any]] | None, list[tuple[str, int, int]]]:
        """The listing compared with the manifest: (stats, manifest, listing or None when it
        failed, byte ranges to fetch)."""
        stats = SyncStats()
        have = self._read_manifest()
        # A fresh listing each refresh (fsspec filesystems keep listings otherwise).
        if self._fs is not None:
            self._fs.invalidate_cache(self.root)
        try:
            remote = self.list_files()
        except FileNotFoundError:
            if first:
                raise FileNotFoundError(f"{self.url}: no such logdir or event file") from None
            # A store has no directories: a logdir whose objects were all removed is not there.
            remote = {}
        except Exception as e:  # any store error: raised on the first read, reported later
            if first and not have:
                raise OSError(f"could not list {self.url}: {type(e).__name__}: {e}") from e
            stats.problems.append(
                FetchProblem(
                    ".", "", f"listing {self.url} failed, showing what was fetched before: {type(e).__name__}: {e}"
                )
            )
            return stats, have, None, []
        stats.files = len(remote)
        # Removed remote files go from the mirror too (the reader then drops their runs' rows).
        for rel in set(have) - set(remote):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.files_dir, rel))
            del have[rel]
        jobs: list[tuple[str, int, int]] = []  # (rel, from, to)
        # In the reader's order (runs by name, then a run's files by name): files appear in
        # the mirror in this order, so a read that follows the fetch sees them as a read of
        # the whole logdir does.
        for rel, info in sorted(remote.items(), key=lambda kv: run_file(kv[0])):
            local = os.path.join(self.files_dir, rel)
            old = have.get(rel)
            start = int(old["size"]) if old else 0
            try:
                on_disk = os.path.getsize(local)
            except OSError:
                on_disk = -1
            if old is None or on_disk != start or info["size"] < start:
                start = 0  # new, replaced by something shorter, or the mirror file was touched
            if info["size"] > start or start == 0:
                jobs.append((rel, start, info["size"]))
            elif info["mtime"] is not None and info["mtime"] != old.get("mtime"):  # type: ignore[union-attr]
                have[rel] = info
                with contextlib.suppress(OSError):
                    os.utime(local, (info["mtime"], info["mtime"]))
        return stats, have, remote, jobs

    def _apply(
        self,
        stats: SyncStats,
        have: dict[str, dict[str, Any]],
        remote: dict[str, dict[str, Any]] | None,
        jobs: list[tuple[str, int, int]],
        publish: Callable[[Mapping[str, int]], None] | None = None,
    ) -> SyncStats:
        """Fetches the planned ranges and writes the manifest."""
        if remote is None:
            return stats
        failed = self._fetch(jobs, stats, {rel: remote[rel]["mtime"] for rel, _, _ in jobs}, publish)
        for rel, _start, _end in jobs:
            if rel in failed:
                run = "." if self.single else posixpath.dirname(rel) or "."
                stats.problems.append(FetchProblem(run, rel, f"{self._object_url(rel)}: {failed[rel]}"))
                continue
            have[rel] = remote[rel]
            stats.files_fetched += 1
        self._write_manifest(have)
        return stats

    def _object_url(self, rel: str) -> str:
        return self.url if self.single else self.url.rstrip("/") + "/" + rel

    def _fetch(
        self,
        jobs: list[tuple[str, int, int]],
        stats: SyncStats,
        mtimes: Mapping[str, float | None],
        publish: Callable[[Mapping[str, int]], None] | None = None,
    ) -> dict[str, str]:
        """Fetch every job's byte range in pieces, CONCURRENCY at a time; returns the files
        that failed (rolled back to the size they had) and why. A new file is written beside
        the mirror and moved into it once whole, in job order; a grown file is written in
        place. With ``publish`` (a first fetch, all files new), the first file not whole yet
        moves in as soon as its first piece is in, and ``publish({its path: bytes there})`` is
        called each time that count grows or files move in (``{}`` once none is partial); the
        mirror's other files are whole."""
        if not jobs:
            return {}
        fds: dict[str, int] = {}
        failed: dict[str, str] = {}
        fetched = [0]
        count_lock = threading.Lock()
        pieces: list[tuple[str, int, int]] = []
        left: dict[str, int] = {}  # pieces of each file not done yet
        staged: dict[str, str] = {}  # new files: where they are written until whole
        # New files in the mirror before they are whole (a first fetch's head file, and a
        # single event file, filled in place from the start): the reader reads them up to
        # `there`, a failure truncates them to it.
        shown: set[str] = set()
        step = PIECE_BYTES
        there = {rel: start for rel, start, _ in jobs}  # bytes fetched from the start, in order
        done_beyond: dict[str, set[int]] = {rel: set() for rel, _, _ in jobs}  # pieces past it
        ends = {rel: end for rel, _, end in jobs}
        for rel, start, end in jobs:
            local = os.path.join(self.files_dir, rel)
            in_place = start > 0 or (self.single and publish is not None)
            if not in_place:
                staged[rel] = os.path.join(self.dir, "partial", rel)
                local = staged[rel]
            os.makedirs(os.path.dirname(local), exist_ok=True)
            if start > 0:
                fd = os.open(local, os.O_WRONLY)
                os.ftruncate(fd, start)
            elif in_place:
                fd = os.open(local, os.O_WRONLY)  # made empty by start(), for the reader to open
                shown.add(rel)
            else:
                # Created afresh, never truncated to zero: ext4 writes back a file that was
                # truncated to zero and then written when it is closed (auto_da_alloc), which
                # cost a few ms per 16 MiB file, in the fetch's tail (bench/README.md, "Scale").
                with contextlib.suppress(FileNotFoundError):
                    os.remove(local)  # left by an interrupted refresh
                fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            fds[rel] = fd
            mine = [(rel, s, min(s + step, end)) for s in range(start, end, step)]
            left[rel] = len(mine)
            pieces.extend(mine)
        write = self._piece_writer()
        order = [rel for rel, _, _ in jobs]
        next_up = [0]  # the first job not moved into the mirror yet
        remote_path = {rel: self.root if self.single else self.root + "/" + rel for rel, _, _ in jobs}
        # Once a piece has failed every try, the store is likely down: later pieces try once,
        # so a dead server costs one round of backoff, not one per file.
        gave_up = threading.Event()
        told: dict[str, int] = {}  # what publish last said

        def advance() -> None:
            """Moves every whole file at the head of the job order into the mirror and closes
            it; with ``publish``, moves the head file in as soon as its first piece is in, and
            says what changed (under count_lock)."""
            moved = False
            while next_up[0] < len(order) and left[order[next_up[0]]] <= 0:
                r = order[next_up[0]]
                next_up[0] += 1
                if r not in failed:
                    self._complete(r, fds[r], None if r in shown else staged.get(r), mtimes.get(r))
                    os.close(fds.pop(r))
                    moved = True
                elif r in shown:
                    # Its pieces are all done: from here on the reader reads it to its end.
                    os.ftruncate(fds[r], there[r])
            if publish is None:
                return
            partial: dict[str, int] = {}
            if next_up[0] < len(order):
                r = order[next_up[0]]
                if r not in shown and r not in failed and there[r] > 0:
                    local = os.path.join(self.files_dir, r)
                    os.makedirs(os.path.dirname(local), exist_ok=True)
                    os.replace(staged[r], local)  # its open descriptor goes on writing it
                    shown.add(r)
                if r in shown:
                    partial = {os.path.join(self.files_dir, r): there[r]}
            nonlocal told
            if moved or partial != told:
                told = partial
                publish(partial)

        def arrived(rel: str, s: int) -> None:
            """Piece ``s`` of ``rel`` is in (under count_lock)."""
            done_beyond[rel].add(s)
            while there[rel] in done_beyond[rel]:
                done_beyond[rel].discard(there[rel])
                there[rel] = min(there[rel] + step, ends[rel])

        def finished(rel: str) -> None:
            """One more piece of ``rel`` is done (or given up on)."""
            with count_lock:
                left[rel] -= 1
                advance()

        def one(piece: tuple[str, int, int]) -> None:
            try:
                get(piece)
            finally:
                finished(piece[0])

        def get(piece: tuple[str, int, int]) -> None:
            rel, s, e = piece
            if rel in failed:
                return
            delay = BACKOFF
            tries = 1 if gave_up.is_set() else TRIES
            for attempt in range(tries):
                try:
                    n = write(remote_path[rel], s, e, fds[rel])
                    if n != e - s:
                        raise OSError(f"asked for bytes {s}-{e}, got {n} bytes (the object changed while being read?)")
                    with count_lock:
                        fetched[0] += n
                        arrived(rel, s)
                    return
                except FileNotFoundError as ex:
                    failed.setdefault(rel, f"removed while being fetched: {ex}")
                    return
                except Exception as ex:  # noqa: BLE001 - retried, then reported for this file
                    if attempt == tries - 1 or rel in failed:
                        failed.setdefault(
                            rel, f"fetching bytes {s}-{e} failed after {attempt + 1} tries: {type(ex).__name__}: {ex}"
                        )
                        gave_up.set()
                        return
                    time.sleep(delay)
                    delay *= 2

        try:
            with count_lock:
                advance()  # empty files at the head (an empty file has no pieces)
            if pieces:
                with ThreadPoolExecutor(
                    max_workers=min(CONCURRENCY, len(pieces)), thread_name_prefix="tbscope-fetch"
                ) as pool:
                    list(pool.map(one, pieces))
        finally:
            for rel, fd in fds.items():
                if rel in failed or left[rel] > 0:
                    # Back to what the manifest says the file holds: nothing half-fetched is
                    # read, and a file never fetched whole is not there at all; one the reader
                    # was reading already keeps what it read (the manifest does not name it, so
                    # the next refresh fetches it whole).
                    if rel in shown:
                        os.ftruncate(fd, there[rel])
                    elif rel in staged:
                        with contextlib.suppress(OSError):
                            os.remove(staged[rel])
                    else:
                        os.ftruncate(fd, next(s for r, s, _ in jobs if r == rel))
                    failed.setdefault(rel, "not fetched: the refresh was interrupted")
                os.close(fd)
            _release_freed_memory()
        stats.bytes_fetched = fetched[0]
        return failed

    @property
    def transport(self) -> str:
        """What fetches the bytes: ``native`` or ``fsspec``."""
        return "fsspec" if self._native is None else "native"

    def _piece_writer(self) -> Callable[[str, int, int, int], int]:
        """``write(remote path, start, end, fd)``: bytes [start, end) of an object into ``fd``
        at ``start``, returning the count, by the native transport when it serves this logdir."""
        if self._client() is None:
            return _streamer(self.fs) or self._write_piece
        assert self._native is not None
        native = self._native.piece_writer(self.root.split("/", 1)[0])
        fallback: Callable[[str, int, int, int], int] | None = None

        def write(path: str, start: int, end: int, fd: int) -> int:
            nonlocal fallback
            try:
                return native(path, start, end, fd)
            except ValueError:  # a key object_store cannot name (characters it refuses)
                if fallback is None:
                    fallback = _streamer(self.fs) or self._write_piece
                return fallback(path, start, end, fd)

        return write

    def _write_piece(self, path: str, start: int, end: int, fd: int) -> int:
        """Bytes [start, end) of an object into ``fd`` at ``start``, through any filesystem."""
        data = self.fs.cat_file(path, start=start, end=end)
        os.pwrite(fd, data, start)
        return len(data)

    def _complete(self, rel: str, fd: int, staged: str | None, mtime: float | None) -> None:
        """A file fetched whole: its store's mtime, and a new one moved into the mirror."""
        if mtime is not None:
            os.utime(fd, (mtime, mtime))
        if staged is not None:
            local = os.path.join(self.files_dir, rel)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            os.replace(staged, local)


def _streamer(fs: Any) -> Callable[[str, int, int, int], int] | None:
    """For S3 (s3fs): a function that writes bytes [start, end) of an object into a file at
    ``start`` as they arrive from the socket, STREAM_BYTES at most at a time, with s3fs's own
    retries and error translation: a piece is never held whole in memory, and not copied
    into one bytes object first. None for other filesystems (they get ``cat_file``)."""
    try:
        from fsspec.asyn import sync
        from s3fs import S3FileSystem
        from s3fs.core import _error_wrapper, version_id_kw
    except ImportError:
        return None
    if not isinstance(fs, S3FileSystem):
        return None

    async def stream(path: str, start: int, end: int, fd: int) -> int:
        bucket, key, version = fs.split_path(path)

        async def once() -> int:
            resp = await fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **version_id_kw(version)
            )
            body, n = resp["Body"], 0
            try:
                while chunk := await body.read(STREAM_BYTES):
                    # Small writes on the event loop's thread: page-cache copies, no waiting.
                    os.pwrite(fd, chunk, start + n)
                    n += len(chunk)
            finally:
                body.close()
            return n

        return await _error_wrapper(once, retries=fs.retries)  # type: ignore[no-any-return]

    return lambda path, start, end, fd: sync(fs.loop, stream, path, start, end, fd)


def run_file(rel: str) -> tuple[str, str]:
    """(run, file name) of a logdir-relative path: the order a reader reads files in."""
    return posixpath.dirname(rel) or ".", posixpath.basename(rel)


def _release_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim). The fetch threads
    freed their pieces, but glibc keeps such memory in its per-thread arenas; without this the
    read that follows a fetch would start that much higher (bench/README.md, "Scale")."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim, or no way to


def open_mirror(url: str, storage_options: Mapping[str, Any] | None, background: bool = False) -> Mirror:
    """A mirror of ``url``, refreshed once (a listing failure raises here); ``background``:
    fetching goes on after this returns (see :meth:`Mirror.start`)."""
    m = Mirror(url, storage_options)
    if background:
        m.start()
    else:
        m.sync(first=True)
    return m


def local(path: str, storage_options: Mapping[str, Any] | None = None) -> tuple[str, Mirror | None]:
    """A local path for ``path``: itself, a ``file://`` URL's path, or a remote URL's mirror
    (refreshed now; the Mirror is returned for later refreshes)."""
    url, remote = split_url(path)
    if not remote:
        return url, None
    m = open_mirror(url, storage_options)
    return m.path, m
