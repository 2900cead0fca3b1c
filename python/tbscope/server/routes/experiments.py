"""``hparams`` (one row per experiment, hparams joined with final metrics) and
``custom_scalars`` (the layouts of TensorBoard's custom-scalars dashboard)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tbscope.server import encode, models
from tbscope.server.routes import ERRORS, store_of
from tbscope.server.store import Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]


def _hparams_body(store: Store) -> dict[str, Any]:
    """The hparams table of every logdir: experiments (``Logdir.hparams()``), their hparams,
    and as metrics the last value of each scalar tag of the experiment's run (joined hparams
    children included) and of its sub-runs (Keras' ``run/train``, ``run/validation``)."""
    import numpy as np
    import pandas as pd

    rows: list[dict[str, Any]] = []
    metric_cols: dict[tuple[str, str], str] = {}
    hp_types: dict[str, set[str]] = {}
    for st in store.sources:
        if not st.ready:
            continue
        with store.with_logdir(st) as lg:
            hp = lg.hparams().to_pandas()
            if not len(hp):
                continue
            summary = lg.summary(stats=["last"])
        experiments = [str(r) for r in hp["run"]]
        exp_set = set(experiments)
        runs = [str(r) for r in summary["run"]]
        owner: dict[int, tuple[str, str]] = {}
        for i, r in enumerate(runs):
            # The nearest experiment at or above this run.
            parts = r.split("/")
            for k in range(len(parts), 0, -1):
                cand = "/".join(parts[:k])
                if cand in exp_set:
                    owner[i] = (cand, "/".join(parts[k:]))
                    break
        metrics: dict[str, dict[tuple[str, str], Any]] = {e: {} for e in experiments}
        for col in summary.columns:
            if not col.endswith(":last"):
                continue
            tag = col[: -len(":last")]
            vals = summary[col].to_numpy()
            for i, (exp, suffix) in owner.items():
                v = vals[i]
                if not pd.isna(v):
                    metrics[exp][(suffix, tag)] = float(v)
        hp_names = [c for c in hp.columns if c.startswith("hparam:")]
        for c in hp_names:
            name = c[len("hparam:") :]
            kind = hp[c].dtype
            hp_types.setdefault(name, set()).add(
                "bool" if kind.kind == "b" else "float" if kind.kind == "f" else "string"
            )
        for i, exp in enumerate(experiments):
            row: dict[str, Any] = {"run": st.full_name(exp)}
            for c in hp_names:
                v = hp[c].iloc[i]
                if not pd.isna(v):
                    row["hp:" + c[len("hparam:") :]] = v.item() if isinstance(v, np.generic) else v
            for (suffix, tag), v in metrics[exp].items():
                key = (suffix, tag)
                if key not in metric_cols:
                    metric_cols[key] = "metric:" + (f"{suffix}:{tag}" if suffix else tag)
                row[metric_cols[key]] = v
            rows.append(row)
    rows.sort(key=lambda r: r["run"])
    infos = []
    for name in sorted(hp_types):
        col = [r.get("hp:" + name) for r in rows]
        present = [v for v in col if v is not None]
        types = hp_types[name]
        if len(types) > 1:
            kind = "string"
        else:
            kind = next(iter(types))
            if kind == "float" and present and all(float(v).is_integer() for v in present):
                kind = "int"
        info: dict[str, Any] = {"name": name, "type": kind}
        if kind != "float":
            distinct = sorted({str(v) if kind == "string" else v for v in present}, key=lambda v: (str(type(v)), v))
            if len(distinct) <= 100:
                info["values"] = [int(v) if kind == "int" else v for v in distinct]
        infos.append(info)
    columns: dict[str, list[Any]] = {"run": [r["run"] for r in rows]}
    for info in infos:
        key = "hp:" + info["name"]
        conv = (
            (lambda v: None if v is None else int(v))
            if info["type"] == "int"
            else (lambda v: None if v is None else str(v))
            if info["type"] == "string"
            else (lambda v: v)
        )
        columns[key] = [conv(r.get(key)) for r in rows]
    metrics_out = []
    for (suffix, tag), colname in sorted(metric_cols.items(), key=lambda kv: kv[1]):
        columns[colname] = encode.clean([r.get(colname) for r in rows])
        m: dict[str, Any] = {"tag": tag, "column": colname}
        if suffix:
            m["run_suffix"] = suffix
        metrics_out.append(m)
    return {"loading": store.loading, "hparams": infos, "metrics": metrics_out, "columns": columns}


@router.get(
    "/hparams",
    response_model=None,
    responses={200: {"model": models.Hparams}},
    summary="One row per experiment: hparams and final metrics",
)
def hparams(request: Request, store: StoreDep) -> Response:
    etag = encode.fresh(request, store.snapshot.generation)
    body = store.cached("hparams-body", lambda: _hparams_body(store))
    return encode.json_response({**body, "loading": store.loading}, etag)


@router.get(
    "/custom_scalars",
    response_model=None,
    responses={200: {"model": models.CustomScalars}},
    summary="Custom-scalar layouts per run, and merged",
)
def custom_scalars(request: Request, store: StoreDep) -> Response:
    from tbscope._plugins import merge_layouts

    etag = encode.fresh(request, store.snapshot.generation)
    layouts: dict[str, Any] = {}
    for st in store.sources:
        if not st.ready:
            continue
        with store.with_logdir(st) as lg:
            found = lg.custom_scalars()
        layouts.update({st.full_name(r): v for r, v in found.items()})
    return encode.json_response({"loading": store.loading, "layouts": layouts, "merged": merge_layouts(layouts)}, etag)
