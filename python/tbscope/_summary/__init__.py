"""Encoders for the rich summary kinds: user data in, encoded ``Summary`` protobuf bytes out.

``SummaryWriter`` hands the bytes to the native ``EventWriter.summary(bytes, step, wall_time)``.
By concept: :mod:`.builders` (the summaries and events, field by field), :mod:`.codecs` (PNG and
GIF encoders, image and frame layouts), :mod:`.projector` (the files ``add_embedding`` writes).
"""

from tbscope._summary.builders import (
    CUSTOM_SCALARS_TAG,
    EXPERIMENT_TAG,
    SESSION_END_INFO_TAG,
    SESSION_START_INFO_TAG,
    audio,
    custom_scalars,
    figure,
    graph_event,
    graph_events,
    hparams,
    image,
    image_boxes,
    images,
    mesh,
    onnx_graph_event,
    pr_curve,
    pr_curve_raw,
    tensor_metadata,
    tensor_summary,
    text,
    tf_dtype,
    to_numpy,
    video,
)
from tbscope._summary.codecs import encode_gif, encode_png
from tbscope._summary.projector import write_embedding

__all__ = [
    "CUSTOM_SCALARS_TAG",
    "EXPERIMENT_TAG",
    "SESSION_END_INFO_TAG",
    "SESSION_START_INFO_TAG",
    "audio",
    "custom_scalars",
    "encode_gif",
    "encode_png",
    "figure",
    "graph_event",
    "graph_events",
    "hparams",
    "image",
    "image_boxes",
    "images",
    "mesh",
    "onnx_graph_event",
    "pr_curve",
    "pr_curve_raw",
    "tensor_metadata",
    "tensor_summary",
    "text",
    "tf_dtype",
    "to_numpy",
    "video",
    "write_embedding",
]
