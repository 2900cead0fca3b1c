"""Logdirs written at test time by writers we did not write.

Two writers are used:

* ``write_tbx_logdir``: tensorboardX's ``SummaryWriter`` (the legacy/PyTorch-style writer:
  ``simple_value``, ``HistogramProto``, ``Summary.Image``/``Summary.Audio`` and a few
  tensor plugins).
* ``write_tb_tensor_logdir``: TensorBoard's own pure-Python ``EventFileWriter`` plus
  TensorBoard's proto classes and ``tensor_util.make_tensor_proto`` (TF2-style tensor
  summaries, every dtype and encoding, every plugin, non-summary events, legacy values).

Neither needs TensorFlow. Each function returns a dict describing what it wrote (runs,
files, tags per kind) so tests can assert the fixture is still covering what it claims.
Nothing here reads the data back: that is ``oracle.py``'s job (with TensorBoard's loaders).
"""

from __future__ import annotations

import importlib.util
import io
import os
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np

# A fixed, non-integer base wall time so that expected values do not depend on the clock.
BASE_WALL = 1_700_000_000.125


def _wall(i: float) -> float:
    return BASE_WALL + 0.25 * i


def _png(h: int, w: int, c: int = 3, seed: int = 0) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[c]
    img = Image.fromarray(arr[:, :, 0] if c == 1 else arr, mode=mode)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(h: int, w: int, seed: int = 0) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, mode="RGB").save(buf, format="JPEG")
    return buf.getvalue()


def _wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """16-bit PCM WAV; ``samples`` is [frames, channels] in [-1, 1]."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim == 1:
        samples = samples[:, None]
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def _describe(root: Path) -> dict[str, Any]:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "tfevents" in p.name)
    runs = sorted({os.path.dirname(f) or "." for f in files})
    return {"root": str(root), "runs": runs, "files": files}


# --------------------------------------------------------------------------------------------
# tensorboardX
# --------------------------------------------------------------------------------------------


def write_tbx_logdir(root, video: bool = True) -> dict[str, Any]:
    """Write a logdir with tensorboardX's SummaryWriter.

    Layout (run names as TensorBoard derives them):
      ``.``                 root run: scalars (NaN/±inf/huge/-0.0, duplicate steps, a step that
                            goes back inside one file), text, custom-scalars layout; then a second
                            writer in the same dir (restart from a lower step with purge_step, so a
                            SessionLog START is written) -> two files in one run.
      ``train``             histograms (tensorflow/auto/fd/int/explicit-edge bins, constant and
                            empty-ish data), add_histogram_raw, images CHW/HWC uint8/float,
                            add_images (NCHW, NHWC), audio (mono/stereo), pr curves, mesh,
                            embedding (projector files only, no events), video without moviepy.
      ``train/<main>/<k>``  add_scalars children (nested run dirs below a run).
      ``eval/deep/er``      deeply nested run, three files (restart twice).
      ``hp/<trial>``        add_hparams session (experiment/start/end + metric scalars).
    """
    from tensorboardX import SummaryWriter

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1234)
    info: dict[str, Any] = {"writer": "tensorboardX", "notes": []}

    # ---- root run ('.'), first file ----------------------------------------------------------
    w = SummaryWriter(logdir=str(root), filename_suffix=".a", flush_secs=3600)
    odd = [0.5, float("nan"), float("inf"), float("-inf"), 1e300, -0.0, 3.4e38, 1e-45, -7.25]
    for i, v in enumerate(odd):
        w.add_scalar("loss/odd", v, global_step=i, walltime=_wall(i))
    for i in range(20):
        w.add_scalar("loss/train", 1.0 / (i + 1), global_step=i * 10, walltime=_wall(i))
    # duplicate steps (same step written three times) and a step going back within one file
    for j, v in enumerate([1.0, 2.0, 3.0]):
        w.add_scalar("dup", v, global_step=5, walltime=_wall(30 + j))
    for j, s in enumerate([0, 1, 2, 3, 1, 2, 3, 4]):
        w.add_scalar("back", float(s) + 0.5 * j, global_step=s, walltime=_wall(40 + j))
    # numpy scalars of several dtypes (tensorboardX converts to simple_value float32)
    w.add_scalar("np/int64", np.int64(2**40 + 1), global_step=0, walltime=_wall(50))
    w.add_scalar("np/float64", np.float64(0.1), global_step=0, walltime=_wall(50))
    w.add_scalar("np/float16", np.float16(0.3333), global_step=0, walltime=_wall(50))
    # default wall time (the clock), large and negative steps
    w.add_scalar("clock", 1.0, global_step=2**40)
    w.add_scalar("clock", 2.0, global_step=-3)
    w.add_scalar(
        "with/description",
        4.0,
        1,
        walltime=_wall(51),
        display_name="Disp",
        summary_description="a *markdown* description",
    )
    w.add_text("notes", "hello **world** ünïcødé ✓", global_step=0, walltime=_wall(52))
    w.add_text("notes", "second\nline\twith\ttabs", global_step=1, walltime=_wall(53))
    w.add_text("notes", "", global_step=2, walltime=_wall(54))
    w.add_custom_scalars(
        {
            "Losses": {"train vs odd": ["Multiline", [r"loss/.*"]]},
            "Margins": {"m": ["Margin", ["loss/train", "loss/odd", "dup"]]},
        }
    )
    w.close()

    # ---- root run, second file: a restart from step 30 of loss/train ------------------------
    time.sleep(0.01)
    w = SummaryWriter(logdir=str(root), filename_suffix=".b", purge_step=30, flush_secs=3600)
    for i in range(3, 8):
        w.add_scalar("loss/train", 10.0 + i, global_step=i * 10, walltime=_wall(100 + i))
    w.add_scalar("dup", 4.0, global_step=5, walltime=_wall(110))
    w.close()

    # ---- train run ---------------------------------------------------------------------------
    tr = root / "train"
    w = SummaryWriter(logdir=str(tr), filename_suffix=".a", flush_secs=3600)
    data = rng.normal(size=1000)
    for k, bins in enumerate(["tensorflow", "auto", "fd", 7, np.array([-3.0, -1.0, 0.0, 1.0, 3.0])]):
        for s in range(2):
            w.add_histogram(f"hist/{k}", data * (s + 1) + s, global_step=s, bins=bins, walltime=_wall(200 + 2 * k + s))
    w.add_histogram("hist/const", np.full(50, 3.25), global_step=0, bins="tensorflow", walltime=_wall(220))
    w.add_histogram("hist/int", np.arange(-5, 100, dtype=np.int32), global_step=0, bins=10, walltime=_wall(221))
    w.add_histogram("hist/max_bins", data, global_step=0, bins=100, max_bins=12, walltime=_wall(222))
    counts, limits = np.histogram(data, bins=6)
    w.add_histogram_raw(
        "raw",
        min=float(data.min()),
        max=float(data.max()),
        num=data.size,
        sum=float(data.sum()),
        sum_squares=float(data @ data),
        bucket_limits=limits[1:].tolist(),
        bucket_counts=counts.tolist(),
        global_step=0,
        walltime=_wall(223),
    )
    # empty end buckets (TensorBoard's Python loader trims them, Rust keeps them)
    w.add_histogram_raw(
        "raw_padded",
        min=0.5,
        max=2.5,
        num=4,
        sum=6.0,
        sum_squares=10.5,
        bucket_limits=[0.0, 1.0, 2.0, 3.0, 1e308],
        bucket_counts=[0.0, 1.0, 2.0, 1.0, 0.0],
        global_step=1,
        walltime=_wall(224),
    )
    img_chw_u8 = rng.integers(0, 256, size=(3, 8, 5), dtype=np.uint8)
    img_hwc_f = rng.random(size=(6, 4, 3)).astype(np.float32)
    img_gray = rng.random(size=(1, 7, 9))
    img_rgba = rng.integers(0, 256, size=(4, 4, 4), dtype=np.uint8)
    w.add_image("img/chw_u8", img_chw_u8, 0, walltime=_wall(230))
    w.add_image("img/chw_u8", 255 - img_chw_u8, 1, walltime=_wall(231))
    w.add_image("img/hwc_float", img_hwc_f, 0, walltime=_wall(232), dataformats="HWC")
    w.add_image("img/gray", img_gray, 0, walltime=_wall(233), dataformats="CHW")
    w.add_image("img/hw", rng.random(size=(5, 6)), 0, walltime=_wall(234), dataformats="HW")
    w.add_image("img/rgba", img_rgba, 0, walltime=_wall(235), dataformats="CHW")
    w.add_images("imgs/nchw", rng.random(size=(4, 3, 6, 6)), 0, walltime=_wall(236))
    w.add_images(
        "imgs/nhwc", rng.integers(0, 256, size=(2, 5, 5, 3), dtype=np.uint8), 0, walltime=_wall(237), dataformats="NHWC"
    )
    t = np.linspace(0, 1, 800, endpoint=False)
    try:
        # tensorboardX 2.6 encodes audio with the optional `soundfile` package.
        import soundfile  # noqa: F401

        w.add_audio("audio/mono", np.sin(2 * np.pi * 440 * t)[:, None] * 0.5, 0, sample_rate=8000, walltime=_wall(240))
        stereo = np.stack([np.sin(2 * np.pi * 220 * t), np.cos(2 * np.pi * 330 * t)], axis=1) * 0.3
        w.add_audio("audio/stereo", stereo, 0, sample_rate=16000, walltime=_wall(241))
        w.add_audio("audio/mono", np.zeros((10, 1)), 1, sample_rate=8000, walltime=_wall(242))
        info["audio"] = "add_audio"
    except ImportError:
        # Same on-disk record tensorboardX's add_audio writes (legacy Summary.Audio, WAV).
        from tensorboardX.proto.summary_pb2 import Summary

        for tag, snd, rate, step, wall in (
            ("audio/mono", np.sin(2 * np.pi * 440 * t)[:, None] * 0.5, 8000, 0, _wall(240)),
            (
                "audio/stereo",
                np.stack([np.sin(2 * np.pi * 220 * t), np.cos(2 * np.pi * 330 * t)], axis=1) * 0.3,
                16000,
                0,
                _wall(241),
            ),
            ("audio/mono", np.zeros((10, 1)), 8000, 1, _wall(242)),
        ):
            au = Summary.Audio(
                sample_rate=rate,
                num_channels=snd.shape[1],
                length_frames=snd.shape[0],
                encoded_audio_string=_wav(snd, rate),
                content_type="audio/wav",
            )
            w.file_writer.add_summary(Summary(value=[Summary.Value(tag=tag, audio=au)]), step, wall)
        info["audio"] = "soundfile missing: legacy Summary.Audio via tensorboardX protos"
    labels = rng.integers(0, 2, size=200)
    preds = np.clip(labels * 0.6 + rng.random(200) * 0.5, 0, 1)
    w.add_pr_curve("pr", labels, preds, 0, num_thresholds=11, walltime=_wall(243))
    w.add_pr_curve("pr", labels, preds**2, 1, walltime=_wall(244))
    w.add_pr_curve_raw(
        "pr_raw",
        true_positive_counts=[5, 3, 1],
        false_positive_counts=[5, 1, 0],
        true_negative_counts=[0, 4, 5],
        false_negative_counts=[0, 2, 4],
        precision=[0.5, 0.75, 1.0],
        recall=[1.0, 0.6, 0.2],
        global_step=0,
        num_thresholds=3,
        walltime=_wall(245),
    )
    verts = rng.random(size=(1, 4, 3)).astype(np.float32)
    faces = np.array([[[0, 1, 2], [0, 2, 3]]], dtype=np.int32)
    colors = rng.integers(0, 256, size=(1, 4, 3), dtype=np.uint8)
    w.add_mesh("mesh", vertices=verts, colors=colors, faces=faces, global_step=0, walltime=_wall(246))
    w.add_mesh(
        "points",
        vertices=verts,
        global_step=0,
        walltime=_wall(247),
        config_dict={"material": {"cls": "PointsMaterial", "size": 0.1}},
    )
    try:
        w.add_embedding(rng.random(size=(6, 3)), metadata=[f"p{i}" for i in range(6)], global_step=0, tag="emb")
        info["embedding"] = True
    except Exception as e:  # pragma: no cover - depends on tensorboardX internals
        info["notes"].append(f"add_embedding failed: {e!r}")
        info["embedding"] = False
    if video:
        # Without moviepy tensorboardX logs an error and writes a Summary.Value with a tag and
        # no value at all (the same artifact as wild file CS285 #11).
        try:
            w.add_video("video", rng.random(size=(1, 3, 3, 4, 4)), 0, walltime=_wall(248))
            info["video"] = "written (empty value without moviepy)"
        except Exception as e:
            info["video"] = f"failed: {e!r}"
    w.add_scalars("grp", {"a": 1.0, "b": 2.0}, 0, walltime=_wall(250))
    w.add_scalars("grp", {"a": 1.5, "b": float("nan"), "c": 3.0}, 1, walltime=_wall(251))
    w.close()

    # ---- eval/deep/er: three files, restarts going back each time ---------------------------
    ev = root / "eval" / "deep" / "er"
    for f, (start, stop, off) in enumerate([(0, 6, 0.0), (3, 9, 100.0), (0, 2, 200.0)]):
        w = SummaryWriter(logdir=str(ev), filename_suffix=f".{f}", flush_secs=3600)
        for s in range(start, stop):
            w.add_scalar("acc", off + s, global_step=s, walltime=_wall(300 + 10 * f + s))
            if s % 2 == 0:
                w.add_scalar("acc_even", off + s, global_step=s, walltime=_wall(300 + 10 * f + s))
        w.close()

    # ---- hparams ------------------------------------------------------------------------------
    w = SummaryWriter(logdir=str(root / "hp"), flush_secs=3600)
    w.add_hparams(
        {"lr": 0.01, "opt": "adam", "bn": True, "layers": 3},
        {"hp/acc": 0.75, "hp/loss": 0.5},
        name="trial_0",
        global_step=7,
    )
    w.add_hparams(
        {"lr": 0.1, "opt": "sgd", "bn": False, "layers": 5}, {"hp/acc": 0.5, "hp/loss": float("nan")}, name="trial_1"
    )
    w.close()

    info.update(_describe(root))
    return info


# --------------------------------------------------------------------------------------------
# TensorBoard's own pure-Python writer + protos
# --------------------------------------------------------------------------------------------

# tbscope dtype name -> (DataType enum name, typed field used when not tensor_content)
_DT = {
    "float16": ("DT_HALF", "half_val"),
    "bfloat16": ("DT_BFLOAT16", "half_val"),
    "float32": ("DT_FLOAT", "float_val"),
    "float64": ("DT_DOUBLE", "double_val"),
    "int8": ("DT_INT8", "int_val"),
    "int16": ("DT_INT16", "int_val"),
    "int32": ("DT_INT32", "int_val"),
    "int64": ("DT_INT64", "int64_val"),
    "uint8": ("DT_UINT8", "int_val"),
    "uint16": ("DT_UINT16", "int_val"),
    "uint32": ("DT_UINT32", "uint32_val"),
    "uint64": ("DT_UINT64", "uint64_val"),
    "bool": ("DT_BOOL", "bool_val"),
    "complex64": ("DT_COMPLEX64", "scomplex_val"),
    "complex128": ("DT_COMPLEX128", "dcomplex_val"),
}
NUMERIC_DTYPES = list(_DT)


def _bf16_bits(x) -> np.ndarray:
    """float -> bfloat16 bit patterns (round to nearest even), as uint16."""
    f = np.asarray(x, dtype=np.float32).reshape(-1)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    rounded[nan] = 0x7FC0
    return rounded


def _np_for(dtype: str, values) -> np.ndarray:
    """A numpy array of the given tbscope dtype name; bfloat16 is returned as its uint16 bits."""
    if dtype == "bfloat16":
        return _bf16_bits(values).reshape(np.shape(values))
    return np.asarray(values, dtype=dtype)


def tensor_proto(dtype: str, values, shape=None, encoding: str = "typed"):
    """Build a TensorProto by hand.

    encoding: ``typed`` (the dtype's typed field, all elements), ``content`` (tensor_content,
    little-endian), ``fill`` (typed field holding only the first element; the reader must repeat
    it to fill ``shape``).
    """
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    arr = _np_for(dtype, values)
    shape = list(arr.shape) if shape is None else list(shape)
    dt_name, field = _DT[dtype]
    tp = tensor_pb2.TensorProto(
        dtype=types_pb2.DataType.Value(dt_name),
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]
        ),
    )
    flat = arr.reshape(-1)
    if encoding == "content":
        tp.tensor_content = flat.astype(flat.dtype.newbyteorder("<")).tobytes()
        return tp
    if encoding == "fill":
        flat = flat[:1]
    if dtype in ("complex64", "complex128"):
        pairs = np.stack([flat.real, flat.imag], axis=1).reshape(-1)
        getattr(tp, field).extend(pairs.tolist())
    elif dtype == "float16":
        getattr(tp, field).extend(flat.view(np.uint16).astype(np.int32).tolist())
    elif dtype == "bfloat16":
        getattr(tp, field).extend(flat.astype(np.int32).tolist())
    else:
        getattr(tp, field).extend(flat.tolist())
    return tp


def string_tensor_proto(values, shape=None):
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    vals = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in np.asarray(values, dtype=object).reshape(-1)]
    shape = list(np.shape(values)) if shape is None else list(shape)
    return tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]
        ),
        string_val=vals,
    )


def _next_second():
    """Sleep until the wall clock enters a new second.

    EventFileWriter names files ``events.out.tfevents.<secs>.<host>.<pid>.<uid>``; within one
    second the order is decided by the uid counter as a *string* (".10" < ".9"), so a run whose
    files must sort in creation order starts each later file in a new second.
    """
    now = time.time()
    time.sleep(max(0.0, int(now) + 1.001 - now))


class _TBWriter:
    """Thin helper over TensorBoard's EventFileWriter with deterministic wall times."""

    def __init__(self, logdir: Path, suffix: str = ""):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.w = EventFileWriter(str(logdir), max_queue_size=1000, flush_secs=3600, filename_suffix=suffix)

    def event(self, step: int, wall: float, **kw):
        from tensorboard.compat.proto import event_pb2

        self.w.add_event(event_pb2.Event(step=step, wall_time=wall, **kw))

    def values(self, step: int, wall: float, *values):
        from tensorboard.compat.proto import summary_pb2

        self.event(step, wall, summary=summary_pb2.Summary(value=list(values)))

    def value(self, step: int, wall: float, tag: str, tensor=None, metadata=None, **kw):
        from tensorboard.compat.proto import summary_pb2

        v = summary_pb2.Summary.Value(tag=tag, **kw)
        if tensor is not None:
            v.tensor.CopyFrom(tensor)
        if metadata is not None:
            v.metadata.CopyFrom(metadata)
        self.values(step, wall, v)

    def close(self):
        self.w.close()


def _plugin_md(name: str, content: bytes = b"", data_class: int = 0):
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=name, content=content),
        data_class=data_class,
    )


# Values for rank-0 scalars of each dtype, per step (NaN/inf only where representable).
SCALAR_VALUES = {
    "float16": [0.5, -65504.0, float("nan"), float("inf"), 6e-8],
    "bfloat16": [0.5, -3.0e38, float("nan"), float("-inf"), 1.0e-3],
    "float32": [0.1, -3.4e38, float("nan"), float("inf"), 1e-45],
    "float64": [0.1, -1.7e308, float("nan"), float("-inf"), 5e-324],
    "int8": [1, -128, 127, 0, -1],
    "int16": [1, -32768, 32767, 0, -1],
    "int32": [1, -(2**31), 2**31 - 1, 0, -1],
    "int64": [1, -(2**63), 2**63 - 1, 2**53 + 1, -1],
    "uint8": [1, 0, 255, 128, 7],
    "uint16": [1, 0, 65535, 32768, 7],
    "uint32": [1, 0, 2**32 - 1, 2**31, 7],
    "uint64": [1, 0, 2**64 - 1, 2**63, 2**53 + 1],
    "bool": [True, False, True, False, True],
}


def write_tb_tensor_logdir(root) -> dict[str, Any]:
    """Write a logdir with TensorBoard's EventFileWriter and proto classes.

    Runs:
      ``scalars``            rank-0 tensors of every numeric dtype, plugin ``scalars``: the default
                             encodings of make_tensor_proto, explicit tensor_content, typed fields
                             that make_tensor_proto cannot produce (bfloat16, uint32_val,
                             uint64_val); restart and duplicate steps; a TF1-style series whose
                             later values (and the second file) carry no metadata.
      ``tensors``            unknown plugin ``my_plugin``: every dtype x shapes [], [0], [3],
                             [2,3], [2,1,2] x encodings typed / tensor_content / fill rule;
                             string tensors (rank 0/1/2, empty strings, invalid UTF-8, NUL,
                             fill); a tensor with no metadata at all; a node_name-only value.
      ``plugins``            text (rank 0/1/2/3, fill, empty), histograms ([k,3] float64 via
                             histogram_pb incl. empty data and a single value, [0,3], a float32
                             [k,3] via tensor_content), images ([w,h,png,png], jpeg), audio
                             ([k,2] with labels), pr_curves, hparams (session start/end,
                             experiment), custom_scalars layout, mesh (vertex/face/color),
                             graph sub-plugins (graph_run_metadata, graph_keras_model).
      ``legacy``             legacy Summary.Image (with colorspace), Summary.Audio,
                             HistogramProto (incl. DBL_MAX limits, empty end buckets, zero buckets),
                             simple_value.
      ``events``             graph_def, meta_graph_def, tagged_run_metadata, SessionLog
                             START/STOP/CHECKPOINT, log_message, interleaved with scalars.
      ``.`` (root)           a couple of scalars at the logdir root.
      ``quirks/nan_wall``    a summary event whose wall_time is NaN and one with +inf.
    """
    from tensorboard.compat.proto import (
        config_pb2,
        event_pb2,
        graph_pb2,
        histogram_pb2,
        meta_graph_pb2,
        node_def_pb2,
        summary_pb2,
    )
    from tensorboard.util import tensor_util

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"writer": "tensorboard.summary.writer.event_file_writer", "notes": []}
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    scal_md = scalar_metadata.create_summary_metadata(display_name="", description="")

    # ---- scalars ------------------------------------------------------------------------------
    w = _TBWriter(root / "scalars", ".0")
    for step in range(5):
        wall = _wall(step)
        vals = []
        for dt, series in SCALAR_VALUES.items():
            x = series[step]
            # make_tensor_proto where it can (its real encodings), by hand where it cannot.
            if dt in ("bfloat16", "uint32", "uint64"):
                tp = tensor_proto(dt, x, encoding="typed")
            else:
                tp = tensor_util.make_tensor_proto(np.asarray(x, dtype=dt))
            vals.append(summary_pb2.Summary.Value(tag=f"dtype/{dt}", tensor=tp, metadata=scal_md))
            # the same dtype through tensor_content (what TF's C++ writer emits for float32)
            if dt != "bool":
                vals.append(
                    summary_pb2.Summary.Value(
                        tag=f"content/{dt}", tensor=tensor_proto(dt, x, encoding="content"), metadata=scal_md
                    )
                )
        w.values(step, wall, *vals)
    # python-float default of make_tensor_proto (float32) and int narrowing (int32)
    w.value(0, _wall(6), "default/pyfloat", tensor_util.make_tensor_proto(2.5), scal_md)
    w.value(0, _wall(6), "default/pyint", tensor_util.make_tensor_proto(7), scal_md)
    w.value(0, _wall(6), "default/bigint", tensor_util.make_tensor_proto(2**40), scal_md)
    # restart inside one file + duplicates
    for j, s in enumerate([0, 1, 2, 3, 2, 3, 3, 4, 0]):
        w.value(s, _wall(10 + j), "restart", tensor_util.make_tensor_proto(np.float32(s + j / 10)), scal_md)
    # TF1 style: metadata only on the first value of the tag
    for s in range(3):
        w.value(
            s, _wall(20 + s), "tf1_style", tensor_util.make_tensor_proto(np.float32(s)), scal_md if s == 0 else None
        )
    w.close()
    _next_second()  # file names sort by creation time, not by EventFileWriter's uid counter
    w = _TBWriter(root / "scalars", ".1")  # second file: no metadata at all for tf1_style
    for s in range(3, 6):
        w.value(s, _wall(30 + s), "tf1_style", tensor_util.make_tensor_proto(np.float32(s)))
    w.value(1, _wall(40), "restart", tensor_util.make_tensor_proto(np.float32(-1)), scal_md)
    w.close()

    # ---- tensors (unknown plugin) -------------------------------------------------------------
    w = _TBWriter(root / "tensors")
    my_md = _plugin_md("my_plugin", b"\x08\x01opaque")
    rng = np.random.default_rng(7)
    shapes = [(), (0,), (3,), (2, 3), (2, 1, 2)]
    step = 0
    for dt in NUMERIC_DTYPES:
        for shape in shapes:
            n = int(np.prod(shape, dtype=np.int64))
            if dt == "bool":
                vals = (rng.random(n) > 0.5).reshape(shape)
            elif dt.startswith("complex"):
                vals = (rng.normal(size=n) + 1j * rng.normal(size=n)).reshape(shape)
            elif dt.startswith("float") or dt == "bfloat16":
                vals = rng.normal(size=n).reshape(shape) * 100
            else:
                info_ = np.iinfo(dt)
                vals = rng.integers(info_.min, info_.max, size=n, dtype=dt, endpoint=True).reshape(shape)
            encs = ["typed", "content"]
            if n > 1:
                encs.append("fill")
            for enc in encs:
                w.value(
                    step,
                    _wall(step),
                    f"{dt}/{'x'.join(map(str, shape)) or 'scalar'}/{enc}",
                    tensor_proto(dt, vals, shape=shape, encoding=enc),
                    my_md,
                )
            # TensorBoard's own encoder for the same values, where it supports the dtype
            if dt not in ("bfloat16",) and not (dt in ("uint32", "uint64") and n <= 1):
                tp = tensor_util.make_tensor_proto(np.asarray(vals, dtype=dt))
                w.value(step, _wall(step), f"{dt}/{'x'.join(map(str, shape)) or 'scalar'}/mtp", tp, my_md)
        step += 1
    # same tag over several steps with changing shapes
    for s in range(3):
        w.value(s, _wall(100 + s), "growing", tensor_util.make_tensor_proto(np.arange(s + 1, dtype=np.float32)), my_md)
    # string tensors
    strs = {
        "str/scalar": (["héllo"], []),
        "str/vec": (["a", "", "c\x00d", "✓"], [4]),
        "str/mat": ([b"\xff\xfe bad utf8", b"x", b"", b"\x00"], [2, 2]),
        "str/fill": (["same"], [3]),
        "str/empty": ([], [0]),
    }
    for tag, (vals, shape) in strs.items():
        w.value(0, _wall(110), tag, string_tensor_proto(np.array(vals, dtype=object), shape=shape), my_md)
    # no metadata at all (plugin "") and a legacy node_name-only tensor value
    w.value(0, _wall(120), "no_metadata", tensor_util.make_tensor_proto(np.float64(1.25)))
    w.value(1, _wall(121), "no_metadata", tensor_util.make_tensor_proto(np.array([1, 2], dtype=np.int64)))
    w.values(
        0,
        _wall(122),
        summary_pb2.Summary.Value(node_name="legacy_node", tensor=tensor_util.make_tensor_proto(np.int32(5))),
    )
    # several values for different tags in one event
    w.values(
        5,
        _wall(123),
        summary_pb2.Summary.Value(tag="multi/a", metadata=my_md, tensor=tensor_util.make_tensor_proto(np.int16(1))),
        summary_pb2.Summary.Value(tag="multi/b", metadata=my_md, tensor=tensor_util.make_tensor_proto(np.int16(2))),
    )
    w.close()

    # ---- plugins --------------------------------------------------------------------------------
    from tensorboard.plugins.audio import metadata as audio_metadata
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.plugins.custom_scalar import metadata as cs_metadata
    from tensorboard.plugins.histogram import metadata as hist_metadata
    from tensorboard.plugins.histogram import summary_v2 as hist_v2
    from tensorboard.plugins.image import metadata as image_metadata
    from tensorboard.plugins.mesh import metadata as mesh_metadata
    from tensorboard.plugins.mesh import plugin_data_pb2 as mesh_pd
    from tensorboard.plugins.pr_curve import metadata as pr_metadata
    from tensorboard.plugins.text import summary_v2 as text_v2

    w = _TBWriter(root / "plugins")
    # text
    w.values(0, _wall(0), *text_v2.text_pb("text/r0", "**bold** ünï ✓").value)
    w.values(1, _wall(1), *text_v2.text_pb("text/r0", "").value)
    w.values(0, _wall(2), *text_v2.text_pb("text/r1", np.array(["a", "b\x00c", "ç"])).value)
    w.values(0, _wall(3), *text_v2.text_pb("text/r2", np.array([["r0c0", "r0c1", "r0c2"], ["r1c0", "", "r1c2"]])).value)
    text_md = text_v2.text_pb("x", "x").value[0].metadata
    w.value(
        0,
        _wall(4),
        "text/r3",
        string_tensor_proto(np.array([[["a", "b"], ["c", "d"]], [["e", "f"], ["g", "h"]]], dtype=object)),
        text_md,
    )
    w.value(0, _wall(5), "text/fill", string_tensor_proto(np.array(["rep"], dtype=object), shape=[2, 2]), text_md)
    w.value(0, _wall(6), "text/empty", string_tensor_proto(np.array([], dtype=object), shape=[0]), text_md)
    # histograms
    data = rng.normal(size=500)
    for s in range(3):
        w.values(s, _wall(10 + s), *hist_v2.histogram_pb("hist/v2", data + s).value)
    w.values(0, _wall(13), *hist_v2.histogram_pb("hist/buckets", data, buckets=4).value)
    w.values(0, _wall(14), *hist_v2.histogram_pb("hist/empty_data", [], buckets=3).value)
    w.values(0, _wall(15), *hist_v2.histogram_pb("hist/single", [2.0] * 9, buckets=5).value)
    w.values(0, _wall(16), *hist_v2.histogram_pb("hist/zero_buckets", data, buckets=0).value)
    hmd = hist_metadata.create_summary_metadata(display_name="", description="")
    f32 = np.array([[0, 1, 3], [1, 2, 4.5]], dtype=np.float32)
    w.value(0, _wall(17), "hist/float32_content", tensor_proto("float32", f32, encoding="content"), hmd)
    w.value(0, _wall(18), "hist/v1_shape0", tensor_proto("float64", np.zeros((0, 3))), hmd)
    # images: [w, h, png, png] (width first)
    imd = image_metadata.create_summary_metadata(display_name="", description="")
    pngs = [_png(6, 4, 3, seed=1), _png(6, 4, 3, seed=2)]
    w.value(0, _wall(20), "img/two", string_tensor_proto(np.array([b"4", b"6"] + pngs, dtype=object)), imd)
    w.value(1, _wall(21), "img/two", string_tensor_proto(np.array([b"4", b"6", pngs[1]], dtype=object)), imd)
    w.value(0, _wall(22), "img/jpeg", string_tensor_proto(np.array([b"8", b"5", _jpeg(5, 8)], dtype=object)), imd)
    w.value(0, _wall(23), "img/none", string_tensor_proto(np.array([b"0", b"0"], dtype=object)), imd)
    # audio: [k, 2] = [[wav, label], ...]
    amd = audio_metadata.create_summary_metadata(
        display_name="", description="", encoding=audio_metadata.Encoding.Value("WAV")
    )
    t = np.linspace(0, 1, 400, endpoint=False)
    wavs = [_wav(np.sin(2 * np.pi * 200 * t), 4000), _wav(np.stack([np.sin(t * 50), np.cos(t * 70)], axis=1), 8000)]
    w.value(
        0,
        _wall(30),
        "audio/two",
        string_tensor_proto(np.array([[wavs[0], "first *label*"], [wavs[1], ""]], dtype=object)),
        amd,
    )
    w.value(1, _wall(31), "audio/two", string_tensor_proto(np.array([[wavs[1], "only ✓"]], dtype=object)), amd)
    amd_unknown = audio_metadata.create_summary_metadata(
        display_name="", description="", encoding=audio_metadata.Encoding.Value("UNKNOWN")
    )
    w.value(
        0,
        _wall(32),
        "audio/unknown_encoding",
        string_tensor_proto(np.array([[wavs[0], "x"]], dtype=object)),
        amd_unknown,
    )
    # pr curves: float32 [6, T]
    T = 5
    tp_ = np.array([10, 8, 5, 2, 0], np.float32)
    fp_ = np.array([10, 5, 2, 1, 0], np.float32)
    tn_ = 10 - fp_
    fn_ = 10 - tp_
    prec = tp_ / np.maximum(1e-7, tp_ + fp_)
    rec = tp_ / np.maximum(1e-7, tp_ + fn_)
    w.value(
        0,
        _wall(40),
        "pr",
        tensor_util.make_tensor_proto(np.stack([tp_, fp_, tn_, fn_, prec, rec]).astype(np.float32)),
        pr_metadata.create_summary_metadata(display_name="pr", description="", num_thresholds=T),
    )
    # custom scalars layout
    layout = layout_pb2.Layout(
        category=[
            layout_pb2.Category(
                title="cat",
                chart=[layout_pb2.Chart(title="c1", multiline=layout_pb2.MultilineChartContent(tag=[r"dtype/.*"]))],
            )
        ]
    )
    w.value(
        0,
        _wall(41),
        "custom_scalars__config__",
        tensor_util.make_tensor_proto(layout.SerializeToString()),
        cs_metadata.create_summary_metadata(),
    )
    # mesh
    verts = rng.random((1, 4, 3)).astype(np.float32)
    faces = np.array([[[0, 1, 2], [0, 2, 3]]], np.int32)
    cols = rng.integers(0, 256, (1, 4, 3), dtype=np.uint8)
    comps = (1 << 1) | (1 << 2) | (1 << 3)
    for ctype, arr in (("VERTEX", verts), ("FACE", faces), ("COLOR", cols)):
        md = mesh_metadata.create_summary_metadata(
            "m",
            None,
            mesh_pd.MeshPluginData.ContentType.Value(ctype),
            comps,
            list(arr.shape),
            json_config='{"camera": {"cls": "PerspectiveCamera"}}',
        )
        w.value(0, _wall(42), f"m_{ctype}", tensor_util.make_tensor_proto(arr), md)
    # graph sub-plugins: rank-0 string of a serialized RunMetadata / Keras JSON
    rm = config_pb2.RunMetadata()
    rm.step_stats.dev_stats.add(device="/cpu:0")
    w.value(
        0, _wall(43), "trace", tensor_util.make_tensor_proto(rm.SerializeToString()), _plugin_md("graph_run_metadata")
    )
    w.value(
        0, _wall(44), "keras", tensor_util.make_tensor_proto(b'{"class_name": "Seq"}'), _plugin_md("graph_keras_model")
    )
    w.value(0, _wall(45), "batch_2", tensor_util.make_tensor_proto(b""), _plugin_md("graph_run_metadata_graph"))
    # hparams
    hp_info = {"notes": []}
    try:
        from tensorboard.plugins.hparams import summary_v2 as hp_v2

        hp_session = hp_v2.hparams_pb(
            {"lr": 0.01, "opt": "adam", "bn": True, "n": 3}, trial_id="trial-a", start_time_secs=_wall(0)
        )
        w.values(0, _wall(50), *hp_session.value)
        hp_info["session_start"] = "hparams.summary_v2.hparams_pb"
        try:
            hp_exp = hp_v2.hparams_config_pb(
                [
                    hp_v2.HParam("lr", hp_v2.RealInterval(0.0, 1.0)),
                    hp_v2.HParam("opt", hp_v2.Discrete(["adam", "sgd"])),
                    hp_v2.HParam("bn", hp_v2.Discrete([True, False])),
                    hp_v2.HParam("n", hp_v2.IntInterval(1, 10)),
                ],
                [hp_v2.Metric("dtype/float32", display_name="f32")],
                time_created_secs=_wall(0),
            )
            w.values(0, _wall(51), *hp_exp.value)
            hp_info["experiment"] = "hparams.summary_v2.hparams_config_pb"
        except Exception as e:  # pragma: no cover
            hp_info["notes"].append(f"hparams_config_pb: {e!r}")
    except Exception as e:  # pragma: no cover
        hp_info["notes"].append(f"hparams_pb: {e!r}")
    from tensorboard.plugins.hparams import api_pb2 as hp_api
    from tensorboard.plugins.hparams import metadata as hp_metadata
    from tensorboard.plugins.hparams import plugin_data_pb2 as hp_pd

    end = hp_pd.HParamsPluginData(
        version=0, session_end_info=hp_pd.SessionEndInfo(status=hp_api.STATUS_SUCCESS, end_time_secs=_wall(60))
    )
    w.values(
        9,
        _wall(60),
        summary_pb2.Summary.Value(
            tag=hp_metadata.SESSION_END_INFO_TAG, metadata=_plugin_md("hparams", end.SerializeToString())
        ),
    )  # no tensor, like Lightning
    info["hparams"] = hp_info
    w.close()

    # ---- legacy values ----------------------------------------------------------------------
    w = _TBWriter(root / "legacy")
    png_g = _png(3, 5, 1, seed=3)
    png_rgba = _png(2, 2, 4, seed=4)
    w.values(
        0,
        _wall(0),
        summary_pb2.Summary.Value(
            tag="limg/gray",
            image=summary_pb2.Summary.Image(height=3, width=5, colorspace=1, encoded_image_string=png_g),
        ),
        summary_pb2.Summary.Value(
            tag="limg/rgba",
            image=summary_pb2.Summary.Image(height=2, width=2, colorspace=4, encoded_image_string=png_rgba),
        ),
        summary_pb2.Summary.Value(
            tag="limg/nocs", image=summary_pb2.Summary.Image(height=6, width=4, encoded_image_string=pngs[0])
        ),
    )
    w.values(
        0,
        _wall(1),
        summary_pb2.Summary.Value(
            tag="laudio",
            audio=summary_pb2.Summary.Audio(
                sample_rate=4000.0,
                num_channels=1,
                length_frames=400,
                encoded_audio_string=wavs[0],
                content_type="audio/wav",
            ),
        ),
    )
    w.values(
        1,
        _wall(2),
        summary_pb2.Summary.Value(
            tag="laudio",
            audio=summary_pb2.Summary.Audio(
                sample_rate=8000.0,
                num_channels=2,
                length_frames=400,
                encoded_audio_string=wavs[1],
                content_type="audio/x-wav",
            ),
        ),
    )
    dbl_max = np.finfo(np.float64).max
    histos = {
        "lhist/tf": histogram_pb2.HistogramProto(
            min=-1.5,
            max=2.5,
            num=6,
            sum=3.0,
            sum_squares=12.5,
            bucket_limit=[-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, dbl_max],
            bucket=[0, 1, 2, 0, 2, 1, 0],
        ),
        "lhist/neg_dbl_max": histogram_pb2.HistogramProto(
            min=-4.0,
            max=-4.0,
            num=2,
            sum=-8.0,
            sum_squares=32.0,
            bucket_limit=[-dbl_max, -3.0, dbl_max],
            bucket=[2, 0, 0],
        ),
        "lhist/zero_buckets": histogram_pb2.HistogramProto(min=0, max=0, num=0),
        "lhist/all_empty": histogram_pb2.HistogramProto(
            min=0, max=0, num=0, bucket_limit=[1.0, 2.0], bucket=[0.0, 0.0]
        ),
        "lhist/precise": histogram_pb2.HistogramProto(
            min=0.1,
            max=0.30000000000000004,
            num=3,
            sum=0.6000000000000001,
            sum_squares=0.14,
            bucket_limit=[0.1, 0.2, 0.30000000000000004],
            bucket=[1, 1, 1],
        ),
    }
    for s in range(2):
        w.values(s, _wall(10 + s), *[summary_pb2.Summary.Value(tag=k, histo=h) for k, h in histos.items()])
    for s in range(3):
        w.values(s, _wall(20 + s), summary_pb2.Summary.Value(tag="lscalar", simple_value=float(s) / 3))
    w.values(3, _wall(23), summary_pb2.Summary.Value(tag="lscalar", simple_value=float("nan")))
    w.close()

    # ---- non-summary events -------------------------------------------------------------------
    w = _TBWriter(root / "events")
    g = graph_pb2.GraphDef(
        node=[
            node_def_pb2.NodeDef(name="x", op="Placeholder"),
            node_def_pb2.NodeDef(name="y", op="Identity", input=["x"]),
        ]
    )
    w.event(0, _wall(0), session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    w.event(0, _wall(1), graph_def=g.SerializeToString())
    mg = meta_graph_pb2.MetaGraphDef(graph_def=g)
    w.event(0, _wall(2), meta_graph_def=mg.SerializeToString())
    w.event(0, _wall(3), log_message=event_pb2.LogMessage(level=event_pb2.LogMessage.WARN, message="hello log"))
    for s in range(4):
        w.value(s, _wall(10 + s), "loss", tensor_util.make_tensor_proto(np.float32(4 - s)), scal_md)
        if s == 1:
            w.event(
                s,
                _wall(10.5 + s),
                session_log=event_pb2.SessionLog(
                    status=event_pb2.SessionLog.CHECKPOINT, checkpoint_path="/ckpt/model-1", msg="saved"
                ),
            )
    w.event(
        2,
        _wall(20),
        tagged_run_metadata=event_pb2.TaggedRunMetadata(tag="step2_meta", run_metadata=rm.SerializeToString()),
    )
    w.event(3, _wall(21), session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.STOP))
    # a restart: START again at step 2 (TensorBoard's Python loader purges here by default)
    w.event(2, _wall(22), session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    for s in range(2, 5):
        w.value(s, _wall(30 + s), "loss", tensor_util.make_tensor_proto(np.float32(10 + s)), scal_md)
    w.event(5, _wall(40), graph_def=g.SerializeToString())
    w.close()

    # ---- root run -----------------------------------------------------------------------------
    w = _TBWriter(root)
    w.value(0, _wall(0), "root/scalar", tensor_util.make_tensor_proto(np.float32(1.5)), scal_md)
    w.value(1, _wall(1), "root/scalar", tensor_util.make_tensor_proto(np.float64(2.5)), scal_md)
    w.close()

    # ---- quirks -------------------------------------------------------------------------------
    w = _TBWriter(root / "quirks" / "nan_wall")
    w.value(0, _wall(0), "s", tensor_util.make_tensor_proto(np.float32(1.0)), scal_md)
    w.value(1, float("nan"), "s", tensor_util.make_tensor_proto(np.float32(2.0)), scal_md)
    w.value(2, float("inf"), "s", tensor_util.make_tensor_proto(np.float32(3.0)), scal_md)
    w.value(3, _wall(3), "s", tensor_util.make_tensor_proto(np.float32(4.0)), scal_md)
    w.close()

    info.update(_describe(root))
    return info


__all__ = [
    "BASE_WALL",
    "NUMERIC_DTYPES",
    "SCALAR_VALUES",
    "string_tensor_proto",
    "tensor_proto",
    "write_tb_tensor_logdir",
    "write_tbx_logdir",
]


def write_demo_logdir(root: Path) -> Path:
    """The README's demo logdir (examples/write_demo_logdir.py, written with tensorboardX) at
    ``root``, as the docs' examples read it."""
    script = Path(__file__).resolve().parents[2] / "examples" / "write_demo_logdir.py"
    spec = importlib.util.spec_from_file_location("write_demo_logdir", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(root)
    return root


def tf_default_edges() -> np.ndarray:
    """TensorFlow's default bucket limits the way torch builds them: v = 1e-12, times 1.1 while
    below 1e20 (float64 arithmetic), mirrored to the negatives around 0."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return np.array([-x for x in pos[::-1]] + [0.0] + pos)
