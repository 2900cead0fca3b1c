"""Logdir.iter_batches() streams a logdir a group of files at a time, keeping nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import tbscope

tbx = pytest.importorskip("tensorboardX")


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    for r in range(6):
        w = tbx.SummaryWriter(str(tmp_path / f"run{r}"))
        for step in range(500):
            w.add_scalar("loss", r + step / 1000, step)
            w.add_scalar("acc", -step, step)
        w.close()
    return tmp_path


def test_streamed_batches_equal_the_whole_table(logdir: Path) -> None:
    whole = tbscope.scan(logdir).scalars().to_arrow()
    lg = tbscope.scan(logdir)
    pieces = list(lg.iter_batches("scalars", max_rows=700, max_bytes=1))
    # max_bytes=1: every file is a group of its own, so there are several groups.
    assert len(pieces) > 6
    assert all(b.num_rows <= 700 for b in pieces)
    streamed = pa.Table.from_batches(pieces).cast(whole.schema)
    for col in ("run", "tag", "step", "value"):
        assert streamed.column(col).to_pylist() == whole.column(col).to_pylist(), col
    # Streaming used a reader of its own: this Logdir has still read nothing.
    assert not lg._loaded


def test_iter_batches_of_a_loaded_frame_slices_it(logdir: Path) -> None:
    frame = tbscope.scan(logdir).scalars()
    n = frame.num_rows
    assert sum(b.num_rows for b in frame.iter_batches(max_rows=1000)) == n
