"""A logdir of many small runs (100,000 runs x 100 scalar events by default), for the cache bench.

Each run directory (`sweep_NNNN/trial_NN`, 100 trials per sweep) holds one event file written
with tensorboardX's own protobuf classes and framed by tensorboardX's `RecordWriter`, like the
bulk files of `corpus.py`: a `brain.Event:2` file-version record, then `tags x steps` scalar
events (4 tags x 25 steps), step-major. Values come from `corpus.scalar_values`, so they are a
closed-form function of (run, tag, step).

The logdir is cached in `bench/.corpus/manyruns-<runs>r-<tags>t-<steps>s/` with a marker file,
written to a `.partial` directory renamed into place (as `corpus.py` does).

    .venv/bin/python bench/manyruns.py                  # 100,000 runs
    .venv/bin/python bench/manyruns.py --runs 2000      # a small one
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import BENCH_DIR, human_bytes

GENERATOR_VERSION = 1
MARKER = "corpus.json"
TAGS = ("train/loss", "train/accuracy", "eval/loss", "eval/accuracy")


@dataclass(frozen=True)
class ManyRunsSpec:
    runs: int = 100_000
    tags: int = 4
    steps: int = 25

    @property
    def name(self) -> str:
        return f"manyruns-{self.runs}r-{self.tags}t-{self.steps}s"

    @property
    def events(self) -> int:
        return self.runs * self.tags * self.steps


def run_name(i: int) -> str:
    return f"sweep_{i // 100:04d}/trial_{i % 100:02d}"


def _write_runs(job: tuple[ManyRunsSpec, str, int, int]) -> int:
    """Pool task: runs [first, last) of the logdir."""
    import corpus
    import numpy as np
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import RecordWriter

    spec, logdir, first, last = job
    steps = np.arange(spec.steps, dtype=np.int64)
    tag_names = [TAGS[t % len(TAGS)] + (f"_{t // len(TAGS)}" if t >= len(TAGS) else "") for t in range(spec.tags)]
    events = []
    for name in tag_names:
        ev = event_pb2.Event()
        ev.summary.value.add(tag=name)
        events.append(ev)
    cspec = corpus.CorpusSpec(runs=spec.runs, tags=spec.tags, steps=spec.steps)
    written = 0
    for run in range(first, last):
        run_dir = Path(logdir) / run_name(run)
        run_dir.mkdir(parents=True, exist_ok=True)
        start = corpus.RUN_EPOCH + run * 60
        writer = RecordWriter(str(run_dir / f"events.out.tfevents.{start}.bench.{os.getpid()}.0"))
        try:
            writer.write(event_pb2.Event(wall_time=float(start), file_version="brain.Event:2").SerializeToString())
            values = [corpus.scalar_values(cspec, run, t, steps).tolist() for t in range(spec.tags)]
            for i in range(spec.steps):
                for t, ev in enumerate(events):
                    ev.step = i
                    ev.wall_time = start + i * 0.25 + t * 1e-4
                    ev.summary.value[0].simple_value = values[t][i]
                    writer.write(ev.SerializeToString())
                    written += 1
        finally:
            writer.close()
    return written


def append_to_run(logdir: Path, run: int, first_step: int = 10_000, steps: int = 25, tags: int = 4) -> Path:
    """Appends `steps` more steps (from `first_step`) of `tags` scalar tags to run number `run`'s
    event file, as its writer would (TFRecord framing by tensorboardX's own `masked_crc32c`); returns the file.

    The file must be this logdir's own: a logdir hard-linked to the shared corpus (`cp -al`)
    has its run's file copied first (`own_file`), so that the corpus is never written."""
    import struct

    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    (path,) = sorted((Path(logdir) / run_name(run)).glob("events.out.tfevents.*"))
    records = []
    for i in range(steps):
        for t in range(tags):
            ev = event_pb2.Event(step=first_step + i, wall_time=2e9 + first_step + i + t * 1e-4)
            ev.summary.value.add(tag=TAGS[t % len(TAGS)], simple_value=float(i * tags + t))
            data = ev.SerializeToString()
            head = struct.pack("<Q", len(data))
            records.append(
                head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))
            )
    with open(path, "ab") as f:
        f.write(b"".join(records))
    return path


def add_run(logdir: Path, name: str, start: float = 2e9, steps: int = 25, tags: int = 4) -> Path:
    """Writes a new run `name` (a directory of the logdir, created) as this logdir's runs are
    written: one event file by tensorboardX's `RecordWriter`, a file-version record, then
    `tags x steps` scalar events; returns the file."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import RecordWriter

    run_dir = Path(logdir) / name
    run_dir.mkdir(parents=True)
    path = run_dir / f"events.out.tfevents.{int(start)}.bench.{os.getpid()}.0"
    writer = RecordWriter(str(path))
    try:
        writer.write(event_pb2.Event(wall_time=start, file_version="brain.Event:2").SerializeToString())
        for i in range(steps):
            for t in range(tags):
                ev = event_pb2.Event(step=i, wall_time=start + i * 0.25 + t * 1e-4)
                ev.summary.value.add(tag=TAGS[t % len(TAGS)], simple_value=float(i * tags + t))
                writer.write(ev.SerializeToString())
    finally:
        writer.close()
    return path


def own_file(logdir: Path, run: int) -> Path:
    """Gives run number `run` of a hard-linked copy of a logdir an event file of its own (a
    copy renamed over the link, so the original keeps its bytes); returns it."""
    (path,) = sorted((Path(logdir) / run_name(run)).glob("events.out.tfevents.*"))
    if path.stat().st_nlink > 1:
        tmp = path.with_name(path.name + ".copy")
        shutil.copy2(path, tmp)
        tmp.replace(path)
    return path


def ensure(spec: ManyRunsSpec, root: Path, jobs: int = 2, log=print) -> Path:  # type: ignore[no-untyped-def]
    """The cached logdir for `spec`, generated when missing."""
    dest = root / spec.name
    marker = dest / MARKER
    params = {"generator_version": GENERATOR_VERSION, **asdict(spec)}
    if marker.is_file() and json.loads(marker.read_text()).get("params") == params:
        return dest / "logdir"
    partial = root / f".{spec.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    log(f"corpus {spec.name}: generating {spec.runs:,} runs x {spec.tags * spec.steps} events with {jobs} processes")
    started = time.perf_counter()
    per = 500
    work = [(spec, str(partial / "logdir"), a, min(a + per, spec.runs)) for a in range(0, spec.runs, per)]
    done = 0
    with multiprocessing.Pool(processes=max(1, jobs)) as pool:
        for n in pool.imap_unordered(_write_runs, work):
            done += n
    seconds = time.perf_counter() - started
    size = sum(f.stat().st_size for f in (partial / "logdir").rglob("*tfevents*"))
    (partial / MARKER).write_text(
        json.dumps({"params": params, "events": done, "bytes": size, "generation_seconds": seconds}, indent=2) + "\n"
    )
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    log(f"corpus {spec.name}: {done:,} events, {human_bytes(size)} in {seconds:.0f}s")
    return dest / "logdir"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--corpus-root", type=Path, default=Path(os.environ.get("TBSCOPE_BENCH_CORPUS_DIR", BENCH_DIR / ".corpus"))
    )
    args = parser.parse_args(argv)
    print(ensure(ManyRunsSpec(runs=args.runs), args.corpus_root, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
