"""A reload checks the logdir against what the last read saw, one stat per directory and per
event file (docs/scale.md, "Reloading many runs"): each kind of change reads what a fresh scan
reads, an unchanged directory is not listed again, and in ``tbscope serve`` a refresh that
changed nothing builds no new snapshot."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import tbscope
from test_cache import _norm, event_files, frame_records, scalar_events, snapshot


@pytest.fixture
def logdir(tbx_logdir: Path, tmp_path: Path) -> Path:
    """A private copy of the tensorboardX logdir (all kinds, nested runs, multi-file runs)."""
    dest = tmp_path / "logdir"
    shutil.copytree(tbx_logdir, dest)
    return dest


def settle() -> None:
    """Directories changed less than 2 s ago are listed again on every reload (a change in the
    same clock tick would not move their mtime): wait until they are settled."""
    time.sleep(2.1)


def rows(lg: tbscope.Logdir) -> dict[str, Any]:
    """Every table of a scan, rows sorted (a reload adds what it read after what was read)."""
    out = {}
    for name, v in snapshot(lg).items():
        if isinstance(v, pa.Table):
            out[name] = sorted(repr(_norm(r)) for r in v.to_pylist())
        else:
            out[name] = sorted(v)
    return out


def append(path: Path, tag: str, steps: range) -> None:
    with open(path, "ab") as f:
        f.write(frame_records(scalar_events(tag, steps)))


def test_each_change_reads_what_a_fresh_scan_reads(logdir: Path) -> None:
    settle()
    lg = tbscope.scan(logdir)
    assert lg.reload().dirs_listed > 0
    s = lg.reload()
    assert (s.dirs_listed, s.files_read) == (0, 0)

    # Appended to: the file read from where it stopped, no directory listed.
    run_dir = next(p.parent for p in sorted(logdir.rglob("*tfevents*")))
    append(event_files(run_dir)[-1], "appended", range(3))
    s = lg.reload()
    assert (s.dirs_listed, s.files_read, s.rows) == (0, 1, 3)
    assert rows(lg) == rows(tbscope.scan(logdir))

    # A new run, and a new file in a known run: their directories are listed again.
    with tbscope.SummaryWriter(logdir / "new_run") as w:
        w.add_scalar("loss", 1.0, 0)
    with tbscope.SummaryWriter(run_dir, filename_suffix=".second") as w:
        w.add_scalar("later", 2.0, 50)
    s = lg.reload()
    assert s.dirs_listed > 0
    assert rows(lg) == rows(tbscope.scan(logdir))
    settle()
    lg.reload()
    assert lg.reload().dirs_listed == 0

    # A run removed: a reload keeps what it read of it, as it always has.
    before = rows(lg)
    shutil.rmtree(logdir / "new_run")
    assert lg.reload().dirs_listed > 0
    assert rows(lg) == before


def test_a_file_added_where_the_mtime_was_set_back_is_found(logdir: Path) -> None:
    # A directory's mtime set back after a change (a restore, a sync tool) does not hide it:
    # the check also compares the directory's ctime, which utime cannot set back.
    settle()
    lg = tbscope.scan(logdir)
    lg.reload()
    assert lg.reload().dirs_listed == 0
    run_dir = next(p.parent for p in sorted(logdir.rglob("*tfevents*")))
    st = run_dir.stat()
    with tbscope.SummaryWriter(run_dir, filename_suffix=".hidden") as w:
        w.add_scalar("hidden", 3.0, 7)
    os.utime(run_dir, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run_dir.stat().st_mtime_ns == st.st_mtime_ns
    assert lg.reload().dirs_listed > 0
    assert rows(lg) == rows(tbscope.scan(logdir))


def test_serve_builds_no_snapshot_when_nothing_changed(logdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbscope._reader import Logdir
    from tbscope.server import make_config
    from tbscope.server.store import Store

    settle()
    store = Store(make_config(logdir, cache=False, reload_interval=0))
    assert store.reload() is not None
    built = []
    run_info = Logdir.run_info
    monkeypatch.setattr(Logdir, "run_info", lambda self: built.append(1) or run_info(self))
    snap = store.snapshot
    assert store.reload() is None
    # Nothing read, nothing listed: the per-run tables were not built again.
    assert built == [] and store.snapshot is snap
    run_dir = next(p.parent for p in sorted(logdir.rglob("*tfevents*")))
    append(event_files(run_dir)[-1], "appended", range(3))
    change = store.reload()
    assert change is not None and built == [1]
    assert change.runs == (run_dir.relative_to(logdir).as_posix(),)
    assert store.snapshot is not snap
