"""Graph events: a GraphDef (TensorFlow's, TensorBoard's or tensorboardX's proto or its bytes, a
torch module traced by torch's own tracer, an ONNX file through torch's or tensorboardX's
converter) as an encoded ``Event``, with the tracer's run metadata as torch writes it. Events,
not summaries: the writer hands them over whole."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time

from tbscope import _pb

# Event and TaggedRunMetadata fields (tensorflow/core/util/event.proto).
_EV_WALL_TIME, _EV_GRAPH_DEF, _EV_TAGGED_RUN_METADATA = 1, 4, 8
_TRM_TAG, _TRM_RUN_METADATA = 1, 2


def graph_event(
    model_or_graph: object,
    input_to_model: object = None,
    verbose: bool = False,
    use_strict_trace: bool = True,
    *,
    wall_time: float | None = None,
) -> bytes:
    """An encoded ``Event{wall_time, graph_def}``.

    Accepts a GraphDef proto object (TensorFlow's, TensorBoard's or tensorboardX's), its
    serialized bytes, or a ``torch.nn.Module`` with ``input_to_model`` (traced by torch's own
    ``torch.utils.tensorboard._pytorch_graph.graph``, when torch is installed)."""
    return graph_events(model_or_graph, input_to_model, verbose, use_strict_trace, wall_time=wall_time)[0]


def graph_events(
    model_or_graph: object,
    input_to_model: object = None,
    verbose: bool = False,
    use_strict_trace: bool = True,
    *,
    wall_time: float | None = None,
) -> list[bytes]:
    """What torch's ``add_graph`` writes: the :func:`graph_event` and, for a traced torch
    module, a second event with the tracer's step statistics as
    ``TaggedRunMetadata{tag: "step1"}`` (TensorBoard's graph dashboard lists it as a session run)."""
    graph: bytes
    run_metadata: bytes | None = None
    if isinstance(model_or_graph, (bytes, bytearray, memoryview)):
        graph = bytes(model_or_graph)
    elif hasattr(model_or_graph, "SerializeToString") and hasattr(model_or_graph, "DESCRIPTOR"):
        name = model_or_graph.DESCRIPTOR.full_name
        if not name.endswith("GraphDef") or name.endswith("MetaGraphDef"):
            raise TypeError(f"graph_event: expected a GraphDef message, got a {name}")
        graph = model_or_graph.SerializeToString()
    elif _is_torch_module(model_or_graph):
        if input_to_model is None:
            raise ValueError(
                "graph_event: tracing a torch module needs input_to_model (a tensor or tuple of tensors it accepts)"
            )
        try:
            from torch.utils.tensorboard._pytorch_graph import graph as trace_graph
        except ImportError as err:
            raise ImportError(
                f"graph_event: tracing a torch module uses torch's tracer, torch.utils.tensorboard, which could not "
                f"be imported ({err}); it needs the tensorboard package (pip install tensorboard), or pass a GraphDef"
            ) from err
        graph_def, step_stats = trace_graph(model_or_graph, input_to_model, verbose, use_strict_trace)
        graph = graph_def.SerializeToString()
        run_metadata = step_stats.SerializeToString()
    else:
        raise TypeError(
            "graph_event: expected a GraphDef (TensorFlow/TensorBoard/tensorboardX proto, or its serialized "
            f"bytes) or a torch.nn.Module with input_to_model; got {type(model_or_graph).__module__}."
            f"{type(model_or_graph).__qualname__}"
        )
    now = time.time() if wall_time is None else float(wall_time)
    head = _pb.double_field(_EV_WALL_TIME, now, keep_default=True)
    events = [head + _pb.bytes_field(_EV_GRAPH_DEF, graph, keep_default=True)]
    if run_metadata is not None:
        tagged = _pb.bytes_field(_TRM_TAG, "step1") + _pb.bytes_field(
            _TRM_RUN_METADATA, run_metadata, keep_default=True
        )
        events.append(head + _pb.message_field(_EV_TAGGED_RUN_METADATA, tagged))
    return events


def onnx_graph_event(path: str | os.PathLike[str], *, wall_time: float | None = None) -> bytes:
    """An encoded ``Event{wall_time, graph_def}`` of an ONNX model file's graph, converted by
    torch's ``load_onnx_graph`` (or tensorboardX's, when torch is not installed): the same
    GraphDef their ``add_onnx_graph`` writes. Both read the file with the ``onnx`` package."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"add_onnx_graph: no ONNX model file at {path!r}")
    converters = []
    try:
        from torch.utils.tensorboard._onnx_graph import load_onnx_graph as by_torch

        converters.append(by_torch)
    except ImportError:
        pass
    try:
        from tensorboardX.onnx_graph import load_onnx_graph as by_tensorboardx

        converters.append(by_tensorboardx)
    except ImportError:
        pass
    if not converters:
        raise ImportError(
            "add_onnx_graph converts ONNX graphs with torch's (or tensorboardX's) converter: "
            "pip install torch onnx (or tensorboardX onnx)"
        )
    try:
        import onnx  # noqa: F401 - both converters import it lazily; say so before they fail
    except ImportError:
        raise ImportError("add_onnx_graph reads the model with the onnx package: pip install onnx") from None
    with contextlib.redirect_stdout(io.StringIO()):  # both converters print every node's name
        graph = converters[0](path)
    return graph_event(graph, wall_time=wall_time)


def _is_torch_module(x: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.nn.Module)
