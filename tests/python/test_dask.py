"""tbscope.dask on a distributed.LocalCluster with separate worker processes: every kind equals
the single-process read row for row, locally and over a real S3 API; export --dask."""

from __future__ import annotations

import pandas as pd
import pyarrow.dataset as pads
import pytest
import tbscope
import tbscope.dask as tdask
from click.testing import CliRunner
from s3_util import AWS_ENV, environ, s3_server
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
    for kind in KINDS:
        ddf = tdask.read_kind(kind, logdir)
        assert ddf.npartitions == len(local.runs)
        want = local._frame(kind).to_pandas(**({"blobs": True} if kind in ("images", "audio", "blobs") else {}))
        # The schema is known without reading: meta has the columns and dtypes of the result.
        assert list(ddf._meta.columns) == list(want.columns)
        got = ddf.compute()
        assert [str(t) for c, t in ddf._meta.dtypes.items() if c not in ("run", "tag")] == [
            str(t) for c, t in got.dtypes.items() if c not in ("run", "tag")
        ]
        _same_rows(got, want)


def test_filters_and_restarts(cluster, tbx_logdir):
    got = tdask.read_scalars(tbx_logdir, runs="train/*", tags="loss*", steps=(0, 5)).compute()
    _same_rows(got, tbscope.read_scalars(tbx_logdir, runs="train/*", tags="loss*", steps=(0, 5)))
    pre = tdask.read_scalars(tbx_logdir, restarts="preempt")
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
        assert len(parts) == len(tbscope.scan(tbx_logdir).runs)
        got = pads.dataset(parts, format="parquet").to_table().to_pandas()
        _same_rows(got, tbscope.scan(tbx_logdir)._frame(kind).to_pandas())
    again = CliRunner().invoke(main, ["export", str(tbx_logdir), "-o", str(out), "--dask", cluster.scheduler.address])
    assert again.exit_code == 2 and "exists" in again.output
