"""tbscope._export: CSV, Parquet, JSON lines and partitioned Parquet datasets, streamed.

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
from tbscope._export import ExportStats, export

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
    got = (
        got.assign(run=got["run"].astype(str), tag=got["tag"].astype(str))
        .sort_values(key, kind="stable")
        .reset_index(drop=True)
    )
    want = (
        ref.assign(run=ref["run"].astype(str), tag=ref["tag"].astype(str))
        .sort_values(key, kind="stable")
        .reset_index(drop=True)
    )
    _assert_same(got[want.columns].astype({"run": str, "tag": str}), want.astype({"run": str, "tag": str}))
    # One folder per run (names URI-escaped).
    assert len({p.parent for p in out.rglob("*.parquet")}) == ref["run"].nunique()


def test_filters_kinds_and_logdir_source(tb_logdir, tmp_path):
    st = export(
        tb_logdir, tmp_path / "multi", kinds=["scalars", "histograms", "text", "tensors"], format="jsonl", steps=(0, 3)
    )
    assert sorted(p.name for p in (tmp_path / "multi").iterdir()) == [
        "histograms.jsonl",
        "scalars.jsonl",
        "tensors.jsonl",
        "text.jsonl",
    ]
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


# --------------------------------------------------------------------------------------------
# export never destroys data


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _event_files(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*tfevents*"))}


def test_an_existing_output_is_refused_unless_force(tbx_logdir, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    # Before: the file was silently replaced.
    with pytest.raises(FileExistsError, match="already exists.*force"):
        export(tbx_logdir, out)
    assert out.read_text() == "keep me"
    st = export(tbx_logdir, out, force=True)
    assert st.rows == len(pd.read_csv(out)) == len(tbscope.read_scalars(tbx_logdir))
    # Directories: a non-empty one is refused; with force, only an earlier export is replaced.
    d = tmp_path / "ds"
    export(tbx_logdir, d, partition_by="run")
    with pytest.raises(FileExistsError, match="not empty"):
        export(tbx_logdir, d, partition_by="run")
    export(tbx_logdir, d, partition_by="run", force=True, tags="no-such-tag")
    assert len(pd.read_parquet(d)) == 0, "the earlier dataset was replaced, not merged into"
    (d / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        export(tbx_logdir, d, partition_by="run", force=True)
    assert (d / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no staging left behind"


def test_never_over_or_into_an_input_event_file(tbx_logdir, tmp_path):
    logdir = _copy(tbx_logdir, tmp_path / "logdir")
    before = _event_files(logdir)
    victim = next(iter(before))
    # Before: `-o LOGDIR/run/events.out.tfevents...` replaced that event file with CSV.
    for force in (False, True):
        with pytest.raises(ValueError, match="named like an event file"):
            export(logdir, victim, format="csv", force=force)
        with pytest.raises(ValueError, match="named like an event file"):
            export(logdir, victim.with_name(victim.name + ".csv"), force=force)
        # The input event file given as the source, under another name (a symlink to it).
        link = tmp_path / "link.csv"
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
        with pytest.raises(ValueError, match="is the input event file"):
            export(victim, link, force=force)
        # A directory output that is, or holds, the logdir.
        for d in (logdir, tmp_path):
            with pytest.raises(ValueError, match="never replaces its input"):
                export(logdir, d, partition_by="run", force=force)
    assert _event_files(logdir) == before
    # A new file inside the logdir is fine, and is not taken for a run afterwards.
    st = export(logdir, logdir / "all.parquet")
    assert st.rows == len(pd.read_parquet(logdir / "all.parquet"))
    assert tbscope.scan(logdir).runs == tbscope.scan(tbx_logdir).runs and tbscope.scan(logdir).report.ok


@pytest.mark.parametrize("shape", ["file", "kinds", "dataset"])
def test_a_failed_export_leaves_nothing_behind(tbx_logdir, tmp_path, shape):
    def boom(st):
        raise RuntimeError("disk full")

    out = tmp_path / ("out.parquet" if shape == "file" else "out")
    kw = (
        {"kinds": ["scalars", "text"], "format": "csv"}
        if shape == "kinds"
        else {"partition_by": "run"}
        if shape == "dataset"
        else {}
    )
    with pytest.raises(RuntimeError, match="disk full"):
        export(tbx_logdir, out, progress=boom, max_rows=1, **kw)
    assert list(tmp_path.iterdir()) == []
    # Over an earlier output with force: the earlier one survives the failure intact.
    export(tbx_logdir, out, **kw)
    before = sorted((p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file())
    with pytest.raises(RuntimeError, match="disk full"):
        export(tbx_logdir, out, progress=boom, max_rows=1, force=True, **kw)
    after = sorted((p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file())
    assert after == before


def test_export_reports_what_could_not_be_read(tbx_logdir, tmp_path):
    logdir = _copy(tbx_logdir, tmp_path / "logdir")
    run = next(p for p in logdir.iterdir() if p.is_dir())
    (run / "events.out.tfevents.1.gone").symlink_to(tmp_path / "nowhere")
    for kw in ({}, {"kinds": ["scalars", "hparams"], "format": "csv"}):
        out = tmp_path / ("x.csv" if not kw else "x")
        st = export(logdir, out, force=True, **kw)
        (p,) = st.report.by_severity("error")
        assert "cannot open" in p.reason
    assert export(tbx_logdir, tmp_path / "ok.csv").report.ok


def test_outputs_get_the_usual_permissions(tbx_logdir, tmp_path):
    # Before: a file export kept its temporary file's private mode (0600).
    import os
    import stat

    umask = os.umask(0o022)
    try:
        export(tbx_logdir, tmp_path / "x.csv")
        export(tbx_logdir, tmp_path / "d", partition_by="run")
        export(tbx_logdir, tmp_path / "k", kinds=["scalars", "text"], format="csv")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "x.csv").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "k" / "scalars.csv").stat().st_mode) == 0o644
