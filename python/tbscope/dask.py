"""Reading logdirs on a Dask cluster: ``dask.dataframe`` collections, one partition per event
file, or per byte range of a large one.

>>> import tbscope.dask                                    # doctest: +SKIP
>>> ddf = tbscope.dask.read_scalars("s3://bucket/runs/")    # doctest: +SKIP
>>> ddf.groupby("tag").value.max().compute()               # doctest: +SKIP

The event files are listed once, here; nothing else is read to build the collection: its schema
(``meta``) is the reader's own, taken from an empty read. Each partition is one event file, read
by the Rust reader on a worker (a remote file through the worker's own mirror, see
``docs/scale.md``); a local file larger than ``partition_bytes`` is cut at record boundaries
(found by hopping from record header to record header, ``_core.split_points``) and each piece
is a partition. With ``restarts="preempt"`` a partition is a whole run instead: TensorBoard's
rule drops records across a run's files in order. A series whose kind is decided by metadata
the partition does not hold (a TF2 tensor summary carries it in its first record only, which
may be in another piece or file of the run) is detected and that partition reads its run
whole and keeps its own rows, so every partition equals its slice of the single-process read.
Rows come in the single-process order (run, file, record). Categories are known per partition
only, so categorical columns (``run``, ``tag``...) have unknown categories in ``meta``
(``.cat.as_known()`` computes them).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tbscope import _core, _mirror
from tbscope._filters import compile_filter

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa

    from tbscope._frames import Frame
    from tbscope._reader import Logdir

__all__ = [
    "event_files",
    "read_audio",
    "read_blobs",
    "read_histograms",
    "read_images",
    "read_kind",
    "read_scalars",
    "read_tensors",
    "read_text",
    "to_parquet",
]

#: scan() arguments a partition passes on to the reader of its file.
_PASSED = ("tags", "steps", "restarts", "verify", "max_record_bytes", "threads", "tail_timeout")

#: Local event files larger than this are cut into pieces of about this size, one partition
#: each (the reader's own threads split files above the same size).
PARTITION_BYTES = 64 << 20


class Part(NamedTuple):
    """One partition: the rows of ``path`` (an event file, or with ``restarts="preempt"`` a run
    directory) from byte ``start`` to ``end`` (None: to the end), as run ``run``. ``run_path``:
    the run that ``path`` is a part of (its directory, or the file itself when it is the run's
    only file), read whole when the part alone cannot decide a series' kind; None when ``path``
    is the whole run."""

    run: str
    path: str
    start: int = 0
    end: int | None = None
    run_path: str | None = None


def event_files(
    logdir_or_urls: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    runs: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[tuple[str, str, str]]:
    """``(logdir, run, file)`` for every event file, in the order a scan reads them: each logdir
    in the order given, its runs by name, a run's files by name. ``file`` is a path or URL."""
    roots = [logdir_or_urls] if isinstance(logdir_or_urls, (str, os.PathLike)) else list(logdir_or_urls)
    pattern = compile_filter(runs, "runs")
    keep = re.compile(pattern).search if pattern is not None else None
    out: list[tuple[str, str, str]] = []
    for root in roots:
        path, remote = _mirror.split_url(os.fspath(root))
        found: dict[str, list[str]] = {}
        if remote:
            # The mirror's listing (its transport, its run names), without fetching anything.
            listing = _mirror.Mirror(path, storage_options)
            files = listing.list_files()
            prefix = path.rstrip("/")
            if listing.single:
                found["."] = [prefix]
            else:
                for rel in files:
                    found.setdefault(_mirror.run_file(rel)[0], []).append(prefix + "/" + rel)
        elif os.path.isfile(path):
            found["."] = [path]
        elif os.path.isdir(path):
            # The reader's own discovery and run names, so partitions name runs as a scan does.
            for run, file, _ in _core.event_files(path):
                found.setdefault(run, []).append(file)
        else:
            raise FileNotFoundError(f"{path}: no such logdir or event file")
        for run in sorted(found):
            if keep is None or keep(run):
                out.extend((os.fspath(root), run, f) for f in sorted(found[run]))
    return out


def _is_remote(path: str) -> bool:
    return _mirror.split_url(path)[1]


def _scan(
    path: str,
    kinds: list[str],
    options: Mapping[str, Any] | None,
    scan_args: Mapping[str, Any],
    byte_range: tuple[int, int | None] | None = None,
    **extra: Any,
) -> Logdir:
    import dataclasses

    from tbscope._reader import Logdir, scan

    # runs=".": a run directory (restarts="preempt") without the runs nested in it.
    lg = scan(path, kinds=kinds, runs=".", storage_options=options if _is_remote(path) else None, **scan_args, **extra)
    if byte_range is None:
        return lg
    # One piece of a large local file, read in place by the native reader (no copy).
    return Logdir(lg.path, dataclasses.replace(lg._args, byte_range=byte_range), lg._strict)


def _undecided(lg: Logdir) -> bool:
    """Whether a series of this read is a tensor only because no metadata said otherwise: the
    rest of its run may hold the metadata (a plugin name) that makes it another kind."""
    series = lg.series().to_arrow()
    kinds, plugins = series.column("kind").to_pylist(), series.column("plugin").to_pylist()
    return any(k == "tensors" and not p for k, p in zip(kinds, plugins))


@contextlib.contextmanager
def _part_frame(
    kind: str, part: Part, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any]
) -> Iterator[Frame]:
    """The reader's frame of ``kind`` for one partition (a piece of a file is read in place,
    with its offsets in the whole file). The frame's blobs can be read until the context exits."""
    if part.run_path is None:
        yield _scan(part.path, [kind], options, scan_args)._frame(kind)
        return
    # Read with tensors too: a series of undecided kind shows there (see _undecided).
    kinds = [kind] if kind == "tensors" else [kind, "tensors"]
    byte_range = (part.start, part.end) if part.start or part.end is not None else None
    lg = _scan(part.path, kinds, options, scan_args, byte_range)
    if not _undecided(lg):
        yield lg._frame(kind)
        return
    # The run decides: read it whole and keep this part's rows (by file and record offset).
    import pyarrow.compute as pc

    frame = _scan(part.run_path, [kind], options, scan_args, provenance=True)._frame(kind)
    t = frame.to_arrow()
    name = part.path.rstrip("/").rsplit("/", 1)[-1] if _is_remote(part.path) else os.path.basename(part.path)
    files = pc.cast(t.column("file"), "string")
    keep = pc.equal(files, name)
    keep = pc.and_(keep, pc.greater_equal(t.column("offset"), part.start))
    if part.end is not None:
        keep = pc.and_(keep, pc.less(t.column("offset"), part.end))
    t = t.filter(keep).drop_columns(["file", "offset"])
    yield type(frame)(t, frame.name, frame._blob_path)


def _frame(
    kind: str, part: Part, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any], blobs: bool
) -> pd.DataFrame:
    """One partition: the rows of ``kind`` in its file, byte range or run, as run ``part.run``."""
    import pandas as pd

    with _part_frame(kind, part, options, scan_args) as frame:
        df = frame.to_pandas(blobs=blobs) if kind in ("images", "audio", "blobs") else frame.to_pandas()  # type: ignore[call-arg]
    run = part.run
    df["run"] = pd.Categorical([run] * len(df), categories=[run])
    if "blob_file" in df:
        if run != ".":
            # Named relative to the logdir, as a whole read names them.
            df["blob_file"] = df["blob_file"].cat.rename_categories(lambda name: f"{run}/{name}")
    return df


def _read_part(
    part: tuple[str, Part, Mapping[str, Any] | None, Mapping[str, Any], bool, dict[str, Any]],
) -> pd.DataFrame:
    kind, p, options, scan_args, blobs, dtypes = part
    df = _frame(kind, p, options, scan_args, blobs)
    for c, dtype in dtypes.items():
        # meta's dtype, whatever this partition's values (see _meta).
        if df[c].dtype != dtype:
            df[c] = df[c].astype(dtype)
    return df


def _parts(
    files: list[tuple[str, str, str]], restarts: str = "all", partition_bytes: int = PARTITION_BYTES
) -> list[Part]:
    """The partitions, in the single-process order: one per event file, a local file larger
    than ``partition_bytes`` cut at record boundaries; with ``restarts="preempt"`` one per run
    (its event file, or its directory when it has several)."""
    from tbscope import _core

    if partition_bytes < 1:
        raise ValueError(f"partition_bytes={partition_bytes} must be at least 1")
    by_run: dict[tuple[str, str], list[str]] = {}
    for root, run, path in files:
        by_run.setdefault((root, run), []).append(path)
    parts: list[Part] = []
    for (_, run), paths in by_run.items():
        run_path = (
            paths[0]
            if len(paths) == 1
            else (paths[0].rsplit("/", 1)[0] if _is_remote(paths[0]) else os.path.dirname(paths[0]))
        )
        if restarts == "preempt":
            parts.append(Part(run, run_path))
            continue
        for path in paths:
            cuts: list[int] = []
            if not _is_remote(path) and os.path.getsize(path) > partition_bytes:
                cuts = _core.split_points(path, 0, partition_bytes)
            if not cuts:
                parts.append(Part(run, path, run_path=None if len(paths) == 1 else run_path))
                continue
            bounds = [0, *cuts, None]
            parts.extend(Part(run, path, a, b, run_path) for a, b in zip(bounds[:-1], bounds[1:]))  # type: ignore[arg-type]
    return parts


def _meta(kind: str, scan_args: Mapping[str, Any], blobs: bool) -> pd.DataFrame:
    """The partitions' schema, from a read of an empty logdir (no categories known)."""
    import dask.dataframe as dd
    import pyarrow as pa

    from tbscope._reader import scan

    with tempfile.TemporaryDirectory(prefix="tbscope-meta-") as empty:
        df = _frame(kind, Part(".", empty), None, scan_args, blobs).iloc[:0]
        schema = scan(empty, kinds=[kind], **scan_args)._frame(kind).to_arrow().schema
    for c in df.columns:
        # An empty read gives float64 for columns of Python objects (lists, bytes) that have no
        # values to tell; the rows a partition holds have them as objects.
        field = schema.field(c) if c in schema.names else None
        if df[c].dtype == "float64" and (field is None or not pa.types.is_floating(field.type)):
            df[c] = df[c].astype(object)
        elif field is not None and field.nullable and pa.types.is_integer(field.type):
            # pandas holds integers with nulls as float64: a partition with a null would differ.
            df[c] = df[c].astype("float64")
    return dd.utils.clear_known_categories(df)


def read_kind(
    kind: str,
    logdir_or_urls: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    storage_options: Mapping[str, Any] | None = None,
    runs: Any = None,
    blobs: bool = True,
    partition_bytes: int = PARTITION_BYTES,
    **filters: Any,
) -> dd.DataFrame:
    """A ``dask.dataframe`` of one kind (``"scalars"``, ``"histograms"``...), one partition per
    event file, a local file larger than ``partition_bytes`` cut at record boundaries into
    pieces of about that size (with ``restarts="preempt"``: one partition per run). Filters as
    in :func:`tbscope.scan` (``runs``, ``tags``, ``steps``, ``restarts``, ``verify``,
    ``threads``: the reader's threads in each task); ``storage_options`` for URLs as there."""
    try:
        import dask.dataframe as dd
    except ImportError:
        raise ImportError("tbscope.dask needs dask: pip install 'tbscope[dask]'") from None
    from tbscope._reader import KINDS

    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    bad = sorted(set(filters) - set(_PASSED))
    if bad:
        raise TypeError(
            f"tbscope.dask.read_{kind}() takes {', '.join(('runs', 'storage_options', *_PASSED))}; not {', '.join(bad)}"
        )
    options = dict(storage_options) if storage_options is not None else (dict(_mirror._default_options) or None)
    files = event_files(logdir_or_urls, runs=runs, storage_options=options)
    parts = _parts(files, filters.get("restarts", "all"), partition_bytes)
    import dask
    import pandas as pd

    meta = _meta(kind, filters, blobs)
    # Dask would turn object columns into strings: list columns (histogram edges) are not.
    with dask.config.set({"dataframe.convert-string": False}):
        if not parts:
            return dd.from_pandas(meta, npartitions=1)
        dtypes = {c: t for c, t in meta.dtypes.items() if not isinstance(t, pd.CategoricalDtype)}
        return dd.from_map(
            _read_part,
            [(kind, p, options, filters, blobs, dtypes) for p in parts],
            meta=meta,
            enforce_metadata=False,
            label=f"tbscope-read-{kind}",
        )


def read_scalars(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    """Scalars (run, tag, step, wall_time, timestamp, value) as a ``dask.dataframe``; see :func:`read_kind`."""
    return read_kind("scalars", logdir_or_urls, **kwargs)


def read_histograms(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("histograms", logdir_or_urls, **kwargs)


def read_tensors(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("tensors", logdir_or_urls, **kwargs)


def read_images(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("images", logdir_or_urls, **kwargs)


def read_audio(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("audio", logdir_or_urls, **kwargs)


def read_text(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("text", logdir_or_urls, **kwargs)


def read_blobs(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("blobs", logdir_or_urls, **kwargs)


def read_hparams_records(logdir_or_urls: Any, **kwargs: Any) -> dd.DataFrame:
    return read_kind("hparams", logdir_or_urls, **kwargs)


def _arrow_part(kind: str, part: Part, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any]) -> pa.Table:
    """One partition as the reader's Arrow table (NaN stays NaN, nulls stay null), as run ``part.run``."""
    import pyarrow as pa

    with _part_frame(kind, part, options, scan_args) as frame:
        table = frame.to_arrow()
    run = part.run
    i = table.schema.get_field_index("run")
    field = table.schema.field(i)
    codes = pa.array([0] * table.num_rows, field.type.index_type)
    table = table.set_column(i, field, pa.DictionaryArray.from_arrays(codes, pa.array([run], field.type.value_type)))
    j = table.schema.get_field_index("blob_file")
    if run != "." and j >= 0:
        col = table.column(j).combine_chunks()
        named = pa.DictionaryArray.from_arrays(
            col.indices, pa.array([f"{run}/{v}" for v in col.dictionary.to_pylist()], col.type.value_type)
        )
        table = table.set_column(j, table.schema.field(j), named)
    return table


def _write_part(
    kind: str, part: Part, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any], target: str
) -> int:
    import pyarrow.parquet as pq

    table = _arrow_part(kind, part, options, scan_args)
    pq.write_table(table, target)
    return int(table.num_rows)


def to_parquet(
    logdir_or_urls: Any,
    out: str | os.PathLike[str],
    *,
    kinds: Iterable[str] = ("scalars",),
    scheduler: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    runs: Any = None,
    partition_bytes: int = PARTITION_BYTES,
    **filters: Any,
) -> dict[str, Any]:
    """Write a Parquet dataset with Dask: ``out`` (one kind) or ``out/<kind>`` (several), one
    file per partition of :func:`read_kind` (``part.NNNNNN.parquet`` in the single-process
    order), written by the workers straight from
    the reader's Arrow tables. ``scheduler``: a scheduler's address (else the current client
    or Dask's default scheduler). Returns what was written."""
    import dask

    from tbscope._reader import KINDS

    kinds = list(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown kind(s) {bad}; choose from {', '.join(KINDS)}")
    unknown = sorted(set(filters) - set(_PASSED))
    if unknown:
        raise TypeError(
            f"tbscope.dask.to_parquet() takes {', '.join(('runs', 'storage_options', *_PASSED))}; not {', '.join(unknown)}"
        )
    out = os.fspath(out)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise FileExistsError(f"{out} exists; write the dataset to a new directory")
    options = dict(storage_options) if storage_options is not None else (dict(_mirror._default_options) or None)
    parts = _parts(
        event_files(logdir_or_urls, runs=runs, storage_options=options), filters.get("restarts", "all"), partition_bytes
    )
    client = None
    if scheduler is not None:
        from distributed import Client

        client = Client(scheduler)
    try:
        tasks = []
        for kind in kinds:
            target = out if len(kinds) == 1 else os.path.join(out, kind)
            os.makedirs(target, exist_ok=True)
            for i, part in enumerate(parts):
                tasks.append(
                    dask.delayed(_write_part)(
                        kind, part, options, filters, os.path.join(target, f"part.{i:06d}.parquet")
                    )
                )
        rows = dask.compute(*tasks)
        return {"output": out, "kinds": kinds, "files": len(tasks), "rows": int(sum(rows))}
    finally:
        if client is not None:
            client.close()
