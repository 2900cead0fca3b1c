"""TensorBoard's tag types, size guidances and event classes, and its protos when installed."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

# --------------------------------------------------------------------------------------------
# Constants (tensorboard.backend.event_processing.tag_types / event_accumulator)
# --------------------------------------------------------------------------------------------

TENSORS = "tensors"
GRAPH = "graph"
META_GRAPH = "meta_graph"
RUN_METADATA = "run_metadata"
COMPRESSED_HISTOGRAMS = "distributions"
HISTOGRAMS = "histograms"
IMAGES = "images"
AUDIO = "audio"
SCALARS = "scalars"

#: Normal CDF at (-inf, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, inf) standard deviations, in basis points.
NORMAL_HISTOGRAM_BPS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)

#: TensorBoard's defaults, accepted for compatibility; tbscope keeps every point regardless.
DEFAULT_SIZE_GUIDANCE = {COMPRESSED_HISTOGRAMS: 500, IMAGES: 4, AUDIO: 4, SCALARS: 10000, HISTOGRAMS: 1, TENSORS: 10}
STORE_EVERYTHING_SIZE_GUIDANCE = {COMPRESSED_HISTOGRAMS: 0, IMAGES: 0, AUDIO: 0, SCALARS: 0, HISTOGRAMS: 0, TENSORS: 0}

# --------------------------------------------------------------------------------------------
# Event classes: TensorBoard's own when it is importable (so isinstance checks pass), else
# identical frozen dataclasses (TensorBoard >= 2.17 defines them as frozen dataclasses; older
# releases used namedtuples with the same fields in the same order, built the same way).
# --------------------------------------------------------------------------------------------

try:
    from tensorboard.backend.event_processing import event_accumulator as _tb_ea
except Exception:  # noqa: BLE001 - a TensorBoard that fails to import (e.g. a protobuf mismatch) is no TensorBoard  # pragma: no cover
    _tb_ea = None

if TYPE_CHECKING or _tb_ea is None:

    @dataclasses.dataclass(frozen=True)
    class ScalarEvent:
        wall_time: float
        step: int
        value: float

    @dataclasses.dataclass(frozen=True)
    class CompressedHistogramEvent:
        wall_time: float
        step: int
        compressed_histogram_values: Sequence[tuple[float, float]]

    @dataclasses.dataclass(frozen=True)
    class HistogramValue:
        min: float
        max: float
        num: int
        sum: float
        sum_squares: float
        bucket_limit: Sequence[float]
        bucket: Sequence[int]

    @dataclasses.dataclass(frozen=True)
    class HistogramEvent:
        wall_time: float
        step: int
        histogram_value: HistogramValue

    @dataclasses.dataclass(frozen=True)
    class ImageEvent:
        wall_time: float
        step: int
        encoded_image_string: bytes
        width: int
        height: int

    @dataclasses.dataclass(frozen=True)
    class AudioEvent:
        wall_time: float
        step: int
        encoded_audio_string: bytes
        content_type: str
        sample_rate: float
        length_frames: int

    @dataclasses.dataclass(frozen=True)
    class TensorEvent:
        wall_time: float
        step: int
        tensor_proto: Any

else:
    ScalarEvent = _tb_ea.ScalarEvent
    CompressedHistogramEvent = _tb_ea.CompressedHistogramEvent
    HistogramValue = _tb_ea.HistogramValue
    HistogramEvent = _tb_ea.HistogramEvent
    ImageEvent = _tb_ea.ImageEvent
    AudioEvent = _tb_ea.AudioEvent
    TensorEvent = _tb_ea.TensorEvent


def _tb(what: str) -> Any:
    """TensorBoard's protos and migration code, imported when first needed.

    Only proto objects (``TensorProto``, ``GraphDef``, ``SummaryMetadata``, ...) need TensorBoard;
    reading scalars, histograms, images and audio does not.
    """
    try:
        from tensorboard import data_compat, dataclass_compat
        from tensorboard.compat.proto import (
            config_pb2,
            event_pb2,
            graph_pb2,
            meta_graph_pb2,
            summary_pb2,
            tensor_pb2,
            tensor_shape_pb2,
        )
        from tensorboard.util import tensor_util
    except ImportError as e:
        raise ImportError(
            f"{what} returns TensorBoard protocol buffers, which need the `tensorboard` package "
            "(pip install tensorboard). Scalars, histograms, images and audio work without it."
        ) from e
    return SimpleNamespace(
        data_compat=data_compat,
        dataclass_compat=dataclass_compat,
        config_pb2=config_pb2,
        event_pb2=event_pb2,
        graph_pb2=graph_pb2,
        meta_graph_pb2=meta_graph_pb2,
        summary_pb2=summary_pb2,
        tensor_pb2=tensor_pb2,
        tensor_shape_pb2=tensor_shape_pb2,
        tensor_util=tensor_util,
    )


def _tb_available() -> bool:
    try:
        _tb("summary_metadata")
    except ImportError:
        return False
    return True
