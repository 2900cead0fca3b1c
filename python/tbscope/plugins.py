"""Plugin data stored as tensors, decoded: PR curves and custom-scalar layouts.

Both arrive in the ``tensors`` table (their ``plugin`` column says whose); these functions turn
them into what the plugin means, keeping the raw tensor alongside.

- **PR curves** (``pr_curves`` plugin, ``add_pr_curve``): a ``[6, T]`` tensor whose rows are
  true positives, false positives, true negatives, false negatives, precision and recall at
  ``T`` thresholds evenly spaced in [0, 1] (``numpy.linspace(0, 1, T)``, as TensorBoard).
  Nothing is trimmed: TensorBoard's dashboard drops the trailing thresholds where
  ``TP + FP == 0``; here they stay, with the counts as written (floats).
- **Custom-scalar layouts** (``custom_scalars`` plugin, ``add_custom_scalars``): a serialized
  ``Layout`` proto in a string tensor, as a dict shaped like the proto:
  ``{"category": [{"title", "closed", "chart": [{"title", "multiline": {"tag": [regex...]}}
  or {"title", "margin": {"series": [{"value", "lower", "upper"}]}}]}]}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PR_COLUMNS", "custom_scalar_layouts", "layout_dict", "merge_layouts", "pr_curves"]

#: The rows of a PR-curve tensor, in order.
PR_COLUMNS = ("tp", "fp", "tn", "fn", "precision", "recall")


def pr_curves(tensors: pa.Table) -> pa.Table:
    """The PR curves among the rows of a ``tensors`` table: ``run``, ``tag``, ``step``,
    ``wall_time``, list columns ``thresholds``, ``tp``, ``fp``, ``tn``, ``fn``, ``precision``,
    ``recall`` (float64, one entry per threshold), and the raw tensor (``dtype``, ``shape``,
    ``content``). A tensor that is not ``[6, T]`` is skipped (TensorBoard cannot draw it either)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tbscope.frames import to_ndarray

    rows = tensors.filter(pc.equal(tensors.column("plugin").cast(pa.string()), "pr_curves")) if tensors.num_rows else tensors
    keep: list[int] = []
    lists: dict[str, list[list[float]]] = {name: [] for name in ("thresholds", *PR_COLUMNS)}
    dtypes, shapes, contents = (rows.column(c).to_pylist() for c in ("dtype", "shape", "content"))
    strings = rows.column("strings").to_pylist()
    for i, (dt, shape, content, strs) in enumerate(zip(dtypes, shapes, contents, strings)):
        if dt == "string" or len(shape) != 2 or shape[0] != 6:
            continue
        arr = to_ndarray(dt, tuple(shape), content, strs).astype(np.float64)
        keep.append(i)
        lists["thresholds"].append(np.linspace(0.0, 1.0, shape[1]).tolist())
        for j, name in enumerate(PR_COLUMNS):
            lists[name].append(arr[j].tolist())
    picked = rows.take(pa.array(keep, pa.int64()))
    out = {c: picked.column(c) for c in ("run", "tag", "step", "wall_time")}
    for name, values in lists.items():
        out[name] = pa.array(values, pa.list_(pa.float64()))
    for c in ("dtype", "shape", "content"):
        out[c] = picked.column(c)
    return pa.table(out)


def layout_dict(raw: bytes) -> dict[str, Any]:
    """A serialized custom-scalar ``Layout`` proto as a dict (see the module's docstring).
    ValueError if the bytes are not a Layout."""
    from tbscope._pb import fields

    def text(v: int | bytes) -> str:
        if not isinstance(v, bytes):
            raise ValueError("a string field holds a number")
        return v.decode("utf-8", "replace")

    categories = []
    for f, _w, v in fields(raw):
        if f != 2 or not isinstance(v, bytes):
            continue
        cat: dict[str, Any] = {"title": "", "closed": False, "chart": []}
        for cf, _cw, cv in fields(v):
            if cf == 1:
                cat["title"] = text(cv)
            elif cf == 3:
                cat["closed"] = bool(cv)
            elif cf == 2 and isinstance(cv, bytes):
                chart: dict[str, Any] = {"title": ""}
                for hf, _hw, hv in fields(cv):
                    if hf == 1:
                        chart["title"] = text(hv)
                    elif hf == 2 and isinstance(hv, bytes):
                        chart["multiline"] = {"tag": [text(t) for tf, _tw, t in fields(hv) if tf == 1]}
                    elif hf == 3 and isinstance(hv, bytes):
                        series = []
                        for sf, _sw, sv in fields(hv):
                            if sf == 1 and isinstance(sv, bytes):
                                names = {1: "value", 2: "lower", 3: "upper"}
                                series.append({names[k]: text(x) for k, _x, x in fields(sv) if k in names})
                        chart["margin"] = {"series": series}
                cat["chart"].append(chart)
        categories.append(cat)
    return {"category": categories}


def custom_scalar_layouts(tensors: pa.Table) -> dict[str, dict[str, Any]]:
    """Each run's custom-scalar layout (its last one), from the rows of a ``tensors`` table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tensors.num_rows:
        return {}
    rows = tensors.filter(pc.equal(tensors.column("plugin").cast(pa.string()), "custom_scalars"))
    out: dict[str, dict[str, Any]] = {}
    for run, strs in zip(rows.column("run").to_pylist(), rows.column("strings").to_pylist()):
        if not strs:
            continue
        try:
            out[str(run)] = layout_dict(strs[0])
        except ValueError:
            continue  # not a Layout: nothing TensorBoard could show either
    return out


def merge_layouts(layouts: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """TensorBoard's merged layout: runs in name order, categories by title (the first one
    seen keeps its place), and each category's charts without duplicates."""
    items = [layouts[k] for k in sorted(layouts)] if isinstance(layouts, Mapping) else list(layouts)
    merged: list[dict[str, Any]] = []
    by_title: dict[str, dict[str, Any]] = {}
    for i, layout in enumerate(items):
        for cat in layout.get("category", []):
            copy = {"title": cat["title"], "closed": cat.get("closed", False), "chart": list(cat.get("chart", []))}
            have = by_title.get(cat["title"]) if i else None
            if have is None:
                # The first layout is taken as it is; later ones add categories not seen yet.
                merged.append(copy)
                by_title[cat["title"]] = copy
            else:
                have["chart"].extend(c for c in copy["chart"] if c not in have["chart"])
    return {"category": merged}
