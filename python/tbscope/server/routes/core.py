"""What the server holds: status, runs, tags and series, the health report, and change notices
(server-sent events, with a polling fallback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response, StreamingResponse

from tbscope.server import encode, models, tables
from tbscope.server.config import MAX_RUNS_PAGE
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, KIND_NAMES, name_filter, series_kind, store_of
from tbscope.server.store import Change, Store, color, status_body

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]


@router.get(
    "/status", response_model=None, responses={200: {"model": models.Status}}, summary="Server state and load progress"
)
def status(request: Request, store: StoreDep) -> Response:
    return encode.json_response(status_body(store))


@router.get(
    "/changes",
    response_model=None,
    responses={200: {"model": models.Changes}},
    summary="What changed since a generation (polling fallback of events)",
)
def changes(
    store: StoreDep, since: Annotated[int, Query(ge=0, le=2**62, description="the generation last seen")] = 0
) -> Response:
    runs, kinds, reset = store.changes_since(since)
    return encode.json_response({"generation": store.generation, "runs": runs, "kinds": kinds, "reset": reset})


@router.get(
    "/events",
    summary="Change notices as server-sent events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "event: change, data: {generation, runs, kinds}"}
    },
)
async def events(request: Request, store: StoreDep) -> StreamingResponse:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=100)

    def push(change: Change) -> None:
        def put() -> None:
            if queue.full():
                queue.get_nowait()  # a slow client gets the newest notices
            queue.put_nowait(change)

        loop.call_soon_threadsafe(put)

    unsubscribe = store.subscribe(push)

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield f"retry: 3000\n: generation {store.generation}\n\n".encode()
            idle = 0.0
            while not store.stopping:
                try:
                    change = await asyncio.wait_for(queue.get(), timeout=0.5)
                except TimeoutError:
                    idle += 0.5
                    if idle >= 15:
                        idle = 0.0
                        yield b": ping\n\n"
                    if await request.is_disconnected():
                        return
                    continue
                idle = 0.0
                data = encode.dumps(
                    {"generation": change.generation, "runs": list(change.runs), "kinds": list(change.kinds)}
                )
                yield b"event: change\ndata: " + data + b"\n\n"
        finally:
            unsubscribe()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


@router.get(
    "/runs",
    response_model=None,
    responses={200: {"model": models.Runs}},
    summary="Runs, sorted by name, a page at a time",
)
def runs(
    request: Request,
    store: StoreDep,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS_PAGE)] = 1000,
    filter: Annotated[str | None, Query(max_length=1000, description="a glob (* crosses /) or /regex/")] = None,
) -> Response:
    snap = store.snapshot
    tag = encode.fresh(request, snap.generation)
    table = snap.runs
    if filter:
        keep = name_filter(filter)
        table = tables.take(table, [keep(r) for r in table.column("run").to_pylist()])
    total = table.num_rows
    page = table.slice(offset, limit)
    names = page.column("run").to_pylist()
    bad: dict[str, int] = {}
    for p in snap.report:
        if p["severity"] in ("corrupt", "error", "warning"):
            bad[p["run"]] = bad.get(p["run"], 0) + 1
    cols = {
        "run": names,
        "color": [color(r) for r in names],
        "start_time": encode.floats(tables.to_numpy(page.column("first_wall_time"))),
        "last_wall_time": encode.floats(tables.to_numpy(page.column("last_wall_time"))),
        "max_step": page.column("max_step").to_pylist(),
        "files": page.column("files").to_pylist(),
        "bytes": page.column("bytes").to_pylist(),
        "problems": [bad.get(r, 0) for r in names],
    }
    return encode.json_response({"total": total, "offset": offset, "loading": store.loading, "columns": cols}, tag)


def _series_table(store: Store, kind: str | None, runs: list[str] | None) -> Any:
    snap = store.snapshot
    t = snap.series
    if not t.num_rows:
        return t
    api_kinds = [series_kind(k, p) for k, p in zip(t.column("kind").to_pylist(), t.column("plugin").to_pylist())]
    want = "histograms" if kind == "distributions" else kind
    mask = [want is None or k == want for k in api_kinds]
    if runs:
        rs = set(runs)
        mask = [m and r in rs for m, r in zip(mask, t.column("run").to_pylist())]
    t = t.set_column(t.schema.get_field_index("kind"), "kind", tables.strings(api_kinds))
    return tables.take(t, mask)


Kind = Annotated[
    str | None,
    Query(
        description="scalars, histograms, distributions, images, audio, text, tensors, pr_curves, custom_scalars, hparams, blobs"
    ),
]


def _check_kind(kind: str | None, required: bool) -> None:
    if kind is None and required:
        raise ApiError(400, f"kind is required: one of {', '.join(KIND_NAMES)}")
    if kind is not None and kind not in KIND_NAMES:
        raise ApiError(400, f"unknown kind {kind!r}; choose from {', '.join(KIND_NAMES)}")


@router.get(
    "/tags",
    response_model=None,
    responses={200: {"model": models.Tags}},
    summary="Tags of one kind, with how many runs have each",
)
def tags(
    request: Request,
    store: StoreDep,
    kind: Kind = "scalars",
    run: Annotated[list[str] | None, Query(description="only these runs (repeatable)")] = None,
) -> Response:
    _check_kind(kind, True)
    tag = encode.fresh(request, store.snapshot.generation)
    t = _series_table(store, kind, run)
    per: dict[str, list[int]] = {}
    for name, points in zip(t.column("tag").to_pylist(), t.column("points").to_pylist()):
        acc = per.setdefault(name, [0, 0])
        acc[0] += 1
        acc[1] += points or 0
    names = sorted(per)
    cols = {"tag": names, "runs": [per[n][0] for n in names], "points": [per[n][1] for n in names]}
    return encode.json_response({"kind": kind, "loading": store.loading, "columns": cols}, tag)


@router.get(
    "/series",
    response_model=None,
    responses={200: {"model": models.SeriesList}},
    summary="Every series (run × tag) with its kind and size",
)
def series(
    request: Request, store: StoreDep, kind: Kind = None, run: Annotated[list[str] | None, Query()] = None
) -> Response:
    _check_kind(kind, False)
    tag = encode.fresh(request, store.snapshot.generation)
    t = _series_table(store, kind, run)
    cols = {
        "run": t.column("run").to_pylist(),
        "tag": t.column("tag").to_pylist(),
        "kind": t.column("kind").to_pylist(),
        "points": t.column("points").to_pylist(),
        "min_step": t.column("first_step").to_pylist(),
        "max_step": t.column("last_step").to_pylist(),
        "display_name": t.column("display_name").to_pylist(),
        "description": t.column("description").to_pylist(),
    }
    return encode.json_response({"kind": kind, "loading": store.loading, "columns": cols}, tag)


@router.get(
    "/health",
    response_model=None,
    responses={200: {"model": models.Health}},
    summary="Corrupt records, truncated tails, unreadable files",
)
def health(request: Request, store: StoreDep) -> Response:
    # The first load's end publishes no new generation: the tag says whether it is over too.
    loading = store.loading
    snap = store.snapshot
    tag = encode.fresh(request, snap.generation, "loading" if loading else "")
    rep = snap.report
    cols = {k: [p[k] for p in rep] for k in ("file", "run", "offset", "end", "severity", "reason")}
    ok = not any(p["severity"] in ("corrupt", "error") for p in rep)
    return encode.json_response({"ok": ok, "loading": loading, "columns": cols}, tag)
