"""``tbscope.cache``: the cache's user-facing functions, as the docs show them (docs/cache.md);
the implementation is the private ``tbscope._cache`` (and ``tbscope._cache_root`` for what lies
under the cache root).

A package rather than a ``cache.py`` beside ``_cache.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tbscope import _cache_root
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
    for e in _cache_root.belonging_to(path, cache, storage_options):
        found = _cache_root.remove(e, wait) or found
    return found
