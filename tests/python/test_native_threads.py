"""Readers' state freed on one long-lived thread per process (not a thread per reader; a forked
child starts its own; inline when no thread can start). Each scenario runs in a fresh
interpreter, so that other tests' threads do not count. (What a load's worker pools do when the
system refuses threads: crates/tbscope-core/tests/split.rs.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")

#: A thread stack no address space can hold: every Rust thread the child tries to start fails
#: (std reads RUST_MIN_STACK once, before its first thread).
NO_THREADS = {"RUST_MIN_STACK": str(1 << 47)}

PRELUDE = """
import json, os, sys, time
from pathlib import Path
from tbscope import _core

def threads():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])

def names():
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            out.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:
            pass
    return sorted(out)

def open_load_drop(path, **kw):
    r = _core.NativeReader(path, **kw)
    got = r.load()
    del r
    return got
"""


def _run(body: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Runs ``body`` (after PRELUDE) in a fresh interpreter; it prints one JSON object."""
    code = PRELUDE + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dropping_readers_leaves_the_thread_count_alone(tbx_logdir):
    got = _run(
        """
        path = sys.argv[1]
        open_load_drop(path, threads=1)  # the freeing thread starts here, once
        time.sleep(0.5)  # the load's own thread ends
        before = threads()
        most = before
        # Opened, not loaded: a load runs on a thread of its own, which would count here.
        for _ in range(1000):
            r = _core.NativeReader(path, threads=1)
            runs = r.run_names()
            del r
            most = max(most, threads())
        print(json.dumps({"runs": runs, "before": before, "most": most, "after": threads(),
                          "names": names()}))
        """,
        str(tbx_logdir),
    )
    assert got["most"] == got["before"], got
    assert got["after"] == got["before"], got
    assert got["names"].count("tbscope-free") == 1, got


def test_a_forked_child_frees_on_its_own_thread(tbx_logdir):
    got = _run(
        """
        import warnings
        path = sys.argv[1]
        first = open_load_drop(path, threads=1)
        r, w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
            pid = os.fork()
        if pid == 0:
            ok = all(open_load_drop(path, threads=1) == first for _ in range(20))
            os.write(w, json.dumps({"ok": ok, "names": names()}).encode())
            os._exit(0)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        child = json.loads(os.read(r, 1 << 16))
        print(json.dumps({"status": status, "child": child, "parent": names()}))
        """,
        str(tbx_logdir),
    )
    assert got["status"] == 0, got
    assert got["child"]["ok"], got
    # The child has none of its parent's threads: it started a freeing thread of its own.
    assert got["child"]["names"].count("tbscope-free") == 1, got
    assert got["parent"].count("tbscope-free") == 1, got


def test_readers_are_freed_inline_when_no_thread_can_start(tbx_logdir):
    # No load either (it runs on a thread of its own): readers opened and dropped.
    got = _run(
        """
        path = sys.argv[1]
        before = threads()
        for _ in range(50):
            r = _core.NativeReader(path, threads=1)
            runs = r.run_names()
            del r
        print(json.dumps({"runs": runs, "before": before, "after": threads(), "names": names()}))
        """,
        str(tbx_logdir),
        env=NO_THREADS,
    )
    assert got["after"] == got["before"], got
    assert "tbscope-free" not in got["names"], got
