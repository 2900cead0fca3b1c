"""SummaryWriter durability: SIGKILL at random moments, SIGTERM, interpreter exit, fork, a full
disk and a directory deleted under a running writer.

Each scenario runs the writer in a child (a subprocess, or os.fork for the fork rules) and
judges the files afterwards with tbscope and with TensorBoard's own EventAccumulator.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import tbscope
from tbscope import _core

if not hasattr(_core, "EventWriter"):
    pytest.skip("the native EventWriter is not built yet (make build)", allow_module_level=True)

from tbscope import SummaryWriter
from tfrecord_util import child_result

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:tensorboard.*")


def event_files(d) -> list[Path]:
    return sorted(p for p in Path(d).rglob("*") if "tfevents" in p.name and p.is_file())


def tb_steps(run_dir, tag="x") -> list[tuple[int, float]]:
    """(step, value) of a scalar tag as TensorBoard's EventAccumulator reads the run."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(run_dir), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE, purge_orphaned_data=False)
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def tbscope_steps(path, tag="x") -> tuple[list[tuple[int, float]], tbscope.Report]:
    lg = tbscope.scan(path)
    df = lg.scalars().to_pandas()
    df = df[df["tag"] == tag]
    return list(zip(df["step"].tolist(), df["value"].tolist())), lg.report


def run_child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------------------------
# SIGKILL at random moments

CRASH_CHILD = r"""
import sys, time, tbscope
logdir, every, max_queue = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
w = tbscope.SummaryWriter(logdir, flush_secs=3600, max_queue=max_queue)
import numpy, tbscope._summary  # what add_histogram loads on first use: before the clock starts
print("ready", flush=True)
step = 0
while True:
    w.add_scalar("x", step * 0.5, step)
    if step % 5 == 0:
        w.add_histogram("h", [float(step), step + 1.0, -3.0], step)  # records of other sizes
    if step % every == every - 1:
        w.flush()
        print(step, flush=True)   # only after flush() returned
    step += 1
    if step % 20 == 0:
        time.sleep(0.001)  # a training loop's pace: keeps the files small enough to check fast
"""


def test_sigkill_at_random_moments_keeps_every_flushed_point(tmp_path):
    rng = random.Random(20240611)
    flushed_trials = 0
    for trial in range(10):
        every = rng.choice([1, 7, 100, 1000])
        max_queue = rng.choice([1, 10, 100000])
        d = tmp_path / f"trial{trial}"
        p = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, str(d), str(every), str(max_queue)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(rng.uniform(0.0, 0.3))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        printed = p.stdout.read().split()
        p.stdout.close()
        p.stderr.close()
        flushed = int(printed[-1]) if printed else -1
        label = f"trial {trial} (flush every {every}, max_queue {max_queue}, last flushed step {flushed})"

        got, report = tbscope_steps(d)
        assert report.ok, f"{label}: {report}"
        assert all(p.severity in ("truncated",) for p in report.problems), f"{label}: {report}"
        # a prefix of what was logged, in order, nothing missing or altered up to the last
        # flushed point (and possibly more: the writer thread may have written ahead)
        assert got == [(s, s * 0.5) for s in range(len(got))], label
        assert len(got) >= flushed + 1, label
        assert tb_steps(d) == got, label
        flushed_trials += flushed >= 0
    assert flushed_trials >= 5, "the children were killed before they flushed anything: the test proved nothing"


# --------------------------------------------------------------------------------------------
# SIGTERM and interpreter exit

WRITE_THEN_WAIT = r"""
import signal, sys, time
def handler(signum, frame):
    print("their handler ran", flush=True)
    sys.exit(3)
if sys.argv[2] == "before-import":
    signal.signal(signal.SIGTERM, handler)
import tbscope
if sys.argv[2] == "chain":
    signal.signal(signal.SIGTERM, handler)
w = tbscope.SummaryWriter(sys.argv[1], flush_secs=3600, max_queue=10**6)
for i in range(1000):
    w.add_scalar("x", float(i), i)
print("written", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("previous", ["default", "chain", "before-import"])
def test_sigterm_flushes(tmp_path, previous):
    p = subprocess.Popen(
        [sys.executable, "-c", WRITE_THEN_WAIT, str(tmp_path), previous],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "written", p.stderr.read()
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    out, err = p.stdout.read(), p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    if previous == "default":
        assert p.returncode == -signal.SIGTERM, err  # still dies of SIGTERM, as without us
    else:
        assert p.returncode == 3 and "their handler ran" in out, err  # and theirs still runs
    assert tb_steps(tmp_path) == [(i, float(i)) for i in range(1000)]


IMPORT_THEN_WRITE = r"""
import atexit, json, os, signal, sys
registered = []
_register = atexit.register
def register(f, *a, **k):
    registered.append(("atexit", getattr(f, "__module__", None)))
    return _register(f, *a, **k)
atexit.register = register
_at_fork = os.register_at_fork
def at_fork(**kw):
    registered.extend(("fork", getattr(f, "__module__", None)) for f in kw.values())
    return _at_fork(**kw)
os.register_at_fork = at_fork
handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

import tbscope, tbscope._cli, tbscope._export, tbscope._query, tbscope._clean, tbscope.compat
tbscope.read_scalars(sys.argv[1])
def ours():
    return [r for r in registered if (r[1] or "").startswith("tbscope")]
same = all(signal.getsignal(s) == h for s, h in handlers.items())
print(json.dumps({"after_import": ours(), "signals_unchanged": same}), flush=True)
w = tbscope.SummaryWriter(sys.argv[1] + "/w")
w.add_scalar("x", 1.0, 1)
w2 = tbscope.SummaryWriter(sys.argv[1] + "/w2")
print(json.dumps({"after_writers": ours(), "sigterm_changed": signal.getsignal(signal.SIGTERM) != handlers[signal.SIGTERM]}), flush=True)
"""


def test_import_registers_nothing_until_the_first_writer(tmp_path):
    # Before: `import tbscope` registered an atexit hook and a fork hook.
    SummaryWriter(tmp_path / "run").close()
    r = subprocess.run(
        [sys.executable, "-c", IMPORT_THEN_WRITE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    first, second = (json.loads(line) for line in r.stdout.splitlines())
    assert first == {"after_import": [], "signals_unchanged": True}
    # The first writer sets them, once (a second writer adds none).
    hooks = sorted(tuple(h) for h in second["after_writers"])
    assert hooks == sorted(
        [("atexit", "tbscope._writer.lifecycle")]
        + ([("fork", "tbscope._writer.lifecycle")] if hasattr(os, "register_at_fork") else [])
    )
    assert second["sigterm_changed"]


HELPER_THREAD = r"""
import json, os, sys, time
import numpy as np, tbscope
with tbscope.SummaryWriter(sys.argv[1]) as w:
    w.add_histogram("h", np.random.default_rng(0).standard_normal(1 << 18), 0)
    deadline = time.monotonic() + 10
    found = None
    while time.monotonic() < deadline:
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().strip() == "tbscope-histogr":
                    with open(f"/proc/self/task/{t}/sched") as f:
                        sched = f.read()
                    line = next((l for l in sched.splitlines() if l.startswith("se.slice")), None)
                    found = {"slice": int(line.split(":")[1]) if line else None,
                             "cpus": sorted(os.sched_getaffinity(int(t)))}
        if found is not None or sys.argv[2] == "off":
            break
        time.sleep(0.01)
    # Another large histogram: a tuned helper is then kept off this thread's CPU.
    w.add_histogram("h", np.random.default_rng(1).standard_normal(1 << 18), 1)
    if found is not None:
        found["cpus_after"] = sorted(os.sched_getaffinity(int(t)))
print(json.dumps({"helper": found, "all": sorted(os.sched_getaffinity(0))}))
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="the helper thread is tuned on Linux with 2+ CPUs",
)
@pytest.mark.parametrize("mode", ["tuned", "plain", "off"])
def test_histogram_helper_opt_out(tmp_path, mode):
    env = dict(os.environ)
    env.pop("TBSCOPE_HISTOGRAM_HELPER", None)
    if mode != "tuned":
        env["TBSCOPE_HISTOGRAM_HELPER"] = mode
    r = subprocess.run(
        [sys.executable, "-c", HELPER_THREAD, str(tmp_path), mode], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    if mode == "off":
        assert out["helper"] is None
        return
    helper = out["helper"]
    assert helper is not None, "no helper thread"
    if mode == "plain":
        assert helper["cpus_after"] == out["all"]  # never steered
        assert helper["slice"] != 100_000
    elif helper["slice"] is not None:  # the kernel shows slices (Linux 6.12+)
        assert helper["slice"] == 100_000
    # The values are the same whatever the helper did.
    assert len(tbscope.read_histograms(tmp_path)) == 2


EXIT_WITHOUT_CLOSE = r"""
import sys, threading, time, tbscope
w = tbscope.SummaryWriter(sys.argv[1], flush_secs=3600, max_queue=10**6)
r = tbscope.SummaryWriter(sys.argv[2], flush_secs=3600)   # a URL: uploaded at exit
for i in range(500):
    w.add_scalar("x", float(i), i)
    r.add_scalar("x", float(i), i)
# a writer made and used in another thread, never closed either
t = threading.Thread(target=lambda: tbscope.SummaryWriter(sys.argv[3]).add_scalar("x", 1.0, 1))
t.start(); t.join()
# a writer held by a daemon thread that is still running at exit: never garbage-collected,
# so only the exit hook can write its data
def hold():
    held = tbscope.SummaryWriter(sys.argv[4], flush_secs=3600, max_queue=10**6)
    held.add_scalar("x", 2.0, 2)
    ready.set()
    time.sleep(3600)
ready = threading.Event()
threading.Thread(target=hold, daemon=True).start()
ready.wait()
sys.exit(0)
"""


def test_exit_without_close_writes_everything_and_does_not_hang(tmp_path):
    pytest.importorskip("fsspec")
    url = "local://" + str(tmp_path / "remote")  # fsspec's local filesystem through a URL: the upload path
    t0 = time.monotonic()
    res = run_child(
        EXIT_WITHOUT_CLOSE, str(tmp_path / "local"), url, str(tmp_path / "thread"), str(tmp_path / "held"), timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t0 < 30
    assert tb_steps(tmp_path / "local") == [(i, float(i)) for i in range(500)]
    assert tb_steps(tmp_path / "remote") == [(i, float(i)) for i in range(500)]
    assert tb_steps(tmp_path / "thread") == [(1, 1.0)]
    assert tb_steps(tmp_path / "held") == [(2, 2.0)]
    assert res.stderr == ""


# --------------------------------------------------------------------------------------------
# fork


def forked(child) -> tuple[bytes, int]:
    """Run ``child()`` in a forked child; return what it reported and its exit status."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "fork() of a multi-threaded process"
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            os.write(w, (child() or "ok").encode())
        except BaseException as e:
            os.write(w, repr(e).encode()[:1000])
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return child_result(pid, r)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_child_that_never_logs_leaves_nothing(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    for i in range(50):
        w.add_scalar("x", float(i), i)  # queued in the parent, not yet written

    def child():
        w.flush()
        w.close()  # must neither flush nor close the parent's writer
        from tbscope._writer.lifecycle import _close_all_at_exit

        _close_all_at_exit()  # what a normal exit of the child runs

    answer, status = forked(child)
    assert answer == b"ok" and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    (f,) = event_files(tmp_path)  # no file of the child's
    assert tb_steps(tmp_path) == []  # the child did not write the parent's queued points
    w.close()
    assert event_files(tmp_path) == [f]
    assert tb_steps(tmp_path) == [(i, float(i)) for i in range(50)]  # each exactly once


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_child_that_logs_gets_its_own_file(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    stop = threading.Event()

    def hammer():  # the parent keeps logging from a thread while we fork
        i = 0
        while not stop.is_set():
            w.add_scalar("parent", float(i), i)
            i += 1
            if i % 100 == 0:
                time.sleep(0.0005)

    t = threading.Thread(target=hammer)
    t.start()
    time.sleep(0.05)

    def child():
        for i in range(5):
            w.add_scalar("child", float(i), i)
        w.close()
        return str(os.getpid())

    answer, status = forked(child)
    stop.set()
    t.join()
    w.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, answer
    child_pid = answer.decode()
    files = event_files(tmp_path)
    assert len(files) == 2
    (mine,) = [f for f in files if f.name.split(".")[-2] == child_pid]  # <host>.<pid>.<n>
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    tags = {v.tag for ev in LegacyEventFileLoader(str(mine)).Load() if ev.HasField("summary") for v in ev.summary.value}
    assert tags == {"child"}  # nothing of the parent's in the child's file
    parent = tb_steps(tmp_path, "parent")
    assert [s for s, _ in parent] == list(range(len(parent)))  # every parent point once, in order
    assert tb_steps(tmp_path, "child") == [(i, float(i)) for i in range(5)]


# --------------------------------------------------------------------------------------------
# Write errors: a full disk (simulated with RLIMIT_FSIZE) and a deleted directory

DISK_FULL_CHILD = r"""
import json, resource, signal, sys, tbscope
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writes past the limit then fail with EFBIG
w = tbscope.SummaryWriter(sys.argv[1], flush_secs=3600, max_queue=1)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, hard))
accepted, errors = [], []
for i in range(3000):
    try:
        w.add_scalar("x", i * 0.5, i)
        accepted.append(i)
    except OSError as e:
        errors.append([e.errno, str(e)])
try:
    w.flush()
except OSError as e:
    errors.append([e.errno, str(e)])
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))   # room again
w.flush()
w.close()
print(json.dumps({"accepted": accepted, "errors": errors, "file": w.files[0]}))
"""


def test_full_disk_raises_and_keeps_everything(tmp_path):
    res = run_child(DISK_FULL_CHILD, str(tmp_path))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["errors"], "the write failure was never reported"
    import errno

    for num, msg in out["errors"]:
        assert num == errno.EFBIG and out["file"] in msg, msg  # errno and path reach the user
    got, report = tbscope_steps(tmp_path)
    assert report.ok and not report.problems, str(report)  # no torn record left in the file
    accepted = set(out["accepted"])
    steps = [s for s, _ in got]
    assert accepted <= set(steps)  # nothing accepted was dropped
    assert steps == sorted(set(steps)) and all(v == s * 0.5 for s, v in got)
    assert tb_steps(tmp_path) == got


def test_deleted_directory_is_reported_and_recreated(tmp_path):
    d = tmp_path / "run"
    w = SummaryWriter(d, flush_secs=3600, max_queue=10**6)
    w.add_scalar("x", 0.0, 0)
    w.flush()
    shutil.rmtree(d)
    for i in range(1, 11):
        w.add_scalar("x", float(i), i)
    seen = []
    for i in range(5):  # the error surfaces on a call after the writer notices
        try:
            w.flush()
            w.add_scalar("y", 1.0, i)
        except FileNotFoundError as e:
            seen.append(str(e))
    w.close()
    assert seen and str(d) in seen[0], seen
    assert [s for s, _ in tb_steps(d)] == list(range(1, 11))  # queued points in the new file
    assert len(event_files(d)) == 1
