"""SQL over a logdir (DuckDB): the tables, pushdown, locked connections, limits and results.

``sql()`` reads only the tables a query names, and pushes the run, tag and step predicates of
its WHERE clauses into the native scan, so records of other runs are not read and records of
other tags or steps are not decoded (:mod:`tbscope._predicates` reads the clauses). Pushdown
only ever narrows what is read to a superset of what the query keeps: DuckDB still applies the
whole WHERE clause, so results are the same with or without it. Predicates it does not
understand are simply left to DuckDB.

The tables reach DuckDB as Arrow tables that DuckDB scans in place (no copy).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from tbscope._filters import ScanArgs
from tbscope._predicates import _TOP, _Analyzer, _max_opt, _min_opt, _native_pattern, _or, _Pred
from tbscope._report import LoadStats, Report
from tbscope.errors import QueryError, QueryTimeoutError, QueryTooLargeError

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

__all__ = [
    "QueryError",
    "QueryTimeoutError",
    "QueryTooLargeError",
    "Result",
    "Source",
    "TABLES",
    "execute",
    "limits",
    "pushdown",
]


class Source(Protocol):
    """What SQL needs of a scan (a :class:`tbscope.Logdir`), declared here so that the engine
    does not import the reader that calls it (``tbscope.sql(path)`` is :mod:`tbscope._sql`)."""

    _loaded: bool
    _args: ScanArgs

    @property
    def report(self) -> Report: ...

    def reload(self) -> LoadStats: ...

    def _with_args(self, args: ScanArgs) -> Source:
        """The same logdir, unread, scanned with ``args``."""
        ...

    def _sql_table(self, name: str) -> pa.Table:
        """Table ``name`` of :data:`TABLES`, read."""
        ...


@dataclass(frozen=True)
class _Table:
    """How one SQL table is produced: which kinds its scan reads and which columns can be
    pushed into that scan (``step`` only where the table has a step per row)."""

    kinds: tuple[str, ...] | None  # None: every kind (the table describes all of them)
    pushable: tuple[str, ...]
    doc: str


#: The tables a query can name, with what each holds.
TABLES: dict[str, _Table] = {
    "scalars": _Table(("scalars",), ("run", "tag", "step"), "run, tag, step, wall_time, timestamp, value"),
    "tensors": _Table(
        ("tensors",),
        ("run", "tag", "step"),
        "run, tag, step, wall_time, timestamp, plugin, dtype, shape, content, strings",
    ),
    "histograms": _Table(
        ("histograms",),
        ("run", "tag", "step"),
        "run, tag, step, wall_time, timestamp, left, right, count, min, max, num, sum, sum_squares",
    ),
    "text": _Table(("text",), ("run", "tag", "step"), "run, tag, step, wall_time, timestamp, index, text, shape"),
    "images": _Table(
        ("images",),
        ("run", "tag", "step"),
        "run, tag, step, wall_time, timestamp, index, width, height, colorspace, content_type, blob_file, blob_offset, blob_length",
    ),
    "audio": _Table(
        ("audio",),
        ("run", "tag", "step"),
        "run, tag, step, wall_time, timestamp, index, sample_rate, num_channels, length_frames, content_type, label, blob_file, blob_offset, blob_length",
    ),
    "blobs": _Table(
        ("blobs",),
        ("run", "tag", "step"),
        "run, tag, step, wall_time, timestamp, plugin, index, blob_file, blob_offset, blob_length",
    ),
    "meshes": _Table(
        ("tensors",),
        ("run", "step"),
        "one row per mesh, step and sample: run, tag (the mesh's name), step, wall_time, index, vertices, faces, colors (flat lists, 3 values per point), config",
    ),
    "logs": _Table(
        ("hparams",),
        ("run", "step"),
        "TF1 session logs and log messages: run, step, wall_time, timestamp, source, status, level, message, checkpoint_path",
    ),
    "profiles": _Table(("hparams",), (), "profile files: run, session, host, time, size, format, source, path"),
    "series": _Table(
        None,
        ("run", "tag"),
        "one row per (run, tag): kind, plugin, display_name, description, points, first_step, last_step",
    ),
    "runs": _Table(
        None, ("run",), "one row per run: files, bytes, wall time range, max_step, records, points per kind, data loss"
    ),
    "hparams": _Table(
        ("hparams",),
        ("run",),
        "one row per run with hparams: group_name, start/end time, status, hparam:<name> columns",
    ),
    "summary": _Table(
        ("scalars", "hparams"), ("run",), "Logdir.summary(): one row per run, hparams and <tag>:<stat> columns"
    ),
    "embeddings": _Table(
        None,
        ("run",),
        "Logdir.embeddings(): one row per projector embedding: run, tag, points, dimensions, metadata_columns, sprite, files, error",
    ),
}


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as e:
        raise ImportError("tbscope.sql needs DuckDB: pip install 'tbscope[sql]' (or pip install duckdb)") from e
    return duckdb


@dataclass(frozen=True)
class Pushdown:
    """What a query lets one table's scan skip: native run/tag regexes and a step range."""

    runs: str | None = None
    tags: str | None = None
    steps: tuple[int | None, int | None] = (None, None)

    @property
    def empty(self) -> bool:
        return self.runs is None and self.tags is None and self.steps == (None, None)


# What a query may not do unless external_access=True: touch files (read_csv, glob, COPY,
# ATTACH of a file, EXPORT DATABASE), install or load extensions, or change any setting (SET,
# PRAGMA, RESET), this lock included. Registered Arrow tables are not files: they still work.
_LOCKED = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,  # last: the options above cannot be set once it holds
}
_DBS: dict[bool, Any] = {}
_DB_LOCK = threading.Lock()


def _connect(external_access: bool) -> Any:
    """A new in-memory database, locked down unless ``external_access``."""
    return _duckdb().connect(":memory:", config={} if external_access else dict(_LOCKED))


def _cursor(external_access: bool = False) -> Any:
    """A fresh connection to tbscope's private in-memory database (one locked down, one
    with external access).

    Opening a database costs tens of milliseconds; a cursor on an open one costs microseconds,
    and tables registered on it stay private to it (concurrent queries do not see each other's).
    """
    with _DB_LOCK:
        db = _DBS.get(external_access)
        if db is None:
            db = _DBS[external_access] = _connect(external_access)
        return db.cursor()


def _parse(con: Any, query: str) -> dict[str, Any]:
    raw = con.execute("SELECT json_serialize_sql(?)", [query]).fetchall()[0][0]
    tree: dict[str, Any] = json.loads(raw)
    return tree


def pushdown(query: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> dict[str, Pushdown]:
    """The tbscope tables ``query`` names, each with the filters its scan will get.

    A table named several times gets what all its uses allow together (their union); a use
    whose WHERE clause says nothing usable about it turns its pushdown off.

    >>> pushdown("SELECT * FROM scalars WHERE tag = 'loss' AND step >= 100")  # doctest: +SKIP
    {'scalars': Pushdown(runs=None, tags='^loss$', steps=(100, None))}
    """
    con = _cursor()
    try:
        return _pushdown(con, query, params)[0]
    finally:
        con.close()


def _pushdown(
    con: Any, query: str, params: Sequence[Any] | Mapping[str, Any] | None
) -> tuple[dict[str, Pushdown], bool]:
    """The pushdown per table, and whether the query is one SELECT statement."""
    tree = _parse(con, query)
    if tree.get("error") or len(tree.get("statements", [])) != 1:
        # Not one SELECT (COPY, CREATE ... AS, EXPLAIN, several statements): every table whose
        # name appears in the text is read whole, a superset of what the query uses.
        words = {w.lower() for w in re.findall(r"[A-Za-z_]+", query)}
        return {n: Pushdown() for n in TABLES if n in words}, False
    an = _Analyzer(params, {n: t.pushable for n, t in TABLES.items()})
    an.walk(tree["statements"][0])
    # CTEs named like a table are read too (harmless: a superset of what the query uses).
    wanted = sorted({name for name, _ in an.occurrences})
    out = {n: Pushdown() for n in wanted}
    preds: dict[str, _Pred] = {}
    for name, node in an.occurrences:
        p = an.attributed.get(id(node), _TOP)
        preds[name] = p if name not in preds else _or(preds[name], p)
    for name in wanted:
        p = preds.get(name, _TOP) if name not in an.ctes else _TOP
        has_step = "step" in TABLES[name].pushable
        out[name] = Pushdown(
            runs=_native_pattern(p.run),
            tags=_native_pattern(p.tag) if "tag" in TABLES[name].pushable else None,
            steps=(p.lo, p.hi) if has_step else (None, None),
        )
    return out, True


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _hint() -> str:
    return f" (tables: {', '.join(TABLES)}; see docs/query.md)"


# --------------------------------------------------------------------------------------------
# Results


class Result:
    """The rows a query returned, held as an Arrow table.

    Implements ``__arrow_c_stream__``, so ``pyarrow.table(result)`` and ``polars.DataFrame(result)``
    take it directly. ``stats`` maps each table that was read to what its scan read, and
    ``pushed`` to the filters its scan got. ``report`` is what those scans could not read
    (:class:`tbscope.Report`): rows of a file that could not be opened are missing from the result.
    """

    def __init__(
        self,
        table: pa.Table,
        stats: dict[str, LoadStats] | None = None,
        pushed: dict[str, Pushdown] | None = None,
        report: Report | None = None,
    ) -> None:
        self._table = table
        self.stats: dict[str, LoadStats] = stats or {}
        self.pushed: dict[str, Pushdown] = pushed or {}
        self.report: Report = report if report is not None else Report(())

    def __repr__(self) -> str:
        return f"<tbscope.Result: {self.num_rows} rows × {len(self.columns)} columns>"

    def __len__(self) -> int:
        return self.num_rows

    @property
    def num_rows(self) -> int:
        return int(self._table.num_rows)

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)

    def to_arrow(self) -> pa.Table:
        return self._table

    def to_pandas(self) -> pd.DataFrame:
        return self._table.to_pandas(split_blocks=True)

    def to_polars(self) -> pl.DataFrame:
        import polars as pl

        out = pl.from_arrow(self._table)
        assert isinstance(out, pl.DataFrame)
        return out

    def iter_batches(self, max_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
        yield from self._table.to_batches(max_chunksize=max_rows)

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The rows as Python tuples (small results)."""
        cols = [c.to_pylist() for c in self._table.columns]
        return list(zip(*cols))


# --------------------------------------------------------------------------------------------
# sql()


def _table_args(base: ScanArgs, name: str, p: Pushdown) -> ScanArgs:
    """Native reader arguments for one table: the scan's own filters narrowed by the pushdown.

    Where the scan already filters runs or tags, its filter is kept (two regexes cannot be
    intersected into one); DuckDB applies the query's predicate on top.
    """
    spec = TABLES[name]
    runs = p.runs if base.runs is None else base.runs
    tags, step_lo, step_hi = base.tags, base.step_lo, base.step_hi
    if name == "hparams":
        # hparams records are run-level facts that tag and step filters must not hide.
        tags, step_lo, step_hi = None, None, None
    elif tags is None:
        tags = p.tags
    lo, hi = p.steps
    kinds = base.kinds
    if spec.kinds is not None:
        want = tuple(k for k in spec.kinds if base.kinds is None or k in base.kinds)
        # A kind the scan leaves out stays out (an empty table), as with Logdir.<kind>().
        kinds = want or tuple(base.kinds or ())
    return replace(
        base, runs=runs, tags=tags, step_lo=_max_opt(step_lo, lo), step_hi=_min_opt(step_hi, hi), kinds=kinds
    )


def limits(
    query: object, max_rows: int | None, timeout: float | None, external_access: bool, started: float
) -> _Limits:
    """The checked arguments of a query, before anything is read (``started``: time.monotonic()
    when the call began, from which ``timeout`` counts)."""
    _duckdb()  # not installed: say so before reading anything
    if not isinstance(query, str):
        raise TypeError(f"query must be a SQL string; got {type(query).__name__}")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0):
        raise ValueError(f"max_rows= takes a number of rows >= 0 (or None for no limit); got {max_rows!r}")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not timeout > 0
        or not math.isfinite(timeout)
    ):
        raise ValueError(f"timeout= takes a positive number of seconds (or None for no limit); got {timeout!r}")
    return _Limits(
        max_rows,
        None if timeout is None else float(timeout),
        None if timeout is None else started + timeout,
        bool(external_access),
    )


def execute(source: Source, query: str, params: Sequence[Any] | Mapping[str, Any] | None, limits: _Limits) -> Result:
    """Run ``query`` over ``source``'s tables within ``limits`` (see :func:`tbscope.sql`)."""
    con = _cursor(limits.external_access)
    try:
        return _run(con, _duckdb(), source, query, params, limits)
    finally:
        con.close()


@dataclass(frozen=True)
class _Limits:
    max_rows: int | None = None
    timeout: float | None = None
    deadline: float | None = None  # time.monotonic()
    external_access: bool = False


def _run(
    con: Any,
    duckdb: Any,
    lg: Source,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None,
    limits: _Limits = _Limits(),
) -> Result:
    pushed, select = _pushdown(con, query, params)
    if not select:
        # Statements other than one SELECT may create tables: give them a database of their
        # own so nothing outlives the call.
        con.close()
        con = _connect(limits.external_access)
    stats: dict[str, LoadStats] = {}
    tables: dict[str, pa.Table] = {}
    problems: dict[Any, None] = {}
    if lg._loaded:
        # Already in memory: reading again with filters would cost more than it saves.
        for name in pushed:
            tables[name] = lg._sql_table(name)
        problems.update(dict.fromkeys(lg.report.problems))
    else:
        groups: dict[ScanArgs, tuple[ScanArgs, list[str]]] = {}
        for name, p in pushed.items():
            args = _table_args(lg._args, name, p)
            key = replace(args, kinds=None)
            if key in groups:
                have, names = groups[key]
                # One scan serves every table with the same filters; None (all kinds) absorbs.
                kinds = (
                    None
                    if have.kinds is None or args.kinds is None
                    else tuple(sorted(set(have.kinds) | set(args.kinds)))
                )
                groups[key] = (replace(have, kinds=kinds), names)
                names.append(name)
            else:
                groups[key] = (args, [name])
        for args, names in groups.values():
            reader = lg._with_args(args)
            st = reader.reload()
            for name in names:
                stats[name] = st
                tables[name] = reader._sql_table(name)
            problems.update(dict.fromkeys(reader.report.problems))
    timer = None
    try:
        for name, table in tables.items():
            con.register(name, table)
        if limits.deadline is not None:
            left = limits.deadline - time.monotonic()
            if left <= 0:
                raise QueryTimeoutError(_timeout_message(limits), limits.timeout or 0.0)
            # interrupt() stops what the connection is running, from any thread.
            timer = threading.Timer(left, con.interrupt)
            timer.daemon = True
            timer.start()
        try:
            rel = con.sql(query, params=params)
            if rel is None:
                out = _empty()
            elif limits.max_rows is None:
                out = rel.to_arrow_table()
            else:
                out = _at_most(rel, limits.max_rows)
        except duckdb.InterruptException as e:
            raise QueryTimeoutError(_timeout_message(limits), limits.timeout or 0.0) from e
        except duckdb.Error as e:
            raise QueryError(_error_message(duckdb, e, limits)) from e
    finally:
        if timer is not None:
            timer.cancel()
        if not select:
            con.close()
    return Result(out, stats, pushed, Report(tuple(problems)))


def _at_most(rel: Any, max_rows: int) -> pa.Table:
    """The relation's rows as a table, or QueryTooLargeError as soon as there are more than
    ``max_rows`` (the rest is never computed)."""
    import pyarrow as pa

    to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
    reader = to_reader(max(1, min(max_rows + 1, 1 << 17)))
    batches = []
    rows = 0
    for batch in reader:
        rows += batch.num_rows
        if rows > max_rows:
            raise QueryTooLargeError(
                f"the query returned more than max_rows={max_rows:,} rows; add a LIMIT, aggregate, or narrow the WHERE clause",
                max_rows,
            )
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def _timeout_message(limits: _Limits) -> str:
    return f"the query ran longer than timeout={limits.timeout:g} s and was stopped; narrow it (fewer runs, tags or steps) or raise the limit"


def _error_message(duckdb: Any, e: BaseException, limits: _Limits) -> str:
    msg = _one_line(e)
    locked = isinstance(e, getattr(duckdb, "PermissionException", ())) or "configuration has been locked" in msg
    if locked and not limits.external_access:
        return (
            f"{msg}. Queries see tbscope's tables only: files, extensions and settings are off. "
            "For your own query on your own machine, sql(..., external_access=True) "
            "(tbscope sql --external-access) lifts this"
        )
    return f"{msg}{_hint()}"


def _empty() -> pa.Table:
    import pyarrow as pa

    return pa.table({})
