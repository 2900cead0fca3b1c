"""tbscope: read TensorBoard event logs at disk speed, without TensorFlow.

>>> import tbscope
>>> df = tbscope.read_scalars("runs/")            # doctest: +SKIP
>>> logdir = tbscope.scan("runs/", tags="loss*")  # doctest: +SKIP
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

from tbscope._core import __version__
from tbscope._export import ExportStats, export
from tbscope._frames import BlobFrame, Frame, TensorFrame
from tbscope._reader import (
    Logdir,
    read_audio,
    read_histograms,
    read_images,
    read_logs,
    read_scalars,
    read_tensors,
    read_text,
    scan,
)
from tbscope._report import LoadStats, Problem, Report
from tbscope._rewrite import RewriteStats
from tbscope.errors import CorruptRecordError, QueryError, RewriteError, TbscopeError

# tbscope.rewrite is a function and also a module (tbscope.rewrite.RewriteError, as the docs
# show): the module is imported first and the function bound after it, so that the function
# stays the package's attribute whatever imports the module later.
_import_module("tbscope.rewrite")
from tbscope._rewrite import rewrite  # noqa: E402 - after the module of the same name, see above

if TYPE_CHECKING:
    from tbscope._cache import CacheInfo
    from tbscope._curves import downsample, ema
    from tbscope._projector import Embedding
    from tbscope._query import Result
    from tbscope._sql import sql
    from tbscope._writer.api import SummaryWriter
    from tbscope.server import Server, serve

# The rest of the namespace is imported on first use (PEP 562): a command or a server that
# needs only the reader does not pay for the writer, SQL and the server's modules.
_LAZY = {
    "Embedding": "tbscope._projector",
    "CacheInfo": "tbscope._cache",
    "downsample": "tbscope._curves",
    "ema": "tbscope._curves",
    "Result": "tbscope._query",
    "sql": "tbscope._sql",
    "Server": "tbscope.server",
    "serve": "tbscope.server",
    "SummaryWriter": "tbscope._writer.api",
}


def __getattr__(name: str) -> Any:
    import importlib.util

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    # Public submodules (tbscope.compat, tbscope.query...) as attributes, as when they were imported.
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tbscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BlobFrame",
    "CacheInfo",
    "CorruptRecordError",
    "Embedding",
    "ExportStats",
    "Frame",
    "LoadStats",
    "Logdir",
    "Problem",
    "QueryError",
    "Report",
    "Result",
    "RewriteError",
    "RewriteStats",
    "Server",
    "SummaryWriter",
    "TbscopeError",
    "TensorFrame",
    "__version__",
    "downsample",
    "ema",
    "export",
    "read_audio",
    "read_histograms",
    "read_images",
    "read_logs",
    "read_scalars",
    "read_tensors",
    "read_text",
    "rewrite",
    "scan",
    "serve",
    "sql",
]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext tbscope``: the ``%tbscope --logdir DIR`` magic (see :mod:`tbscope.notebook`)."""
    from tbscope.notebook import load_ipython_extension as load

    load(ipython)
