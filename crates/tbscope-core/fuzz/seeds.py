"""Writes real event files to seed the fuzz targets' plain-binary runs (`make fuzz-smoke`).

    python crates/tbscope-core/fuzz/seeds.py build/fuzz-seeds

Files from writers we did not write: tensorboardX's SummaryWriter (scalars, add_scalars,
histograms, an image, text, hparams, an embedded event file as text) and TensorBoard's own
EventFileWriter (scalars and a tensor summary). Small on purpose: the fuzzers damage them.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def tensorboardx(root: Path) -> None:
    import numpy as np
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(root / "tbx"), flush_secs=3600) as w:
        for step in range(40):
            w.add_scalar("loss", 1.0 / (step + 1), step)
            w.add_scalar("train/accuracy/top1", step / 40, step)
            if step % 10 == 0:
                w.add_histogram("weights", np.linspace(-1, 1, 50) * (step + 1), step)
                w.add_text("note", f"step {step}", step)
        w.add_scalars("group", {"a": 1.0, "b": 2.0}, 0)
        w.add_image("image", np.zeros((3, 4, 4), dtype=np.uint8), 0)
        w.add_hparams({"lr": 0.1, "opt": "adam"}, {"hparam/acc": 0.5})
    # An event file logged as text: records inside a record.
    inner = sorted((root / "tbx").glob("*tfevents*"))[0].read_bytes()
    with SummaryWriter(str(root / "tbx-embedded"), flush_secs=3600) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_text("logged_file", inner[:2000].decode("latin-1"), 1)
        w.add_scalar("loss", 0.5, 2)


def tensorboard(root: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    w = EventFileWriter(str(root / "tb"))
    for step in range(40):
        value = [summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))]
        if step % 8 == 0:
            value.append(summary_pb2.Summary.Value(tag="t", tensor=tensor_util.make_tensor_proto([step, step + 1.5])))
        w.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=value)))
    w.close()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/fuzz-seeds")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for write in (tensorboardx, tensorboard):
        try:
            write(out)
        except ImportError as e:  # a writer that is not installed: the others still seed
            print(f"fuzz seeds: skipped {write.__name__} ({e})", file=sys.stderr)
    n = len(list(out.rglob("*tfevents*")))
    print(f"fuzz seeds: {n} event files in {out}")


if __name__ == "__main__":
    main()
