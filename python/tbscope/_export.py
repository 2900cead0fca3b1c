"""Export a logdir's tables to CSV, Parquet or JSON lines, streamed batch by batch.

Rows are read with :meth:`Logdir.iter_batches`, a bounded number of event-file bytes at a time,
and written as they come, so memory stays flat however big the logdir is. Every output (a file,
or a directory of files) is written under a hidden temporary name next to it and renamed into
place at the end: a failed or interrupted export leaves nothing behind. An existing output is
replaced only with ``force=True``, and never when it is one of the input's event files.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Union

if TYPE_CHECKING:
    import pyarrow as pa

    from tbscope._reader import Logdir
    from tbscope._report import Problem, Report

__all__ = ["ExportStats", "FORMATS", "export"]

#: Output formats and the file suffixes that select them.
FORMATS = {"csv": (".csv",), "parquet": (".parquet", ".pq"), "jsonl": (".jsonl", ".ndjson")}
_EXT = {"csv": ".csv", "parquet": ".parquet", "jsonl": ".jsonl"}
# Kinds whose rows point at blobs on disk; exported as their metadata columns.
_EXPORTABLE = ("scalars", "tensors", "histograms", "images", "audio", "text", "blobs", "hparams")


@dataclass
class ExportStats:
    """What an export wrote: rows per kind, files and their total bytes, and the time taken.
    Passed, as a running total, to a ``progress`` callback after every batch. ``report`` is what
    the read could not read (files that could not be opened, corrupt records): rows it holds
    back are missing from the output."""

    rows: int = 0
    bytes: int = 0
    files: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    report: Report = field(default_factory=lambda: _empty_report())


def _empty_report() -> Report:
    from tbscope._report import Report

    return Report(())


Progress = Union[bool, Callable[[ExportStats], None], None]


def _format_of(out: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")
        return fmt
    suffix = out.suffix.lower()
    for name, suffixes in FORMATS.items():
        if suffix in suffixes:
            return name
    raise ValueError(
        f"cannot tell the format from {str(out)!r}; name it .csv, .parquet or .jsonl, or pass format='csv'|'parquet'|'jsonl'"
    )


#: File name suffixes an export writes (what ``force=True`` may replace in a directory).
_OUTPUT_SUFFIXES = tuple(x for suffixes in FORMATS.values() for x in suffixes)


def _check_output(out: Path, source: str, *, directory: bool, force: bool) -> None:
    """Refuses an output that would destroy data: an input event file (even with ``force``),
    a directory holding the input, or an existing output without ``force``."""
    if "tfevents" in out.name:
        # TensorBoard and tbscope take any file named so for an event file: it would be read as
        # (corrupt) input, and if it exists it may well be one.
        raise ValueError(
            f"{out} is named like an event file ('tfevents' in its name); export never writes over or among its input's event files, not even with force=True. Choose another name"
        )
    src = os.path.realpath(source)
    real = os.path.realpath(out)
    if os.path.isfile(src) and os.path.lexists(out) and os.path.exists(out) and os.path.samefile(src, out):
        raise ValueError(f"{out} is the input event file; export never writes over its input, not even with force=True")
    if directory and (real == src or src.startswith(real.rstrip(os.sep) + os.sep)):
        what = "is the input" if real == src else f"holds the input {source}"
        raise ValueError(
            f"{out} {what}; export never replaces its input, not even with force=True. Choose a new directory"
        )
    if not os.path.lexists(out):
        return
    if not directory:
        if os.path.isdir(out) and not os.path.islink(out):
            raise FileExistsError(
                f"{out} is a directory; give a file name (a directory is written only for several kinds or partition_by=)"
            )
        if not force:
            raise FileExistsError(
                f"{out} already exists; choose a new name, or pass force=True (tbscope export --force) to replace it"
            )
        return
    if not os.path.isdir(out) or os.path.islink(out):
        raise FileExistsError(f"{out} exists and is not a directory; choose a new directory")
    if not any(Path(out).iterdir()):
        return
    if not force:
        raise FileExistsError(
            f"{out} already exists and is not empty; choose a new or empty directory, or pass force=True (tbscope export --force) to replace an earlier export there"
        )
    stray = _not_an_export(Path(out))
    if stray is not None:
        raise FileExistsError(
            f"{out} holds {stray}, which an export does not write; not replaced, even with force=True. Choose a new or empty directory"
        )


def _not_an_export(path: Path) -> str | None:
    """The first entry under ``path`` that an export would not have written (anything but
    directories and regular files with an export suffix), or None."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode) and "tfevents" not in name:
                continue
            if not stat.S_ISREG(st.st_mode) or "tfevents" in name or not name.lower().endswith(_OUTPUT_SUFFIXES):
                return os.path.relpath(full, path)
    return None


def _hidden(out: Path, directory: bool) -> Path:
    """A new hidden file or directory next to ``out`` to write it under. Made with the usual
    permissions (0666/0777 less the umask), as ``out`` would have been: tempfile's are private
    (0600/0700), and an export renamed from one stayed unreadable to anyone else."""
    for _ in range(100):
        p = out.parent / f".{out.name}.{secrets.token_hex(4)}.partial"
        try:
            if directory:
                os.mkdir(p)
            else:
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return p
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot find a free temporary name next to {out}")


def _publish_dir(staging: Path, out: Path) -> None:
    """Renames a finished staging directory to ``out``; an existing ``out`` (checked by
    :func:`_check_output`) is moved aside first and removed once the new one is in place."""
    if not os.path.lexists(out) or (out.is_dir() and not any(out.iterdir())):
        # rename() replaces an empty directory.
        os.rename(staging, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, old / out.name)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(old / out.name, out)
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Writers: open(), write(batch), close() -> bytes written.


def _text_ready(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch that CSV can hold: list and struct columns as JSON text, binary as base64."""
    import pyarrow as pa

    cols, names = [], []
    for name, col in zip(batch.schema.names, batch.columns):
        t = col.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t) or pa.types.is_fixed_size_list(t):
            col = pa.array(
                [None if v is None else json.dumps(_jsonable(v), allow_nan=False) for v in col.to_pylist()], pa.string()
            )
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            col = pa.array(
                [None if v is None else base64.b64encode(v).decode("ascii") for v in col.to_pylist()], pa.string()
            )
        cols.append(col)
        names.append(name)
    return pa.RecordBatch.from_arrays(cols, names=names)


def _jsonable(v: Any) -> Any:
    """A Python value JSON can hold: non-finite floats become null, bytes base64 text."""
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def _json_fragments(col: pa.Array) -> pa.Array:
    """Each value of a column as JSON text (a string array): vectorised for the common types."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_dictionary(t):
        # Encode each distinct name once, then spread by the indices.
        words = pa.array([json.dumps(v, ensure_ascii=False) for v in col.dictionary.to_pylist()], pa.string())
        return pc.if_else(pc.is_null(col), "null", pc.take(words, col.indices))
    if pa.types.is_floating(t):
        # Arrow prints the shortest text that reads back as the same double; JSON has no NaN or
        # infinity, so those become null.
        text = pc.cast(col, pa.string())
        ok = pc.and_(pc.is_finite(col), pc.invert(pc.is_null(col)))
        return pc.if_else(pc.fill_null(ok, False), text, "null")
    if pa.types.is_integer(t):
        return pc.fill_null(pc.cast(col, pa.string()), "null")
    if pa.types.is_boolean(t):
        return pc.fill_null(pc.if_else(col, "true", "false"), "null")
    if pa.types.is_timestamp(t):
        # %S carries the fraction at the column's own precision (nanoseconds for tbscope).
        text = pc.strftime(col, format="%Y-%m-%dT%H:%M:%S" + ("Z" if t.tz else ""))
        return pc.fill_null(pc.binary_join_element_wise('"', text, '"', ""), "null")
    return pa.array(
        [json.dumps(_jsonable(v), ensure_ascii=False, allow_nan=False) for v in col.to_pylist()], pa.string()
    )


class _JsonlWriter:
    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        parts: list[Any] = []
        for i, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
            parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
            parts.append(_json_fragments(col))
        parts.append("}")
        lines = pc.binary_join_element_wise(*parts, "")
        # One join per batch; newline-terminated rows.
        text = "\n".join(lines.to_pylist()) + "\n"
        self.sink.write(text.encode("utf-8"))

    def close(self) -> None:
        pass


class _Sink:
    """One output file: CSV, Parquet or JSON lines, written batch by batch."""

    def __init__(self, path: Path, fmt: str, schema: pa.Schema) -> None:
        import pyarrow as pa

        self.path = path
        self.fmt = fmt
        self.file: BinaryIO = open(path, "wb")  # closed in close()
        self.writer: Any
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self.writer = pq.ParquetWriter(self.file, schema)
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            self.schema = _text_ready(pa.RecordBatch.from_pylist([], schema=schema)).schema
            self.writer = pcsv.CSVWriter(self.file, self.schema)
        else:
            self.writer = _JsonlWriter(self.file)

    def write(self, batch: pa.RecordBatch) -> None:
        if self.fmt == "csv":
            batch = _text_ready(batch)
        self.writer.write(batch)

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.file.close()


# --------------------------------------------------------------------------------------------


def _batches(lg: Logdir, kind: str, max_rows: int, problems: dict[Problem, None]) -> Iterator[pa.RecordBatch]:
    """The rows of one kind; once they are all out, what the read reported is in ``problems``."""
    if kind == "hparams":
        # One row per run: small, and built from the whole scan (not streamable by nature).
        yield from lg.hparams().to_arrow().to_batches(max_chunksize=max_rows)
        problems.update(dict.fromkeys(lg.report.problems))
        return
    yield from lg._iter_batches(
        kind, max_rows, 256 << 20, lambda report: problems.update(dict.fromkeys(report.problems))
    )


def _progress_callback(progress: Progress) -> tuple[Callable[[ExportStats], None] | None, Callable[[], None]]:
    """The callback to call after each batch, and a finaliser (for the rich display)."""
    if progress is None or progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    from rich.progress import Progress as RichProgress
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True)
    task = bar.add_task("exporting", total=None)
    bar.start()

    def update(st: ExportStats) -> None:
        bar.update(task, description=f"exported {st.rows:,} rows, {st.bytes / 1e6:,.1f} MB")

    return update, bar.stop


def export(
    source: str | os.PathLike[str] | Logdir,
    out: str | os.PathLike[str],
    *,
    format: str | None = None,
    kinds: str | Iterable[str] = ("scalars",),
    partition_by: str | Iterable[str] | None = None,
    progress: Progress = None,
    max_rows: int = 1 << 20,
    force: bool = False,
    **scan_kwargs: Any,
) -> ExportStats:
    """Write a logdir's tables to ``out`` as CSV, Parquet or JSON lines, streaming.

    ``format`` defaults to the suffix of ``out`` (``.csv``, ``.parquet``/``.pq``,
    ``.jsonl``/``.ndjson``). With one kind and no ``partition_by``, ``out`` is that file; with
    several kinds it is a directory that gets ``<kind>.<ext>`` files. ``partition_by="run"`` (or
    any columns) writes a Parquet dataset under the directory ``out`` (``out/<kind>/`` for several
    kinds), one ``run=<name>`` folder per run, readable with ``pyarrow.dataset`` (names are
    URI-escaped, ``/`` as ``%2F``).

    Nothing is destroyed: an existing ``out`` is refused unless ``force=True``; with it, a file is
    replaced, and a directory too if it holds nothing but files an export writes (an earlier
    export). A name containing ``tfevents`` (an event file's name: the input's own files, or a
    file TensorBoard would take for one) and a directory holding the input are refused even with
    ``force``. Outputs are written under a hidden temporary name and renamed into place at the end,
    so a failed export leaves nothing behind. A new file inside the logdir (``runs/all.parquet``)
    is fine. The read's problems (unreadable files, corrupt records) are in ``ExportStats.report``.

    ``source`` is a path (with :func:`tbscope.scan` filters as keyword arguments: ``runs=``,
    ``tags=``, ``steps=``, ...) or a :class:`tbscope.Logdir`. ``progress`` is a callable that
    gets the running :class:`ExportStats` after every batch, or True for a progress display on
    the terminal. Every column is kept; in CSV, list columns become JSON text and binary columns
    base64; in JSON lines ``timestamp`` is ISO 8601 text and NaN or infinite floats are null
    (JSON has no such numbers: use CSV or Parquet to keep them).

    >>> tbscope.export("runs/", "scalars.parquet", tags="loss*")  # doctest: +SKIP
    """
    from tbscope._filters import kinds_list
    from tbscope._reader import Logdir, scan

    started = time.perf_counter()
    kl = kinds_list(kinds) or []
    bad = [k for k in kl if k not in _EXPORTABLE]
    if bad:
        raise ValueError(f"cannot export kind(s) {bad}; choose from {', '.join(_EXPORTABLE)}")
    if max_rows < 1:
        raise ValueError("max_rows= must be a positive number of rows per batch")
    out_path = Path(os.fspath(out))
    parts = [partition_by] if isinstance(partition_by, str) else list(partition_by) if partition_by is not None else []
    if partition_by is not None and not parts:
        raise ValueError("partition_by= is empty; pass a column name such as 'run', or None")
    if parts:
        fmt = format or "parquet"
        if fmt != "parquet":
            raise ValueError(
                f"partition_by= writes a Parquet dataset; format={fmt!r} cannot be partitioned (drop partition_by or use parquet)"
            )
    else:
        fmt = _format_of(out_path, format) if (len(kl) == 1 or format is None) else format
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")

    if isinstance(source, Logdir):
        if scan_kwargs:
            raise TypeError(
                f"export() takes scan filters ({', '.join(scan_kwargs)}) only with a path; pass them to tbscope.scan() instead"
            )
        lg = source
    else:
        lg = scan(source, kinds=kl, **scan_kwargs)
    directory = bool(parts) or len(kl) > 1
    _check_output(out_path, lg.path, directory=directory, force=force)

    stats = ExportStats()
    problems: dict[Problem, None] = {}
    tick, done = _progress_callback(progress)
    try:
        if not directory:
            _write_file(_batches(lg, kl[0], max_rows, problems), out_path, fmt, stats, kl[0], tick, replace=force)
        else:
            out_path.parent.mkdir(parents=True, exist_ok=True)
            # Everything goes into a hidden directory next to out, renamed into place at the end.
            staging = _hidden(out_path, directory=True)
            try:
                for kind in kl:
                    if parts:
                        target = staging / kind if len(kl) > 1 else staging
                        _write_dataset(_batches(lg, kind, max_rows, problems), target, parts, stats, kind, tick)
                    else:
                        _write_file(
                            _batches(lg, kind, max_rows, problems),
                            staging / f"{kind}{_EXT[fmt]}",
                            fmt,
                            stats,
                            kind,
                            tick,
                        )
                _publish_dir(staging, out_path)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            stats.files = [str(out_path / os.path.relpath(f, staging)) for f in stats.files]
    finally:
        done()
    from tbscope._report import Report

    stats.report = Report(tuple(problems))
    stats.seconds = time.perf_counter() - started
    return stats


def _put(tmp: Path, target: Path, replace: bool) -> None:
    """Gives the finished ``tmp`` the name ``target``: with ``replace`` in one rename; without,
    only if ``target`` still does not exist (a file that appeared meanwhile is not clobbered)."""
    if replace:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # fails with FileExistsError rather than replace
    except FileExistsError:
        raise FileExistsError(
            f"{target} already exists (it appeared during the export); choose a new name, or pass force=True (tbscope export --force) to replace it"
        ) from None
    except OSError:
        # No hard links on this file system: the check is no longer atomic, but still made.
        if os.path.lexists(target):
            raise FileExistsError(
                f"{target} already exists (it appeared during the export); choose a new name, or pass force=True to replace it"
            ) from None
        os.replace(tmp, target)
        return
    tmp.unlink()


def _write_file(
    batches: Iterator[pa.RecordBatch],
    target: Path,
    fmt: str,
    stats: ExportStats,
    kind: str,
    tick: Callable[[ExportStats], None] | None,
    replace: bool = True,
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _hidden(target, directory=False)
    sink: _Sink | None = None
    stats.kinds.setdefault(kind, 0)
    try:
        for batch in batches:
            if sink is None:
                sink = _Sink(tmp, fmt, batch.schema)
            sink.write(batch)
            stats.rows += batch.num_rows
            stats.kinds[kind] += batch.num_rows
            if tick is not None:
                tick(stats)
        if sink is None:
            # No rows: still a valid file with the table's columns (from an empty read).
            sink = _Sink(tmp, fmt, _empty_schema(kind))
        sink.close()
        sink = None
        _put(tmp, target, replace)
    except BaseException:
        if sink is not None:
            sink.close()
        tmp.unlink(missing_ok=True)
        raise
    stats.files.append(str(target))
    stats.bytes += target.stat().st_size


def _empty_schema(kind: str) -> pa.Schema:
    """The schema of an empty table of ``kind``, from a scan that reads nothing."""
    import pyarrow as pa

    from tbscope import _core

    with tempfile.TemporaryDirectory() as d:
        native = _core.NativeReader(d, kinds=[kind])
        native.load()
        table = native.hparams() if kind == "hparams" else native.table(kind)
        return pa.table(table).schema


def _write_dataset(
    batches: Iterator[pa.RecordBatch],
    target: Path,
    parts: list[str],
    stats: ExportStats,
    kind: str,
    tick: Callable[[ExportStats], None] | None,
) -> None:
    import pyarrow as pa
    import pyarrow.dataset as ds

    stats.kinds.setdefault(kind, 0)
    first = next(batches, None)
    schema = first.schema if first is not None else _empty_schema(kind)
    missing = [p for p in parts if p not in schema.names]
    if missing:
        raise ValueError(f"cannot partition {kind} by {missing}: it has columns {', '.join(schema.names)}")

    def counted() -> Iterator[pa.RecordBatch]:
        for b in [first] if first is not None else []:
            yield from _count(b)
        for b in batches:
            yield from _count(b)

    def _count(b: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        # Partition values must be plain strings: dictionaries can differ from batch to batch.
        cols = [
            c.dictionary_decode() if pa.types.is_dictionary(c.type) and n in parts else c
            for n, c in zip(b.schema.names, b.columns)
        ]
        yield pa.RecordBatch.from_arrays(cols, schema=plain)
        stats.rows += b.num_rows
        stats.kinds[kind] += b.num_rows
        if tick is not None:
            tick(stats)

    plain = pa.schema(
        [
            pa.field(
                f.name, f.type.value_type if pa.types.is_dictionary(f.type) and f.name in parts else f.type, f.nullable
            )
            for f in schema
        ]
    )
    written: list[str] = []
    target.mkdir(parents=True, exist_ok=True)
    ds.write_dataset(
        pa.RecordBatchReader.from_batches(plain, counted()),
        target,
        format="parquet",
        partitioning=ds.partitioning(pa.schema([plain.field(p) for p in parts]), flavor="hive"),
        existing_data_behavior="overwrite_or_ignore",
        basename_template=f"{kind}-{{i}}.parquet",
        file_visitor=lambda f: written.append(f.path),
        # Bounded memory: row groups are flushed at 1M rows per partition.
        max_rows_per_group=1 << 20,
        max_rows_per_file=1 << 24,
        max_open_files=512,
    )
    for f in written:
        stats.files.append(f)
        stats.bytes += os.path.getsize(f)
