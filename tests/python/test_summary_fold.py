"""``tbscope summary`` without a cache folds each piece of the logdir into statistics as it is
read (the scalar rows are never all in memory): its output must be byte for byte what the
columns give (a scan that keeps the rows), and what the cached path gives, on a logdir of many
runs written by tensorboardX with the awkward cases: NaN, -0.0 after 0.0, duplicate steps, runs
without scalars, hparams in the run and in torch's child run, a corrupt record, a torn tail.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.main import main
from tbscope._cli.output import _fast_csv

tensorboardX = pytest.importorskip("tensorboardX")


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    root = tmp_path_factory.mktemp("fold")
    for r in range(60):
        run = root / f"sweep_{r // 10}" / f"trial_{r:02d}"
        with SummaryWriter(str(run), flush_secs=3600) as w:
            if r % 6 == 0:
                # hparams in the run itself, as Keras and tbscope's writer put them.
                for s in hparams({"lr": 0.1 * (r + 1), "opt": "adam" if r % 12 else "sgd"}, {"acc": 0.0}):
                    w._get_file_writer().add_summary(s)
            if r % 10 == 7:
                # No scalars: text only.
                w.add_text("note", f"run {r}", 0, walltime=1000.0)
                continue
            for s in range(25):
                step = s % 9 if r % 5 == 3 else s  # a restarted job wrote steps again
                x = math.sin(r * 7 + s)
                loss = float("nan") if (r % 4 == 1 and s in (2, 11)) else x
                if r % 8 == 2 and s in (5, 6):
                    loss = 0.0 if s == 5 else -0.0
                w.add_scalar("loss", loss, step, walltime=1000.0 + s)
                w.add_scalar("eval/acc", float("nan") if r % 13 == 0 else x * x, step, walltime=1000.0 + s)
                if r % 3 == 0:
                    w.add_scalar(f"only/{r % 2}", r + s, step, walltime=1000.0 + s)
            if r % 11 == 4:
                # torch's add_hparams: a child run <run>/<timestamp> with the hparams and metrics.
                w.add_hparams({"wd": r / 100}, {"hp/metric": r / 10}, name=f"child{r}")
    files = sorted(root.rglob("events.out.tfevents.*"))
    # A corrupt record in one file (a flipped byte in a value), a torn tail in another.
    data = bytearray(files[5].read_bytes())
    data[len(data) // 2] ^= 0x5A
    files[5].write_bytes(bytes(data))
    data = files[9].read_bytes()
    files[9].write_bytes(data[:-7])
    return root


def summary_cli(*args: str, env: dict[str, str] | None = None) -> str:
    r = CliRunner().invoke(main, ["summary", *args], prog_name="tbscope", env=env)
    assert r.exit_code == 0, r.output
    return r.output


def columns_csv(root: Path, **kwargs) -> str:
    """The summary CSV from a scan that keeps its scalar rows (the columnar path)."""
    lg = tbscope.scan(root, kinds=["scalars", "hparams"])
    lg.reload()
    data = _fast_csv(lg._summary_columns(**kwargs), header=True)
    assert data is not None
    return data.decode()


def folded_csv(root: Path, piece: int, **kwargs) -> str:
    """The summary CSV from a scan that folds its scalars, reading ``piece`` bytes at a time."""
    lg = tbscope.scan(root, kinds=["scalars", "hparams"])
    assert lg._fold_scalars(piece_bytes=piece)
    lg.reload()
    data = _fast_csv(lg._summary_columns(**kwargs), header=True)
    assert data is not None
    return data.decode()


@pytest.mark.parametrize("piece", [1, 3000])
def test_small_pieces_fold_to_the_columns_summary(many, piece):
    # Pieces of one file, and of a few files (cut inside runs of two files).
    assert folded_csv(many, piece) == columns_csv(many)
    stats = "first,last,min,max,mean,count,argmin,argmax"
    assert folded_csv(many, piece, stats=stats.split(","), hparams=False) == columns_csv(
        many, stats=stats.split(","), hparams=False
    )


def test_folded_summary_is_the_columns_summary(many):
    # The command's own pieces (the default size: the whole of this logdir in one).
    want = columns_csv(many)
    got = summary_cli(str(many), "--format", "csv")
    assert got == want
    df = pd.read_csv(io.StringIO(got))
    # The awkward cases are there: hparams (the run's own and a child's), NaN, a run without
    # scalars, the -0.0 minimum kept.
    assert {"hparam:lr", "hparam:opt", "hparam:wd"} <= set(df.columns)
    # Six runs without scalars, and the hparams child of a run with hparams of its own (a row).
    assert df["loss:last"].isna().sum() == 7
    assert df["eval/acc:min"].isna().any()
    assert "-0.0" in got
    stats = "first,last,min,max,mean,count,argmin,argmax"
    assert summary_cli(str(many), "--format", "csv", "--stats", stats, "--no-hparams") == columns_csv(
        many, stats=stats.split(","), hparams=False
    )


def test_folded_summary_equals_the_cached_one(many, tmp_path):
    cold = summary_cli(str(many), "--format", "csv")
    cache = str(tmp_path / "cache")
    assert summary_cli(str(many), "--format", "csv", "--cache-dir", cache) == cold
    assert summary_cli(str(many), "--format", "csv", "--cache-dir", cache) == cold  # warm


def test_a_folding_scan_keeps_no_scalar_rows(many):
    lg = tbscope.scan(many, kinds=["scalars", "hparams"])
    assert lg._fold_scalars()
    lg.reload()
    # The damage is there and reported as a columnar scan reports it.
    assert lg.report.by_severity("corrupt")
    assert lg.report.problems == tbscope.scan(many, kinds=["scalars", "hparams"]).report.problems
    pd.testing.assert_frame_equal(lg.summary(), tbscope.scan(many, kinds=["scalars", "hparams"]).summary())
    with pytest.raises(ValueError, match="statistics of its scalars"):
        lg.scalars().to_arrow()
    # Through a cache, or once read, a scan keeps its rows.
    assert not tbscope.scan(many, cache=False, restarts="preempt")._fold_scalars()
    lg2 = tbscope.scan(many)
    lg2.reload()
    assert not lg2._fold_scalars()
