"""Plugin data stored as tensors, decoded: PR curves, custom-scalar layouts and meshes.

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
- **Meshes** (``mesh`` plugin, ``add_mesh``): one mesh is up to three series,
  ``<name>_VERTEX`` (float32 ``[B, N, 3]``), ``<name>_FACE`` (int32 ``[B, F, 3]``) and
  ``<name>_COLOR`` (uint8 ``[B, N, 3]``), each with a ``MeshPluginData`` (name, content type,
  three.js JSON config). :func:`meshes` joins them into one row per mesh, step and sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MESH_PARTS",
    "PR_COLUMNS",
    "custom_scalar_layouts",
    "layout_dict",
    "merge_layouts",
    "mesh_plugin_data",
    "meshes",
    "pr_curves",
]

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

    from tbscope._frames import to_ndarray

    rows = (
        tensors.filter(pc.equal(tensors.column("plugin").cast(pa.string()), "pr_curves"))
        if tensors.num_rows
        else tensors
    )
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


#: ``MeshPluginData.content_type`` values and the columns of :func:`meshes` they fill.
MESH_PARTS = {1: "vertices", 2: "faces", 3: "colors"}
_MESH_SUFFIX = {1: "_VERTEX", 2: "_FACE", 3: "_COLOR"}
_MESH_DTYPES = {"vertices": "float32", "faces": "int32", "colors": "uint8"}


def mesh_plugin_data(raw: bytes) -> dict[str, Any]:
    """A serialized ``MeshPluginData`` as a dict: ``name``, ``content_type`` (1 vertices,
    2 faces, 3 colours), ``json_config`` and ``shape``. ValueError if the bytes are malformed."""
    from tbscope._pb import fields

    out: dict[str, Any] = {"name": "", "content_type": 0, "json_config": "", "shape": []}
    for f, _w, v in fields(raw):
        if f == 2 and isinstance(v, bytes):
            out["name"] = v.decode("utf-8", "replace")
        elif f == 3 and isinstance(v, int):
            out["content_type"] = v
        elif f == 5 and isinstance(v, bytes):
            out["json_config"] = v.decode("utf-8", "replace")
        elif f == 6:
            if isinstance(v, bytes):  # packed
                from tbscope._pb import _read_varint

                at = 0
                while at < len(v):
                    n, at = _read_varint(v, at)
                    out["shape"].append(n)
            else:
                out["shape"].append(v)
    return out


def meshes(tensors: pa.Table, series: pa.Table) -> pa.Table:
    """The meshes among a ``tensors`` table's rows, one row per (run, mesh, step, sample):
    ``run``, ``tag`` (the mesh's name, without the ``_VERTEX``/``_FACE``/``_COLOR`` suffix),
    ``step``, ``wall_time``, ``index`` (the sample within the batch), ``vertices``
    (float32), ``faces`` (int32) and ``colors`` (uint8) as flat lists of ``3 * n`` values
    (null when the mesh has none), and ``config`` (the three.js JSON the writer gave, or "").
    ``series`` is the logdir's series table, whose ``plugin_content`` names each part.
    A part whose tensor is not ``[B, n, 3]`` is skipped, as TensorBoard cannot draw it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tbscope._frames import to_ndarray

    parts: dict[tuple[str, str], dict[str, Any]] = {}
    if series.num_rows:
        mesh_series = series.filter(pc.equal(series.column("plugin").cast(pa.string()), "mesh"))
        for run, tag, content in zip(*(mesh_series.column(c).to_pylist() for c in ("run", "tag", "plugin_content"))):
            try:
                meta = mesh_plugin_data(content or b"")
            except ValueError:
                continue
            part = MESH_PARTS.get(meta["content_type"])
            if part is None:
                continue
            name = meta["name"] or str(tag).removesuffix(_MESH_SUFFIX[meta["content_type"]])
            parts[(str(run), str(tag))] = {"part": part, "name": name, "config": meta["json_config"]}
    rows = tensors.filter(pc.equal(tensors.column("plugin").cast(pa.string()), "mesh")) if tensors.num_rows else tensors
    found: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    cols = ("run", "tag", "step", "wall_time", "dtype", "shape", "content", "strings")
    for run, tag, step, wall, dt, shape, content, strs in zip(*(rows.column(c).to_pylist() for c in cols)):
        info = parts.get((str(run), str(tag)))
        if info is None or dt == "string" or len(shape) != 3 or shape[2] != 3:
            continue
        arr = to_ndarray(dt, tuple(shape), content, strs).astype(_MESH_DTYPES[info["part"]])
        for i in range(shape[0]):
            row = found.setdefault(
                (str(run), info["name"], step, i),
                {"wall_time": wall, "config": info["config"], "vertices": None, "faces": None, "colors": None},
            )
            row[info["part"]] = arr[i].reshape(-1)
            row["config"] = row["config"] or info["config"]
            row["wall_time"] = (
                min(row["wall_time"], wall) if row["wall_time"] is not None and wall is not None else wall
            )
    keys = sorted(found)
    out: dict[str, Any] = {
        "run": pa.array([k[0] for k in keys], pa.string()).dictionary_encode(),
        "tag": pa.array([k[1] for k in keys], pa.string()).dictionary_encode(),
        "step": pa.array([k[2] for k in keys], pa.int64()),
        "wall_time": pa.array([found[k]["wall_time"] for k in keys], pa.float64()),
        "index": pa.array([k[3] for k in keys], pa.int32()),
    }
    for part, dtype in _MESH_DTYPES.items():
        out[part] = pa.array([found[k][part] for k in keys], pa.list_(getattr(pa, dtype)()))
    out["config"] = pa.array([found[k]["config"] for k in keys], pa.string())
    return pa.table(out)
