"""``histograms`` and ``distributions`` (TensorBoard's basis-point compression of histograms)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from tbscope.server import encode, models, tables
from tbscope.server.config import MAX_POINTS
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, source_run, store_of
from tbscope.server.store import Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]

#: Basis points of the distribution chart's bands (TensorBoard's NORMAL_HISTOGRAM_BPS: the
#: median, ±1, ±2, ±3 standard deviations of a normal distribution, and the extremes).
BASIS_POINTS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)

Run = Annotated[str, Query(min_length=1)]
Tag = Annotated[str, Query(min_length=1)]
Points = Annotated[
    int, Query(ge=0, le=MAX_POINTS, description="steps, evenly spaced, first and last included; 0 = all")
]


def compress(left: Any, right: Any, count: Any, bps: tuple[int, ...] = BASIS_POINTS) -> list[float]:
    """The value at each basis point (1/100 of a percent) of a histogram's cumulative
    distribution, interpolating linearly inside the bucket where it falls: TensorBoard's
    ``compress_histogram``, so the distribution chart looks the same."""
    import numpy as np

    counts = np.asarray(count, dtype=np.float64)
    if not len(counts):
        return [0.0] * len(bps)
    lo_all, hi_all = float(left[0]), float(right[-1])
    rights = np.asarray(right, dtype=np.float64)
    total = counts.sum() or 1.0
    cum = np.cumsum(counts * bps[-1] / total)
    out: list[float] = []
    for bp in bps:
        i = int(np.searchsorted(cum, bp, side="right"))
        # The first bucket at or after i that holds any weight.
        while i < len(cum) and cum[i] == (cum[i - 1] if i else 0.0):
            i += 1
        if i >= len(cum):
            break
        below = float(cum[i - 1]) if i else 0.0
        a = lo_all if i == 0 or below == 0 else max(float(rights[i - 1]), lo_all)
        b = min(float(rights[i]), hi_all)
        out.append(a + (bp - below) * (b - a) / (float(cum[i]) - below))
    out.extend([hi_all] * (len(bps) - len(out)))
    return out


def _rows(store: Store, run: str, tag: str, points: int) -> tuple[Any, Any]:
    import pyarrow as pa

    st, local = source_run(store, run)
    table = store.table(st, "histograms")
    if not table.num_rows:
        raise ApiError(404, f"run {run!r} has no histograms")
    t = tables.rows(table, local, tag)
    if not t.num_rows:
        raise ApiError(404, f"run {run!r} has no histogram tag {tag!r}; list them with api/v1/tags?kind=histograms")
    return t.take(pa.array(tables.evenly(t.num_rows, points), pa.int64())), st


def _lists(col: Any) -> list[Any]:
    import numpy as np

    values: list[Any] = col.to_pylist()
    flat = np.asarray([v for row in values for v in row], dtype=np.float64)
    if len(flat) and not np.isfinite(flat).all():
        return [encode.clean([float(v) for v in row]) for row in values]
    return values


@router.get(
    "/histograms",
    response_model=None,
    responses={200: {"model": models.Histograms}},
    summary="A histogram series: bucket edges and counts per step",
)
def histograms(request: Request, store: StoreDep, run: Run, tag: Tag, points: Points = 51) -> Response:
    etag = encode.fresh(request, store.snapshot.generation)
    t, _ = _rows(store, run, tag, points)
    cols = {
        "step": t.column("step").to_numpy(),
        "wall_time": encode.float_column(t.column("wall_time")),
        "left": _lists(t.column("left")),
        "right": _lists(t.column("right")),
        "count": _lists(t.column("count")),
    }
    return encode.json_response({"run": run, "tag": tag, "loading": store.loading, "columns": cols}, etag)


@router.get(
    "/distributions",
    response_model=None,
    responses={200: {"model": models.Distributions}},
    summary="A histogram series compressed to 9 basis points per step",
)
def distributions(request: Request, store: StoreDep, run: Run, tag: Tag, points: Points = 51) -> Response:
    etag = encode.fresh(request, store.snapshot.generation)
    t, _ = _rows(store, run, tag, points)
    values = [
        compress(lf, rt, ct)
        for lf, rt, ct in zip(
            t.column("left").to_pylist(), t.column("right").to_pylist(), t.column("count").to_pylist()
        )
    ]
    cols = {
        "step": t.column("step").to_numpy(),
        "wall_time": encode.float_column(t.column("wall_time")),
        "values": encode.clean(values),
    }
    return encode.json_response(
        {"run": run, "tag": tag, "loading": store.loading, "basis_points": list(BASIS_POINTS), "columns": cols}, etag
    )
