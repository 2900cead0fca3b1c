"""tbscope: read TensorBoard event logs at disk speed, without TensorFlow.

>>> import tbscope
>>> df = tbscope.read_scalars("runs/")            # doctest: +SKIP
>>> logdir = tbscope.scan("runs/", tags="loss*")  # doctest: +SKIP
"""

from __future__ import annotations

from tbscope._core import __version__
from tbscope.cache import CacheInfo
from tbscope.curves import downsample, ema
from tbscope.errors import CorruptRecordError, QueryError, RewriteError, TbscopeError
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
    read_scalars,
    read_tensors,
    read_text,
    scan,
)
from tbscope.query import Result, sql
from tbscope.rewrite import RewriteStats, rewrite
from tbscope.server import Server, serve
from tbscope.writer import SummaryWriter

__all__ = [
    "BlobFrame",
    "CacheInfo",
    "CorruptRecordError",
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
