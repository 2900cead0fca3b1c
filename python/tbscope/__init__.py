"""tbscope: read TensorBoard event logs at disk speed, without TensorFlow.

>>> import tbscope
>>> df = tbscope.read_scalars("runs/")            # doctest: +SKIP
>>> logdir = tbscope.scan("runs/", tags="loss*")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tbscope._core import __version__
from tbscope.errors import CorruptRecordError, QueryError, RewriteError, TbscopeError

# export and rewrite are functions named like their modules: imported here, so that the
# function, not the module, is the package's attribute whatever imports the module later.
from tbscope.export import ExportStats, export
from tbscope.frames import BlobFrame, Frame, TensorFrame
from tbscope.reader import (
    LoadStats,
    Logdir,
    Problem,
    Report,
    read_audio,
    read_histograms,
    read_images,
    read_logs,
    read_scalars,
    read_tensors,
    read_text,
    scan,
)
from tbscope.rewrite import RewriteStats, rewrite

if TYPE_CHECKING:
    from tbscope._projector import Embedding
    from tbscope.cache import CacheInfo
    from tbscope.curves import downsample, ema
    from tbscope.query import Result, sql
    from tbscope.server import Server, serve
    from tbscope.writer import SummaryWriter

# The rest of the namespace is imported on first use (PEP 562): a command or a server that
# needs only the reader does not pay for the writer, SQL and the server's modules.
_LAZY = {
    "Embedding": "tbscope._projector",
    "CacheInfo": "tbscope.cache",
    "downsample": "tbscope.curves",
    "ema": "tbscope.curves",
    "Result": "tbscope.query",
    "sql": "tbscope.query",
    "Server": "tbscope.server",
    "serve": "tbscope.server",
    "SummaryWriter": "tbscope.writer",
}


def __getattr__(name: str) -> Any:
    import importlib.util

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    # Submodules (tbscope.writer, tbscope.query...) as attributes, as when they were imported.
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
