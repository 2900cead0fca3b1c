"""``tbscope.sql()``: a query over a logdir path or a :class:`tbscope.Logdir`.

The entry point above both the reader (which opens a path) and the SQL engine
(:mod:`tbscope._query`, which runs over an opened scan, :meth:`tbscope.Logdir.sql`), so that
neither of the two imports the other's caller.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tbscope import _query
from tbscope._query import Result
from tbscope._reader import Logdir, scan

__all__ = ["sql"]


def sql(
    source: str | os.PathLike[str] | Logdir,
    query: str,
    *,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    timeout: float | None = None,
    external_access: bool = False,
    **scan_kwargs: Any,
) -> Result:
    """Run a DuckDB SQL query over a logdir's tables.

    Tables: ``scalars``, ``tensors``, ``histograms``, ``text``, ``images``, ``audio`` (one row
    per point), ``series`` (per run and tag), ``runs`` (per run), ``hparams`` (per run with
    hparams) and ``summary`` (:meth:`Logdir.summary`). Only the tables the query names are read,
    and ``run``/``tag``/``step`` predicates of its WHERE clauses are pushed into the scan.

    ``source`` is a logdir or event file path (with ``scan()`` filters as keyword arguments) or a
    :class:`tbscope.Logdir`; a Logdir that has already been read is queried from memory.
    ``params`` fills ``?``/``$1`` (a sequence) or ``$name`` (a mapping) placeholders.

    The query sees tbscope's tables and nothing else: it cannot read or write files, attach
    databases, install or load extensions, or change DuckDB's settings (:class:`QueryError`
    says so). ``external_access=True`` lifts that, for your own queries on your own machine
    (never for queries that come from someone else).

    ``max_rows`` raises :class:`QueryTooLargeError` when the result has more rows;
    ``timeout`` (seconds, counted from the call) stops the query and raises
    :class:`QueryTimeoutError` when it runs longer. Reading the logdir is not interrupted, but
    its time counts: the query gets what is left.

    >>> import tbscope
    >>> tbscope.sql("runs/", "SELECT run, max(value) FROM scalars WHERE tag = 'acc' GROUP BY run")  # doctest: +SKIP
    """
    started = time.monotonic()
    limits = _query.limits(query, max_rows, timeout, external_access, started)
    lg = _base(source, scan_kwargs)
    return _query.execute(lg, query, params, limits)


def _base(source: str | os.PathLike[str] | Logdir, scan_kwargs: dict[str, Any]) -> Logdir:
    if isinstance(source, Logdir):
        if scan_kwargs:
            raise TypeError(
                f"sql() takes scan filters ({', '.join(scan_kwargs)}) only with a path; pass them to tbscope.scan() instead"
            )
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"sql() takes a logdir path or a tbscope.Logdir; got {type(source).__name__}")
    return scan(source, **scan_kwargs)
