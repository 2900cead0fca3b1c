"""``writer.file_writer``: torch's and tensorboardX's low-level writer of one run, for code that
builds protobuf messages itself (``add_summary``, ``add_event``, a graph)."""

from __future__ import annotations

from typing import Any

from tbscope._writer.sinks import _EV_GRAPH_DEF, _EV_TAGGED_RUN_METADATA, _event_head, _Run
from tbscope._writer.values import _as_bytes, _step, _walltime


class _FileWriterView:
    """What torch's and tensorboardX's ``writer.file_writer`` offer, for code that builds
    protobuf messages itself (``add_summary``, ``add_event``)."""

    def __init__(self, writer: object, run: _Run, logdir: str) -> None:
        # The SummaryWriter stays alive while its view is used.
        self._writer = writer
        self._run = run
        self._logdir = logdir

    def get_logdir(self) -> str:
        """The run directory this file writer writes into."""
        return self._logdir

    def add_event(self, event: Any, step: int | None = None, walltime: float | None = None) -> None:
        """Write an ``Event`` (a protobuf message or its bytes); wall_time is set to ``walltime``
        (default now) and step to ``step`` when given, as torch does."""
        data = _as_bytes(event, "event")
        # Protobuf keeps the last occurrence of a non-repeated field: appending overrides.
        self._run.sink.event(data + _event_head(_step(step), _walltime(walltime)))

    def add_summary(self, summary: Any, global_step: int | None = None, walltime: float | None = None) -> None:
        """Write a ``Summary`` (a protobuf message or its bytes) at ``global_step``."""
        self._run.sink.summary(_as_bytes(summary, "summary"), _step(global_step), _walltime(walltime))

    def add_graph(self, graph_profile: Any, walltime: float | None = None) -> None:
        """torch's form: (GraphDef, RunMetadata/StepStats) protobufs."""
        from tbscope import _pb

        graph, stepstats = graph_profile
        self.add_event(_pb.bytes_field(_EV_GRAPH_DEF, _as_bytes(graph, "graph")), None, walltime)
        trm = _pb.bytes_field(1, "step1") + _pb.bytes_field(2, _as_bytes(stepstats, "run metadata"))
        self.add_event(_pb.message_field(_EV_TAGGED_RUN_METADATA, trm), None, walltime)

    def add_onnx_graph(self, graph: Any, walltime: float | None = None) -> None:
        """A GraphDef protobuf, as an Event.graph_def."""
        from tbscope import _pb

        self.add_event(_pb.bytes_field(_EV_GRAPH_DEF, _as_bytes(graph, "graph")), None, walltime)

    def flush(self) -> None:
        self._run.flush(False)

    def close(self) -> None:
        self._run.close()

    def reopen(self) -> None:
        """Nothing to do: the next write opens a new file after close()."""
