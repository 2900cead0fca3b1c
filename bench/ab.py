"""A/B of two builds over the rows of `make bench` (issue 11, "Nothing gets slower").

    .venv/bin/python bench/ab.py --a A/bin/python --b B/bin/python --aa B2/bin/python --repeat 9

Each interpreter has its own venv and its own tbscope build; ``--aa`` is a second path to one of
them (a symlink to B's venv), so A/A shows the spread of a build against itself. Every run is a
fresh process (``ab.py --task``) timed around the measured call only: wall time and CPU time
(``time.process_time``: user + system of every thread of the process). Rounds interleave: each
round runs every row with every interpreter, the interpreters' order alternating from round to
round, so a machine whose speed drifts (a shared one) shows the drift to all of them alike.

Rows (the 10M-event corpus of bench/corpus.py unless named): the read (`read_scalars`, 1 and 2
threads), reload() of an unchanged logdir, after 1% appended, after 1% in new files, summary()
and two SQL queries, the warm cache open, `tbscope ls` and `tbscope summary` on 100,000 runs
with a warm cache (and cold with ``--cold-cli``), the writer (add_scalar, log of 100 tags,
add_histogram of 1M values) and the crafted-damage scan. The rows of `make bench` left out are
listed with their reason in the output (``SKIPPED``).

Each row's result (row count, or the CLI's output hash) must be the same for every interpreter.
Prints a markdown table: per row and interpreter the median wall and CPU seconds, then B/A and
A/A ratios of the medians; then per row the quartiles of CPU time, a bootstrap interval of B/A,
the Mann-Whitney U test of B against A, and B/A of CPU time over a yardstick timed in each run
(the CPU's speed at the time). Raw runs go to ``--json``; ``ab.py --stats RUN.json`` prints the
second table again from them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

SKIPPED = {
    "floor: read + crc32c": "runs no tbscope code (the same Python package in both venvs)",
    "tbparse SummaryReader, TensorBoard EventAccumulator": "run no tbscope code (same packages in both venvs)",
    "dashboard (bench/dashboard.py)": "a browser per run; the dashboard's code is the same built assets' concern, not the Python/Rust build's",
    "serve latency and cold start (bench/serve.py), TensorBoard side by side": "a long-lived server and a 1,000-run corpus per run; its reads are the scan rows here",
    "remote (bench/remote.py)": "moto's server (Python) sets its seconds; the reader on the mirror is the read rows here",
    "cache miss (read + write the cache)": "writes 100s of MB per run; the cold read and the warm open are here",
}


# --------------------------------------------------------------------------------------------
# One measurement, in a fresh interpreter: ab.py --task JSON OUT


def _timed(call: Any) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _yardstick() -> float:
    """CPU seconds of a fixed pure-Python loop (the same bytecode in every venv: no tbscope).

    The VM's CPUs run the same instructions at speeds that differ by up to 1.45x from one
    second to the next (the host's load: measured with this loop beside the warm open, whose
    CPU time moves with it at a constant ratio; see bench/README.md). Timed in each run after
    the imports, before the row, it tells a run that met a slow CPU from a build that does more work: the
    table divides each run's CPU time by it."""
    cpu = time.thread_time()
    x = 0
    for i in range(300_000):
        x += i
    return time.thread_time() - cpu


def _mapped_in_2mib(name: str) -> dict[str, int]:
    """Of this process's mapping of the cache file ending in `name`, the kB resident and the kB
    the kernel mapped with 2 MiB pages (`FilePmdMapped`: the page cache holds that part in 2 MiB
    folios). Each interpreter opens a cache of its own, and how much of a file the page cache
    holds in 2 MiB folios is decided when the file is written or read in (the free memory's
    fragmentation then), not by the build: a warm open whose file has few of them scans its
    dictionary keys through 4 KiB pages, ~20% more CPU (bench/README.md)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(name):
            fields = dict(f.split(":", 1) for f in lines[i + 1 : i + 30] if ":" in f and " kB" in f)
            return {
                "mapped_kb": int(fields.get("Rss", "0 kB").split()[0]),
                "pmd_kb": int(fields.get("FilePmdMapped", "0 kB").split()[0]),
            }
    return {}


def _task(task: dict[str, Any]) -> dict[str, Any]:
    import pandas  # noqa: F401 - imports come before the clock starts
    import pyarrow  # noqa: F401
    import tbscope  # noqa: F401 - before the yardstick too

    row, logdir = task["row"], task.get("logdir", "")
    stick = _yardstick()
    result = _row(task, row, logdir)
    return {**result, "yardstick": stick}


def _row(task: dict[str, Any], row: str, logdir: str) -> dict[str, Any]:
    import tbscope

    if row in ("read1", "read2"):
        threads = 1 if row == "read1" else 2
        wall, cpu, df = _timed(lambda: tbscope.read_scalars(logdir, threads=threads))
        return {"wall": wall, "cpu": cpu, "result": len(df)}
    if row.startswith("reload_"):
        import corpus

        lg = tbscope.scan(logdir, threads=2)
        lg.scalars().to_arrow()  # the first load is the read rows' business
        scenario = row.removeprefix("reload_")
        if scenario != "unchanged":
            spec = corpus.CorpusSpec(**{k: v for k, v in task["spec"].items() if k != "generator_version"})
            corpus.grow(Path(logdir), spec, 0.01, scenario)  # type: ignore[arg-type]
        wall, cpu, _ = _timed(lg.reload)
        return {"wall": wall, "cpu": cpu, "result": lg.scalars().to_arrow().num_rows}
    if row in ("summary", "sql_groupby", "sql_onetag"):
        import duckdb  # noqa: F401
        from worker import QUERIES

        if row == "summary":
            wall, cpu, r = _timed(lambda: tbscope.scan(logdir, threads=2).summary())
        elif row == "sql_onetag":
            tag = task["tag"]
            wall, cpu, r = _timed(lambda: tbscope.sql(logdir, QUERIES[row], params={"tag": tag}, threads=2))
        else:
            wall, cpu, r = _timed(lambda: tbscope.sql(logdir, QUERIES[row], threads=2))
        n = r.num_rows if hasattr(r, "num_rows") else len(r.to_pandas() if hasattr(r, "to_pandas") else r)
        return {"wall": wall, "cpu": cpu, "result": int(n)}
    if row == "cache_warm":
        # Builds before f1785b7's successors loaded the cache module with `import tbscope`; later
        # ones load it at the first cached scan. Load it before the clock in both, so that the
        # row times the open alone (the import's cost belongs to the cold CLI rows).
        with contextlib.suppress(ImportError):
            import tbscope._cache
        wall, cpu, t = _timed(lambda: tbscope.scan(logdir, threads=2, cache=task["cache"]).scalars().to_arrow())
        return {"wall": wall, "cpu": cpu, "result": t.num_rows, **_mapped_in_2mib("scalars.arrow")}
    if row.startswith("cli_"):
        import cachebench

        _, cmd, _mode = row.split("_")
        r = cachebench._task(
            {"task": "cli", "cmd": cmd, "logdir": logdir, "cache": task.get("cache"), "out": task["out"]}
        )
        return {"wall": r["seconds"], "cpu": r["cpu_seconds"], "result": r["output_sha256"][:16]}
    if row.startswith("writer_"):
        import numpy as np

        # As for the cache: f1785b7 loaded its writer with `import tbscope`, later builds at the
        # first SummaryWriter (3.5 ms); load it before the clock in both.
        with contextlib.suppress(ImportError):
            import tbscope._writer.api

        root = task["tmp"]
        if row == "writer_add_scalar":

            def write() -> None:
                w = tbscope.SummaryWriter(root)
                add = w.add_scalar
                for i in range(200_000):
                    add("train/loss", i * 0.5, i)
                w.close()

        elif row == "writer_log":
            names = [f"metrics/m{j:03d}" for j in range(100)]
            rows = [{name: (i + j) * 0.25 for j, name in enumerate(names)} for i in range(2_000)]

            def write() -> None:
                w = tbscope.SummaryWriter(root)
                for i, metrics in enumerate(rows):
                    w.log(i, metrics)
                w.close()

        else:
            values = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)

            def write() -> None:
                w = tbscope.SummaryWriter(root)
                for i in range(20):
                    w.add_histogram("weights", values, i)
                w.close()

        wall, cpu, _ = _timed(write)
        return {"wall": wall, "cpu": cpu, "result": int(tbscope.scan(root).series().to_pandas()["points"].sum())}
    if row == "crafted":
        # The file is an hour old: read as finished by every build (older ones have no tail_timeout).
        wall, cpu, report = _timed(lambda: tbscope.scan(logdir).report)
        return {"wall": wall, "cpu": cpu, "result": len(report)}
    raise ValueError(f"unknown row {row!r}")


# --------------------------------------------------------------------------------------------
# Statistics of the runs


def mann_whitney(a: list[float], b: list[float]) -> tuple[float, float]:
    """P(a run of B takes longer than one of A) (ties count half; 0.5: no difference), and the
    two-sided p value of the Mann-Whitney U test (normal approximation with the tie correction
    and a continuity correction, good from about 8 runs a side)."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u_b = sum(r for r, (_, side) in zip(ranks, pooled) if side == 1) - n2 * (n2 + 1) / 2
    n = n1 + n2
    mean = n1 * n2 / 2
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sd == 0:
        return u_b / (n1 * n2), 1.0
    z = max(abs(u_b - mean) - 0.5, 0.0) / sd
    return u_b / (n1 * n2), math.erfc(z / math.sqrt(2))


def median_ratio_ci(a: list[float], b: list[float], rounds: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of median(B) / median(A) (resampling each side; seeded)."""
    rng = random.Random(0)
    ratios = sorted(
        statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a))) for _ in range(rounds)
    )
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def distributions(labels: dict[str, str], runs: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Per row: quartiles of each build's CPU seconds, the median ratio's bootstrap interval, the
    Mann-Whitney test of B against A, and the median ratio of CPU time over each run's yardstick
    (`_yardstick`: the CPU's speed at the time, so that a row's ratio does not depend on which
    runs met a slow CPU)."""
    lines = [
        "CPU time distributions: quartiles (p25 / median / p75, ms), B/A of the medians with its 95% "
        "bootstrap interval, the Mann-Whitney U test of B against A (P(B > A): 0.5 = alike), and B/A "
        "and A/A of the median CPU time divided by each run's yardstick (a fixed Python loop timed in "
        "the same process: the CPU's speed then).",
        "",
        "| row | A CPU (ms) | B CPU (ms) | B/A [95% CI] | P(B > A) | p | B/A per yardstick | A/A per yardstick |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]

    def per_stick(rs: list[dict[str, Any]]) -> float | None:
        xs = [r["cpu"] / r["yardstick"] for r in rs if r.get("yardstick")]
        return statistics.median(xs) if xs else None

    def q(xs: list[float]) -> str:
        p25, p50, p75 = statistics.quantiles(xs, n=4, method="inclusive")
        return f"{p25 * 1e3:.1f} / {p50 * 1e3:.1f} / {p75 * 1e3:.1f}"

    for key, label in labels.items():
        a = [r["cpu"] for r in runs[key]["A"]]
        b = [r["cpu"] for r in runs[key]["B"]]
        if len(a) < 2 or len(b) < 2:
            continue
        lo, hi = median_ratio_ci(a, b)
        p_gt, p = mann_whitney(a, b)

        sa, sb, saa = (per_stick(runs[key][name]) for name in ("A", "B", "A/A"))
        stick = f"{sb / sa:.2f}" if sa and sb else "-"
        stick_aa = f"{saa / sb:.2f}" if saa and sb else "-"
        lines.append(
            f"| {label} | {q(a)} | {q(b)} | {statistics.median(b) / statistics.median(a):.2f} "
            f"[{lo:.2f}, {hi:.2f}] | {p_gt:.2f} | {p:.2g} | {stick} | {stick_aa} |"
        )
    for key, label in labels.items():
        share = {
            name: [r["pmd_kb"] / r["mapped_kb"] for r in rs if r.get("mapped_kb")] for name, rs in runs[key].items()
        }
        if all(share.values()):
            lines.append(
                f"- {label}: share of the mapped segment in 2 MiB pages (median; its own cache per interpreter): "
                + ", ".join(f"{name} {statistics.median(xs):.0%}" for name, xs in share.items())
            )
    return lines


# --------------------------------------------------------------------------------------------
# The driver


def run_one(python: str, task: dict[str, Any], timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tbscope-ab-") as tmp:
        out = Path(tmp) / "result.json"
        task = {**task, "out": str(Path(tmp) / "stdout.txt"), "tmp": str(Path(tmp) / "logdir")}
        try:
            proc = subprocess.run(
                [python, str(Path(__file__).resolve()), "--task", json.dumps(task), str(out)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"took longer than --timeout {timeout:.0f} s"}
        if out.is_file():
            return json.loads(out.read_text())  # type: ignore[no-any-return]
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--task"]:
        task = json.loads(argv[1])
        try:
            result = _task(task)
        except Exception as e:  # reported by the driver with the row's name
            result = {"error": f"{type(e).__name__}: {e}"}
        Path(argv[2]).write_text(json.dumps(result))
        return 0

    if argv[:1] == ["--stats"]:
        # ab.py --stats RUN.json: the distributions table of a finished (or cut short) run.
        saved = json.loads(Path(argv[1]).read_text())
        if not isinstance(saved, dict) or "runs" not in saved:
            raise SystemExit(f"{argv[1]}: not the --json of an ab.py run")
        labels = saved.get("rows") or {k: k for k in saved["runs"]}
        print("\n".join(distributions({k: v for k, v in labels.items() if k not in saved["failed"]}, saved["runs"])))
        return 0

    import corpus
    import manyruns
    from benchutil import restore_snapshot, snapshot_sizes, warm_page_cache

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus.add_corpus_args(parser)
    parser.add_argument("--a", required=True, help="A's interpreter (the baseline build)")
    parser.add_argument("--b", required=True, help="B's interpreter (the build under test)")
    parser.add_argument("--aa", required=True, help="a second path to B's venv (the A/A pair)")
    parser.add_argument("--repeat", type=int, default=9, help="fresh-process runs per row and interpreter")
    parser.add_argument("--rows", default="", help="comma-separated subset of the rows (default: all)")
    parser.add_argument("--cold-cli", action="store_true", help="also `tbscope summary` on 100,000 runs, no cache")
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    spec, _ = corpus.specs_from_args(args)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    main_corpus = corpus.ensure_corpus(spec, root=args.corpus_root, jobs=args.jobs, log=log)
    many = manyruns.ensure(manyruns.ManyRunsSpec(), args.corpus_root, args.jobs, log=log)
    logdir = str(main_corpus.logdir)
    pythons = {"A": args.a, "B": args.b, "A/A": args.aa}
    scratch = Path(tempfile.mkdtemp(prefix="tbscope-ab-", dir=args.corpus_root))
    try:
        wanted = set(args.rows.split(",")) if args.rows else None
        grown = scratch / "grown"
        sizes: dict[str, int] = {}
        if wanted is None or wanted & {"reload_append", "reload_new_files"}:
            shutil.copytree(main_corpus.logdir, grown)
            sizes = snapshot_sizes(grown)
        crafted_dir = scratch / "crafted"
        if wanted is None or "crafted" in wanted:
            import crafted

            crafted.crafted(crafted_dir / "run" / "events.out.tfevents.1.crafted", 100 << 20)
        caches = {name: scratch / f"cache-{i}" for i, name in enumerate(pythons)}
        tag0 = corpus.tag_names(spec.tags)[0]
        rows: dict[str, tuple[str, dict[str, Any]]] = {
            "read1": ("read_scalars, threads=1", {"logdir": logdir}),
            "read2": ("read_scalars, threads=2", {"logdir": logdir}),
            "reload_unchanged": ("reload(), unchanged (threads=2)", {"logdir": logdir}),
            "reload_append": ("reload(), 1% appended", {"logdir": str(grown), "spec": spec.params()}),
            "reload_new_files": ("reload(), 1% in new files", {"logdir": str(grown), "spec": spec.params()}),
            "summary": ("scan().summary() (threads=2)", {"logdir": logdir}),
            "sql_groupby": ("sql GROUP BY run (threads=2)", {"logdir": logdir}),
            "sql_onetag": ("sql one tag (threads=2)", {"logdir": logdir, "tag": tag0}),
            "cache_warm": ("10M corpus, warm cache open (threads=2)", {"logdir": logdir}),
            "cli_ls_warm": ("100,000 runs: `tbscope ls`, warm cache", {"logdir": str(many)}),
            "cli_summary_warm": ("100,000 runs: `tbscope summary`, warm cache", {"logdir": str(many)}),
            "writer_add_scalar": ("writer: 200,000 add_scalar + close", {}),
            "writer_log": ("writer: 2,000 × log(step, 100 tags) + close", {}),
            "writer_histogram": ("writer: 20 × add_histogram(1M float32) + close", {}),
            "crafted": ("crafted damage: scan of 100 MB", {"logdir": str(crafted_dir)}),
        }
        if args.cold_cli:
            rows["cli_summary_cold"] = ("100,000 runs: `tbscope summary`, no cache", {"logdir": str(many)})
        if args.rows:
            keep = [r.strip() for r in args.rows.split(",") if r.strip()]
            unknown = sorted(set(keep) - set(rows))
            if unknown:
                parser.error(f"--rows: unknown {unknown}; choose from {', '.join(rows)}")
            rows = {k: v for k, v in rows.items() if k in keep}

        def task_for(key: str, name: str) -> dict[str, Any]:
            task = {"row": key, **rows[key][1]}
            if key == "cache_warm":
                task["cache"] = str(caches[name] / "open")
            elif key.endswith("_warm") and key.startswith("cli_"):
                task["cache"] = str(caches[name] / "cli")
            return task

        for name, py in pythons.items():
            # Each build writes its own caches (formats differ between builds), untimed.
            if "cache_warm" in rows:
                r = run_one(py, task_for("cache_warm", name), args.timeout)
                if "error" in r:
                    raise SystemExit(f"{name}: writing the cache: {r['error']}")
            if any(k.startswith("cli_") and k.endswith("_warm") for k in rows):
                r = run_one(py, {**task_for("cli_ls_warm", name)}, args.timeout)
                if "error" in r:
                    raise SystemExit(f"{name}: writing the many-runs cache: {r['error']}")
        warm_page_cache(main_corpus.logdir)
        if any(k.startswith("cli_") for k in rows):
            warm_page_cache(many)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {k: {n: [] for n in pythons} for k in rows}
        load = [os.getloadavg()[0]]
        started = time.perf_counter()
        order = list(pythons)
        failed: dict[str, str] = {}  # a row that failed once leaves the rounds, with its reason
        for i in range(args.repeat):
            for key in rows:
                for name in order if i % 2 == 0 else order[::-1]:
                    if key in failed:
                        break
                    r = run_one(pythons[name], task_for(key, name), args.timeout)
                    if key in ("reload_append", "reload_new_files"):
                        restore_snapshot(grown, sizes)
                    if "error" in r:
                        failed[key] = f"{name}: {r['error']}"
                        log(f"  {key} dropped: {failed[key]}")
                        break
                    runs[key][name].append(r)
                    log(f"  round {i + 1}/{args.repeat} {key} {name}: {r['wall']:.3f} s wall, {r['cpu']:.3f} s CPU")
            order = order[1:] + order[:1]  # who goes first rotates too
            load.append(os.getloadavg()[0])
            if args.json is not None:
                # After every round: a run cut short still leaves its data.
                args.json.write_text(json.dumps({"pythons": pythons, "runs": runs, "failed": failed}))
        elapsed = time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def med(key: str, name: str, what: str) -> float:
        return float(statistics.median(r[what] for r in runs[key][name]))

    lines = [
        f"A/B over {args.repeat} interleaved fresh-process runs per row and interpreter "
        f"(A = `{args.a}`, B = `{args.b}`, A/A = B's venv by a second path `{args.aa}`); "
        f"load average {min(load):.1f}-{max(load):.1f} during the {elapsed / 60:.0f} min run.",
        "",
        "| row | A wall (s) | A CPU (s) | B wall (s) | B CPU (s) | B/A wall | B/A CPU | A/A wall | A/A CPU | same result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, (label, _) in rows.items():
        if key in failed:
            lines.append(f"| {label} | failed: {failed[key]} | | | | | | | | |")
            continue
        a_w, a_c, b_w, b_c = med(key, "A", "wall"), med(key, "A", "cpu"), med(key, "B", "wall"), med(key, "B", "cpu")
        aa_w, aa_c = med(key, "A/A", "wall"), med(key, "A/A", "cpu")
        same = len({json.dumps(r["result"]) for n in pythons for r in runs[key][n]}) == 1
        lines.append(
            f"| {label} | {a_w:.3f} | {a_c:.3f} | {b_w:.3f} | {b_c:.3f} | {b_w / a_w:.2f} | {b_c / a_c:.2f} | "
            f"{aa_w / b_w:.2f} | {aa_c / b_c:.2f} | {'yes' if same else '**no**'} |"
        )
    lines += ["", *distributions({k: v[0] for k, v in rows.items() if k not in failed}, runs)]
    lines += ["", "Not run here:", ""] + [f"- {k}: {v}." for k, v in SKIPPED.items()]
    if not args.cold_cli:
        lines.append("- 100,000 runs, cold `tbscope summary`: 15-20 s a run under load; `--cold-cli` adds it.")
    print("\n".join(lines))
    if args.json is not None:
        args.json.write_text(
            json.dumps({"pythons": pythons, "rows": {k: v[0] for k, v in rows.items()}, "runs": runs, "failed": failed})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
