"""tbscope benchmark: "load all scalars into a pandas DataFrame", side by side.

    .venv/bin/python bench/run.py                  # full run (10M-event corpus), what `make bench` does
    .venv/bin/python bench/run.py --quick          # smoke test on a tiny corpus
    .venv/bin/python bench/run.py --only tbscope,floor --threads 1,2

Tools: tbscope.read_scalars (per --threads), tbparse's SummaryReader, TensorBoard's
EventAccumulator, and the floor (read every event file whole and CRC32C it, one thread).
Every measurement runs in a fresh subprocess (bench/worker.py) with a warm page cache; the
median of --repeat runs is reported. A baseline projected to take longer than --slow-threshold
seconds on the main corpus is timed once on the subset corpus instead, and tbscope and the floor
are timed on the subset too so its ratios compare like with like. Each tool's rows are checked
against the table the generator wrote (PASS/FAIL). tbscope.scan(...).reload() is timed for an
unchanged logdir, 1% appended to existing files and 1% added as new files. The query layer
(`--only query`) times summary(), a GROUP BY run SQL query and a one-tag SQL query against a plain
read with the same threads.

Results: a markdown table on stdout and in bench/results/latest.md, data in latest.json.
Exit status 1 when any check fails or a tool errors (a missing tbscope is a skip, not an error).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus as corpus_mod
from benchutil import (
    BENCH_DIR,
    canonical_digest,
    environment,
    human_bytes,
    restore_snapshot,
    snapshot_sizes,
    warm_page_cache,
)
from corpus import Corpus

WORKER = BENCH_DIR / "worker.py"
TOOLS = ("tbscope", "tbparse", "ea", "floor", "reload", "query", "cache")
ALIASES = {"eventaccumulator": "ea", "event_accumulator": "ea"}
BASELINES = ("tbparse", "ea")
TOOL_NAMES = {
    "tbscope": "tbscope.read_scalars",
    "tbparse": "tbparse SummaryReader",
    "ea": "TensorBoard EventAccumulator",
    "floor": "floor: read + crc32c",
}
GROW_FRACTION = 0.01
MB = 1 << 20

# Targets from the project brief (docs/architecture.md budget: ~100 ns per scalar per thread).
TARGET_SECONDS = {1: 1.0, 2: 0.5}  # on the 10M-event corpus
TARGET_EVENTS = 10_000_000
TARGET_FLOOR_RATIO = 2.0
TARGET_RSS_FACTOR, TARGET_RSS_SLACK = 1.5, 50 * MB
TARGET_RELOAD = {"unchanged": 0.05, "append": 0.10, "new_files": 0.10}
# Issue #4: summary and a GROUP BY run query within 1.5x a plain read; a one-tag query decodes
# at most 10% of the rows a full read decodes.
QUERY_NAMES = {
    "summary": "tbscope.scan(logdir).summary()",
    "sql_groupby": "tbscope.sql: GROUP BY run over all scalars",
    "sql_onetag": "tbscope.sql: one tag (WHERE tag = ...)",
}
TARGET_QUERY_RATIO = 1.5
TARGET_ONE_TAG_DECODED = 0.10


# --------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Measurement:
    """Repetitions of one (tool, corpus, threads) measurement."""

    tool: str
    corpus: Corpus
    threads: int
    runs: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"  # ok | skipped | error
    reason: str = ""
    check: str = ""  # PASS | FAIL ... | "" (not applicable)
    note: str = ""

    @property
    def label(self) -> str:
        name = TOOL_NAMES.get(self.tool, self.tool)
        return f"{name} (threads={self.threads})" if self.tool in ("tbscope", "reload") else name

    def median(self, key: str = "seconds") -> float:
        return float(statistics.median(run[key] for run in self.runs))

    def max(self, key: str) -> float:
        return float(max(run[key] for run in self.runs))

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "label": self.label,
            "corpus": self.corpus.spec.name,
            "threads": self.threads,
            "status": self.status,
            "reason": self.reason,
            "check": self.check,
            "note": self.note,
            "runs": self.runs,
        }


class Bench:
    def __init__(self, args: argparse.Namespace, main: Corpus, subset: Corpus | None) -> None:
        self.args = args
        self.main = main
        self.subset = subset
        self.loads: list[Measurement] = []
        self.reloads: list[tuple[str, Measurement]] = []
        self.queries: list[tuple[str, Measurement]] = []
        # The incremental cache (bench/cachebench.py): open and CLI scenarios, raw results.
        self.cache_open: dict[str, Any] | None = None
        self.cache_cli: dict[str, Any] | None = None
        self.cache_error = ""
        self._expected: dict[tuple[str, int], dict[str, Any]] = {}

    # -- plumbing ------------------------------------------------------------------------

    def log(self, message: str) -> None:
        print(message, flush=True)

    def worker(self, task: dict[str, Any]) -> dict[str, Any]:
        """Run one measurement in a fresh interpreter and return its result dict."""
        with tempfile.TemporaryDirectory(prefix="tbscope-bench-") as tmp:
            out = Path(tmp) / "result.json"
            proc = subprocess.run(
                [sys.executable, str(WORKER), json.dumps(task), str(out)],
                capture_output=True,
                text=True,
                timeout=self.args.timeout,
            )
            if out.is_file():
                result: dict[str, Any] = json.loads(out.read_text())
                return result
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            return {"status": "error", "reason": f"worker exited {proc.returncode}: " + " | ".join(tail)}

    def expected(self, corpus: Corpus, extra_steps: int = 0) -> dict[str, Any]:
        """Digest of the rows the generator wrote (computed from its formula, not read back)."""
        key = (corpus.spec.name, extra_steps)
        if key not in self._expected:
            table = corpus_mod.expected_table(corpus.spec, extra_steps)
            self._expected[key] = canonical_digest(
                table["run_names"],
                table["run_codes"],
                table["tag_names"],
                table["tag_codes"],
                table["steps"],
                table["values"],
            ).to_json()
        return self._expected[key]

    def check(self, results: list[dict[str, Any]], expected: dict[str, Any]) -> str:
        for result in results:
            got = result.get("digest")
            if got is None:
                continue
            if got != expected:
                return (
                    f"FAIL ({got['rows']:,} rows, expected {expected['rows']:,}; digest differs)"
                    if got["rows"] != expected["rows"]
                    else "FAIL (same row count, different rows)"
                )
        return "PASS" if any("digest" in r for r in results) else ""

    # -- load measurements ---------------------------------------------------------------

    def measure(self, tool: str, corpus: Corpus, threads: int, repeats: int) -> Measurement:
        m = Measurement(tool=tool, corpus=corpus, threads=threads)
        warm_page_cache(corpus.logdir)  # untimed: timings measure parsing, not the disk
        for i in range(repeats):
            task = {"tool": tool, "logdir": str(corpus.logdir), "threads": threads}
            result = self.worker(task)
            if result["status"] != "ok":
                m.status, m.reason = result["status"], result.get("reason", "")
                self.log(f"  {m.label} on {corpus.spec.name}: {m.status}: {m.reason}")
                return m
            m.runs.append(result)
            self.log(f"  {m.label} on {corpus.spec.name}: run {i + 1}/{repeats}: {result['seconds']:.3f}s")
        m.check = self.check(m.runs, self.expected(corpus))
        if m.check.startswith("FAIL"):
            self.log(f"  {m.label} on {corpus.spec.name}: {m.check}")
        return m

    def measure_baseline(self, tool: str) -> Measurement:
        """Time a slow baseline on the main corpus if that fits --slow-threshold, else once on
        the subset. One probe run decides: on the subset when there is one (cheap), projected to
        the main corpus by event count."""
        threshold, repeats = self.args.slow_threshold, self.args.repeat
        probe_corpus = self.subset or self.main
        probe = self.measure(tool, probe_corpus, 1, 1)
        if probe.status != "ok":
            return probe
        projected = probe.median() * self.main.events / probe_corpus.events
        if projected > threshold:
            probe.note = (
                f"1 run on the subset (projected {projected:.0f}s on the main corpus)"
                if self.subset
                else "1 run (slower than --slow-threshold)"
            )
            return probe
        if probe_corpus is self.main:
            rest = self.measure(tool, self.main, 1, repeats - 1) if repeats > 1 else None
            if rest is not None and rest.status == "ok":
                probe.runs.extend(rest.runs)
                probe.check = self.check(probe.runs, self.expected(self.main))
            return probe
        return self.measure(tool, self.main, 1, repeats)

    def run_loads(self, only: set[str], threads: list[int]) -> None:
        repeats = self.args.repeat
        fast = [("floor", 1)] if "floor" in only else []
        fast += [("tbscope", t) for t in threads] if "tbscope" in only else []
        for tool, t in fast:
            self.log(f"{TOOL_NAMES[tool]} (threads={t}), {self.main.spec.name}")
            self.loads.append(self.measure(tool, self.main, t, repeats))
            if self.loads[-1].status == "skipped" and tool == "tbscope":
                break  # the other thread counts would skip for the same reason
        on_subset = False
        for tool in BASELINES:
            if tool in only:
                self.log(f"{TOOL_NAMES[tool]}")
                m = self.measure_baseline(tool)
                self.loads.append(m)
                on_subset |= self.subset is not None and m.corpus is self.subset
        if on_subset and self.subset is not None:
            # Like-for-like ratios for the baselines that only ran on the subset.
            for tool, t in fast:
                if any(m.tool == tool and m.status == "skipped" for m in self.loads):
                    continue
                self.log(f"{TOOL_NAMES[tool]} (threads={t}), {self.subset.spec.name}")
                self.loads.append(self.measure(tool, self.subset, t, repeats))

    # -- reload scenarios ----------------------------------------------------------------

    def run_reloads(self, threads: int) -> None:
        """First load vs reload() on the main corpus: unchanged, 1% appended, 1% in new files.

        The growing scenarios work on a scratch copy (next to the corpus cache, so on the same
        disk), restored after every repetition by truncating appended files and deleting new ones.
        """
        spec = self.main.spec
        extra = corpus_mod.grow_steps(spec, GROW_FRACTION)
        scratch: Path | None = None
        try:
            for scenario in ("unchanged", "append", "new_files"):
                self.log(f"tbscope reload: {scenario} (threads={threads})")
                if scenario == "unchanged":
                    logdir = self.main.logdir  # nothing is written, so the cache itself serves
                else:
                    if scratch is None:
                        scratch = Path(tempfile.mkdtemp(prefix=".scratch-", dir=self.main.logdir.parent.parent))
                        shutil.copytree(self.main.logdir, scratch / "logdir")
                    logdir = scratch / "logdir"
                sizes = snapshot_sizes(logdir)
                m = Measurement(tool="reload", corpus=self.main, threads=threads)
                warm_page_cache(logdir)
                for i in range(self.args.repeat):
                    task = {
                        "tool": "reload",
                        "logdir": str(logdir),
                        "threads": threads,
                        "scenario": scenario,
                        "spec": spec.params(),
                        "fraction": GROW_FRACTION,
                    }
                    try:
                        result = self.worker(task)
                    finally:
                        restore_snapshot(logdir, sizes)  # the next run starts from the same bytes
                    if result["status"] != "ok":
                        m.status, m.reason = result["status"], result.get("reason", "")
                        self.log(f"  {m.status}: {m.reason}")
                        break
                    m.runs.append(result)
                    self.log(
                        f"  run {i + 1}/{self.args.repeat}: first {result['first_seconds']:.3f}s, "
                        f"reload {result['reload_seconds']:.4f}s"
                    )
                if m.status == "ok":
                    m.check = self.check(m.runs, self.expected(self.main, 0 if scenario == "unchanged" else extra))
                self.reloads.append((scenario, m))
                if m.status == "skipped":
                    break  # every scenario needs the same API
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    # -- query layer (issue #4) ------------------------------------------------------------

    def run_queries(self, threads: int) -> None:
        """summary(), a GROUP BY run query and a one-tag query on the main corpus, each against
        a plain read (tbscope.read_scalars) with the same threads, measured here if not yet."""
        if _reference_at(self.loads, self.main, threads) is None:
            self.log(f"{TOOL_NAMES['tbscope']} (threads={threads}), {self.main.spec.name} (reference for the queries)")
            self.loads.append(self.measure("tbscope", self.main, threads, self.args.repeat))
        for query in QUERY_NAMES:
            self.log(f"{QUERY_NAMES[query]} (threads={threads}), {self.main.spec.name}")
            m = Measurement(tool="query", corpus=self.main, threads=threads)
            warm_page_cache(self.main.logdir)
            for i in range(self.args.repeat):
                task = {
                    "tool": "query",
                    "query": query,
                    "logdir": str(self.main.logdir),
                    "threads": threads,
                    "spec": self.main.spec.params(),
                }
                result = self.worker(task)
                if result["status"] != "ok":
                    m.status, m.reason = result["status"], result.get("reason", "")
                    self.log(f"  {m.status}: {m.reason}")
                    break
                m.runs.append(result)
                self.log(f"  run {i + 1}/{self.args.repeat}: {result['seconds']:.3f}s, {result['check']}")
            if m.runs:
                fails = [r["check"] for r in m.runs if r["check"] != "PASS"]
                m.check = fails[0] if fails else "PASS"
            self.queries.append((query, m))
            if m.status == "skipped":
                break  # the others need the same API


def _reference_at(loads: list[Measurement], corpus: Corpus, threads: int) -> Measurement | None:
    """tbscope.read_scalars on `corpus` with exactly `threads` threads: the plain read."""
    found = [
        m
        for m in loads
        if m.tool == "tbscope" and m.corpus is corpus and m.threads == threads and m.status == "ok" and m.runs
    ]
    return found[0] if found else None


# --------------------------------------------------------------------------------------------
# Report


def _fmt_seconds(s: float) -> str:
    return f"{s:.3f}" if s < 10 else f"{s:.1f}"


def _ratio(r: float) -> str:
    return f"{r:.2f}×" if r < 10 else f"{r:.0f}×"


def _rate(events: float) -> str:
    if events >= 1e6:
        return f"{events / 1e6:.1f} M/s"
    return f"{events / 1e3:.0f} k/s"


def _reference(loads: list[Measurement], tool: str, corpus: Corpus) -> Measurement | None:
    """The floor, or tbscope at its fewest threads, on the same corpus (ratios are like for like)."""
    found = [m for m in loads if m.tool == tool and m.corpus is corpus and m.status == "ok" and m.runs]
    return min(found, key=lambda m: m.threads) if found else None


def load_table(loads: list[Measurement]) -> list[str]:
    lines = [
        "| tool | corpus (scalar events) | runs | time (s, median) | events/s | peak RSS Δ | "
        "returned columns | RSS Δ / columns | × floor | × tbscope | rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in loads:
        corpus_cell = f"{m.corpus.spec.name} ({m.corpus.events / 1e6:.2f}M)"
        if m.status != "ok":
            lines.append(f"| {m.label} | {corpus_cell} | – | {m.status}: {m.reason} | | | | | | | |")
            continue
        seconds = m.median()
        floor = _reference(loads, "floor", m.corpus)
        ref = _reference(loads, "tbscope", m.corpus)
        rss = m.max("peak_rss_delta")
        cols = m.runs[0].get("column_bytes")
        cells = [
            m.label + (" ¹" if m.note else ""),
            corpus_cell,
            str(len(m.runs)),
            _fmt_seconds(seconds),
            _rate(m.corpus.events / seconds),
            human_bytes(rss),
            human_bytes(cols) if cols is not None else "–",
            f"{rss / cols:.2f}" if cols else "–",
            _ratio(seconds / floor.median()) if floor is not None else "–",
            _ratio(seconds / ref.median()) if ref is not None else "–",
            m.check or "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [m for m in loads if m.note]
    if notes:
        lines.append("")
        lines += [f"- ¹ {m.label}: {m.note}." for m in notes]
    return lines


def reload_table(reloads: list[tuple[str, Measurement]]) -> list[str]:
    lines = [
        "| scenario | threads | runs | first load (s) | reload() (s) | reload / first | "
        "scalars().to_pandas() after (s) | rows after | rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    describe = {
        "unchanged": "unchanged logdir",
        "append": f"{GROW_FRACTION:.0%} appended to existing files",
        "new_files": f"{GROW_FRACTION:.0%} added as new files",
    }
    for scenario, m in reloads:
        if m.status != "ok":
            lines.append(f"| {describe[scenario]} | {m.threads} | – | {m.status}: {m.reason} | | | | | |")
            continue
        first, reload = m.median("first_seconds"), m.median("reload_seconds")
        lines.append(
            f"| {describe[scenario]} | {m.threads} | {len(m.runs)} | {_fmt_seconds(first)} | {reload:.4f} | "
            f"{reload / first:.1%} | {_fmt_seconds(m.median('to_pandas_after_seconds'))} | "
            f"{m.runs[0]['rows']:,} | {m.check or '–'} |"
        )
    return lines


def query_table(bench: Bench) -> list[str]:
    lines = [
        "| measurement | corpus (scalar events) | threads | runs | time (s, median) | × plain read | "
        "rows decoded | decoded / full read | peak RSS Δ | result |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for query, m in bench.queries:
        corpus_cell = f"{m.corpus.spec.name} ({m.corpus.events / 1e6:.2f}M)"
        if m.status != "ok":
            lines.append(
                f"| {QUERY_NAMES[query]} | {corpus_cell} | {m.threads} | – | {m.status}: {m.reason} | | | | | |"
            )
            continue
        seconds = m.median()
        ref = _reference_at(bench.loads, m.corpus, m.threads)
        decoded = m.runs[0].get("rows_decoded")
        cells = [
            QUERY_NAMES[query],
            corpus_cell,
            str(m.threads),
            str(len(m.runs)),
            _fmt_seconds(seconds),
            _ratio(seconds / ref.median()) if ref is not None else "–",
            f"{decoded:,}" if decoded is not None else "–",
            f"{decoded / m.corpus.events:.1%}" if decoded is not None else "–",
            human_bytes(m.max("peak_rss_delta")),
            m.check or "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def targets(bench: Bench) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) rows for tbscope; verdicts are n/a below the 10M corpus."""
    rows: list[tuple[str, str, str]] = []
    main = bench.main
    full_size = main.events >= TARGET_EVENTS
    size_note = "" if full_size else f"n/a (corpus has {main.events:,} < {TARGET_EVENTS:,} events)"

    def verdict(ok: bool) -> str:
        # Fixed costs dominate a small corpus, so its ratios only hint at the real verdict.
        return _verdict(ok) + ("" if full_size else " (indicative: small corpus)")

    floor = _reference(bench.loads, "floor", main)
    for m in bench.loads:
        if m.tool != "tbscope" or m.corpus is not main or m.status != "ok":
            continue
        seconds = m.median()
        if m.threads in TARGET_SECONDS:
            limit = TARGET_SECONDS[m.threads]
            rows.append(
                (
                    f"all scalars → pandas, threads={m.threads} ≤ {limit} s",
                    f"{seconds:.3f} s",
                    size_note or _verdict(seconds <= limit),
                )
            )
        if m.threads == 1 and floor is not None:
            ratio = seconds / floor.median()
            rows.append(
                (f"threads=1 ≤ {TARGET_FLOOR_RATIO:.0f}× floor", f"{ratio:.2f}×", verdict(ratio <= TARGET_FLOOR_RATIO))
            )
        rss, cols = m.max("peak_rss_delta"), m.runs[0]["column_bytes"]
        budget = TARGET_RSS_FACTOR * cols + TARGET_RSS_SLACK
        rows.append(
            (
                f"threads={m.threads}: peak RSS Δ ≤ 1.5 × columns + 50 MiB ({human_bytes(budget)})",
                human_bytes(rss),
                verdict(rss <= budget),
            )
        )
    for scenario, m in bench.reloads:
        if m.status != "ok":
            continue
        ratio = m.median("reload_seconds") / m.median("first_seconds")
        limit = TARGET_RELOAD[scenario]
        rows.append((f"reload(), {scenario}: < {limit:.0%} of first load", f"{ratio:.1%}", verdict(ratio < limit)))
    for query, m in bench.queries:
        if m.status != "ok" or not m.runs:
            continue
        if query == "sql_onetag":
            decoded = m.runs[0].get("rows_decoded")
            if decoded is not None:
                share = decoded / main.events
                rows.append(
                    (
                        f"one-tag SQL decodes ≤ {TARGET_ONE_TAG_DECODED:.0%} of a full read",
                        f"{share:.1%}",
                        verdict(share <= TARGET_ONE_TAG_DECODED),
                    )
                )
            continue
        ref = _reference_at(bench.loads, m.corpus, m.threads)
        if ref is None:
            continue
        ratio = m.median() / ref.median()
        rows.append(
            (
                f"{QUERY_NAMES[query]} ≤ {TARGET_QUERY_RATIO}× plain read (threads={m.threads})",
                f"{ratio:.2f}×",
                verdict(ratio <= TARGET_QUERY_RATIO),
            )
        )
    if bench.cache_open is not None or bench.cache_cli is not None:
        import cachebench

        for target, measured, met in cachebench.targets(bench.cache_open, bench.cache_cli):
            rows.append((target, measured, verdict(met == "met")))
    return rows


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def run_cache(bench: Bench, threads: int) -> None:
    """The incremental cache's scenarios (bench/cachebench.py): the main corpus, then a logdir of
    100,000 small runs (2,000 with --quick)."""
    import cachebench
    import manyruns

    args = bench.args
    try:
        bench.log(f"tbscope cache: open (threads={threads}), {bench.main.spec.name}")
        bench.cache_open = cachebench.bench_open(
            bench.main.logdir, args.corpus_root, threads, args.repeat, bench.expected(bench.main), bench.log
        )
        spec = manyruns.ManyRunsSpec(runs=2_000 if args.quick else 100_000)
        logdir = manyruns.ensure(spec, args.corpus_root, args.jobs, log=bench.log)
        bench.log(f"tbscope cache: ls and summary, {spec.name}")
        bench.cache_cli = cachebench.bench_cli(logdir, args.corpus_root, args.repeat, bench.log)
    except RuntimeError as e:
        bench.cache_error = str(e)
        bench.log(f"  error: {e}")


def render(bench: Bench, env: dict[str, Any], elapsed: float) -> str:
    corpora = [c for c in (bench.main, bench.subset) if c is not None]
    pk = env["packages"]
    out = [
        f"## tbscope benchmark: all scalars → pandas ({env['date']})",
        "",
        f"{env['cpu']}, {env['cpus_usable']} CPUs, {env['platform']}, Python {env['python']}; "
        f"tbscope {pk['tbscope']}, tbparse {pk['tbparse']}, tensorboard {pk['tensorboard']}, "
        f"tensorboardX {pk['tensorboardX']}, pandas {pk['pandas']}; commit {env['commit']}. "
        f"Warm page cache, fresh process per run, median of runs.",
        "",
        "| corpus | runs × tags × steps | scalar events | event files | size | bytes/event |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in corpora:
        s = c.spec
        out.append(
            f"| {s.name} | {s.runs} × {s.tags} × {s.steps:,} | {c.events:,} | {c.files} | "
            f"{human_bytes(c.bytes)} | {c.bytes / c.events:.1f} |"
        )
    if bench.loads:
        out += ["", "### Load all scalars into a pandas DataFrame", ""] + load_table(bench.loads)
    if bench.reloads:
        out += ["", "### Live reload: `tbscope.scan(logdir).reload()`", ""] + reload_table(bench.reloads)
    if bench.queries:
        out += [
            "",
            "### Query layer: summary and SQL (`tbscope.scan(...).summary()`, `tbscope.sql`)",
            "",
        ] + query_table(bench)
    if bench.cache_open is not None or bench.cache_cli is not None or bench.cache_error:
        import cachebench

        out += ["", "### Incremental cache: cold read vs warm open (`scan(..., cache=...)`)", ""]
        out += (
            [f"error: {bench.cache_error}"]
            if bench.cache_error
            else cachebench.render(bench.cache_open, bench.cache_cli, human_bytes)
        )
    rows = targets(bench)
    if rows:
        out += ["", "### Targets", "", "| target | measured | verdict |", "|---|---:|---|"]
        out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    out += [
        "",
        f"Benchmark wall time {elapsed:.0f}s. Peak RSS Δ = peak RSS during the call minus RSS after "
        "`import tbscope, pandas` and the tool's imports; returned columns = "
        "`DataFrame.memory_usage(index=False, deep=False).sum()`.",
    ]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_mod.add_corpus_args(parser)
    parser.add_argument(
        "--only", default=",".join(TOOLS), help=f"comma-separated subset of {', '.join(TOOLS)} (eventaccumulator = ea)"
    )
    parser.add_argument("--threads", default="1,2", help="tbscope thread counts (default 1,2); reload uses the largest")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, median reported (default 3)")
    parser.add_argument(
        "--slow-threshold",
        type=float,
        default=60.0,
        help="baselines projected slower than this (s) on the main corpus run once on the subset",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="per-run subprocess timeout (s)")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = parser.parse_args(argv)
    names = [name.strip().lower() for name in args.only.split(",") if name.strip()]
    only = {ALIASES.get(name, name) for name in names}
    unknown = only - set(TOOLS)
    if unknown:
        parser.error(f"--only: unknown tool(s) {', '.join(sorted(unknown))}; choose from {', '.join(TOOLS)}")
    args.only_set = only
    args.thread_counts = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    if not args.thread_counts or min(args.thread_counts) < 1 or args.repeat < 1:
        parser.error("--threads needs positive integers and --repeat >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    main_spec, subset_spec = corpus_mod.specs_from_args(args)
    main_corpus = corpus_mod.ensure_corpus(main_spec, root=args.corpus_root, jobs=args.jobs)
    needs_subset = bool(args.only_set & set(BASELINES))
    subset: Corpus | None = None
    if subset_spec is not None and needs_subset:
        subset = corpus_mod.ensure_corpus(subset_spec, root=args.corpus_root, jobs=args.jobs)
    for c in (main_corpus, subset):
        if c is not None:
            print(f"corpus {c.spec.name}: {c.events:,} scalar events, {c.files} files, {human_bytes(c.bytes)}")

    if importlib.util.find_spec("tbscope") is None and args.only_set & {"tbscope", "reload"}:
        print(
            "tbscope is not importable in this interpreter: its rows will be skipped "
            "(build it with `make build` / `maturin develop`)."
        )

    bench = Bench(args, main_corpus, subset)
    bench.run_loads(args.only_set, args.thread_counts)
    if "reload" in args.only_set:
        bench.run_reloads(max(args.thread_counts))
    if "query" in args.only_set:
        bench.run_queries(max(args.thread_counts))
    if "cache" in args.only_set:
        run_cache(bench, max(args.thread_counts))

    env = environment(
        ("tbscope", "tbparse", "tensorboard", "tensorboardX", "pandas", "numpy", "pyarrow", "protobuf", "crc32c")
    )
    report = render(bench, env, time.perf_counter() - started)
    print("\n" + report)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / "latest.md").write_text(report)
    payload = {
        "environment": env,
        "corpora": [c.to_json() for c in (main_corpus, subset) if c is not None],
        "expected": {f"{k[0]}+{k[1]}": v for k, v in bench._expected.items()},
        "loads": [m.to_json() for m in bench.loads],
        "reloads": [{"scenario": s, **m.to_json()} for s, m in bench.reloads],
        "queries": [{"query": q, **m.to_json()} for q, m in bench.queries],
        "cache": {"open": bench.cache_open, "cli": bench.cache_cli, "error": bench.cache_error},
        "targets": [{"target": a, "measured": b, "verdict": c} for a, b, c in targets(bench)],
    }
    (args.results_dir / "latest.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {args.results_dir / 'latest.md'} and latest.json")

    measurements = bench.loads + [m for _, m in bench.reloads] + [m for _, m in bench.queries]
    failed = [m for m in measurements if m.status == "error" or m.check.startswith("FAIL")]
    cache_checks = [bench.cache_open["check"]] if bench.cache_open else []
    cache_checks += [bench.cache_cli[c]["check"] for c in ("read", "ls", "summary")] if bench.cache_cli else []
    cache_failed = bool(bench.cache_error) or any(c.startswith("FAIL") for c in cache_checks)
    return 1 if failed or cache_failed else 0


if __name__ == "__main__":
    sys.exit(main())
