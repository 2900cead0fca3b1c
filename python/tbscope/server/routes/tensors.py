"""``tensors`` (shape, dtype, statistics, values of small ones) and ``pr_curves``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from tbscope.server import encode, models
from tbscope.server.config import MAX_FULL_TENSOR_VALUES, MAX_TENSOR_VALUES
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, series_answer, store_of
from tbscope.server.store import SourceState, Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]
Run = Annotated[str, Query(min_length=1)]
Tag = Annotated[str, Query(min_length=1)]


def _values(arr: Any) -> list[Any]:
    import numpy as np

    if arr.dtype == object:
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in arr.ravel()]
    if np.iscomplexobj(arr):
        return [[encode.clean(float(v.real)), encode.clean(float(v.imag))] for v in arr.ravel()]
    flat = arr.ravel()
    if flat.dtype.kind == "f":
        out: list[Any] = encode.floats(flat.astype(np.float64))
        return out if isinstance(out, list) else out.tolist()
    if flat.dtype.kind == "b":
        return [bool(v) for v in flat]
    return [int(v) for v in flat]


def _stats(arr: Any) -> tuple[Any, Any, Any, Any]:
    import numpy as np

    if arr.dtype == object or not arr.size or np.iscomplexobj(arr):
        return None, None, None, None
    a = arr.astype(np.float64)
    finite = a[np.isfinite(a)]
    if not len(finite):
        return None, None, None, None
    lo, hi, mean, std = (encode.clean(float(v)) for v in (finite.min(), finite.max(), finite.mean(), finite.std()))
    return lo, hi, mean, std


@router.get(
    "/tensors",
    response_model=None,
    responses={200: {"model": models.Tensors}},
    summary="A tensor series: dtype, shape, statistics, and the values of small tensors",
)
def tensors(
    request: Request,
    store: StoreDep,
    run: Run,
    tag: Tag,
    full: Annotated[bool, Query(description="with step: that step's values whatever their size")] = False,
    step: Annotated[int | None, Query(ge=-(2**63), le=2**63 - 1)] = None,
) -> Response:
    import numpy as np
    import pyarrow.compute as pc

    from tbscope._frames import to_ndarray

    if full and step is None:
        raise ApiError(400, "full=1 needs step=S: one step's values at a time")

    def columns(_st: SourceState, t: Any) -> dict[str, list[Any]]:
        if step is not None:
            t = t.filter(pc.equal(t.column("step"), step))
            if not t.num_rows:
                raise ApiError(404, f"tag {tag!r} of run {run!r} has no step {step}")
        cols: dict[str, list[Any]] = {
            k: [] for k in ("step", "wall_time", "dtype", "shape", "min", "max", "mean", "std", "values")
        }
        limit = MAX_FULL_TENSOR_VALUES if full else MAX_TENSOR_VALUES
        for s, w, dt, shape, content, strs in zip(
            *(t.column(c).to_pylist() for c in ("step", "wall_time", "dtype", "shape", "content", "strings"))
        ):
            arr = to_ndarray(str(dt), tuple(shape), content, strs)
            if full and arr.size > limit:
                raise ApiError(413, f"this tensor has {arr.size} values; at most {limit} are served")
            lo, hi, mean, std = _stats(arr)
            cols["step"].append(s)
            cols["wall_time"].append(encode.clean(float("nan") if w is None else w))
            cols["dtype"].append(str(dt))
            cols["shape"].append(list(shape))
            cols["min"].append(lo)
            cols["max"].append(hi)
            cols["mean"].append(mean)
            cols["std"].append(std)
            cols["values"].append(_values(np.asarray(arr)) if arr.size <= limit else None)
        return cols

    return series_answer(request, store, "tensors", run, tag, columns, noun="tensor")


@router.get(
    "/pr_curves",
    response_model=None,
    responses={200: {"model": models.PrCurves}},
    summary="PR curves of one run and tag, per step",
)
def pr_curves(request: Request, store: StoreDep, run: Run, tag: Tag) -> Response:
    def columns(_st: SourceState, t: Any) -> dict[str, Any]:
        cols: dict[str, Any] = {
            "step": t.column("step").to_numpy(),
            "wall_time": encode.float_column(t.column("wall_time")),
        }
        for name in ("thresholds", "precision", "recall", "tp", "fp", "tn", "fn"):
            cols[name] = encode.clean(t.column(name).to_pylist())
        return cols

    return series_answer(request, store, "pr_curves", run, tag, columns, noun="PR curve")
