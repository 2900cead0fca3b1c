"""``tensorboard.backend.event_processing.plugin_event_accumulator.EventAccumulator``, answered
by tbscope."""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from tbscope.compat._accumulator import _Accumulator
from tbscope.compat._events import _tb, GRAPH, META_GRAPH, RUN_METADATA, TensorEvent, TENSORS
from tbscope.compat._reservoir import _sample, _Sampled, _TagReservoir, _TENSOR_RESERVOIR_KEY, Reservoir
from tbscope.compat._run import _Records
from tbscope.compat._loader import _W_GRAPH
from tbscope.compat._wire import _RUN_GRAPH_TAG, _AUDIO, _EV_GRAPH, _EV_RUN_METADATA, _Files, _HISTO, _IMAGE, _NO_PROBE, _SIMPLE, _TENSOR


#: plugin_event_accumulator.DEFAULT_SIZE_GUIDANCE
DEFAULT_SIZE_GUIDANCE = {TENSORS: 500}
STORE_EVERYTHING_SIZE_GUIDANCE = {TENSORS: 0}

#: Value fields the plugin accumulator turns into a tensor (after data_compat migration).
_PLUGIN_FIELDS = frozenset((_SIMPLE, _IMAGE, _HISTO, _AUDIO, _TENSOR, _EV_GRAPH, _EV_RUN_METADATA))


class PluginEventAccumulator(_Accumulator):
    """TensorBoard's ``plugin_event_accumulator.EventAccumulator`` (what TensorBoard's own plugins
    read), answered by tbscope.

    Every series is a tensor series: ``Tags()`` is ``{tensors, graph, meta_graph, run_metadata}``
    and ``Tensors(tag)`` returns ``TensorEvent``s whose protos went through TensorBoard's
    ``data_compat`` and ``dataclass_compat`` migration, exactly as TensorBoard would build them
    (legacy scalars become float32 tensors, legacy histograms ``[k, 3]`` float32 buckets, images
    ``[w, h, png]`` strings, graphs a ``__run_graph__`` series ...). ``tensors_by_tag`` holds a
    reservoir per tag, sampled and purged as TensorBoard's. ``SummaryMetadata`` is the migrated
    metadata. As in TensorBoard, ``RunMetadata`` always raises: migration turns tagged run
    metadata into tensor series. Requires ``tensorboard`` for the protos.
    """

    _plugin = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        size_guidance: Mapping[str, int] | None = None,
        tensor_size_guidance: Mapping[str, int] | None = None,
        purge_orphaned_data: bool = True,
        event_file_active_filter: Any = None,
        detect_file_replacement: bool | None = None,
    ) -> None:
        super().__init__(path, purge_orphaned_data, event_file_active_filter)
        self._size_guidance = dict(size_guidance or DEFAULT_SIZE_GUIDANCE)
        self._tensor_size_guidance = dict(tensor_size_guidance or {})
        self.summary_metadata: dict[str, Any] = {}
        self.tensors_by_tag: dict[str, Reservoir] = {}
        self._plugin_to_tag_to_content: dict[str, dict[str, bytes]] = collections.defaultdict(dict)
        self._metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<tbscope.compat.PluginEventAccumulator {os.fspath(self.path)!r}>"

    def _after_reload(self) -> None:
        self._metadata = None
        run = self._require()
        firsts: dict[str, int] = {}
        for tag in run.kinds:
            _, pos = self._tensor_records(tag)
            if len(pos):
                firsts[tag] = int(pos[0])
        metadata = self.AllSummaryMetadata() if self._tensor_size_guidance or TENSORS not in self._size_guidance else {}
        self.tensors_by_tag = {}
        for tag in run.ordered(firsts):
            default = self._size_guidance[TENSORS]
            md = metadata.get(tag)
            size = default if md is None else self._tensor_size_guidance.get(md.plugin_data.plugin_name, default)
            self.tensors_by_tag[tag] = _TagReservoir(self, tag, size)
        self.summary_metadata = self.AllSummaryMetadata()
        self._plugin_to_tag_to_content = collections.defaultdict(dict)
        for tag, m in self.summary_metadata.items():
            if m.plugin_data.plugin_name:
                self._plugin_to_tag_to_content[m.plugin_data.plugin_name][tag] = m.plugin_data.content

    def _dropped(self) -> dict[str, set[tuple[str, int]]]:
        """The ``__run_graph__`` values of graph events read before the first Reload.

        TensorBoard's ``FirstEventTimestamp``/``GetSourceWriter`` take one event from a fresh
        generator of migrated events and drop the generator; a graph_def record migrates into
        two events (itself, then its ``__run_graph__`` summary), so when such a record is the
        one taken, its ``__run_graph__`` value is never seen. The graph itself is kept."""
        run = self._require()
        gone = set()
        for i in range(self._peeked):
            head = self._loader.peek(i)
            if head is not None and head[5] == _W_GRAPH:
                gone.add((os.path.relpath(head[3], run.dir), head[4]))
        return {_RUN_GRAPH_TAG: gone} if gone else {}

    def _tensor_records(self, tag: str) -> tuple[_Records, np.ndarray[Any, Any]]:
        run = self._require()
        fields = _PLUGIN_FIELDS | {0} if run.kinds.get(tag) == "hparams" else _PLUGIN_FIELDS
        return run.tag_records(tag, frozenset(fields))

    def _keys(self, bucket: str) -> list[str]:
        return [_TENSOR_RESERVOIR_KEY]

    def _sampled(self, bucket: str, key: str, exact_state: bool = False) -> _Sampled:
        tag = bucket
        got = None if exact_state else self._sampled_cache.get((tag, key))
        if got is None:
            _, pos = self._tensor_records(tag)
            steps = self._require().replay.steps[pos]
            res = self.tensors_by_tag[tag]
            got = _sample(res.size, True, pos, steps, *self._ops(self._tag_positions(tag)), exact_state=exact_state)
            if not exact_state:
                self._sampled_cache[(tag, key)] = got
        return got

    def _items(self, bucket: str, key: str) -> list[Any]:
        tag = bucket
        rec, _ = self._tensor_records(tag)
        kept = np.asarray(self._sampled(tag, key).kept, dtype=np.int64)
        return self._tensor_events(tag, _Records(rec.names, rec.file_codes[kept], rec.offsets[kept]))

    def Tags(self) -> dict[str, Any]:
        return {
            TENSORS: list(self.tensors_by_tag),
            GRAPH: self._has_graph(),
            META_GRAPH: self._has_meta_graph(),
            RUN_METADATA: [],
        }

    def SerializedGraph(self) -> bytes | None:
        return self._graph_bytes()

    def _migrated(self, tag: str, rec: _Records) -> Iterator[tuple[float, int, Any]]:
        """(wall_time, step, migrated Summary.Value) of ``tag`` in records ``rec``, file by file
        (migration remembers each tag's first metadata per file, as TensorBoard's loaders do)."""
        run = self._require()
        tb = _tb("PluginEventAccumulator")
        parse = tb.event_pb2.Event.FromString
        with _Files() as fs:
            for rel, which in rec.per_file():
                initial: dict[str, Any] = {}
                for data in fs.records(run.path(rel), rec.offsets[which].tolist()):
                    ev = tb.data_compat.migrate_event(parse(data))
                    for e in tb.dataclass_compat.migrate_event(ev, initial):
                        if e.HasField("summary"):
                            for v in e.summary.value:
                                if (v.tag or v.node_name) == tag:
                                    yield e.wall_time, e.step, v

    def _simple_value_tensors(self, tag: str, rel: str, offsets: np.ndarray[Any, Any]) -> list[TensorEvent] | None:
        """The migrated tensors of a ``simple_value`` series' records at ``offsets`` of one file,
        built from tbscope's columns: migration makes each value ``make_tensor_proto(value)``, a
        rank-0 DT_FLOAT in ``float_val``, rebuilt here without reading the records (20x faster
        than migrating them). None when a wall time is not finite (only the record has it)."""
        run = self._require()
        t = run.table("scalars")
        idx = run.rows(tag)
        idx = idx[t.file_codes[idx] == t.files.index(rel)] if rel in t.files else idx[:0]
        idx = idx[np.isin(t.offsets[idx], offsets)]
        if len(idx) != len(offsets):
            return None
        idx = idx[np.argsort(np.searchsorted(offsets, t.offsets[idx]) if np.all(offsets[:-1] <= offsets[1:]) else np.arange(len(idx)), kind="stable")]
        walls = t.walls[idx]
        if np.isnan(walls).any():
            return None
        tb = _tb("PluginEventAccumulator")
        proto, shape = tb.tensor_pb2.TensorProto, tb.tensor_shape_pb2.TensorShapeProto()
        values = t.column("value", idx).astype(np.float32).tolist()
        return [
            TensorEvent(w, s, proto(dtype=1, tensor_shape=shape, float_val=[v]))
            for w, s, v in zip(walls.tolist(), t.steps[idx].tolist(), values)
        ]

    def _tensor_events(self, tag: str, rec: _Records) -> list[Any]:
        """The migrated tensors of ``tag`` in records ``rec`` (in processing order)."""
        run = self._require()
        probes = run.probes(tag) if run.kinds.get(tag) == "scalars" else {}
        out: list[TensorEvent] = []
        # consecutive records of one file form a run; each run is built in one go
        i = 0
        n = len(rec)
        while i < n:
            j = i + 1
            while j < n and rec.file_codes[j] == rec.file_codes[i] and rec.offsets[j] > rec.offsets[j - 1]:
                j += 1
            rel = rec.file(i)
            part = _Records(rec.names, rec.file_codes[i:j], rec.offsets[i:j])
            fast = None
            if probes.get(rel, _NO_PROBE).field == _SIMPLE:
                fast = self._simple_value_tensors(tag, rel, rec.offsets[i:j])
            if fast is not None:
                out.extend(fast)
            else:
                out.extend(TensorEvent(w, s, v.tensor) for w, s, v in self._migrated(tag, part) if v.HasField("tensor"))
            i = j
        return out

    def Tensors(self, tag: str) -> list[TensorEvent]:
        """The tensors of ``tag`` TensorBoard keeps, after its migration, in processing order."""
        return self.tensors_by_tag[tag].Items(_TENSOR_RESERVOIR_KEY)

    def AllSummaryMetadata(self) -> dict[str, Any]:
        """tag -> first (migrated) ``SummaryMetadata``."""
        if self._metadata is None:
            md: dict[str, Any] = {}
            run = self._run
            if run is not None:
                firsts: dict[str, int] = {}
                for tag in run.kinds:
                    pos = self._tag_positions(tag)
                    pos = pos[pos >= 0]
                    if len(pos):
                        firsts[tag] = int(pos.min())
                for tag in run.ordered(firsts):
                    rec = run.seen_records(tag)
                    pos = run.record_positions(rec)
                    # the first record of each file (migration's memory is per file)
                    for rel, which in rec.per_file():
                        which = which[pos[which] >= 0]
                        if not len(which):
                            continue
                        got = None
                        for _, _, v in self._migrated(tag, _Records(rec.names, rec.file_codes[which[:1]], rec.offsets[which[:1]])):
                            if v.HasField("metadata"):
                                got = v.metadata
                                break
                        if got is not None:
                            md[tag] = got
                            break
            self._metadata = md
        return dict(self._metadata)

    def SummaryMetadata(self, tag: str) -> Any:
        return self.summary_metadata[tag]

    def PluginTagToContent(self, plugin_name: str) -> dict[str, bytes]:
        if plugin_name not in self._plugin_to_tag_to_content:
            raise KeyError("Plugin %r could not be found." % plugin_name)
        return dict(self._plugin_to_tag_to_content[plugin_name])

    def ActivePlugins(self) -> frozenset[str]:
        return frozenset(self._plugin_to_tag_to_content)

    def RunMetadata(self, tag: str) -> Any:
        raise ValueError("There is no run metadata with this tag name")
