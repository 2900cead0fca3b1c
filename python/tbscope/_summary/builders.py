"""Summary builders for the rich kinds: user data in, encoded ``Summary`` protobuf bytes out.

``SummaryWriter`` hands the bytes to the native ``EventWriter.summary(bytes, step, wall_time)``.
Nothing here imports protobuf, TensorFlow, torch or jax: messages are assembled with ``_pb``,
images are PNG/GIF-encoded by :mod:`._summary.codecs`, audio goes through the stdlib ``wave``,
and arrays arrive through :func:`to_numpy`'s duck typing. Pillow and matplotlib are only used when
the caller asks for something that needs them (resampling, box labels, figures).

Semantics follow ``torch.utils.tensorboard.summary`` so files look the same in TensorBoard, with
the few deliberate differences listed in ``docs/writing-kinds.md``.
"""

from __future__ import annotations

import io
import json
import math
import sys
import wave
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tbscope import _pb
from tbscope._summary.codecs import (
    _draw_boxes,
    _draw_labels,
    _grid,
    _render_figure,
    _rescale,
    _to_hwc,
    _to_uint8,
    _video_grid,
    encode_gif,
    encode_png,
)

# --- field numbers (tensorflow/core/framework/{summary,tensor,tensor_shape}.proto, event.proto) ---
# Summary.value; Summary.Value fields
_SUMMARY_VALUE = 1
_V_TAG, _V_IMAGE, _V_AUDIO, _V_TENSOR, _V_METADATA = 1, 4, 6, 8, 9
# SummaryMetadata and its PluginData
_MD_PLUGIN_DATA, _MD_DISPLAY_NAME, _MD_DESCRIPTION, _MD_DATA_CLASS = 1, 2, 3, 4
_PD_NAME, _PD_CONTENT = 1, 2
# TensorProto, TensorShapeProto, TensorShapeProto.Dim
_T_DTYPE, _T_SHAPE, _T_CONTENT, _T_STRING_VAL = 1, 2, 4, 8
_SHAPE_DIM, _DIM_SIZE = 2, 1
# Summary.Image and Summary.Audio
_IMG_HEIGHT, _IMG_WIDTH, _IMG_COLORSPACE, _IMG_DATA = 1, 2, 3, 4
_AU_RATE, _AU_CHANNELS, _AU_FRAMES, _AU_DATA, _AU_TYPE = 1, 2, 3, 4, 5

# TensorFlow DataType enum values (tensorflow/core/framework/types.proto).
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_UINT16, DT_COMPLEX128 = 8, 9, 10, 14, 17, 18
DT_HALF, DT_UINT32, DT_UINT64 = 19, 22, 23

_DTYPE_BY_NAME = {
    "bool": DT_BOOL,
    "int8": DT_INT8,
    "int16": DT_INT16,
    "int32": DT_INT32,
    "int64": DT_INT64,
    "uint8": DT_UINT8,
    "uint16": DT_UINT16,
    "uint32": DT_UINT32,
    "uint64": DT_UINT64,
    "float16": DT_HALF,
    "half": DT_HALF,
    "float32": DT_FLOAT,
    "float": DT_FLOAT,
    "float64": DT_DOUBLE,
    "double": DT_DOUBLE,
    "complex64": DT_COMPLEX64,
    "complex128": DT_COMPLEX128,
    "bfloat16": DT_BFLOAT16,
    "string": DT_STRING,
    "str": DT_STRING,
    "bytes": DT_STRING,
}


# ------------------------------------------------------------------------------------------------
# Arrays in


def _is_torch_tensor(x: object) -> bool:
    # If torch has not been imported, nothing can be a torch tensor: no import needed to ask.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_to_numpy(t: Any) -> np.ndarray:
    t = t.detach()
    if str(t.dtype) == "torch.bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            # numpy has no bfloat16 of its own; every bfloat16 is exactly a float32, so widening
            # loses nothing but the dtype's name.
            return np.asarray(t.float().cpu().numpy())
        torch = sys.modules["torch"]
        bits = t.cpu().contiguous().view(torch.int16).numpy()
        return np.asarray(bits.view(ml_dtypes.bfloat16))
    if getattr(t, "is_conj", None) is not None and t.is_conj():
        t = t.resolve_conj()  # a lazily conjugated view cannot be exported to numpy as is
    t = t.cpu()
    try:
        return np.asarray(t.numpy())
    except TypeError:
        # dtypes numpy lacks (float8 and friends): widen to float32, which holds them exactly.
        return np.asarray(t.float().numpy())


def to_numpy(x: object) -> np.ndarray:
    """Convert an array-like to a numpy array without importing any framework.

    Accepts numpy arrays and scalars, Python numbers, strings and (nested) lists, torch tensors
    (detached and moved to the CPU; bfloat16 becomes ``ml_dtypes.bfloat16`` when ml_dtypes is
    installed, float32 otherwise), and anything with ``__array__`` (jax, pandas, TensorFlow eager
    tensors...). Numpy arrays are returned as they are, not copied.
    """
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (np.generic, int, float, complex, str, bytes)):
        return np.asarray(x)
    if _is_torch_tensor(x):
        return _torch_to_numpy(x)
    if isinstance(x, (list, tuple)):
        if any(_is_torch_tensor(e) for e in x):
            # np.asarray would call each tensor's __array__, which fails for CUDA tensors.
            return np.asarray([to_numpy(e) for e in x])
        return np.asarray(x)
    if hasattr(x, "__array__") or hasattr(x, "__array_interface__"):
        return np.asarray(x)
    numpy_method = getattr(x, "numpy", None)
    if callable(numpy_method):
        return np.asarray(numpy_method())
    raise TypeError(
        f"expected an array: a numpy array, a list of numbers, a torch/jax/TensorFlow tensor or "
        f"any object with __array__; got {type(x).__module__}.{type(x).__qualname__}"
    )


def tf_dtype(dtype: object) -> int:
    """The TensorFlow ``DataType`` enum value for a numpy dtype (or a dtype name).

    bool, int8..int64, uint8..uint64, float16/32/64, complex64/128, bytes/str/object (strings) →
    ``DT_STRING``, ``ml_dtypes.bfloat16`` → ``DT_BFLOAT16`` (14). torch dtypes and their names
    (``"torch.float32"``) are understood too. Anything else raises TypeError.
    """
    if dtype is str or dtype is bytes:
        return DT_STRING
    name: str
    if isinstance(dtype, str):
        name = dtype.lower().removeprefix("torch.")
    else:
        try:
            np_dtype = np.dtype(dtype)  # type: ignore[call-overload]
        except TypeError:
            # Not a numpy dtype: a torch dtype prints as "torch.float32".
            name = str(dtype).removeprefix("torch.")
        else:
            if np_dtype.kind in "SUO":
                return DT_STRING
            name = np_dtype.name
    try:
        return _DTYPE_BY_NAME[name]
    except KeyError:
        raise TypeError(
            f"no TensorFlow DataType for dtype {name!r}; use bool, int8..int64, uint8..uint64, "
            "float16/32/64, bfloat16 (ml_dtypes), complex64/128 or strings"
        ) from None


# ------------------------------------------------------------------------------------------------
# Message builders


def _value(tag: str, payload_field: int | None = None, payload: bytes = b"", metadata: bytes | None = None) -> bytes:
    """One Summary.Value: tag, optional metadata, and at most one member of the value oneof."""
    if not isinstance(tag, str):
        raise TypeError(f"tag must be a str, got {type(tag).__name__}")
    body = _pb.bytes_field(_V_TAG, tag)
    if metadata is not None:
        body += _pb.message_field(_V_METADATA, metadata)
    if payload_field is not None:
        body += _pb.message_field(payload_field, payload)
    return body


def _summary(*values: bytes) -> bytes:
    return b"".join(_pb.message_field(_SUMMARY_VALUE, v) for v in values)


def tensor_metadata(
    plugin_name: str = "",
    content: bytes = b"",
    display_name: str | None = None,
    description: str | None = None,
    *,
    data_class: int = 0,
) -> bytes:
    """Encoded ``SummaryMetadata``: ``plugin_data{plugin_name, content}`` (left out when both are
    empty), ``display_name``, ``summary_description`` and ``data_class`` (0 = unknown: TensorBoard
    assigns the class from the plugin name, as it does for torch's files)."""
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise TypeError(f"content must be bytes (the plugin's own serialized proto), got {type(content).__name__}")
    out = b""
    if plugin_name or content:
        out += _pb.message_field(
            _MD_PLUGIN_DATA, _pb.bytes_field(_PD_NAME, plugin_name) + _pb.bytes_field(_PD_CONTENT, bytes(content))
        )
    if display_name:
        out += _pb.bytes_field(_MD_DISPLAY_NAME, display_name)
    if description:
        out += _pb.bytes_field(_MD_DESCRIPTION, description)
    return out + _pb.int_field(_MD_DATA_CLASS, data_class)


def _shape(dims: Sequence[int]) -> bytes:
    # A Dim of size 0 is an empty (but present) message: the number of Dims is the rank.
    return b"".join(_pb.message_field(_SHAPE_DIM, _pb.int_field(_DIM_SIZE, int(d))) for d in dims)


def _tensor(dtype: int, dims: Sequence[int], content: bytes = b"", strings: Sequence[bytes] | None = None) -> bytes:
    """TensorProto with raw little-endian ``tensor_content`` or, for DT_STRING, ``string_val``."""
    body = _pb.int_field(_T_DTYPE, dtype) + _pb.message_field(_T_SHAPE, _shape(dims))
    if strings is not None:
        return body + _pb.repeated_bytes(_T_STRING_VAL, strings)
    return body + _pb.bytes_field(_T_CONTENT, content)


def _string_items(arr: np.ndarray, what: str) -> list[bytes]:
    out = []
    for item in arr.ravel().tolist():
        if isinstance(item, str):
            out.append(item.encode("utf-8"))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            out.append(bytes(item))
        else:
            raise TypeError(f"{what}: a string tensor may hold only str or bytes, found {type(item).__name__} {item!r}")
    return out


def tensor_summary(tag: str, array: object, metadata: bytes | None = None) -> bytes:
    """A Summary with one tensor Value: any array (strings included, which the native writer's
    ``tensor()`` cannot take) as a TensorProto, with optional encoded SummaryMetadata.

    Strings (str, bytes, or object arrays of them) go to ``string_val`` (UTF-8), every other
    dtype to little-endian ``tensor_content``.
    """
    arr = to_numpy(array)
    dtype = tf_dtype(arr.dtype)
    if dtype == DT_STRING:
        proto = _tensor(DT_STRING, arr.shape, strings=_string_items(arr, "tensor_summary"))
    else:
        little = np.ascontiguousarray(
            arr, dtype=arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        )
        proto = _tensor(dtype, arr.shape, content=little.tobytes())
    return _summary(_value(tag, _V_TENSOR, proto, metadata))


# ------------------------------------------------------------------------------------------------
# Images, figures and video (encoded by .codecs)


def _image_proto(hwc: np.ndarray, encoded: bytes) -> bytes:
    h, w, c = hwc.shape
    return (
        _pb.int_field(_IMG_HEIGHT, h)
        + _pb.int_field(_IMG_WIDTH, w)
        + _pb.int_field(_IMG_COLORSPACE, c)
        + _pb.bytes_field(_IMG_DATA, encoded)
    )


def _image_summary(tag: str, hwc: np.ndarray) -> bytes:
    return _summary(_value(tag, _V_IMAGE, _image_proto(hwc, encode_png(hwc))))


def image(tag: str, tensor: object, rescale: float = 1, dataformats: str = "CHW") -> bytes:
    """A legacy image summary (PNG) from one image, or a grid from a batch.

    ``tensor``: uint8 in [0, 255] kept as is; any other dtype is taken to be in [0, 1] and becomes
    ``x*255`` clipped to [0, 255]. ``dataformats``: 'CHW', 'HWC', 'HW', or a 4-D layout ('NCHW',
    'NHWC'...) whose images are tiled eight to a row. 1 channel is stored as a gray PNG, 2 as
    gray+alpha, 3 as RGB, 4 as RGBA. ``rescale`` resizes (Lanczos with Pillow, nearest neighbour
    without it); height and width in the summary are those of the stored PNG.
    """
    hwc = _to_uint8(_to_hwc(to_numpy(tensor), dataformats, "image"), "image")
    return _image_summary(tag, _rescale(hwc, rescale, "image"))


def images(tag: str, tensor: object, dataformats: str = "NCHW") -> bytes:
    """A batch of images as one grid image (eight to a row, like torch's ``add_images``)."""
    arr = to_numpy(tensor)
    if arr.ndim != 4:
        raise ValueError(f"images: expected a 4-D batch laid out as dataformats={dataformats!r}, got shape {arr.shape}")
    return image(tag, arr, dataformats=dataformats)


def image_boxes(
    tag: str,
    tensor_image: object,
    tensor_boxes: object,
    rescale: float = 1,
    dataformats: str = "CHW",
    labels: Sequence[str] | None = None,
) -> bytes:
    """An image with red box outlines: ``tensor_boxes`` is [N, 4] of (x_min, y_min, x_max, y_max)
    in pixels. ``labels`` (N strings) are drawn when Pillow is installed and left out otherwise.
    Gray images are turned into RGB so the boxes show in colour."""
    hwc = _to_uint8(_to_hwc(to_numpy(tensor_image), dataformats, "image_boxes"), "image_boxes")
    boxes = to_numpy(tensor_boxes)
    if boxes.size == 0:
        boxes = boxes.reshape(0, 4)
    if boxes.ndim != 2 or boxes.shape[1] != 4 or boxes.dtype.kind not in "biuf":
        raise ValueError(
            f"image_boxes: tensor_boxes must be numbers of shape [N, 4] (x_min, y_min, x_max, y_max), "
            f"got shape {boxes.shape} dtype {boxes.dtype}"
        )
    if not np.isfinite(boxes).all():
        raise ValueError("image_boxes: tensor_boxes holds NaN or infinite coordinates")
    if labels is not None:
        if isinstance(labels, str) or len(labels) != len(boxes):
            raise ValueError(f"image_boxes: labels must be a list of {len(boxes)} strings, one per box, got {labels!r}")
        labels = [str(label) for label in labels]
    c = hwc.shape[2]
    if c < 3:  # gray (+alpha) → RGB (+alpha), so red is red
        rgb = np.concatenate([np.repeat(hwc[:, :, :1], 3, axis=2), hwc[:, :, 1:]], axis=2)
    else:
        rgb = hwc.copy()
    _draw_boxes(rgb, boxes)
    if labels is not None:
        try:
            rgb = _draw_labels(rgb, boxes, labels)
        except ImportError:
            pass  # documented: without Pillow there is no font rasteriser, so labels are left out
    return _image_summary(tag, _rescale(rgb, rescale, "image_boxes"))


def figure(tag: str, figure: object, close: bool = True) -> bytes:
    """A matplotlib figure (rendered with the Agg canvas) as an image, or a list of same-sized
    figures as a grid. The alpha channel is kept only when some pixel is not opaque. ``close``
    closes the figures in pyplot afterwards, as torch does."""
    if isinstance(figure, (list, tuple)):
        if not figure:
            raise ValueError("figure: the list of figures is empty")
        frames = [_render_figure(f, close) for f in figure]
        if len({f.shape for f in frames}) != 1:
            sizes = sorted({f"{f.shape[1]}x{f.shape[0]}" for f in frames})
            raise ValueError(f"figure: a list of figures needs one pixel size for all, got {', '.join(sizes)}")
        hwc = _grid(np.stack(frames).transpose(0, 3, 1, 2))
    else:
        hwc = _render_figure(figure, close)
    if (hwc[:, :, 3] == 255).all():
        hwc = hwc[:, :, :3]
    return _image_summary(tag, hwc)


def video(tag: str, tensor: object, fps: float = 4) -> bytes:
    """A video [N, T, C, H, W] (batch, time, channel, height, width) as an animated GIF image
    summary, the batch tiled into each frame as torch does. uint8 is kept, other dtypes are
    taken to be in [0, 1]. C is 1 (gray), 3 (RGB) or 4 (RGBA, alpha dropped)."""
    arr = to_numpy(tensor)
    if arr.ndim != 5:
        raise ValueError(
            f"video: expected a 5-D tensor [N, T, C, H, W] (batch, time, channel, height, width), got shape {arr.shape}"
        )
    if arr.shape[2] not in (1, 3, 4):
        raise ValueError(f"video: C (axis 2 of [N, T, C, H, W]) must be 1, 3 or 4, got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"video: the video is empty (shape {arr.shape})")
    if not isinstance(fps, (int, float)) or not fps > 0 or not math.isfinite(fps):
        raise ValueError(f"video: fps must be a positive number, got {fps!r}")
    frames = _video_grid(_to_uint8(arr, "video"))
    proto = _image_proto(frames[0], encode_gif(frames, fps))
    return _summary(_value(tag, _V_IMAGE, proto))


# ------------------------------------------------------------------------------------------------
# Audio


def audio(tag: str, tensor: object, sample_rate: float = 44100) -> bytes:
    """A WAV (16-bit PCM) audio summary.

    ``tensor``: floats in [-1, 1] (clipped), 1-D for mono or [frames, channels] with 1 or 2
    channels; size-1 axes are squeezed away first. int16 is taken as PCM already. Samples are
    ``x * 32767`` truncated toward zero, as torch does."""
    arr = np.squeeze(to_numpy(tensor))
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size == 0:
        raise ValueError("audio: the clip is empty")
    if arr.ndim == 2 and arr.shape[1] > 2:
        raise ValueError(
            f"audio: expected [frames, channels] with 1 or 2 channels, got shape {arr.shape}; "
            "for torchaudio's [channels, frames] layout pass the transpose (waveform.T)"
        )
    if arr.ndim > 2:
        raise ValueError(f"audio: expected a 1-D clip or [frames, channels], got shape {arr.shape}")
    if arr.dtype == np.int16:
        pcm = arr.astype("<i2")
    elif arr.dtype.kind in "biuf":
        # float32/float64 are scaled in their own precision, as torch's
        # `array * np.iinfo(np.int16).max` is; float16 cannot hold 32767, so it is widened, and so
        # are bools and other integer dtypes (whose values outside [-1, 1] are clipped).
        x = (
            arr
            if arr.dtype in (np.float32, np.float64)
            else arr.astype(np.float32 if arr.dtype.itemsize <= 2 else np.float64)
        )
        x = np.clip(np.nan_to_num(x), -1, 1)
        pcm = (x * np.iinfo(np.int16).max).astype("<i2")
    else:
        raise TypeError(f"audio: expected floats in [-1, 1] (or int16 PCM), got dtype {arr.dtype}")
    if not isinstance(sample_rate, (int, float)) or not sample_rate > 0:
        raise ValueError(f"audio: sample_rate must be a positive number of frames per second, got {sample_rate!r}")
    channels = 1 if pcm.ndim == 1 else pcm.shape[1]
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(int(round(sample_rate)))
        wav.writeframes(np.ascontiguousarray(pcm).tobytes())
    proto = (
        _pb.float_field(_AU_RATE, sample_rate)
        + _pb.int_field(_AU_CHANNELS, channels)
        + _pb.int_field(_AU_FRAMES, pcm.shape[0])
        + _pb.bytes_field(_AU_DATA, buf.getvalue())
        + _pb.bytes_field(_AU_TYPE, "audio/wav")
    )
    return _summary(_value(tag, _V_AUDIO, proto))


# ------------------------------------------------------------------------------------------------
# Text


def text(tag: str, text_string: object) -> bytes:
    """A text-plugin summary: a DT_STRING tensor (Markdown is rendered by TensorBoard).

    A single string is stored with shape [1], like torch; a list or array of strings keeps its
    shape (TensorBoard shows a rank-1 or rank-2 string tensor as a table). The tag is used as
    given: torch's and tensorboardX's ``add_text`` append ``/text_summary`` themselves."""
    if isinstance(text_string, (str, bytes)):
        arr = np.array([text_string], dtype=object)
    else:
        arr = to_numpy(text_string)
        if arr.dtype.kind not in "SUO":
            raise TypeError(f"text: expected a str (or a list/array of str), got dtype {arr.dtype}")
    proto = _tensor(DT_STRING, arr.shape, strings=_string_items(arr, "text"))
    # TextPluginData{version=0} encodes to no bytes at all.
    return _summary(_value(tag, _V_TENSOR, proto, tensor_metadata("text")))


# ------------------------------------------------------------------------------------------------
# PR curves


def _pr_summary(tag: str, data: np.ndarray, num_thresholds: int) -> bytes:
    # PrCurvePluginData{version=1 (0), num_thresholds=2}
    content = _pb.int_field(2, num_thresholds)
    proto = _tensor(DT_FLOAT, data.shape, content=np.ascontiguousarray(data, dtype="<f4").tobytes())
    return _summary(_value(tag, _V_TENSOR, proto, tensor_metadata("pr_curves", content)))


def _check_thresholds(num_thresholds: object, what: str) -> int:
    if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, (int, np.integer)) or num_thresholds < 2:
        raise ValueError(f"{what}: num_thresholds must be an int >= 2, got {num_thresholds!r}")
    return int(num_thresholds)


def pr_curve(
    tag: str,
    labels: object,
    predictions: object,
    num_thresholds: int = 127,
    weights: object = None,
) -> bytes:
    """A pr_curves-plugin summary: float32 tensor [6, num_thresholds] of TP, FP, TN, FN,
    precision and recall at thresholds i/(num_thresholds-1), computed as TensorBoard's and
    torch's ``compute_curve`` do (``predictions`` in [0, 1]; ``labels`` true/false; optional
    ``weights`` per example). Unlike torch, num_thresholds above 127 is honoured."""
    n = _check_thresholds(num_thresholds, "pr_curve")
    lab = to_numpy(labels)
    pred = to_numpy(predictions)
    if lab.shape != pred.shape:
        raise ValueError(f"pr_curve: labels and predictions must have one shape, got {lab.shape} and {pred.shape}")
    if pred.dtype.kind not in "biuf" or lab.dtype.kind not in "biuf":
        raise TypeError(f"pr_curve: labels and predictions must be numbers or bools, got {lab.dtype} and {pred.dtype}")
    w = np.broadcast_to(to_numpy(1.0 if weights is None else weights).astype(np.float64), lab.shape).ravel()
    positive = lab.astype(np.float64).ravel()
    # In the predictions' own float precision, as TensorBoard's compute_curve does: float32
    # products can round across a bucket boundary differently from float64 ones.
    flat = pred.ravel() if pred.dtype.kind == "f" else pred.ravel().astype(np.float64)
    with np.errstate(invalid="ignore"):
        scaled = np.floor(flat * (n - 1))
    keep = (scaled >= 0) & (scaled <= n - 1)  # predictions outside [0, 1] (and NaN) count nowhere
    bucket = scaled[keep].astype(np.intp)
    tp_buckets = np.bincount(bucket, weights=(positive * w)[keep], minlength=n)
    fp_buckets = np.bincount(bucket, weights=((1.0 - positive) * w)[keep], minlength=n)
    # Examples at or above threshold i: a reverse cumulative sum.
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return _pr_summary(tag, np.stack([tp, fp, tn, fn, precision, recall]), n)


def pr_curve_raw(
    tag: str,
    true_positive_counts: object,
    false_positive_counts: object,
    true_negative_counts: object,
    false_negative_counts: object,
    precision: object,
    recall: object,
    num_thresholds: int = 127,
    weights: object = None,
) -> bytes:
    """A pr_curves-plugin summary from precomputed counts: six 1-D sequences of length
    ``num_thresholds``. ``weights`` is accepted for torch's signature and ignored, as in torch."""
    n = _check_thresholds(num_thresholds, "pr_curve_raw")
    names = (
        "true_positive_counts",
        "false_positive_counts",
        "true_negative_counts",
        "false_negative_counts",
        "precision",
        "recall",
    )
    rows = []
    for name, series in zip(
        names,
        (true_positive_counts, false_positive_counts, true_negative_counts, false_negative_counts, precision, recall),
    ):
        arr = to_numpy(series)
        if arr.shape != (n,) or arr.dtype.kind not in "biuf":
            raise ValueError(
                f"pr_curve_raw: {name} must be {n} numbers (num_thresholds), got shape {arr.shape} dtype {arr.dtype}"
            )
        rows.append(arr.astype(np.float64))
    return _pr_summary(tag, np.stack(rows), n)


# ------------------------------------------------------------------------------------------------
# Custom scalars (tensorboard/plugins/custom_scalar/layout.proto)

CUSTOM_SCALARS_TAG = "custom_scalars__config__"


def custom_scalars(layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> bytes:
    """The custom_scalars layout from torch's dict form::

        {"Category": {"chart title": ["Multiline", ["tag a", "tag b"]],
                      "other chart": ["Margin", ["value tag", "lower tag", "upper tag"]]}}

    Tags in Multiline charts are regexes (TensorBoard's rule). Written under the tag
    ``custom_scalars__config__`` as a DT_STRING scalar holding the serialized Layout."""
    if not isinstance(layout, Mapping):
        raise TypeError(
            f"custom_scalars: layout must be a dict of category -> {{chart title: [kind, tags]}}, got {type(layout).__name__}"
        )
    categories = []
    for category, charts in layout.items():
        if not isinstance(charts, Mapping):
            raise TypeError(
                f"custom_scalars: layout[{category!r}] must be a dict of chart title -> [kind, tags], got {charts!r}"
            )
        body = _pb.bytes_field(1, str(category))  # Category.title
        for title, spec in charts.items():
            if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence) or len(spec) != 2:
                raise ValueError(
                    f"custom_scalars: chart {title!r} must be ['Multiline', [tags]] or ['Margin', [value, lower, upper]], got {spec!r}"
                )
            kind, tags = spec
            if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(isinstance(t, str) for t in tags):
                raise TypeError(f"custom_scalars: chart {title!r} needs a list of tag strings, got {tags!r}")
            if kind == "Multiline":
                content = _pb.message_field(2, b"".join(_pb.bytes_field(1, t, keep_default=True) for t in tags))
            elif kind == "Margin":
                if len(tags) != 3:
                    raise ValueError(
                        f"custom_scalars: Margin chart {title!r} needs [value, lower, upper] tags, got {tags!r}"
                    )
                series = b"".join(_pb.bytes_field(i + 1, t) for i, t in enumerate(tags))
                content = _pb.message_field(3, _pb.message_field(1, series))  # Chart.margin{series}
            else:
                raise ValueError(f"custom_scalars: chart {title!r} has kind {kind!r}; use 'Multiline' or 'Margin'")
            body += _pb.message_field(2, _pb.bytes_field(1, str(title)) + content)  # Category.chart
        categories.append(_pb.message_field(2, body))  # Layout.category
    proto = _tensor(DT_STRING, (), strings=[b"".join(categories)])
    return _summary(_value(CUSTOM_SCALARS_TAG, _V_TENSOR, proto, tensor_metadata("custom_scalars")))


# ------------------------------------------------------------------------------------------------
# Meshes (tensorboard/plugins/mesh/plugin_data.proto)

_MESH_PARTS = (("VERTEX", 1, np.float32, DT_FLOAT), ("FACE", 2, np.int32, DT_INT32), ("COLOR", 3, np.uint8, DT_UINT8))


def mesh(
    tag: str,
    vertices: object,
    colors: object = None,
    faces: object = None,
    config_dict: Mapping[str, Any] | None = None,
    *,
    display_name: str | None = None,
    description: str | None = None,
) -> list[bytes]:
    """Mesh-plugin summaries, one per component present, as TensorBoard's mesh summary writes
    them: ``<tag>_VERTEX`` (float32 [B, N, 3] coordinates), ``<tag>_FACE`` (int32 [B, F, 3]
    vertex indices), ``<tag>_COLOR`` (uint8 [B, N, 3] RGB in 0..255). ``config_dict`` is the
    three.js scene configuration, stored as JSON."""
    if vertices is None:
        raise ValueError("mesh: vertices are required (a [B, N, 3] array of x, y, z)")
    arrays: list[tuple[str, int, np.ndarray, int]] = []
    for (name, content_type, np_type, dtype), given in zip(_MESH_PARTS, (vertices, faces, colors)):
        if given is None:
            continue
        arr = to_numpy(given)
        if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype.kind not in "biuf":
            raise ValueError(
                f"mesh: {name.lower()} must be numbers of shape [B, N, 3], got shape {arr.shape} dtype {arr.dtype}"
            )
        if name == "FACE" and arr.dtype.kind == "f" and not np.array_equal(arr, np.floor(arr)):
            raise ValueError("mesh: faces must be integer vertex indices")
        if name == "COLOR" and arr.dtype.kind == "f":
            arr = np.clip(np.rint(arr), 0, 255)
        arrays.append((name, content_type, arr.astype(np_type), dtype))
    components = 0
    for _, content_type, _, _ in arrays:
        components |= 1 << content_type
    json_config = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    out = []
    for name, content_type, arr, dtype in arrays:
        content = (
            _pb.bytes_field(2, tag)  # MeshPluginData.name (version=1 is 0, left out)
            + _pb.int_field(3, content_type)
            + _pb.bytes_field(5, json_config)
            + _pb.packed_varints(6, arr.shape)
            + _pb.int_field(7, components)
        )
        metadata = tensor_metadata("mesh", content, display_name, description)
        proto = _tensor(
            dtype, arr.shape, content=np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        )
        out.append(_summary(_value(f"{tag}_{name}", _V_TENSOR, proto, metadata)))
    return out
