"""Reading logdirs on a Dask cluster: ``dask.dataframe`` collections, one partition per run.

>>> import tbscope.dask                                    # doctest: +SKIP
>>> ddf = tbscope.dask.read_scalars("s3://bucket/runs/")    # doctest: +SKIP
>>> ddf.groupby("tag").value.max().compute()               # doctest: +SKIP

The event files are listed once, here; nothing else is read to build the collection: its schema
(``meta``) is the reader's own, taken from an empty read. Each partition is one run, read by the
Rust reader on a worker (a remote run through the worker's own mirror, see ``docs/scale.md``):
its event file, or all of its files when it has several, because the kind of a series can come
from metadata in another file of the run (TF1-style writers) and TensorBoard's restart rule
(``restarts="preempt"``) spans them. Rows come in the single-process order (run, file, record).
Categories are known per partition only, so categorical columns (``run``, ``tag``...) have
unknown categories in ``meta`` (``.cat.as_known()`` computes them).
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tbscope import _mirror
from tbscope._filters import compile_filter

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd

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
            import fsspec

            fs, base = fsspec.core.url_to_fs(
                path, **dict(_mirror._default_options if storage_options is None else storage_options)
            )
            base = base.rstrip("/")
            prefix = path.rstrip("/")
            if fs.isfile(base):
                found["."] = [prefix]
            else:
                for p in fs.find(base, withdirs=False):
                    rel = p[len(base) + 1 :]
                    if "tfevents" in posixpath.basename(rel):
                        found.setdefault(posixpath.dirname(rel) or ".", []).append(prefix + "/" + rel)
        elif os.path.isfile(path):
            found["."] = [path]
        elif os.path.isdir(path):
            for d, _, names in os.walk(path, followlinks=True):
                files = sorted(n for n in names if "tfevents" in n)
                if files:
                    rel = os.path.relpath(d, path)
                    found[rel.replace(os.sep, "/") if rel != "." else "."] = [os.path.join(d, n) for n in files]
        else:
            raise FileNotFoundError(f"{path}: no such logdir or event file")
        for run in sorted(found):
            if keep is None or keep(run):
                out.extend((os.fspath(root), run, f) for f in sorted(found[run]))
    return out


def _frame(
    kind: str, path: str, run: str, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any], blobs: bool
) -> pd.DataFrame:
    """One partition: the rows of ``kind`` in one event file (or run directory), as run ``run``."""
    import pandas as pd

    from tbscope._reader import scan

    # runs=".": a run directory (restarts="preempt") without the runs nested in it.
    lg = scan(
        path, kinds=[kind], runs=".", storage_options=options if _mirror.split_url(path)[1] else None, **scan_args
    )
    frame = lg._frame(kind)
    df = frame.to_pandas(blobs=blobs) if kind in ("images", "audio", "blobs") else frame.to_pandas()  # type: ignore[call-arg]
    df["run"] = pd.Categorical([run] * len(df), categories=[run])
    if run != "." and "blob_file" in df:
        # Named relative to the logdir, as a whole read names them.
        df["blob_file"] = df["blob_file"].cat.rename_categories(lambda name: f"{run}/{name}")
    return df


def _read_part(
    part: tuple[str, list[tuple[str, str]], Mapping[str, Any] | None, Mapping[str, Any], bool, dict[str, Any]],
) -> pd.DataFrame:
    import pandas as pd

    kind, files, options, scan_args, blobs, dtypes = part
    frames = [_frame(kind, path, run, options, scan_args, blobs) for run, path in files]
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    for c, dtype in dtypes.items():
        # meta's dtype, whatever this partition's values (see _meta).
        if df[c].dtype != dtype:
            df[c] = df[c].astype(dtype)
    return df


def _parts(files: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """``(run, path)`` per partition: a run's event file, or its directory when it has several
    (the kind of a series can come from metadata in another file of the run, and TensorBoard's
    restart rule spans them)."""
    by_run: dict[tuple[str, str], list[str]] = {}
    for root, run, path in files:
        by_run.setdefault((root, run), []).append(path)
    parts: list[tuple[str, str]] = []
    for (_, run), paths in by_run.items():
        if len(paths) == 1:
            parts.append((run, paths[0]))
        else:
            parts.append(
                (run, paths[0].rsplit("/", 1)[0] if _mirror.split_url(paths[0])[1] else os.path.dirname(paths[0]))
            )
    return parts


def _meta(kind: str, scan_args: Mapping[str, Any], blobs: bool) -> pd.DataFrame:
    """The partitions' schema, from a read of an empty logdir (no categories known)."""
    import dask.dataframe as dd
    import pyarrow as pa

    from tbscope._reader import scan

    with tempfile.TemporaryDirectory(prefix="tbscope-meta-") as empty:
        df = _frame(kind, empty, ".", None, scan_args, blobs).iloc[:0]
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
    **filters: Any,
) -> dd.DataFrame:
    """A ``dask.dataframe`` of one kind (``"scalars"``, ``"histograms"``...), one partition per
    run: its event file, or its directory when it has several. Filters as in :func:`tbscope.scan`
    (``runs``, ``tags``, ``steps``, ``restarts``, ``verify``, ``threads``: the reader's threads
    in each task); ``storage_options`` for URLs as there."""
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
    parts = [[p] for p in _parts(files)]
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


def _arrow_part(kind: str, run: str, path: str, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any]) -> Any:
    """One partition as the reader's Arrow table (NaN stays NaN, nulls stay null), as run ``run``."""
    import pyarrow as pa

    from tbscope._reader import scan

    lg = scan(
        path, kinds=[kind], runs=".", storage_options=options if _mirror.split_url(path)[1] else None, **scan_args
    )
    table = lg._frame(kind).to_arrow()
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
    kind: str, run: str, path: str, options: Mapping[str, Any] | None, scan_args: Mapping[str, Any], target: str
) -> int:
    import pyarrow.parquet as pq

    table = _arrow_part(kind, run, path, options, scan_args)
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
    **filters: Any,
) -> dict[str, Any]:
    """Write a Parquet dataset with Dask: ``out`` (one kind) or ``out/<kind>`` (several), one
    file per run (``part.NNNNNN.parquet`` in run order), written by the workers straight from
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
    parts = _parts(event_files(logdir_or_urls, runs=runs, storage_options=options))
    client = None
    if scheduler is not None:
        from distributed import Client

        client = Client(scheduler)
    try:
        tasks = []
        for kind in kinds:
            target = out if len(kinds) == 1 else os.path.join(out, kind)
            os.makedirs(target, exist_ok=True)
            for i, (run, path) in enumerate(parts):
                tasks.append(
                    dask.delayed(_write_part)(
                        kind, run, path, options, filters, os.path.join(target, f"part.{i:06d}.parquet")
                    )
                )
        rows = dask.compute(*tasks)
        return {"output": out, "kinds": kinds, "files": len(tasks), "rows": int(sum(rows))}
    finally:
        if client is not None:
            client.close()
