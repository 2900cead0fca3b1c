"""A warm open that finds nothing changed (docs/cache.md, "Warm opens"): it checks the logdir
with one stat per directory and per event file, leaves the runs' state encoded, and answers
``run_info``, ``ls``'s facts and ``summary``'s statistics from tables the generation stored.

Truth is a fresh scan without a cache (and, for the CLI, the same command without a cache,
byte for byte). The fast path is only taken when every directory listing is settled (listed
two seconds or more after its last change), so the logdirs here are "settled": their
directories' mtimes are set an hour back. ``TBSCOPE_TRACE=1`` says which path a load took.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.main import main
from test_cache import FILTERS, _mutations, assert_same, cold, event_files, frame_records, scalar_events, snapshot


def settle(root: Path) -> None:
    """Every directory's mtime an hour back: listings taken now are settled."""
    t = time.time() - 3600
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(d, (t, t))


@pytest.fixture
def logdir(tbx_logdir: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "logdir"
    shutil.copytree(tbx_logdir, dest)
    settle(dest)
    return dest


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def traced(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, logdir: Path, cache: Path, **kw: Any
) -> tuple[tbscope.Logdir, str]:
    """A scan through the cache, read, and the trace of its load."""
    monkeypatch.setenv("TBSCOPE_TRACE", "1")
    capfd.readouterr()
    lg = tbscope.scan(logdir, cache=cache, **kw)
    lg.reload()
    trace = capfd.readouterr().err
    monkeypatch.delenv("TBSCOPE_TRACE")
    return lg, trace


def fast(trace: str) -> bool:
    """Whether the load decided "nothing changed" by the stat check alone."""
    line = next(
        x
        for x in trace.splitlines()
        if x.startswith(("tbscope cache hit:", "tbscope cache updated:", "tbscope cache miss:"))
    )
    # (A change the check finds in a few runs' files, with every directory as listed, is
    # "updated" without a discovery too: only a hit is "nothing changed".)
    return line.startswith("tbscope cache hit:") and "check" in line and "discover" not in line


def test_unchanged_logdir_is_checked_without_discovery(
    logdir: Path, cache: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    truth = cold(logdir)
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "miss"
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    info = lg.cache_info
    assert info is not None and info.status == "hit" and not info.written and not info.warnings
    assert fast(trace), trace
    # Every table, the runs' state decoded on demand.
    assert_same(truth, snapshot(lg))
    st = lg.reload()
    assert (st.files_read, st.bytes_read) == (0, 0)


@pytest.mark.parametrize("kw", FILTERS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_filtered_warm_opens(
    logdir: Path, cache: Path, kw: dict[str, Any], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tbscope.scan(logdir, cache=cache).runs
    lg, trace = traced(capfd, monkeypatch, logdir, cache, **kw)
    assert fast(trace) and lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(cold(logdir, **kw), snapshot(lg))
    # The stored tables (served while the state is still encoded) against a fresh scan.
    lg = tbscope.scan(logdir, cache=cache, **kw)
    plain = tbscope.scan(logdir, **kw)
    assert lg._run_facts().equals(plain._run_facts())
    assert lg.run_info().to_arrow().equals(plain.run_info().to_arrow())
    assert lg.summary().equals(plain.summary())


def _more_mutations() -> dict[str, Any]:
    """Changes the stat check must see, beyond those of test_cache.test_invalidation."""

    def appended(logdir: Path) -> None:
        with open(event_files(logdir / "hp" / "trial_0")[-1], "ab") as fh:
            fh.write(frame_records(scalar_events("appended", range(3))))

    def touched(logdir: Path) -> None:
        f = event_files(logdir / "train")[0]
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 7_000_000_000))

    def new_run(logdir: Path) -> None:
        (logdir / "eval" / "zz_new").mkdir()
        (logdir / "eval" / "zz_new" / "events.out.tfevents.5.x").write_bytes(
            frame_records(scalar_events("n", range(4)))
        )

    def new_last_file(logdir: Path) -> None:
        d = logdir / "train" / "grp" / "a"
        (d / "events.out.tfevents.9999999999.z").write_bytes(frame_records(scalar_events("late", range(2))))

    def empty_subdir(logdir: Path) -> None:
        (logdir / "hp" / "trial_0" / "sub").mkdir()

    def other_file(logdir: Path) -> None:
        (logdir / "train" / "notes.txt").write_text("not an event file")

    def same_size_replacement(logdir: Path) -> None:
        # Another inode with the same size and mtime, the directory's mtime put back: only the
        # file's identity tells it apart.
        f = event_files(logdir / "eval" / "deep" / "er")[0]
        st, dst = f.stat(), f.parent.stat()
        f.with_name("new").write_bytes(frame_records(scalar_events("other", range(1000)))[: st.st_size])
        os.replace(f.with_name("new"), f)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.utime(f.parent, ns=(dst.st_atime_ns, dst.st_mtime_ns))
        assert f.stat().st_ino != st.st_ino

    def run_renamed(logdir: Path) -> None:
        os.rename(logdir / "train" / "grp" / "b", logdir / "train" / "grp" / "bb")

    return {
        "appended": appended,
        "touched": touched,
        "new_run": new_run,
        "new_last_file": new_last_file,
        "empty_subdir": empty_subdir,
        "other_file": other_file,
        "same_size_replacement": same_size_replacement,
        "run_renamed": run_renamed,
    }


MUTATIONS = {**_mutations(), **_more_mutations()}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_changes_are_seen_by_the_check(
    logdir: Path, cache: Path, mutation: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tbscope.scan(logdir, cache=cache).runs
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    assert fast(trace)
    MUTATIONS[mutation](logdir)
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    info = lg.cache_info
    assert info is not None and not info.warnings
    # Seen: read, or (a listing that changed without changing what is read) listed again and
    # the listing kept.
    assert not fast(trace) or (info.dirs_listed > 0 and info.written), trace
    assert_same(cold(logdir), snapshot(lg))
    assert lg.summary().equals(tbscope.scan(logdir).summary())
    assert lg._run_facts().equals(tbscope.scan(logdir)._run_facts())
    # Settled again, the next open checks fast and still agrees.
    settle(logdir)
    tbscope.scan(logdir, cache=cache).runs  # lists the settled directories once more
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    assert fast(trace) and lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(cold(logdir), snapshot(lg))


def test_reload_after_a_warm_open_reads_what_was_appended(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    lg = tbscope.scan(logdir, cache=cache)
    n = len(lg.scalars())
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    with open(event_files(logdir / "hp" / "trial_1")[-1], "ab") as fh:
        fh.write(frame_records(scalar_events("later", range(5))))
    st = lg.reload()
    assert st.rows == 5 and len(lg.scalars()) == n + 5
    assert lg.cache_info is not None and lg.cache_info.status == "updated"
    assert_same(cold(logdir), snapshot(lg))


def test_a_segment_damaged_behind_a_warm_open(logdir: Path, cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rows are decoded when first asked for: a segment file that fails then (same size, bad
    bytes) is a warning, and the logdir is read again."""
    import logging

    tbscope.scan(logdir, cache=cache).runs
    gen = (cache / "CURRENT").read_text().strip()
    seg = next((cache / gen).glob("*.scalars.arrow"))
    data = bytearray(seg.read_bytes())
    data[-6:] = b"BROKEN"  # the trailing magic: the file no longer reads as Arrow IPC
    seg.write_bytes(bytes(data))
    lg = tbscope.scan(logdir, cache=cache)
    lg.reload()
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    with caplog.at_level(logging.WARNING, logger="tbscope.cache"):
        snap = snapshot(lg)
    assert any("not used" in r.getMessage() for r in caplog.records), caplog.text
    assert lg.cache_info.status == "miss" and lg.cache_info.written
    assert_same(cold(logdir), snap)
    # and the generation written instead serves the next scan
    assert_same(cold(logdir), snapshot(tbscope.scan(logdir, cache=cache)))


def test_a_generation_removed_under_a_pending_reader(logdir: Path, cache: Path) -> None:
    """The state of a warm open is decoded later, from the mapped manifest: a writer that removes
    that generation in between takes nothing away from it."""
    tbscope.scan(logdir, cache=cache).runs
    lg = tbscope.scan(logdir, cache=cache)
    lg.reload()
    for g in cache.glob("gen-*"):
        shutil.rmtree(g)
    assert_same(cold(logdir), snapshot(lg))


# --------------------------------------------------------------------------------------------
# the CLI: warm output is cold output, byte for byte


def cli(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


COMMANDS: list[tuple[str, ...]] = [
    ("ls",),
    ("ls", "--runs", "hp/*"),
    ("ls", "--tags", "loss*"),
    ("ls", "--kinds", "scalars,images"),
    ("ls", "--steps", "2:8"),
    ("summary",),
    ("summary", "--runs", "train*"),
    ("summary", "--tags", "acc*", "--stats", "last,first,min,max,mean,count,argmin,argmax"),
    ("summary", "--steps", "0:5"),
    ("summary", "--no-hparams"),
    ("tags",),
]


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_cli_warm_output_is_cold_output(logdir: Path, cache: Path, args: tuple[str, ...], fmt: str) -> None:
    cmd, rest = args[0], list(args[1:])
    want = cli(cmd, str(logdir), *rest, "--format", fmt)
    assert cli(cmd, str(logdir), *rest, "--format", fmt, "--cache-dir", str(cache)) == want  # miss
    assert cli(cmd, str(logdir), *rest, "--format", fmt, "--cache-dir", str(cache)) == want  # hit
    _more_mutations()["appended"](logdir)
    want = cli(cmd, str(logdir), *rest, "--format", fmt)
    assert cli(cmd, str(logdir), *rest, "--format", fmt, "--cache-dir", str(cache)) == want  # updated


def test_cli_many_runs(tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough runs for the check to stat on several threads, and for several chunks of summary's
    CSV (pandas formats 100,000 cells at a time)."""
    root = tmp_path / "many"
    payload = frame_records(scalar_events("loss", range(3)) + scalar_events("acc", range(2)))
    for i in range(2100):
        d = root / f"s{i // 100:02d}" / f"t{i % 100:02d}"
        d.mkdir(parents=True)
        f = d / "events.out.tfevents.1.x"
        f.write_bytes(payload)
        ns = 1_700_000_000_000_000_000 + (0 if i < 500 else i * 1_000_003)
        os.utime(f, ns=(ns, ns))
    settle(root)
    cache = tmp_path / "cache"
    for cmd in ("ls", "summary"):
        want = cli(cmd, str(root), "--format", "csv")
        for _ in range(2):
            assert cli(cmd, str(root), "--format", "csv", "--cache-dir", str(cache)) == want
    monkeypatch.setenv("TBSCOPE_NUM_THREADS", "3")
    lg, trace = traced(capfd, monkeypatch, root, cache)
    assert fast(trace) and "4222 stats on 3 threads" in trace  # 22 + 2100 directories, 2100 files
    # One file appended to, one replaced: the check (split over threads) sees both.
    with open(root / "s20" / "t99" / "events.out.tfevents.1.x", "ab") as fh:
        fh.write(payload)
    lg, trace = traced(capfd, monkeypatch, root, cache)
    assert not fast(trace) and lg.cache_info is not None and lg.cache_info.status == "updated"
    # Every directory as listed: that run alone is looked at again, without a discovery, and
    # only its state decoded (the other runs' parts and stored rows carried over).
    assert "discover" not in trace and "partial state" in trace, trace
    assert lg.summary().equals(tbscope.scan(root).summary())
    settle(root)
    tbscope.scan(root, cache=cache).runs
    # Another inode, same size and mtime, and its directory's mtime put back: only the
    # file's identity shows the change.
    f = root / "s00" / "t01" / "events.out.tfevents.1.x"
    st = f.stat()
    f.with_name("new").write_bytes(f.read_bytes())
    os.replace(f.with_name("new"), f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.utime(f.parent, (time.time() - 3600,) * 2)
    assert f.stat().st_ino != st.st_ino
    lg, trace = traced(capfd, monkeypatch, root, cache)
    assert not fast(trace) and lg.cache_info is not None and lg.cache_info.runs_dropped == 1
    for cmd in ("ls", "summary"):
        assert cli(cmd, str(root), "--format", "csv", "--cache-dir", str(cache)) == cli(
            cmd, str(root), "--format", "csv"
        )


# --------------------------------------------------------------------------------------------
# summary's statistics: native (stored in the cache) against the NumPy reference


def _reference_summary(lg: tbscope.Logdir, stats: tuple[str, ...]) -> dict[str, Any]:
    """``<tag>:<stat>`` columns as summary_oracle.series_stats computes them (the NumPy version
    summary() used before the statistics were native), for the tags with points."""
    import numpy as np
    from summary_oracle import series_stats
    from tbscope._stats import summary_column

    runs = [str(r) for r in lg.run_info().to_arrow().column("run").to_pylist()]
    sc = lg.scalars().to_arrow()
    tags, values = series_stats(sc, runs, stats)
    present = set(sc.column("tag").to_pylist())
    out = {}
    for j, tag in enumerate(tags):
        if tag in present:
            for s in stats:
                out[summary_column(tag, s)] = np.asarray(values[s][:, j])
    return out


def _same_values(a: Any, b: Any) -> bool:
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


ALL_STATS = ("last", "first", "min", "max", "argmin", "argmax", "mean", "count")


def test_native_statistics_match_the_numpy_reference(tmp_path: Path) -> None:
    import numpy as np
    from tbscope._writer.api import SummaryWriter

    rng = np.random.default_rng(3)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, -2.5]
    root = tmp_path / "stats"
    for r in range(6):
        with SummaryWriter(str(root / f"run{r}")) as w:
            for step in range(40):
                for t in range(3):
                    if rng.random() < 0.2:
                        continue  # tags with gaps
                    v = special[rng.integers(len(special))] if rng.random() < 0.3 else float(rng.standard_normal())
                    w.add_scalar(f"t{t}", v, step if rng.random() < 0.9 else step // 2)
            if r == 5:
                for step in range(5):
                    w.add_scalar("all_nan", float("nan"), step)
    cache = tmp_path / "cache"
    lg = tbscope.scan(root)
    lg.reload()
    for scan_kw in ({}, {"cache": cache}, {"cache": cache}):
        lg = tbscope.scan(root, **scan_kw)  # plain, then a cache miss, then a warm open
        got = lg.summary(stats=ALL_STATS, hparams=False)
        want = _reference_summary(lg, ALL_STATS)
        assert [c for c in got.columns if ":" in c] == list(want)
        for name, ref in want.items():
            col = got[name]
            if name.endswith(("_step", ":count")):
                assert col.astype("Float64").to_numpy(dtype="float64", na_value=np.nan).tolist() == pytest.approx(
                    ref.tolist(), nan_ok=True
                ), name
            else:
                assert _same_values(col.to_numpy(), ref), name


def test_check_of_more_directories_than_it_holds_open(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check holds at most a few hundred directory descriptors at a time (a logdir of
    thousands of sweep directories must not run into the limit on open files): 300 sweeps are
    checked in windows, and a change in a late one is still seen."""
    root = tmp_path / "wide"
    payload = frame_records(scalar_events("loss", range(2)))
    for i in range(300):
        for t in range(2):
            d = root / f"sweep{i:03d}" / f"t{t}"
            d.mkdir(parents=True)
            (d / "events.out.tfevents.1.x").write_bytes(payload)
    settle(root)
    cache = tmp_path / "cache"
    tbscope.scan(root, cache=cache).runs
    lg, trace = traced(capfd, monkeypatch, root, cache)
    assert fast(trace) and "301 directories opened" in trace, trace
    with open(root / "sweep299" / "t1" / "events.out.tfevents.1.x", "ab") as fh:
        fh.write(payload)
    lg, trace = traced(capfd, monkeypatch, root, cache)
    assert not fast(trace) and lg.cache_info is not None and lg.cache_info.status == "updated"
    assert_same(cold(root), snapshot(lg))


def _tbx_run(run_dir: Path, tag: str, steps: range) -> None:
    """A run written by tensorboardX's SummaryWriter (as a training job starting would)."""
    from tensorboardX import SummaryWriter

    with SummaryWriter(logdir=str(run_dir), flush_secs=3600) as w:
        for s in steps:
            w.add_scalar(tag, s * 0.25, s)


def _dirs_in(d: Path) -> int:
    return 1 + sum(1 for p in d.rglob("*") if p.is_dir())


def _directory_changes() -> dict[str, Any]:
    """Changes a directory's listing shows: each returns (directories it expects listed,
    runs of the logdir it expects looked at besides the new ones)."""

    def new_run_in_a_new_directory(logdir: Path) -> tuple[int, int]:
        _tbx_run(logdir / "zz_sweep" / "run_0", "new/loss", range(5))
        return 1 + _dirs_in(logdir / "zz_sweep"), 0  # the root, and the new subtree walked

    def new_nested_run(logdir: Path) -> tuple[int, int]:
        _tbx_run(logdir / "train" / "grp" / "zz" / "deeper", "nested", range(3))
        return 1 + _dirs_in(logdir / "train" / "grp" / "zz"), 0

    def new_file_in_a_run(logdir: Path) -> tuple[int, int]:
        # A restart of the run's writer: a second file, named after the first.
        trial = next(p for p in sorted((logdir / "hp").iterdir()) if p.is_dir() and event_files(p))
        time.sleep(1.1)  # tensorboardX names files by the second
        _tbx_run(trial, "restarted", range(100, 104))
        return 1, 1

    def run_removed(logdir: Path) -> tuple[int, int]:
        shutil.rmtree(logdir / "eval" / "deep")
        return 1, 0

    def run_renamed(logdir: Path) -> tuple[int, int]:
        os.rename(logdir / "train" / "grp" / "b", logdir / "train" / "grp" / "bb")
        return 1 + _dirs_in(logdir / "train" / "grp" / "bb"), 0

    return {
        "new_run_in_a_new_directory": new_run_in_a_new_directory,
        "new_nested_run": new_nested_run,
        "new_file_in_a_run": new_file_in_a_run,
        "run_removed": run_removed,
        "run_renamed": run_renamed,
    }


@pytest.mark.parametrize("change", list(_directory_changes()))
def test_a_directory_change_lists_only_that_directory(
    logdir: Path, cache: Path, change: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run added (nested or not), a file added to a run, a run removed or renamed: the warm
    open lists again only the directories that changed and looks only at their runs, without
    a discovery of the logdir (issue 15), and answers as a cold read does."""
    tbscope.scan(logdir, cache=cache).runs
    before = set(tbscope.scan(logdir).runs)
    listed, touched = _directory_changes()[change](logdir)
    after = set(tbscope.scan(logdir).runs)
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    info = lg.cache_info
    assert info is not None and info.status == "updated" and info.written and not info.warnings
    assert "discover" not in trace, trace
    assert (info.runs_rechecked, info.runs_dropped, info.dirs_listed) == (
        len(after - before) + touched,
        len(before - after),
        listed,
    )
    assert_same(cold(logdir), snapshot(lg))
    plain = tbscope.scan(logdir)
    assert lg.summary().equals(plain.summary())
    assert lg._run_facts().equals(plain._run_facts())
    # The generation it wrote answers the next open (the directories just changed are listed
    # again, too soon after their change to be sure of: nothing else is looked at).
    lg, trace = traced(capfd, monkeypatch, logdir, cache)
    info = lg.cache_info
    assert info is not None and info.status == "hit" and info.runs_rechecked == 0, trace
    assert lg.summary().equals(plain.summary())
    assert_same(cold(logdir), snapshot(lg))
