"""``tbscope.cache``: the cache's user-facing functions, as the docs show them (docs/cache.md);
the implementation is the private ``tbscope._cache`` (and ``tbscope._cache_root`` for what lies
under the cache root).

A package rather than a ``cache.py`` beside ``_cache.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from tbscope import _cache, _cache_root, _mirror
from tbscope._cache import Cache, CacheInfo, cache_dir
from tbscope._cache_root import CacheEntry

__all__ = ["CacheEntry", "CacheInfo", "cache_dir", "clear", "entries"]


def entries() -> list[CacheEntry]:
    """Every cache and remote logdir mirror under the cache root (``$TBSCOPE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/tbscope``, else ``~/.cache/tbscope``), the most recently used first: what
    ``tbscope cache ls`` lists. Caches put elsewhere with ``cache="some/dir"`` (or mirrors with
    ``storage_options={"mirror": ...}``) are not among them.

    >>> import time, tbscope
    >>> week = time.time() - 7 * 86400
    >>> for e in tbscope.cache.entries():  # doctest: +SKIP
    ...     if e.last_used < week:
    ...         tbscope.cache.clear(e)
    """
    return _cache_root.entries()


def _belonging_to(
    path: str | os.PathLike[str], cache: Cache, storage_options: Mapping[str, Any] | None
) -> list[CacheEntry]:
    """The entries that belong to the logdir or URL ``path``: its cache and, for a remote
    logdir, its mirror and the cache of a scan of the mirror (``cache=`` as :func:`tbscope.scan`
    takes it, ``storage_options`` as the scans of the URL took them)."""
    if _mirror.is_url(path):
        url, remote = _mirror.split_url(path)  # type: ignore[arg-type]
        if not remote:
            return _belonging_to(url, cache, None)
        m = _mirror.Mirror(url, storage_options)
        # A scan keys its cache by what it reads: the mirror's logdir, or its one event file.
        one_file = os.path.join(m.files_dir, posixpath.basename(m.root))
        dirs = {d: "cache" for d in (_cache.resolve(m.files_dir, cache), _cache.resolve(one_file, cache)) if d}
        dirs[m.dir] = "mirror"
    else:
        if storage_options:
            raise ValueError(f"storage_options= is for URLs (s3://..., gs://...); {os.fspath(path)!r} is a local path")
        d = _cache.resolve(path, cache)
        dirs = {d: "cache"} if d else {}
    return [e for e in (_cache_root.entry(d, kind) for d, kind in dirs.items()) if e is not None]


def clear(
    path: str | os.PathLike[str] | CacheEntry,
    cache: Cache = True,
    storage_options: Mapping[str, Any] | None = None,
    *,
    wait: bool = True,
) -> bool:
    """Delete the cache of the logdir ``path`` (``cache=`` as given to :func:`tbscope.scan`).
    For a remote logdir (``s3://...``, with the ``storage_options`` its scan took), delete its
    local mirror too: the copy of its event files that reads and reloads go by (docs/scale.md);
    the next read fetches everything again. ``path`` may also be one of :func:`entries`.

    Returns whether there was anything to delete. The logdir itself is never touched: only the
    files tbscope writes in a cache or mirror are deleted. A mirror being refreshed by another
    process, or a cache whose new generation another process is publishing, is deleted once
    that is over; with ``wait=False`` it raises :class:`BlockingIOError` instead (and a cache that another
    process is still writing raises it too)."""
    if isinstance(path, CacheEntry):
        return _cache_root.remove(path, wait)
    found = False
    for e in _belonging_to(path, cache, storage_options):
        found = _cache_root.remove(e, wait) or found
    return found
