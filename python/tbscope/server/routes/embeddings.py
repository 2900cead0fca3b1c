"""``embeddings`` (the projector's embeddings of every run), ``embeddings/projection`` (one
embedding in 2-D or 3-D, computed here) and ``embeddings/sprite`` (its thumbnails image).

Projector files are not events: a new embedding bumps no data generation. So the listing and
the entity tags also depend on the config files' modification times and sizes (a fingerprint),
and a projection is cached under its tensor file's. Files are read through
:mod:`tbscope._projector`, which refuses any asset path that leaves its config's folder.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from tbscope import _projector
from tbscope.server import encode
from tbscope.server.config import MAX_POINTS
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, name_filter, source_run, store_of
from tbscope.server.store import Store, all_embeddings, source_embeddings, stat_key

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]
Run = Annotated[str, Query(min_length=1)]
Tag = Annotated[str, Query(min_length=1, description="the tensor name, as listed")]

#: Points a projection answers with by default (a deterministic sample beyond it).
DEFAULT_POINTS = 20_000
#: Image types a sprite is served as; anything else is refused (never served as HTML or SVG).
SPRITE_TYPES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}


class EmbeddingColumns(BaseModel):
    run: list[str]
    tag: list[str]
    points: list[int | None]
    dimensions: list[int | None]
    metadata_columns: list[list[str]]
    sprite: list[bool]
    sprite_width: list[int | None]
    sprite_height: list[int | None]
    error: list[str | None]


class Embeddings(BaseModel):
    loading: bool
    columns: EmbeddingColumns


class MetadataColumn(BaseModel):
    name: str
    type: Literal["number", "string"]
    column: str


class Projection(BaseModel):
    run: str
    tag: str
    method: Literal["pca", "tsne", "umap"]
    dims: int
    total_points: int
    dimensions: int
    explained_variance: list[float] | None
    metadata: list[MetadataColumn]
    sprite: dict[str, int] | None
    loading: bool
    columns: dict[str, list[Any]]


def _find(store: Store, run: str, tag: str) -> tuple[_projector.EmbeddingInfo, str]:
    st, local = source_run(store, run)
    fp, infos = source_embeddings(store, st)
    for info in infos:
        if info.run == local and info.tag and info.tag in (tag, tag[:-2] if tag.endswith(":0") else tag):
            if info.tensor_path is None or info.points is None:
                raise ApiError(404, f"embedding {tag!r} of run {run!r} cannot be read: {info.error}")
            return info, fp
    names = [i.tag for i in infos if i.run == local and i.tag]
    hint = (
        f"; it has {', '.join(repr(n) for n in names[:20])}"
        if names
        else "; it has none (list them with api/v1/embeddings)"
    )
    raise ApiError(404, f"run {run!r} has no embedding {tag!r}{hint}")


# ------------------------------------------------------------------------------------------------
# Endpoints


@router.get(
    "/embeddings",
    response_model=None,
    responses={200: {"model": Embeddings}},
    summary="The projector's embeddings of every run",
)
def embeddings(
    request: Request,
    store: StoreDep,
    run: Annotated[list[str] | None, Query(description="only these runs (repeatable)")] = None,
    filter: Annotated[str | None, Query(description="runs matching a glob or /regex/")] = None,
) -> Response:
    fp, infos = all_embeddings(store)
    etag = encode.fresh(request, store.snapshot.generation, fp)
    keep = name_filter(filter)
    wanted = set(run) if run else None
    rows = [(r, i) for r, i in infos if keep(r) and (wanted is None or r in wanted)]
    cols: dict[str, list[Any]] = {
        "run": [r for r, _ in rows],
        "tag": [i.tag for _, i in rows],
        "points": [i.points for _, i in rows],
        "dimensions": [i.dimensions for _, i in rows],
        "metadata_columns": [list(i.metadata_columns) for _, i in rows],
        "sprite": [i.sprite_path is not None for _, i in rows],
        "sprite_width": [
            i.sprite_single_image_dim[0] if len(i.sprite_single_image_dim) == 2 else None for _, i in rows
        ],
        "sprite_height": [
            i.sprite_single_image_dim[1] if len(i.sprite_single_image_dim) == 2 else None for _, i in rows
        ],
        # Paths in messages are the server's own; say what is wrong relative to the logdir.
        "error": [None if i.error is None else _relative_error(i.error, store) for _, i in rows],
    }
    return encode.json_response({"loading": store.loading, "columns": cols}, etag)


def _relative_error(message: str, store: Store) -> str:
    for st in store.sources:
        root = os.path.realpath(st.source.path)
        message = message.replace(root + os.sep, "").replace(os.path.abspath(st.source.path) + os.sep, "")
    return message


@router.get(
    "/embeddings/projection",
    response_model=None,
    responses={200: {"model": Projection}},
    summary="One embedding projected to 2-D or 3-D, with its metadata",
)
def projection(
    request: Request,
    store: StoreDep,
    run: Run,
    tag: Tag,
    dims: Annotated[int, Query(ge=2, le=3, description="2 or 3 coordinates per point")] = 2,
    method: Annotated[
        Literal["pca", "tsne", "umap"],
        Query(description="pca always; tsne with scikit-learn, umap with umap-learn installed on the server"),
    ] = "pca",
    points: Annotated[
        int, Query(ge=1, le=MAX_POINTS, description="at most this many points (a fixed sample beyond it)")
    ] = DEFAULT_POINTS,
) -> Response:
    import numpy as np

    info, fp = _find(store, run, tag)
    tensor_stat = stat_key(info.tensor_path or "")
    etag = encode.fresh(request, store.snapshot.generation, fp, tensor_stat)

    def compute() -> dict[str, Any]:
        try:
            emb = _projector.load(info)
        except (OSError, ValueError) as e:
            raise ApiError(
                404, f"embedding {tag!r} of run {run!r} cannot be read: {_relative_error(str(e), store)}"
            ) from None
        n = emb.shape[0]
        # The sample is the same on every request (seeded), and sorted to keep the file's order.
        index = np.arange(n) if n <= points else np.sort(np.random.default_rng(0).choice(n, points, replace=False))
        # PCA fits every point (cheap); t-SNE and UMAP only the sample (their cost grows fast).
        values = emb.values if method == "pca" else emb.values[index]
        try:
            coords, meta = _projector.project(values, dims, method)
        except ImportError as e:
            raise ApiError(400, f"{e} on the server") from None
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        if method == "pca":
            coords = coords[index]
        cols: dict[str, Any] = {"index": index}
        for axis, c in zip("xyz", coords.T):
            cols[axis] = encode.floats(np.ascontiguousarray(c))
        described = []
        if emb.metadata is not None:
            for _i, name in enumerate(emb.metadata.columns):
                text = emb.metadata[name].to_numpy(dtype=object)[index]
                numbers = _numbers(text)
                key = f"meta:{name}"
                cols[key] = text.tolist() if numbers is None else numbers
                described.append({"name": str(name), "type": "string" if numbers is None else "number", "column": key})
        sprite = None
        if info.sprite_path is not None and len(info.sprite_single_image_dim) == 2:
            sprite = {"width": info.sprite_single_image_dim[0], "height": info.sprite_single_image_dim[1]}
        return {
            "method": method, "dims": dims, "total_points": n, "dimensions": emb.shape[1],
            "explained_variance": meta["explained_variance"], "metadata": described, "sprite": sprite, "columns": cols,
        }  # fmt: skip

    body = store.cached(("projection", run, info.tag, method, dims, points, fp, tensor_stat), compute)
    return encode.json_response({"run": run, "tag": info.tag, **body, "loading": store.loading}, etag)


def _numbers(text: Any) -> list[Any] | None:
    """A metadata column as numbers (empty cells null), when every non-empty cell is one: the
    projector's rule for colouring by a gradient instead of categories."""
    out: list[Any] = []
    for v in text:
        s = str(v).strip()
        if not s:
            out.append(None)
            continue
        try:
            f = float(s)
        except ValueError:
            return None
        out.append(encode.clean(f))
    return out if any(v is not None for v in out) else None


@router.get(
    "/embeddings/sprite", response_model=None, summary="An embedding's sprite: every point's thumbnail in one image"
)
def sprite(request: Request, store: StoreDep, run: Run, tag: Tag) -> Response:
    info, fp = _find(store, run, tag)
    if info.sprite_path is None:
        raise ApiError(404, f"embedding {tag!r} of run {run!r} has no sprite image")
    etag = encode.fresh(request, store.snapshot.generation, fp, stat_key(info.sprite_path))
    try:
        with open(info.sprite_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ApiError(404, f"the sprite of {tag!r} in run {run!r} cannot be read ({e.strerror})") from None
    ctype = next((t for magic, t in SPRITE_TYPES.items() if data.startswith(magic)), None)
    if ctype is None:
        raise ApiError(404, f"the sprite of {tag!r} in run {run!r} is not a PNG, JPEG or GIF image")
    return encode.body_response(data, ctype, etag)
