"""Event files shaped like the cases TensorBoard's accumulators treat specially, written with
TensorBoard's own ``RecordWriter`` and protos (so the records are TensorBoard's, not tbscope's):
restarts (``SessionLog.START``), out-of-order steps under file versions 1, 2 and none, source
writers that change, several files in one run, and enough points of every legacy kind for the
size guidances to sample.

Each writer makes one run directory; ``write_crafted_logdir`` makes them all under one root.
"""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np

WALL = 1_700_000_000.0


def _events():
    from tensorboard.compat.proto import event_pb2, summary_pb2

    return event_pb2, summary_pb2


class RawWriter:
    """One event file, record by record: no automatic file_version event, so a test chooses it."""

    def __init__(self, path: Path) -> None:
        from tensorboard.summary.writer.record_writer import RecordWriter

        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "ab")
        self._w = RecordWriter(self._f)

    def event(self, step: int = 0, wall: float | None = None, **kw) -> None:
        event_pb2, _ = _events()
        ev = event_pb2.Event(step=step, wall_time=WALL + step if wall is None else wall, **kw)
        self._w.write(ev.SerializeToString())
        self._f.flush()

    def version(self, v: int | None, step: int = 0) -> None:
        if v is not None:
            self.event(step, file_version=f"brain.Event:{v}")

    def start(self, step: int) -> None:
        event_pb2, _ = _events()
        self.event(step, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))

    def values(self, step: int, *values, wall: float | None = None, writer: str | None = None) -> None:
        event_pb2, summary_pb2 = _events()
        kw = {}
        if writer is not None:
            kw["source_metadata"] = event_pb2.SourceMetadata(writer=writer)
        self.event(step, wall, summary=summary_pb2.Summary(value=list(values)), **kw)

    def close(self) -> None:
        self._f.close()


def scalar(tag: str, v: float):
    _, summary_pb2 = _events()
    return summary_pb2.Summary.Value(tag=tag, simple_value=v)


def tensor_scalar(tag: str, v: float, first: bool = False):
    from tensorboard.util import tensor_util

    _, summary_pb2 = _events()
    val = summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(np.float32(v)))
    if first:
        val.metadata.plugin_data.plugin_name = "scalars"
    return val


def histo(tag: str, seed: int, last_limit: float = 1.7976931348623157e308):
    """A legacy HistogramProto whose last limit is the writer's (DBL_MAX, or given)."""
    _, summary_pb2 = _events()
    rng = np.random.default_rng(abs(seed))
    x = rng.normal(size=50)
    limits = [-1.0, 0.0, 1.0, last_limit]
    counts = [float(np.sum(x < -1)), float(np.sum((x >= -1) & (x < 0))), float(np.sum((x >= 0) & (x < 1))),
              float(np.sum(x >= 1))]
    h = summary_pb2.HistogramProto(min=float(x.min()), max=float(x.max()), num=50, sum=float(x.sum()),
                                   sum_squares=float((x * x).sum()), bucket_limit=limits, bucket=counts)
    return summary_pb2.Summary.Value(tag=tag, histo=h)


def image(tag: str, seed: int):
    from PIL import Image

    _, summary_pb2 = _events()
    arr = np.random.default_rng(abs(seed)).integers(0, 255, size=(4, 5, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    img = summary_pb2.Summary.Image(height=4, width=5, colorspace=3, encoded_image_string=buf.getvalue())
    return summary_pb2.Summary.Value(tag=tag, image=img)


def audio(tag: str, seed: int):
    _, summary_pb2 = _events()
    samples = (np.random.default_rng(abs(seed)).uniform(-1, 1, 80) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(samples.tobytes())
    a = summary_pb2.Summary.Audio(sample_rate=8000, num_channels=1, length_frames=80,
                                  encoded_audio_string=buf.getvalue(), content_type="audio/wav")
    return summary_pb2.Summary.Value(tag=tag, audio=a)


def _file(run: Path, n: int = 0) -> Path:
    # names sort in creation order, as TensorBoard's loader reads them
    return run / f"events.out.tfevents.{1700000000 + n}.crafted"


def restart_one(run: Path) -> None:
    """TensorBoard's own test's shape: steps 0..9 of two tags, a START at 5, then 5..7 of one."""
    w = RawWriter(_file(run))
    w.version(2)
    for s in range(10):
        w.values(s, scalar("a", s), scalar("b", -s), tensor_scalar("t", s, first=s == 0))
    w.start(5)
    for s in range(5, 8):
        w.values(s, scalar("a", 100 + s), tensor_scalar("t", 100 + s))
    w.close()


def restart_two(run: Path) -> None:
    """A START before the first step and another at 5; tag b is not written after the restart."""
    w = RawWriter(_file(run))
    w.version(2)
    w.start(0)
    for s in range(10):
        w.values(s, scalar("a", s), scalar("b", -s), histo("h", s), tensor_scalar("t", s, first=s == 0))
    w.start(5)
    for s in range(5, 8):
        w.values(s, scalar("a", 100 + s), histo("h", 100 + s), tensor_scalar("t", 100 + s))
    w.close()


def expired(run: Path) -> None:
    """testSessionLogStartMessageDiscardsExpiredEvents's events, in a file."""
    w = RawWriter(_file(run))
    w.version(2, step=1)
    for s in (100, 200, 300, 400):
        w.values(s, scalar("s1", 20))
    for s in (202, 203):
        w.values(s, scalar("s2", 20))
    w.start(201)
    w.close()


def out_of_order(run: Path, version: int | None) -> None:
    """Steps that go back, per tag (file version 1 or none: TensorBoard purges them)."""
    w = RawWriter(_file(run))
    w.version(version)
    for s in (100, 200, 300, 101, 201, 301):
        w.values(s, scalar("s1", s), histo("h", s), image("img", s), tensor_scalar("t", s, first=s == 100))
    for s in (101, 201, 301):
        w.values(s, scalar("s2", s))
    w.values(150, scalar("s3", 1.0), scalar("s1", 2.0))
    w.close()


def writers(run: Path) -> None:
    """Source writers that change along the file (TensorBoard keeps the last) and one too long."""
    w = RawWriter(_file(run))
    w.version(2)
    w.values(0, scalar("x", 0), writer="first_writer")
    w.values(1, scalar("x", 1))
    w.values(2, scalar("x", 2), writer="second_writer")
    w.values(3, scalar("x", 3))
    w.close()
    w = RawWriter(_file(run, 1))
    w.version(2)
    w.values(4, scalar("x", 4), writer="w" * 129)
    w.close()


def big(run: Path) -> None:
    """More points than every default size guidance keeps, over two files, with a restart in
    the second: the reservoirs sample, then purge."""
    w = RawWriter(_file(run))
    w.version(2)
    w.start(0)
    for s in range(1200):
        vals = [scalar("loss", np.sin(s)), tensor_scalar("acc", s / 1200, first=s == 0)]
        if s % 40 == 0:
            vals += [histo("weights", s), image("sample", s), audio("sound", s)]
        w.values(s, *vals)
    w.close()
    w = RawWriter(_file(run, 1))
    w.version(2)
    w.start(900)
    for s in range(900, 1000):
        vals = [scalar("loss", np.cos(s)), tensor_scalar("acc", -s / 1200)]
        if s % 20 == 0:
            vals += [histo("weights", -s), image("sample", -s)]
        w.values(s, *vals)
    w.close()


def clamped_histograms(run: Path) -> None:
    """Legacy histograms whose last limit is below ``max`` (values overflowing the last bucket,
    tensorboardX with explicit bins) and above it."""
    w = RawWriter(_file(run))
    w.version(2)
    for s in range(4):
        w.values(s, histo("under", s, last_limit=0.5), histo("over", s, last_limit=50.0))
    w.close()


CRAFTED = {
    "restart_one": restart_one,
    "restart_two": restart_two,
    "expired": expired,
    "ooo_v1": lambda run: out_of_order(run, 1),
    "ooo_none": lambda run: out_of_order(run, None),
    "ooo_v2": lambda run: out_of_order(run, 2),
    "writers": writers,
    "big": big,
    "clamped_histograms": clamped_histograms,
}


def write_crafted_logdir(root: Path) -> Path:
    for name, write in CRAFTED.items():
        write(root / name)
    return root
