"""Scalars for many runs × one tag: a per-tag index of the points, downsampling in Rust.

The reader keeps scalars in run, file and record order, tags interleaved. For a tag that is
asked for, the server gathers that tag's points once per snapshot into three columns grouped
by run (a counting sort in Rust over the table's run and tag codes), so a request touches only
the points of its tag and each series is a contiguous range for :func:`tbscope.downsample`.
An answer is columns too: every series of it side by side, ready for Arrow or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tbscope import _core
from tbscope.server.errors import ApiError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from starlette.requests import Request
    from starlette.responses import Response

    from tbscope.server.store import Snapshot, SourceState, Store


@dataclass
class TagIndex:
    """One tag's points of one logdir, grouped by run: run ``names[i]`` (sorted) has the rows
    ``starts[i]:ends[i]``, in reading order."""

    step: np.ndarray[Any, Any]
    wall_time: np.ndarray[Any, Any]
    value: np.ndarray[Any, Any]
    names: list[str]
    starts: np.ndarray[Any, Any]
    ends: np.ndarray[Any, Any]
    at: dict[str, int]  # run name -> its position in names

    @property
    def rows(self) -> int:
        return len(self.step)


def _strings_of(arr: Any, memo: dict[tuple[int, int, int], list[str]]) -> list[str]:
    """The values of a chunk's dictionary, converted once per dictionary (slices of a batch,
    as a cached table is made of, share theirs)."""
    d = arr.dictionary
    bufs = d.buffers()
    key = (
        bufs[1].address if bufs[1] is not None else 0,
        bufs[2].address if bufs[2] is not None else 0,
        d.offset * 1_000_003 + len(d),
    )
    got = memo.get(key)
    if got is None:
        got = memo[key] = [str(v) for v in d.to_pylist()]
    return got


def build_index(table: pa.Table, tag: str) -> TagIndex:
    """The tag's points in ``table`` (a reader's scalars), grouped by run."""
    import numpy as np

    from tbscope.server.tables import to_numpy

    memo: dict[tuple[int, int, int], list[str]] = {}
    runs_col, tags_col = table.column("run"), table.column("tag")
    steps, walls, values = table.column("step"), table.column("wall_time"), table.column("value")
    picked: list[tuple[int, list[str], int]] = []  # (chunk, its run names, the tag's code)
    names: set[str] = set()
    for i in range(runs_col.num_chunks):
        tags = _strings_of(tags_col.chunk(i), memo)
        if tag not in tags or not len(tags_col.chunk(i)):
            continue
        runs = _strings_of(runs_col.chunk(i), memo)
        picked.append((i, runs, tags.index(tag)))
        names.update(runs)
    order = sorted(names)
    rank = {n: g for g, n in enumerate(order)}
    group_of: dict[int, Any] = {}
    args: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
    for i, runs, code in picked:
        g = group_of.get(id(runs))
        if g is None:
            g = group_of[id(runs)] = np.array([rank[n] for n in runs], dtype=np.int64)
        for out, v in zip(
            args,
            (
                to_numpy(runs_col.chunk(i).indices),
                to_numpy(tags_col.chunk(i).indices),
                code,
                g,
                to_numpy(steps.chunk(i)),
                to_numpy(walls.chunk(i)),
                to_numpy(values.chunk(i)),
            ),
        ):
            out.append(v)
    runs_codes, tag_codes, codes, groups, step_parts, wall_parts, value_parts = args
    value_parts = [np.asarray(v, dtype=np.float64) for v in value_parts]
    counts_b, cols = _core.group_rows(
        runs_codes, tag_codes, codes, groups, len(order), [step_parts, wall_parts, value_parts]
    )
    counts = np.frombuffer(counts_b, dtype=np.int64)
    have = np.flatnonzero(counts)
    ends = np.cumsum(counts)[have]
    kept = [order[g] for g in have.tolist()]
    return TagIndex(
        step=np.frombuffer(cols[0], dtype=np.int64),
        wall_time=np.frombuffer(cols[1], dtype=np.float64),
        value=np.frombuffer(cols[2], dtype=np.float64),
        names=kept,
        starts=ends - counts[have],
        ends=ends,
        at={n: i for i, n in enumerate(kept)},
    )


def tag_index(store: Store, st: SourceState, tag: str, snap: Snapshot | None = None) -> TagIndex:
    """The tag's index in ``snap`` (default: the current snapshot), built on first use, once
    per snapshot."""
    snap = snap or store.snapshot
    index: TagIndex = store.cached(
        ("scalars-index", st.index, tag), lambda: build_index(store.table(st, "scalars", snap), tag), snap
    )
    return index


@dataclass
class Overview:
    """Every series of one tag in one logdir at ``points`` points (M4 over all of each
    series, bucketed along step or wall time), kept for the snapshot: series ``i`` of the
    tag's index is rows ``starts[i]:starts[i] + counts[i]`` of the columns, from ``totals[i]``
    points. A whole-series request is then slices of it, however many runs it names."""

    starts: np.ndarray[Any, Any]
    counts: np.ndarray[Any, Any]
    totals: np.ndarray[Any, Any]
    step: np.ndarray[Any, Any]
    wall_time: np.ndarray[Any, Any]
    value: np.ndarray[Any, Any]


#: Overviews a snapshot keeps (tags × point counts × axes); past that, requests downsample
#: directly, so no sequence of requests makes the server hold more.
MAX_OVERVIEWS = 16


def overview(store: Store, st: SourceState, tag: str, points: int, axis: str, snap: Snapshot) -> Overview | None:
    """The tag's overview at ``points`` points along ``axis`` (step or wall_time), computed
    once per snapshot (concurrent requests wait for the first); None when the snapshot holds
    as many overviews as it keeps and not this one."""
    key = ("scalars-overview", st.index, tag, points, axis)
    with snap.lock:
        if (
            key not in snap.extras
            and sum(1 for k in snap.extras if isinstance(k, tuple) and k[0] == "scalars-overview") >= MAX_OVERVIEWS
        ):
            return None

    def make() -> Overview:
        idx = tag_index(store, st, tag, snap)
        totals = idx.ends - idx.starts
        if points == 0:
            # Every point: the index itself, no copy.
            return Overview(idx.starts, totals, totals, idx.step, idx.wall_time, idx.value)
        xs = idx.step if axis == "step" else idx.wall_time
        rows, counts, _sm, _tot = _downsample(xs, idx.value, points, idx.starts, idx.ends, None, None, None)
        import numpy as np

        starts = np.cumsum(counts) - counts
        return Overview(starts, counts, totals, idx.step[rows], idx.wall_time[rows], idx.value[rows])

    got: Overview = store.cached(key, make, snap)
    return got


def _blocks(starts: Any, counts: Any) -> Any:
    """Row numbers of blocks ``starts[i]:starts[i] + counts[i]`` one after the other."""
    import numpy as np

    total = int(counts.sum())
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64)


@dataclass
class Answer:
    """The series of a scalars answer, side by side: series ``i`` is run ``runs[i]`` with
    ``counts[i]`` rows of the columns (in the order of ``runs``)."""

    runs: list[str]
    totals: np.ndarray[Any, Any]  # points per series before downsampling (inside the window)
    counts: np.ndarray[Any, Any]
    step: np.ndarray[Any, Any]
    wall_time: np.ndarray[Any, Any]
    value: np.ndarray[Any, Any]
    smoothed: np.ndarray[Any, Any] | None
    relative: np.ndarray[Any, Any] | None


def compute(
    store: Store,
    tag: str,
    runs: list[str] | None,
    points: int,
    x: str,
    smoothing: float | None,
    step_range: tuple[int | None, int | None],
    x_range: tuple[float | None, float | None],
) -> Answer:
    """The series of ``tag`` for ``runs`` (None: every run with the tag, by name), downsampled."""
    import numpy as np

    from tbscope.server.config import MAX_RESPONSE_POINTS

    snap = store.snapshot  # one snapshot throughout: a reload may publish another meanwhile
    # The series asked for, in the answer's order: (API name, logdir, position in its index).
    names: list[str] = []
    picks: dict[int, tuple[SourceState, TagIndex, list[int], list[int]]] = {}  # logdir -> (st, index, positions, slots)
    if runs is None:
        found: list[tuple[str, int, int]] = []
        for st in store.sources:
            if not st.ready:
                continue
            idx = tag_index(store, st, tag, snap)
            api = idx.names if st.source.name is None else [st.full_name(n) for n in idx.names]
            found.extend(zip(api, [st.index] * len(api), range(len(api))))
            picks[st.index] = (st, idx, [], [])
        found.sort(key=lambda f: f[0])
        for slot, (name, src, position) in enumerate(found):
            names.append(name)
            picks[src][2].append(position)
            picks[src][3].append(slot)
    else:
        for r in dict.fromkeys(runs):
            hit = store.resolve(r)
            if hit is None or not hit[0].ready:
                continue
            st, local = hit
            if st.index not in picks:
                picks[st.index] = (st, tag_index(store, st, tag, snap), [], [])
            at = picks[st.index][1].at.get(local)
            if at is not None:
                picks[st.index][2].append(at)
                picks[st.index][3].append(len(names))
                names.append(r)
    n = len(names)
    counts = np.zeros(n, dtype=np.int64)
    totals = np.zeros(n, dtype=np.int64)
    parts: list[tuple[Any, ...]] = []  # per logdir: slots, then step, wall, value, smoothed, relative
    budget = 0
    for st, idx, positions, slots in picks.values():
        if not positions:
            continue
        chosen = np.array(positions, dtype=np.int64)
        starts, ends = idx.starts[chosen], idx.ends[chosen]
        whole = smoothing is None and step_range == (None, None) and x_range == (None, None)
        ov = overview(store, st, tag, points, "step" if x == "step" else "wall_time", snap) if whole else None
        if ov is not None:
            # The whole-series view: slices of the tag's overview at this many points.
            cnt, tot = ov.counts[chosen], ov.totals[chosen]
            if len(chosen) == len(ov.counts) and bool((chosen == np.arange(len(chosen))).all()):
                step, wall, value = ov.step, ov.wall_time, ov.value
            else:
                take = _blocks(ov.starts[chosen], cnt)
                step, wall, value = ov.step[take], ov.wall_time[take], ov.value[take]
            sm = None
        else:
            if x == "step":
                lo = _max(step_range[0], x_range[0])
                hi = _min(step_range[1], x_range[1])
                rows, cnt, sm, tot = _downsample(idx.step, idx.value, points, starts, ends, lo, hi, smoothing)
            else:
                rows, cnt, sm, tot = _per_series(
                    idx, idx.wall_time, points, starts, ends, x, step_range, x_range, smoothing
                )
            step, wall, value = idx.step[rows], idx.wall_time[rows], idx.value[rows]
        budget += int(cnt.sum())
        if budget > MAX_RESPONSE_POINTS:
            raise ApiError(
                413, f"more than {MAX_RESPONSE_POINTS} points asked for: ask for fewer runs or fewer points per series"
            )
        where = np.array(slots, dtype=np.int64)
        counts[where] = cnt
        totals[where] = tot
        rel = wall - np.repeat(idx.wall_time[starts], cnt) if x == "relative" else None
        parts.append((where, cnt, step, wall, value, sm, rel))
    cols = _in_answer_order(parts, counts)
    return Answer(names, totals, counts, *cols)


def _in_answer_order(parts: list[tuple[Any, ...]], counts: Any) -> list[Any]:
    """The columns of every logdir's series (step, wall, value, smoothed, relative), as one
    column each in the answer's order: the logdir's own when there is one (its series are
    already in order), else one gather per column."""
    import numpy as np

    if not parts:
        empty = np.zeros(0)
        return [empty.astype(np.int64), empty, empty, None, None]
    if len(parts) == 1:
        return list(parts[0][2:])
    # Where each series' rows are in the logdirs' columns put end to end, in answer order.
    src_start = np.zeros(len(counts), dtype=np.int64)
    base = 0
    for slot, cnt, *_ in parts:
        src_start[slot] = base + np.cumsum(cnt) - cnt
        base += int(cnt.sum())
    dst_start = np.cumsum(counts) - counts
    take = np.repeat(src_start - dst_start, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    out: list[Any] = []
    for j in range(2, 7):
        if parts[0][j] is None:
            out.append(None)
        else:
            out.append(np.concatenate([p[j] for p in parts])[take])
    return out


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _downsample(
    xs: Any, ys: Any, points: int, starts: Any, ends: Any, lo: Any, hi: Any, smoothing: float | None
) -> tuple[Any, Any, Any, Any]:
    """(kept rows, rows kept per series, smoothed values or None, points per series inside
    the window)."""
    import numpy as np

    rows_b, counts_b, sm_b, totals_b = _core.downsample(
        xs.data, ys.data, points, starts=np.ascontiguousarray(starts).data, ends=np.ascontiguousarray(ends).data,
        x_lo=None if lo is None else float(lo), x_hi=None if hi is None else float(hi), smoothing=smoothing,
    )  # fmt: skip
    rows = np.frombuffer(rows_b, dtype=np.int64)
    counts = np.frombuffer(counts_b, dtype=np.int64)
    sm = None if sm_b is None else np.frombuffer(sm_b, dtype=np.float64)
    return rows, counts, sm, np.frombuffer(totals_b, dtype=np.int64)


def _per_series(
    idx: TagIndex,
    xs: Any,
    points: int,
    starts: Any,
    ends: Any,
    x: str,
    step_range: tuple[Any, Any],
    x_range: tuple[Any, Any],
    smoothing: float | None,
) -> tuple[Any, Any, Any, Any]:
    """Wall-time axes: the window is per series (relative) or mixed with steps, so each series
    gets a call of its own when there is a window; without one, one call for all."""
    import numpy as np

    if step_range == (None, None) and (x_range == (None, None) or x == "wall_time"):
        return _downsample(xs, idx.value, points, starts, ends, x_range[0], x_range[1], smoothing)
    all_rows, all_counts, all_sm, totals = [], [], [], []
    for a, b in zip(starts, ends):
        mask = np.ones(b - a, dtype=bool)
        if step_range[0] is not None:
            mask &= idx.step[a:b] >= step_range[0]
        if step_range[1] is not None:
            mask &= idx.step[a:b] <= step_range[1]
        offset = idx.wall_time[a] if x == "relative" else 0.0
        if x_range[0] is not None:
            mask &= xs[a:b] - offset >= x_range[0]
        if x_range[1] is not None:
            mask &= xs[a:b] - offset <= x_range[1]
        pos = np.flatnonzero(mask) + a
        sub_x = np.ascontiguousarray(xs[pos])
        sub_y = np.ascontiguousarray(idx.value[pos])
        r, _c, _s, _t = _downsample(
            sub_x, sub_y, points, np.array([0], np.int64), np.array([len(pos)], np.int64), None, None, None
        )
        all_rows.append(pos[r])
        all_counts.append(len(r))
        totals.append(len(pos))
        if smoothing is not None:
            from tbscope._curves import ema

            full = ema(idx.value[a:b], smoothing)
            all_sm.append(full[pos[r] - a])
    rows = np.concatenate(all_rows) if all_rows else np.zeros(0, np.int64)
    sm = (np.concatenate(all_sm) if all_sm else np.zeros(0)) if smoothing is not None else None
    return rows, np.array(all_counts, dtype=np.int64), sm, np.array(totals)


def _series_meta(ans: Answer) -> list[dict[str, Any]]:
    from tbscope.server.store import color

    return [{"run": r, "color": color(r), "total_points": t} for r, t in zip(ans.runs, ans.totals.tolist())]


def to_json(tag: str, x: str, loading: bool, ans: Answer) -> dict[str, Any]:
    import numpy as np

    from tbscope.server.encode import floats

    bounds = np.concatenate([[0], np.cumsum(ans.counts)]).tolist()
    named = [("wall_time", ans.wall_time), ("value", ans.value), ("smoothed", ans.smoothed), ("relative", ans.relative)]
    # A column that is finite throughout goes out as numpy slices (orjson writes them natively).
    finite = {k: v is not None and bool(np.isfinite(v).all()) for k, v in named}
    out = []
    for i, meta in enumerate(_series_meta(ans)):
        a, b = bounds[i], bounds[i + 1]
        cols: dict[str, Any] = {"step": ans.step[a:b]}
        for k, v in named:
            if v is not None:
                cols[k] = v[a:b] if finite[k] else floats(v[a:b])
        out.append({**meta, "columns": cols})
    return {"tag": tag, "x": x, "loading": loading, "series": out}


def to_arrow(tag: str, x: str, loading: bool, ans: Answer) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    from tbscope.server.encode import dumps
    from tbscope.server.tables import numeric, strings, table

    codes = np.repeat(np.arange(len(ans.runs), dtype=np.int32), ans.counts)
    run = pa.DictionaryArray.from_arrays(numeric(codes), strings(ans.runs))
    cols: dict[str, Any] = {
        "run": run,
        "step": numeric(ans.step),
        "wall_time": numeric(ans.wall_time),
        "value": numeric(ans.value),
    }
    if ans.smoothed is not None:
        cols["smoothed"] = numeric(ans.smoothed)
    if ans.relative is not None:
        cols["relative"] = numeric(ans.relative)
    meta = {
        "tbscope.tag": tag,
        "tbscope.x": x,
        "tbscope.loading": "true" if loading else "false",
        "tbscope.series": dumps(_series_meta(ans)).decode(),
    }
    return table(cols).replace_schema_metadata(meta)


def respond(request: Request, store: Store, q: Any) -> Response:
    """The answer to a scalars request ``q`` (the fields of ``models.ScalarsQuery``): JSON
    columns, or Arrow IPC when the request accepts it. Used by the API's endpoints and by the
    front while the API is being built (:mod:`tbscope.server.front`)."""
    from tbscope._curves import MIN_POINTS
    from tbscope.server import encode

    if 0 < q.points < MIN_POINTS:
        raise ApiError(400, f"points must be 0 (every point) or at least {MIN_POINTS}")
    if q.step_min is not None and q.step_max is not None and q.step_min > q.step_max:
        raise ApiError(400, "step_min is above step_max")
    for v in (q.x_min, q.x_max):
        if v is not None and v != v:
            raise ApiError(400, "x_min and x_max must be numbers")
    loading = store.loading
    snap = store.snapshot
    # A POST's answer is not cached by clients: no ETag.
    etag = encode.fresh(request, snap.generation, "loading" if loading else "") if request.method == "GET" else None
    runs = q.runs
    if q.runs_filter:
        from tbscope.server.routes import name_filter

        keep = name_filter(q.runs_filter)
        listed = runs if runs is not None else snap.runs.column("run").to_pylist()
        runs = [r for r in listed if keep(r)]
    arrow = encode.wants_arrow(request)

    def make() -> Any:
        series = compute(store, q.tag, runs, q.points, q.x, q.smoothing, (q.step_min, q.step_max), (q.x_min, q.x_max))
        if arrow:
            # As bytes, copied once here: uvicorn (h11) sends a bytes body as it is, but joins
            # anything else into a new bytes object on every send.
            return encode.arrow_bytes(to_arrow(q.tag, q.x, loading, series)).to_pybytes()
        return encode.dumps(to_json(q.tag, q.x, loading, series))

    # The same request on the same data (and load state) gets the same bytes.
    key = (
        "scalars",
        arrow,
        loading,
        q.tag,
        None if runs is None else tuple(runs),
        q.points,
        q.x,
        q.smoothing,
        q.step_min,
        q.step_max,
        q.x_min,
        q.x_max,
    )
    body = store.answer(key, make, snap)
    return encode.body_response(body, encode.ARROW if arrow else "application/json", etag)
