"""``profiles``, ``profile/events`` and ``profile/operations``: the logdirs' profiles
(:mod:`tbscope._profiles`) for the dashboard's timeline and top-operations table.

A profile is named by its run and its ``file`` (the path the listing gives, relative to the
logdir); only files the listing has are opened, so nothing outside the logdirs is reachable.
Profile files are not event files: their ETags come from the files' sizes and modification
times, not from the data generation.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from tbscope.server import encode
from tbscope.server.errors import ApiError
from tbscope.server.routes import ERRORS, store_of
from tbscope.server.store import SourceState, Store

router = APIRouter(responses=ERRORS)
StoreDep = Annotated[Store, Depends(store_of)]
Run = Annotated[str, Query(min_length=1)]
File = Annotated[str, Query(min_length=1, description="the profile's `file`, as `profiles` lists it")]

#: Events a timeline answer holds at most (the longest ones in the window are kept).
MAX_EVENTS = 100_000
#: Parsed traces kept in memory, newest used last.
_KEEP = 4
_parsed: OrderedDict[tuple[str, int, int], Any] = OrderedDict()
_parsed_lock = threading.Lock()


def _listing(store: Store) -> list[tuple[SourceState, dict[str, Any]]]:
    from tbscope._profiles import find_profiles

    out = []
    for st in store.sources:
        for entry in find_profiles(st.source.path):
            out.append((st, entry))
    return out


def _stamp(paths: list[Path]) -> str:
    parts = []
    for p in paths:
        try:
            st = p.stat()
            parts.append(f"{p}\0{st.st_size}\0{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{p}\0gone")
    return "\n".join(parts)


@router.get(
    "/profiles",
    response_model=None,
    summary="Profile files in the logdirs: torch.profiler traces and the profile plugin's files",
)
def profiles(request: Request, store: StoreDep) -> Response:
    found = _listing(store)
    tag = encode.fresh(request, _stamp([Path(e["_file"]) for _, e in found]))
    cols: dict[str, list[Any]] = {k: [] for k in ("run", "session", "host", "time", "size", "format", "source", "file")}
    for st, e in found:
        cols["run"].append(st.full_name(e["run"]))
        cols["session"].append(e["session"])
        cols["host"].append(e["host"])
        cols["time"].append(encode.clean(e["time"]))
        cols["size"].append(e["size"])
        cols["format"].append(e["format"])
        cols["source"].append(e["source"])
        cols["file"].append(e["path"])
    return encode.json_response({"columns": cols}, tag)


def _open(store: Store, run: str, file: str) -> tuple[Path, Any]:
    """The listed Chrome trace ``file`` of ``run`` and its events (an Arrow table)."""
    from tbscope import _core

    candidates = [(s, e) for s, e in _listing(store) if s.full_name(e["run"]) == run and e["path"] == file]
    if not candidates:
        raise ApiError(404, f"run {run!r} has no profile file {file!r}; list them with api/v1/profiles")
    src, entry = candidates[0]
    if entry["format"] != "chrome_trace":
        raise ApiError(
            400, f"{file} is a {entry['format']} file; the timeline opens Chrome traces (format chrome_trace)"
        )
    path = Path(entry["_file"])
    try:
        stat = path.stat()
    except OSError:
        raise ApiError(404, f"profile file {file!r} is gone; list them again with api/v1/profiles") from None
    key = (os.fspath(path), stat.st_size, stat.st_mtime_ns)
    with _parsed_lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return path, _parsed[key]
    try:
        table = _core.read_trace(os.fspath(path))
    except ValueError as e:
        raise ApiError(400, str(e)) from None
    import pyarrow as pa

    events = pa.table(table)
    with _parsed_lock:
        _parsed[key] = events
        while len(_parsed) > _KEEP:
            _parsed.popitem(last=False)
    return path, events


@router.get(
    "/profile/events", response_model=None, summary="A Chrome trace's timed events in a time window, for a timeline"
)
def profile_events(
    request: Request,
    store: StoreDep,
    run: Run,
    file: File,
    start: Annotated[float | None, Query(description="window start, microseconds (the trace's clock)")] = None,
    end: Annotated[float | None, Query(description="window end, microseconds")] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_EVENTS, description="at most this many events: the longest in the window")
    ] = 20_000,
) -> Response:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    path, events = _open(store, run, file)
    tag = encode.fresh(request, _stamp([path]))
    if start is not None and end is not None and end < start:
        raise ApiError(400, f"end ({end}) is before start ({start})")
    timed = (
        events.filter(pc.and_(pc.is_valid(events.column("duration")), pc.is_valid(events.column("start"))))
        if events.num_rows
        else events
    )
    # Lanes (one per process and thread) are those of the whole trace, so they stay put as the
    # window moves.
    lane_keys = pa.table({"pid": timed.column("pid").cast(pa.string()), "tid": timed.column("tid").cast(pa.string())})
    lanes: dict[tuple[str, str], int] = {}
    procs = timed.column("process").cast(pa.string()).to_pylist()
    threads = timed.column("thread").cast(pa.string()).to_pylist()
    lane_info: list[dict[str, str]] = []
    pids, tids = lane_keys.column("pid").to_pylist(), lane_keys.column("tid").to_pylist()
    order = sorted(range(len(pids)), key=lambda i: (procs[i], pids[i], threads[i], tids[i]))
    for i in order:
        k = (pids[i], tids[i])
        if k not in lanes:
            lanes[k] = len(lanes)
            lane_info.append({"process": procs[i], "thread": threads[i], "pid": pids[i], "tid": tids[i]})
    lane_of = np.array([lanes[(p, t)] for p, t in zip(pids, tids)], dtype=np.int64)
    s = timed.column("start").to_numpy() if timed.num_rows else np.zeros(0)
    d = timed.column("duration").to_numpy() if timed.num_rows else np.zeros(0)
    lo = float(s.min()) if len(s) else 0.0
    hi = float((s + d).max()) if len(s) else 0.0
    keep = np.ones(len(s), dtype=bool)
    if start is not None:
        keep &= s + d >= start
    if end is not None:
        keep &= s <= end
    idx = np.nonzero(keep)[0]
    total = len(idx)
    if total > limit:
        # The longest events: what a timeline at this zoom can show.
        idx = np.sort(idx[np.argsort(-d[idx], kind="stable")[:limit]])
    take = pa.array(idx, pa.int64())
    picked = timed.take(take)
    cols = {
        "name": picked.column("name").cast(pa.string()).to_pylist(),
        "category": picked.column("category").cast(pa.string()).to_pylist(),
        "start": encode.floats(s[idx]),
        "duration": encode.floats(d[idx]),
        "self_duration": encode.float_column(picked.column("self_duration")),
        "lane": lane_of[idx],
    }
    body = {
        "run": run,
        "file": file,
        "start_min": encode.clean(lo),
        "end_max": encode.clean(hi),
        "total": total,
        "truncated": total > len(idx),
        "lanes": lane_info,
        "columns": cols,
    }
    return encode.json_response(body, tag)


@router.get("/profile/operations", response_model=None, summary="A Chrome trace's top operations by self time")
def profile_operations(
    request: Request,
    store: StoreDep,
    run: Run,
    file: File,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
) -> Response:
    from tbscope._profiles import top_operations

    path, events = _open(store, run, file)
    tag = encode.fresh(request, _stamp([path]))
    ops = top_operations(events, limit)
    cols: dict[str, Any] = {c: ops[c].tolist() for c in ("name", "category", "calls")}
    for c in ("self_total", "total", "mean", "max", "self_share"):
        cols[c] = encode.floats(ops[c].to_numpy(dtype="float64"))
    return encode.json_response({"run": run, "file": file, "columns": cols}, tag)
