"""``sql`` (locked down) and ``download`` (a series or the summary as CSV or Parquet)."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from fastapi import APIRouter, Depends, Query
from starlette.responses import Response

from tbscope.server import encode, models, tables
from tbscope.server.config import MAX_SQL_ROWS
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, source_run, store_of
from tbscope.server.store import Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]

FILE = {"content": {"text/csv": {"schema": {"type": "string"}}, "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}}}, "description": "an attachment"}


def _sql(store: Store, q: str, limit: int) -> Response:
    from tbscope.server import sql

    result, truncated = sql.run(store, q, limit)
    return encode.json_response({"columns": sql.columns(result), "truncated": truncated})


@router.get("/sql", response_model=None, responses={200: {"model": models.SqlResult}}, summary="A read-only SQL query (DuckDB), locked down")
def get_sql(store: StoreDep, q: Annotated[str, Query(min_length=1, max_length=100_000, description="one SELECT statement")], limit: Annotated[int, Query(ge=1, le=MAX_SQL_ROWS)] = 10_000) -> Response:
    return _sql(store, q, limit)


@router.post("/sql", response_model=None, responses={200: {"model": models.SqlResult}}, summary="The same, with the query in a JSON body")
def post_sql(store: StoreDep, body: models.SqlQuery) -> Response:
    return _sql(store, body.q, body.limit)


def _filename(*parts: str) -> str:
    """A file name safe in any header and file system."""
    name = "-".join(re.sub(r"[^A-Za-z0-9._=-]+", "_", p).strip("._") for p in parts if p) or "tbscope"
    return name[:150]


def _file(table: object, fmt: str, name: str) -> Response:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
        media = "text/csv"
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
        media = "application/vnd.apache.parquet"
    return Response(sink.getvalue().to_pybytes(), media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}.{fmt}"', "Cache-Control": "no-cache"})


@router.get("/download", response_model=None, responses={200: FILE}, summary="Every point of a scalar series (one run, or every run with the tag)")
def download(
    store: StoreDep,
    tag: Annotated[str, Query(min_length=1)],
    kind: Annotated[Literal["scalars"], Query()] = "scalars",
    run: Annotated[Optional[str], Query(min_length=1)] = None,
    format: Annotated[Literal["csv", "parquet"], Query()] = "csv",
) -> Response:
    import pyarrow as pa

    from tbscope.server.sql import _prefix_runs

    parts = []
    targets = [source_run(store, run)] if run is not None else [(st, None) for st in store.sources if st.ready]
    for st, local in targets:
        t = store.table(st, kind)
        if not t.num_rows:
            continue
        idx = tables.select(t, None if local is None else {local}, {tag})
        sel = t.take(pa.array(idx, pa.int64())).select(["run", "tag", "step", "wall_time", "value"])
        sel = _prefix_runs(sel, st)
        parts.append(sel.set_column(0, "run", sel.column("run").cast(pa.string())).set_column(1, "tag", sel.column("tag").cast(pa.string())))
    if not parts:
        raise ApiError(404, f"no scalars for tag {tag!r}" + (f" in run {run!r}" if run else ""))
    return _file(pa.concat_tables(parts), format, _filename(run or "all-runs", tag))


@router.get("/download/summary", response_model=None, responses={200: FILE}, summary="The summary table (one row per experiment)")
def download_summary(store: StoreDep, format: Annotated[Literal["csv", "parquet"], Query()] = "csv") -> Response:
    from tbscope.server import sql

    t = sql.table(store, "summary")
    return _file(t, format, "summary")
