"""``tensorboard.backend.event_processing.event_accumulator.EventAccumulator``, answered by tbscope."""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tbscope import _mirror
from tbscope._reader import Logdir, scan
from tbscope.compat._events import (
    AUDIO,
    COMPRESSED_HISTOGRAMS,
    DEFAULT_SIZE_GUIDANCE,
    GRAPH,
    HISTOGRAMS,
    IMAGES,
    META_GRAPH,
    NORMAL_HISTOGRAM_BPS,
    RUN_METADATA,
    SCALARS,
    TENSORS,
    AudioEvent,
    CompressedHistogramEvent,
    HistogramEvent,
    HistogramValue,
    ImageEvent,
    ScalarEvent,
    TensorEvent,
    _tb,
    _tb_available,
)
from tbscope.compat._loader import _MAX_WRITER_NAME_LEN, _Loader, _replay
from tbscope.compat._reservoir import Reservoir, _sample, _Sampled
from tbscope.compat._run import _blobs, _Records, _Run
from tbscope.compat._wire import (
    _AUDIO,
    _EMPTY_IDX,
    _EV_GRAPH,
    _EV_META_GRAPH,
    _EV_RUN_METADATA,
    _HISTO,
    _IMAGE,
    _META_GRAPH_TAG,
    _RUN_GRAPH_TAG,
    _SIMPLE,
    _TENSOR,
    _Files,
    _last_limits,
    _plugin_of,
)


def _compress_histogram(h: Any, bps: Sequence[float]) -> list[tuple[float, float]]:
    """TensorBoard's ``compressor.compress_histogram_proto``: the value at each basis point of the
    cumulative distribution, interpolated inside buckets (same algorithm, same edge rules)."""
    if not h.num:
        return [(b, 0.0) for b in bps]
    bucket = np.array(h.bucket, dtype=np.float64)
    limits = list(h.bucket_limit)
    weights = (bucket * bps[-1] / (bucket.sum() or 1.0)).cumsum()
    values: list[tuple[float, float]] = []
    j = 0
    while j < len(bps):
        i = int(np.searchsorted(weights, bps[j], side="right"))
        while i < len(weights):
            cumsum = weights[i]
            prev = weights[i - 1] if i > 0 else 0.0
            if cumsum == prev:
                i += 1
                continue
            lhs = h.min if (not i or not prev) else max(limits[i - 1], h.min)
            rhs = min(limits[i], h.max)
            values.append((bps[j], lhs + (bps[j] - prev) * float(rhs - lhs) / (cumsum - prev)))
            j += 1
            break
        else:
            break
    while j < len(bps):
        values.append((bps[j], h.max))
        j += 1
    return values


# --------------------------------------------------------------------------------------------
# Accumulators
# --------------------------------------------------------------------------------------------


class _Accumulator:
    """What both accumulators share: loading, the replay, first event, plugin assets, graphs."""

    _plugin = False

    def __init__(self, path: str | os.PathLike[str], purge_orphaned_data: bool, active_filter: Any = None) -> None:
        if not path:
            raise ValueError("path must be a valid string")
        # A URL (s3://...) is read from its local mirror, refreshed on each Reload.
        local, self._mirror = _mirror.local(os.fspath(path))
        self.path = local
        self.purge_orphaned_data = purge_orphaned_data
        self.most_recent_step = -1
        self.most_recent_wall_time: float = -1
        self.file_version: float | None = None
        self._loader = _Loader(local, active_filter)
        self._logdir: Logdir | None = None
        self._run: _Run | None = None
        self._peeked = 0  # records read by FirstEventTimestamp/GetSourceWriter before Reload
        self._sampled_cache: dict[tuple[str, str], _Sampled] = {}
        self._keys_cache: dict[str, list[str]] = {}

    def Reload(self) -> Any:
        """Read what was written since the last call (everything, the first time).

        As in TensorBoard, nothing is read before the first ``Reload``; then the files are read
        as its loader reads them (see ``_Loader``), and every bucket is what TensorBoard's
        would hold after the same records: same purges, same reservoir sampling.
        """
        if self._mirror is not None and self._logdir is not None:
            self._mirror.sync()
        self._loader.advance()
        replay = _replay(self._loader, self.purge_orphaned_data, self._plugin)
        fspath = os.fspath(self.path)
        if self._logdir is None:
            self._logdir = scan(fspath, runs=".", provenance=True)
        self._logdir.reload()
        self._run = _Run(self._logdir, fspath, replay)
        self._run.dropped = self._dropped()
        self.file_version = replay.file_version
        if self.purge_orphaned_data and replay.most_recent_step != -1 or replay.most_recent_wall_time != -1:
            self.most_recent_step = replay.most_recent_step
            self.most_recent_wall_time = replay.most_recent_wall_time
        self._sampled_cache.clear()
        self._keys_cache.clear()
        self._after_reload()
        return self

    def _after_reload(self) -> None:
        raise NotImplementedError

    def _dropped(self) -> dict[str, set[tuple[str, int]]]:
        """Values TensorBoard's loader lost: none here (see the plugin accumulator)."""
        return {}

    def _require(self) -> _Run:
        if self._run is None:
            raise KeyError("nothing loaded yet: call Reload() first")
        return self._run

    def FirstEventTimestamp(self) -> float:
        """Wall time of the first event. Before the first ``Reload`` TensorBoard reads the first
        record for it (and that record counts as read: see ``GetSourceWriter``)."""
        if self._run is not None and self._run.replay.first_wall is not None:
            return self._run.replay.first_wall
        if self._peeked == 0 and self._loader.peek(0) is not None:
            self._peeked = 1
        first = self._loader.peek(0) if self._peeked else None
        if first is None:
            raise ValueError("No event timestamp could be found")
        return first[0]

    def _peeked_writer(self) -> str | None:
        writer = None
        for i in range(self._peeked):
            head = self._loader.peek(i)
            if head is not None and head[1]:
                w = head[2]
                writer = w if w and len(w) <= _MAX_WRITER_NAME_LEN else None
        return writer

    def GetSourceWriter(self) -> str | None:
        """The writer named in the last ``source_metadata`` read, as TensorBoard keeps it (None
        when absent, empty, or longer than 128 characters). Before the first ``Reload``, as in
        TensorBoard, each call that finds none yet reads one more record."""
        if self._run is not None:
            return self._run.replay.writer
        writer = self._peeked_writer()
        if writer is None and self._loader.peek(self._peeked) is not None:
            self._peeked += 1
            writer = self._peeked_writer()
        return writer

    def PluginAssets(self, plugin_name: str) -> list[str]:
        d = os.path.join(os.fspath(self.path), "plugins", plugin_name)
        try:
            return [x.rstrip("/") for x in os.listdir(d)]
        except OSError:
            return []

    def RetrievePluginAsset(self, plugin_name: str, asset_name: str) -> str:
        p = os.path.join(os.fspath(self.path), "plugins", plugin_name, asset_name)
        try:
            with open(p) as f:
                return f.read()
        except OSError as e:
            raise KeyError(f"Asset path {p} not found") from e

    def _graph_bytes(self) -> bytes | None:
        """TensorBoard's rule: the newest graph_def event; failing that, the graph inside the
        newest meta graph."""
        run = self._run
        if run is None:
            return None
        graphs = run.blob_rows(_RUN_GRAPH_TAG, _EV_GRAPH)
        if graphs:
            return run.read_blob(graphs[-1])
        meta = run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH)
        if meta:
            tb = _tb("Graph()")
            mg = tb.meta_graph_pb2.MetaGraphDef.FromString(run.read_blob(meta[-1]))
            data: bytes = mg.graph_def.SerializeToString()
            return data
        return None

    def _has_meta_graph(self) -> bool:
        return self._run is not None and bool(self._run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH))

    def _has_graph(self) -> bool:
        run = self._run
        return self._has_meta_graph() or (run is not None and bool(run.blob_rows(_RUN_GRAPH_TAG, _EV_GRAPH)))

    def Graph(self) -> Any:
        """The run's ``GraphDef`` (TensorBoard's protos)."""
        data = self._graph_bytes()
        if data is None:
            raise ValueError("There is no graph in this EventAccumulator")
        return _tb("Graph()").graph_pb2.GraphDef.FromString(data)

    def MetaGraph(self) -> Any:
        run = self._run
        meta = run.blob_rows(_META_GRAPH_TAG, _EV_META_GRAPH) if run is not None else []
        if run is None or not meta:
            raise ValueError("There is no metagraph in this EventAccumulator")
        return _tb("MetaGraph()").meta_graph_pb2.MetaGraphDef.FromString(run.read_blob(meta[-1]))

    # ---- the replay, per bucket ---------------------------------------------------------------

    def _ops(self, tag_pos: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The purges that reach a tag whose records sit at ``tag_pos``: every restart purge,
        and the out-of-order purges of events that hold the tag."""
        r = self._require().replay
        if not len(r.tag_purge_pos):
            return r.purge_pos, r.purge_step
        mine = np.isin(r.tag_purge_pos, tag_pos)
        return (
            np.concatenate([r.purge_pos, r.tag_purge_pos[mine]]),
            np.concatenate([r.purge_step, r.tag_purge_step[mine]]),
        )

    def _tag_positions(self, tag: str) -> np.ndarray[Any, Any]:
        """Positions of every record holding ``tag``, whatever its field."""
        run = self._require()
        return run.record_positions(run.records(tag))


#: bucket (tag type) -> the reservoir attribute that holds it
_RESERVOIR_ATTR = {AUDIO: "audios", COMPRESSED_HISTOGRAMS: "compressed_histograms"}


class EventAccumulator(_Accumulator):
    """TensorBoard's legacy ``event_accumulator.EventAccumulator``, answered by tbscope.

    Same constructor, methods, public attributes (``scalars``, ``histograms``,
    ``compressed_histograms``, ``images``, ``audios``, ``tensors`` reservoirs with ``Keys()`` and
    ``Items(tag)``; ``summary_metadata``, ``most_recent_step``, ``file_version``, ...), event
    classes and bucketing: ``Scalars`` holds ``simple_value`` series (tensorboardX, PyTorch, TF1
    ``tf.summary.scalar``), ``Tensors`` every value written as a tensor (TF2 ``tf.summary.*``,
    text, hparams, pr curves, ...), ``Histograms`` / ``Images`` / ``Audio`` the legacy
    ``HistogramProto`` / ``Summary.Image`` / ``Summary.Audio``. The path is one run: a directory
    (its own event files, not subdirectories) or one file.

    Purges and size guidance work as in TensorBoard (same points kept); see ``docs/compat.md``
    for the few documented differences.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        size_guidance: Mapping[str, int] | None = None,
        compression_bps: Sequence[float] = NORMAL_HISTOGRAM_BPS,
        purge_orphaned_data: bool = True,
    ) -> None:
        super().__init__(path, purge_orphaned_data)
        guidance = size_guidance or DEFAULT_SIZE_GUIDANCE
        sizes = {k: guidance[k] if k in guidance else v for k, v in DEFAULT_SIZE_GUIDANCE.items()}
        self.scalars = Reservoir(self, SCALARS, sizes[SCALARS])
        self.summary_metadata: dict[str, Any] = {}
        self.histograms = Reservoir(self, HISTOGRAMS, sizes[HISTOGRAMS])
        self.compressed_histograms = Reservoir(
            self, COMPRESSED_HISTOGRAMS, sizes[COMPRESSED_HISTOGRAMS], always_keep_last=False
        )
        self.images = Reservoir(self, IMAGES, sizes[IMAGES])
        self.audios = Reservoir(self, AUDIO, sizes[AUDIO])
        self.tensors = Reservoir(self, TENSORS, sizes[TENSORS])
        self._plugin_to_tag_to_content: dict[str, dict[str, bytes]] = collections.defaultdict(dict)
        self._compression_bps = compression_bps
        self.accumulated_attrs = ("scalars", "histograms", "compressed_histograms", "images", "audios")

    def __repr__(self) -> str:
        return f"<tbscope.compat.EventAccumulator {os.fspath(self.path)!r}>"

    # bucket -> (table kind, Summary.Value field); tensors come from records
    _TABLE_BUCKETS = {
        SCALARS: ("scalars", _SIMPLE),
        HISTOGRAMS: ("histograms", _HISTO),
        COMPRESSED_HISTOGRAMS: ("histograms", _HISTO),
        IMAGES: ("images", _IMAGE),
        AUDIO: ("audio", _AUDIO),
    }

    def _reservoir(self, bucket: str) -> Reservoir:
        res: Reservoir = getattr(self, _RESERVOIR_ATTR.get(bucket, bucket))
        return res

    def _after_reload(self) -> None:
        run = self._require()
        for name in ("scalars", "histograms", "compressed_histograms", "images", "audios", "tensors"):
            getattr(self, name)._reset()
        # summary_metadata and plugin contents: the first metadata of each tag, in the order
        # the tags first come
        firsts = {}
        for tag in run.kinds:
            pos = self._tag_positions(tag)
            pos = pos[pos >= 0]
            if len(pos):
                firsts[tag] = int(pos.min())
        self.summary_metadata = {}
        self._plugin_to_tag_to_content = collections.defaultdict(dict)
        for tag in run.ordered(firsts):
            md = run.first_metadata(tag)
            if md is None or tag in (_RUN_GRAPH_TAG, _META_GRAPH_TAG) or _EV_RUN_METADATA in run.fields(tag):
                continue
            self.summary_metadata[tag] = (
                _tb("summary_metadata").summary_pb2.SummaryMetadata.FromString(md) if _tb_available() else md
            )
            name, content = _plugin_of(md)
            if name:
                self._plugin_to_tag_to_content[name][tag] = content

    def _items_of(self, bucket: str, tag: str) -> tuple[Any, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(rows or records, positions, steps) of every item TensorBoard adds to ``bucket``."""
        run = self._require()
        if bucket == TENSORS:
            rec, pos = run.tag_records(tag, frozenset((_TENSOR,)))
            return rec, pos, run.replay.steps[pos]
        kind, field = self._TABLE_BUCKETS[bucket]
        idx, pos = run.tag_rows(tag, kind, field)
        return idx, pos, run.table(kind).steps[idx]

    def _sampled(self, bucket: str, tag: str, exact_state: bool = False) -> _Sampled:
        key = (bucket, tag)
        got = None if exact_state else self._sampled_cache.get(key)
        if got is None:
            _, pos, steps = self._items_of(bucket, tag)
            # the legacy accumulator never purges tensors
            op_pos, op_step = self._ops(self._tag_positions(tag)) if bucket != TENSORS else (_EMPTY_IDX, _EMPTY_IDX)
            res = self._reservoir(bucket)
            got = _sample(res.size, res.always_keep_last, pos, steps, op_pos, op_step, exact_state=exact_state)
            if not exact_state:
                self._sampled_cache[key] = got
        return got

    def _keys(self, bucket: str) -> list[str]:
        keys = self._keys_cache.get(bucket)
        if keys is None:
            run = self._run
            firsts: dict[str, int] = {}
            for tag in run.kinds if run is not None else []:
                _, pos, _ = self._items_of(bucket, tag)
                if len(pos):
                    firsts[tag] = int(pos[0])
            keys = self._keys_cache[bucket] = run.ordered(firsts) if run is not None else []
        return list(keys)

    def _items(self, bucket: str, tag: str) -> list[Any]:
        got, _, _ = self._items_of(bucket, tag)
        kept = np.asarray(self._sampled(bucket, tag).kept, dtype=np.int64)
        if bucket == TENSORS:
            return self._tensor_events(tag, _Records(got.names, got.file_codes[kept], got.offsets[kept]))
        idx = got[kept]
        build = {
            SCALARS: self._scalar_events,
            HISTOGRAMS: self._histogram_events,
            COMPRESSED_HISTOGRAMS: self._compressed_events,
            IMAGES: self._image_events,
            AUDIO: self._audio_events,
        }[bucket]
        events: list[Any] = build(tag, idx)
        return events

    def _scalar_events(self, tag: str, idx: np.ndarray[Any, Any]) -> list[Any]:
        t = self._require().table("scalars")
        vals = t.column("value", idx)
        return list(map(ScalarEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), vals.tolist()))

    def _histogram_events(self, tag: str, idx: np.ndarray[Any, Any]) -> list[Any]:
        run = self._require()
        t = run.table("histograms")
        cols = [t.column(c, idx).tolist() for c in ("min", "max", "num", "sum", "sum_squares")]
        rights = t.column("right", idx)
        counts = t.column("count", idx)
        lasts = _last_limits(
            run.dir, [t.files[c] for c in t.file_codes[idx].tolist()], t.offsets[idx].tolist(), [tag] * len(idx)
        )
        out = []
        for i, (w, s) in enumerate(zip(t.walls[idx].tolist(), t.steps[idx].tolist())):
            limits, bucket = np.asarray(rights[i]).tolist(), np.asarray(counts[i]).tolist()
            if limits and lasts[i] is not None:
                limits[-1] = lasts[i]
            hv = HistogramValue(cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], limits, bucket)
            out.append(HistogramEvent(w, s, hv))
        return out

    def _compressed_events(self, tag: str, idx: np.ndarray[Any, Any]) -> list[Any]:
        bps = self._compression_bps
        return [
            CompressedHistogramEvent(e.wall_time, e.step, _compress_histogram(e.histogram_value, bps))
            for e in self._histogram_events(tag, idx)
        ]

    def _image_events(self, tag: str, idx: np.ndarray[Any, Any]) -> list[Any]:
        run = self._require()
        t = run.table("images")
        data = _blobs(run, t, idx)
        w, h = t.column("width", idx).tolist(), t.column("height", idx).tolist()
        return list(map(ImageEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), data, w, h))

    def _audio_events(self, tag: str, idx: np.ndarray[Any, Any]) -> list[Any]:
        run = self._require()
        t = run.table("audio")
        data = _blobs(run, t, idx)
        ct = [str(c) for c in t.column("content_type", idx).tolist()]
        sr = t.column("sample_rate", idx).tolist()
        lf = t.column("length_frames", idx).tolist()
        return list(map(AudioEvent, t.walls[idx].tolist(), t.steps[idx].tolist(), data, ct, sr, lf))

    def _tensor_events(self, tag: str, rec: _Records) -> list[Any]:
        run = self._require()
        tb = _tb("Tensors()")
        parse = tb.event_pb2.Event.FromString
        out = []
        with _Files() as files:
            for i in range(len(rec)):
                ev = parse(files.record(run.path(rec.file(i)), int(rec.offsets[i])))
                for v in ev.summary.value:
                    if (v.tag or v.node_name) == tag and v.HasField("tensor"):
                        out.append(TensorEvent(ev.wall_time, ev.step, v.tensor))
        return out

    def Tags(self) -> dict[str, Any]:
        """``{tag type: [tags]}``, plus ``graph``/``meta_graph`` flags, like TensorBoard's."""
        run = self._run
        run_metadata: list[str] = []
        if run is not None:
            firsts = {}
            for tag in run.kinds:
                if _EV_RUN_METADATA in run.fields(tag):
                    rows = run.blob_rows(tag, _EV_RUN_METADATA)
                    if rows:
                        _, pos = run.tag_rows(tag, "blobs", _EV_RUN_METADATA)
                        firsts[tag] = int(pos[0])
            run_metadata = run.ordered(firsts)
        return {
            IMAGES: self.images.Keys(),
            AUDIO: self.audios.Keys(),
            HISTOGRAMS: self.histograms.Keys(),
            SCALARS: self.scalars.Keys(),
            COMPRESSED_HISTOGRAMS: self.compressed_histograms.Keys(),
            TENSORS: self.tensors.Keys(),
            GRAPH: self._has_graph(),
            META_GRAPH: self._has_meta_graph(),
            RUN_METADATA: run_metadata,
        }

    def Scalars(self, tag: str) -> list[ScalarEvent]:
        """The ``simple_value`` points of ``tag`` TensorBoard keeps, as ``ScalarEvent``s."""
        return self.scalars.Items(tag)

    def Histograms(self, tag: str) -> list[HistogramEvent]:
        """The legacy ``HistogramProto``s of ``tag`` TensorBoard keeps."""
        return self.histograms.Items(tag)

    def CompressedHistograms(self, tag: str) -> list[CompressedHistogramEvent]:
        return self.compressed_histograms.Items(tag)

    def Images(self, tag: str) -> list[ImageEvent]:
        """The legacy ``Summary.Image``s of ``tag`` TensorBoard keeps, bytes read now."""
        return self.images.Items(tag)

    def Audio(self, tag: str) -> list[AudioEvent]:
        """The legacy ``Summary.Audio``s of ``tag`` TensorBoard keeps, bytes read now."""
        return self.audios.Items(tag)

    def Tensors(self, tag: str) -> list[TensorEvent]:
        """The tensor values of ``tag`` TensorBoard keeps, ``TensorProto``s exactly as written."""
        return self.tensors.Items(tag)

    def RunMetadata(self, tag: str) -> Any:
        run = self._run
        rows = run.blob_rows(tag, _EV_RUN_METADATA) if run is not None else []
        if run is None or not rows:
            raise ValueError("There is no run metadata with this tag name")
        return _tb("RunMetadata()").config_pb2.RunMetadata.FromString(run.read_blob(rows[-1]))

    def SummaryMetadata(self, tag: str) -> Any:
        """The first ``SummaryMetadata`` written for ``tag``, as on disk (no migration)."""
        return self.summary_metadata[tag]

    def _plugin_contents(self) -> dict[str, dict[str, bytes]]:
        return {k: dict(v) for k, v in self._plugin_to_tag_to_content.items()}

    def PluginTagToContent(self, plugin_name: str) -> dict[str, bytes]:
        if plugin_name not in self._plugin_to_tag_to_content:
            raise KeyError(f"Plugin {plugin_name!r} could not be found.")
        return self._plugin_to_tag_to_content[plugin_name]
