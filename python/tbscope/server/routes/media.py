"""``images``, ``audio`` and ``text``, and ``blob/{key}``: the bytes of an image or clip.

A blob key is a hash of where the bytes are (the logdir, the event file, offset and length):
opaque, never a path, and the same across reloads and restarts, so browsers may cache the
bytes forever. The server maps keys back to rows of its tables; a key it does not know is 404.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from tbscope.server import encode, models
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, series_answer, store_of
from tbscope.server.store import SourceState, Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]
Run = Annotated[str, Query(min_length=1)]
Tag = Annotated[str, Query(min_length=1)]

#: Types served as themselves; anything else is an octet-stream attachment (an SVG or HTML
#: "image" must never run in the server's origin).
SAFE_TYPES = {
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp",
    "audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/ogg", "audio/flac", "audio/webm",
}  # fmt: skip
IMMUTABLE = "private, max-age=31536000, immutable"


def blob_key(st: SourceState, rel: str, offset: int, length: int) -> str:
    where = f"{st.source.name or ''}\0{rel}\0{offset}\0{length}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(where, digest_size=16).hexdigest()


@dataclass(frozen=True)
class BlobRef:
    frame: Any  # a tbscope BlobFrame
    row: int
    content_type: str


def _keys(st: SourceState, table: Any) -> list[str]:
    files = table.column("blob_file").to_pylist()
    offsets = table.column("blob_offset").to_pylist()
    lengths = table.column("blob_length").to_pylist()
    return [blob_key(st, f, o, n) for f, o, n in zip(files, offsets, lengths)]


def _key_map(store: Store) -> dict[str, BlobRef]:
    def make() -> dict[str, BlobRef]:
        out: dict[str, BlobRef] = {}
        for st in store.sources:
            if not st.ready:
                continue
            for kind in ("images", "audio"):
                with store.with_logdir(st) as lg:
                    frame = lg.images() if kind == "images" else lg.audio()
                t = frame.to_arrow()
                if not t.num_rows:
                    continue
                for i, (k, ct) in enumerate(zip(_keys(st, t), t.column("content_type").to_pylist())):
                    out[k] = BlobRef(frame, i, str(ct))
        return out

    keys: dict[str, BlobRef] = store.cached("blob-keys", make)
    return keys


def _blob_columns(st: SourceState, t: Any) -> dict[str, Any]:
    """The columns images and clips share: where each is, and the key of its bytes."""
    return {
        "step": t.column("step").to_numpy(),
        "wall_time": encode.float_column(t.column("wall_time")),
        "index": t.column("index").to_pylist(),
        "content_type": [str(c) for c in t.column("content_type").to_pylist()],
        "key": _keys(st, t),
    }


@router.get(
    "/images",
    response_model=None,
    responses={200: {"model": models.Images}},
    summary="The images of one run and tag, with a blob key each",
)
def images(request: Request, store: StoreDep, run: Run, tag: Tag) -> Response:
    def columns(st: SourceState, t: Any) -> dict[str, Any]:
        return {
            **_blob_columns(st, t),
            "width": t.column("width").to_pylist(),
            "height": t.column("height").to_pylist(),
        }

    return series_answer(request, store, "images", run, tag, columns)


@router.get(
    "/audio",
    response_model=None,
    responses={200: {"model": models.Audio}},
    summary="The audio clips of one run and tag, with a blob key each",
)
def audio(request: Request, store: StoreDep, run: Run, tag: Tag) -> Response:
    def columns(st: SourceState, t: Any) -> dict[str, Any]:
        return {
            **_blob_columns(st, t),
            "sample_rate": encode.float_column(t.column("sample_rate")),
            "label": [str(c or "") for c in t.column("label").to_pylist()],
        }

    return series_answer(request, store, "audio", run, tag, columns)


@router.get(
    "/blob/{key}",
    response_model=None,
    responses={
        200: {
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            "description": "the bytes, with their content type",
        }
    },
    summary="The bytes of an image or audio clip",
)
def blob(request: Request, store: StoreDep, key: Annotated[str, Path(min_length=1, max_length=64)]) -> Response:
    if len(key) != 32 or any(c not in "0123456789abcdef" for c in key):
        raise ApiError(404, "no such blob; keys come from api/v1/images and api/v1/audio")
    ref = _key_map(store).get(key)
    if ref is None:
        raise ApiError(404, "no such blob (the file it was in may be gone); list images again for current keys")
    # The key names the bytes: a client holding them (a reload that revalidates) has them all.
    etag = encode.revalidate(request, f'"{key}"', IMMUTABLE)
    try:
        data = ref.frame.blob(ref.row)
    except (OSError, FileNotFoundError):
        raise ApiError(404, "the file holding this blob is gone or was cut short") from None
    headers = {"Cache-Control": IMMUTABLE, "ETag": etag}
    ctype = ref.content_type if ref.content_type in SAFE_TYPES else "application/octet-stream"
    if ctype == "application/octet-stream":
        headers["Content-Disposition"] = f'attachment; filename="{key}.bin"'
    return Response(data, media_type=ctype, headers=headers)


@router.get(
    "/text",
    response_model=None,
    responses={200: {"model": models.Text}},
    summary="Text summaries of one run and tag, raw (sanitize before showing)",
)
def text(request: Request, store: StoreDep, run: Run, tag: Tag) -> Response:
    return series_answer(request, store, "text", run, tag, _text_columns)


def _text_columns(_st: SourceState, t: Any) -> dict[str, Any]:
    """One entry per record: its string, or its elements and shape for a tensor of strings."""
    steps = t.column("step").to_pylist()
    walls = t.column("wall_time").to_pylist()
    texts = t.column("text").to_pylist()
    index = t.column("index").to_pylist()
    shape_of = t.column("shape").to_pylist()
    out_steps: list[int] = []
    out_walls: list[Any] = []
    out_text: list[Any] = []
    shapes: list[list[int]] = []
    i = 0
    while i < len(steps):
        # One record's elements are consecutive rows counting up from index 0, as many as its
        # shape holds.
        j = i + 1
        while j < len(steps) and index[j] > index[j - 1] and steps[j] == steps[i]:
            j += 1
        shape = list(shape_of[i] or [])
        j = min(j, i + max(1, math.prod(shape)))
        elems = texts[i:j]
        out_steps.append(steps[i])
        out_walls.append(walls[i])
        if len(shape) <= 1 and len(elems) == 1:
            # One string: rank 0, or the [1] that add_text writes (as the contract has it).
            out_text.append(elems[0])
            shapes.append([])
        else:
            out_text.append(elems)
            shapes.append(shape)
        i = j
    return {
        "step": out_steps,
        "wall_time": encode.floats([float("nan") if w is None else w for w in out_walls]),
        "text": out_text,
        "shape": shapes,
    }
