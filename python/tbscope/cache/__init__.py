"""``tbscope.cache``: the cache's user-facing functions, as the docs show them (docs/cache.md);
the implementation is the private ``tbscope._cache``.

A package rather than a ``cache.py`` beside ``_cache.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from tbscope._cache import CacheInfo, cache_dir, clear

__all__ = ["CacheInfo", "cache_dir", "clear"]
