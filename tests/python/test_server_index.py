"""The server's per-tag index of scalars (a counting sort in Rust) against a plain-Python
grouping of the same table, on tables of several chunks with dictionaries of their own."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from tbscope import _core
from tbscope.server.scalars import build_index


def chunk(rng: np.random.Generator, runs: list[str], tags: list[str], rows: int, nulls: bool) -> pa.RecordBatch:
    """Rows in run order (as the reader keeps them), tags interleaved, dictionaries in an
    order of their own."""
    run_dict = list(rng.permutation(runs))
    tag_dict = list(rng.permutation(tags))
    per_run = np.sort(rng.choice(len(runs), rows))
    run_codes = np.array([run_dict.index(runs[i]) for i in per_run], dtype=np.int32)
    tag_codes = rng.integers(0, len(tags), rows).astype(np.int32)
    wall = 1.7e9 + rng.random(rows) * 1e4
    mask = rng.random(rows) < 0.1 if nulls else None
    return pa.record_batch(
        {
            "run": pa.DictionaryArray.from_arrays(pa.array(run_codes), pa.array(run_dict)),
            "tag": pa.DictionaryArray.from_arrays(pa.array(tag_codes), pa.array(tag_dict)),
            "step": pa.array(rng.integers(0, 10**6, rows), pa.int64()),
            "wall_time": pa.array(wall, pa.float64(), mask=mask),
            "value": pa.array(rng.standard_normal(rows), pa.float64()),
        }
    )


def reference(table: pa.Table, tag: str) -> dict[str, list[tuple[int, float, float]]]:
    out: dict[str, list[tuple[int, float, float]]] = {}
    for r, t, s, w, v in zip(*(table.column(c).to_pylist() for c in ("run", "tag", "step", "wall_time", "value"))):
        if t == tag:
            out.setdefault(r, []).append((s, math.nan if w is None else w, v))
    return dict(sorted(out.items()))


@pytest.mark.parametrize("seed", range(8))
def test_index_groups_every_point_of_the_tag_by_run_in_reading_order(seed):
    rng = np.random.default_rng(seed)
    runs = [f"run{i:02d}/{'abc'[i % 3]}" for i in range(int(rng.integers(1, 30)))]
    tags = ["loss", "acc", "lr", "eval/loss"][: int(rng.integers(1, 5))]
    batches = [chunk(rng, list(rng.choice(runs, int(rng.integers(1, len(runs) + 1)), replace=False)), tags, int(rng.integers(0, 3000)), seed % 2 == 0) for _ in range(int(rng.integers(1, 5)))]
    table = pa.Table.from_batches(batches)
    if seed % 3 == 0:
        table = table.slice(int(rng.integers(0, 50)))  # chunks that start inside a batch
    for tag in (*tags, "absent"):
        idx = build_index(table, tag)
        want = reference(table, tag)
        assert idx.names == list(want)
        assert idx.rows == sum(len(v) for v in want.values())
        for i, name in enumerate(idx.names):
            a, b = idx.starts[i], idx.ends[i]
            got = list(zip(idx.step[a:b].tolist(), idx.wall_time[a:b].tolist(), idx.value[a:b].tolist()))
            assert np.array_equal(np.array(got, dtype=float), np.array(want[name], dtype=float), equal_nan=True), (tag, name)
        assert idx.at == {n: i for i, n in enumerate(idx.names)}


def test_group_rows_refuses_codes_outside_the_groups():
    runs = np.array([0, 1], dtype=np.int32)
    tags = np.array([0, 0], dtype=np.int32)
    col = np.arange(2, dtype=np.int64)
    counts, cols = _core.group_rows([runs], [tags], [0], [np.array([1, 0], dtype=np.int64)], 2, [[col]])
    assert np.frombuffer(counts, np.int64).tolist() == [1, 1]
    assert np.frombuffer(cols[0], np.int64).tolist() == [1, 0]
    with pytest.raises(ValueError, match="outside"):
        _core.group_rows([runs], [tags], [0], [np.array([0], dtype=np.int64)], 1, [[col]])
    with pytest.raises(ValueError, match="below"):
        _core.group_rows([runs], [tags], [0], [np.array([0, 7], dtype=np.int64)], 2, [[col]])
    with pytest.raises(ValueError, match="one entry per chunk"):
        _core.group_rows([runs], [tags, tags], [0], [np.array([0, 0], dtype=np.int64)], 1, [[col]])
    with pytest.raises(ValueError, match="int32"):
        _core.group_rows([runs.astype(np.int64)], [tags], [0], [np.array([0, 0], dtype=np.int64)], 1, [[col]])
