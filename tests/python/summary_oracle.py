"""A NumPy reference for the summary statistics that the reader computes natively
(``Logdir.summary()``): per (run, tag) last, first, min, max, argmin, argmax, mean and count.
It was the package's implementation before the native one; tests compare the two."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_BLOCK = 1 << 16  # rows per pass: temporaries stay in cache instead of faulting in fresh pages
_DENSE_LIMIT = 1 << 22


def series_stats(
    table: pa.Table, run_names: Sequence[str], stats: Sequence[str]
) -> tuple[list[str], dict[str, np.ndarray[Any, Any]]]:
    """Per (run, tag) statistics of a scalars table.

    Returns the sorted tag names and, per statistic, a ``[len(run_names), len(tags)]`` array:
    float64 values (NaN where a run lacks the tag; min/max/mean skip NaN), int64 counts of
    non-NaN values, and for argmin/argmax the step of the first point holding the extreme as
    float64 (NaN when there is none).
    """
    import numpy as np
    import pyarrow as pa

    run_index = {r: i for i, r in enumerate(run_names)}
    batches = [b for b in table.select(["run", "tag", "step", "value"]).to_batches() if b.num_rows]
    parts = []
    tag_set: set[str] = set()
    for b in batches:
        run, tag = b.column(0), b.column(1)
        if not isinstance(run, pa.DictionaryArray):
            run = run.dictionary_encode()
        if not isinstance(tag, pa.DictionaryArray):
            tag = tag.dictionary_encode()
        tag_set.update(tag.dictionary.to_pylist())
        parts.append((run, tag, b.column(2).to_numpy(), b.column(3).to_numpy()))
    tags = sorted(tag_set)
    tag_index = {t: i for i, t in enumerate(tags)}
    R, T = len(run_names), len(tags)
    K = R * T
    dense = K <= _DENSE_LIMIT

    def keys_of(
        run: pa.DictionaryArray, tag: pa.DictionaryArray
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        rmap = np.array([run_index[r] for r in run.dictionary.to_pylist()], dtype=np.int64)
        tmap = np.array([tag_index[t] for t in tag.dictionary.to_pylist()], dtype=np.int64)
        return rmap, tmap, run.indices.to_numpy(zero_copy_only=False), tag.indices.to_numpy(zero_copy_only=False)

    coded = [keys_of(run, tag) + (steps, values) for run, tag, steps, values in parts]

    def blocks() -> Iterator[
        tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]
    ]:
        """(key, position, step, value) for every block of rows; positions are global."""
        off = 0
        for rmap, tmap, ri, ti, steps, values in coded:
            n = len(values)
            for a in range(0, n, _BLOCK):
                b = min(n, a + _BLOCK)
                key = rmap[ri[a:b]] * T + tmap[ti[a:b]]
                yield key, np.arange(off + a, off + b), steps[a:b], values[a:b]
            off += n

    if dense:
        ids = None
        nkeys = K
    else:
        # Too many (run, tag) pairs for dense arrays: number the pairs that occur.
        ids = np.zeros(0, dtype=np.int64)
        for key, _, _, _ in blocks():
            ids = np.union1d(ids, key)
        nkeys = len(ids)

    def compact(key: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return key if ids is None else np.searchsorted(ids, key)

    want = set(stats)
    nan = np.float64("nan")
    big = np.iinfo(np.int64).max
    mn = np.full(nkeys, nan)
    mx = np.full(nkeys, nan)
    first = np.full(nkeys, big, dtype=np.int64)
    last = np.full(nkeys, -1, dtype=np.int64)
    total = np.zeros(nkeys)
    count = np.zeros(nkeys, dtype=np.int64)
    need_min = bool(want & {"min", "argmin"})
    need_max = bool(want & {"max", "argmax"})
    need_sum = bool(want & {"mean", "count"})
    for key, pos, _, v in blocks():
        k = compact(key)
        # fmin/fmax skip NaN (NaN only when every value is), the way pandas' min/max do.
        if need_min:
            np.fmin.at(mn, k, v)
        if need_max:
            np.fmax.at(mx, k, v)
        np.minimum.at(first, k, pos)
        np.maximum.at(last, k, pos)
        if need_sum:
            ok = ~np.isnan(v)
            with np.errstate(invalid="ignore"):  # inf + -inf is NaN, as in pandas
                np.add.at(total, k[ok], v[ok])
            np.add.at(count, k[ok], 1)
    argmin = np.full(nkeys, big, dtype=np.int64)
    argmax = np.full(nkeys, big, dtype=np.int64)
    if want & {"argmin", "argmax"}:
        # Second pass: the first row of each series that holds its extreme.
        for key, pos, _, v in blocks():
            k = compact(key)
            if "argmin" in want:
                hit = v == mn[k]
                np.minimum.at(argmin, k[hit], pos[hit])
            if "argmax" in want:
                hit = v == mx[k]
                np.minimum.at(argmax, k[hit], pos[hit])

    offsets = np.cumsum([0] + [len(c[5]) for c in coded])

    def gather(positions: np.ndarray[Any, Any], column: int) -> np.ndarray[Any, Any]:
        """Values (column 5) or steps (column 4) at global row positions; NaN where none."""
        out = np.full(len(positions), nan)
        for i, c in enumerate(coded):
            sel = (positions >= offsets[i]) & (positions < offsets[i + 1])
            out[sel] = c[column][positions[sel] - offsets[i]]
        return out

    present = last >= 0
    results: dict[str, np.ndarray[Any, Any]] = {}
    for s in stats:
        if s == "last":
            r = gather(last, 5)
        elif s == "first":
            r = gather(first, 5)
        elif s == "min":
            r = mn
        elif s == "max":
            r = mx
        elif s == "argmin":
            r = gather(argmin, 4)
        elif s == "argmax":
            r = gather(argmax, 4)
        elif s == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                r = np.where(count > 0, total / np.maximum(count, 1), nan)
            # inf - inf sums are NaN in pandas too; nothing else to fix.
        else:  # count
            r = count
        if s != "count":
            r = np.where(present, r, nan)
        if ids is not None:
            full = np.zeros(K, dtype=r.dtype) if s == "count" else np.full(K, nan)
            full[ids] = r
            r = full
        results[s] = r.reshape(R, T) if R and T else r.reshape(R, T)
    return tags, results
