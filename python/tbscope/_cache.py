"""Where :func:`tbscope.scan`'s incremental cache lives, and what it did (see ``docs/cache.md``).

``scan(path, cache=True)`` keeps the scan's state and rows in a cache directory so that opening
the logdir again reads only the bytes written since. The directory is, in order:

- ``cache="some/dir"``: that directory (the only way to put a cache inside a logdir);
- ``cache=True``: ``$TBSCOPE_CACHE_DIR/<name>-<hash>``, else ``$XDG_CACHE_HOME/tbscope/...``,
  else ``~/.cache/tbscope/...``, where ``<hash>`` is a hash of the logdir's resolved path.

The native reader writes and validates the cache; problems with it are logged as warnings on
the ``tbscope.cache`` logger and the data then comes from the logdir: a cache never raises.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from typing import Union

from tbscope._cache_root import ROOT_ENV, default_root, remove_cache

__all__ = ["CacheInfo", "Cache", "cache_dir", "clear", "default_root", "resolve"]

log = logging.getLogger("tbscope.cache")

#: The CLI reads through the cache by default when this is ``1`` (``--no-cache`` overrides it).
CLI_ENV = "TBSCOPE_CACHE"

Cache = Union[bool, str, os.PathLike[str], None]


@dataclass(frozen=True)
class CacheInfo:
    """What the cache did on a scan's last read.

    ``status``: ``"miss"`` (no usable cache: everything was read from the logdir, and the cache
    written), ``"hit"`` (nothing changed: nothing was read from the logdir), ``"updated"`` (only
    new bytes were read, or runs whose files were replaced, truncated or deleted were read
    again) or ``"unread"``. ``written``: a new cache generation was published. ``warnings``:
    why the cache could not be used or written (the data then came from the logdir).
    ``runs_rechecked``: how many runs the read looked at again past the change check (those
    whose files moved or whose directory changed; every run when it had to discover the logdir
    again). ``dirs_listed``: how many directories it listed (only those that changed, after a
    warm open's check).
    """

    dir: str
    status: str
    generation: str | None
    written: bool
    runs_dropped: int
    warnings: tuple[str, ...]
    runs_rechecked: int = 0
    dirs_listed: int = 0


def cache_dir(path: str | os.PathLike[str]) -> str:
    """The default cache directory of the logdir (or event file) ``path``: a subdirectory of
    :func:`default_root` named after the logdir and a hash of its resolved path."""
    real = os.path.realpath(os.fspath(path))
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    # The name only helps a human find it; the hash is what keys it.
    name = (
        "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(real.rstrip(os.sep)))[:40] or "root"
    )
    return os.path.join(default_root(), f"{name}-{digest}")


def _inside(child: str, parent: str) -> bool:
    child, parent = os.path.realpath(child), os.path.realpath(parent)
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def resolve(path: str | os.PathLike[str], cache: Cache) -> str | None:
    """The cache directory a scan of ``path`` uses for ``cache=`` (None: no cache).

    ``True`` takes :func:`cache_dir`, which must lie outside the logdir: a default that points
    inside it (``TBSCOPE_CACHE_DIR`` set to a folder in the logdir) is refused with a warning and
    the scan reads without a cache. A directory given explicitly is used as it is.
    """
    if cache is None or cache is False:
        return None
    if cache is True:
        d = cache_dir(path)
        if os.path.isdir(path) and _inside(d, os.fspath(path)):
            log.warning(
                "not caching: the default cache directory %s is inside the logdir %s; set %s to a folder outside it, or pass cache=<dir> to put it there on purpose",
                d,
                os.fspath(path),
                ROOT_ENV,
            )
            return None
        return d
    if isinstance(cache, (str, os.PathLike)):
        return os.path.abspath(os.fspath(cache))
    raise TypeError(f"cache= takes True, False, None or a directory path; got {type(cache).__name__}")


def clear(path: str | os.PathLike[str], cache: Cache = True) -> bool:
    """Delete the cache of the logdir ``path`` (``cache=`` as given to :func:`tbscope.scan`).
    Returns whether there was one. The logdir itself is never touched: only the names a cache
    writes are deleted (``tbscope._cache_root.remove_cache``)."""
    d = resolve(path, cache)
    return d is not None and remove_cache(d)
