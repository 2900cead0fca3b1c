"""Write a small demo logdir with tbscope's own writer: two learning rates x three seeds of a
toy training run, with scalars, histograms, an image, text and hparams.

    python examples/write_demo_logdir.py demo-logdir
"""

from __future__ import annotations

import math
import random
import shutil
import sys
from pathlib import Path

import numpy as np

from tbscope import SummaryWriter


def write(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    for lr in (0.1, 0.01):
        for seed in range(3):
            rng = random.Random(seed)
            weights_rng = np.random.default_rng(seed)
            run = root / f"lr={lr}" / f"seed={seed}"
            with SummaryWriter(run) as w:
                loss = 2.0
                accuracy = 0.0
                for step in range(0, 2000, 10):
                    loss = loss * (1 - lr * 0.05) + rng.gauss(0, 0.02)
                    # One call per step for everything logged at that step.
                    w.log(step, {
                        "train/loss": loss,
                        "train/lr": lr * 0.5 * (1 + math.cos(math.pi * step / 2000)),
                    })
                    if step % 200 == 0:
                        accuracy = 1 - loss / 3 + rng.gauss(0, 0.01)
                        w.add_scalar("eval/accuracy", accuracy, step)
                        w.add_histogram("weights", weights_rng.normal(0, 1 / (1 + step / 500), 1000), step)
                # A 32x32 RGB image in CHW layout, floats in [0, 1] as torch users pass them.
                y, x = np.mgrid[0:32, 0:32] / 31.0
                w.add_image("samples", np.stack([x, y, np.full_like(x, seed / 2)]), 0)
                w.add_text("notes", f"seed **{seed}**, lr {lr}", 0)
                # Into the run itself (no extra run folder); eval/accuracy is already a curve
                # of this run, so the hparams dashboard reads its last value from there.
                w.add_hparams({"lr": lr, "seed": seed, "optimizer": "sgd"}, {"eval/accuracy": accuracy})
                if lr == 0.1 and seed == 0:
                    # Projector files (the Embeddings tab): 300 features in three classes.
                    classes = ["cat", "dog", "bird"]
                    label = weights_rng.integers(0, 3, 300)
                    features = np.eye(3, 16)[label] * 4 + weights_rng.normal(0, 1, (300, 16))
                    meta = [[classes[c], f"{weights_rng.random():.2f}"] for c in label]
                    w.add_embedding(features, metadata=meta, metadata_header=["class", "confidence"], global_step=2000, tag="features")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "demo-logdir"))
