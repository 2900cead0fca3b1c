"""One benchmark measurement, run by run.py in a fresh interpreter.

    python bench/worker.py '<task json>' <result.json>

A fresh process per measurement makes peak RSS attributable to one tool and one call, and keeps
caches (tbscope's, the allocator's, Python's) from leaking between tools and repetitions.

Memory is measured as peak RSS during the call minus RSS after `import tbscope, pandas` and the
tool's own imports: the peak (VmHWM) is reset just before the call through /proc/self/clear_refs,
falling back to getrusage's lifetime ru_maxrss where that is not allowed.
The row check (an order-independent digest of (run, tag, step, float32 value)) runs after the
timing and memory readings, so it costs neither.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Imports every measurement shares, before the baseline RSS reading.
import numpy as np
import pandas as pd
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import canonical_digest, event_files, run_dirs, run_name

# tbscope may not be built yet; measurements that need it then report a skip. Imported here,
# before the baseline RSS reading, for every tool, so all deltas share one baseline.
tbscope: Any = None
TBSCOPE_IMPORT_ERROR = ""
try:
    tbscope = importlib.import_module("tbscope")
except ImportError as exc:  # pragma: no cover - depends on the build
    TBSCOPE_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


class Skip(Exception):
    """The tool or API under test is not available; reported, not a failure."""


# --------------------------------------------------------------------------------------------
# Memory


def _rss() -> int:
    return int(psutil.Process().memory_info().rss)


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0). Returns False where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _peak_rss(reset_ok: bool) -> int:
    if reset_ok:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    # Lifetime peak: includes import-time peaks, so it can only overstate the delta.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _measured(call: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``call()``'s result, and its wall time and peak RSS (over the RSS before it)."""
    gc.collect()
    baseline = _rss()
    reset_ok = _reset_peak()
    started = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - started
    peak = _peak_rss(reset_ok)
    return result, {
        "seconds": seconds,
        "baseline_rss": baseline,
        "peak_rss": peak,
        "peak_rss_delta": max(0, peak - baseline),
        "peak_method": "VmHWM after clear_refs" if reset_ok else "ru_maxrss (lifetime)",
    }


# --------------------------------------------------------------------------------------------
# Loaders: each returns the scalar DataFrame the way a user of that tool would build it.


def _require_tbscope(*names: str) -> Any:
    if tbscope is None:
        raise Skip(f"tbscope not importable ({TBSCOPE_IMPORT_ERROR})")
    for name in names:
        if not hasattr(tbscope, name):
            raise Skip(f"tbscope has no {name}() yet")
    return tbscope


def prepare_tbscope(task: dict[str, Any]) -> Callable[[], pd.DataFrame]:
    tb = _require_tbscope("read_scalars")
    logdir, threads = task["logdir"], task["threads"]
    return lambda: tb.read_scalars(logdir, threads=threads)


def prepare_tbparse(task: dict[str, Any]) -> Callable[[], pd.DataFrame]:
    from tbparse import SummaryReader

    def load() -> pd.DataFrame:
        # event_types={"scalars"} spares tbparse from building histogram/image/text frames it
        # would otherwise parse too: the fastest way a tbparse user can ask for scalars.
        reader = SummaryReader(task["logdir"], extra_columns={"dir_name", "wall_time"}, event_types={"scalars"})
        return reader.scalars

    return load


def prepare_ea(task: dict[str, Any]) -> Callable[[], pd.DataFrame]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    # 0 means "keep everything" for every kind; the defaults would sample scalars down to 10k.
    guidance = {kind: 0 for kind in ea.STORE_EVERYTHING_SIZE_GUIDANCE}
    logdir = task["logdir"]

    def load() -> pd.DataFrame:
        run_list: list[str] = []
        tag_list: list[str] = []
        run_codes, tag_codes, steps, walls, values = [], [], [], [], []
        tag_index: dict[str, int] = {}
        for run_dir in run_dirs(logdir):  # TensorBoard's multiplexer makes one accumulator per run
            acc = ea.EventAccumulator(str(run_dir), size_guidance=guidance)
            acc.Reload()
            run_code = len(run_list)
            run_list.append(run_name(logdir, run_dir))
            for tag in acc.Tags()[ea.SCALARS]:
                events = acc.Scalars(tag)  # list of ScalarEvent(wall_time, step, value)
                code = tag_index.setdefault(tag, len(tag_list))
                if code == len(tag_list):
                    tag_list.append(tag)
                n = len(events)
                # ScalarEvent is a dataclass: one pass per field through np.fromiter is the
                # cheapest pure-Python route from its objects to columns.
                steps.append(np.fromiter((e.step for e in events), np.int64, n))
                walls.append(np.fromiter((e.wall_time for e in events), np.float64, n))
                values.append(np.fromiter((e.value for e in events), np.float64, n))
                run_codes.append(np.full(len(events), run_code, dtype=np.int32))
                tag_codes.append(np.full(len(events), code, dtype=np.int32))

        def cat(parts: list[Any], dtype: Any) -> Any:
            return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)

        return pd.DataFrame(
            {
                "run": pd.Categorical.from_codes(cat(run_codes, np.int32), run_list),
                "tag": pd.Categorical.from_codes(cat(tag_codes, np.int32), tag_list),
                "step": cat(steps, np.int64),
                "wall_time": cat(walls, np.float64),
                "value": cat(values, np.float64),
            }
        )

    return load


def prepare_floor(task: dict[str, Any]) -> Callable[[], int]:
    import crc32c

    logdir = task["logdir"]

    def load() -> int:
        # The least any reader must do: find the files, read every byte, checksum every byte.
        total = 0
        for path in event_files(logdir):
            with open(path, "rb") as handle:
                data = handle.read()
            crc32c.crc32c(data)
            total += len(data)
        return total

    return load


PREPARE: dict[str, Callable[[dict[str, Any]], Callable[[], Any]]] = {
    "tbscope": prepare_tbscope,
    "tbparse": prepare_tbparse,
    "ea": prepare_ea,
    "floor": prepare_floor,
}


# --------------------------------------------------------------------------------------------
# Row check


def frame_digest(df: pd.DataFrame, run_column: str) -> dict[str, Any]:
    """Digest of a tool's scalar frame, with run names normalised to TensorBoard's spelling."""
    run_codes, run_uniques = pd.factorize(df[run_column])
    tag_codes, tag_uniques = pd.factorize(df["tag"])
    # tbparse spells the root run "" (dir_name); TensorBoard and tbscope spell it ".".
    runs = [str(name) if str(name) not in ("", ".") else "." for name in run_uniques]
    digest = canonical_digest(
        runs,
        run_codes,
        [str(t) for t in tag_uniques],
        tag_codes,
        df["step"].to_numpy(dtype=np.int64),
        df["value"].to_numpy(dtype=np.float64),
    )
    return digest.to_json()


RUN_COLUMN = {"tbscope": "run", "tbparse": "dir_name", "ea": "run"}


# --------------------------------------------------------------------------------------------
# Tasks


def measure_load(task: dict[str, Any]) -> dict[str, Any]:
    load = PREPARE[task["tool"]](task)
    result, out = _measured(load)
    if isinstance(result, pd.DataFrame):
        out["rows"] = len(result)
        out["columns"] = list(map(str, result.columns))
        out["dtypes"] = {str(k): str(v) for k, v in result.dtypes.items()}
        # Bytes held by the returned columns (not Python string objects they may point at).
        out["column_bytes"] = int(result.memory_usage(index=False, deep=False).sum())
        out["digest"] = frame_digest(result, RUN_COLUMN[task["tool"]])
    else:
        out["bytes_read"] = result
    return out


def measure_reload(task: dict[str, Any]) -> dict[str, Any]:
    """First load through a Logdir, then grow the logdir (untimed) and time `reload()`."""
    import corpus

    tb = _require_tbscope("scan")
    logdir = task["logdir"]
    logdir_obj = tb.scan(logdir, threads=task["threads"])
    if not hasattr(logdir_obj, "reload"):
        raise Skip("tbscope.Logdir has no reload() yet")
    started = time.perf_counter()
    first = logdir_obj.scalars().to_pandas()
    first_seconds = time.perf_counter() - started
    first_rows = len(first)
    del first

    added = 0
    if task["scenario"] != "unchanged":
        spec = corpus.CorpusSpec(**{k: v for k, v in task["spec"].items() if k != "generator_version"})
        added = corpus.grow(Path(logdir), spec, task["fraction"], task["scenario"])

    started = time.perf_counter()
    reload_result = logdir_obj.reload()
    reload_seconds = time.perf_counter() - started
    started = time.perf_counter()
    after = logdir_obj.scalars().to_pandas()
    after_seconds = time.perf_counter() - started
    return {
        "first_seconds": first_seconds,
        "first_rows": first_rows,
        "added_events": added,
        "reload_seconds": reload_seconds,
        "reload_returned": repr(reload_result)[:200],
        "to_pandas_after_seconds": after_seconds,
        "rows": len(after),
        "digest": frame_digest(after, "run"),
    }


# --------------------------------------------------------------------------------------------
# Query layer (issue #4): summary, GROUP BY run SQL, one-tag SQL. Timed like a load; checked
# against the generator's formula afterwards.

QUERIES = {
    "sql_groupby": "SELECT run, count(*) AS n, max(step) AS max_step, avg(value) AS mean FROM scalars GROUP BY run",
    "sql_onetag": "SELECT run, max(value) AS best FROM scalars WHERE tag = $tag GROUP BY run",
}


def measure_query(task: dict[str, Any]) -> dict[str, Any]:
    import corpus

    tb = _require_tbscope("scan", "sql")
    logdir, threads, query = task["logdir"], task["threads"], task["query"]
    spec = corpus.CorpusSpec(**{k: v for k, v in task["spec"].items() if k != "generator_version"})
    tag0 = corpus.tag_names(spec.tags)[0]
    if query == "summary":

        def call() -> Any:
            return tb.scan(logdir, threads=threads).summary()
    elif query == "sql_onetag":

        def call():
            return tb.sql(logdir, QUERIES[query], params={"tag": tag0}, threads=threads)
    else:

        def call():
            return tb.sql(logdir, QUERIES[query], threads=threads)

    import duckdb  # noqa: F401 - imported before the baseline, like each tool's own imports

    result, out = _measured(call)
    stats = getattr(result, "stats", {}).get("scalars")
    out["rows_decoded"] = stats.rows if stats is not None else None
    out["check"] = check_query(query, result, spec, tag0)
    return out


def check_query(query: str, result: Any, spec: Any, tag0: str) -> str:
    """PASS when the answer equals what the generator's formula says; FAIL with a reason."""
    import corpus

    exp = corpus.expected_table(spec)
    runs, tags = exp["run_names"], exp["tag_names"]
    df = pd.DataFrame(
        {
            "run": pd.Categorical.from_codes(exp["run_codes"], runs),
            "tag": pd.Categorical.from_codes(exp["tag_codes"], tags),
            "step": exp["steps"],
            "value": exp["values"].astype(np.float64),
        }
    )
    if query == "summary":
        got = result.set_index("run")
        g = df.groupby(["run", "tag"], observed=True, sort=False)
        # Rows are written in step order, so the last written is the last row of each series.
        want = pd.DataFrame(
            {
                "last": g["value"].last(),
                "min": g["value"].min(),
                "max": g["value"].max(),
                "argmin": df.loc[g["value"].idxmin(), "step"].to_numpy(),
                "argmax": df.loc[g["value"].idxmax(), "step"].to_numpy(),
            }
        )
        for (run, tag), row in want.iterrows():
            for stat, suffix in (
                ("last", "last"),
                ("min", "min"),
                ("max", "max"),
                ("argmin", "argmin_step"),
                ("argmax", "argmax_step"),
            ):
                v = got.at[run, f"{tag}:{suffix}"]
                if v != row[stat]:
                    return f"FAIL ({run} {tag}:{suffix} = {v}, expected {row[stat]})"
        return "PASS"
    got = result.to_pandas().set_index("run")
    if query == "sql_groupby":
        g = df.groupby("run", observed=True)
        if sorted(got.index) != sorted(runs):
            return "FAIL (runs differ)"
        if not (got.loc[runs, "n"].to_numpy() == g.size().loc[runs].to_numpy()).all():
            return "FAIL (row counts per run differ)"
        if not (got.loc[runs, "max_step"].to_numpy() == g["step"].max().loc[runs].to_numpy()).all():
            return "FAIL (max step per run differs)"
        if not np.allclose(got.loc[runs, "mean"].to_numpy(), g["value"].mean().loc[runs].to_numpy(), rtol=1e-12):
            return "FAIL (mean per run differs)"
        return "PASS"
    best = df[df["tag"] == tag0].groupby("run", observed=True)["value"].max()
    if sorted(got.index) != sorted(best.index) or not (got.loc[best.index, "best"].to_numpy() == best.to_numpy()).all():
        return "FAIL (max per run differs)"
    return "PASS"


def main(argv: list[str]) -> int:
    task = json.loads(argv[1])
    out_path = Path(argv[2])
    result: dict[str, Any] = {"task": task, "pid": os.getpid()}
    try:
        if task["tool"] == "reload":
            result.update(measure_reload(task))
        elif task["tool"] == "query":
            result.update(measure_query(task))
        else:
            result.update(measure_load(task))
        result["status"] = "ok"
    except Skip as exc:
        result.update(status="skipped", reason=str(exc))
    except Exception as exc:  # reported by run.py next to the tool's row
        result.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    out_path.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
