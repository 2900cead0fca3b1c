"""Helpers shared by the corpus generator, the orchestrator and the measurement worker.

Kept free of heavy imports (no pandas, tensorboard or tbscope at module level) because the
worker imports it before it takes its baseline RSS reading.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

BENCH_DIR = Path(__file__).resolve().parent


def environment(packages: Sequence[str], *, loadavg: bool = False) -> dict[str, Any]:
    """What a bench result was measured on: date, commit, CPU, platform and the versions of
    ``packages``; with ``loadavg``, the load average at the start (other work on the machine
    shows in every number)."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    cpu = "unknown"
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "none"
    env: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    if loadavg:
        env["loadavg_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    env.update(
        commit=commit,
        cpu=cpu,
        cpus_usable=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        platform=platform.platform(),
        python=platform.python_version(),
        packages={name: version(name) for name in packages},
    )
    return env


def event_files(logdir: str | os.PathLike[str]) -> list[Path]:
    """All event files under `logdir`, as TensorBoard finds them.

    TensorBoard treats any file whose name contains "tfevents" as an event file; sorting gives a
    stable order so every tool and the floor walk the same files.
    """
    found: list[Path] = []
    for dirpath, _dirnames, filenames in os.walk(logdir):
        found.extend(Path(dirpath) / name for name in filenames if "tfevents" in name)
    return sorted(found)


def run_dirs(logdir: str | os.PathLike[str]) -> list[Path]:
    """Directories holding at least one event file: TensorBoard's definition of a run."""
    return sorted({path.parent for path in event_files(logdir)})


def run_name(logdir: str | os.PathLike[str], run_dir: str | os.PathLike[str]) -> str:
    """Run name as TensorBoard spells it: path relative to the logdir, "." for the root."""
    rel = os.path.relpath(run_dir, logdir)
    return "." if rel in ("", ".") else Path(rel).as_posix()


def tree_bytes(logdir: str | os.PathLike[str]) -> int:
    return sum(path.stat().st_size for path in event_files(logdir))


def warm_page_cache(logdir: str | os.PathLike[str]) -> int:
    """Read every event file once so timings measure parsing, not the disk.

    Returns the bytes read. Reading in 16 MiB chunks keeps this process's RSS flat.
    """
    total = 0
    for path in event_files(logdir):
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(16 << 20):
                total += len(chunk)
    return total


@dataclass(frozen=True)
class RowsDigest:
    """Order-independent fingerprint of a scalar table: row count plus a hash of its sorted rows."""

    rows: int
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {"rows": self.rows, "sha256": self.sha256}


def canonical_digest(
    run_names: Sequence[str],
    run_codes: npt.NDArray[np.integer],
    tag_names: Sequence[str],
    tag_codes: npt.NDArray[np.integer],
    steps: npt.NDArray[np.integer],
    values: npt.NDArray[np.floating],
) -> RowsDigest:
    """Hash the rows (run, tag, step, value) after sorting them.

    Tools return rows in different orders and with different string encodings, so rows are
    reduced to integer codes over the *sorted* set of names, sorted lexicographically, and
    hashed. Values are compared as float32 bit patterns: tensorboardX writes `simple_value`
    (a float32), so every faithful reader returns exactly these bits once rounded to float32.
    """
    # Map codes onto the rank of each name in sorted order; equal names (e.g. "" and "." after
    # normalisation) share one rank, so the digest depends only on the names, not on encoding.
    run_sorted = sorted(set(run_names))
    tag_sorted = sorted(set(tag_names))
    run_rank = np.array(_ranks(run_names, run_sorted) or [0], dtype=np.int32)
    tag_rank = np.array(_ranks(tag_names, tag_sorted) or [0], dtype=np.int32)
    runs = run_rank[np.asarray(run_codes)]
    tags = tag_rank[np.asarray(tag_codes)]
    step = np.asarray(steps, dtype=np.int64)
    bits = np.asarray(values, dtype=np.float64).astype(np.float32).view(np.uint32)
    order = np.lexsort((bits, step, tags, runs))

    used_runs = sorted({run_sorted[i] for i in np.unique(runs)})
    used_tags = sorted({tag_sorted[i] for i in np.unique(tags)})
    digest = hashlib.sha256()
    # Only names that occur are hashed, so an unused categorical level does not change the result.
    digest.update(json.dumps([used_runs, used_tags]).encode())
    for column in (runs, tags, step, bits):
        digest.update(np.ascontiguousarray(column[order]).tobytes())
    return RowsDigest(rows=int(step.shape[0]), sha256=digest.hexdigest())


def _ranks(names: Sequence[str], sorted_names: list[str]) -> list[int]:
    index = {name: i for i, name in enumerate(sorted_names)}
    return [index[name] for name in names]


def snapshot_sizes(logdir: str | os.PathLike[str]) -> dict[str, int]:
    """Sizes of all event files, so a scratch copy can be put back after a mutation."""
    return {str(path): path.stat().st_size for path in event_files(logdir)}


def restore_snapshot(logdir: str | os.PathLike[str], sizes: dict[str, int]) -> None:
    """Undo appends (truncate) and added files (delete) relative to `snapshot_sizes`."""
    for path in event_files(logdir):
        original = sizes.get(str(path))
        if original is None:
            path.unlink()
        elif path.stat().st_size != original:
            os.truncate(path, original)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
