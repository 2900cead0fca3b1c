"""Exceptions tbscope raises (besides the builtin ones: FileNotFoundError, ValueError, ...)."""

from __future__ import annotations

from tbscope._core import CorruptRecordError

__all__ = ["CorruptRecordError"]
