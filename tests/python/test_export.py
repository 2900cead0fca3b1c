"""tbscope.export: CSV, Parquet, JSON lines and partitioned Parquet datasets, streamed.

The reference is ``tbscope.read_scalars`` (itself cross-checked against TensorBoard elsewhere);
files are read back with pandas, pyarrow and the json module, not with tbscope.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import tbscope
from tbscope.export import ExportStats, export

pq = pytest.importorskip("pyarrow.parquet")


def _assert_same(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Same columns, dtypes and values (assert_frame_equal is slow on big categoricals)."""
    assert list(got.columns) == list(ref.columns)
    assert got.dtypes.astype(str).tolist() == ref.dtypes.astype(str).tolist()
    assert len(got) == len(ref)
    for c in ref.columns:
        a, b = got[c], ref[c]
        if isinstance(b.dtype, pd.CategoricalDtype):
            a, b = a.astype(str), b.astype(str)
        if isinstance(b.dtype, pd.DatetimeTZDtype):
            a, b = a.dt.tz_convert(None), b.dt.tz_convert(None)  # datetime64: NaT compares equal
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy(), err_msg=c)


def test_parquet_round_trip_equals_read_scalars(any_logdir, tmp_path):
    out = tmp_path / "s.parquet"
    st = export(any_logdir, out)
    ref = tbscope.read_scalars(any_logdir)
    assert isinstance(st, ExportStats)
    assert st.rows == len(ref) == st.kinds["scalars"] and st.files == [str(out)]
    assert st.bytes == out.stat().st_size > 0
    got = pd.read_parquet(out)
    # Same columns, dtypes (categorical run/tag, datetime64[ns, UTC] timestamp) and values.
    _assert_same(got, ref)


def test_csv_parses_back_to_the_same_values(tbx_logdir, tmp_path):
    out = tmp_path / "s.csv"
    export(tbx_logdir, out)
    ref = tbscope.read_scalars(tbx_logdir)
    got = pd.read_csv(out, dtype={"run": str, "tag": str})
    assert list(got.columns) == list(ref.columns)
    assert got["run"].tolist() == ref["run"].astype(str).tolist()
    assert got["tag"].tolist() == ref["tag"].astype(str).tolist()
    assert got["step"].tolist() == ref["step"].tolist()
    # Shortest round-trip text: the same doubles, NaN and infinities included.
    np.testing.assert_array_equal(got["value"].to_numpy(), ref["value"].to_numpy())
    np.testing.assert_array_equal(got["wall_time"].to_numpy(), ref["wall_time"].to_numpy())
    ts = pd.to_datetime(got["timestamp"], utc=True, format="ISO8601")
    assert (ts.to_numpy() == ref["timestamp"].to_numpy()).all()


def test_jsonl_parses_back(tbx_logdir, tmp_path):
    out = tmp_path / "s.jsonl"
    export(tbx_logdir, out)
    ref = tbscope.read_scalars(tbx_logdir)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]  # strict JSON
    assert len(rows) == len(ref)
    for row, (_, r) in zip(rows, ref.iterrows()):
        assert (row["run"], row["tag"], row["step"]) == (r["run"], r["tag"], r["step"])
        if math.isfinite(r["value"]):
            assert row["value"] == r["value"]
        else:
            assert row["value"] is None  # JSON has no NaN or infinity
        assert pd.Timestamp(row["timestamp"]) == r["timestamp"]
        assert row["wall_time"] == r["wall_time"]


def test_partitioned_dataset_by_run(any_logdir, tmp_path):
    import pyarrow.dataset as ds

    out = tmp_path / "ds"
    st = export(any_logdir, out, partition_by="run")
    ref = tbscope.read_scalars(any_logdir)
    assert st.rows == len(ref)
    assert st.bytes == sum((tmp_path / f).stat().st_size for f in st.files)
    got = ds.dataset(out, format="parquet", partitioning="hive").to_table().to_pandas()
    key = ["run", "tag", "step", "wall_time"]
    got = got.assign(run=got["run"].astype(str), tag=got["tag"].astype(str)).sort_values(key, kind="stable").reset_index(drop=True)
    want = ref.assign(run=ref["run"].astype(str), tag=ref["tag"].astype(str)).sort_values(key, kind="stable").reset_index(drop=True)
    _assert_same(got[want.columns].astype({"run": str, "tag": str}), want.astype({"run": str, "tag": str}))
    # One folder per run (names URI-escaped).
    assert len({p.parent for p in out.rglob("*.parquet")}) == ref["run"].nunique()


def test_filters_kinds_and_logdir_source(tb_logdir, tmp_path):
    st = export(tb_logdir, tmp_path / "multi", kinds=["scalars", "histograms", "text", "tensors"], format="jsonl", steps=(0, 3))
    assert sorted(p.name for p in (tmp_path / "multi").iterdir()) == ["histograms.jsonl", "scalars.jsonl", "tensors.jsonl", "text.jsonl"]
    lg = tbscope.scan(tb_logdir, steps=(0, 3))
    for kind in ("histograms", "text", "tensors"):
        lines = (tmp_path / "multi" / f"{kind}.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == st.kinds[kind] == len(lg._frame(kind))
        for line in lines:
            assert json.loads(line)["step"] < 3
    # CSV holds list columns as JSON text and binary as base64.
    export(tb_logdir, tmp_path / "h.csv", kinds="histograms")
    h = pd.read_csv(tmp_path / "h.csv")
    first = tbscope.read_histograms(tb_logdir).iloc[0]
    assert json.loads(h.loc[0, "count"]) == pytest.approx(list(first["count"]), nan_ok=True)
    # A Logdir is exported with its own filters.
    scanned = tbscope.scan(tb_logdir, tags="scalar*")
    st = export(scanned, tmp_path / "f.parquet")
    assert st.rows == len(scanned.scalars()) == len(pd.read_parquet(tmp_path / "f.parquet"))


def test_streams_batch_by_batch(tbx_logdir, tmp_path):
    seen: list[int] = []
    st = export(tbx_logdir, tmp_path / "s.parquet", max_rows=10, progress=lambda s: seen.append(s.rows))
    n = len(tbscope.read_scalars(tbx_logdir))
    assert len(seen) >= math.ceil(n / 10) and seen == sorted(seen) and seen[-1] == n == st.rows
    assert pq.ParquetFile(tmp_path / "s.parquet").metadata.num_row_groups == len(seen)


def test_empty_selection_writes_a_valid_file(tbx_logdir, tmp_path):
    st = export(tbx_logdir, tmp_path / "e.parquet", tags="no-such-tag")
    assert st.rows == 0
    got = pd.read_parquet(tmp_path / "e.parquet")
    assert len(got) == 0 and list(got.columns) == list(tbscope.read_scalars(tbx_logdir).columns)


def test_errors(tbx_logdir, tmp_path):
    with pytest.raises(ValueError, match="cannot tell the format"):
        export(tbx_logdir, tmp_path / "out.txt")
    with pytest.raises(ValueError, match="unknown export format"):
        export(tbx_logdir, tmp_path / "out", format="xlsx")
    with pytest.raises(ValueError, match="Parquet dataset"):
        export(tbx_logdir, tmp_path / "d", partition_by="run", format="csv")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(FileExistsError, match="empty directory"):
        export(tbx_logdir, tmp_path / "full", partition_by="run")
    assert (tmp_path / "full" / "x").read_text() == "keep me"
    with pytest.raises(ValueError, match="cannot partition scalars"):
        export(tbx_logdir, tmp_path / "p", partition_by="nope")
    with pytest.raises(ValueError, match="cannot export kind"):
        export(tbx_logdir, tmp_path / "x.csv", kinds="series")
    # A failed export leaves no partial file behind.
    assert not list(tmp_path.glob(".*partial"))
