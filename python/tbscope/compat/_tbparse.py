"""tbparse's ``SummaryReader`` (0.0.9), answered by tbscope."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from tbscope import _mirror
from tbscope._frames import to_ndarray
from tbscope._reader import scan
from tbscope.compat import _tbparse_helpers as _helpers
from tbscope.compat._accumulator import EventAccumulator
from tbscope.compat._events import (
    AUDIO,
    GRAPH,
    HISTOGRAMS,
    IMAGES,
    META_GRAPH,
    RUN_METADATA,
    SCALARS,
    STORE_EVERYTHING_SIZE_GUIDANCE,
    TENSORS,
    _tb,
)
from tbscope.compat._loader import _Loader, _Replay, _replay
from tbscope.compat._reservoir import _sample
from tbscope.compat._run import _KIND_METHOD, _blob_locations, _read_blobs, _Table
from tbscope.compat._tbparse_frames import (
    _HIST_FIELDS,
    _SSI_TAG,
    _TEXT_SUFFIX,
    _TYPE_ORDER,
    ALL_EVENT_TYPES,
    ALL_EXTRA_COLUMNS,
    HPARAMS,
    TEXT,
    _concat_long,
    _decode_image,
    _decode_wav,
    _empty_long,
    _from_table,
    _hparams_items,
    _Long,
    _merge,
    _objects,
    _pairs,
    _ranks,
    _sort_rows,
    _str_column,
)
from tbscope.compat._wire import (
    _AUDIO,
    _DT_BOOL,
    _EMPTY_IDX,
    _HISTO,
    _IMAGE,
    _INT_DTYPES,
    _SIMPLE,
    _TENSOR,
    _Files,
    _last_limits,
    _Probe,
    _probe_event,
)

if TYPE_CHECKING:
    import pandas as pd


class _Tree:
    """Everything under one tbparse ``log_path``, scanned once; per-type long tables on demand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.logdir = scan(path, provenance=True)
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self._tables: dict[str, _Table] = {}
        self._probes: dict[tuple[str, str], _Probe] = {}
        self._long: dict[str, _Long] = {}
        self._replays: dict[str, _Replay] = {}
        self._unpurged: dict[str, _Long] = {}

    def table(self, kind: str) -> _Table:
        t = self._tables.get(kind)
        if t is None:
            t = self._tables[kind] = _Table(getattr(self.logdir, _KIND_METHOD[kind])().to_arrow())
        return t

    def row_probes(self, t: _Table) -> tuple[list[_Probe], np.ndarray[Any, Any]]:
        """The distinct probes of ``t``'s (tag, file) pairs and, per row, the index of its pair's.

        A pair's probe reads its first record. Pairs are found in O(rows) with a hash
        factorisation: codes come out in order of first appearance, so a pair's first row is
        where the running maximum of the codes first reaches it.
        """
        import pandas as pd

        if not t.n:
            return [], _EMPTY_IDX
        key = t.tag_codes * (len(t.files) + 1) + t.file_codes
        codes, _ = pd.factorize(key)
        running = np.maximum.accumulate(codes)
        first = np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))
        probes = []
        with _Files() as files:
            for i in first.tolist():
                rel, tag = t.files[t.file_codes[i]], t.tags[t.tag_codes[i]]
                p = self._probes.get((rel, tag))
                if p is None:
                    data = files.record(os.path.join(self.dir, rel), int(t.offsets[i]))
                    p = self._probes[(rel, tag)] = _probe_event(data, tag)
                probes.append(p)
        return probes, codes.astype(np.int64)

    def row_fields(self, t: _Table) -> np.ndarray[Any, Any]:
        probes, which = self.row_probes(t)
        return np.array([p.field for p in probes], dtype=np.int64)[which] if probes else _EMPTY_IDX

    def legacy_rows(self, t: _Table, field: int, event_type: str) -> np.ndarray[Any, Any]:
        """Rows of ``t`` held as ``field`` (a legacy ``Summary.Value`` kind) that tbparse keeps.

        tbparse reads each file with its own legacy ``EventAccumulator`` (``purge_orphaned_data``
        on, nothing sampled), which drops values a restart expired: at every ``SessionLog.START``
        of a file_version 2 file, earlier values with a step at or past the START's; in other
        files, a value's earlier values of the same tag with a step at or past its own when its
        step goes back. Files where neither happens (most) cost one look at their record heads.
        A tag whose values were all dropped is still one of tbparse's tags (its reservoir key
        stays), so the rows before purging are kept for ``tags`` (``tag_rows``).
        """
        idx = np.flatnonzero(self.row_fields(t) == field)
        if not len(idx):
            return idx
        keep = np.ones(len(idx), dtype=bool)
        for code, rel in enumerate(t.files):
            mine = np.flatnonzero(t.file_codes[idx] == code)
            if not len(mine):
                continue
            path = os.path.join(self.dir, rel)
            replay = self._replays.get(rel)
            if replay is None:
                loader = _Loader(path)
                loader.advance()
                replay = self._replays[rel] = _replay(loader, purge=True, plugin=False)
            if not len(replay.purge_pos) and not len(replay.tag_purge_pos):
                continue
            rows = idx[mine]
            pos = replay.positions(path, t.offsets[rows])
            for tag in np.unique(t.tag_codes[rows]).tolist():
                sel = np.flatnonzero(t.tag_codes[rows] == tag)
                tag_pos = pos[sel]
                mine_ops = np.isin(replay.tag_purge_pos, tag_pos)
                ops_pos = np.concatenate([replay.purge_pos, replay.tag_purge_pos[mine_ops]])
                ops_step = np.concatenate([replay.purge_step, replay.tag_purge_step[mine_ops]])
                kept = np.zeros(len(sel), dtype=bool)
                kept[_sample(0, True, tag_pos, t.steps[rows[sel]], ops_pos, ops_step).kept] = True
                keep[mine[sel]] = kept
        if not keep.all():
            self._unpurged[event_type] = _from_table(t, idx, {})
        out: np.ndarray[Any, Any] = idx[keep]
        return out

    def tag_rows(self, event_type: str, extra: frozenset[str]) -> _Long:
        """The rows that decide ``event_type``'s tags and their order: those before purging."""
        long = self.long(event_type, extra)
        return self._unpurged.get(event_type, long)

    def long(self, event_type: str, extra: frozenset[str]) -> _Long:
        key = event_type + ("+" + ",".join(sorted(extra)) if event_type in (HISTOGRAMS, IMAGES, AUDIO) else "")
        got = self._long.get(key)
        if got is None:
            got = self._long[key] = getattr(self, "_" + event_type)(extra)
        return got

    def _scalars(self, extra: frozenset[str]) -> _Long:
        t = self.table("scalars")
        idx = self.legacy_rows(t, _SIMPLE, SCALARS) if t.n else _EMPTY_IDX
        return _from_table(t, idx, {"value": t.column("value")[idx] if t.n else np.zeros(0)})

    def _tensors(self, extra: frozenset[str]) -> _Long:
        parts = []
        # TF2-style scalars: rank-0 tensors that tbscope keeps as float64; back to their dtype.
        t = self.table("scalars")
        probes, which = self.row_probes(t)
        m = np.array([p.field == _TENSOR for p in probes], dtype=bool)[which] if probes else np.zeros(0, dtype=bool)
        if m.any():
            vals = t.column("value")[m]
            dts = np.array([p.dtype for p in probes], dtype=np.int64)[which[m]]
            if np.isin(dts, list(_INT_DTYPES | {_DT_BOOL})).any():
                obj = np.empty(len(vals), dtype=object)
                obj[:] = vals.tolist()
                isint = np.isin(dts, list(_INT_DTYPES))
                if isint.any():
                    obj[isint] = [int(v) for v in vals[isint].tolist()]
                isbool = dts == _DT_BOOL
                if isbool.any():
                    obj[isbool] = [bool(v) for v in vals[isbool].tolist()]
                value: Any = obj
            else:
                value = vals
            parts.append(_from_table(t, m, {"value": value}))
        # Tensors proper, decoded from tbscope's columns.
        t = self.table("tensors")
        if t.n:
            m = self.row_fields(t) == _TENSOR
            idx = np.flatnonzero(m)
            cols = [t.column(c, idx).tolist() for c in ("dtype", "shape", "content", "strings")]
            out = np.empty(len(idx), dtype=object)
            for i, (dt, shape, content, strings) in enumerate(zip(*cols)):
                arr = to_ndarray(str(dt), tuple(shape), content, strings)
                out[i] = arr.item() if arr.shape == () else arr
            parts.append(_from_table(t, idx, {"value": out}))
        # Tensor-form histograms, images, audio and blob sequences: read from the records.
        for kind in ("histograms", "images", "audio", "blobs"):
            parts.append(self._reparsed(kind))
        return _concat_long(parts) if any(len(p) for p in parts) else _empty_long(["value"])

    def _reparsed(self, kind: str) -> _Long:
        t = self.table(kind)
        if not t.n:
            return _empty_long(["value"])
        fields = self.row_fields(t)
        idx = np.flatnonzero(fields == _TENSOR)
        if len(idx):
            fc, tc, off = t.file_codes[idx], t.tag_codes[idx], t.offsets[idx]
            first = np.ones(len(idx), dtype=bool)
            first[1:] = (fc[1:] != fc[:-1]) | (off[1:] != off[:-1]) | (tc[1:] != tc[:-1])
            idx = idx[first]
        if not len(idx):
            return _empty_long(["value"])
        tb = _tb(f"SummaryReader.tensors (tensor-form {kind})")
        parse = tb.event_pb2.Event.FromString
        rows: list[int] = []
        values: list[Any] = []
        with _Files() as files:
            for i in idx.tolist():
                tag = t.tags[t.tag_codes[i]]
                ev = parse(files.record(os.path.join(self.dir, t.files[t.file_codes[i]]), int(t.offsets[i])))
                for v in ev.summary.value:
                    if (v.tag or v.node_name) == tag and v.HasField("tensor"):
                        arr = tb.tensor_util.make_ndarray(v.tensor)
                        rows.append(i)
                        values.append(arr.item() if arr.shape == () else arr)
        return _from_table(t, np.asarray(rows, dtype=np.int64), {"value": _objects(values)})

    def _histograms(self, extra: frozenset[str]) -> _Long:
        t = self.table("histograms")
        if not t.n:
            return _empty_long(_HIST_FIELDS)
        idx = self.legacy_rows(t, _HISTO, HISTOGRAMS)
        fields: dict[str, Any] = {"counts": _objects([np.asarray(a, dtype=np.float64) for a in t.column("count", idx)])}
        # tbscope's table ends the last bucket at max; tbparse lists the limit as written
        lasts = _last_limits(
            self.dir,
            [t.files[c] for c in t.file_codes[idx].tolist()],
            t.offsets[idx].tolist(),
            [t.tags[c] for c in t.tag_codes[idx].tolist()],
        )
        limits = [np.array(a, dtype=np.float64) for a in t.column("right", idx)]
        for lim, last in zip(limits, lasts):
            if len(lim) and last is not None:
                lim[-1] = last
        fields["limits"] = _objects(limits)
        for name in _HIST_FIELDS[2:]:
            if name in extra:
                fields[name] = t.column(name, idx).astype(np.float64)
        return _from_table(t, idx, fields)

    def _images(self, extra: frozenset[str]) -> _Long:
        t = self.table("images")
        if not t.n:
            return _empty_long(["value", "height", "width"])
        idx = self.legacy_rows(t, _IMAGE, IMAGES)
        data = _read_blobs(self.dir, _blob_locations(t, idx))
        fields: dict[str, Any] = {"value": _objects([_decode_image(d) for d in data])}
        for name in ("height", "width"):
            if name in extra:
                fields[name] = t.column(name, idx).astype(np.int64)
        return _from_table(t, idx, fields)

    def _audio(self, extra: frozenset[str]) -> _Long:
        t = self.table("audio")
        if not t.n:
            return _empty_long(["value", "content_type", "length_frames", "sample_rate"])
        idx = self.legacy_rows(t, _AUDIO, AUDIO)
        data = _read_blobs(self.dir, _blob_locations(t, idx))
        fields: dict[str, Any] = {"value": _objects([_decode_wav(d) for d in data])}
        if "content_type" in extra:
            fields["content_type"] = _objects([str(c) for c in t.column("content_type", idx).tolist()])
        if "length_frames" in extra:
            fields["length_frames"] = t.column("length_frames", idx).astype(np.int64)
        if "sample_rate" in extra:
            fields["sample_rate"] = t.column("sample_rate", idx).astype(np.float64)
        return _from_table(t, idx, fields)

    def _text(self, extra: frozenset[str]) -> _Long:
        t = self.table("text")
        if not t.n:
            return _empty_long(["value"])
        fc, tc, off = t.file_codes, t.tag_codes, t.offsets
        first = np.ones(t.n, dtype=bool)
        first[1:] = (fc[1:] != fc[:-1]) | (off[1:] != off[:-1]) | (tc[1:] != tc[:-1])
        starts = np.flatnonzero(first)
        ends = np.append(starts[1:], t.n)
        texts = t.column("text")
        out = np.empty(len(starts), dtype=object)
        single = (ends - starts) == 1
        out[single] = texts[starts[single]]
        for j in np.flatnonzero(~single).tolist():
            out[j] = np.array(texts[starts[j] : ends[j]].tolist(), dtype=object)
        long = _from_table(t, starts, {"value": out})
        long.labels = [tag[: -len(_TEXT_SUFFIX)] if tag.endswith(_TEXT_SUFFIX) else tag for tag in long.tags]
        return long

    def _hparams(self, extra: frozenset[str]) -> _Long:
        t = self.table("hparams")
        if not t.n:
            return _empty_long(["value"], with_step=False)
        ssi = [i for i, c in enumerate(t.tag_codes.tolist()) if t.tags[c] == _SSI_TAG]
        seen: set[int] = set()
        files: list[int] = []
        names: list[str] = []
        values: list[Any] = []
        order: list[int] = []
        contents = t.column("plugin_content", np.asarray(ssi, dtype=np.int64)).tolist() if ssi else []
        for i, content in zip(ssi, contents):
            fcode = int(t.file_codes[i])
            if fcode in seen:
                continue  # tbparse reads the first session start info of each file
            seen.add(fcode)
            for k, (name, value) in enumerate(_hparams_items(content or b"")):
                files.append(fcode)
                names.append(name)
                values.append(value)
                order.append(k)
        tags = sorted(set(names))
        tpos = {n: i for i, n in enumerate(tags)}
        vals = _objects(values)
        n = len(names)
        return _Long(
            t.files,
            np.asarray(files, dtype=np.int64),
            tags,
            np.asarray([tpos[x] for x in names], dtype=np.int64),
            np.asarray(order, dtype=np.int64),
            np.arange(n, dtype=np.int64),
            None,
            np.full(n, np.nan),
            {"value": vals},
        )


class SummaryReader:
    """tbparse's ``SummaryReader`` (0.0.9), answered by tbscope.

    Same constructor, properties and DataFrames: ``scalars``, ``tensors``, ``histograms``,
    ``images``, ``audio``, ``hparams``, ``text``, ``tags``, ``get_tags()``, ``get_events()``,
    ``children``; long format (``step, tag, value`` + ``extra_columns``) or ``pivot=True`` wide
    format, with tbparse's column names, order, dtypes, row order and merging of several values
    per step into lists. Like tbparse, ``scalars`` holds ``simple_value`` series only; scalars
    written as tensors (TF2, ``tf.summary``, TensorBoard's writers) are in ``tensors``.

    The whole tree is scanned once, natively, instead of once per file in Python; every event type
    is built with vectorised pandas/numpy from tbscope's tables, so scalars stay fast at millions
    of rows.

    Differences from tbparse, on purpose:

    * images and audio need no TensorFlow: images are decoded with Pillow, WAV with the standard
      library. ``event_types`` therefore defaults to all seven types. JPEG decoders may differ
      from TensorFlow's in the last bit of some pixels.
    * legacy histograms' last ``limits`` entry is ``max`` (see the module docstring).
    * multi-element text tensors, on which tbparse raises, give a 1-D array of their strings;
      zero-element ones (tbparse raises) are left out. bfloat16 and other dtypes tbparse cannot
      decode are decoded (bfloat16 as float32).
    * tensors in typed integer/bool fields (``int_val``, ``bool_val``, ...), on which tbparse's
      decoder raises, are decoded. TF2-style scalars come back as Python scalars of their dtype
      (float, int, bool) from tbscope's float64 column, so 64-bit integers beyond 2**53 are
      rounded (``EventAccumulator.Tensors`` keeps them exact).
    * no restart purging: tbparse's per-file accumulator drops legacy values that precede a
      ``SessionLog.START`` with a higher step *within one file*; tbscope keeps them.
    * wall times that are +-inf in a file are NaN.
    * in ``pivot=True`` output, several values of one tag at one step are listed in file and
      record order; tbparse's order there comes from an unstable sort.
    * hparams names of one file are listed in TensorBoard's protobuf map order, as tbparse lists
      them (that order is not stable across processes, for tbparse either); without TensorBoard
      installed, in the order they were written.
    """

    def __init__(
        self,
        log_path: str | os.PathLike[str],
        *,
        pivot: bool = False,
        extra_columns: set[str] | None = None,
        event_types: set[str] | None = None,
    ) -> None:
        self._log_path = _mirror.local(os.fspath(log_path))[0]  # a URL: its local mirror
        extra = (extra_columns or set()).copy()
        if not isinstance(extra, set):
            raise ValueError(f"`columns` should be a {set} instead of {type(extra)}")
        diff = extra - ALL_EXTRA_COLUMNS
        if diff:
            raise KeyError(f"Invalid columns entries: {diff}")
        types = (event_types or set(ALL_EVENT_TYPES)).copy()
        if not isinstance(types, set):
            raise ValueError(f"`event_types` should be a {set} instead of {type(types)}")
        diff = types - ALL_EVENT_TYPES
        if diff:
            raise KeyError(f"Invalid event types: {diff}")
        self._pivot = pivot
        self._extra_columns = frozenset(extra)
        self._event_types = frozenset(types)
        if not os.path.exists(self._log_path):
            raise ValueError(f"File or directory not found: {self._log_path}")
        self._tree: _Tree | None = None
        self._children: dict[str, SummaryReader] | None = None

    def __repr__(self) -> str:
        return f"SummaryReader(log_path='{self.log_path}')"

    def __getitem__(self, child_idx: str) -> SummaryReader:
        return self.children[child_idx]

    @property
    def log_path(self) -> str:
        return self._log_path

    def _data(self) -> _Tree:
        if self._tree is None:
            self._tree = _Tree(self._log_path)
        return self._tree

    @property
    def children(self) -> dict[str, SummaryReader]:
        """One reader per directory entry (files and directories), as tbparse builds them."""
        if self._children is None:
            self._children = {}
            if os.path.isdir(self._log_path):
                for name in sorted(os.listdir(self._log_path)):
                    self._children[name] = SummaryReader(
                        os.path.join(self._log_path, name),
                        pivot=self._pivot,
                        extra_columns=set(self._extra_columns),
                        event_types=set(self._event_types),
                    )
        return dict(self._children)

    # ---- tags ---------------------------------------------------------------------------------

    @property
    def tags(self) -> dict[str, list[str]]:
        """``{event type: [tags]}`` in tbparse's order: files depth-first, first appearance."""
        out = self.get_tags()
        assert isinstance(out, dict)
        return out

    def get_tags(self, event_type: str | None = None) -> list[str] | dict[str, list[str]]:
        if event_type is not None and event_type not in ALL_EVENT_TYPES:
            raise ValueError(f"Unknown event_type: {event_type}")
        if event_type is not None:
            return self._tags_of(event_type)
        return {et: self._tags_of(et) for et in _TYPE_ORDER}

    def _tags_of(self, event_type: str) -> list[str]:
        if event_type not in self._event_types:
            return []
        long = self._data().tag_rows(event_type, self._extra_columns)
        if not len(long):
            return []
        _, firsts, pair_order = _pairs(long)
        seen: dict[str, None] = {}
        for i in firsts[pair_order].tolist():
            seen.setdefault(long.tags[long.tag_codes[i]], None)
        return list(seen)

    # ---- events -------------------------------------------------------------------------------

    def get_events(self, event_type: str) -> pd.DataFrame:
        """All ``event_type`` events under ``log_path`` as a DataFrame (tbparse's layout)."""
        import pandas as pd

        if event_type not in ALL_EVENT_TYPES:
            raise ValueError(f"Unknown event_type: {event_type}")
        if event_type not in self._event_types:
            raise ValueError(f"event_type is ignored by user: {event_type}")
        long = self._data().long(event_type, self._extra_columns)
        if not len(long):
            return pd.DataFrame()
        if event_type == HISTOGRAMS:
            fields = [f for f in _HIST_FIELDS if f in ("counts", "limits") or f in self._extra_columns]
            suffixes = fields
        elif event_type == IMAGES:
            fields = ["value"] + [f for f in ("height", "width") if f in self._extra_columns]
            suffixes = [""] + fields[1:]
        elif event_type == AUDIO:
            fields = ["value"] + [
                f for f in ("content_type", "length_frames", "sample_rate") if f in self._extra_columns
            ]
            suffixes = [""] + fields[1:]
        else:
            fields, suffixes = ["value"], [""]
        if self._pivot:
            return self._wide(long, fields, suffixes, event_type != HPARAMS)
        return self._longform(long, fields, event_type != HPARAMS)

    def _file_columns(self, long: _Long) -> tuple[list[str], list[str]]:
        dirs = [os.path.dirname(f) for f in long.files]
        names = [os.path.basename(f) for f in long.files]
        return dirs, names

    def _longform(self, long: _Long, fields: list[str], wall: bool) -> pd.DataFrame:
        """tbparse's long format: sorted by [dir_name, file_name,] tag, step; ties in file
        (depth-first) and record order, as its stable multi-column sort leaves them."""
        import pandas as pd

        extra = self._extra_columns
        dirs, names = self._file_columns(long)
        keys: list[np.ndarray[Any, Any]] = []
        if "dir_name" in extra:
            keys.append(_ranks(dirs)[long.file_codes])
        if "file_name" in extra:
            keys.append(_ranks(names)[long.file_codes])
        keys.append(_ranks(long.shown())[long.tag_codes])
        if long.step is not None:
            keys.append(long.step)
        order = _sort_rows(long, keys)
        cols: dict[str, Any] = {}
        if long.step is not None:
            cols["step"] = long.step[order]
        cols["tag"] = _str_column(long.shown(), long.tag_codes[order])
        for f in fields:
            v = long.fields[f][order]
            cols[f] = v.tolist() if v.dtype == object else v
        if wall and "wall_time" in extra:
            cols["wall_time"] = long.wall[order]
        if "dir_name" in extra:
            cols["dir_name"] = _str_column(dirs, long.file_codes[order])
        if "file_name" in extra:
            cols["file_name"] = _str_column(names, long.file_codes[order])
        return pd.DataFrame(cols)

    def _wide(self, long: _Long, fields: list[str], suffixes: list[str], wall: bool) -> pd.DataFrame:
        """tbparse's wide format: one row per [dir_name, file_name,] step, one column per tag
        (or tag/field), several values of a cell merged into a list."""
        import pandas as pd

        extra = self._extra_columns
        dirs, names = self._file_columns(long)
        # tbparse concatenates files depth-first, each file tag by tag (first appearance), then
        # sorts by step: inside a step, rows keep (file, tag, record) order.
        pair_codes, _, pair_order = _pairs(long)
        pair_rank = np.empty(len(pair_order), dtype=np.int64)
        pair_rank[pair_order] = np.arange(len(pair_order))
        group_keys: list[np.ndarray[Any, Any]] = []
        if "dir_name" in extra:
            group_keys.append(_ranks(dirs)[long.file_codes])
        if "file_name" in extra:
            group_keys.append(_ranks(names)[long.file_codes])
        if long.step is not None:
            group_keys.append(long.step)
        order = _sort_rows(long, group_keys + [pair_rank[pair_codes]])
        n = len(order)
        if group_keys:
            change = np.zeros(n, dtype=bool)
            change[:1] = True
            for k in group_keys:
                ks = k[order]
                change[1:] |= ks[1:] != ks[:-1]
            g = np.cumsum(change) - 1
        else:
            change = np.zeros(n, dtype=bool)
            change[:1] = True
            g = np.zeros(n, dtype=np.int64)
        n_groups = int(g[-1]) + 1 if n else 0
        heads = order[change]
        cols: dict[str, Any] = {}
        if long.step is not None:
            cols["step"] = long.step[heads]
        # rows of each tag, still in group order (one stable sort, not a scan per tag)
        tag_sorted = long.tag_codes[order]
        by_tag = np.argsort(tag_sorted, kind="stable")
        bounds = np.flatnonzero(np.concatenate([[True], tag_sorted[by_tag][1:] != tag_sorted[by_tag][:-1], [True]]))
        sorted_fields = {f: long.fields[f][order] for f in fields}
        middle: dict[str, Any] = {}
        shown = long.shown()
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            sel = by_tag[a:b]
            tag = shown[tag_sorted[sel[0]]]
            for f, suffix in zip(fields, suffixes):
                middle[f"{tag}/{suffix}" if suffix else tag] = _merge(g[sel], sorted_fields[f][sel], n_groups)
        for name in sorted(middle):
            cols[name] = middle[name]
        if wall and "wall_time" in extra:
            cols["wall_time"] = _merge(g, long.wall[order], n_groups)
        if "dir_name" in extra:
            cols["dir_name"] = _str_column(dirs, long.file_codes[heads])
        if "file_name" in extra:
            cols["file_name"] = _str_column(names, long.file_codes[heads])
        return pd.DataFrame(cols)

    @property
    def scalars(self) -> pd.DataFrame:
        return self.get_events(SCALARS)

    @property
    def tensors(self) -> pd.DataFrame:
        return self.get_events(TENSORS)

    @property
    def histograms(self) -> pd.DataFrame:
        return self.get_events(HISTOGRAMS)

    @property
    def images(self) -> pd.DataFrame:
        return self.get_events(IMAGES)

    @property
    def audio(self) -> pd.DataFrame:
        return self.get_events(AUDIO)

    @property
    def hparams(self) -> pd.DataFrame:
        return self.get_events(HPARAMS)

    @property
    def text(self) -> pd.DataFrame:
        return self.get_events(TEXT)

    # ---- raw access (event files only), through the compat accumulator ------------------------

    def _raw_acc(self) -> EventAccumulator:
        if os.path.isdir(self._log_path):
            raise ValueError(f"Not an event file: {self._log_path}")
        acc = EventAccumulator(self._log_path, STORE_EVERYTHING_SIZE_GUIDANCE)
        acc.Reload()
        return acc

    @property
    def raw_tags(self) -> dict[str, Any]:
        out = self.get_raw_tags()
        assert isinstance(out, dict)
        return out

    def get_raw_tags(self, event_type: str | None = None, event_acc: EventAccumulator | None = None) -> Any:
        """The underlying accumulator's tags (event files only), plus ``hparams`` and ``text``."""
        valid = {None, IMAGES, AUDIO, HISTOGRAMS, SCALARS, TENSORS, GRAPH, META_GRAPH, RUN_METADATA, HPARAMS, TEXT}
        if event_type not in valid:
            raise ValueError(f"Unknown event_type: {event_type}")
        acc = event_acc if event_acc is not None else self._raw_acc()
        tags = acc.Tags()
        contents = acc._plugin_contents()
        for plugin in (HPARAMS, TEXT):
            tags[plugin] = list(contents.get(plugin, {}))
        return tags if event_type is None else tags[event_type]

    @property
    def raw_events(self) -> dict[str, Any]:
        out = self.get_raw_events()
        assert isinstance(out, dict)
        return out

    def get_raw_events(
        self, event_type: str | None = None, tag: str | None = None, event_acc: EventAccumulator | None = None
    ) -> Any:
        """The accumulator's events (event files only): ``{type: {tag: [events]}}``, one type's
        ``{tag: [events]}``, or one tag's list, as tbparse returns them."""
        acc = event_acc if event_acc is not None else self._raw_acc()
        if event_type is None:
            if tag is not None:
                raise ValueError("tag shouldn't be set if event_type is None")
            return {et: self.get_raw_events(et, None, acc) for et in _TYPE_ORDER}
        getters: dict[str, Any] = {
            SCALARS: acc.Scalars,
            TENSORS: acc.Tensors,
            HISTOGRAMS: acc.Histograms,
            IMAGES: acc.Images,
            AUDIO: acc.Audio,
            HPARAMS: lambda t: acc.PluginTagToContent(HPARAMS)[t],
            TEXT: acc.Tensors,
        }
        get = getters[event_type]
        if tag is not None:
            return get(tag)
        return {t: get(t) for t in self.get_raw_tags(event_type, acc)}

    # ---- tbparse's static helpers (tbscope's own: neither tbparse nor TensorFlow needed) -----

    tensor_to_histogram = staticmethod(_helpers.tensor_to_histogram)
    buckets_to_histogram_dict = staticmethod(_helpers.buckets_to_histogram_dict)
    tensor_to_image = staticmethod(_helpers.tensor_to_image)
    tensor_to_audio = staticmethod(_helpers.tensor_to_audio)
    histogram_to_pdf = staticmethod(_helpers.histogram_to_pdf)
    histogram_to_cdf = staticmethod(_helpers.histogram_to_cdf)
    histogram_to_bins = staticmethod(_helpers.histogram_to_bins)
