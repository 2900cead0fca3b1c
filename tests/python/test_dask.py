"""tbscope.dask on a distributed.LocalCluster with separate worker processes: every kind equals
the single-process read row for row, with partitions per file and per byte range, locally and
over a real S3 API; export --dask."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow.dataset as pads
import pytest
import tbscope
import tbscope.dask as tdask
from click.testing import CliRunner
from s3_util import AWS_ENV, environ, s3_server
from tbscope import _core
from tbscope._cli.main import main
from tbscope._reader import KINDS

distributed = pytest.importorskip("distributed")

BUCKET = "tbscope-dask"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Workers inherit the environment: the S3 test credentials and a cache root of the tests'.
    with environ(TBSCOPE_CACHE_DIR=str(tmp_path_factory.mktemp("dask-cache")), **AWS_ENV):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
            with distributed.Client(c) as client:
                yield client


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Categories per partition differ from a whole read's (dask unions them in partition
    order): compare the values."""
    df = df.reset_index(drop=True)
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object)
    return df


def _same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    # Values row for row; dtypes are meta's (a column of nullable ints is float64 in every
    # partition, as pandas gives it where a null is present; never-loaded blobs are objects).
    pd.testing.assert_frame_equal(_plain(got), _plain(want), check_dtype=False)


@pytest.mark.parametrize("which", ["tbx", "tb"])
def test_every_kind_equals_the_single_process_read(cluster, which, tbx_logdir, tb_logdir):
    logdir = {"tbx": tbx_logdir, "tb": tb_logdir}[which]
    local = tbscope.scan(logdir)
    files = tdask.event_files(logdir)
    for kind in KINDS:
        ddf = tdask.read_kind(kind, logdir)
        # One partition per event file.
        assert ddf.npartitions == len(files) > len(local.runs)
        want = local._frame(kind).to_pandas(**({"blobs": True} if kind in ("images", "audio", "blobs") else {}))
        # The schema is known without reading: meta has the columns and dtypes of the result.
        assert list(ddf._meta.columns) == list(want.columns)
        got = ddf.compute()
        assert [str(t) for c, t in ddf._meta.dtypes.items() if c not in ("run", "tag")] == [
            str(t) for c, t in got.dtypes.items() if c not in ("run", "tag")
        ]
        _same_rows(got, want)


def test_split_points_are_record_boundaries(tb_logdir):
    path = max((f for _, _, f in tdask.event_files(tb_logdir)), key=os.path.getsize)
    starts = [offset for offset, _ in _core.read_records(path)]
    cuts = _core.split_points(path, 0, 300)
    assert len(cuts) >= 3
    assert set(cuts) <= set(starts[1:])
    # About a piece apart: each cut is the first record start at least 300 bytes past the last.
    for before, cut in zip([0, *cuts], cuts):
        assert cut == min(s for s in starts if s >= before + 300)
    assert _core.split_points(path, cuts[-1], 1 << 40) == []
    with pytest.raises(ValueError, match="piece"):
        _core.split_points(path, 0, 0)


@pytest.mark.parametrize("which", ["tbx", "tb"])
def test_byte_range_partitions_equal_the_single_process_read(cluster, which, tbx_logdir, tb_logdir):
    """Files cut into pieces of ~1 KiB: the TensorBoard-writer logdir's tensor summaries carry
    their metadata in the first record only (and its second file none at all), so later pieces
    cannot decide their kind alone."""
    logdir = {"tbx": tbx_logdir, "tb": tb_logdir}[which]
    local = tbscope.scan(logdir)
    files = tdask.event_files(logdir)
    for kind in KINDS:
        ddf = tdask.read_kind(kind, logdir, partition_bytes=1024)
        assert ddf.npartitions > len(files)
        want = local._frame(kind).to_pandas(**({"blobs": True} if kind in ("images", "audio", "blobs") else {}))
        _same_rows(ddf.compute(), want)
    parts = tdask._parts(files, partition_bytes=1024)
    assert any(p.start > 0 for p in parts)
    # Pieces of one file cover it end to end, in order, at record boundaries.
    for _, _, f in files:
        mine = [p for p in parts if p.path == f]
        assert mine[0].start == 0 and mine[-1].end is None
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))


def test_a_byte_range_starting_mid_file_is_read_in_place(tb_logdir):
    """The native reader reads a piece of a file where it is (offsets in the whole file, no
    copy): the rows of the records starting in [start, end), as the whole read has them."""
    path = max((f for _, _, f in tdask.event_files(tb_logdir)), key=os.path.getsize)
    cuts = _core.split_points(path, 0, 300)
    start, end = cuts[0], cuts[2]
    whole = tbscope.scan(path, provenance=True, kinds=["scalars", "tensors"])
    piece = tdask._scan(path, ["scalars", "tensors"], None, {"provenance": True}, (start, end))
    for kind in ("scalars", "tensors"):
        t = whole._frame(kind).to_pandas()
        want = t[(t.offset >= start) & (t.offset < end)]
        got = piece._frame(kind).to_pandas()
        assert len(got) > 0 or kind == "scalars"
        _same_rows(got, want)
    # To the end of the file, and through a partition (which adds the run).
    t = whole._frame("tensors").to_pandas()
    want = t[t.offset >= cuts[1]].drop(columns=["file", "offset"])
    got = tdask._read_part(("tensors", tdask.Part(".", path, cuts[1], None, path), None, {}, True, {}))
    _same_rows(got.drop(columns=["run"]), want.drop(columns=["run"]))
    with pytest.raises(ValueError, match="byte_range"):
        _core.NativeReader(os.path.dirname(path), byte_range=(0, None))
    with pytest.raises(ValueError, match="before it starts"):
        _core.NativeReader(path, byte_range=(10, 5))


def test_filters_and_restarts(cluster, tbx_logdir):
    got = tdask.read_scalars(tbx_logdir, runs="train/*", tags="loss*", steps=(0, 5)).compute()
    _same_rows(got, tbscope.read_scalars(tbx_logdir, runs="train/*", tags="loss*", steps=(0, 5)))
    # TensorBoard's restart rule spans a run's files: a partition per run.
    pre = tdask.read_scalars(tbx_logdir, restarts="preempt", partition_bytes=1024)
    assert pre.npartitions == len(tbscope.scan(tbx_logdir).runs)
    _same_rows(pre.compute(), tbscope.read_scalars(tbx_logdir, restarts="preempt"))
    assert tdask.read_scalars(tbx_logdir).map_partitions(len).sum().compute() == len(tbscope.read_scalars(tbx_logdir))
    with pytest.raises(TypeError, match="provenance"):
        tdask.read_scalars(tbx_logdir, provenance=True)


def test_over_s3(cluster, tbx_logdir):
    with s3_server() as server:
        fs = server.fs()
        fs.mkdir(BUCKET)
        fs.put(str(tbx_logdir) + "/", f"{BUCKET}/tbx", recursive=True)
        url = f"s3://{BUCKET}/tbx"
        for kind in ("scalars", "histograms", "images"):
            ddf = tdask.read_kind(kind, url, storage_options=server.options)
            want = tbscope.scan(tbx_logdir)._frame(kind).to_pandas(**({"blobs": True} if kind == "images" else {}))
            _same_rows(ddf.compute(), want)


def test_export_dask_writes_a_parquet_dataset(cluster, tbx_logdir, tmp_path):
    out = tmp_path / "dataset"
    r = CliRunner().invoke(
        main,
        [
            "export",
            str(tbx_logdir),
            "-o",
            str(out),
            "--dask",
            cluster.scheduler.address,
            "--kinds",
            "scalars,histograms",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    for kind in ("scalars", "histograms"):
        parts = sorted((out / kind).glob("*.parquet"))
        assert len(parts) == len(tdask.event_files(tbx_logdir))
        got = pads.dataset(parts, format="parquet").to_table().to_pandas()
        _same_rows(got, tbscope.scan(tbx_logdir)._frame(kind).to_pandas())
    again = CliRunner().invoke(main, ["export", str(tbx_logdir), "-o", str(out), "--dask", cluster.scheduler.address])
    assert again.exit_code == 2 and "exists" in again.output
