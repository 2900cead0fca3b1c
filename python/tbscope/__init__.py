"""tbscope: read TensorBoard event logs at disk speed, without TensorFlow.

>>> import tbscope
>>> df = tbscope.read_scalars("runs/")            # doctest: +SKIP
>>> logdir = tbscope.scan("runs/", tags="loss*")  # doctest: +SKIP
"""

from __future__ import annotations

from tbscope._core import __version__
from tbscope.cache import CacheInfo
from tbscope.curves import downsample, ema
from tbscope.errors import CorruptRecordError
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
    "Report",
    "Result",
    "RewriteStats",
    "Server",
    "SummaryWriter",
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
