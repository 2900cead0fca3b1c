"""The exceptions tbscope defines; every one derives from :class:`TbscopeError`.

Besides these, tbscope raises Python's own exceptions where they say it best: ``ValueError``
and ``TypeError`` for a bad argument, ``FileNotFoundError``, ``PermissionError`` and other
``OSError`` for the file system, ``ImportError`` for a missing optional package and
``KeyboardInterrupt`` when Ctrl-C stops a read. The query errors are also ``ValueError``s, as
they were before this base class existed.

Every exception here pickles (a ``ProcessPoolExecutor`` worker can raise it to its parent),
with its message and attributes. This module imports nothing of tbscope's, so the native module
can raise its classes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CorruptRecordError",
    "QueryError",
    "QueryTimeoutError",
    "QueryTooLargeError",
    "RewriteError",
    "TbscopeError",
]


class TbscopeError(Exception):
    """Base class of every exception tbscope defines. The native module raises it as is for
    a failure inside tbscope itself (a bug: please report it)."""


class CorruptRecordError(TbscopeError):
    """A record, value or file could not be read and ``strict=True`` was asked for; the
    message names the file and the byte offset."""


class QueryError(TbscopeError, ValueError):
    """The SQL query could not be parsed, bound or run; the message says why."""


class QueryTimeoutError(QueryError):
    """The query ran longer than its ``timeout=`` and was stopped."""

    def __init__(self, message: str, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.timeout))


class QueryTooLargeError(QueryError):
    """The query returned more rows than its ``max_rows=``."""

    def __init__(self, message: str, max_rows: int) -> None:
        super().__init__(message)
        self.max_rows = max_rows

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.max_rows))


class RewriteError(TbscopeError, RuntimeError):
    """The rewritten logdir did not read back as the filtered input; it is left at
    ``staging`` for inspection and nothing was written under the output's name."""

    def __init__(self, message: str, staging: str) -> None:
        super().__init__(message)
        self.staging = staging

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles as type(self)(*self.args): staging would be lost.
        return (type(self), (self.args[0], self.staging))
