"""SQL for the server, locked down: one SELECT statement, over the logdirs' tables as loaded,
with a row limit, a time limit, a memory limit and a few threads, in a DuckDB database of the
server's own that has the lock of ``tbscope.sql`` without ``external_access`` (no files,
network, extensions or settings): the library's own database has no memory or thread bounds,
and once locked no connection to it can add them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tbscope.server.config import SQL_MEMORY_LIMIT, SQL_SECONDS, SQL_THREADS
from tbscope.server.errors import ApiError

if TYPE_CHECKING:
    import pyarrow as pa

    from tbscope.server.store import SourceState, Store

TABLES = (
    "scalars",
    "tensors",
    "histograms",
    "text",
    "images",
    "audio",
    "blobs",
    "meshes",
    "logs",
    "profiles",
    "series",
    "runs",
    "hparams",
    "summary",
    "embeddings",
)


_DB: Any = None
_DB_LOCK = threading.Lock()


def _cursor() -> Any:
    """A connection to the server's database (opened once; a cursor costs microseconds and
    keeps its registered tables to itself)."""
    global _DB
    from tbscope._query import _LOCKED, _duckdb

    with _DB_LOCK:
        if _DB is None:
            # The bounds first: the library's settings end by locking the configuration.
            config = {"memory_limit": SQL_MEMORY_LIMIT, "threads": SQL_THREADS, **_LOCKED}
            _DB = _duckdb().connect(":memory:", config=config)
        return _DB.cursor()


def check_select(con: Any, query: str) -> None:
    """Refuses anything but exactly one SELECT statement."""
    from tbscope._query import _parse

    tree = _parse(con, query)
    if tree.get("error"):
        raise ApiError(400, f"only one SELECT statement is allowed ({tree.get('error_message', 'not a SELECT')})")
    if len(tree.get("statements", [])) != 1:
        raise ApiError(400, "only one SELECT statement is allowed")


def _prefix_runs(table: pa.Table, st: SourceState) -> pa.Table:
    import pyarrow as pa

    if st.source.name is None or "run" not in table.column_names:
        return table
    col = table.column("run")
    chunks = []
    for c in col.chunks:
        if isinstance(c, pa.DictionaryArray):
            chunks.append(
                pa.DictionaryArray.from_arrays(
                    c.indices, pa.array([st.full_name(str(v)) for v in c.dictionary.to_pylist()], pa.string())
                )
            )
        else:
            chunks.append(pa.array([st.full_name(str(v)) for v in c.to_pylist()], pa.string()))
    return table.set_column(
        table.schema.get_field_index("run"), "run", pa.chunked_array(chunks, chunks[0].type if chunks else pa.string())
    )


def table(store: Store, name: str) -> pa.Table:
    """One SQL table over every logdir (runs named as in the API)."""
    import pyarrow as pa

    snap = store.snapshot
    if name in ("series", "runs"):
        return snap.series if name == "series" else snap.runs
    parts = []
    for st in store.sources:
        if not st.ready:
            continue
        if name in ("hparams", "summary"):
            with store.with_logdir(st) as lg:
                t = (
                    lg.hparams().to_arrow()
                    if name == "hparams"
                    else pa.Table.from_pandas(lg.summary(), preserve_index=False)
                )
        elif name == "embeddings":
            with store.with_logdir(st) as lg:
                t = lg.embeddings().to_arrow()
        else:
            t = store.table(st, name)
        parts.append(_prefix_runs(t, st))
    if not parts:
        return pa.table({"run": pa.array([], pa.string())})
    if len(parts) == 1:
        return parts[0]
    # Dictionaries differ between logdirs: plain strings concatenate.
    plain = [p.set_column(p.schema.get_field_index("run"), "run", p.column("run").cast(pa.string())) for p in parts]
    return pa.concat_tables(plain, promote_options="permissive")


def run(store: Store, query: str, limit: int) -> tuple[pa.Table, bool]:
    """The rows of a locked-down SELECT (at most ``limit``), and whether there were more."""
    import duckdb

    from tbscope._query import pushdown

    con = _cursor()
    timer = threading.Timer(SQL_SECONDS, con.interrupt)
    try:
        check_select(con, query)
        try:
            names = [n for n in pushdown(query) if n in TABLES]
        except duckdb.Error as e:
            raise ApiError(400, " ".join(str(e).split())) from None
        for n in names:
            con.register(n, table(store, n))
        timer.start()
        try:
            out = con.sql(query).limit(limit + 1).to_arrow_table()
        except duckdb.InterruptException:
            raise ApiError(
                504, f"the query ran longer than {SQL_SECONDS:g} s; narrow it (WHERE run = ..., tag = ...)", "timeout"
            ) from None
        except duckdb.Error as e:
            raise ApiError(400, " ".join(str(e).split()) + f" (tables: {', '.join(TABLES)})") from None
    finally:
        timer.cancel()
        con.close()
    return out.slice(0, limit), out.num_rows > limit


def columns(t: pa.Table) -> dict[str, list[Any]]:
    """A result as JSON columns."""
    import pyarrow as pa

    from tbscope.server.encode import clean, floats

    out: dict[str, Any] = {}
    for name, col in zip(t.column_names, t.columns):
        if pa.types.is_floating(col.type):
            out[name] = (
                floats(col.fill_null(float("nan")).to_numpy()) if col.null_count == 0 else clean(col.to_pylist())
            )
        elif pa.types.is_integer(col.type) and col.null_count == 0:
            out[name] = col.to_numpy()
        else:
            out[name] = clean(col.to_pylist())
    return out
