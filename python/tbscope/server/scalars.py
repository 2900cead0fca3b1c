"""Scalars for many runs × one tag: a per-tag index of the points, downsampling in Rust.

The reader keeps scalars in run, file and record order, tags interleaved. For a tag that is
asked for, the server gathers that tag's points once (per snapshot, incrementally when a
reload only appended) into three columns grouped by run, so a request touches only the points
of its tag and each series is a contiguous range for :func:`tbscope.downsample`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tbscope import _core
from tbscope.server.errors import ApiError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tbscope.server.store import SourceState, Store


@dataclass
class TagIndex:
    """One tag's points of one logdir, grouped by run (each run's points in reading order)."""

    step: np.ndarray[Any, Any]
    wall_time: np.ndarray[Any, Any]
    value: np.ndarray[Any, Any]
    runs: dict[str, tuple[int, int]]  # local run name -> (start, end)
    chunks: tuple[int, ...]  # identity of the scalar batches it was built from
    rows: int


def _chunk_ids(table: pa.Table) -> tuple[int, ...]:
    col = table.column("value")
    return tuple(c.buffers()[1].address if c.buffers()[1] is not None else 0 for c in col.chunks)


def _gather(table: pa.Table, tag: str, first_chunk: int) -> tuple[list[str], Any, Any, Any, Any]:
    """The tag's points in the chunks from ``first_chunk`` on: (run names, run code per point,
    steps, wall times, values)."""
    import numpy as np

    names: list[str] = []
    at: dict[str, int] = {}
    parts: list[tuple[Any, Any, Any, Any]] = []
    runs_col, tags_col = table.column("run"), table.column("tag")
    steps, walls, values = table.column("step"), table.column("wall_time"), table.column("value")
    for i in range(first_chunk, runs_col.num_chunks):
        tc = tags_col.chunk(i)
        dictionary = tc.dictionary.to_pylist()
        if tag not in dictionary:
            continue
        code = dictionary.index(tag)
        idx = np.flatnonzero(_np(tc.indices) == code)
        if not len(idx):
            continue
        rc = runs_col.chunk(i)
        gid = np.array([at.setdefault(str(r), len(at)) for r in rc.dictionary.to_pylist()] + [-1], dtype=np.int64)
        run_codes = gid[_np(rc.indices)[idx]]
        parts.append((run_codes, _np(steps.chunk(i))[idx], _np(walls.chunk(i))[idx], _np(values.chunk(i))[idx]))
    names = list(at)
    if not parts:
        e = np.zeros(0)
        return names, e.astype(np.int64), e.astype(np.int64), e, e
    cat = [np.concatenate([p[j] for p in parts]) for j in range(4)]
    return names, cat[0], cat[1], cat[2].astype(np.float64), cat[3].astype(np.float64)


def _np(arr: Any) -> Any:
    from tbscope.server.tables import to_numpy

    return to_numpy(arr)


def _group(names: list[str], codes: Any, step: Any, wall: Any, value: Any) -> tuple[Any, Any, Any, dict[str, tuple[int, int]]]:
    import numpy as np

    # Runs in name order; a stable sort keeps each run's points in reading order (the codes are
    # already grouped within a batch, so this is a merge of sorted runs).
    order_names = sorted(range(len(names)), key=lambda i: names[i])
    rank = np.empty(len(names) + 1, dtype=np.int64)
    rank[order_names] = np.arange(len(names))
    keys = rank[codes] if len(codes) else codes
    if len(keys) and (np.diff(keys) < 0).any():
        order = np.argsort(keys, kind="stable")
        keys, step, wall, value = keys[order], step[order], wall[order], value[order]
    counts = np.bincount(keys, minlength=len(names)) if len(keys) else np.zeros(len(names), dtype=np.int64)
    ends = np.cumsum(counts)
    runs = {names[i]: (int(ends[r] - counts[r]), int(ends[r])) for r, i in enumerate(order_names) if counts[r]}
    return np.ascontiguousarray(step), np.ascontiguousarray(wall), np.ascontiguousarray(value), runs


def tag_index(store: Store, st: SourceState, tag: str) -> TagIndex:
    """The tag's index in the current snapshot; built from the previous one when the reader
    only appended batches since."""
    import numpy as np

    snap = store.snapshot

    def make() -> TagIndex:
        table = store.table(st, "scalars", snap)
        ids = _chunk_ids(table)
        prev = store.previous_index(st.index, tag)
        if prev is not None and ids[: len(prev.chunks)] == prev.chunks and len(ids) >= len(prev.chunks):
            names, codes, step, wall, value = _gather(table, tag, len(prev.chunks))
            if not len(codes):
                out = TagIndex(prev.step, prev.wall_time, prev.value, prev.runs, ids, prev.rows)
                store.remember_index(st.index, tag, out)
                return out
            # Old points first, per run: give them codes in the same name space.
            old_names = list(prev.runs)
            at = {n: i for i, n in enumerate(names)}
            for n in old_names:
                at.setdefault(n, len(at))
            all_names = list(at)
            old_codes = np.concatenate([np.full(e - s, at[n], dtype=np.int64) for n, (s, e) in sorted(prev.runs.items(), key=lambda kv: kv[1])]) if prev.runs else np.zeros(0, np.int64)
            step, wall, value, runs = _group(
                all_names,
                np.concatenate([old_codes, codes]),
                np.concatenate([prev.step, step]),
                np.concatenate([prev.wall_time, wall]),
                np.concatenate([prev.value, value]),
            )
        else:
            names, codes, step, wall, value = _gather(table, tag, 0)
            step, wall, value, runs = _group(names, codes, step, wall, value)
        out = TagIndex(step, wall, value, runs, ids, len(step))
        store.remember_index(st.index, tag, out)
        return out

    index: TagIndex = store.cached(("scalars-index", st.index, tag), make, snap)
    return index


@dataclass
class SeriesOut:
    run: str
    color: str
    total: int
    step: Any
    wall_time: Any
    value: Any
    smoothed: Any | None
    relative: Any | None


def compute(
    store: Store,
    tag: str,
    runs: list[str] | None,
    points: int,
    x: str,
    smoothing: float | None,
    step_range: tuple[int | None, int | None],
    x_range: tuple[float | None, float | None],
) -> list[SeriesOut]:
    """The series of ``tag`` for ``runs`` (None: every run with the tag), downsampled."""
    import numpy as np

    from tbscope.server.config import MAX_RESPONSE_POINTS
    from tbscope.server.store import color

    wanted: list[tuple[SourceState, str, str]] = []  # (source, local run, API run)
    if runs is None:
        for st in store.sources:
            if not st.ready:
                continue
            for local in sorted(tag_index(store, st, tag).runs):
                wanted.append((st, local, st.full_name(local)))
        wanted.sort(key=lambda w: w[2])
    else:
        for r in dict.fromkeys(runs):
            hit = store.resolve(r)
            if hit is not None and hit[0].ready:
                wanted.append((hit[0], hit[1], r))
    out: list[SeriesOut] = []
    budget = 0
    by_source: dict[int, list[tuple[str, str]]] = {}
    for st, local, name in wanted:
        by_source.setdefault(st.index, []).append((local, name))
    for st in store.sources:
        pairs = by_source.get(st.index)
        if not pairs:
            continue
        idx = tag_index(store, st, tag)
        present = [(loc, name) for loc, name in pairs if loc in idx.runs]
        if not present:
            continue
        starts = np.array([idx.runs[loc][0] for loc, _ in present], dtype=np.int64)
        ends = np.array([idx.runs[loc][1] for loc, _ in present], dtype=np.int64)
        lo_s, hi_s = step_range
        xs = idx.step if x == "step" else idx.wall_time
        if x == "step":
            lo = _max(lo_s, x_range[0])
            hi = _min(hi_s, x_range[1])
            rows, counts, sm, totals = _downsample(xs, idx.value, points, starts, ends, lo, hi, smoothing)
        else:
            rows, counts, sm, totals = _per_series(idx, xs, points, starts, ends, x, step_range, x_range, smoothing)
        budget += len(rows)
        if budget > MAX_RESPONSE_POINTS:
            raise ApiError(413, f"more than {MAX_RESPONSE_POINTS} points asked for: ask for fewer runs or fewer points per series")
        # One gather per column for every series of this logdir; each series is a view of it.
        step_all, wall_all, value_all = idx.step[rows], idx.wall_time[rows], idx.value[rows]
        rel_all = wall_all - np.repeat(idx.wall_time[starts], counts) if x == "relative" else None
        at = 0
        for (_loc, name), n, total in zip(present, counts.tolist(), totals):
            sl = slice(at, at + n)
            out.append(SeriesOut(name, color(name), int(total), step_all[sl], wall_all[sl], value_all[sl], None if sm is None else sm[sl], None if rel_all is None else rel_all[sl]))
            at += n
    order = {name: i for i, (_s, _l, name) in enumerate(wanted)}
    out.sort(key=lambda s: order[s.run])
    return out


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _downsample(xs: Any, ys: Any, points: int, starts: Any, ends: Any, lo: Any, hi: Any, smoothing: float | None) -> tuple[Any, Any, Any, Any]:
    import numpy as np

    rows_b, counts_b, sm_b = _core.downsample(
        xs.data, ys.data, points, starts=starts.data, ends=ends.data,
        x_lo=None if lo is None else float(lo), x_hi=None if hi is None else float(hi), smoothing=smoothing,
    )  # fmt: skip
    rows = np.frombuffer(rows_b, dtype=np.int64)
    counts = np.frombuffer(counts_b, dtype=np.int64)
    sm = None if sm_b is None else np.frombuffer(sm_b, dtype=np.float64)
    if lo is None and hi is None:
        totals = ends - starts
    else:
        # Points inside the window, per series: what "total_points" means for a zoom.
        totals = np.array([int(((xs[a:b] >= (-np.inf if lo is None else lo)) & (xs[a:b] <= (np.inf if hi is None else hi))).sum()) for a, b in zip(starts, ends)])
    return rows, counts, sm, totals


def _per_series(idx: TagIndex, xs: Any, points: int, starts: Any, ends: Any, x: str, step_range: tuple[Any, Any], x_range: tuple[Any, Any], smoothing: float | None) -> tuple[Any, Any, Any, Any]:
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
        r, _c, _s, _t = _downsample(sub_x, sub_y, points, np.array([0], np.int64), np.array([len(pos)], np.int64), None, None, None)
        all_rows.append(pos[r])
        all_counts.append(len(r))
        totals.append(len(pos))
        if smoothing is not None:
            from tbscope.curves import ema

            full = ema(idx.value[a:b], smoothing)
            all_sm.append(full[pos[r] - a])
    rows = np.concatenate(all_rows) if all_rows else np.zeros(0, np.int64)
    sm = (np.concatenate(all_sm) if all_sm else np.zeros(0)) if smoothing is not None else None
    return rows, np.array(all_counts, dtype=np.int64), sm, np.array(totals)


def to_json(tag: str, x: str, loading: bool, series: list[SeriesOut]) -> dict[str, Any]:
    from tbscope.server.encode import floats

    out = []
    for s in series:
        cols: dict[str, Any] = {"step": s.step, "wall_time": floats(s.wall_time), "value": floats(s.value)}
        if s.smoothed is not None:
            cols["smoothed"] = floats(s.smoothed)
        if s.relative is not None:
            cols["relative"] = floats(s.relative)
        out.append({"run": s.run, "color": s.color, "total_points": s.total, "columns": cols})
    return {"tag": tag, "x": x, "loading": loading, "series": out}


def to_arrow(tag: str, x: str, loading: bool, series: list[SeriesOut]) -> pa.Table:
    import json

    import numpy as np
    import pyarrow as pa

    from tbscope.server.tables import numeric, strings, table

    lengths = [len(s.step) for s in series]
    codes = np.repeat(np.arange(len(series), dtype=np.int32), lengths)
    run = pa.DictionaryArray.from_arrays(numeric(codes), strings([s.run for s in series]))

    def cat(get: Any, dtype: Any) -> Any:
        return numeric(np.concatenate([get(s) for s in series]).astype(dtype) if series else np.zeros(0, dtype))

    cols: dict[str, Any] = {"run": run, "step": cat(lambda s: s.step, np.int64), "wall_time": cat(lambda s: s.wall_time, np.float64), "value": cat(lambda s: s.value, np.float64)}
    if series and series[0].smoothed is not None:
        cols["smoothed"] = cat(lambda s: s.smoothed, np.float64)
    if series and series[0].relative is not None:
        cols["relative"] = cat(lambda s: s.relative, np.float64)
    meta = {
        "tbscope.tag": tag,
        "tbscope.x": x,
        "tbscope.loading": "true" if loading else "false",
        "tbscope.series": json.dumps([{"run": s.run, "color": s.color, "total_points": s.total} for s in series]),
    }
    return table(cols).replace_schema_metadata(meta)
