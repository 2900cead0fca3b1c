"""The incremental cache (issue #4): cold read against warm open, measured in fresh processes.

Three scenarios, each timed in-process after imports, in a fresh interpreter per run (the median
of --repeat is reported), with a warm page cache:

1. The main corpus (10M scalar events): ``tbscope.scan(logdir, threads=N)`` +
   ``scalars().to_arrow()`` without a cache ("cold"), with an empty cache directory ("miss": the
   cold read plus writing the cache) and with the cache written ("warm"). Rows are checked against
   the generator's formula, like every other tbscope row.
2. A logdir of 100,000 runs x 100 scalar events (``manyruns.py``): the CLI functions ``tbscope
   ls LOGDIR --format csv`` and ``tbscope summary LOGDIR --format csv`` called in-process
   (``tbscope._cli.main.main([...], standalone_mode=False)``, stdout to a file), without and with
   ``--cache-dir``; warm output must equal cold output byte for byte. The read alone
   (``scan(...).reload()`` + ``run_info()`` + ``series()``) is timed too, to show how much of a
   command is reading and how much is the command's own work (building and printing 100,000 rows).
   Then one run is appended to and ``summary`` run again through the cache, on a hard-linked copy
   of the logdir (``--cache-root`` holds it; the corpus itself is never written).
3. ``Logdir.reload()`` on the many-runs logdir (a hard-linked copy), in one process after a first
   read, after each of: nothing changed, one run appended to, a run added, a run removed; without
   and with a cache (warm, state decoded, writes deferred, as ``tbscope serve`` has it). CPU
   (user + sys of the process) and wall, median of ``--repeat`` rounds.

    .venv/bin/python bench/cachebench.py                     # every scenario, printed as markdown
    .venv/bin/python bench/run.py --only cache               # the same inside the main report
    .venv/bin/python bench/cachebench.py --many-runs 2000    # a small many-runs logdir
    .venv/bin/python bench/cachebench.py --reload-only       # scenario 3 alone
    .venv/bin/python bench/cachebench.py --vs OTHER/bin/python --repeat 9   # A/B of two builds
    .venv/bin/python bench/cachebench.py --vs A/bin/python --vs SAME/bin/python --many-runs 0
        # A/B and, interleaved with it, A/A (SAME: this build in another venv, or a symlink to
        # this venv's directory): the spread of a build against itself
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import warm_page_cache

HERE = Path(__file__).resolve()
TARGET_OPEN = 5.0  # warm open of the main corpus at least this many times faster than a cold read
TARGET_CLI = 10.0  # warm ls/summary on 100,000 runs at least this many times faster than cold
TARGET_APPEND = 1.0  # seconds: one run of 100,000 appended to, then `tbscope summary` again
TARGET_COLD_SUMMARY = 4.0  # issue 15: cold `tbscope summary` on 100,000 runs under this many seconds
TARGET_COLD_RSS = 1e9  # ... with a peak resident memory under 1 GB


# --------------------------------------------------------------------------------------------
# One measurement (runs in a fresh interpreter: `cachebench.py --task JSON OUT`)


def _task(task: dict[str, Any]) -> dict[str, Any]:
    import pandas  # noqa: F401 - every tool's imports come before the clock starts
    import pyarrow  # noqa: F401
    import tbscope

    try:
        from tbscope._cli.main import main as cli_main
    except ImportError:  # a build from before the CLI became private, for A/B runs
        from tbscope.cli import main as cli_main  # type: ignore[no-redef]

    kind = task["task"]
    cache = task.get("cache")
    if kind == "open":
        # Older builds load the cache module with `import tbscope`, newer ones at the first
        # cached scan: load it before the clock in both (as ab.py's cache_warm row does).
        with contextlib.suppress(ImportError):
            import tbscope._cache
        started, cpu = time.perf_counter(), time.process_time()
        lg = tbscope.scan(task["logdir"], threads=task["threads"], cache=cache)
        table = lg.scalars().to_arrow()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        info = lg.cache_info
        out = {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "rows": table.num_rows,
            "status": info.status if info else "off",
            "warnings": list(info.warnings) if info else [],
        }
        if not task.get("check", True):
            # (An A/B checks the rows once per build: the check costs many times the read.)
            return out
        started = time.perf_counter()
        df = table.to_pandas(split_blocks=True)
        out["to_pandas_seconds"] = time.perf_counter() - started
        from worker import frame_digest

        out["digest"] = frame_digest(df, "run")
        return out
    if kind == "read":
        started, cpu = time.perf_counter(), time.process_time()
        lg = tbscope.scan(task["logdir"], cache=cache)
        lg.reload()
        runs = lg.run_info().to_arrow()
        lg.series().to_arrow()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        info = lg.cache_info
        return {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "peak_rss": _peak_rss(),
            "runs": runs.num_rows,
            "status": info.status if info else "off",
        }
    if kind == "cli":
        args = [task["cmd"], task["logdir"], "--format", "csv"] + (["--cache-dir", cache] if cache else [])
        out_path = task["out"]
        saved = sys.stdout
        with open(out_path, "w") as out:
            sys.stdout = out
            started, cpu = time.perf_counter(), time.process_time()
            try:
                cli_main.main(args, standalone_mode=False)
            finally:
                seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
                sys.stdout = saved
        digest = hashlib.sha256(Path(out_path).read_bytes()).hexdigest()
        return {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "peak_rss": _peak_rss(),
            "output_sha256": digest,
            "output_bytes": os.path.getsize(out_path),
        }
    if kind == "reloads":
        return _reloads(task)
    raise ValueError(f"unknown task {kind!r}")


RELOAD_CHANGES = ("nothing changed", "one run appended to", "a run added", "a run removed")


def _reloads(task: dict[str, Any]) -> dict[str, Any]:
    """`Logdir.reload()` on a hard-linked copy of the many-runs logdir after each change of
    `RELOAD_CHANGES` (run `task["run"]` appended to, a run added to a sweep, a run removed),
    `task["rounds"]` times each, CPU (user + sys of the process) and wall. Through a cache the
    reader is first opened warm and its state decoded (`series()`), its cache writes deferred
    (not timed), as `tbscope serve` has it."""
    import manyruns
    import tbscope

    copy, cache, run, runs = Path(task["logdir"]), task.get("cache"), task["run"], task["runs"]
    lg = tbscope.scan(copy, cache=cache)
    lg.reload()
    if cache:
        lg = tbscope.scan(copy, cache=cache)
        # As `tbscope serve` reads: the cache is written afterwards, on another thread.
        lg._defer_cache_writes()
        lg.reload()
        lg.series()
        # The first reload once the state is decoded discovers the logdir (what the next ones
        # check against), once: untimed, as a server pays it once.
        lg.reload()
    sweep = manyruns.run_name(runs // 3).rsplit("/", 1)[0]
    changes: list[Callable[[int], None]] = [
        lambda i: None,
        lambda i: manyruns.append_to_run(copy, run, first_step=10_000 + 100 * i),
        lambda i: manyruns.add_run(copy, f"{sweep}/trial_reload_{i}", start=2e9 + i),
        lambda i: shutil.rmtree(copy / manyruns.run_name(runs // 3 + 1 + i)),
    ]
    out: dict[str, Any] = {name: [] for name in RELOAD_CHANGES}
    # (Numbered from `first`: the runs added and removed by an earlier task on the same copy
    # are not these.)
    first = task.get("first", 0)
    for i in range(first, first + task["rounds"]):
        for name, change in zip(RELOAD_CHANGES, changes):
            change(i)
            started, cpu = time.perf_counter(), time.process_time()
            stats = lg.reload()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            out[name].append({"seconds": seconds, "cpu_seconds": cpu, "dirs_listed": getattr(stats, "dirs_listed", -1)})
            if name in ("a run added", "a run removed"):
                # A directory changed within 2 s is listed again until then: settle, and read
                # once more, so that the next round starts from settled listings.
                time.sleep(2.2)
                lg.reload()
    out["runs"] = len(lg.runs)
    return out


def _peak_rss() -> int:
    """This process's peak resident memory in bytes (VmHWM: the imports included, as a user's
    command pays them)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


_DURATION = re.compile(r"([0-9.]+)(ns|µs|us|ms|s)\b")
_UNIT = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def trace_phases(stderr: str) -> dict[str, Any]:
    """The phases of a load through the cache, from its ``TBSCOPE_TRACE=1`` lines: seconds per
    phase of the ``tbscope cache <status>:`` line, and the warm check's stat and thread counts."""
    out: dict[str, Any] = {}
    for line in stderr.splitlines():
        m = re.match(r"tbscope cache (hit|miss|updated): (.*)", line)
        if m:
            for part in m.group(2).split(", "):
                name, _, value = part.partition(" ")
                d = _DURATION.fullmatch(value.strip())
                if d:
                    out[name] = float(d.group(1)) * _UNIT[d.group(2)]
        m = re.match(r"tbscope cache check: (\d+) stats on (\d+) threads", line)
        if m:
            out["stats"], out["threads"] = int(m.group(1)), int(m.group(2))
    return out


def run_task(task: dict[str, Any], timeout: float = 3600.0, python: str | None = None) -> dict[str, Any]:
    """One task in a fresh interpreter (``python``, else this one); its result dict, or
    {"error": ...}. A task through a cache also reports the phases of its load
    (``TBSCOPE_TRACE=1``; printing them costs microseconds)."""
    with tempfile.TemporaryDirectory(prefix="tbscope-cachebench-") as tmp:
        out = Path(tmp) / "result.json"
        task = {**task, "out": str(Path(tmp) / "stdout.txt")} if task["task"] == "cli" else task
        env = dict(os.environ, TBSCOPE_TRACE="1") if task.get("cache") else None
        proc = subprocess.run(
            [python or sys.executable, str(HERE), "--task", json.dumps(task), str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if out.is_file():
            result: dict[str, Any] = json.loads(out.read_text())
            if env is not None:
                result["phases"] = trace_phases(proc.stderr)
            return result
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


# --------------------------------------------------------------------------------------------
# The scenarios


def _median(runs: list[dict[str, Any]], key: str = "seconds") -> float:
    return float(statistics.median(r[key] for r in runs))


def _series(
    task: dict[str, Any], repeat: int, log: Callable[[str], None], before: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    runs = []
    for i in range(repeat):
        if before is not None:
            before()
        r = run_task(task)
        if "error" in r:
            raise RuntimeError(f"{task['task']} {task.get('cmd', '')} ({task.get('mode')}): {r['error']}")
        runs.append(r)
        log(f"  {task['task']} {task.get('cmd', '')} {task.get('mode')}: run {i + 1}/{repeat}: {r['seconds']:.3f}s")
    return runs


def bench_open(
    logdir: Path,
    cache_root: Path,
    threads: int,
    repeat: int,
    expected: dict[str, Any] | None,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Scenario 1: cold read, cache miss (read + write) and warm open of one logdir."""
    cache = cache_root / f".cache-open-{logdir.parent.name}"
    warm_page_cache(logdir)
    base = {"task": "open", "logdir": str(logdir), "threads": threads}
    out: dict[str, Any] = {"logdir": str(logdir), "threads": threads}
    out["cold"] = _series({**base, "mode": "cold"}, repeat, log)
    out["miss"] = _series(
        {**base, "mode": "miss", "cache": str(cache)},
        repeat,
        log,
        before=lambda: shutil.rmtree(cache, ignore_errors=True),
    )
    out["warm"] = _series({**base, "mode": "warm", "cache": str(cache)}, repeat, log)
    out["cache_bytes"] = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    statuses = {r["status"] for r in out["warm"]}
    checks = []
    if statuses != {"hit"}:
        checks.append(f"warm status {sorted(statuses)}")
    if any(r["warnings"] for mode in ("miss", "warm") for r in out[mode]):
        checks.append("cache warnings")
    if expected is not None and any(r["digest"] != expected for mode in ("cold", "miss", "warm") for r in out[mode]):
        checks.append("rows differ from the generator's")
    out["check"] = "FAIL (" + "; ".join(checks) + ")" if checks else "PASS"
    shutil.rmtree(cache, ignore_errors=True)
    return out


def bench_cli(logdir: Path, cache_root: Path, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Scenario 2: cold and warm `tbscope ls` / `tbscope summary` (and the read alone)."""
    cache = cache_root / ".cache-cli-manyruns"
    shutil.rmtree(cache, ignore_errors=True)
    warm_page_cache(logdir)
    log("  writing the cache (untimed)")
    prep = run_task({"task": "read", "logdir": str(logdir), "cache": str(cache), "mode": "prepare"})
    if "error" in prep:
        raise RuntimeError(prep["error"])
    out: dict[str, Any] = {"logdir": str(logdir), "runs": prep["runs"]}
    for cmd in ("read", "ls", "summary"):
        task = {"task": "read"} if cmd == "read" else {"task": "cli", "cmd": cmd}
        task["logdir"] = str(logdir)
        cold = _series({**task, "mode": "cold"}, repeat, log)
        warm = _series({**task, "mode": "warm", "cache": str(cache)}, repeat, log)
        check = "PASS"
        if cmd == "read":
            if {r["status"] for r in warm} != {"hit"}:
                check = "FAIL (warm read was not a cache hit)"
        elif {r["output_sha256"] for r in cold + warm} != {cold[0]["output_sha256"]}:
            check = "FAIL (warm output differs from cold)"
        out[cmd] = {"cold": cold, "warm": warm, "check": check}
    out["cache_bytes"] = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    shutil.rmtree(cache, ignore_errors=True)
    out["append"] = bench_append(logdir, cache_root, prep["runs"], repeat, log)
    for kind in DIR_CHANGES:
        out[kind] = bench_dir_change(logdir, cache_root, prep["runs"], repeat, log, kind)
    return out


def bench_append(logdir: Path, cache_root: Path, runs: int, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Scenario 2b: one run of the cached many-runs logdir appended to (25 steps x 4 tags, as
    its writer would), then `tbscope summary LOGDIR --cache-dir` again; each repeat appends
    again. On a copy of the logdir hard-linked to the corpus (`cp -al`, under the cache root)
    whose appended run has a file of its own: the shared corpus is never written. The last
    output must equal a cold `summary` of the copy."""
    import manyruns

    with linked_copy(logdir, cache_root / ".cache-append-manyruns", log) as copy:
        run = runs // 2
        own = manyruns.own_file(copy, run)
        # The rename that gave the run its own file moved its directory's mtime, which a real
        # logdir's run directory does only when a file is added: set it back an hour, as if the
        # run had been started long ago (a directory changed within seconds is listed again).
        back = time.time() - 3600
        os.utime(own.parent, (back, back))
        return changed_then_summary(
            copy,
            copy.parent / "cache",
            repeat,
            lambda i: manyruns.append_to_run(copy, run, first_step=10_000 + 100 * i),
            "appending to one run",
            log,
        )


def bench_reload(logdir: Path, cache_root: Path, runs: int, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    """`Logdir.reload()` at `runs` runs after each change of `RELOAD_CHANGES`, without and
    with a cache (`_reloads`), on a hard-linked copy of the logdir: what `tbscope serve` pays
    per refresh."""
    import manyruns

    out: dict[str, Any] = {"runs": runs}
    with linked_copy(logdir, cache_root / ".cache-reload-manyruns", log) as copy:
        run = runs // 2
        own = manyruns.own_file(copy, run)
        # As in bench_append: the run's directory as if started long ago.
        back = time.time() - 3600
        os.utime(own.parent, (back, back))
        time.sleep(2.5)
        for first, mode in enumerate(("no cache", "cache")):
            cache = str(copy.parent / "cache") if mode == "cache" else None
            log(f"  reloads ({mode}): {repeat} rounds of {', '.join(RELOAD_CHANGES)}")
            r = run_task(
                {
                    "task": "reloads",
                    "logdir": str(copy),
                    "cache": cache,
                    "run": run,
                    "runs": runs,
                    "rounds": repeat,
                    "first": first * repeat,
                }
            )
            if "error" in r:
                raise RuntimeError(f"reloads: {r['error']}")
            for name in RELOAD_CHANGES:
                log(
                    f"    {name}: {_median(r[name], 'cpu_seconds'):.3f}s CPU, {_median(r[name]):.3f}s wall "
                    f"(directories listed: {[x['dirs_listed'] for x in r[name]]})"
                )
            out[mode] = r
    return out


def render_reload(r: dict[str, Any]) -> list[str]:
    """The reload rows: median CPU and wall per change, without and with a cache."""
    lines = [
        f"`Logdir.reload()` on {r['runs']:,} runs × 100 scalar events (what `tbscope serve` does each "
        "`reload_interval`), in one process after a first read, median:",
        "",
        "| change before the reload | CPU (s) | wall (s) | CPU, cache (s) | wall, cache (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in RELOAD_CHANGES:
        a, b = r["no cache"][name], r["cache"][name]
        lines.append(
            f"| {name} | {_fmt(_median(a, 'cpu_seconds'))} | {_fmt(_median(a))} | "
            f"{_fmt(_median(b, 'cpu_seconds'))} | {_fmt(_median(b))} |"
        )
    return lines


@contextlib.contextmanager
def linked_copy(logdir: Path, work: Path, log: Callable[[str], None]) -> Iterator[Path]:
    """A copy of `logdir` hard-linked to it (`cp -al`) at `work/logdir`, for a row that changes
    it: the shared corpus is never written. `work` (the copy and its cache) goes afterwards."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    copy = work / "logdir"
    log("  linking a copy of the logdir (untimed)")
    subprocess.run(["cp", "-al", str(logdir), str(copy)], check=True)
    try:
        yield copy
    finally:
        shutil.rmtree(work, ignore_errors=True)


def changed_then_summary(
    copy: Path, cache: Path, repeat: int, change: Callable[[int], None], what: str, log: Callable[[str], None]
) -> dict[str, Any]:
    """The copy read into `cache` (untimed), then `repeat` times: `change(i)` and a timed
    `tbscope summary COPY --cache-dir CACHE`. The last output must equal a cold `summary`."""
    prep = run_task({"task": "read", "logdir": str(copy), "cache": str(cache)})
    if "error" in prep:
        raise RuntimeError(prep["error"])
    results = []
    for i in range(repeat):
        change(i)
        r = run_task({"task": "cli", "cmd": "summary", "logdir": str(copy), "cache": str(cache)})
        if "error" in r:
            raise RuntimeError(f"summary after {what}: {r['error']}")
        results.append(r)
        log(f"  summary after {what}: run {i + 1}/{repeat}: {r['seconds']:.3f}s, {r['cpu_seconds']:.3f}s CPU")
    cold = run_task({"task": "cli", "cmd": "summary", "logdir": str(copy)})
    if "error" in cold:
        raise RuntimeError(cold["error"])
    same = cold["output_sha256"] == results[-1]["output_sha256"]
    return {"runs": results, "check": "PASS" if same else "FAIL (output differs from a cold summary)"}


# Changes a directory's listing shows, each then followed by `summary` through the cache (what
# a watched logdir sees all day): the row's text, and the change made before repeat `i`.
DIR_CHANGES = {
    "new_run": "one run added (a new trial directory in a sweep)",
    "removed": "one run removed (its directory deleted)",
}


def dir_change(kind: str, logdir: Path, runs: int, i: int) -> None:
    """Makes change `kind` of `DIR_CHANGES` (the `i`th time) to a hard-linked copy of the
    many-runs logdir: a new run in the sweep of run `runs // 3` (written as the corpus's runs
    are), or run `runs // 3 + 1 + i` deleted (the corpus keeps its files: only the copy's links
    go)."""
    import manyruns

    if kind == "new_run":
        sweep = manyruns.run_name(runs // 3).rsplit("/", 1)[0]
        manyruns.add_run(logdir, f"{sweep}/trial_new_{i}", start=2e9 + i)
    elif kind == "removed":
        shutil.rmtree(logdir / manyruns.run_name(runs // 3 + 1 + i))
    else:
        raise ValueError(kind)


def bench_dir_change(
    logdir: Path, cache_root: Path, runs: int, repeat: int, log: Callable[[str], None], kind: str
) -> dict[str, Any]:
    """Scenario 2c: a change of `DIR_CHANGES` to the cached many-runs logdir, then `tbscope
    summary LOGDIR --cache-dir` again; each repeat changes it again. On a hard-linked copy of the
    logdir, as `bench_append`; the last output must equal a cold `summary` of the copy."""
    with linked_copy(logdir, cache_root / f".cache-{kind}-manyruns", log) as copy:
        # The copy's directories were all just made: settled before the cache lists them.
        time.sleep(2.5)
        return changed_then_summary(
            copy, copy.parent / "cache", repeat, lambda i: dir_change(kind, copy, runs, i), DIR_CHANGES[kind], log
        )


def bench_ab(
    open_logdir: Path,
    many_logdir: Path | None,
    pythons: list[str],
    cache_root: Path,
    threads: int,
    repeat: int,
    log: Callable[[str], None],
    rows: list[str] | None = None,
) -> dict[str, Any]:
    """``--vs``: the same measurements with two or more interpreters (each with its own
    tbscope), in turn (A B, then B A, ...), every run a fresh process: the 10M-corpus read without a cache,
    the warm open of it, and on the many-runs logdir the warm `ls` and `summary`, and `summary`
    after a run appended to, added or removed. Each interpreter writes its own caches first
    (untimed): cache formats may differ. ``rows``: only the rows whose name contains one of these."""

    def wanted(name: str) -> bool:
        return not rows or any(r in name for r in rows)

    if wanted("10M corpus"):
        warm_page_cache(open_logdir)
    if many_logdir is not None:
        warm_page_cache(many_logdir)
    caches = {
        py: (cache_root / f".cache-ab-open-{i}", cache_root / f".cache-ab-cli-{i}") for i, py in enumerate(pythons)
    }
    for py, (open_cache, cli_cache) in caches.items():
        for d in (open_cache, cli_cache):
            shutil.rmtree(d, ignore_errors=True)
        log(f"  writing the caches of {py} (untimed)")
        prep = []
        if wanted("10M corpus, warm open"):
            prep.append(
                run_task(
                    {
                        "task": "open",
                        "logdir": str(open_logdir),
                        "threads": threads,
                        "cache": str(open_cache),
                        "check": False,
                    },
                    python=py,
                )
            )
        if many_logdir is not None and (wanted("many runs, warm `ls`") or wanted("many runs, warm `summary`")):
            prep.append(run_task({"task": "read", "logdir": str(many_logdir), "cache": str(cli_cache)}, python=py))
        for r in prep:
            if "error" in r:
                raise RuntimeError(f"{py}: {r['error']}")

    def tasks(py: str) -> list[tuple[str, dict[str, Any]]]:
        open_cache, cli_cache = caches[py]
        base = {"task": "open", "logdir": str(open_logdir), "threads": threads}
        out = [("10M corpus, cold read", base), ("10M corpus, warm open", {**base, "cache": str(open_cache)})]
        if many_logdir is not None:
            for cmd in ("ls", "summary"):
                out.append(
                    (
                        f"many runs, warm `{cmd}`",
                        {"task": "cli", "cmd": cmd, "logdir": str(many_logdir), "cache": str(cli_cache)},
                    )
                )
        return out

    # One run of the many-runs logdir appended to, added or removed, then `summary` (as
    # `bench_append`, `bench_dir_change`): each interpreter on its own hard-linked copy with its
    # own cache, the same change made to each before its run (untimed), one append before the
    # timed rounds (a cache just written holds no stamps yet).
    changes = {
        "many runs, one run appended to, then `summary`": "append",
        **{f"many runs, {what}, then `summary`": kind for kind, what in DIR_CHANGES.items()},
    }
    changes = {name: kind for name, kind in changes.items() if wanted(name)}
    # Per (interpreter, "append" or "dirs"): its copy and cache. The appends have a copy of their
    # own: a directory that changed within seconds is listed again on the next open, which
    # would be part of the append's time.
    appended: dict[tuple[str, str], tuple[Path, Path]] = {}
    append_run = 0
    many = 0
    groups = sorted({"append" if kind == "append" else "dirs" for kind in changes.values()})
    if many_logdir is not None and changes:
        import manyruns

        many = json.loads((many_logdir.parent / "corpus.json").read_text())["params"]["runs"]
        append_run = many // 2
        for i, (py, group) in enumerate((py, g) for py in pythons for g in groups):
            work = cache_root / f".cache-ab-{group}-{i}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            copy = work / "logdir"
            subprocess.run(["cp", "-al", str(many_logdir), str(copy)], check=True)
            own = manyruns.own_file(copy, append_run)
            back = time.time() - 3600
            os.utime(own.parent, (back, back))
            # The copy's directories were all just made: settled before the cache lists them.
            time.sleep(2.5)
            appended[py, group] = (copy, work / "cache")
            for task in (
                {"task": "read", "logdir": str(copy), "cache": str(work / "cache")},
                {"task": "cli", "cmd": "summary", "logdir": str(copy), "cache": str(work / "cache")},
            ):
                if task["task"] == "cli":
                    time.sleep(2.5)  # the segment's ctime settled: the open stamps it
                    manyruns.append_to_run(copy, append_run, first_step=9_000)
                r = run_task(task, python=py)
                if "error" in r:
                    raise RuntimeError(f"{py}: {r['error']}")

    names = [name for name, _ in tasks(pythons[0]) if wanted(name)]
    if appended:
        names += list(changes)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {py: [] for py in pythons} for n in names}
    for i in range(repeat):
        order = pythons if i % 2 == 0 else pythons[::-1]
        for name in names:
            for py in order:
                if name in changes:
                    copy, cache = appended[py, "append" if changes[name] == "append" else "dirs"]
                    if changes[name] == "append":
                        manyruns.append_to_run(copy, append_run, first_step=10_000 + 100 * i)
                    else:
                        dir_change(changes[name], copy, many, i)
                    r = run_task({"task": "cli", "cmd": "summary", "logdir": str(copy), "cache": str(cache)}, python=py)
                    if "error" in r:
                        raise RuntimeError(f"{name} ({py}): {r['error']}")
                    runs[name][py].append(r)
                    log(f"  {name}, {py}: run {i + 1}/{repeat}: {r['seconds']:.3f}s wall, {r['cpu_seconds']:.3f}s CPU")
                    continue
                # Rows are checked in the first round only.
                task = {**dict(tasks(py))[name], "check": i == 0}
                r = run_task(task, python=py)
                if "error" in r:
                    raise RuntimeError(f"{name} ({py}): {r['error']}")
                if r.get("status") not in (None, "off", "hit"):
                    raise RuntimeError(f"{name} ({py}): status {r['status']}, warnings {r.get('warnings')}")
                runs[name][py].append(r)
                log(f"  {name}, {py}: run {i + 1}/{repeat}: {r['seconds']:.3f}s wall, {r['cpu_seconds']:.3f}s CPU")
    for name in names:
        # (Each round of the append row has more steps: its outputs agree round by round.)
        for i in range(repeat):
            for key in ("digest", "output_sha256"):
                got = {json.dumps(runs[name][py][i][key], sort_keys=True) for py in pythons if key in runs[name][py][i]}
                if len(got) > 1:
                    raise RuntimeError(f"{name}: the interpreters' results differ ({key}, round {i + 1})")
    for open_cache, cli_cache in caches.values():
        for d in (open_cache, cli_cache):
            shutil.rmtree(d, ignore_errors=True)
    for copy, _ in appended.values():
        shutil.rmtree(copy.parent, ignore_errors=True)
    return {"pythons": pythons, "names": names, "runs": runs}


def render_ab(ab: dict[str, Any]) -> list[str]:
    """One table per other interpreter, each against the last one (this one)."""
    *others, b = ab["pythons"]
    lines: list[str] = []
    for a in others:
        lines += _render_pair(ab, a, b) + [""]
    return lines


def _render_pair(ab: dict[str, Any], a: str, b: str) -> list[str]:
    lines = [
        f"A: `{a}`, B: `{b}`; each run a fresh process, timed after imports, A and B in turn; "
        "wall time, then the process's CPU time (all threads: less sensitive to other processes on the machine):",
        "",
        "| measurement | A wall, median (min–max) s | B wall, median (min–max) s | B / A wall (median of pairs) | A CPU s (median) | B CPU s (median) | B / A CPU (median of pairs) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(t: list[float]) -> str:
        return f"{statistics.median(t):.3f} ({min(t):.3f}–{max(t):.3f})"

    for name in ab["names"]:
        row = [name]
        for key in ("seconds", "cpu_seconds"):
            ta = [r[key] for r in ab["runs"][name][a]]
            tb = [r[key] for r in ab["runs"][name][b]]
            ratio = statistics.median(y / x for x, y in zip(ta, tb))
            row += (
                [cell(ta), cell(tb), f"{ratio:.2f}×"]
                if key == "seconds"
                else [f"{statistics.median(ta):.3f}", f"{statistics.median(tb):.3f}", f"{ratio:.2f}×"]
            )
        lines.append("| " + " | ".join(row) + " |")
    return lines


# --------------------------------------------------------------------------------------------
# Report


def _fmt(s: float) -> str:
    return f"{s:.3f}" if s < 10 else f"{s:.1f}"


def render(
    open_result: dict[str, Any] | None, cli_result: dict[str, Any] | None, mib: Callable[[float], str]
) -> list[str]:
    lines: list[str] = []
    if open_result is not None:
        o = open_result
        cold, miss, warm = (_median(o[m]) for m in ("cold", "miss", "warm"))
        lines += [
            f"Main corpus, `tbscope.scan(logdir, threads={o['threads']}{{, cache=DIR}}).scalars().to_arrow()`, "
            "timed in a fresh process after imports (median):",
            "",
            "| run | time (s) | × cold | then `.to_pandas()` (s) | rows |",
            "|---|---:|---:|---:|---|",
            f"| cold (no cache) | {_fmt(cold)} | 1.00× | {_fmt(_median(o['cold'], 'to_pandas_seconds'))} | {o['check']} |",
            f"| cache miss: cold read + writing the cache | {_fmt(miss)} | {miss / cold:.2f}× | {_fmt(_median(o['miss'], 'to_pandas_seconds'))} | {o['check']} |",
            f"| warm: opened from the cache | {_fmt(warm)} | {warm / cold:.3f}× ({cold / warm:.0f}× faster) | {_fmt(_median(o['warm'], 'to_pandas_seconds'))} | {o['check']} |",
            "",
            f"Cache size: {mib(o['cache_bytes'])}.",
        ]
    if cli_result is not None:
        c = cli_result
        if lines:
            lines.append("")
        lines += [
            f"{c['runs']:,} runs × 100 scalar events, commands called in-process after imports "
            "(`tbscope._cli.main.main([...], standalone_mode=False)`, stdout to a file), median:",
            "",
            "| command | cold (s) | cold CPU (s) | cold peak RSS | warm (s) | cold / warm | output |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        names = {
            "read": "the read alone: `scan().reload()`, `run_info()`, `series()`",
            "ls": "`tbscope ls LOGDIR --format csv`",
            "summary": "`tbscope summary LOGDIR --format csv`",
        }
        for cmd in ("read", "ls", "summary"):
            r = c[cmd]
            cold, warm = _median(r["cold"]), _median(r["warm"])
            cpu = _median(r["cold"], "cpu_seconds")
            rss = max(x.get("peak_rss", 0) for x in r["cold"])
            lines.append(
                f"| {names[cmd]} | {_fmt(cold)} | {_fmt(cpu)} | {mib(rss)} | {_fmt(warm)} | {cold / warm:.1f}× | {r['check']} |"
            )
        # The rows of a change then `summary` (scenarios 2b and 2c): key, row text, what each
        # repeat does, and what the phases line calls the change.
        changes = [("append", "one run appended to", "each repeat appends again", "an append")]
        changes += [(kind, what, "each repeat again", what) for kind, what in DIR_CHANGES.items()]
        for key, what, again, after in changes:
            if key not in c:
                continue
            a = c[key]
            lines.append(
                f"| {what}, then `tbscope summary LOGDIR --format csv` ({again}; "
                f"{_fmt(_median(a['runs'], 'cpu_seconds'))} s CPU) | | | | {_fmt(_median(a['runs']))} | | {a['check']} |"
            )
            phases = [r.get("phases", {}) for r in a["runs"]]
            names = sorted({k for p in phases for k in p if isinstance(p[k], float)})
            if names:
                med = ", ".join(f"{k} {statistics.median(p.get(k, 0.0) for p in phases) * 1000:.0f} ms" for k in names)
                lines += ["", f"Where the summary after {after} spends its load (`TBSCOPE_TRACE=1`, median): {med}."]
        lines += ["", f"Cache size: {mib(c['cache_bytes'])}."]
        phases = [r.get("phases", {}) for cmd in ("ls", "summary") for r in c[cmd]["warm"]]
        if phases and all("check" in p and "restore" in p for p in phases):
            med = {k: statistics.median(p[k] for p in phases) for k in ("restore", "check")}
            stats = phases[0].get("stats", "?")
            threads = phases[0].get("threads", "?")
            lines += [
                "",
                f"Where a warm `ls`/`summary` spends its time (`TBSCOPE_TRACE=1`, median of their warm runs): "
                f"opening the generation {med['restore'] * 1000:.0f} ms, checking that nothing changed "
                f"({stats} stats on {threads} threads) {med['check'] * 1000:.0f} ms; the rest is the command building and writing its output.",
            ]
    return lines


def targets(open_result: dict[str, Any] | None, cli_result: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    rows = []
    if open_result is not None:
        ratio = _median(open_result["cold"]) / _median(open_result["warm"])
        rows.append(
            (
                f"warm open of the corpus ≥ {TARGET_OPEN:.0f}× faster than a cold read",
                f"{ratio:.0f}×",
                "met" if ratio >= TARGET_OPEN else "missed",
            )
        )
    if cli_result is not None:
        for cmd in ("ls", "summary"):
            r = cli_result[cmd]
            ratio = _median(r["cold"]) / _median(r["warm"])
            rows.append(
                (
                    f"warm `tbscope {cmd}` on {cli_result['runs']:,} runs ≥ {TARGET_CLI:.0f}× faster than cold",
                    f"{ratio:.1f}×",
                    "met" if ratio >= TARGET_CLI else "missed",
                )
            )
        if "append" in cli_result:
            t = _median(cli_result["append"]["runs"])
            rows.append(
                (
                    f"one run of {cli_result['runs']:,} appended to, then `tbscope summary` < {TARGET_APPEND:.0f} s",
                    f"{t:.2f} s",
                    "met" if t < TARGET_APPEND and cli_result["append"]["check"] == "PASS" else "missed",
                )
            )
        for kind, what in DIR_CHANGES.items():
            if kind in cli_result:
                t = _median(cli_result[kind]["runs"])
                rows.append(
                    (
                        f"{what.split(' (')[0]} (of {cli_result['runs']:,}), then `tbscope summary` < {TARGET_APPEND:.0f} s",
                        f"{t:.2f} s",
                        "met" if t < TARGET_APPEND and cli_result[kind]["check"] == "PASS" else "missed",
                    )
                )
        cold = cli_result["summary"]["cold"]
        seconds = _median(cold)
        rss = max(x.get("peak_rss", 0) for x in cold)
        rows.append(
            (
                f"cold `tbscope summary` on {cli_result['runs']:,} runs < {TARGET_COLD_SUMMARY:.0f} s, peak RSS < 1 GB",
                f"{seconds:.2f} s, {rss / 1e9:.2f} GB",
                "met" if seconds < TARGET_COLD_SUMMARY and 0 < rss < TARGET_COLD_RSS else "missed",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--task"]:
        result = _task(json.loads(argv[1]))
        Path(argv[2]).write_text(json.dumps(result))
        return 0
    import corpus
    import manyruns
    from benchutil import canonical_digest, human_bytes

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus.add_corpus_args(parser)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cache-root",
        type=Path,
        help="where the benchmark's caches are written (default: the corpus root); one of your own keeps two benchmarks on a shared corpus apart",
    )
    parser.add_argument(
        "--many-runs", type=int, default=100_000, help="runs in the many-runs logdir (0: skip that scenario)"
    )
    parser.add_argument(
        "--reload-only",
        action="store_true",
        help="only the reload rows: `Logdir.reload()` on the many-runs logdir after each kind of change",
    )
    parser.add_argument(
        "--vs",
        metavar="PYTHON",
        action="append",
        help="A/B: warm opens (and the cold read) with this interpreter's tbscope and this one's, in turn (repeat for more: each is compared with this one)",
    )
    parser.add_argument(
        "--rows",
        metavar="TEXT",
        action="append",
        help="with --vs: only the rows whose name contains TEXT (repeatable), e.g. 'then' for the changes to the many-runs logdir",
    )
    args = parser.parse_args(argv)
    spec, _ = corpus.specs_from_args(args)
    cache_root = args.cache_root or args.corpus_root
    cache_root.mkdir(parents=True, exist_ok=True)
    main_corpus = corpus.ensure_corpus(spec, root=args.corpus_root, jobs=args.jobs)
    if args.vs:
        many = (
            manyruns.ensure(manyruns.ManyRunsSpec(runs=args.many_runs), args.corpus_root, args.jobs)
            if args.many_runs
            else None
        )
        ab = bench_ab(
            main_corpus.logdir,
            many,
            [*args.vs, sys.executable],
            cache_root,
            args.threads,
            args.repeat,
            lambda line: print(line, flush=True),
            args.rows,
        )
        print("\n".join(render_ab(ab)))
        return 0
    if args.reload_only:
        logdir = manyruns.ensure(manyruns.ManyRunsSpec(runs=args.many_runs), args.corpus_root, args.jobs)
        print("\n".join(render_reload(bench_reload(logdir, cache_root, args.many_runs, args.repeat, print))))
        return 0
    table = corpus.expected_table(spec)
    expected = canonical_digest(
        table["run_names"], table["run_codes"], table["tag_names"], table["tag_codes"], table["steps"], table["values"]
    ).to_json()
    open_result = bench_open(main_corpus.logdir, cache_root, args.threads, args.repeat, expected, print)
    cli_result = None
    if args.many_runs:
        logdir = manyruns.ensure(manyruns.ManyRunsSpec(runs=args.many_runs), args.corpus_root, args.jobs)
        cli_result = bench_cli(logdir, cache_root, args.repeat, print)
        reload_result = bench_reload(logdir, cache_root, args.many_runs, args.repeat, print)
    print("\n".join(render(open_result, cli_result, human_bytes)))
    if args.many_runs:
        print("\n" + "\n".join(render_reload(reload_result)))
    for a, b, c in targets(open_result, cli_result):
        print(f"| {a} | {b} | {c} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
