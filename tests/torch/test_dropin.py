"""tbscope.SummaryWriter against torch.utils.tensorboard.SummaryWriter, method by method.

Every public method of torch's writer, enumerated from the installed class (so a method torch
adds fails here until it has a case), is called the same way on both writers, with torch
tensors as inputs. tbscope's writer uses ``layout="torch"``, which makes torch's run folders.
Then TensorBoard's own readers (the plugin EventMultiplexer, the projector plugin's routes) must
see the same runs, tags, plugins, steps, wall times and values in both logdirs, and tbscope's
reader must read both alike.

Where tbscope differs on purpose (listed with reasons in docs/writer.md and
docs/writing-kinds.md), the case asserts the difference itself, so that a change on either
side shows up here.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from compare import assert_same
from tensorboard_view import Unreadable, decode_image, decode_wav, projector, view
from torch.utils.tensorboard import SummaryWriter as TorchWriter

import tbscope
from tbscope import SummaryWriter

WT = 1_700_000_000.25  # an explicit wall time, so both files hold the same one


def torch_public_methods() -> list[str]:
    return sorted(n for n in dir(TorchWriter) if not n.startswith("_") and callable(getattr(TorchWriter, n)))


# ------------------------------------------------------------------------------------------------
# The cases: one per public method of torch's writer.


@dataclass
class Case:
    write: Callable[[Any, Path], None]  # the calls, made on each writer
    #: The writers set wall times themselves (the method has no walltime argument).
    own_walltime: bool = False
    #: Compare the two TensorBoard views after normalising: (theirs, ours) -> (theirs, ours).
    normalise: Callable[[Any, Any], tuple[Any, Any]] | None = None
    #: The same for the two views of tbscope's reader.
    normalise_reader: Callable[[Any, Any], tuple[Any, Any]] | None = None
    #: The same for what TensorBoard's projector serves.
    normalise_projector: Callable[[Any, Any], tuple[Any, Any]] | None = None


CASES: dict[str, Case] = {}


def case(method: str, **kwargs: Any) -> Callable[[Callable[[Any, Path], None]], Callable[[Any, Path], None]]:
    def register(fn: Callable[[Any, Path], None]) -> Callable[[Any, Path], None]:
        assert method not in CASES, method
        CASES[method] = Case(fn, **kwargs)
        return fn

    return register


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@case("add_scalar")
def _scalar(w, _):
    w.add_scalar("loss", torch.tensor(0.25), 0, WT)
    w.add_scalar("loss", 1 / 3, 1, WT + 1)
    w.add_scalar("loss", np.float64(2.5e-8), 2, WT + 2)
    w.add_scalar("loss", torch.tensor([7], dtype=torch.int64), 3, WT + 3)
    w.add_scalar("loss", float("nan"), 4, WT + 4)
    w.add_scalar("new", torch.tensor(1 / 3), 5, WT, new_style=True)
    w.add_scalar("double", 1 / 3, 6, WT, new_style=True, double_precision=True)
    w.add_scalar("step_as_tensor", 1.0, torch.tensor(9), WT)


@case("add_scalars")
def _scalars(w, _):
    for step in range(3):
        w.add_scalars("loss/total", {"train": torch.tensor(1.0 / (step + 1)), "val": 0.5 + step}, step, WT + step)


@case("add_tensor")
def _tensor(w, _):
    # float16, bfloat16 and uint8 are compared in test_add_tensor_dtypes_torch_encodes_wrongly.
    g = gen()
    w.add_tensor("f32", torch.randn(3, 4, generator=g), 0, WT)
    w.add_tensor("f64", torch.randn(2, generator=g, dtype=torch.float64), 0, WT)
    w.add_tensor("i8", torch.tensor([-128, 5, 127], dtype=torch.int8), 1, WT)
    w.add_tensor("i16", torch.tensor([-300, 5], dtype=torch.int16), 1, WT)
    w.add_tensor("i32", torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3), 1, WT)
    w.add_tensor("i64", torch.tensor([2**40, -1]), 1, WT)
    w.add_tensor("bool", torch.tensor([True, False, True]), 1, WT)
    w.add_tensor("c64", torch.tensor([1 + 2j, -3j], dtype=torch.complex64), 1, WT)
    w.add_tensor("c128", torch.tensor([[1 + 2j], [-3j]], dtype=torch.complex128), 1, WT)
    w.add_tensor("rank0", torch.tensor(3.5), 2, WT)
    w.add_tensor("empty", torch.zeros(0, 3), 2, WT)


@case("add_histogram")
def _histogram(w, _):
    g = gen()
    values = torch.randn(2000, generator=g) * 3
    w.add_histogram("default", values, 0, walltime=WT)
    w.add_histogram("default", values.double() + 1, 1, walltime=WT)
    w.add_histogram("auto", values, 0, bins="auto", walltime=WT)
    w.add_histogram("ten", values, 0, bins=10, walltime=WT)
    w.add_histogram("fd", values, 0, bins="fd", walltime=WT)
    w.add_histogram("max_bins", values, 0, walltime=WT, max_bins=7)
    w.add_histogram("ints", torch.randint(-5, 50, (300,), generator=g), 0, walltime=WT)
    w.add_histogram("constant", torch.full((10,), 2.0), 0, walltime=WT)
    w.add_histogram("numpy", np.linspace(-1, 1, 101), 0, walltime=WT)


@case("add_histogram_raw")
def _histogram_raw(w, _):
    w.add_histogram_raw("raw", min=-1.0, max=3.0, num=10, sum=8.5, sum_squares=20.25,
                        bucket_limits=[0.0, 1.0, 3.0], bucket_counts=[2, 5, 3], global_step=4, walltime=WT)
    w.add_histogram_raw("raw", -2, 2, 4, 0, 6, torch.tensor([0.0, 2.0]), torch.tensor([2, 2]), 5, WT)


def _gray_pngs(theirs, ours):
    """docs/writing-kinds.md: a one-channel image is a gray PNG in tbscope; torch expands it to
    RGB. The pixels are the same."""
    for tag in ("gray_hw", "gray_chw"):
        ((tp,), (op,)) = theirs["."].series[tag].points, ours["."].series[tag].points
        assert (tp.value["images"][0].mode, op.value["images"][0].mode) == ("RGB", "L")
        tp.value["images"][0].mode = "L"
    return theirs, ours


@case("add_image", normalise=_gray_pngs)
def _image(w, _):
    g = gen()
    w.add_image("gray_hw", torch.rand(7, 9, generator=g), 0, WT, dataformats="HW")
    w.add_image("gray_chw", torch.randint(0, 256, (1, 4, 4), generator=g, dtype=torch.uint8), 0, WT)
    w.add_image("chw_float", torch.rand(3, 10, 14, generator=g), 0, WT)
    w.add_image("hwc_uint8", torch.randint(0, 256, (9, 7, 3), generator=g, dtype=torch.uint8), 0, WT, dataformats="HWC")
    w.add_image("rgba", torch.rand(4, 6, 5, generator=g), 0, WT)
    w.add_image("float64", torch.rand(3, 5, 5, generator=g, dtype=torch.float64), 1, WT)
    w.add_image("out_of_range", torch.linspace(-0.5, 1.5, 3 * 4 * 4).reshape(3, 4, 4), 1, WT)


@case("add_images")
def _images(w, _):
    g = gen()
    w.add_images("nchw", torch.rand(10, 3, 6, 5, generator=g), 0, WT)
    w.add_images("nhwc", torch.randint(0, 256, (3, 4, 4, 3), generator=g, dtype=torch.uint8), 0, WT, dataformats="NHWC")


BOXES = torch.tensor([[2, 3, 20, 25], [10, 12, 35, 30]])


def near_box_edges(shape: tuple[int, ...], boxes: torch.Tensor, reach: int = 2) -> np.ndarray:
    """Pixels within ``reach`` of a box's outline (where the two writers draw it)."""
    ys, xs = np.mgrid[: shape[0], : shape[1]]
    near = np.zeros(shape[:2], dtype=bool)
    for x0, y0, x1, y1 in boxes.tolist():
        inside_x = (xs >= x0 - reach) & (xs <= x1 + reach)
        inside_y = (ys >= y0 - reach) & (ys <= y1 + reach)
        near |= inside_y & ((abs(xs - x0) <= reach) | (abs(xs - x1) <= reach))
        near |= inside_x & ((abs(ys - y0) <= reach) | (abs(ys - y1) <= reach))
    return near


def _same_off_the_outlines(tf: np.ndarray, of: np.ndarray) -> None:
    near = near_box_edges(tf.shape, BOXES)
    assert (tf[near] != of[near]).any()  # the outlines do differ
    assert np.array_equal(of[~near], tf[~near])  # the rest, the labels included, does not
    red = np.zeros_like(of)
    red[..., 0], red[..., 3] = 255, 255
    for x0, y0, x1, y1 in BOXES.tolist():  # our outline: the 2 rows just inside the top edge
        np.testing.assert_array_equal(of[y0: y0 + 2, x0: x1 + 1], red[y0: y0 + 2, x0: x1 + 1])


def _boxes_differ_only_at_the_outlines(theirs, ours):
    """docs/writing-kinds.md: tbscope draws each 2-pixel outline inside its box; torch centres
    PIL lines on the edges. Every other pixel, the labels included, is the same. With
    ``rescale`` torch's summary keeps the size before rescaling; ours is the stored PNG's."""
    t, o = theirs["."].series["boxes"].points[0].value, ours["."].series["boxes"].points[0].value
    _same_off_the_outlines(t["images"][0].frames[0], o["images"][0].frames[0])
    t["images"][0].frames[0] = o["images"][0].frames[0]
    scaled_t, scaled_o = theirs["."].series["scaled"].points[0].value, ours["."].series["scaled"].points[0].value
    assert (scaled_t["width"], scaled_t["height"]) == (40, 32)  # before rescaling
    assert (scaled_o["width"], scaled_o["height"]) == (60, 48)  # the PNG's size
    assert scaled_o["images"][0].frames[0].shape == (48, 60, 4)
    scaled_t["width"], scaled_t["height"] = 60, 48
    return theirs, ours


def _boxes_in_reader(theirs, ours):
    for i, (t, o) in enumerate(zip(theirs["images"], ours["images"])):
        if t[1] == "boxes":
            _same_off_the_outlines(t[6][0], o[6][0])
            theirs["images"][i] = t[:6] + (o[6],)
        else:
            assert (t[4], t[5], o[4], o[5]) == (40, 32, 60, 48)
            theirs["images"][i] = t[:4] + (60, 48, t[6])
    return theirs, ours


@case("add_image_with_boxes", normalise=_boxes_differ_only_at_the_outlines, normalise_reader=_boxes_in_reader)
def _boxes(w, _):
    g = gen()
    w.add_image_with_boxes("boxes", torch.rand(3, 32, 40, generator=g), BOXES, 0, WT, labels=["cat", "dog"])
    w.add_image_with_boxes("scaled", torch.rand(3, 32, 40, generator=g), torch.zeros(0, 4), 0, WT, rescale=1.5)


@case("add_figure")
def _figure(w, _):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def fig(k: int):
        f = plt.figure(figsize=(2, 1.5), dpi=40)
        f.gca().plot([0, 1, 2], [k, 1 - k, k])
        return f

    w.add_figure("one", fig(0), 0, walltime=WT)
    w.add_figure("two", [fig(0), fig(1)], 1, walltime=WT)


def _torch_gif_has_no_frame_rate(theirs, ours):
    """torch's add_video goes through moviepy 1.x, which hands imageio the frame time in seconds
    where today's imageio takes milliseconds: every frame gets a delay of 0 (browsers then show
    it at their minimum delay). tbscope's GIF keeps 1/fps. Pixels are the same."""
    for tag, series in theirs["."].series.items():
        (picture,) = series.points[0].value["images"]
        assert set(picture.durations_ms) == {0}, tag
        (ours_picture,) = ours["."].series[tag].points[0].value["images"]
        assert set(ours_picture.durations_ms) == {200}, tag  # 1/fps
        picture.durations_ms = ours_picture.durations_ms
        # Both are palette GIFs; Pillow calls one whose palette is a gray ramp "L".
        assert {picture.mode, ours_picture.mode} <= {"P", "L"}
        picture.mode = ours_picture.mode
    return theirs, ours


@case("add_video", normalise=_torch_gif_has_no_frame_rate)
def _video(w, _):
    # Few colours: a GIF holds them exactly, whichever encoder made it.
    frames = torch.zeros(1, 6, 3, 16, 20, dtype=torch.uint8)
    for t in range(6):
        frames[0, t, 0, :, 3 * t:3 * t + 3] = 255
        frames[0, t, 2, 4:8, :] = 40 * t
    w.add_video("bar", frames, 0, fps=5, walltime=WT)
    # Every uint8 level, in a batch of 3 clips (tiled 1 x 4 with a black one): torch's float32
    # round trip through x / 255 * 255 loses none of them.
    every_level = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 1, 16, 16).repeat(3, 2, 3, 1, 1)
    every_level[:, 1] = 255 - every_level[:, 1]  # (a GIF encoder may merge identical frames)
    w.add_video("uint8_batch", every_level, 1, fps=5, walltime=WT)
    # Floats in [0, 1] are scaled by 255 and truncated; a batch of 3 clips is tiled 1 x 4.
    levels = torch.randint(0, 5, (3, 4, 1, 6, 5), generator=gen()).float() / 4
    w.add_video("gray_batch", levels.expand(3, 4, 3, 6, 5), 1, fps=5, walltime=WT)


@case("add_audio")
def _audio(w, _):
    t = torch.arange(800, dtype=torch.float64) / 8000
    w.add_audio("tone", 0.6 * torch.sin(2 * math.pi * 440 * t), 0, sample_rate=8000, walltime=WT)
    w.add_audio("float32", torch.linspace(-1, 1, 101), 1, sample_rate=16000, walltime=WT)


@case("add_text")
def _text(w, _):
    w.add_text("notes", "**lr** lowered to `1e-4`", 0, WT)
    w.add_text("notes", "second | table\n---|---\na | b", 1, WT + 1)
    w.add_text("unicode", "naïve ünïcödé ✓", 0, WT)


@case("add_pr_curve")
def _pr_curve(w, _):
    g = gen()
    labels = torch.randint(0, 2, (300,), generator=g)
    predictions = (labels * 0.3 + torch.rand(300, generator=g) * 0.7).clamp(0, 1)
    w.add_pr_curve("default", labels, predictions, 0, walltime=WT)
    w.add_pr_curve("eleven", labels.bool(), predictions.double(), 1, num_thresholds=11, walltime=WT)
    # torch multiplies a numpy array by `weights` as given: a torch tensor fails there (TypeError).
    w.add_pr_curve("weighted", labels, predictions, 2, num_thresholds=20, weights=torch.rand(300, generator=g).numpy(),
                   walltime=WT)


@case("add_pr_curve_raw")
def _pr_curve_raw(w, _):
    w.add_pr_curve_raw("raw", [5, 3, 1], [4, 2, 0], [1, 3, 5], [0, 2, 4], [0.5, 0.6, 1.0], [1.0, 0.6, 0.2], 3,
                       num_thresholds=3, walltime=WT)


@case("add_custom_scalars", own_walltime=True)
def _custom_scalars(w, _):
    w.add_custom_scalars({"Training": {"loss": ["Multiline", ["loss/train", "loss/val"]],
                                       "acc": ["Margin", ["acc", "acc_lo", "acc_hi"]]},
                          "Other": {"lr": ["Multiline", [r"lr.*"]]}})


@case("add_custom_scalars_multilinechart", own_walltime=True)
def _multiline(w, _):
    w.add_custom_scalars_multilinechart(["loss/train", "loss/val"], category="Losses", title="both")


@case("add_custom_scalars_marginchart", own_walltime=True)
def _margin(w, _):
    w.add_custom_scalars_marginchart(["acc", "acc_lo", "acc_hi"])


def _mesh_dtypes(theirs, ours):
    """docs/writing-kinds.md: tbscope stores faces as int32 and colours as uint8, the dtypes of
    TensorBoard's own mesh summary; torch stores float32. The values are the same."""
    for tag, series in theirs["."].series.items():
        for tp, op in zip(series.points, ours["."].series[tag].points):
            if tag.endswith(("_FACE", "_COLOR")):
                assert tp.value.dtype == np.float32
                assert op.value.dtype == (np.int32 if tag.endswith("_FACE") else np.uint8)
                assert np.array_equal(tp.value, op.value.astype(np.float32))
                tp.value = op.value
    return theirs, ours


def _mesh_dtypes_in_reader(theirs, ours):
    for i, (t, o) in enumerate(zip(theirs["tensors"], ours["tensors"])):
        if t[1].endswith(("_FACE", "_COLOR")):
            assert t[3] == "float32" and o[3] in ("int32", "uint8")
            values = np.frombuffer(t[5], dtype=np.float32).astype(o[3])
            assert np.array_equal(values.astype(np.float32), np.frombuffer(t[5], dtype=np.float32))
            theirs["tensors"][i] = t[:3] + (o[3], t[4], values.tobytes())
    return theirs, ours


@case("add_mesh", normalise=_mesh_dtypes, normalise_reader=_mesh_dtypes_in_reader)
def _mesh(w, _):
    vertices = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.5]]])
    colors = torch.tensor([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 20, 30]]], dtype=torch.int32)
    faces = torch.tensor([[[0, 1, 2], [0, 1, 3], [1, 2, 3]]], dtype=torch.int32)
    w.add_mesh("tetra", vertices, colors=colors, faces=faces, config_dict={"camera": {"fov": 75}}, global_step=2,
               walltime=WT)
    w.add_mesh("points", vertices * 2, global_step=3, walltime=WT)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(2 * 4 * 4, 3), torch.nn.ReLU())

    def forward(self, x):
        return self.head(self.conv(x)).softmax(-1)


@case("add_graph", own_walltime=True)
def _graph(w, _):
    torch.manual_seed(0)
    w.add_graph(Net(), torch.zeros(2, 1, 6, 6))


def onnx_model_file(path: Path) -> Path:
    """A small ONNX model (x @ W + b, relu), made with onnx's own helpers."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
             helper.make_node("Add", ["xw", "b"], ["z"], name="add"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [0.1] * 6), helper.make_tensor("b", TensorProto.FLOAT, [2], [0.0, 1.0])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), str(path))
    return path


@case("add_onnx_graph", own_walltime=True)
def _onnx_graph(w, tmp):
    w.add_onnx_graph(str(onnx_model_file(tmp / "model.onnx")))


def _sprites(theirs, ours):
    """docs/writing-kinds.md: a sprite is a grid of ceil(sqrt(N)) x ceil(sqrt(N)) cells. torch
    pads the grid to a square as wide as the grid, which adds black rows for wide images (and
    fails for images taller than wide); uint8 label images are multiplied by 255 again in torch,
    so each pixel becomes 0 or 255. Otherwise the pixels are the same."""
    for name, t in theirs["."].items():
        if t.sprite is None:
            continue
        tf, of = t.sprite.frames[0], ours["."][name].sprite.frames[0]
        if name == "wide:00000":
            assert tf.shape == (12, 12, 4) and of.shape == (8, 12, 4)
            assert (tf[8:, :, :3] == 0).all()
            t.sprite.frames[0] = tf = tf[:8]
        if name == "uint8:00000":
            assert np.array_equal(tf[..., :3], np.where(of[..., :3] > 0, 255, 0).astype(np.uint8))
            t.sprite.frames[0] = of
        t.sprite.mode = ours["."][name].sprite.mode  # RGB (torch makes gray sprites RGB) or L
    return theirs, ours


@case("add_embedding", own_walltime=True, normalise_projector=_sprites)
def _embedding(w, _):
    g = gen()
    mat = torch.randn(12, 5, generator=g)
    w.add_embedding(mat, metadata=[f"point {i}" for i in range(12)], global_step=3)
    w.add_embedding(mat[:4] * 2, metadata=[["a", 1], ["b", 2], ["c", 3], ["d", 4]], metadata_header=["name", "n"],
                    label_img=torch.rand(4, 3, 5, 5, generator=g), tag="with/sprite")
    w.add_embedding(torch.arange(6.0).reshape(3, 2), label_img=torch.rand(3, 3, 4, 6, generator=g), tag="wide")
    w.add_embedding(torch.randn(5, 3, generator=g), label_img=torch.rand(5, 1, 4, 4, generator=g), tag="gray")
    w.add_embedding(torch.randn(2, 3, generator=g), label_img=torch.randint(0, 3, (2, 3, 4, 4), generator=g, dtype=torch.uint8),
                    tag="uint8")


def _bools_stay_bools(theirs, ours):
    """docs/writing-kinds.md: a bool hparam is a bool in tbscope (the hparams dashboard shows
    true/false and filters by it); torch checks for numbers first and stores 1.0/0.0."""
    for view_, ours_ in ((theirs, False), (ours, True)):
        for name, kind in (("experiment", "hparamInfos"), ("session_start_info", "hparams")):
            content = view_["trial-1"].series[f"_hparams_/{name}"].content
            if kind == "hparamInfos":
                (info,) = [i for i in content["experiment"]["hparamInfos"] if i["name"] == "nesterov"]
                assert info["type"] == ("DATA_TYPE_BOOL" if ours_ else "DATA_TYPE_FLOAT64")
                info["type"] = "DATA_TYPE_FLOAT64"
            else:
                value = content["sessionStartInfo"]["hparams"]["nesterov"]
                assert value is True if ours_ else (value == 1.0 and type(value) is float)
                content["sessionStartInfo"]["hparams"]["nesterov"] = 1.0
    return theirs, ours


@case("add_hparams", own_walltime=True, normalise=_bools_stay_bools)
def _hparams(w, _):
    # torch indexes a tensor hparam's first element, so a 0-d tensor fails there: one element.
    w.add_hparams({"lr": 0.01, "batch": 32, "optimizer": "adam", "nesterov": True, "skipped": None,
                   "tensor_hp": torch.tensor([0.5])},
                  {"hparam/accuracy": 0.9, "hparam/loss": torch.tensor(0.25)}, run_name="trial-1")
    w.add_hparams({"lr": 0.1, "optimizer": "sgd"}, {"hparam/accuracy": 0.7},
                  hparam_domain_discrete={"optimizer": ["adam", "sgd"]}, run_name="trial-2", global_step=5)


@case("flush")
def _flush(w, tmp):
    w.add_scalar("x", 1.0, 0, WT)
    w.flush()
    # Before close(): what flush() handed over is readable now.
    assert [p.value for p in view(w.get_logdir())["."].series["x"].points] == [1.0]


@case("close")
def _close(w, _):
    w.add_scalar("x", 1.0, 0, WT)
    w.close()
    w.add_scalar("x", 2.0, 1, WT + 1)  # both writers open a new file after close()
    w.close()
    w.close()  # twice is fine
    assert len(list(Path(w.get_logdir()).glob("events.out.tfevents.*"))) == 2


@case("get_logdir")
def _get_logdir(w, tmp):
    assert Path(w.get_logdir()).name in ("torch", "ours")
    w.add_scalar("x", 1.0, 0, WT)


# ------------------------------------------------------------------------------------------------
# Writing both, reading both


def write_both(tmp_path: Path, write: Callable[[Any, Path], None]) -> tuple[Path, Path]:
    theirs, ours = tmp_path / "torch", tmp_path / "ours"
    w = TorchWriter(str(theirs))
    write(w, tmp_path)
    w.close()
    with SummaryWriter(str(ours), layout="torch") as ws:
        write(ws, tmp_path)
    return theirs, ours


def tbscope_view(logdir: Path) -> dict[str, Any]:
    """What tbscope's reader returns for ``logdir``, without wall times, blobs decoded."""
    lg = tbscope.scan(logdir)
    out: dict[str, Any] = {}
    series = lg.series().to_pandas()
    out["series"] = sorted((r.run, r.tag, r.kind, r.plugin, r.points, r.first_step, r.last_step)
                           for r in series.itertuples())
    out["scalars"] = sorted(map(tuple, lg.scalars().to_pandas()[["run", "tag", "step", "value"]].astype(object).values.tolist()),
                            key=repr)
    h = lg.histograms().to_pandas()
    out["histograms"] = sorted(
        ((r.run, r.tag, r.step, list(r.left), list(r.right), list(r.count), r.min, r.max, r.num) for r in h.itertuples()),
        key=repr)
    t = lg.tensors()
    tp = t.to_arrow().select(["run", "tag", "step", "dtype", "shape"]).to_pylist()
    out["tensors"] = sorted(((r["run"], r["tag"], r["step"], r["dtype"], tuple(r["shape"]),
                              v.tolist() if v.dtype == object else v.tobytes())
                             for r, v in zip(tp, t.values())), key=repr)
    out["text"] = sorted(map(tuple, lg.text().to_pandas()[["run", "tag", "step", "index", "text"]].values.tolist()))
    images = lg.images()
    rows = images.to_arrow().select(["run", "tag", "step", "index", "width", "height"]).to_pylist()
    out["images"] = sorted(((r["run"], r["tag"], r["step"], r["index"], r["width"], r["height"],
                             decode_image(images.blob(i)).frames) for i, r in enumerate(rows)),
                           key=lambda row: row[:6])
    audio = lg.audio()
    rows = audio.to_arrow().select(["run", "tag", "step", "index", "sample_rate", "num_channels", "length_frames"]).to_pylist()
    out["audio"] = sorted((tuple(r.values()) + (decode_wav(audio.blob(i)),) for i, r in enumerate(rows)),
                          key=lambda row: row[:7])
    return out


def without_walltimes(v: dict[str, Any]) -> dict[str, Any]:
    for run in v.values():
        for s in run.series.values():
            for p in s.points:
                p.wall_time = None
    return v


# torch's add_graph traces with torch.jit.trace, which warns that it is deprecated (both writers
# use torch's tracer).
@pytest.mark.filterwarnings("ignore:`torch.jit.trace(_method)?` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("method", torch_public_methods())
def test_same_calls_same_values_in_tensorboard(method, tmp_path):
    c = CASES.get(method)
    assert c is not None, f"torch's SummaryWriter.{method} has no comparison case in {__file__}: add one"
    theirs, ours = write_both(tmp_path, c.write)
    tv, ov = view(theirs), view(ours)
    if c.own_walltime:
        tv, ov = without_walltimes(tv), without_walltimes(ov)
    if c.normalise is not None:
        tv, ov = c.normalise(tv, ov)
    assert_same(tv, ov)
    tr, our = tbscope_view(theirs), tbscope_view(ours)
    if c.normalise_reader is not None:
        tr, our = c.normalise_reader(tr, our)
    assert_same(tr, our, what="tbscope's reader on torch's vs tbscope's files")
    tp, op = projector(theirs), projector(ours)
    assert any(r.series or r.graph is not None for r in tv.values()) or any(tp.values()), "the case wrote nothing"
    if c.normalise_projector is not None:
        tp, op = c.normalise_projector(tp, op)
    assert_same(tp, op, what="TensorBoard's projector on torch's vs tbscope's files")


def test_every_case_is_a_torch_method():
    assert set(CASES) <= set(torch_public_methods())


# ------------------------------------------------------------------------------------------------
# Signatures: every parameter of torch's at the same position with the same default


@pytest.mark.parametrize("method", ["__init__", "__enter__", "__exit__"] + torch_public_methods())
def test_signature_accepts_torchs_calls(method):
    theirs = [p for p in inspect.signature(getattr(TorchWriter, method)).parameters.values()]
    ours = list(inspect.signature(getattr(SummaryWriter, method)).parameters.values())
    for i, p in enumerate(theirs):
        if method == "add_onnx_graph" and p.name == "prototxt":
            # tensorboardX names it onnx_model_file, which ours follows; both are positional
            assert ours[i].name == "onnx_model_file" and ours[i].kind is p.POSITIONAL_OR_KEYWORD
            continue
        assert ours[i].name == p.name, f"{method}: parameter {i} is {ours[i].name!r}, torch's is {p.name!r}"
        assert ours[i].kind is p.kind, f"{method}({p.name}): {ours[i].kind} vs torch's {p.kind}"
        assert ours[i].default == p.default or (isinstance(p.default, float) and ours[i].default == p.default), (
            f"{method}({p.name}): default {ours[i].default!r} vs torch's {p.default!r}")


# ------------------------------------------------------------------------------------------------
# Beyond one call per method


def test_add_tensor_dtypes_torch_encodes_wrongly(tmp_path):
    """torch's add_tensor writes float16 and bfloat16 elements as their float32 bit patterns in
    ``half_val`` (the format holds 16-bit patterns there) and uint8 ones in ``uint32_val`` (the
    format reads ``int_val``): TensorBoard cannot decode either. tbscope writes the elements
    themselves, which TensorBoard reads (bfloat16 excepted: TensorBoard's make_ndarray has no
    bfloat16 without TensorFlow), and tbscope's reader reads torch's files as torch meant them."""
    g = gen()
    tensors = {"f16": torch.randn(5, generator=g).half(), "bf16": torch.randn(2, 3, generator=g).bfloat16(),
               "u8": torch.tensor([250, 3, 0], dtype=torch.uint8)}
    tensors["f16"][0] = 2 ** -24  # the smallest subnormal
    tensors["f16"][1] = -0.0

    def write(w, _):
        for tag, t in tensors.items():
            w.add_tensor(tag, t, 0, WT)

    theirs, ours = write_both(tmp_path, write)
    tv, ov = view(theirs)["."].series, view(ours)["."].series
    for tag in tensors:
        assert isinstance(tv[tag].points[0].value, Unreadable), tag
    np.testing.assert_array_equal(ov["f16"].points[0].value, tensors["f16"].numpy())
    assert np.signbit(ov["f16"].points[0].value[1])
    np.testing.assert_array_equal(ov["u8"].points[0].value, tensors["u8"].numpy())
    assert isinstance(ov["bf16"].points[0].value, Unreadable)
    for logdir in (theirs, ours):
        frame = tbscope.scan(logdir).tensors()
        got = dict(zip(frame.to_arrow().column("tag").to_pylist(), zip(frame.to_arrow().column("dtype").to_pylist(),
                                                                         frame.values())))
        assert {tag: dtype for tag, (dtype, _) in got.items()} == {"f16": "float16", "bf16": "bfloat16", "u8": "uint8"}
        for tag, t in tensors.items():
            value = got[tag][1]
            np.testing.assert_array_equal(value, t.float().numpy() if tag == "bf16" else t.numpy(), err_msg=tag)
            assert value.shape == tuple(t.shape)
        assert np.signbit(got["f16"][1][1])
        assert tbscope.scan(logdir).report.ok


def test_default_layout_holds_the_same_points(tmp_path):
    """docs/writer.md: without layout="torch", add_scalars writes tags ``main/tag`` into the run
    itself, add_hparams writes into the run itself, and add_text keeps the tag as given. The
    points are the ones torch writes into its extra runs and tags."""
    def write(w):
        for step in range(3):
            w.add_scalars("loss", {"train": 1.0 / (step + 1), "val": 2.0 + step}, step, WT + step)
        w.add_text("notes", "hello", 0, WT)
        w.add_hparams({"lr": 0.1}, {"hparam/acc": 0.75}, run_name="hp")

    w = TorchWriter(str(tmp_path / "torch"))
    write(w)
    w.close()
    with SummaryWriter(tmp_path / "ours") as ws:
        write(ws)
    theirs, ours = view(tmp_path / "torch"), view(tmp_path / "ours")
    assert sorted(theirs) == [".", "hp", "loss_train", "loss_val"]
    assert sorted(ours) == [".", "hp"]
    for sub in ("train", "val"):
        assert_same(theirs[f"loss_{sub}"].series["loss"].points, ours["."].series[f"loss/{sub}"].points)
    assert_same(theirs["."].series["notes/text_summary"].points, ours["."].series["notes"].points)
    assert_same(without_walltimes({"hp": theirs["hp"]}), without_walltimes({"hp": ours["hp"]}))


def test_public_attributes_match(tmp_path):
    theirs = TorchWriter(str(tmp_path / "torch"), purge_step=None, max_queue=7, flush_secs=30, filename_suffix=".x")
    ours = SummaryWriter(str(tmp_path / "ours"), purge_step=None, max_queue=7, flush_secs=30, filename_suffix=".x")
    try:
        public = sorted(n for n in vars(theirs) if not n.startswith("_"))
        assert public == ["all_writers", "default_bins", "file_writer", "filename_suffix", "flush_secs", "log_dir",
                          "max_queue", "purge_step"]
        for name in ("default_bins", "filename_suffix", "flush_secs", "max_queue", "purge_step"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert Path(ours.log_dir).name == "ours" and Path(theirs.log_dir).name == "torch"
        for fw in (theirs.file_writer, ours.file_writer):
            assert Path(fw.get_logdir()).name in ("torch", "ours")
            for method in ("add_event", "add_summary", "add_graph", "add_onnx_graph", "flush", "close", "reopen"):
                assert callable(getattr(fw, method)), method
        assert list(theirs.all_writers) == [theirs.log_dir] and list(ours.all_writers) == [ours.log_dir]
        assert all(Path(p).name.endswith(".x") for p in ours.files)
    finally:
        theirs.close()
        ours.close()


def test_protobufs_through_file_writer(tmp_path):
    """Code that builds protobufs itself hands them to ``writer.file_writer`` in both."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    def write(w, _):
        w.file_writer.add_summary(Summary(value=[Summary.Value(tag="proto", simple_value=2.5)]), 3, WT)
        w.file_writer.add_event(Event(summary=Summary(value=[Summary.Value(tag="event", simple_value=1.5)])), 4, WT)

    theirs, ours = write_both(tmp_path, write)
    assert_same(view(theirs), view(ours))


def test_purge_step_hides_the_same_points(tmp_path):
    """A resumed run: both writers' restart markers make TensorBoard drop the old points at
    steps >= purge_step."""
    for name, cls, kwargs in (("torch", TorchWriter, {}), ("ours", SummaryWriter, {"layout": "torch"})):
        w = cls(str(tmp_path / name), **kwargs)
        for step in range(10):
            w.add_scalar("x", float(step), step, WT + step)
        w.close()
        w = cls(str(tmp_path / name), purge_step=5, **kwargs)
        for step in range(5, 8):
            w.add_scalar("x", 100.0 + step, step, WT + 100 + step)
        w.close()
    from tensorboard.backend.event_processing import event_accumulator as ea

    seen = {}
    for name in ("torch", "ours"):
        acc = ea.EventAccumulator(str(tmp_path / name), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE)
        acc.Reload()
        seen[name] = [(e.step, e.value) for e in acc.Scalars("x")]
    assert seen["torch"] == seen["ours"] == [(s, float(s)) for s in range(5)] + [(s, 100.0 + s) for s in range(5, 8)]
    preempted = tbscope.read_scalars(tmp_path / "ours", restarts="preempt")
    assert list(zip(preempted["step"], preempted["value"])) == seen["ours"]


def test_default_log_dir_is_torchs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    theirs = TorchWriter(comment="_exp")
    ours = SummaryWriter(comment="_exp")
    theirs.close()
    ours.close()
    # runs/<Mon DD_HH-MM-SS>_<host>_exp: the same name unless the clock crossed a second.
    assert Path(ours.log_dir).parent == Path(theirs.log_dir).parent == Path("runs")
    assert Path(ours.log_dir).name[15:] == Path(theirs.log_dir).name[15:]


def test_tensor_weights_and_more_thresholds(tmp_path):
    """Calls torch cannot make: tbscope takes torch tensors as PR-curve weights (torch raises
    TypeError) and keeps num_thresholds above 127 (torch silently uses 127)."""
    g = gen()
    labels = torch.randint(0, 2, (200,), generator=g)
    predictions = torch.rand(200, generator=g)
    weights = torch.rand(200, generator=g)
    with pytest.raises(TypeError):
        TorchWriter(str(tmp_path / "torch")).add_pr_curve("w", labels, predictions, 0, weights=weights)
    with SummaryWriter(tmp_path / "ours") as w:
        w.add_pr_curve("tensor", labels, predictions, 0, weights=weights)
        w.add_pr_curve("numpy", labels, predictions, 0, weights=weights.numpy())
        w.add_pr_curve("fine", labels, predictions, 0, num_thresholds=500)
    with TorchWriter(str(tmp_path / "torch2")) as w:
        w.add_pr_curve("fine", labels, predictions, 0, num_thresholds=500)
    ours = view(tmp_path / "ours")["."].series
    assert_same(ours["tensor"].points[0].value, ours["numpy"].points[0].value)
    assert ours["fine"].points[0].value.shape == (6, 500)
    assert view(tmp_path / "torch2")["."].series["fine"].points[0].value.shape == (6, 127)
