"""Write a small demo logdir: three seeds of a toy training run, with hparams.

Until tbscope's own writer lands this uses tensorboardX, a writer we did not write.

    python examples/write_demo_logdir.py demo-logdir
"""

from __future__ import annotations

import math
import random
import shutil
import sys
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.summary import hparams


def write(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    for lr in (0.1, 0.01):
        for seed in range(3):
            rng = random.Random(seed)
            run = root / f"lr={lr}" / f"seed={seed}"
            with SummaryWriter(str(run)) as w:
                loss = 2.0
                for step in range(0, 2000, 10):
                    loss = loss * (1 - lr * 0.05) + rng.gauss(0, 0.02)
                    w.add_scalar("train/loss", loss, step)
                    w.add_scalar("train/lr", lr * 0.5 * (1 + math.cos(math.pi * step / 2000)), step)
                    if step % 200 == 0:
                        w.add_scalar("eval/accuracy", 1 - loss / 3 + rng.gauss(0, 0.01), step)
                        w.add_histogram("weights", np.random.default_rng(seed).normal(0, 1 / (1 + step / 500), 1000), step)
                w.add_text("notes", f"seed **{seed}**, lr {lr}", 0)
                # tensorboardX's add_hparams writes into a new subfolder (and with name="." two
                # writers clobber one file); writing its three records into the run keeps
                # hparams and metrics together, as TensorBoard's hparams dashboard expects.
                records = hparams({"lr": lr, "seed": seed, "optimizer": "sgd"}, {"eval/accuracy": 0.0})
                for summary in records:
                    w._get_file_writer().add_summary(summary)


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "demo-logdir"))
