"""``scalars``: one tag across many runs, downsampled in Rust, as JSON columns or Arrow IPC."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from tbscope.server import encode, models
from tbscope.server.config import MAX_POINTS
from tbscope.server.routes import ERRORS, store_of
from tbscope.server.store import Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]

OK: dict[int | str, dict[str, Any]] = {200: {"model": models.Scalars, "content": {encode.ARROW: {"schema": {"type": "string", "format": "binary"}}}, "description": "JSON columns, or one Arrow IPC stream when asked for with Accept"}}


def _answer(request: Request, store: Store, q: models.ScalarsQuery) -> Response:
    from tbscope.server import scalars

    return scalars.respond(request, store, q)


@router.get("/scalars", response_model=None, responses=OK, summary="One tag across many runs, downsampled to keep every extreme")
def get_scalars(
    request: Request,
    store: StoreDep,
    tag: Annotated[str, Query(min_length=1, description="the scalar tag")],
    run: Annotated[Optional[list[str]], Query(description="runs (repeatable); none: every run with the tag")] = None,
    runs_filter: Annotated[Optional[str], Query(max_length=1000, description="a glob or /regex/ on run names")] = None,
    points: Annotated[int, Query(ge=0, le=MAX_POINTS, description="points per series: 0 = all, else at least 5")] = 1000,
    x: Annotated[Literal["step", "relative", "wall_time"], Query(description="the axis to bucket along")] = "step",
    smoothing: Annotated[Optional[float], Query(ge=0.0, lt=1.0, description="TensorBoard's smoothing weight; adds 'smoothed'")] = None,
    step_min: Annotated[Optional[int], Query(ge=-(2**63), le=2**63 - 1)] = None,
    step_max: Annotated[Optional[int], Query(ge=-(2**63), le=2**63 - 1)] = None,
    x_min: Annotated[Optional[float], Query(description="window in units of x (relative: seconds)")] = None,
    x_max: Annotated[Optional[float], Query()] = None,
) -> Response:
    q = models.ScalarsQuery(tag=tag, runs=run, runs_filter=runs_filter, points=points, x=x, smoothing=smoothing, step_min=step_min, step_max=step_max, x_min=x_min, x_max=x_max)
    return _answer(request, store, q)


@router.post("/scalars", response_model=None, responses=OK, summary="The same, with the parameters in a JSON body (long run lists)")
def post_scalars(request: Request, store: StoreDep, query: models.ScalarsQuery) -> Response:
    return _answer(request, store, query)
