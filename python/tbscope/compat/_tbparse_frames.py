"""The long tables behind tbparse's DataFrames: rows of several files merged in tbparse's
order, and the decoders for what tbparse decodes with TensorFlow."""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tbscope._pb import walk as _walk
from tbscope.compat._events import AUDIO, HISTOGRAMS, IMAGES, SCALARS, TENSORS
from tbscope.compat._run import _Table
from tbscope.compat._wire import _EMPTY_IDX

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------------------------
# tbparse
# --------------------------------------------------------------------------------------------

HPARAMS = "hparams"
TEXT = "text"
ALL_EVENT_TYPES = frozenset((SCALARS, TENSORS, HISTOGRAMS, IMAGES, AUDIO, HPARAMS, TEXT))
ALL_EXTRA_COLUMNS = frozenset(
    (
        "dir_name",
        "file_name",
        "wall_time",
        "min",
        "max",
        "num",
        "sum",
        "sum_squares",
        "width",
        "height",
        "content_type",
        "length_frames",
        "sample_rate",
    )
)
_TYPE_ORDER = (IMAGES, AUDIO, HISTOGRAMS, SCALARS, TENSORS, HPARAMS, TEXT)
_SSI_TAG = "_hparams_/session_start_info"
_TEXT_SUFFIX = "/text_summary"
_HIST_FIELDS = ("counts", "limits", "max", "min", "num", "sum", "sum_squares")


def _split_key(rel: str) -> tuple[str, ...]:
    """Sort key giving tbparse's file order: a depth-first walk over ``sorted(os.listdir())``."""
    return tuple(rel.split("/"))


def _ranks(strings: Sequence[str], key: Any = None) -> np.ndarray[Any, Any]:
    """Rank of each string in sorted order (equal strings share a rank)."""
    uniq = sorted(set(strings), key=key)
    pos = {s: i for i, s in enumerate(uniq)}
    return np.array([pos[s] for s in strings], dtype=np.int64)


@dataclasses.dataclass
class _Long:
    """Rows of one tbparse event type before sorting: per-row arrays plus output fields.

    ``files``/``tags`` are the distinct strings, ``file_codes``/``tag_codes`` index them;
    ``offset``/``row`` give record order within a file.
    """

    files: list[str]
    file_codes: np.ndarray[Any, Any]
    tags: list[str]
    tag_codes: np.ndarray[Any, Any]
    offset: np.ndarray[Any, Any]
    row: np.ndarray[Any, Any]
    step: np.ndarray[Any, Any] | None
    wall: np.ndarray[Any, Any]
    fields: dict[str, Any]
    #: names shown in DataFrames when they differ from ``tags`` (tbparse renames text tags in
    #: its DataFrames but not in ``tags``)
    labels: list[str] | None = None
    #: rows of each file are contiguous and in record order (true for one table's rows)
    ordered: bool = True

    def __len__(self) -> int:
        return len(self.offset)

    def shown(self) -> list[str]:
        return self.tags if self.labels is None else self.labels


def _concat_long(parts: list[_Long]) -> _Long:
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
        return parts[0]
    files = sorted({f for p in parts for f in p.files})
    tags = sorted({t for p in parts for t in p.tags})
    fpos = {f: i for i, f in enumerate(files)}
    tpos = {t: i for i, t in enumerate(tags)}

    def remap(codes: np.ndarray[Any, Any], names: list[str], pos: dict[str, int]) -> np.ndarray[Any, Any]:
        table = np.array([pos[n] for n in names], dtype=np.int64)
        return table[codes] if len(codes) else codes.astype(np.int64)

    names = list(parts[0].fields) if parts else []
    fields: dict[str, Any] = {}
    for n in names:
        vals = [p.fields[n] for p in parts]
        if all(isinstance(v, np.ndarray) and v.dtype != object for v in vals) and len({v.dtype for v in vals}) == 1:
            fields[n] = np.concatenate(vals)
        else:
            # Python scalars, as tbparse's per-row lists hold them
            objs = [
                v if isinstance(v, np.ndarray) and v.dtype == object else _objects(np.asarray(v).tolist()) for v in vals
            ]
            fields[n] = np.concatenate(objs)
    steps = [p.step for p in parts]
    merged = _Long(
        files,
        np.concatenate([remap(p.file_codes, p.files, fpos) for p in parts]) if parts else _EMPTY_IDX,
        tags,
        np.concatenate([remap(p.tag_codes, p.tags, tpos) for p in parts]) if parts else _EMPTY_IDX,
        np.concatenate([p.offset for p in parts]) if parts else _EMPTY_IDX,
        np.concatenate([p.row for p in parts]) if parts else _EMPTY_IDX,
        None if any(s is None for s in steps) else np.concatenate([s for s in steps if s is not None]),
        np.concatenate([p.wall for p in parts]) if parts else np.zeros(0),
        fields,
    )
    merged.ordered = False
    return merged


def _file_ranks(long: _Long) -> np.ndarray[Any, Any]:
    """Per row, the rank of its file in tbparse's depth-first order."""
    if not long.files:
        return np.zeros(len(long), dtype=np.int64)
    ranks: np.ndarray[Any, Any] = _ranks(long.files, key=_split_key)[long.file_codes]
    return ranks


def _pre_order(long: _Long) -> np.ndarray[Any, Any]:
    """Row indices in tbparse's concatenation order: files depth-first, then record order."""
    frank = _file_ranks(long)
    if long.ordered:
        small = frank.astype(np.uint16) if len(long.files) < 1 << 16 else frank
        pre: np.ndarray[Any, Any] = np.argsort(small, kind="stable")  # radix sort for small ints
        return pre
    return np.lexsort((long.row, long.offset, frank))


def _sort_rows(long: _Long, keys: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Row indices sorted by ``keys`` (most significant first), ties in concatenation order.

    The keys are folded into one int64 when their ranges allow (the usual case), so one stable
    argsort replaces a lexsort over every key.
    """
    pre = _pre_order(long)
    if not keys or not len(pre):
        return pre
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows)]
    total = 1
    for sp in spans:
        total *= sp
    if total < 1 << 62:
        comp = np.zeros(len(pre), dtype=np.int64)
        for k, lo, sp in zip(keys, lows, spans):
            comp = comp * sp + (k[pre] - lo)
        return pre[np.argsort(comp, kind="stable")]
    rank = np.empty(len(pre), dtype=np.int64)
    rank[pre] = np.arange(len(pre))
    return np.lexsort([rank] + keys[::-1])


def _pairs(long: _Long) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(pair code per row, first row of each pair, pairs in order of first appearance) for the
    (file, tag) pairs: the order of a tag within its file, then files depth-first."""
    import pandas as pd

    key = long.file_codes * (len(long.tags) + 1) + long.tag_codes
    codes = pd.factorize(key)[0].astype(np.int64)
    # Codes number pairs in order of first appearance, and a pair's rows come from one table in
    # record order, so its first row is where the running maximum of the codes first reaches it.
    running = np.maximum.accumulate(codes)
    firsts = np.flatnonzero(np.concatenate([[True], running[1:] > running[:-1]]))
    frank = _file_ranks(long)
    order = np.lexsort((long.row[firsts], long.offset[firsts], frank[firsts]))
    return codes, firsts, order


def _objects(items: Sequence[Any]) -> np.ndarray[Any, Any]:
    """A 1-D object array holding ``items`` as they are (``np.array`` would stack equal-shape
    arrays into one 2-D array)."""
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out


def _from_table(t: _Table, mask: np.ndarray[Any, Any] | None, fields: dict[str, Any]) -> _Long:
    """Rows of ``t`` selected by ``mask`` (boolean or indices); ``fields`` already selected."""
    sel: Any = slice(None) if mask is None else mask
    return _Long(
        t.files,
        t.file_codes[sel],
        t.tags,
        t.tag_codes[sel],
        t.offsets[sel],
        np.arange(t.n, dtype=np.int64)[sel],
        t.steps[sel],
        t.walls[sel],
        fields,
    )


def _empty_long(fields: Sequence[str], with_step: bool = True) -> _Long:
    z = np.zeros(0, dtype=np.int64)
    return _Long([], z, [], z, z, z, z if with_step else None, np.zeros(0), {f: np.zeros(0) for f in fields})


def _is_null(x: Any) -> bool:
    """tbparse's ``_merge_values`` skips numpy scalars that pandas calls null: NaN, in practice
    (``None`` is not a numpy scalar, so it is kept)."""
    if isinstance(x, (float, np.floating)):
        return bool(x != x)
    return False


def _merge(g: np.ndarray[Any, Any], vals: Any, n_groups: int) -> Any:
    """One wide column: per group, the non-null values (rows already sorted by group): none ->
    NaN, one -> the value, several -> a list (tbparse's ``_merge_values``)."""
    import pandas as pd

    numeric = isinstance(vals, np.ndarray) and vals.dtype.kind == "f"
    valid = ~np.isnan(vals) if numeric else np.array([not _is_null(x) for x in vals], dtype=bool)
    gv = g[valid]
    vv = vals[valid] if isinstance(vals, np.ndarray) else np.asarray(vals, dtype=object)[valid]
    counts = np.bincount(gv, minlength=n_groups) if len(gv) else np.zeros(n_groups, dtype=np.int64)
    if numeric and (not len(counts) or counts.max() <= 1):
        out = np.full(n_groups, np.nan)
        out[gv] = vv
        return out
    cells = np.empty(n_groups, dtype=object)
    cells[:] = np.nan
    single = counts[gv] == 1
    if single.any():
        cells[gv[single]] = vv[single] if not numeric else vv[single].astype(object)
    multi = ~single
    if multi.any():
        gm, vm = gv[multi], vv[multi]
        starts = np.flatnonzero(np.concatenate([[True], gm[1:] != gm[:-1]]))
        ends = np.append(starts[1:], len(gm))
        values = vm.tolist()  # one conversion; slicing a list is cheap, slicing numpy is not
        for a, b, where in zip(starts.tolist(), ends.tolist(), gm[starts].tolist()):
            cells[where] = values[a:b]
        return pd.Series(cells, dtype=object)
    return cells.tolist()


_STR_DTYPE: list[Any] = []


def _str_column(names: Sequence[str], codes: np.ndarray[Any, Any]) -> Any:
    """``names[codes]`` as the column type pandas gives a list of Python strings (``str`` in
    pandas 3, ``object`` before), built in Arrow when pandas stores strings in Arrow: creating
    a million Python strings only for pandas to copy them into Arrow costs ~1 s per column."""
    import pandas as pd

    if not _STR_DTYPE:
        _STR_DTYPE.append(pd.Series(["x"]).dtype)
    dtype = _STR_DTYPE[0]
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        import pyarrow as pa

        taken = pa.array(list(names), type=pa.large_string()).take(pa.array(codes, type=pa.int64()))
        return pd.array(taken, dtype=dtype)
    return np.asarray(list(names), dtype=object)[codes] if len(names) else np.empty(len(codes), dtype=object)


def _decode_image(data: bytes) -> np.ndarray[Any, Any]:
    """An encoded image as ``uint8 [height, width, channels]`` (4-D for animated GIF), as
    ``tf.image.decode_image`` returns it, decoded with Pillow instead of TensorFlow."""
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("SummaryReader.images decodes images with Pillow: pip install pillow") from e
    with Image.open(io.BytesIO(data)) as im:
        frames = []
        for i in range(getattr(im, "n_frames", 1)):
            im.seek(i)
            frame: Image.Image = im
            if im.mode.startswith("I;16"):
                # 16-bit grey: TensorFlow scales to 8 bits (keeps the high byte); PIL would clip
                arr = (np.asarray(im).astype(np.uint16) >> 8).astype(np.uint8)
                frames.append(arr[:, :, None])
                continue
            if im.format == "GIF" or im.mode == "P":
                frame = im.convert("RGBA" if ("transparency" in im.info and im.format != "GIF") else "RGB")
            elif im.mode in ("1", "I", "F"):
                frame = im.convert("L")
            elif im.mode not in ("L", "LA", "RGB", "RGBA"):
                frame = im.convert("RGB")
            arr = np.asarray(frame, dtype=np.uint8)
            frames.append(arr[:, :, None] if arr.ndim == 2 else arr)
        return np.stack(frames) if im.format == "GIF" else frames[0]


def _decode_wav(data: bytes) -> np.ndarray[Any, Any]:
    """PCM WAV as ``float32 [frames, channels]`` in [-1, 1), as ``tf.audio.decode_wav`` returns it."""
    import wave

    with wave.open(io.BytesIO(data)) as w:
        nch, width = w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width == 1:
        x = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v) / float(1 << 23)).astype(np.float32)
    else:
        x = (np.frombuffer(raw, dtype="<i4").astype(np.float64) / 2.0**31).astype(np.float32)
    return x.reshape(-1, nch)


def _hparams_items(content: bytes) -> list[tuple[str, Any]]:
    """(name, value) of a session-start-info plugin content, in the order tbparse lists them.

    With TensorBoard installed this is its proto's map order and values (what tbparse returns);
    without it, wire order and plain Python values.
    """
    try:
        from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    except ImportError:
        HParamsPluginData = None
    if HParamsPluginData is not None:
        ssi = HParamsPluginData.FromString(content).session_start_info
        return [(k, ssi.hparams[k].ListFields()[0][1]) for k in ssi.hparams.keys() if ssi.hparams[k].ListFields()]
    out: list[tuple[str, Any]] = []
    for f, _, _, b in _walk(content):
        if f != 3:
            continue
        for g, _, _, entry in _walk(b):
            if g != 1:
                continue
            key, val = "", b""
            for h, _, _, hb in _walk(entry):
                if h == 1:
                    key = hb.decode("utf-8", "replace")
                elif h == 2:
                    val = hb
            for k, _, kv, kb in _walk(val):
                if k == 1:
                    out.append((key, kv))
                elif k == 2:
                    out.append((key, struct.unpack("<d", kb)[0]))
                elif k == 3:
                    out.append((key, kb.decode("utf-8", "replace")))
                elif k == 4:
                    out.append((key, bool(kv)))
    return out
