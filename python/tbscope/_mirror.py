"""Remote logdirs (``s3://``, ``gs://``, ``az://``, ``memory://``, any fsspec protocol): a local
mirror of their event files, kept up to date with concurrent ranged reads, that the Rust
reader then reads like any logdir (``docs/scale.md`` says why).

A refresh lists the logdir once, compares sizes with the mirror's manifest, fetches the new
bytes of every new or grown file in pieces on a thread pool (each piece written where it
belongs as soon as it arrives, so no object is ever held whole in memory), retries a failed
piece with backoff, and rolls a file that still fails back to the bytes it had: it is reported,
the rest is read. ``file://`` URLs are plain paths and need no mirror.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import posixpath
import re
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Mirror", "is_url", "local", "open_mirror", "parse_storage_option", "split_url", "use_storage_options"]

#: Bytes per ranged request, and requests in flight per refresh: at most their product is
#: held in memory while fetching.
PIECE_BYTES = 8 << 20
CONCURRENCY = 16
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
        self.url = url
        self.fs, self.root = _fs(url, options)
        self.root = self.root.rstrip("/")
        if root is None:
            from tbscope._cache import default_root

            # Keyed by the URL and the endpoint: the same bucket name on two servers differs.
            key = json.dumps([url.rstrip("/"), str(options.get("endpoint_url") or options.get("client_kwargs") or "")])
            name = posixpath.basename(self.root) or "root"
            root = os.path.join(
                default_root(), "remote", f"{name[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
            )
        self.dir = os.path.abspath(os.fspath(root))
        self.files_dir = os.path.join(self.dir, "logdir")
        self._manifest_path = os.path.join(self.dir, "manifest.json")
        self._lock = threading.Lock()
        self.single = False  # the URL names one event file
        self.problems: list[FetchProblem] = []
        self.last = SyncStats()  # what the last refresh did

    # -- where things are ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """What the Rust reader opens: the mirror's logdir, or its one event file."""
        if self.single:
            return os.path.join(self.files_dir, posixpath.basename(self.root))
        return self.files_dir

    # -- refresh ------------------------------------------------------------------------------

    def _list(self) -> dict[str, dict[str, Any]]:
        """Event files: path relative to the root → {size, mtime}. One listing call."""
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
            json.dump({"url": self.url, "files": files}, f)
        os.replace(tmp, self._manifest_path)

    def sync(self, first: bool = False) -> SyncStats:
        """Bring the mirror up to date. ``first``: a listing failure raises (nothing to read
        yet); later it is reported and the mirror keeps what it had."""
        with self._lock:
            os.makedirs(self.files_dir, exist_ok=True)
            with open(os.path.join(self.dir, "lock"), "a") as lockf:
                # Two processes refreshing one mirror take turns.
                fcntl.flock(lockf, fcntl.LOCK_EX)
                try:
                    stats = self._sync(first)
                finally:
                    fcntl.flock(lockf, fcntl.LOCK_UN)
            self.problems = stats.problems
            self.last = stats
            return stats

    def _sync(self, first: bool) -> SyncStats:
        stats = SyncStats()
        have = self._read_manifest()
        # A fresh listing each refresh (fsspec filesystems keep listings otherwise).
        self.fs.invalidate_cache(self.root)
        try:
            remote = self._list()
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
            return stats
        stats.files = len(remote)
        # Removed remote files go from the mirror too (the reader then drops their runs' rows).
        for rel in set(have) - set(remote):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.files_dir, rel))
            del have[rel]
        jobs: list[tuple[str, int, int]] = []  # (rel, from, to)
        for rel, info in sorted(remote.items()):
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
        failed = self._fetch(jobs, stats)
        for rel, _start, _end in jobs:
            if rel in failed:
                run = "." if self.single else posixpath.dirname(rel) or "."
                stats.problems.append(FetchProblem(run, rel, f"{self._object_url(rel)}: {failed[rel]}"))
                continue
            info = remote[rel]
            local = os.path.join(self.files_dir, rel)
            if info["mtime"] is not None:
                os.utime(local, (info["mtime"], info["mtime"]))
            have[rel] = info
            stats.files_fetched += 1
        self._write_manifest(have)
        return stats

    def _object_url(self, rel: str) -> str:
        return self.url if self.single else self.url.rstrip("/") + "/" + rel

    def _fetch(self, jobs: list[tuple[str, int, int]], stats: SyncStats) -> dict[str, str]:
        """Fetch every job's byte range in pieces, CONCURRENCY at a time; returns the files
        that failed (rolled back to the size they had) and why."""
        if not jobs:
            return {}
        fds: dict[str, int] = {}
        failed: dict[str, str] = {}
        fetched = [0]
        count_lock = threading.Lock()
        pieces: list[tuple[str, int, int]] = []
        for rel, start, end in jobs:
            local = os.path.join(self.files_dir, rel)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            fd = os.open(local, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(fd, start)
            fds[rel] = fd
            pieces.extend((rel, s, min(s + PIECE_BYTES, end)) for s in range(start, end, PIECE_BYTES))
        remote_path = {rel: self.root if self.single else self.root + "/" + rel for rel, _, _ in jobs}
        # Once a piece has failed every try, the store is likely down: later pieces try once,
        # so a dead server costs one round of backoff, not one per file.
        gave_up = threading.Event()

        def one(piece: tuple[str, int, int]) -> None:
            rel, s, e = piece
            if rel in failed:
                return
            delay = BACKOFF
            tries = 1 if gave_up.is_set() else TRIES
            for attempt in range(tries):
                try:
                    data = self.fs.cat_file(remote_path[rel], start=s, end=e)
                    if len(data) != e - s:
                        raise OSError(
                            f"asked for bytes {s}-{e}, got {len(data)} bytes (the object changed while being read?)"
                        )
                    os.pwrite(fds[rel], data, s)
                    with count_lock:
                        fetched[0] += len(data)
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
            with ThreadPoolExecutor(
                max_workers=min(CONCURRENCY, len(pieces)), thread_name_prefix="tbscope-fetch"
            ) as pool:
                list(pool.map(one, pieces))
        finally:
            for rel, fd in fds.items():
                if rel in failed:
                    # Back to what the manifest says the file holds: nothing half-fetched is
                    # read, and a file never fetched whole is not there at all.
                    start = next(s for r, s, _ in jobs if r == rel)
                    os.ftruncate(fd, start)
                    if start == 0:
                        with contextlib.suppress(OSError):
                            os.remove(os.path.join(self.files_dir, rel))
                os.close(fd)
            _release_freed_memory()
        stats.bytes_fetched = fetched[0]
        return failed


def _release_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim). The fetch threads
    freed their pieces, but glibc keeps such memory in its per-thread arenas; without this the
    read that follows a fetch would start that much higher (bench/README.md, "Scale")."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim, or no way to


def open_mirror(url: str, storage_options: Mapping[str, Any] | None) -> Mirror:
    """A mirror of ``url``, refreshed once (a listing failure raises here)."""
    m = Mirror(url, storage_options)
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
