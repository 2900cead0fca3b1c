"""The summary encoders (tbscope._summary, tbscope._pb) against outside truth.

Every encoder's bytes are parsed with TensorBoard's own protos, written into an event file with
TensorBoard's EventFileWriter, and read back with TensorBoard's EventAccumulator and with
tbscope.scan. Where tensorboardX has the same function, its output for the same input is the
reference (pixels via Pillow, samples via wave, plugin data via TensorBoard's plugin protos).
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import tbscope
from PIL import Image
from tbscope import _pb
from tbscope import _summary as S
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.compat.proto import event_pb2, graph_pb2, node_def_pb2, summary_pb2, tensor_pb2
from tensorboard.compat.tensorflow_stub import dtypes as tb_dtypes
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.plugins.hparams import plugin_data_pb2 as hp_pb2
from tensorboard.plugins.mesh import metadata as mesh_metadata
from tensorboard.plugins.mesh import plugin_data_pb2 as mesh_pb2
from tensorboard.plugins.pr_curve import plugin_data_pb2 as pr_pb2
from tensorboard.plugins.projector import projector_config_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

tbx_summary = pytest.importorskip("tensorboardX.summary")

RNG = np.random.default_rng(20240601)


# --- helpers ------------------------------------------------------------------------------------


def parse(b: bytes) -> summary_pb2.Summary:
    return summary_pb2.Summary.FromString(b)


def tbx_bytes(summary: object) -> summary_pb2.Summary:
    """A tensorboardX Summary re-read with TensorBoard's classes (same wire format)."""
    return parse(summary.SerializeToString())  # type: ignore[attr-defined]


def write(logdir: Path, *summaries: bytes, step: int = 7) -> Path:
    """The summaries as events of one file, written by TensorBoard's own writer."""
    writer = EventFileWriter(str(logdir))
    for i, b in enumerate(summaries):
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + i, step=step, summary=parse(b)))
    writer.close()
    return logdir


def accumulate(logdir: Path) -> pea.EventAccumulator:
    acc = pea.EventAccumulator(str(logdir), size_guidance={pea.TENSORS: 0})
    acc.Reload()
    return acc


def decode_png(data: bytes) -> np.ndarray:
    picture = Image.open(io.BytesIO(data))
    assert picture.format == "PNG"
    return np.asarray(picture)


def rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


# --- the protobuf encoder ----------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -5, -(2**63)])
def test_varint_int64_matches_protobuf(step):
    assert _pb.int_field(2, step) == event_pb2.Event(step=step).SerializeToString()


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, -1e300, math.inf, math.nan, 5e-324])
def test_double_matches_protobuf(value):
    expected = event_pb2.Event(wall_time=value).SerializeToString()
    assert _pb.double_field(1, value) == expected


@pytest.mark.parametrize("value", [0.0, 0.1, -3.25, 1e39, -1e39, 1e-46, math.nan])
def test_float_rounding_matches_protobuf(value):
    expected = summary_pb2.Summary.Value(simple_value=value).SerializeToString()
    assert _pb.float_field(2, value, keep_default=True) == expected


def test_strings_packed_and_repeated_match_protobuf():
    md = summary_pb2.SummaryMetadata(display_name="naïve ✓", summary_description="x" * 300)
    assert _pb.bytes_field(2, "naïve ✓") + _pb.bytes_field(3, "x" * 300) == md.SerializeToString()
    values = RNG.normal(size=50)
    hist = summary_pb2.HistogramProto(bucket_limit=values.tolist(), bucket=[])
    assert _pb.packed_doubles(6, values) + _pb.packed_doubles(7, []) == hist.SerializeToString()
    floats = tensor_pb2.TensorProto(float_val=[0.1, 2.5, -7.0])
    assert _pb.packed_floats(5, [0.1, 2.5, -7.0]) == floats.SerializeToString()
    strings = tensor_pb2.TensorProto(string_val=[b"", b"a", "é".encode()])
    assert _pb.repeated_bytes(8, [b"", "a", "é"]) == strings.SerializeToString()
    ints = tensor_pb2.TensorProto(int64_val=[0, -1, 2**40])
    assert _pb.packed_varints(10, [0, -1, 2**40]) == ints.SerializeToString()


# --- arrays in ----------------------------------------------------------------------------------


class ArrayLike:
    """An object that only offers __array__ (as jax arrays and pandas objects do)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


def test_to_numpy_duck_types():
    a = np.arange(6.0).reshape(2, 3)
    assert S.to_numpy(a) is a
    assert S.to_numpy([[1, 2], [3, 4]]).shape == (2, 2)
    assert S.to_numpy(np.float32(2.5)).dtype == np.float32
    assert S.to_numpy(3).shape == ()
    np.testing.assert_array_equal(S.to_numpy(ArrayLike(a)), a)
    import pandas as pd

    np.testing.assert_array_equal(S.to_numpy(pd.Series([1.0, 2.0])), [1.0, 2.0])
    with pytest.raises(TypeError, match="expected an array"):
        S.to_numpy(object())


_NUMPY_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]


@pytest.mark.parametrize("dtype", _NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tf_dtype_matches_tensorboard(dtype):
    assert S.tf_dtype(dtype) == tb_dtypes.as_dtype(np.dtype(dtype)).as_datatype_enum
    assert S.tf_dtype(np.dtype(dtype).name) == S.tf_dtype(dtype)
    assert S.tf_dtype("torch." + np.dtype(dtype).name) == S.tf_dtype(dtype)


def test_tf_dtype_strings_bfloat16_and_errors():
    assert S.tf_dtype(np.dtype("S3")) == S.tf_dtype(np.dtype("U2")) == S.tf_dtype(object) == S.tf_dtype(str) == 7
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert S.tf_dtype(ml_dtypes.bfloat16) == 14 == tb_dtypes.bfloat16.as_datatype_enum
    with pytest.raises(TypeError, match="no TensorFlow DataType.*datetime64"):
        S.tf_dtype(np.dtype("datetime64[ns]"))


# --- tensors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", _NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tensor_summary_every_dtype(tmp_path, dtype):
    arr = (RNG.normal(size=(2, 3, 4)) * 50).astype(dtype)
    b = S.tensor_summary("t", arr, S.tensor_metadata("custom", b"\x08\x01", "Shown", "About it"))
    value = parse(b).value[0]
    np.testing.assert_array_equal(tensor_util.make_ndarray(value.tensor), arr)
    assert value.metadata.plugin_data.plugin_name == "custom"
    assert value.metadata.plugin_data.content == b"\x08\x01"
    assert (value.metadata.display_name, value.metadata.summary_description) == ("Shown", "About it")
    write(tmp_path, b)
    (got,) = tbscope.scan(tmp_path).tensors().values()
    np.testing.assert_array_equal(got, arr)


def test_tensor_summary_strings_and_big_endian(tmp_path):
    words = np.array([["a", "ünï"], ["", "x y"]])
    value = parse(S.tensor_summary("s", words)).value[0]
    assert value.tensor.dtype == 7 and not value.HasField("metadata")
    np.testing.assert_array_equal(tensor_util.make_ndarray(value.tensor), np.char.encode(words, "utf-8"))
    big = np.arange(5, dtype=">i4")
    np.testing.assert_array_equal(tensor_util.make_ndarray(parse(S.tensor_summary("b", big)).value[0].tensor), big)
    with pytest.raises(TypeError, match="only str or bytes"):
        S.tensor_summary("o", np.array(["a", 3], dtype=object))


def test_tensor_summary_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arr = np.array([1.5, -2.0, 3.0e38], dtype=ml_dtypes.bfloat16)
    value = parse(S.tensor_summary("bf", arr)).value[0]
    assert value.tensor.dtype == 14
    assert value.tensor.tensor_content == arr.tobytes()
    write(tmp_path, S.tensor_summary("bf", arr))
    frame = tbscope.scan(tmp_path).tensors()
    assert frame.to_pandas()["dtype"].tolist() == ["bfloat16"]
    np.testing.assert_array_equal(frame.values()[0].astype(np.float32), arr.astype(np.float32))


# --- images -------------------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("size", [(1, 1), (7, 13), (64, 3)])
def test_png_encoder_decodes_exactly(channels, size):
    hwc = RNG.integers(0, 256, size=(*size, channels), dtype=np.uint8)
    decoded = decode_png(S.encode_png(hwc))
    assert decoded.reshape(*size, channels).tolist() == hwc.tolist()


@pytest.mark.parametrize(
    ("shape", "dataformats"),
    [((3, 20, 30), "CHW"), ((20, 30, 3), "HWC"), ((20, 30, 4), "HWC"), ((4, 20, 30), "CHW"), ((3, 30, 20), "CWH")],
)
def test_image_float_matches_tensorboardx(shape, dataformats):
    img = RNG.random(shape, dtype=np.float32)
    ours = parse(S.image("img", img, dataformats=dataformats)).value[0]
    theirs = tbx_bytes(tbx_summary.image("img", img, dataformats=dataformats)).value[0]
    assert ours.tag == theirs.tag
    assert (ours.image.height, ours.image.width, ours.image.colorspace) == (
        theirs.image.height,
        theirs.image.width,
        theirs.image.colorspace,
    )
    np.testing.assert_array_equal(
        decode_png(ours.image.encoded_image_string), decode_png(theirs.image.encoded_image_string)
    )


def test_image_gray_and_uint8_match_tensorboardx():
    gray = RNG.random((1, 9, 11), dtype=np.float32)
    ours = parse(S.image("g", gray)).value[0].image
    theirs = tbx_bytes(tbx_summary.image("g", gray)).value[0].image
    # Gray is stored as a gray PNG (colorspace 1) where torch/tensorboardX expand to RGB; the
    # picture is the same.
    assert ours.colorspace == 1 and decode_png(ours.encoded_image_string).ndim == 2
    np.testing.assert_array_equal(rgb(ours.encoded_image_string), rgb(theirs.encoded_image_string))
    hw = RNG.integers(0, 256, (5, 6), dtype=np.uint8)
    np.testing.assert_array_equal(
        decode_png(parse(S.image("hw", hw, dataformats="HW")).value[0].image.encoded_image_string), hw
    )


def test_image_scaling_clips_like_torch():
    img = np.array([[[-0.5, 0.0, 0.5, 1.0, 1.5, np.nan, np.inf, 0.999]]], dtype=np.float32)
    decoded = decode_png(parse(S.image("c", img)).value[0].image.encoded_image_string)
    # torch: (x.astype(float32) * 255).clip(0, 255).astype(uint8); NaN is 0 here.
    assert decoded.tolist() == [[0, 0, 127, 255, 255, 0, 255, 254]]
    assert decode_png(
        parse(S.image("i", np.ones((1, 2, 2), dtype=np.int64))).value[0].image.encoded_image_string
    ).tolist() == [[255, 255], [255, 255]]


@pytest.mark.parametrize("dataformats", ["NCHW", "NHWC"])
@pytest.mark.parametrize("n", [1, 3, 8, 11])
def test_images_grid_matches_tensorboardx(n, dataformats):
    nchw = RNG.random((n, 3, 6, 5), dtype=np.float32)
    batch = nchw if dataformats == "NCHW" else nchw.transpose(0, 2, 3, 1)
    ours = parse(S.images("grid", batch, dataformats=dataformats)).value[0].image
    theirs = tbx_bytes(tbx_summary.image("grid", batch, dataformats=dataformats)).value[0].image
    assert (ours.height, ours.width) == (theirs.height, theirs.width) == (6 * math.ceil(n / 8), 5 * min(n, 8))
    np.testing.assert_array_equal(decode_png(ours.encoded_image_string), decode_png(theirs.encoded_image_string))


def test_image_rescale_matches_tensorboardx_pixels():
    img = RNG.random((3, 16, 24), dtype=np.float32)
    ours = parse(S.image("r", img, rescale=0.5)).value[0].image
    theirs = tbx_bytes(tbx_summary.image("r", img, rescale=0.5)).value[0].image
    np.testing.assert_array_equal(decode_png(ours.encoded_image_string), decode_png(theirs.encoded_image_string))
    # The summary states the stored size (tensorboardX states the size before rescaling).
    assert (ours.height, ours.width) == (8, 12)


def test_without_pillow_nearest_neighbour_and_no_labels(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` now raises ImportError
    img = RNG.integers(0, 256, (3, 2, 3), dtype=np.uint8)
    big = parse(S.image("r", img, rescale=2)).value[0].image
    monkeypatch.undo()
    expected = img.transpose(1, 2, 0).repeat(2, axis=0).repeat(2, axis=1)
    np.testing.assert_array_equal(decode_png(big.encoded_image_string), expected)
    monkeypatch.setitem(sys.modules, "PIL", None)
    boxes = [[1, 1, 6, 6]]
    labelled = S.image_boxes("b", np.zeros((3, 8, 8)), boxes, labels=["x"])
    monkeypatch.undo()
    assert labelled == S.image_boxes("b", np.zeros((3, 8, 8)), boxes)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: S.image("x", np.zeros((3, 4, 4)), dataformats="CHWW"), "not a layout"),
        (lambda: S.image("x", np.zeros((3, 4, 4)), dataformats="HW"), "describes a 2-D tensor"),
        (lambda: S.image("x", np.zeros((5, 4, 4))), "has 5"),
        (lambda: S.image("x", np.zeros((3, 0, 4))), "empty"),
        (lambda: S.image("x", np.zeros((3, 4, 4), dtype=complex)), "dtype complex128"),
        (lambda: S.image("x", np.zeros((3, 4, 4)), rescale=0), "rescale"),
        (lambda: S.images("x", np.zeros((3, 4, 4))), "4-D"),
        (lambda: S.images("x", np.zeros((0, 3, 4, 4))), "empty"),
        (lambda: S.image(3, np.zeros((3, 4, 4))), "tag must be a str"),  # type: ignore[arg-type]
    ],
)
def test_image_errors_say_what_was_expected(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_images_read_back_by_tensorboard_and_tbscope(tmp_path):
    img = RNG.integers(0, 256, (4, 10, 12), dtype=np.uint8)
    batch = RNG.random((3, 3, 5, 5), dtype=np.float32)
    single, grid = S.image("one", img), S.images("many", batch)
    acc = accumulate(write(tmp_path, single, grid))
    for tag, b in (("one", single), ("many", grid)):
        assert acc.SummaryMetadata(tag).plugin_data.plugin_name == "images"
        width, height, png = tensor_util.make_ndarray(acc.Tensors(tag)[0].tensor_proto)
        image = parse(b).value[0].image
        assert (int(width), int(height), png) == (image.width, image.height, image.encoded_image_string)
    frame = tbscope.scan(tmp_path).images()
    table = frame.to_pandas().set_index("tag")
    assert table.loc["one", "width"] == 12 and table.loc["one", "height"] == 10
    assert table.loc["many", "width"] == 15
    row = list(frame.to_pandas()["tag"]).index("one")
    np.testing.assert_array_equal(decode_png(frame.blob(row)), img.transpose(1, 2, 0))


def test_image_boxes_outlines_inside_each_box():
    img = np.full((3, 20, 30), 0.5, dtype=np.float32)
    boxes = np.array([[2, 3, 12, 15], [25, 10, 40, 30]])  # the second is clipped by the image
    out = decode_png(parse(S.image_boxes("b", img, boxes)).value[0].image.encoded_image_string)
    red = (out == [255, 0, 0]).all(axis=2)
    expected = np.zeros((20, 30), dtype=bool)
    for x0, y0, x1, y1 in boxes:
        box = np.zeros_like(expected)
        box[y0 : y1 + 1, x0 : x1 + 1] = True
        inner = np.zeros_like(expected)
        inner[y0 + 2 : y1 - 1, x0 + 2 : x1 - 1] = True
        expected |= box & ~inner
    assert (red == expected).all()
    assert (out[~red] == 127).all()  # every other pixel untouched


def test_image_boxes_labels_and_gray(tmp_path):
    gray = np.full((1, 40, 60), 255, dtype=np.uint8)
    b = S.image_boxes("b", gray, [[5.0, 5.0, 50.0, 30.0]], labels=["cat"])
    image = parse(b).value[0].image
    assert image.colorspace == 3
    out = decode_png(image.encoded_image_string)
    label_band = out[18:31, 6:20]  # above the bottom-left corner (5, 30), inside the box
    assert (label_band[:, :, 0] < 100).sum() > 10, "label text is drawn in black"
    assert (label_band == [255, 0, 0]).all(axis=2).sum() > 50, "on a red band"
    with pytest.raises(ValueError, match="shape"):
        S.image_boxes("b", gray, [[1, 2, 3]])
    with pytest.raises(ValueError, match="one per box"):
        S.image_boxes("b", gray, [[1, 2, 3, 4]], labels=["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        S.image_boxes("b", gray, [[1, 2, np.nan, 4]])


def test_figure_matches_matplotlib_render(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def draw(seed):
        fig = plt.figure(figsize=(2, 1.5), dpi=50)
        fig.gca().plot(np.random.default_rng(seed).random(10))
        return fig

    reference = draw(1)
    canvas = FigureCanvasAgg(reference)
    canvas.draw()
    expected = np.asarray(canvas.buffer_rgba())[:, :, :3]
    plt.close(reference)
    fig = draw(1)
    image = parse(S.figure("fig", fig)).value[0].image
    assert not plt.fignum_exists(fig.number), "close=True closes the figure"
    assert (image.height, image.width, image.colorspace) == (75, 100, 3)
    np.testing.assert_array_equal(decode_png(image.encoded_image_string), expected)
    kept = draw(2)
    both = parse(S.figure("figs", [draw(1), kept], close=False)).value[0].image
    assert plt.fignum_exists(kept.number)
    assert (both.height, both.width) == (75, 200)
    np.testing.assert_array_equal(decode_png(both.encoded_image_string)[:, :100], expected)
    plt.close("all")
    with pytest.raises(TypeError, match="matplotlib Figure"):
        S.figure("x", np.zeros((3, 3)))


# --- video --------------------------------------------------------------------------------------


def gif_frames(data: bytes) -> tuple[list[np.ndarray], list[int]]:
    picture = Image.open(io.BytesIO(data))
    assert picture.format == "GIF"
    frames, durations = [], []
    for i in range(picture.n_frames):
        picture.seek(i)
        frames.append(np.asarray(picture.convert("RGB")))
        durations.append(picture.info["duration"])
    return frames, durations


def test_video_gif_frames_exact_with_few_colours(tmp_path):
    palette = RNG.integers(0, 256, (40, 3), dtype=np.uint8)
    clip = palette[RNG.integers(0, 40, (1, 6, 24, 32))].transpose(0, 1, 4, 2, 3)  # [N, T, C, H, W]
    b = S.video("v", clip, fps=5)
    image = parse(b).value[0].image
    assert (image.height, image.width, image.colorspace) == (24, 32, 3)
    frames, durations = gif_frames(image.encoded_image_string)
    assert len(frames) == 6 and durations == [200] * 6
    for t, frame in enumerate(frames):
        np.testing.assert_array_equal(frame, clip[0, t].transpose(1, 2, 0))
    acc = accumulate(write(tmp_path, b))
    assert tensor_util.make_ndarray(acc.Tensors("v")[0].tensor_proto)[2] == image.encoded_image_string
    table = tbscope.scan(tmp_path).images().to_pandas()
    assert table["content_type"].tolist() == ["image/gif"]


def test_video_gray_random_noise_survives_lzw_table_resets():
    # Random 8-bit noise fills LZW's 4096-entry table many times per frame.
    clip = RNG.integers(0, 256, (1, 2, 1, 120, 150), dtype=np.uint8)
    frames, _ = gif_frames(parse(S.video("v", clip)).value[0].image.encoded_image_string)
    for t, frame in enumerate(frames):
        np.testing.assert_array_equal(frame[:, :, 0], clip[0, t, 0])


def test_video_many_colours_quantised_and_batch_tiled_like_torch():
    clip = RNG.random((3, 2, 3, 8, 10), dtype=np.float32)  # ~480 colours: more than a GIF holds
    frames, durations = gif_frames(parse(S.video("v", clip, fps=4)).value[0].image.encoded_image_string)
    assert durations == [250, 250]
    # torch's layout: N=3 padded to 4 clips, 2**floor(log2(3)/2) = 1 row of 4.
    assert frames[0].shape == (8, 40, 3)
    expected = (clip * 255).astype(np.uint8)
    for t, frame in enumerate(frames):
        for i in range(3):
            tile = frame[:, 10 * i : 10 * (i + 1)].astype(int)
            # Quantised to a 6x7x6 colour cube: at most half a level away per channel.
            assert np.abs(tile - expected[i, t].transpose(1, 2, 0)).max() <= 26
        assert (frame[:, 30:] == 0).all(), "the padding clip is black"


def test_video_errors():
    with pytest.raises(ValueError, match=r"5-D tensor \[N, T, C, H, W\]"):
        S.video("v", np.zeros((2, 3, 4, 4)))
    with pytest.raises(ValueError, match="must be 1, 3 or 4"):
        S.video("v", np.zeros((1, 2, 2, 4, 4)))
    with pytest.raises(ValueError, match="fps"):
        S.video("v", np.zeros((1, 2, 3, 4, 4)), fps=0)


# --- audio --------------------------------------------------------------------------------------


def wav_samples(data: bytes) -> tuple[np.ndarray, int, int]:
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getsampwidth() == 2
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        return frames.reshape(-1, wav.getnchannels()), wav.getframerate(), wav.getnchannels()


def test_audio_mono_samples_like_torch(tmp_path):
    clip = np.sin(np.linspace(0, 40, 1000)).astype(np.float32) * 1.2  # peaks clip at +-1
    b = S.audio("a", clip, sample_rate=8000)
    audio = parse(b).value[0].audio
    assert (audio.sample_rate, audio.num_channels, audio.length_frames, audio.content_type) == (
        8000,
        1,
        1000,
        "audio/wav",
    )
    samples, rate, channels = wav_samples(audio.encoded_audio_string)
    assert (rate, channels) == (8000, 1)
    # torch: (clip.clip(-1, 1) * np.iinfo(np.int16).max).astype("<i2")
    np.testing.assert_array_equal(samples[:, 0], (clip.clip(-1, 1) * np.iinfo(np.int16).max).astype("<i2"))
    acc = accumulate(write(tmp_path, b))
    assert acc.SummaryMetadata("a").plugin_data.plugin_name == "audio"
    # TensorBoard keeps the clips of an audio tensor and drops the labels column.
    assert tensor_util.make_ndarray(acc.Tensors("a")[0].tensor_proto).tolist() == [audio.encoded_audio_string]
    table = tbscope.read_audio(tmp_path)
    assert table["sample_rate"].tolist() == [8000.0] and table["length_frames"].tolist() == [1000]
    assert table["data"].tolist() == [audio.encoded_audio_string]


def test_audio_stereo_squeeze_int16_and_errors():
    stereo = RNG.uniform(-1, 1, (500, 2))
    samples, _, channels = wav_samples(parse(S.audio("s", stereo)).value[0].audio.encoded_audio_string)
    assert channels == 2
    np.testing.assert_array_equal(samples, (stereo * 32767).astype("<i2"))
    squeezed = parse(S.audio("m", RNG.uniform(-1, 1, (1, 300)))).value[0].audio
    assert (squeezed.num_channels, squeezed.length_frames) == (1, 300)
    pcm = np.array([0, 1000, -32768, 32767], dtype=np.int16)
    np.testing.assert_array_equal(
        wav_samples(parse(S.audio("p", pcm)).value[0].audio.encoded_audio_string)[0][:, 0], pcm
    )
    with pytest.raises(ValueError, match=r"waveform\.T"):
        S.audio("x", np.zeros((2, 100)))
    with pytest.raises(ValueError, match="empty"):
        S.audio("x", np.zeros(0))
    with pytest.raises(TypeError, match="dtype"):
        S.audio("x", np.array(["a"]))


# --- text ---------------------------------------------------------------------------------------


def test_text_matches_tensorboardx(tmp_path):
    ours = parse(S.text("notes/text_summary", "**bold** ünïcode")).value[0]
    theirs = tbx_bytes(tbx_summary.text("notes", "**bold** ünïcode")).value[0]
    assert ours.tag == theirs.tag
    assert ours.tensor == theirs.tensor
    assert ours.metadata.plugin_data == theirs.metadata.plugin_data
    table_b = S.text("table", [["a", "b"], ["c", "d"]])
    acc = accumulate(write(tmp_path, S.text("note", "hello"), table_b))
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"
    assert tensor_util.make_ndarray(acc.Tensors("note")[0].tensor_proto).tolist() == [b"hello"]
    assert tensor_util.make_ndarray(acc.Tensors("table")[0].tensor_proto).shape == (2, 2)
    text = tbscope.read_text(tmp_path)
    assert text[text["tag"] == "note"]["text"].tolist() == ["hello"]
    assert text[text["tag"] == "table"]["text"].tolist() == ["a", "b", "c", "d"]
    with pytest.raises(TypeError, match="expected a str"):
        S.text("x", [1, 2])


# --- hparams ------------------------------------------------------------------------------------


def plugin_content(summary_bytes: bytes) -> hp_pb2.HParamsPluginData:
    value = parse(summary_bytes).value[0]
    assert value.metadata.plugin_data.plugin_name == "hparams"
    return hp_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)


HPARAMS = {"lr": 0.01, "layers": 3, "optimizer": "adam", "nesterov": True, "dropout": None}
METRICS = {"loss/val": 0.5, "accuracy": 0.9}


def test_hparams_match_tensorboardx():
    ours = S.hparams(HPARAMS, METRICS)
    theirs = [s.SerializeToString() for s in tbx_summary.hparams(HPARAMS, METRICS)]
    for tag, o, t in zip((S.EXPERIMENT_TAG, S.SESSION_START_INFO_TAG, S.SESSION_END_INFO_TAG), ours, theirs):
        assert parse(o).value[0].tag == parse(t).value[0].tag == tag
        assert plugin_content(o) == plugin_content(t)
    experiment = plugin_content(ours[0]).experiment
    types = {info.name: info.type for info in experiment.hparam_infos}
    assert types == {
        "lr": api_pb2.DATA_TYPE_FLOAT64,
        "layers": api_pb2.DATA_TYPE_FLOAT64,
        "optimizer": api_pb2.DATA_TYPE_STRING,
        "nesterov": api_pb2.DATA_TYPE_BOOL,
    }
    assert [m.name.tag for m in experiment.metric_infos] == ["loss/val", "accuracy"]
    assert plugin_content(ours[2]).session_end_info.status == api_pb2.STATUS_SUCCESS


def test_hparams_domains_and_values_read_by_tensorboard_and_tbscope(tmp_path):
    domains = {"optimizer": ["adam", "sgd"], "layers": [2, 3, 4.5], "nesterov": [True, False]}
    experiment, start, end = S.hparams(HPARAMS, METRICS, hparam_domain_discrete=domains)
    acc = accumulate(write(tmp_path, experiment, start, end))
    content = acc.PluginTagToContent("hparams")
    parsed = hp_metadata.parse_experiment_plugin_data(content[S.EXPERIMENT_TAG])
    infos = {info.name: info for info in parsed.hparam_infos}
    assert [v.string_value for v in infos["optimizer"].domain_discrete.values] == ["adam", "sgd"]
    assert [v.number_value for v in infos["layers"].domain_discrete.values] == [2, 3, 4.5]
    assert [v.bool_value for v in infos["nesterov"].domain_discrete.values] == [True, False]
    assert infos["lr"].WhichOneof("domain") is None
    session = hp_metadata.parse_session_start_info_plugin_data(content[S.SESSION_START_INFO_TAG])
    assert session.hparams["lr"].number_value == 0.01
    assert session.hparams["nesterov"].bool_value is True
    assert session.hparams["optimizer"].string_value == "adam"
    assert "dropout" not in session.hparams
    assert (
        hp_metadata.parse_session_end_info_plugin_data(content[S.SESSION_END_INFO_TAG]).status == api_pb2.STATUS_SUCCESS
    )
    row = tbscope.scan(tmp_path).hparams().to_pandas().iloc[0]
    assert (row["hparam:lr"], row["hparam:layers"], row["hparam:optimizer"], bool(row["hparam:nesterov"])) == (
        0.01,
        3.0,
        "adam",
        True,
    )


def test_hparams_typed_scalars_and_errors():
    values = {"a": np.float32(0.5), "b": np.array([7]), "c": np.bool_(False), "d": np.array([True]), "f": abs}
    hp = plugin_content(S.hparams(values, {})[1]).session_start_info.hparams
    assert (hp["a"].number_value, hp["b"].number_value, hp["c"].bool_value, hp["f"].string_value) == (
        0.5,
        7.0,
        False,
        "abs",
    )
    assert hp["c"].WhichOneof("kind") == hp["d"].WhichOneof("kind") == "bool_value"
    with pytest.raises(TypeError, match="'bad' is a list"):
        S.hparams({"bad": [1, 2]}, {})
    with pytest.raises(TypeError, match="same type"):
        S.hparams({"opt": "adam"}, {}, hparam_domain_discrete={"opt": ["adam", 1]})
    with pytest.raises(ValueError, match="not in hparam_dict"):
        S.hparams({"opt": "adam"}, {}, hparam_domain_discrete={"other": ["x"]})
    with pytest.raises(TypeError, match="metric_dict must be a dict"):
        S.hparams({}, ["loss"])  # type: ignore[arg-type]


# --- PR curves ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_pr_curve_matches_tensorboardx(tmp_path, dtype, weighted):
    # Random scores plus every threshold itself: at i/126 a float32 product lands on the bucket
    # boundary on one side or the other depending on the precision it is computed in.
    predictions = np.concatenate([RNG.random(300), np.arange(127) / 126]).astype(dtype)
    labels = RNG.integers(0, 2, len(predictions))
    weights = RNG.random(len(predictions)) if weighted else None
    ours = parse(S.pr_curve("pr", labels, predictions, weights=weights)).value[0]
    theirs = tbx_bytes(tbx_summary.pr_curve("pr", labels, predictions, weights=weights)).value[0]
    np.testing.assert_array_equal(tensor_util.make_ndarray(ours.tensor), tensor_util.make_ndarray(theirs.tensor))
    assert tensor_util.make_ndarray(ours.tensor).dtype == np.float32
    assert ours.metadata.plugin_data.plugin_name == theirs.metadata.plugin_data.plugin_name == "pr_curves"
    assert pr_pb2.PrCurvePluginData.FromString(
        ours.metadata.plugin_data.content
    ) == pr_pb2.PrCurvePluginData.FromString(theirs.metadata.plugin_data.content)
    acc = accumulate(write(tmp_path, S.pr_curve("pr", labels, predictions, weights=weights)))
    assert tensor_util.make_ndarray(acc.Tensors("pr")[0].tensor_proto).shape == (6, 127)


def test_pr_curve_raw_matches_tensorboardx_and_more_thresholds():
    n = 20
    counts = [RNG.integers(0, 100, n).astype(float) for _ in range(4)] + [RNG.random(n), RNG.random(n)]
    ours = parse(S.pr_curve_raw("raw", *counts, num_thresholds=n)).value[0]
    theirs = tbx_bytes(tbx_summary.pr_curve_raw("raw", *counts, num_thresholds=n)).value[0]
    assert ours.tensor.dtype == theirs.tensor.dtype
    np.testing.assert_array_equal(tensor_util.make_ndarray(ours.tensor), tensor_util.make_ndarray(theirs.tensor))
    assert ours.metadata.plugin_data == theirs.metadata.plugin_data
    # Above 127 thresholds torch and tensorboardX silently fall back to 127; we keep what is asked.
    big = parse(S.pr_curve("big", RNG.integers(0, 2, 50), RNG.random(50), num_thresholds=200)).value[0]
    assert tensor_util.make_ndarray(big.tensor).shape == (6, 200)
    assert pr_pb2.PrCurvePluginData.FromString(big.metadata.plugin_data.content).num_thresholds == 200
    with pytest.raises(ValueError, match="must be 20 numbers"):
        S.pr_curve_raw("raw", *counts[:5], RNG.random(19), num_thresholds=n)
    with pytest.raises(ValueError, match="one shape"):
        S.pr_curve("p", [0, 1], [0.5])
    with pytest.raises(ValueError, match="num_thresholds"):
        S.pr_curve("p", [0, 1], [0.5, 0.1], num_thresholds=1)


# --- custom scalars -----------------------------------------------------------------------------


def test_custom_scalars_match_tensorboardx(tmp_path):
    layout = {
        "Taiwan": {"twse": ["Multiline", ["twse/0050", "twse/2330"]]},
        "USA": {"dow": ["Margin", ["dow/aaa", "dow/bbb", "dow/ccc"]], "nasdaq": ["Margin", ["n/a", "n/b", "n/c"]]},
    }
    ours = parse(S.custom_scalars(layout)).value[0]
    theirs = tbx_bytes(tbx_summary.custom_scalars(layout)).value[0]
    assert ours.tag == theirs.tag == "custom_scalars__config__"
    assert ours.metadata == theirs.metadata
    our_layout = layout_pb2.Layout.FromString(tensor_util.make_ndarray(ours.tensor).item())
    assert our_layout == layout_pb2.Layout.FromString(tensor_util.make_ndarray(theirs.tensor).item())
    assert our_layout.category[1].chart[0].margin.series[0].upper == "dow/ccc"
    acc = accumulate(write(tmp_path, S.custom_scalars(layout)))
    assert "custom_scalars__config__" in acc.PluginTagToContent("custom_scalars")
    with pytest.raises(ValueError, match="'Multiline' or 'Margin'"):
        S.custom_scalars({"c": {"t": ["Bars", ["a"]]}})
    with pytest.raises(ValueError, match=r"\[value, lower, upper\]"):
        S.custom_scalars({"c": {"t": ["Margin", ["a", "b"]]}})


# --- meshes -------------------------------------------------------------------------------------


def test_mesh_one_summary_per_component_like_tensorboard(tmp_path):
    vertices = RNG.normal(size=(1, 4, 3)).astype(np.float32)
    faces = np.array([[[0, 1, 2], [0, 2, 3]]])
    colors = RNG.integers(0, 256, (1, 4, 3))
    config = {"camera": {"cls": "PerspectiveCamera", "fov": 75}}
    parts = S.mesh("m", vertices, colors, faces, config, description="a tetrahedron")
    assert len(parts) == 3
    content_types = [mesh_pb2.MeshPluginData.VERTEX, mesh_pb2.MeshPluginData.FACE, mesh_pb2.MeshPluginData.COLOR]
    components = mesh_metadata.get_components_bitmask(content_types)
    for b, content_type, arr in zip(parts, content_types, (vertices, faces, colors)):
        value = parse(b).value[0]
        assert value.tag == mesh_metadata.get_instance_name("m", content_type)
        expected = mesh_metadata.create_summary_metadata(
            "m",
            None,
            content_type,
            components,
            arr.shape,
            "a tetrahedron",
            json_config=json.dumps(config, sort_keys=True),
        )
        assert value.metadata == expected
        np.testing.assert_array_equal(tensor_util.make_ndarray(value.tensor), arr)
    acc = accumulate(write(tmp_path, *parts))
    assert set(acc.PluginTagToContent("mesh")) == {"m_VERTEX", "m_FACE", "m_COLOR"}
    vertices_only = S.mesh("v", vertices, None, None, None)
    assert len(vertices_only) == 1
    md = mesh_metadata.parse_plugin_metadata(parse(vertices_only[0]).value[0].metadata.plugin_data.content)
    assert (md.components, md.json_config) == (1 << mesh_pb2.MeshPluginData.VERTEX, "{}")
    with pytest.raises(ValueError, match=r"\[B, N, 3\]"):
        S.mesh("m", np.zeros((4, 3)), None, None, None)


# --- graphs -------------------------------------------------------------------------------------


def test_graph_event_from_graphdef_and_bytes(tmp_path):
    graph = graph_pb2.GraphDef(
        node=[node_def_pb2.NodeDef(name="x", op="Placeholder"), node_def_pb2.NodeDef(name="y", op="Relu", input=["x"])]
    )
    event = event_pb2.Event.FromString(S.graph_event(graph, wall_time=1.7e9))
    assert event.wall_time == 1.7e9 and event.graph_def == graph.SerializeToString()
    assert event_pb2.Event.FromString(S.graph_event(graph.SerializeToString())).graph_def == graph.SerializeToString()
    writer = EventFileWriter(str(tmp_path))
    writer.add_event(event)
    writer.close()
    assert accumulate(tmp_path).Graph() == graph
    from tensorboard.compat.proto import meta_graph_pb2

    with pytest.raises(TypeError, match="expected a GraphDef message, got a tensorboard.MetaGraphDef"):
        S.graph_event(meta_graph_pb2.MetaGraphDef())
    with pytest.raises(TypeError, match="torch.nn.Module"):
        S.graph_event(object())


def test_graph_events_of_a_graphdef_is_the_graph_alone():
    graph = graph_pb2.GraphDef(node=[node_def_pb2.NodeDef(name="x", op="Const")])
    (event,) = S.graph_events(graph, wall_time=5.0)
    assert event_pb2.Event.FromString(event) == event_pb2.Event(wall_time=5.0, graph_def=graph.SerializeToString())


def test_onnx_graph_needs_the_file_and_onnx(tmp_path, monkeypatch):
    """The main venv has no onnx (tests/torch converts real ONNX files): the errors say what to do."""
    with pytest.raises(FileNotFoundError, match="no ONNX model file"):
        S.onnx_graph_event(tmp_path / "missing.onnx")
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "onnx", None)  # onnx absent, whatever this venv has
    with pytest.raises(ImportError, match="pip install onnx"):
        S.onnx_graph_event(model)


# --- embeddings ---------------------------------------------------------------------------------


def read_config(logdir: Path) -> projector_config_pb2.ProjectorConfig:
    from google.protobuf import text_format

    return text_format.Parse((logdir / "projector_config.pbtxt").read_text(), projector_config_pb2.ProjectorConfig())


def test_write_embedding_files_like_torch(tmp_path):
    mat = RNG.normal(size=(5, 4)).astype(np.float32)
    labels = ["cat", "dog\twith tab", "é", "4", "5"]
    images = RNG.random((5, 3, 6, 6), dtype=np.float32)
    S.write_embedding(tmp_path, mat, metadata=labels, label_img=images, global_step=3, tag="feat/1")
    folder = tmp_path / "00003" / "feat%2f1"
    np.testing.assert_array_equal(
        np.loadtxt(folder / "tensors.tsv", delimiter="\t", dtype=np.float64).astype(np.float32), mat
    )
    assert (folder / "metadata.tsv").read_text(encoding="utf-8").split("\n") == [
        "cat",
        "dog with tab",
        "é",
        "4",
        "5",
        "",
    ]
    sprite = decode_png((folder / "sprite.png").read_bytes())
    assert sprite.shape == (18, 18, 3)  # 3x3 cells of 6x6: ceil(sqrt(5)) = 3 to a row
    np.testing.assert_array_equal(sprite[6:12, 0:6], (images[3] * 255).astype(np.uint8).transpose(1, 2, 0))
    (info,) = read_config(tmp_path).embeddings
    assert info.tensor_name == "feat/1:00003"
    assert info.tensor_path == "00003/feat%2f1/tensors.tsv"
    assert info.metadata_path == "00003/feat%2f1/metadata.tsv"
    assert info.sprite.image_path == "00003/feat%2f1/sprite.png" and list(info.sprite.single_image_dim) == [6, 6]


def test_write_embedding_appends_and_replaces_per_step_and_tag(tmp_path):
    mat = RNG.normal(size=(3, 2))
    S.write_embedding(tmp_path, mat)
    S.write_embedding(
        tmp_path, mat, tag="other", metadata=[["a", 1], ["b", 2], ["c", 3]], metadata_header=["name", "n"]
    )
    S.write_embedding(tmp_path, mat * 2)  # same step and tag: replaced, not duplicated
    infos = read_config(tmp_path).embeddings
    assert [i.tensor_name for i in infos] == ["other:00000", "default:00000"]
    assert (tmp_path / "00000" / "other" / "metadata.tsv").read_text().splitlines() == [
        "name\tn",
        "a\t1",
        "b\t2",
        "c\t3",
    ]
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "00000" / "default" / "tensors.tsv", delimiter="\t"), mat * 2)
    with pytest.raises(ValueError, match="2 labels for 3 points"):
        S.write_embedding(tmp_path, mat, metadata=["a", "b"])
    with pytest.raises(ValueError, match="2-D"):
        S.write_embedding(tmp_path, np.zeros(3))
    with pytest.raises(ValueError, match=r"\[N, C, H, W\]"):
        S.write_embedding(tmp_path, mat, label_img=np.zeros((2, 3, 4, 4)))


def test_write_embedding_keeps_tensorboardx_entries(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    mat = RNG.normal(size=(4, 3))
    with tbx.SummaryWriter(str(tmp_path)) as writer:
        writer.add_embedding(mat, tag="theirs", global_step=1)
    config = tmp_path / "projector_config.pbtxt"
    config.write_text('model_checkpoint_path: "ckpt-1"\n' + config.read_text())
    S.write_embedding(tmp_path, mat, tag="ours", global_step=1)
    S.write_embedding(tmp_path, mat, tag="ours", global_step=1, metadata=list("abcd"))
    parsed = read_config(tmp_path)
    assert parsed.model_checkpoint_path == "ckpt-1"
    assert [i.tensor_name for i in parsed.embeddings] == ["theirs:00001", "ours:00001"]
    assert parsed.embeddings[1].metadata_path == "00001/ours/metadata.tsv"
    ours = (tmp_path / "00001" / "ours" / "tensors.tsv").read_text()
    assert ours == (tmp_path / "00001" / "theirs" / "tensors.tsv").read_text()


# --- every encoder in one file ------------------------------------------------------------------


def test_every_encoder_read_back_by_tensorboard_and_tbscope(tmp_path):
    summaries = [
        S.image("img", RNG.random((3, 4, 4))),
        S.images("imgs", RNG.random((2, 3, 4, 4))),
        S.image_boxes("boxes", RNG.random((3, 8, 8)), [[1, 1, 5, 5]]),
        S.video("vid", RNG.random((1, 2, 3, 4, 4))),
        S.audio("aud", RNG.uniform(-1, 1, 100)),
        S.text("txt", "hi"),
        *S.hparams({"a": 1}, {"m": 1}),
        S.pr_curve("pr", RNG.integers(0, 2, 10), RNG.random(10)),
        S.pr_curve_raw("pr_raw", *([np.arange(3.0)] * 6), num_thresholds=3),
        S.custom_scalars({"c": {"t": ["Multiline", ["a"]]}}),
        *S.mesh("mesh", RNG.random((1, 3, 3)), RNG.integers(0, 256, (1, 3, 3)), [[[0, 1, 2]]], None),
        S.tensor_summary("tens", np.arange(3), S.tensor_metadata("custom")),
    ]
    writer = EventFileWriter(str(tmp_path))
    for i, b in enumerate(summaries):
        writer.add_event(event_pb2.Event(step=1, wall_time=1.7e9 + i, summary=parse(b)))
    writer.add_event(
        event_pb2.Event.FromString(
            S.graph_event(graph_pb2.GraphDef(node=[node_def_pb2.NodeDef(name="x", op="Placeholder")]))
        )
    )
    writer.close()
    acc = accumulate(tmp_path)
    tb_plugins = {t: acc.SummaryMetadata(t).plugin_data.plugin_name for t in acc.Tags()["tensors"]}
    expected = {
        "img": ("images", "images"),
        "imgs": ("images", "images"),
        "boxes": ("images", "images"),
        "vid": ("images", "images"),
        "aud": ("audio", "audio"),
        "txt": ("text", "text"),
        S.EXPERIMENT_TAG: ("hparams", "hparams"),
        S.SESSION_START_INFO_TAG: ("hparams", "hparams"),
        S.SESSION_END_INFO_TAG: ("hparams", "hparams"),
        "pr": ("pr_curves", "tensors"),
        "pr_raw": ("pr_curves", "tensors"),
        "custom_scalars__config__": ("custom_scalars", "tensors"),
        "mesh_VERTEX": ("mesh", "tensors"),
        "mesh_FACE": ("mesh", "tensors"),
        "mesh_COLOR": ("mesh", "tensors"),
        "tens": ("custom", "tensors"),
        "__run_graph__": ("graphs", "blobs"),
    }
    assert tb_plugins == {tag: plugin for tag, (plugin, _) in expected.items()}
    series = tbscope.scan(tmp_path).series().to_pandas()
    assert {row.tag: (row.plugin, row.kind) for row in series.itertuples()} == expected
    logdir = tbscope.scan(tmp_path)
    logdir.tensors()
    assert logdir.report.ok, str(logdir.report)


def test_the_wire_walker_reads_tensorboards_bytes_and_refuses_truncated_fields():
    # tbscope._pb.walk is the package's one protobuf decoder (compat classifies records with it).
    ev = event_pb2.Event(
        wall_time=1.5, step=7, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="t", simple_value=2.0)])
    )
    raw = ev.SerializeToString()
    got = [(f, w) for f, w, _, _ in _pb.walk(raw)]
    assert got == [(1, _pb.FIXED64), (2, _pb.VARINT), (5, _pb.LEN)]
    ((_, _, step, _),) = [x for x in _pb.walk(raw) if x[0] == 2]
    assert step == 7
    assert struct.unpack("<d", next(b for f, _, _, b in _pb.walk(raw) if f == 1))[0] == 1.5
    # A prefix parses only when it ends between fields (after wall_time, after step); one that
    # ends inside a field is an error, never a short value.
    whole = set()
    for cut in range(1, len(raw)):
        try:
            list(_pb.walk(raw[:cut]))
        except ValueError:
            continue
        whole.add(cut)
    assert whole == {9, 11}
