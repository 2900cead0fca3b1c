"""The API's endpoints, one module per concept; each module has a ``router``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import Request
from starlette.responses import Response

from tbscope.server import encode, tables
from tbscope.server.errors import ApiError
from tbscope.server.models import Error
from tbscope.server.store import SourceState, Store, series_kind

__all__ = [
    "ERRORS",
    "KIND_NAMES",
    "name_filter",
    "series_answer",
    "series_kind",
    "source_run",
    "store_of",
    "tag_rows",
]

#: Error answers every endpoint may give (documented in the OpenAPI document).
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Error, "description": "bad parameters"},
    401: {"model": Error, "description": "a token is required"},
    404: {"model": Error, "description": "no such run, tag or endpoint"},
    413: {"model": Error, "description": "too much asked for"},
    500: {"model": Error, "description": "internal error"},
}

KIND_NAMES = (
    "scalars",
    "histograms",
    "images",
    "audio",
    "text",
    "hparams",
    "blobs",
    "tensors",
    "pr_curves",
    "custom_scalars",
    "distributions",
)


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def name_filter(pattern: str | None) -> Any:
    """A predicate for ``filter=``: a glob (``*`` crosses ``/``) or ``/regex/``."""
    if not pattern:
        return lambda _name: True
    if len(pattern) >= 2 and pattern.startswith("/") and pattern.endswith("/"):
        try:
            rx = re.compile(pattern[1:-1])
        except re.error as e:
            raise ApiError(400, f"filter /{pattern[1:-1]}/ is not a valid regex: {e}") from None
        return lambda name: rx.search(name) is not None
    from tbscope._filters import glob_to_regex

    rx = re.compile(glob_to_regex(pattern))
    return lambda name: rx.search(name) is not None


def source_run(store: Store, run: str) -> tuple[SourceState, str]:
    hit = store.resolve(run)
    if hit is None or not hit[0].ready:
        later = (
            " (the logdirs are still loading: try again when api/v1/status says loading.done)" if store.loading else ""
        )
        raise ApiError(404, f"no run {run!r}; list them with api/v1/runs{later}")
    return hit


def tag_rows(store: Store, kind: str, run: str, tag: str, noun: str | None = None) -> tuple[SourceState, Any]:
    """The rows of one run and tag in the ``kind`` table (404 when there are none: the tag is
    not a ``noun`` tag of that run, ``noun`` being the kind by default)."""
    st, local = source_run(store, run)
    table = store.table(st, kind)
    t = tables.rows(table, local, tag) if table.num_rows else table
    if not t.num_rows:
        raise ApiError(404, f"run {run!r} has no {noun or kind} tag {tag!r}; list them with api/v1/tags?kind={kind}")
    return st, t


def series_answer(
    request: Request,
    store: Store,
    kind: str,
    run: str,
    tag: str,
    columns: Callable[[SourceState, Any], dict[str, Any]],
    noun: str | None = None,
) -> Response:
    """The JSON answer of one run and tag's rows of ``kind``, ``columns(state, rows)`` laid out
    by the endpoint; 304 when the client's copy (its ETag) is still current."""
    etag = encode.fresh(request, store.snapshot.generation)
    st, t = tag_rows(store, kind, run, tag, noun)
    body = {"run": run, "tag": tag, "loading": store.loading, "columns": columns(st, t)}
    return encode.json_response(body, etag)
