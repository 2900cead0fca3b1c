"""The progress bar of reading commands (issue 15): the core counts the pieces of event files
each load is given and reads, and `tbscope ls` / `summary` show them as a bar on a terminal,
and nothing on a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tbscope
from tbscope import _core

SCRIPT = Path(sys.executable).with_name("tbscope")


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory) -> Path:
    """Three runs of one tensorboardX file each."""
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("progress")
    for i in range(3):
        with SummaryWriter(str(root / f"run{i}"), flush_secs=3600) as w:
            for step in range(5):
                w.add_scalar("loss", step / (i + 1), step, walltime=1000.0 + step)
    return root


def test_a_load_counts_the_files_it_reads(three_runs):
    done0, total0 = _core.load_progress()
    tbscope.scan(three_runs, threads=2).reload()
    done, total = _core.load_progress()
    assert (done - done0, total - total0) == (3, 3)
    # Nothing new to read: nothing planned.
    lg = tbscope.scan(three_runs)
    lg.reload()
    before = _core.load_progress()
    lg.reload()
    assert _core.load_progress() == before


def _summary(root: Path, stderr_tty: bool) -> tuple[bytes, bytes]:
    """`tbscope summary ROOT --format csv`, stdout to a pipe, stderr to a terminal or a pipe."""
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    cmd = [str(SCRIPT), "summary", str(root), "--format", "csv"]
    if not stderr_tty:
        p = subprocess.run(cmd, capture_output=True, env=env, timeout=120, check=True)
        return p.stdout, p.stderr
    master, slave = os.openpty()
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env) as proc:
            os.close(slave)
            err = b""
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's other end closed
                    break
                if not chunk:
                    break
                err += chunk
            out = proc.stdout.read() if proc.stdout else b""
            assert proc.wait(timeout=120) == 0
        return out, err
    finally:
        os.close(master)


def test_summary_shows_a_progress_bar_on_a_terminal_only(three_runs):
    out_tty, err_tty = _summary(three_runs, stderr_tty=True)
    out_pipe, err_pipe = _summary(three_runs, stderr_tty=False)
    assert out_tty == out_pipe
    assert out_pipe.count(b"\n") == 4  # header and three runs
    assert err_pipe == b""
    text = err_tty.decode(errors="replace")
    assert "reading" in text
    assert "3/3" in text, text
    assert "files" in text
