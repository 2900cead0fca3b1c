"""``tbscope.cache``: the cache's user-facing functions, as the docs show them (docs/cache.md);
the implementation is the private ``tbscope._cache``.

A package rather than a ``cache.py`` beside ``_cache.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from tbscope import _cache, _mirror
from tbscope._cache import Cache, CacheInfo, cache_dir

__all__ = ["CacheInfo", "cache_dir", "clear"]


def clear(path: str | os.PathLike[str], cache: Cache = True, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Delete the cache of the logdir ``path`` (``cache=`` as given to :func:`tbscope.scan`).
    For a remote logdir (``s3://...``, with the ``storage_options`` its scan took), delete its
    local mirror too: the copy of its event files that reads and reloads go by (docs/scale.md);
    the next read fetches everything again. Returns whether there was anything to delete. The
    logdir itself is never touched."""
    if _mirror.is_url(path):
        url, remote = _mirror.split_url(path)  # type: ignore[arg-type]
        if not remote:
            return _cache.clear(url, cache)
        m = _mirror.Mirror(url, storage_options)
        # A scan keys its cache by what it reads: the mirror's logdir, or its one event file.
        one_file = os.path.join(m.files_dir, posixpath.basename(m.root))
        had_cache = _cache.clear(m.files_dir, cache) | _cache.clear(one_file, cache)
        return m.clear() or had_cache
    if storage_options:
        raise ValueError(f"storage_options= is for URLs (s3://..., gs://...); {os.fspath(path)!r} is a local path")
    return _cache.clear(path, cache)
