"""What lies under the cache root (:func:`default_root`): the caches of scans
with ``cache=True`` and the local mirrors of remote logdirs, listed with the logdir or URL each
belongs to, its size and its last use, and removed one by one without cutting into another
process's refresh or cache write (``tbscope cache``, ``docs/cache.md``).

An entry is removed name by name, only the names tbscope writes there: a directory holding
anything else keeps it (and stays). A mirror's refresh holds its ``lock`` file (flock); a
cache's writer holds its ``.lock`` while it publishes, and writes into a ``tmp-<host>-<pid>-*``
directory before that. Removal takes the same lock, so it waits for (or, asked not to wait,
refuses) a refresh or a publication in progress, and it leaves a live writer's temporary
directory alone. Removing a cache under a reader is safe: what it mapped stays mapped, and
what it has not opened yet is read from the logdir instead (the cache never raises).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "REMOTE",
    "ROOT_ENV",
    "CacheEntry",
    "InUse",
    "default_root",
    "entries",
    "entry",
    "flocked",
    "note_use",
    "remove",
    "remove_cache",
    "remove_mirror",
]

#: Where caches go (one subdirectory per logdir) when ``cache=True``, and mirrors (under
#: ``remote/``).
ROOT_ENV = "TBSCOPE_CACHE_DIR"
#: Written by a read through a cache under the root: the logdir (or URL) it read, and by its
#: mtime, when it last did.
SOURCE = "source.json"
#: The subdirectory of the root that holds the mirrors.
REMOTE = "remote"
#: A writer's temporary directory on another host (whose process cannot be asked) counts as
#: live for as long as the Rust cache's own cleanup spares it (generation.rs, STALE_TMP).
STALE_TMP = 24 * 3600.0


class InUse(BlockingIOError):
    """An entry that another process is refreshing or writing, left alone because the caller
    asked not to wait (``wait=False``)."""


@dataclass(frozen=True)
class CacheEntry:
    """One cache or mirror on this machine (:func:`tbscope.cache.entries`).

    ``kind``: ``"cache"`` (a scan's cache, ``cache=True``) or ``"mirror"`` (the local copy of a
    remote logdir's event files). ``source``: the logdir (resolved path) or URL it belongs to;
    None when the entry does not say (written by an older tbscope, or never completed).
    ``endpoint``: a mirror's S3-compatible endpoint, when its storage options named one.
    ``bytes``: disk space used (allocated blocks, each hard-linked file once, as ``du``);
    ``files``: regular files. ``last_used``: epoch seconds of the last read through it (a
    cache that an older tbscope wrote: the last time it was written; a mirror: its last
    refresh, which every read of a remote logdir does). ``path``: its directory.
    """

    kind: str
    source: str | None
    path: str
    bytes: int
    files: int
    last_used: float
    endpoint: str | None = None


def default_root() -> str:
    """The directory holding one cache per logdir: ``$TBSCOPE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/tbscope``, else ``~/.cache/tbscope``."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tbscope")


# -- locks --------------------------------------------------------------------------------------


@contextlib.contextmanager
def flocked(path: str, wait: bool = True) -> Iterator[None]:
    """An exclusive flock on the file ``path`` (created if missing; its directory must exist).
    Once held, the file is checked to be still the one at ``path``: a lock file removed (with
    its entry) while this waited for it is taken afresh, so two holders never lock two files of
    the same name. ``wait=False``: :class:`InUse` when another holds it."""
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise InUse(f"{os.path.dirname(path)} is in use by another process") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                return
        finally:
            os.close(fd)


# -- what an entry is ----------------------------------------------------------------------------


def _host_part() -> str:
    """This host's name as a cache writer puts it in its temporary directory's name
    (generation.rs, host_part: every character but ASCII letters and digits made ``_``)."""
    import socket

    name = socket.gethostname().replace("/", "_") or "localhost"
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)


def _live_writer(d: str, name: str) -> bool:
    """Whether ``tmp-<host>-<pid>-...`` in the cache ``d`` is a writer still at work: this
    host's while its process lives, another host's for :data:`STALE_TMP` (the Rust cache's
    cleanup rule, generation.rs ``clean_tmp``)."""
    host, _, rest = name[len("tmp-") :].partition("-")
    pid = rest.partition("-")[0]
    if host == _host_part() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        return time.time() - os.stat(os.path.join(d, name)).st_mtime < STALE_TMP
    except OSError:
        return False


#: The names a cache writes in its directory (cache/mod.rs: generations and temporary
#: directories named by `unique_name`; SOURCE is written by Python), and a mirror (_mirror.py).
#: Exact patterns, so that a directory such as a run named ``gen-1`` is never taken for one.
_CACHE_NAMES = re.compile(
    r"CURRENT|\.lock|source\.json(\.\d+\.tmp)?|CURRENT\.tmp-[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"
    r"|gen-[0-9a-f]{16}-[0-9a-f]+-[0-9a-f]+|tmp-[A-Za-z0-9_]*-\d+-[0-9a-f]+"
)
_MIRROR_NAMES = re.compile(r"logdir|partial|lock|manifest\.json(\.\d+\.tmp)?")


def _cache_name(name: str) -> bool:
    return _CACHE_NAMES.fullmatch(name) is not None


def _mirror_name(name: str) -> bool:
    return _MIRROR_NAMES.fullmatch(name) is not None


def _usage(d: str) -> tuple[int, int]:
    """(bytes allocated, regular files) under ``d``, as ``du -s`` counts: every file and
    directory, each inode once (a cache's generations share their segments by hard links)."""
    seen: set[tuple[int, int]] = set()
    used = files = 0
    for top, _dirs, names in os.walk(d):
        for p in [top] + [os.path.join(top, n) for n in names]:
            try:
                st = os.lstat(p)
            except OSError:
                continue  # removed meanwhile
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            used += st.st_blocks * 512
            files += stat.S_ISREG(st.st_mode)
    return used, files


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _read_json(path: str) -> dict[str, object]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def entry(path: str, kind: str) -> CacheEntry | None:
    """The cache (``kind="cache"``) or mirror (``"mirror"``) in the directory ``path``, or None
    when it holds none."""
    try:
        names = os.listdir(path)
    except (NotADirectoryError, FileNotFoundError):
        return None
    if kind == "cache":
        if not any(_cache_name(n) for n in names):
            return None
        meta = _read_json(os.path.join(path, SOURCE))
        # A read leaves SOURCE's mtime; a publication, CURRENT's and the directory's.
        last = max(_mtime(os.path.join(path, n)) for n in (SOURCE, "CURRENT", "."))
        source, endpoint = meta.get("source"), None
    elif kind == "mirror":
        if not any(_mirror_name(n) for n in names):
            return None
        meta = _read_json(os.path.join(path, "manifest.json"))
        # Every refresh rewrites the manifest (when the listing worked).
        last = max(_mtime(os.path.join(path, n)) for n in ("manifest.json", "."))
        source, endpoint = meta.get("url"), meta.get("endpoint")
    else:
        raise ValueError(f"kind= is 'cache' or 'mirror', not {kind!r}")
    used, files = _usage(path)
    return CacheEntry(
        kind,
        source if isinstance(source, str) else None,
        path,
        used,
        files,
        last,
        endpoint if isinstance(endpoint, str) and endpoint else None,
    )


def entries(root: str | None = None) -> list[CacheEntry]:
    """Every cache and mirror under ``root`` (default: the cache root), the most recently used
    first. Directories that are neither are left out."""
    root = default_root() if root is None else os.path.abspath(root)
    found = []
    for kind, top in (("cache", root), ("mirror", os.path.join(root, REMOTE))):
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue
        for n in names:
            if kind == "cache" and n == REMOTE:
                continue
            e = entry(os.path.join(top, n), kind)
            if e is not None:
                found.append(e)
    found.sort(key=lambda e: (-e.last_used, e.path))
    return found


# -- removal -------------------------------------------------------------------------------------


def _delete(p: str) -> bool:
    """Removes a file or a tree; whether it held a file."""
    if os.path.isdir(p) and not os.path.islink(p):
        had = any(files for _, _, files in os.walk(p))
        shutil.rmtree(p)
        return had
    with contextlib.suppress(FileNotFoundError):
        os.remove(p)
        return True
    return False


def remove_cache(d: str, wait: bool = True) -> bool:
    """Deletes the cache in ``d`` (the names it writes; ``d`` too once empty) under its lock;
    returns whether there was one. A live writer's temporary directory stays (the generation it
    publishes is one of the logdir as it read it): with ``wait=False`` such a writer, or one
    publishing, raises :class:`InUse` and nothing is deleted."""

    def live(d: str) -> list[str]:
        return [n for n in os.listdir(d) if n.startswith("tmp-") and _live_writer(d, n)]

    return _remove(d, _cache_name, ".lock", wait, live)


def remove_mirror(d: str, wait: bool = True) -> bool:
    """Deletes the mirror in ``d`` (its files, manifest, partial downloads and lock; ``d`` too
    once empty) under its lock, so that a refresh in another process is never cut in two
    (``wait=False``: :class:`InUse` while one runs). Returns whether it held any file."""
    return _remove(d, _mirror_name, "lock", wait, lambda d: [])


def _remove(d: str, ours: Callable[[str], bool], lock: str, wait: bool, live: Callable[[str], list[str]]) -> bool:
    """Deletes the names of ``d`` that ``ours`` accepts under the flock of ``d/lock``, except
    those ``live`` names (in use by another process: with ``wait=False``, :class:`InUse` and
    nothing deleted); the lock file goes too when nothing is live, and ``d`` once empty.
    Returns whether anything deleted held a file."""
    try:
        if not any(ours(n) for n in os.listdir(d)):
            return False
    except (FileNotFoundError, NotADirectoryError):
        return False
    found = False
    try:
        with flocked(os.path.join(d, lock), wait):
            in_use = live(d)
            if in_use and not wait:
                raise InUse(f"{d} is being written by another process ({in_use[0]})")
            for n in os.listdir(d):
                if ours(n) and n not in in_use and n != lock:
                    found = _delete(os.path.join(d, n)) or found
            if not in_use:
                # Under the lock: a process waiting for it finds it gone (see flocked).
                _delete(os.path.join(d, lock))
    except FileNotFoundError:
        return found  # removed meanwhile
    with contextlib.suppress(OSError):
        os.rmdir(d)
    return found


def remove(e: CacheEntry, wait: bool = True) -> bool:
    """Deletes the entry ``e`` (:func:`remove_cache` or :func:`remove_mirror`)."""
    return (remove_cache if e.kind == "cache" else remove_mirror)(e.path, wait)


# -- what a read leaves ----------------------------------------------------------------------------


def note_use(cache_dir: str, source: str) -> None:
    """After a read through the cache in ``cache_dir``: records ``source`` (the logdir's
    resolved path, or the URL of a remote one) in it, and now as its last use. Only for caches
    under the cache root (those ``tbscope cache`` lists); a failure is ignored (a cache never
    raises). Costs one small read and a utime when the source is recorded already."""
    if os.path.dirname(cache_dir) != default_root():
        return
    p = os.path.join(cache_dir, SOURCE)
    with contextlib.suppress(OSError):
        if _read_json(p).get("source") == source:
            os.utime(p)
            return
        if not os.path.isdir(cache_dir):
            return  # nothing written (yet)
        tmp = f"{p}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"source": source}, f)
        os.replace(tmp, p)
