"""``tbscope.rewrite()``: log surgery.

A new logdir is written from an old one with tags, step ranges or the records a restart
superseded left out, and each run's files merged into one. The new logdir is read back and
compared with what a filtered scan of the input returns before it appears under its name. The
input is only ever read.

The record work happens in the native core (``tbscope_core::rewrite``): records are copied byte
for byte unless some of their values go, corrupt bytes are skipped and reported, and the output
is staged in a hidden directory next to ``dst`` and renamed into place at the end. This module
adds the argument checks and the verification. See ``docs/rewrite.md``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tbscope import _core, _mirror
from tbscope._filters import Filter, compile_filter, parse_steps
from tbscope._reader import KINDS, scan
from tbscope._report import Problem, Report
from tbscope.errors import RewriteError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RewriteError", "RewriteStats", "rewrite"]

# Where a row's bytes sit: different in a rewritten file by design, so never compared.
_LOCATION_COLUMNS = ("blob_file", "blob_offset", "file", "offset")
# Series facts that must survive a rewrite (points and step ranges change with what is dropped).
_SERIES_COLUMNS = ("kind", "plugin", "plugin_content", "display_name", "description", "data_class")
# Report reasons that mean the output itself is damaged (rather than holding, as the input
# did, a value the reader cannot use).
_FRAMING = ("crc", "cap", "not a valid Event", "segment")


@dataclass(frozen=True)
class RewriteStats:
    """What :func:`rewrite` read, wrote and left out.

    ``records_*`` count whole records; ``values_dropped`` counts summary values (and graph
    records) left out; ``records_rewritten`` are records written re-encoded because some of
    their values went or their tag's first metadata moved onto them (``metadata_moved``).
    ``bytes_skipped`` are input bytes not copied because they were corrupt, undecodable or a
    truncated tail; each such span is in ``report``.
    """

    output: str
    runs: int
    files_in: int
    files_out: tuple[str, ...]
    records_in: int
    records_out: int
    records_dropped: int
    records_rewritten: int
    values_dropped: int
    metadata_moved: int
    bytes_in: int
    bytes_out: int
    bytes_skipped: int
    report: Report
    verified: bool
    seconds: float


def rewrite(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    runs: Filter = None,
    tags: Filter = None,
    drop_tags: Filter = None,
    drop_steps: tuple[int | None, int | None] | range | None = None,
    restarts: Literal["all", "preempt"] | None = None,
    merge: bool = True,
    verify: bool = True,
    force: bool = False,
    threads: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> RewriteStats:
    """Write a new logdir ``dst`` from ``src`` with the selected data left out.

    Parameters
    ----------
    src: a logdir or a single event file; never modified.
    dst: the new logdir: a path that does not exist or an empty directory. ``force=True``
        replaces a non-empty one that holds only event files (an earlier output). It may not
        be, be inside or contain ``src``.
    runs: only these runs (glob, ``re.Pattern`` or a list, as in :func:`tbscope.scan`); the
        others are not written.
    tags: keep only these tags; ``drop_tags``: drop these. Graph records are the tags
        ``__run_graph__`` and ``__meta_graph__``, as in a scan.
    drop_steps: ``(a, b)`` drops every point with ``a <= step < b``; either end may be None.
    restarts: ``"preempt"`` drops what restarts superseded, TensorBoard's rule: a record at
        step s drops the earlier records of its tag with step >= s. ``None``/``"all"`` keeps
        them.
    merge: one file per run (the default; runs of many small files or of several ranks are
        compacted), in the order TensorBoard reads them; False keeps one file per input file,
        under its name.
    verify: read the output back and compare it with the filtered input, every kind, value
        for value, before it takes the name ``dst``; on a difference :class:`RewriteError` is
        raised and the output is left in its staging directory.
    threads: worker threads; default ``TBSCOPE_NUM_THREADS`` or the number of CPUs.

    Corrupt records and truncated tails in the input are skipped and reported in
    ``RewriteStats.report``, so the output reads cleanly everywhere (TensorBoard stops reading a
    file at its first bad record).

    >>> import tbscope
    >>> stats = tbscope.rewrite("runs/", "runs-trimmed/", restarts="preempt")  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    if restarts not in (None, "all", "preempt"):
        raise ValueError(
            f"restarts={restarts!r} is not a choice; use None or 'all' (keep every record) or 'preempt' (drop what restarts superseded)"
        )
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError("threads= takes a positive int (or None for all CPUs)")
    if _mirror.is_url(src):
        # A remote logdir is rewritten from its local mirror (storage_options as in scan()).
        url, is_remote = _mirror.split_url(src)  # type: ignore[arg-type]
        src = _mirror.open_mirror(url, storage_options).path if is_remote else url
    steps: tuple[int | None, int | None] | None = None
    if drop_steps is not None:
        steps = parse_steps(drop_steps)
        if steps == (None, None):
            raise ValueError(
                "drop_steps=(None, None) would drop every step; give at least one end, e.g. drop_steps=(0, 100)"
            )
    preempt = restarts == "preempt"
    drop_pattern = compile_filter(drop_tags, "drop_tags")
    try:
        native = _core.rewrite(
            os.fspath(src),
            os.fspath(dst),
            runs=compile_filter(runs, "runs"),
            tags=compile_filter(tags, "tags"),
            drop_tags=drop_pattern,
            drop_steps=steps,
            preempt=preempt,
            merge=merge,
            force=force,
            commit=not verify,
            threads=threads or 0,
        )
    except FileExistsError as e:
        raise FileExistsError(f"{e}, or pass force=True to replace it") from None
    if verify:
        _verify_and_commit(
            src,
            dst,
            str(native["staging"]),
            force=force,
            runs=runs,
            tags=tags,
            drop_pattern=drop_pattern,
            drop_steps=steps,
            restarts="preempt" if preempt else "all",
            threads=threads,
        )
    return RewriteStats(
        output=os.fspath(dst),
        runs=int(native["runs"]),
        files_in=int(native["files_in"]),
        files_out=tuple(str(f) for f in native["files_out"]),
        records_in=int(native["records_in"]),
        records_out=int(native["records_out"]),
        records_dropped=int(native["records_dropped"]),
        records_rewritten=int(native["records_rewritten"]),
        values_dropped=int(native["values_dropped"]),
        metadata_moved=int(native["metadata_moved"]),
        bytes_in=int(native["bytes_in"]),
        bytes_out=int(native["bytes_out"]),
        bytes_skipped=int(native["bytes_skipped"]),
        report=Report(tuple(Problem(*p) for p in native["problems"])),
        verified=verify,
        seconds=time.perf_counter() - t0,
    )


# --------------------------------------------------------------------------------------------
# verification


def _verify_and_commit(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    staging: str,
    *,
    force: bool,
    runs: Filter,
    tags: Filter,
    drop_pattern: str | None,
    drop_steps: tuple[int | None, int | None] | None,
    restarts: Literal["all", "preempt"],
    threads: int | None,
) -> None:
    """Publish ``staging`` as ``dst`` if it reads back as the filtered ``src``; otherwise raise
    :class:`RewriteError` and leave it where it is. Any other failure removes it."""
    try:
        diffs = _differences(
            src,
            staging,
            runs=runs,
            tags=tags,
            drop_pattern=drop_pattern,
            drop_steps=drop_steps,
            restarts=restarts,
            threads=threads,
        )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if diffs:
        shown = "; ".join(diffs[:5]) + (f" (and {len(diffs) - 5} more)" if len(diffs) > 5 else "")
        raise RewriteError(
            f"the rewritten logdir does not read back as the filtered input: {shown}. It was left at {staging} for inspection; {os.fspath(dst)} was not written",
            staging,
        )
    _core.commit_rewrite(os.fspath(src), staging, os.fspath(dst), force=force)


def _differences(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    runs: Filter,
    tags: Filter,
    drop_pattern: str | None,
    drop_steps: tuple[int | None, int | None] | None,
    restarts: Literal["all", "preempt"],
    threads: int | None,
) -> list[str]:
    """How ``out`` differs from what a scan of ``src`` with the same selection returns: every
    table of every kind, row for row in order, every column but the rows' byte locations
    (floats bitwise), then each series' kind and metadata, then damage in ``out`` itself.
    Empty when they agree."""
    want_lg = scan(src, runs=runs, tags=tags, restarts=restarts, threads=threads)
    got_lg = scan(out, threads=threads)
    drop_re = re.compile(drop_pattern) if drop_pattern is not None else None
    diffs: list[str] = []
    series_keys: set[tuple[str, str]] = set()
    for kind in KINDS:
        want = _select(want_lg._frame(kind).to_arrow(), drop_re, drop_steps)
        got = got_lg._frame(kind).to_arrow()
        if want.num_rows != got.num_rows:
            diffs.append(f"{kind}: {want.num_rows} rows expected, {got.num_rows} written")
            continue
        for name in want.column_names:
            if name in _LOCATION_COLUMNS:
                continue
            if name not in got.column_names or not _same(want.column(name), got.column(name)):
                diffs.append(f"{kind}: column {name} differs")
        series_keys.update(_keys(got))
    want_series = _series(want_lg.series().to_arrow(), series_keys)
    got_series = _series(got_lg.series().to_arrow(), series_keys)
    for key in sorted(series_keys):
        if want_series.get(key) != got_series.get(key):
            diffs.append(f"series {key[0]}/{key[1]}: kind or metadata differs")
    for p in got_lg.report.problems:
        if p.severity in ("truncated", "error") or any(s in p.reason for s in _FRAMING):
            diffs.append(f"the output is damaged: {p}")
    return diffs


def _select(
    table: pa.Table, drop_re: re.Pattern[str] | None, drop_steps: tuple[int | None, int | None] | None
) -> pa.Table:
    """``table`` without the rows of dropped tags and steps."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return table
    drop = None
    if drop_re is not None:
        # Matched once per dictionary entry, then spread over the rows by their codes.
        parts = []
        for chunk in table.column("tag").chunks:
            names = chunk.dictionary.to_pylist()
            flags = pa.array([n is not None and drop_re.search(n) is not None for n in names], pa.bool_())
            parts.append(flags.take(chunk.indices))
        drop = pa.chunked_array(parts, pa.bool_())
    if drop_steps is not None:
        lo, hi = drop_steps
        step = table.column("step")
        ends = [pc.greater_equal(step, lo)] if lo is not None else []
        ends += [pc.less(step, hi)] if hi is not None else []
        inside = ends[0] if len(ends) == 1 else pc.and_(ends[0], ends[1])
        drop = inside if drop is None else pc.or_(drop, inside)
    return table if drop is None else table.filter(pc.invert(drop))


def _plain(a: pa.ChunkedArray) -> pa.Array:
    """One array, dictionaries decoded (each chunk has dictionaries of its own)."""
    import pyarrow as pa

    if pa.types.is_dictionary(a.type):
        a = a.cast(a.type.value_type)
    return a.combine_chunks()


def _same(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> bool:
    """Equal values in order; floats bitwise (NaN equals NaN, -0.0 differs from 0.0); lists
    element by element."""
    import pyarrow as pa
    import pyarrow.compute as pc

    x = _plain(a) if isinstance(a, pa.ChunkedArray) else a
    y = _plain(b) if isinstance(b, pa.ChunkedArray) else b
    if x.type != y.type or len(x) != len(y):
        return False
    if pa.types.is_list(x.type) or pa.types.is_large_list(x.type):
        if not x.is_null().equals(y.is_null()) or not pc.list_value_length(x).equals(pc.list_value_length(y)):
            return False
        return _same(pc.list_flatten(x), pc.list_flatten(y))
    if pa.types.is_floating(x.type):
        bits = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[x.type.bit_width]
        return bool(x.view(bits).equals(y.view(bits)))
    return bool(x.equals(y))


def _keys(table: pa.Table) -> Iterable[tuple[str, str]]:
    import pyarrow as pa

    if table.num_rows == 0:
        return []
    pairs = pa.table({"run": table.column("run").cast(pa.string()), "tag": table.column("tag").cast(pa.string())})
    unique = pairs.group_by(["run", "tag"]).aggregate([])
    return list(zip(unique.column("run").to_pylist(), unique.column("tag").to_pylist()))


def _series(table: pa.Table, keys: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Kind and metadata of the series in ``keys``."""
    rows = table.to_pylist()
    out: dict[tuple[str, str], tuple[Any, ...]] = {}
    for r in rows:
        key = (str(r["run"]), str(r["tag"]))
        if key in keys and key not in out:
            out[key] = tuple(r[c] for c in _SERIES_COLUMNS)
    return out
