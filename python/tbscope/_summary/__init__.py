"""Encoders for the rich summary kinds: user data in, encoded ``Summary`` protobuf bytes out.

``SummaryWriter`` hands the bytes to the native ``EventWriter.summary(bytes, step, wall_time)``.
By concept: :mod:`.builders` (the summaries, field by field), :mod:`.hparams_plugin` (the hparams
plugin's experiment and session summaries), :mod:`.graphs` (graph events), :mod:`.codecs` (PNG and
GIF encoders, image and frame layouts), :mod:`.projector` (the files ``add_embedding`` writes).
"""

from tbscope._summary.builders import (
    CUSTOM_SCALARS_TAG,
    audio,
    custom_scalars,
    figure,
    image,
    image_boxes,
    images,
    mesh,
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
from tbscope._summary.graphs import graph_event, graph_events, onnx_graph_event
from tbscope._summary.hparams_plugin import EXPERIMENT_TAG, SESSION_END_INFO_TAG, SESSION_START_INFO_TAG, hparams
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
