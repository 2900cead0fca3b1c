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
XSS_TEXT_TAG = "xss-text/<script>window.__xss=1</script>"  # a tag's first record decides its kind
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
            if i == 0:
                # In the same writer: a second tensorboardX writer in this directory within the
                # same second would get the same file name and replace this file.
                w.add_custom_scalars({"Training": {"Loss and LR": ["Multiline", ["train/loss", "train/lr"]]}})
            w.add_hparams(
                {"lr": 0.1 if i < 2 else 0.01, "split": run.rsplit("/", 1)[1], "batch": 32 * (i + 1)},
                {"hparam/final_loss": loss(i, STEPS - 1)},
            )
    write_hostile_run(root / XSS_RUN)
    add_profile(root / RUNS[0])
    return {"runs": [*RUNS, XSS_RUN]}


#: A real torch.profiler trace (torch 2.13, CPU; tests/data/torch_profiler/README.md).
TORCH_TRACE = Path(__file__).resolve().parents[1] / "data" / "torch_profiler" / "hostA.1795710513538474591.pt.trace.json.gz"


def add_profile(run_dir: Path) -> None:
    """The trace as tensorboard_trace_handler leaves it, in a run's directory."""
    import shutil

    shutil.copy(TORCH_TRACE, run_dir / TORCH_TRACE.name)


def write_hostile_run(run_dir: Path) -> None:
    """The hostile run with TensorBoard's own pure-Python writer and proto classes, which keep
    tag names as given (tensorboardX rewrites `<`, `>` and `=` in tags to `_`). Also a rank-2
    text tensor, which the dashboard shows as a table."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(run_dir))
    text_md = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))

    def text_tensor(rows: list[list[str]]) -> tensor_pb2.TensorProto:
        dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=len(rows)), tensor_shape_pb2.TensorShapeProto.Dim(size=len(rows[0]))]
        flat = [c.encode() for r in rows for c in r]
        return tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims), string_val=flat)

    def scalar_tensor_text(s: str) -> tensor_pb2.TensorProto:
        return tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(), string_val=[s.encode()])

    wall = 1_700_000_000.0
    for step in range(100):
        values = [
            summary_pb2.Summary.Value(tag=XSS_TAG, simple_value=step * 0.5),
            summary_pb2.Summary.Value(tag="train/loss", simple_value=3.0 - step / 50),
        ]
        w.add_event(event_pb2.Event(step=step, wall_time=wall + step, summary=summary_pb2.Summary(value=values)))
    text_values = [
        summary_pb2.Summary.Value(tag=XSS_TEXT_TAG, metadata=text_md, tensor=scalar_tensor_text(XSS_TEXT)),
        summary_pb2.Summary.Value(tag="table/confusion", metadata=text_md, tensor=text_tensor([["", "cat", "dog"], ["cat", "41", "3"], ["dog", "5", '<img src=x onerror="window.__xss=1">']])),
    ]
    w.add_event(event_pb2.Event(step=0, wall_time=wall + 100, summary=summary_pb2.Summary(value=text_values)))
    w.close()


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

    # A suffix of its own: tensorboardX names files by the second, and must not replace one.
    with SummaryWriter(str(root / run), flush_secs=1, filename_suffix=".append") as w:
        for step in steps:
            w.add_scalar(tag, value, step)
