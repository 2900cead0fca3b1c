"""The incremental cache, ``scan(path, cache=...)`` (docs/cache.md).

Truth is a fresh scan without a cache of the same logdir, as it is at that moment (the uncached
reader is cross-checked against TensorBoard's own loaders in test_crosscheck.py); appended
points are also checked against what the test wrote. Every table is compared: each kind,
``run_info``, ``series``, ``hparams``, the report and the run list.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import tbscope
from tbscope._cache import cache_dir, clear, resolve

KINDS = ("scalars", "histograms", "images", "audio", "text", "hparams", "blobs", "tensors")


# --------------------------------------------------------------------------------------------
# helpers


def _norm(v: Any) -> Any:
    """Python values with NaN made comparable (NaN != NaN would hide nothing, but fail)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def snapshot(lg: tbscope.Logdir) -> dict[str, Any]:
    """Every table of a scan, as (schema, rows) with dictionaries decoded to values."""
    out: dict[str, Any] = {}
    for k in KINDS:
        frame = lg.hparams_records() if k == "hparams" else getattr(lg, k)()
        out[k] = frame.to_arrow()
    out["run_info"] = lg.run_info().to_arrow()
    out["series"] = lg.series().to_arrow()
    out["hparams_table"] = lg.hparams().to_arrow()
    out["report"] = [str(p) for p in lg.report.problems]
    out["runs"] = lg.runs
    return out


def assert_same(cold: dict[str, Any], warm: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    for name, a in cold.items():
        if name in skip:
            continue
        b = warm[name]
        if isinstance(a, pa.Table):
            assert a.schema == b.schema, f"{name}: schema\n{a.schema}\n!=\n{b.schema}"
            ra, rb = [_norm(r) for r in a.to_pylist()], [_norm(r) for r in b.to_pylist()]
            if ra != rb:
                first = next(i for i, (x, y) in enumerate(zip(ra + [None], rb + [None])) if x != y)
                pytest.fail(
                    f"{name}: {len(ra)} cold rows vs {len(rb)} warm; first difference at row {first}:\n{ra[first : first + 1]}\n{rb[first : first + 1]}"
                )
        else:
            assert a == b, name


def cold(logdir: Path, **kw: Any) -> dict[str, Any]:
    return snapshot(tbscope.scan(logdir, **kw))


def warm(logdir: Path, cache: Path, **kw: Any) -> tuple[dict[str, Any], tbscope.Logdir]:
    lg = tbscope.scan(logdir, cache=cache, **kw)
    snap = snapshot(lg)
    return snap, lg


def generations(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name.startswith("gen-"))


def current(cache: Path) -> str:
    return (cache / "CURRENT").read_text().strip()


def frame_records(payloads: list[bytes]) -> bytes:
    from tfrecord_util import frame

    return b"".join(frame(p) for p in payloads)


def scalar_events(tag: str, steps: range) -> list[bytes]:
    """Serialized Events of one scalar tag, built with tensorboardX's protobuf classes, dated
    after everything in the fixtures (as records appended by a live writer are)."""
    from tensorboardX.proto import event_pb2

    wall0 = time.time() + 3600
    out = []
    for s in steps:
        ev = event_pb2.Event(wall_time=wall0 + s, step=s)
        ev.summary.value.add(tag=tag, simple_value=0.5 * s)
        out.append(ev.SerializeToString())
    return out


def event_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.iterdir() if "tfevents" in p.name and p.is_file())


@pytest.fixture
def logdir(tbx_logdir: Path, tmp_path: Path) -> Path:
    """A private copy of the tensorboardX logdir (all kinds, nested runs, multi-file runs)."""
    dest = tmp_path / "logdir"
    shutil.copytree(tbx_logdir, dest)
    return dest


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


# --------------------------------------------------------------------------------------------
# warm == cold


def test_warm_equals_cold_every_table(any_logdir: Path, tmp_path: Path) -> None:
    d = tmp_path / "cache"
    truth = cold(any_logdir)
    first, lg1 = warm(any_logdir, d)
    assert lg1.cache_info is not None and lg1.cache_info.status == "miss" and lg1.cache_info.written
    assert_same(truth, first)
    second, lg2 = warm(any_logdir, d)
    info = lg2.cache_info
    # (A hit may still write a generation: directories listed right after they changed are
    # listed again, and the settled listing is kept.)
    assert info is not None and info.status == "hit" and not info.warnings
    assert_same(truth, second)
    # Nothing was read from the logdir the second time.
    st = tbscope.scan(any_logdir, cache=d).reload()
    assert (st.files_read, st.bytes_read) == (0, 0)


FILTERS: list[dict[str, Any]] = [
    dict(runs="train*"),
    dict(runs=["hp/*", "eval/*"]),
    dict(tags="loss*"),
    dict(tags=["*dup*", "notes"]),
    dict(kinds=["scalars", "text"]),
    dict(kinds="hparams"),
    dict(steps=(2, 10)),
    dict(steps=(None, 3), tags="loss*"),
    dict(restarts="preempt"),
    dict(restarts="preempt", steps=(2, 40)),
    dict(runs="nothing-matches"),
]


@pytest.mark.parametrize("kw", FILTERS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_filtered_scans_answered_from_the_unfiltered_cache(
    tbx_logdir: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    d = tmp_path / "cache"
    tbscope.scan(tbx_logdir, cache=d).runs  # the cache holds everything
    snap, lg = warm(tbx_logdir, d, **kw)
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(cold(tbx_logdir, **kw), snap)


@pytest.mark.parametrize(
    "kw", [dict(runs="scalars"), dict(tags="*loss*"), dict(kinds=["tensors", "histograms"]), dict(restarts="preempt")]
)
def test_filtered_scans_tensorboard_writer(tb_logdir: Path, tmp_path: Path, kw: dict[str, Any]) -> None:
    d = tmp_path / "cache"
    tbscope.scan(tb_logdir, cache=d).runs
    assert_same(cold(tb_logdir, **kw), warm(tb_logdir, d, **kw)[0])


def test_step_range_filters_rows_of_the_whole_read(tb_logdir: Path, tmp_path: Path) -> None:
    """With a step range the cache selects rows of the full read: kinds are decided by the
    series' first metadata even where it lies outside the range (a read with the range pushed
    down only sees metadata inside it; docs/cache.md)."""
    d = tmp_path / "cache"
    full = tbscope.scan(tb_logdir)
    lg = tbscope.scan(tb_logdir, cache=d, steps=(2, 10))
    for k in ("scalars", "tensors", "histograms", "text"):
        want = getattr(full, k)().to_arrow()
        want = want.filter(
            pa.compute.and_(pa.compute.greater_equal(want["step"], 2), pa.compute.less(want["step"], 10))
        )
        got = getattr(lg, k)().to_arrow()
        assert [_norm(r) for r in got.to_pylist()] == [_norm(r) for r in want.to_pylist()], k
    ser = lg.series().to_pandas().set_index(["run", "tag"])
    fser = full.series().to_pandas().set_index(["run", "tag"])
    sc = full.scalars().to_pandas()
    sc = sc[(sc.step >= 2) & (sc.step < 10)]
    for (run, tag), n in sc.groupby(["run", "tag"], observed=True).size().items():
        assert ser.loc[(run, tag), "points"] == n
        assert ser.loc[(run, tag), "kind"] == fser.loc[(run, tag), "kind"] == "scalars"


def test_provenance_from_a_cache_without_it_rebuilds_it(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    snap, lg = warm(logdir, cache, provenance=True)
    assert lg.cache_info is not None and lg.cache_info.status == "miss" and not lg.cache_info.warnings
    assert_same(cold(logdir, provenance=True), snap)
    # A cache with provenance serves scans without it (the columns are left out).
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(cold(logdir), snap)


def test_blobs_are_read_from_the_event_files(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    lg = tbscope.scan(logdir, cache=cache)
    want = tbscope.scan(logdir).images().to_pandas(blobs=True)
    got = lg.images().to_pandas(blobs=True)
    assert list(got["data"]) == list(want["data"]) and len(want) > 0


# --------------------------------------------------------------------------------------------
# changes to the logdir


def test_appended_bytes_are_read_alone(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    f = event_files(logdir / "hp" / "trial_0")[-1]
    data = frame_records(scalar_events("appended", range(100, 110)))
    with open(f, "ab") as fh:
        fh.write(data)
    lg = tbscope.scan(logdir, cache=cache)
    st = lg.reload()
    info = lg.cache_info
    assert info is not None and info.status == "updated" and info.written and info.runs_dropped == 0
    assert (st.files_read, st.bytes_read) == (1, len(data))
    assert_same(cold(logdir), snapshot(lg))
    sc = lg.scalars().to_pandas()
    got = sc[sc.tag == "appended"]
    assert list(got["step"]) == list(range(100, 110)) and list(got["value"]) == [0.5 * s for s in range(100, 110)]
    # The next open is a hit again, from the new generation.
    snap, lg2 = warm(logdir, cache)
    assert lg2.cache_info is not None and lg2.cache_info.status == "hit"
    assert_same(cold(logdir), snap)


def test_new_run_and_new_last_file(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    (logdir / "aaa_new").mkdir()
    (logdir / "aaa_new" / "events.out.tfevents.1.x").write_bytes(frame_records(scalar_events("x", range(5))))
    er = logdir / "eval" / "deep" / "er"
    (er / "events.out.tfevents.9999999999.z").write_bytes(frame_records(scalar_events("late", range(3))))
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "updated" and lg.cache_info.runs_dropped == 0
    assert_same(cold(logdir), snap)


def test_no_event_files_line_lasts_while_there_are_none(tmp_path: Path) -> None:
    """The report's "no event files under LOGDIR" line goes once files appear, through
    `reload()` with or without a cache, and a cached open says exactly what a scan without a
    cache says at every step (a hit, a filter that selects nothing, a run deleted again)."""
    root, cache = tmp_path / "logdir", tmp_path / "cache"
    root.mkdir()

    def lines(lg: tbscope.Logdir) -> list[str]:
        return [str(p) for p in lg.report.problems]

    none = lines(tbscope.scan(root))
    assert len(none) == 1 and "no event files" in none[0]
    plain, through = tbscope.scan(root), tbscope.scan(root, cache=cache)
    assert lines(plain) == lines(through) == none
    hit = tbscope.scan(root, cache=cache)
    assert lines(hit) == none and hit.cache_info is not None and hit.cache_info.status == "hit"

    (root / "run").mkdir()
    (root / "run" / "events.out.tfevents.1.x").write_bytes(frame_records(scalar_events("x", range(3))))
    plain.reload()
    through.reload()
    assert lines(plain) == lines(through) == lines(tbscope.scan(root)) == []
    for _ in range(2):  # the generation `through` wrote, then the one this open writes
        assert lines(tbscope.scan(root, cache=cache)) == []
    nothing = lines(tbscope.scan(root, runs="nothing*"))
    assert len(nothing) == 1 and lines(tbscope.scan(root, runs="nothing*", cache=cache)) == nothing

    shutil.rmtree(root / "run")
    assert lines(tbscope.scan(root, cache=cache)) == lines(tbscope.scan(root)) == none


def _mutations() -> dict[str, Any]:
    def replaced(logdir: Path) -> None:
        # Another file under the same name: a new inode, larger than the old one, sharing no
        # prefix with it. Read as an append it would keep the old rows and skip the start.
        f = event_files(logdir / "hp" / "trial_1")[0]
        new = f.with_name(f.name + ".new")
        new.write_bytes(frame_records(scalar_events("replaced", range(int(f.stat().st_size // 20) + 5))))
        os.replace(new, f)

    def truncated(logdir: Path) -> None:
        f = event_files(logdir / "train")[0]
        with open(f, "r+b") as fh:
            fh.truncate(f.stat().st_size // 2)

    def deleted_file(logdir: Path) -> None:
        event_files(logdir)[0].unlink()  # the root run keeps its second file

    def deleted_run(logdir: Path) -> None:
        shutil.rmtree(logdir / "eval")

    def earlier_file_grew(logdir: Path) -> None:
        # The root run has two files; rows appended to the first belong before the second's.
        with open(event_files(logdir)[0], "ab") as fh:
            fh.write(frame_records(scalar_events("loss/train", range(1000, 1003))))

    def new_file_sorts_first(logdir: Path) -> None:
        er = logdir / "eval" / "deep" / "er"
        (er / "events.out.tfevents.0000000001.early").write_bytes(frame_records(scalar_events("early", range(4))))

    def run_became_empty(logdir: Path) -> None:
        for f in event_files(logdir / "hp" / "trial_0"):
            f.unlink()

    return {
        "replaced": replaced,
        "truncated": truncated,
        "deleted_file": deleted_file,
        "deleted_run": deleted_run,
        "earlier_file_grew": earlier_file_grew,
        "new_file_sorts_first": new_file_sorts_first,
        "run_became_empty": run_became_empty,
    }


@pytest.mark.parametrize("mutation", list(_mutations()))
def test_invalidation(logdir: Path, cache: Path, mutation: str) -> None:
    before = cold(logdir)
    assert_same(before, warm(logdir, cache)[0])
    _mutations()[mutation](logdir)
    truth = cold(logdir)
    assert (
        truth["scalars"] != before["scalars"]
        or truth["runs"] != before["runs"]
        or truth["run_info"] != before["run_info"]
    )
    snap, lg = warm(logdir, cache)
    info = lg.cache_info
    assert info is not None and info.status == "updated" and info.runs_dropped == 1 and not info.warnings
    assert_same(truth, snap)
    # and the generation written after the change serves the next scan as it is
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(truth, snap)


def test_touched_file_is_not_a_change_of_content(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    f = event_files(logdir / "train")[0]
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.runs_dropped == 0
    assert_same(cold(logdir), snap)


def test_reload_through_the_cache(logdir: Path, cache: Path) -> None:
    lg = tbscope.scan(logdir, cache=cache)
    n = len(lg.scalars())
    f = event_files(logdir / "hp" / "trial_0")[-1]
    with open(f, "ab") as fh:
        fh.write(frame_records(scalar_events("live", range(7))))
    st = lg.reload()
    assert st.rows == 7 and len(lg.scalars()) == n + 7
    assert lg.cache_info is not None and lg.cache_info.written
    assert_same(cold(logdir), snapshot(lg))
    assert_same(cold(logdir), warm(logdir, cache)[0])


def test_generations_are_collected_and_segments_compacted(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs

    def scalar_files() -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in (cache / current(cache)).glob("*.scalars.arrow")}

    (base,) = scalar_files().items()
    f = event_files(logdir / "hp" / "trial_0")[-1]
    for i in range(12):
        with open(f, "ab") as fh:
            fh.write(frame_records(scalar_events("grow", range(i, i + 1))))
        snap, lg = warm(logdir, cache)
        assert lg.cache_info is not None and lg.cache_info.status == "updated"
        # The generation just published and the one before it, nothing else.
        assert len(generations(cache)) <= 2
        assert not [p for p in cache.iterdir() if p.name.startswith("tmp-")]
        # (facts.arrow and stats.arrow are the generation's stored tables, not segments.)
        segments = {
            p.name.split(".")[0]
            for p in (cache / current(cache)).iterdir()
            if p.suffix == ".arrow" and p.stem not in ("facts", "stats")
        }
        assert len(segments) <= 8
        # The bulk of the rows stays in its first file, hard-linked from generation to
        # generation: only new rows (and, past 8 segments, the small ones) are written.
        assert scalar_files()[base[0]] == base[1]
        assert_same(cold(logdir), snap)


# --------------------------------------------------------------------------------------------
# a cache that cannot be used is a warning, never an error


def _damage_manifest(d: Path) -> None:
    m = d / current(d) / "manifest"
    b = bytearray(m.read_bytes())
    b[len(b) // 2] ^= 0xFF
    m.write_bytes(bytes(b))


def _truncate_segment(d: Path) -> None:
    seg = next(p for p in (d / current(d)).iterdir() if p.name.endswith(".scalars.arrow"))
    with open(seg, "r+b") as fh:
        fh.truncate(seg.stat().st_size // 2)


def _dangling_current(d: Path) -> None:
    (d / "CURRENT").write_text("gen-does-not-exist\n")


def _garbage_current(d: Path) -> None:
    (d / "CURRENT").write_text("../../etc\n")


@pytest.mark.parametrize(
    "damage",
    [_damage_manifest, _truncate_segment, _dangling_current, _garbage_current],
    ids=lambda f: f.__name__.strip("_"),
)
def test_unusable_cache_is_read_again_and_rewritten(
    logdir: Path, cache: Path, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tbscope.scan(logdir, cache=cache).runs
    damage(cache)
    with caplog.at_level(logging.WARNING, logger="tbscope.cache"):
        snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "miss" and lg.cache_info.written
    assert any("not used" in r.getMessage() for r in caplog.records), caplog.text
    assert_same(cold(logdir), snap)
    assert warm(logdir, cache)[1].cache_info.status == "hit"  # type: ignore[union-attr]


def test_options_that_change_content_invalidate(logdir: Path, cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    tbscope.scan(logdir, cache=cache).runs
    with caplog.at_level(logging.WARNING, logger="tbscope.cache"):
        snap, lg = warm(logdir, cache, verify=False)
    assert lg.cache_info is not None and lg.cache_info.status == "miss"
    assert "verify=true" in caplog.text
    assert_same(cold(logdir, verify=False), snap)


def test_unwritable_cache_dir_is_a_warning(logdir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="tbscope.cache"):
        snap, lg = warm(logdir, blocker / "cache")
    assert lg.cache_info is not None and not lg.cache_info.written and "not written" in caplog.text
    assert_same(cold(logdir), snap)


# --------------------------------------------------------------------------------------------
# processes: two writers at once, a writer killed mid-write


def _scan_in_child(logdir: str, d: str, stall: str, out: Any) -> None:
    os.environ["TBSCOPE_CACHE_TEST_STALL"] = stall
    lg = tbscope.scan(logdir, cache=d)
    n = len(lg.scalars())
    info = lg.cache_info
    out.put((n, info.status if info else None, info.written if info else None, info.warnings if info else None))


def test_two_processes_writing_at_once(logdir: Path, cache: Path) -> None:
    tbscope.scan(logdir, cache=cache).runs
    with open(event_files(logdir / "hp" / "trial_0")[-1], "ab") as fh:
        fh.write(frame_records(scalar_events("both", range(3))))
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    # Both finish writing their generation, wait, then publish one after the other.
    procs = [ctx.Process(target=_scan_in_child, args=(str(logdir), str(cache), "written:0.5", out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    n = len(tbscope.scan(logdir).scalars())
    assert results == [(n, "updated", True, ())] * 2
    assert len(generations(cache)) <= 2 and not [p for p in cache.iterdir() if p.name.startswith("tmp-")]
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "hit"
    assert_same(cold(logdir), snap)


CHILD = """
import sys, tbscope
tbscope.scan(sys.argv[1], cache=sys.argv[2]).runs
"""


def _start_and_kill_at(logdir: Path, cache: Path, phase: str) -> None:
    env = dict(os.environ, TBSCOPE_CACHE_TEST_STALL=f"{phase}:60")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(logdir), str(cache)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = (
                [p for p in cache.glob("tmp-*/manifest")]
                if phase == "written"
                else [p for p in cache.glob("gen-*") if not (cache / "CURRENT").exists() or p.name != current(cache)]
            )
            if done:
                break
            assert proc.poll() is None, "the writer exited before reaching the stall"
            time.sleep(0.02)
        else:
            pytest.fail("the writer never reached the stall")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


@pytest.mark.parametrize("phase", ["written", "renamed"])
def test_writer_killed_leaves_the_old_generation(logdir: Path, cache: Path, phase: str) -> None:
    tbscope.scan(logdir, cache=cache).runs
    old = current(cache)
    with open(event_files(logdir / "hp" / "trial_0")[-1], "ab") as fh:
        fh.write(frame_records(scalar_events("killed", range(3))))
    _start_and_kill_at(logdir, cache, phase)
    assert current(cache) == old  # the killed writer never published
    snap, lg = warm(logdir, cache)
    info = lg.cache_info
    assert info is not None and info.status == "updated" and not info.warnings
    assert_same(cold(logdir), snap)
    # Its leftovers went when the next writer came along.
    assert not [p for p in cache.iterdir() if p.name.startswith("tmp-")]
    assert len(generations(cache)) <= 2 and old in generations(cache)


def test_first_writer_killed_leaves_no_cache(logdir: Path, cache: Path) -> None:
    cache.mkdir()
    _start_and_kill_at(logdir, cache, "written")
    assert not (cache / "CURRENT").exists()
    snap, lg = warm(logdir, cache)
    assert lg.cache_info is not None and lg.cache_info.status == "miss" and not lg.cache_info.warnings
    assert_same(cold(logdir), snap)
    assert not [p for p in cache.iterdir() if p.name.startswith("tmp-")]


# --------------------------------------------------------------------------------------------
# where the cache lives


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1) for p in root.rglob("*"))


def test_default_cache_dir_is_outside_the_logdir(logdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBSCOPE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    before = _tree(logdir)
    lg = tbscope.scan(logdir, cache=True)
    lg.runs
    assert _tree(logdir) == before
    info = lg.cache_info
    assert info is not None and info.dir == cache_dir(logdir)
    assert Path(info.dir).parent == tmp_path / "home" / ".cache" / "tbscope" and (Path(info.dir) / "CURRENT").is_file()
    # keyed by the resolved path: a symlink to the logdir shares the cache
    link = tmp_path / "link"
    link.symlink_to(logdir)
    assert cache_dir(link) == cache_dir(logdir)
    assert tbscope.scan(link, cache=True).cache_info is not None
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert Path(cache_dir(logdir)).parent == tmp_path / "elsewhere"
    assert clear(logdir) is False
    tbscope.scan(logdir, cache=True).runs
    assert clear(logdir) is True and not Path(cache_dir(logdir)).exists()


def test_default_inside_the_logdir_is_refused(
    logdir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(logdir / ".cache"))
    with caplog.at_level(logging.WARNING, logger="tbscope.cache"):
        assert resolve(logdir, True) is None
        lg = tbscope.scan(logdir, cache=True)
        lg.runs
    assert lg.cache_info is None and "inside the logdir" in caplog.text
    assert not (logdir / ".cache").exists()
    # Given explicitly, it may go there; it holds no event files, so it is not a run.
    snap, lg = warm(logdir, logdir / ".tbscope-cache")
    assert (logdir / ".tbscope-cache" / "CURRENT").is_file()
    assert_same(cold(logdir), snap)
    assert warm(logdir, logdir / ".tbscope-cache")[1].cache_info.status == "hit"  # type: ignore[union-attr]


def test_bad_cache_argument() -> None:
    with pytest.raises(TypeError, match="cache= takes"):
        resolve(".", 3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_cache_options(logdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner
    from tbscope._cli.main import main

    root = tmp_path / "root"
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(root))
    monkeypatch.delenv("TBSCOPE_CACHE", raising=False)
    runner = CliRunner()

    def run(*args: str, env: dict[str, str] | None = None) -> str:
        res = runner.invoke(main, list(args), env=env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    plain = {cmd: run(cmd, str(logdir), "--format", "csv") for cmd in ("ls", "tags", "summary")}
    assert not root.exists()  # off by default
    explicit = tmp_path / "explicit"
    for cmd in ("ls", "tags", "summary"):
        assert run(cmd, str(logdir), "--format", "csv", "--cache-dir", str(explicit)) == plain[cmd]
        assert (explicit / "CURRENT").is_file()
    for cmd in ("ls", "tags", "summary"):
        assert run(cmd, str(logdir), "--format", "csv", "--cache") == plain[cmd]
    assert (Path(cache_dir(logdir)) / "CURRENT").is_file()
    shutil.rmtree(root)
    run("ls", str(logdir), "--format", "csv", env={"TBSCOPE_CACHE": "1"})
    assert (Path(cache_dir(logdir)) / "CURRENT").is_file()
    shutil.rmtree(root)
    run("ls", str(logdir), "--format", "csv", "--no-cache", env={"TBSCOPE_CACHE": "1"})
    assert not root.exists()
    pytest.importorskip("duckdb")
    q = "SELECT run, count(*) AS n FROM scalars GROUP BY run ORDER BY run"
    assert run("sql", str(logdir), q, "--format", "csv", "--cache") == run("sql", str(logdir), q, "--format", "csv")
    out = tmp_path / "x.csv"
    run("export", str(logdir), "-o", str(out), "--cache", "--format", "json")
    cached_csv = out.read_text()
    out.unlink()
    run("export", str(logdir), "-o", str(out), "--format", "json")
    assert out.read_text() == cached_csv
