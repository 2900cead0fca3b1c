"""Benchmark corpus: many runs of TensorBoard event files written by a third-party writer.

The bulk scalars (10M by default) are encoded with tensorboardX's own protobuf classes and framed
by tensorboardX's `RecordWriter` (length, masked CRC32C of the length, payload, masked CRC32C of
the payload), so the bytes on disk are exactly what tensorboardX produces, not what tbscope's
authors think it produces. `SummaryWriter.add_scalar` would be the natural call but manages only
~8k events/s, far too slow for 10M events; the lower layers do ~170k events/s per core.
A few histograms, images, text and scalars per run go through the public `SummaryWriter`.

Values are a closed-form function of (seed, run, tag, step) so the benchmark can compute the exact
expected table without reading the files back (see `expected_table`).

The corpus is cached under bench/.corpus/<name>/ next to a marker file (corpus.json) recording the
generator parameters; it is regenerated only when those change.

Usage:
    .venv/bin/python bench/corpus.py                 # 10M-event corpus + 1M-event subset
    .venv/bin/python bench/corpus.py --quick         # tiny corpus for a smoke test
    .venv/bin/python bench/corpus.py --events 2e6 --force
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import BENCH_DIR, event_files, human_bytes

if TYPE_CHECKING:
    from tensorboardX.record_writer import RecordWriter

# Bump whenever the bytes written for a given spec change, so cached corpora are regenerated.
GENERATOR_VERSION = 2
MARKER = "corpus.json"
DEFAULT_ROOT = BENCH_DIR / ".corpus"

# Synthetic clock: run r starts at RUN_EPOCH + r * RUN_SPACING and logs a step every STEP_SECONDS.
# RUN_EPOCH is in the past so the bulk file (named after its start time) sorts before the
# SummaryWriter file of the same run (named after the real clock), as a real run's files would.
RUN_EPOCH = 1_700_000_000
RUN_SPACING = 3_600
STEP_SECONDS = 0.25

# Realistic tag names (a training loop's metrics). Their length sets the record size: ~30 chars
# gives ~70 bytes per framed scalar event, typical of real logs.
BASE_TAGS: tuple[str, ...] = (
    "train/loss/total",
    "train/loss/cross_entropy",
    "train/loss/l2_regularization",
    "train/metrics/accuracy_top1",
    "train/metrics/accuracy_top5",
    "train/gradients/global_norm",
    "train/throughput/samples_per_sec",
    "train/timing/step_time_ms",
    "optimizer/param_group_0/momentum",
    "optimizer/param_group_0/weight_decay",
    "eval/loss/total",
    "eval/metrics/accuracy_top1",
    "eval/metrics/accuracy_top5",
    "eval/language_model/perplexity",
    "eval/calibration/expected_error",
    "system/gpu_0/memory_allocated_gb",
    "system/gpu_0/utilization_percent",
    "system/cpu/utilization_percent",
    "system/dataloader/queue_depth",
    "model/encoder/layer_00/attn_entropy",
    "model/encoder/layer_11/attn_entropy",
    "model/decoder/layer_00/activation_rms",
    "model/decoder/layer_11/activation_rms",
    "model/token_embedding/weight_norm",
    "model/classifier_head/logit_scale",
)
# Logged through SummaryWriter.add_scalar into the run's second file (different writer path).
LR_TAG = "optimizer/param_group_0/learning_rate"


@dataclass(frozen=True)
class CorpusSpec:
    """Everything that determines the bytes of a corpus (except file-name timestamps/pids)."""

    runs: int
    tags: int
    steps: int
    seed: int = 0
    lr_every: int = 100  # SummaryWriter.add_scalar every this many steps
    histogram_tags: int = 2
    histogram_points: int = 10  # per histogram tag
    image_points: int = 3
    text_points: int = 3

    @property
    def name(self) -> str:
        return f"{self.runs}r-{self.tags}t-{self.steps}s" + (f"-seed{self.seed}" if self.seed else "")

    @property
    def bulk_events(self) -> int:
        return self.runs * self.tags * self.steps

    @property
    def lr_steps(self) -> range:
        return range(0, self.steps, self.lr_every)

    @property
    def scalar_events(self) -> int:
        """Rows every scalar reader must return: bulk scalars plus the SummaryWriter scalars."""
        return self.bulk_events + self.runs * len(self.lr_steps)

    def params(self) -> dict[str, Any]:
        return {"generator_version": GENERATOR_VERSION, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class Corpus:
    spec: CorpusSpec
    logdir: Path
    files: int
    bytes: int
    generation_seconds: float

    @property
    def events(self) -> int:
        return self.spec.scalar_events

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "logdir": str(self.logdir),
            "files": self.files,
            "bytes": self.bytes,
            "scalar_events": self.events,
            "generation_seconds": self.generation_seconds,
            "params": self.spec.params(),
        }


# --------------------------------------------------------------------------------------------
# Deterministic content


def run_names(count: int) -> list[str]:
    """Two-level names (sweep/trial) because nested run directories are common and exercise
    run-name normalisation in every tool."""
    return [f"sweep_{i // 5:02d}/trial_{i % 5:02d}" for i in range(count)]


def tag_names(count: int) -> list[str]:
    base = len(BASE_TAGS)
    return [BASE_TAGS[i % base] + (f"_{i // base}" if i >= base else "") for i in range(count)]


def _hash_uniform(key: int, steps: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """splitmix64 of (key, step) mapped to [0, 1): noise that is reproducible for any step range,
    so appended steps continue the same series the expected table describes."""
    with np.errstate(over="ignore"):
        x = steps.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(key % 2**64)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(2**53)


def scalar_values(spec: CorpusSpec, run: int, tag: int, steps: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """A noisy decaying curve per (run, tag); float32 because simple_value is a float32."""
    noise = _hash_uniform((spec.seed * 1_000_003 + run) * 1_000_003 + tag, steps)
    tau = 300.0 + 37.0 * ((run * 31 + tag * 17) % 100)
    scale = 1.0 + 0.1 * (run % 7)
    curve = scale * np.exp(-steps / tau) + 0.05 * (noise - 0.5) + 0.1 * tag
    return curve.astype(np.float32)


def wall_times(run: int, tag: int, steps: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    return np.asarray(RUN_EPOCH + run * RUN_SPACING + steps * STEP_SECONDS + tag * 1e-4, dtype=np.float64)


def lr_values(spec: CorpusSpec, steps: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    return (1e-3 * 0.5 * (1.0 + np.cos(np.pi * steps / max(spec.steps, 1)))).astype(np.float32)


def expected_table(spec: CorpusSpec, extra_steps: int = 0) -> dict[str, Any]:
    """The scalar rows a correct reader returns, as codes + names (cheap for 10M rows).

    `extra_steps` describes the corpus after `grow` appended that many steps to every bulk tag.
    """
    names = run_names(spec.runs)
    tags = tag_names(spec.tags) + [LR_TAG]
    bulk_steps = np.arange(spec.steps + extra_steps, dtype=np.int64)
    lr_steps = np.array(spec.lr_steps, dtype=np.int64)
    run_codes, tag_codes, steps, values = [], [], [], []
    for run in range(spec.runs):
        for tag in range(spec.tags):
            steps.append(bulk_steps)
            values.append(scalar_values(spec, run, tag, bulk_steps))
            tag_codes.append(np.full(bulk_steps.shape, tag, dtype=np.int32))
        steps.append(lr_steps)
        values.append(lr_values(spec, lr_steps))
        tag_codes.append(np.full(lr_steps.shape, spec.tags, dtype=np.int32))
        rows = spec.tags * bulk_steps.size + lr_steps.size
        run_codes.append(np.full(rows, run, dtype=np.int32))
    return {
        "run_names": names,
        "run_codes": np.concatenate(run_codes),
        "tag_names": tags,
        "tag_codes": np.concatenate(tag_codes),
        "steps": np.concatenate(steps),
        "values": np.concatenate(values),
    }


# --------------------------------------------------------------------------------------------
# Writing


def _event_file_name(timestamp: int, pid: int, index: int) -> str:
    """events.out.tfevents.<ts>.<host>.<pid>.<n>, the shape TensorFlow and PyTorch writers use."""
    return f"events.out.tfevents.{timestamp}.{socket.gethostname()}.{pid}.{index}"


def _write_file_version(writer: RecordWriter, wall_time: float) -> None:
    # Every real event file starts with this record; TensorBoard's loaders key behaviour on it
    # (e.g. EventAccumulator only purges out-of-order steps when it is absent).
    from tensorboardX.proto import event_pb2

    writer.write(event_pb2.Event(wall_time=wall_time, file_version="brain.Event:2").SerializeToString())


def _write_scalar_steps(writer: RecordWriter, spec: CorpusSpec, run: int, start: int, stop: int) -> int:
    """Write steps [start, stop) of every bulk tag, step-major like a training loop. Returns events."""
    from tensorboardX.proto import event_pb2

    steps = np.arange(start, stop, dtype=np.int64)
    # One Event per tag, mutated in place: setting three fields and serialising is ~2x faster
    # than building a fresh message tree per event, and the encoded bytes are identical.
    events = []
    values_msgs = []
    for name in tag_names(spec.tags):
        event = event_pb2.Event()
        values_msgs.append(event.summary.value.add(tag=name))
        events.append(event)
    values = [scalar_values(spec, run, t, steps).tolist() for t in range(spec.tags)]
    walls = [wall_times(run, t, steps).tolist() for t in range(spec.tags)]
    write = writer.write  # tensorboardX framing + masked CRC32C
    tags = range(spec.tags)
    for i, step in enumerate(range(start, stop)):
        for t in tags:
            event = events[t]
            event.step = step
            event.wall_time = walls[t][i]
            values_msgs[t].simple_value = values[t][i]
            write(event.SerializeToString())
    return len(steps) * spec.tags


def _write_extras(spec: CorpusSpec, run: int, run_dir: Path) -> None:
    """Scalars, histograms, images and text through tensorboardX's public SummaryWriter."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng([spec.seed, run])
    start = RUN_EPOCH + run * RUN_SPACING
    # The suffix yields events.out.tfevents.<now>.<host>.<pid>.1 (tensorboardX adds ts and host).
    writer = SummaryWriter(logdir=str(run_dir), filename_suffix=f".{os.getpid()}.1", flush_secs=3600)
    try:
        lr_steps = np.array(spec.lr_steps, dtype=np.int64)
        for step, value in zip(lr_steps.tolist(), lr_values(spec, lr_steps).tolist()):
            writer.add_scalar(LR_TAG, value, step, walltime=start + step * STEP_SECONDS)
        for k in range(spec.histogram_points):
            step = k * spec.steps // max(spec.histogram_points, 1)
            for h in range(spec.histogram_tags):
                weights = rng.normal(0.0, 1.0 / (1 + k), size=1_000)
                walltime = start + step * STEP_SECONDS
                writer.add_histogram(f"weights/layer_{h}", weights, step, walltime=walltime)
        for k in range(spec.image_points):
            step = k * spec.steps // max(spec.image_points, 1)
            image = rng.integers(0, 256, size=(3, 32, 32), dtype=np.uint8)
            writer.add_image("samples/input", image, step, walltime=start + step * STEP_SECONDS)
        for k in range(spec.text_points):
            step = k * spec.steps // max(spec.text_points, 1)
            text = f"run {run} reached step {step}"
            writer.add_text("notes/status", text, step, walltime=start + step * STEP_SECONDS)
    finally:
        writer.close()


def _write_run(job: tuple[CorpusSpec, str, int]) -> int:
    """Pool task: one run directory (bulk scalar file + SummaryWriter file). Returns events."""
    from tensorboardX.record_writer import RecordWriter

    spec, logdir, run = job
    run_dir = Path(logdir) / run_names(spec.runs)[run]
    run_dir.mkdir(parents=True, exist_ok=True)
    start = RUN_EPOCH + run * RUN_SPACING
    writer = RecordWriter(str(run_dir / _event_file_name(start, os.getpid(), 0)))
    try:
        _write_file_version(writer, float(start))
        written = _write_scalar_steps(writer, spec, run, 0, spec.steps)
    finally:
        writer.close()
    _write_extras(spec, run, run_dir)
    return written


def generate(spec: CorpusSpec, logdir: Path, jobs: int, log: Callable[[str], None] = print) -> None:
    """Write the corpus into an empty `logdir`, one pool task per run."""
    logdir.mkdir(parents=True, exist_ok=True)
    work = [(spec, str(logdir), run) for run in range(spec.runs)]
    done = 0
    next_report = 0.0
    started = time.perf_counter()
    # fork (Linux default) keeps start-up cheap; each worker process writes whole runs.
    with multiprocessing.Pool(processes=max(1, jobs)) as pool:
        for events in pool.imap_unordered(_write_run, work):
            done += events
            if done / spec.bulk_events >= next_report:
                elapsed = time.perf_counter() - started
                log(f"  {spec.name}: {done:,}/{spec.bulk_events:,} bulk events, {elapsed:.0f}s")
                next_report += 0.1


def ensure_corpus(
    spec: CorpusSpec,
    root: Path = DEFAULT_ROOT,
    jobs: int = 2,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> Corpus:
    """Return the cached corpus for `spec`, generating it when missing or when parameters changed.

    Generation writes to a sibling `.partial` directory renamed into place at the end, so an
    interrupted run never leaves a corpus that looks complete.
    """
    dest = root / spec.name
    marker = dest / MARKER
    if not force and marker.is_file():
        recorded = json.loads(marker.read_text())
        if recorded.get("params") == spec.params() and (dest / "logdir").is_dir():
            return Corpus(
                spec=spec,
                logdir=dest / "logdir",
                files=recorded["files"],
                bytes=recorded["bytes"],
                generation_seconds=recorded["generation_seconds"],
            )
        log(f"corpus {spec.name}: parameters changed, regenerating")
    partial = root / f".{spec.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    log(f"corpus {spec.name}: generating {spec.scalar_events:,} scalar events with {jobs} processes")
    started = time.perf_counter()
    generate(spec, partial / "logdir", jobs, log)
    seconds = time.perf_counter() - started
    files = event_files(partial / "logdir")
    corpus = Corpus(
        spec=spec,
        logdir=dest / "logdir",
        files=len(files),
        bytes=sum(path.stat().st_size for path in files),
        generation_seconds=seconds,
    )
    (partial / MARKER).write_text(json.dumps(corpus.to_json(), indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    log(
        f"corpus {spec.name}: {corpus.files} files, {human_bytes(corpus.bytes)} "
        f"({corpus.bytes / spec.scalar_events:.1f} B/event) in {seconds:.1f}s"
    )
    return corpus


# --------------------------------------------------------------------------------------------
# Growing a corpus (live-reload scenarios)

GrowMode = Literal["append", "new_files"]


def grow_steps(spec: CorpusSpec, fraction: float) -> int:
    """Steps to add to every bulk tag so the corpus grows by `fraction` (at least one step)."""
    return max(1, round(spec.steps * fraction))


def grow(logdir: Path, spec: CorpusSpec, fraction: float, mode: GrowMode) -> int:
    """Add steps [steps, steps + k) to every bulk tag of every run, as a still-running job would.

    mode="append" appends to each run's existing bulk file; mode="new_files" writes them to a new
    event file per run (a restarted writer). Returns the number of scalar events added.
    """
    from tensorboardX.record_writer import RecordWriter

    class _AppendingRecordWriter(RecordWriter):  # type: ignore[misc]
        """tensorboardX's RecordWriter opens with "wb"; reuse its framing on an "ab" handle."""

        def __init__(self, path: str) -> None:
            self.path = path
            self._writer = open(path, "ab")

    extra = grow_steps(spec, fraction)
    added = 0
    now = int(time.time())
    for run, name in enumerate(run_names(spec.runs)):
        run_dir = logdir / name
        if mode == "append":
            bulk = [p for p in sorted(run_dir.iterdir()) if "tfevents" in p.name and p.name.endswith(".0")]
            writer: RecordWriter = _AppendingRecordWriter(str(bulk[0]))
        else:
            # A later timestamp than any existing file, so the new file sorts last in the run.
            writer = RecordWriter(str(run_dir / _event_file_name(now + 1, os.getpid(), 2)))
            _write_file_version(writer, float(wall_times(run, 0, np.array([spec.steps]))[0]))
        try:
            added += _write_scalar_steps(writer, spec, run, spec.steps, spec.steps + extra)
        finally:
            writer.close()
    return added


# --------------------------------------------------------------------------------------------
# Command line (shared with run.py)

FULL_EVENTS = 10_000_000
SUBSET_EVENTS = 1_000_000
QUICK_EVENTS = 20_000
QUICK_SUBSET_EVENTS = 10_000


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def add_corpus_args(parser: argparse.ArgumentParser) -> None:
    """Corpus size flags; each also reads a TBSCOPE_BENCH_* environment variable."""
    quick_env = os.environ.get("TBSCOPE_BENCH_QUICK", "") not in ("", "0")
    parser.add_argument(
        "--quick",
        action="store_true",
        default=quick_env,
        help=f"tiny corpus ({QUICK_EVENTS:,} events, 4 runs x 5 tags) for a smoke test [TBSCOPE_BENCH_QUICK=1]",
    )
    parser.add_argument(
        "--events",
        type=float,
        default=None,
        help=f"scalar events in the main corpus (default {FULL_EVENTS:,}) [TBSCOPE_BENCH_EVENTS]",
    )
    parser.add_argument(
        "--subset-events",
        type=float,
        default=None,
        help=f"events in the subset corpus for slow baselines (default {SUBSET_EVENTS:,}; "
        "0 disables) [TBSCOPE_BENCH_SUBSET_EVENTS]",
    )
    parser.add_argument("--runs", type=int, default=None, help="runs in the main corpus (default 40; quick 4)")
    parser.add_argument("--tags", type=int, default=None, help="bulk scalar tags per run (default 25; quick 5)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(_env_number("TBSCOPE_BENCH_JOBS", 2)),
        help="generator processes (default 2) [TBSCOPE_BENCH_JOBS]",
    )
    parser.add_argument(
        "--corpus-root",
        type=Path,
        default=Path(os.environ.get("TBSCOPE_BENCH_CORPUS_DIR", DEFAULT_ROOT)),
        help="cache folder for corpora (default bench/.corpus) [TBSCOPE_BENCH_CORPUS_DIR]",
    )


def specs_from_args(args: argparse.Namespace) -> tuple[CorpusSpec, CorpusSpec | None]:
    """Main corpus spec and subset spec (same tags and steps, fewer runs), or None for no subset.

    The subset keeps steps per run and drops runs so its files look exactly like the main
    corpus's (its runs are byte-for-byte the main corpus's first runs, bar file names), which
    keeps per-file costs and events/s comparable.
    """
    quick = bool(args.quick)
    events = (
        args.events
        if args.events is not None
        else _env_number("TBSCOPE_BENCH_EVENTS", QUICK_EVENTS if quick else FULL_EVENTS)
    )
    subset_events = (
        args.subset_events
        if args.subset_events is not None
        else _env_number("TBSCOPE_BENCH_SUBSET_EVENTS", QUICK_SUBSET_EVENTS if quick else SUBSET_EVENTS)
    )
    runs = args.runs or (4 if quick else 40)
    tags = args.tags or (5 if quick else 25)
    steps = max(1, math.ceil(int(events) / (runs * tags)))
    main = CorpusSpec(runs=runs, tags=tags, steps=steps)
    subset_runs = round(int(subset_events) / (tags * steps))
    subset = CorpusSpec(runs=subset_runs, tags=tags, steps=steps) if 0 < subset_runs < runs else None
    return main, subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(parser)
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    args = parser.parse_args(argv)
    main_spec, subset_spec = specs_from_args(args)
    for spec in (main_spec, subset_spec):
        if spec is None:
            continue
        corpus = ensure_corpus(spec, root=args.corpus_root, jobs=args.jobs, force=args.force)
        print(
            f"{spec.name}: {corpus.logdir}\n  {corpus.events:,} scalar events, {corpus.files} files, "
            f"{human_bytes(corpus.bytes)}, generated in {corpus.generation_seconds:.1f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
