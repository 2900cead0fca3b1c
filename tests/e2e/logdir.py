"""The end-to-end fixture logdir, written by tensorboardX (a writer we did not write).

Runs as a tree (experiment / learning rate / train|validation) so the runs panel has folders,
every kind the dashboard shows, a loss spike that downsampling must keep, NaN values, and
hostile strings: run names, tags and text that would execute script if rendered as HTML.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

# Any of these running sets window.__xss; the CSP would also report a violation, which the
# tests' console check catches.
XSS_RUN = 'xss-<img src=x onerror="window.__xss=1">'  # its colour differs from the other runs'
XSS_TAG = "xss/<script>window.__xss=1</script>"
XSS_TEXT = "\n\n".join(
    [
        '<img src=x onerror="window.__xss=1">',
        "<script>window.__xss=1</script>",
        "[a javascript link](javascript:window.__xss=1)",
        '<a href="javascript:window.__xss=1">raw anchor</a>',
        '<iframe src="javascript:window.__xss=1"></iframe>',
        '<div style="background:url(javascript:window.__xss=1)" onmouseover="window.__xss=1">hover</div>',
        "![image](https://example.invalid/x.png)",
    ]
)
MARKDOWN = """# Notes

Some **bold** text and `inline code`.

| metric | value |
|--------|-------|
| loss   | 0.12  |
| acc    | 0.97  |

```python
print("hello")
```
"""

SPIKE_STEP = 4321
STEPS = 10_000
RUNS = ("exp/lr=0.1/train", "exp/lr=0.1/validation", "exp/lr=0.01/train", "exp/lr=0.01/validation")


def loss(run_index: int, step: int) -> float:
    lr = 0.1 if run_index < 2 else 0.01
    base = 2.0 * math.exp(-step * lr / 2000) + 0.05 * run_index
    return base + 0.02 * math.sin(step / 37.0 + run_index)


def write(root: Path) -> dict[str, object]:
    from tensorboardX import SummaryWriter

    root.mkdir(parents=True, exist_ok=True)
    for i, run in enumerate(RUNS):
        with SummaryWriter(str(root / run), flush_secs=1) as w:
            for step in range(0, STEPS, 1):
                v = loss(i, step)
                if i == 0 and step == SPIKE_STEP:
                    v = 50.0  # one spike in 10,000 points: must survive downsampling
                if i == 1 and step == 5000:
                    v = float("nan")
                w.add_scalar("train/loss", v, step)
                if step % 10 == 0:
                    w.add_scalar("train/lr", (0.1 if i < 2 else 0.01) * (1 + math.cos(math.pi * step / STEPS)) / 2, step)
                if step % 500 == 0:
                    w.add_scalar("eval/accuracy", 1 - v / 3, step)
            rng = np.random.default_rng(i)
            for step in range(0, STEPS, 1000):
                w.add_histogram("weights/layer1", rng.normal(0, 1 / (1 + step / 3000), 2000), step)
            for step in (0, 5000, 9000):
                y, x = np.mgrid[0:48, 0:64]
                img = np.stack([x / 63.0, y / 47.0, np.full_like(x, (i + step / 9000) / 4, dtype=float)])
                w.add_image("samples/input", img, step)
            t = np.linspace(0, 0.5, 8000, dtype=np.float32)
            add_audio(w, "samples/tone", np.sin(2 * np.pi * (220 + 110 * i) * t), 16000, 0)
            w.add_text("notes/markdown", MARKDOWN, 0)
            w.add_text("notes/hostile", XSS_TEXT, 0)
            labels = rng.integers(0, 2, 200)
            preds = np.clip(labels * 0.6 + rng.random(200) * 0.5, 0, 1)
            w.add_pr_curve("pr/classifier", labels, preds, 0)
            w.add_pr_curve("pr/classifier", labels, np.clip(preds + 0.1 * labels, 0, 1), 5000)
            w.add_hparams(
                {"lr": 0.1 if i < 2 else 0.01, "split": run.rsplit("/", 1)[1], "batch": 32 * (i + 1)},
                {"hparam/final_loss": loss(i, STEPS - 1)},
            )
        if i == 0:
            with SummaryWriter(str(root / run), flush_secs=1) as w:
                w.add_custom_scalars(
                    {"Training": {"Loss and LR": ["Multiline", ["train/loss", "train/lr"]]}}
                )
    with SummaryWriter(str(root / XSS_RUN), flush_secs=1) as w:
        for step in range(100):
            w.add_scalar(XSS_TAG, step * 0.5, step)
            w.add_scalar("train/loss", 3.0 - step / 50, step)
        w.add_text(XSS_TAG, XSS_TEXT, 0)
    return {"runs": [*RUNS, XSS_RUN]}


def add_audio(w: object, tag: str, samples: np.ndarray, rate: int, step: int) -> None:
    """tensorboardX's add_audio needs the soundfile package; this builds the same Summary.Audio
    with tensorboardX's protobuf classes and the standard library's WAV encoder."""
    import io
    import wave

    from tensorboardX.proto.summary_pb2 import Summary

    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(pcm.tobytes())
    audio = Summary.Audio(sample_rate=rate, num_channels=1, length_frames=len(pcm), encoded_audio_string=buf.getvalue(), content_type="audio/wav")
    w._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, audio=audio)]), step)  # type: ignore[attr-defined]


def append(root: Path, run: str, tag: str, steps: range, value: float) -> None:
    """More points for a run, as a training job still logging would write them."""
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(root / run), flush_secs=1) as w:
        for step in steps:
            w.add_scalar(tag, value, step)
