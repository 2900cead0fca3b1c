"""Native module: the Rust reader, Arrow tables and the event writer. Use the ``tbscope`` API
instead."""

from collections.abc import Sequence
from os import PathLike
from typing import Any, final

from typing_extensions import Buffer

__all__ = [
    "EventWriter",
    "NativeReader",
    "S3Fetcher",
    "Stream",
    "Table",
    "__version__",
    "commit_rewrite",
    "downsample",
    "ema",
    "event_files",
    "group_rows",
    "load_progress",
    "read_records",
    "read_trace",
    "record_heads",
    "rewrite",
    "run_name",
    "split_points",
    "to_csv",
]

__version__: str

@final
class Table:
    """Record batches exported through the Arrow PyCapsule interface."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    @property
    def num_rows(self) -> int: ...

@final
class Stream:
    """Pieces of one table, read a group of files at a time; nothing is kept."""

    def __iter__(self) -> Stream: ...
    def __next__(self) -> Table: ...

@final
class NativeReader:
    def __new__(
        cls,
        path: str | PathLike[str],
        *,
        runs: str | None = None,
        tags: str | None = None,
        kinds: list[str] | None = None,
        step_lo: int | None = None,
        step_hi: int | None = None,
        restarts: str = "all",
        verify: bool = True,
        max_record_bytes: int = ...,
        provenance: bool = False,
        threads: int = 0,
        cache_dir: str | PathLike[str] | None = None,
        tail_timeout: float = 600.0,
        byte_range: tuple[int, int | None] | None = None,
        fold_scalars: bool = False,
        fold_piece_bytes: int | None = None,
    ) -> NativeReader:
        """``byte_range=(start, end)``: ``path`` is one event file and only its records starting
        in ``[start, end)`` are read (``end`` a record boundary, e.g. from :func:`split_points`;
        None: to the end), with their offsets in the whole file. ``fold_scalars=True`` (no
        cache, ``restarts="all"``): scalar rows are folded into statistics as they are read and
        not kept (``scalar_stats``, ``summary_table``; ``table("scalars")`` then fails), read
        ``fold_piece_bytes`` of event files at a time (None: the default, 32 MiB)."""
    def load(self, fetching: dict[str, int] | None = None) -> tuple[int, int, int, int]:
        """Read what is new: (files read, bytes read, records, rows). ``fetching``: files being
        filled in (a remote mirror's first fetch) and how many of their first bytes are there,
        for this load and the next ones (``{}``: every file whole again; None: as before)."""
    def table(self, kind_name: str) -> Table: ...
    def stream(self, kind_name: str, max_bytes: int) -> Stream: ...
    def series(self) -> Table: ...
    def logs(self) -> Table: ...
    def hparams(self) -> Table: ...
    def runs_table(self) -> Table: ...
    def run_facts(self) -> Table:
        """Per run: the runs table's columns, then last_modified, series, first_step, last_step."""
    def summary_table(self, stats: list[tuple[str, str]]) -> Table:
        """Per run of runs_table(): a column <tag>:<suffix> per tag with scalars (sorted) and per
        (statistic, suffix) of ``stats``."""
    def run_names(self) -> list[str]: ...
    def report(self) -> list[tuple[str, str, str, int, int, str]]: ...
    def file_path(self, rel: str) -> str | None: ...
    def defer_cache_writes(self) -> None:
        """Loads publish their rows without writing the cache; write_cache() writes it."""
    def write_cache(self) -> str | None:
        """Writes the generation loads left unwritten (GIL released; the reader held only to
        copy its state and take the outcome back); the generation published, else None."""
    def abandon_cache_write(self) -> None:
        """A deferred write running stops before its next file; later ones do nothing."""
    def cache_info(self) -> tuple[str, str, str | None, bool, int, list[str], int, int] | None:
        """(dir, status, generation, written, runs dropped, warnings) of the last load through
        the cache; None for a reader without one."""

@final
class S3Fetcher:
    """A client of one S3 bucket (Rust ``object_store``) for the remote mirror: listings, and
    ranged GETs written into local files as they arrive, without the GIL; one client may serve many
    threads at once. Credentials come resolved (``tbscope._transport``); without a region or
    an endpoint, AWS is asked for the bucket's region here. ``retries``: tries of a request
    after the first, with backoff, inside the client."""

    def __new__(
        cls,
        bucket: str,
        *,
        region: str | None = None,
        endpoint: str | None = None,
        key_id: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        anonymous: bool = False,
        retries: int = 2,
    ) -> S3Fetcher: ...
    def list(self, prefix: str) -> list[tuple[str, int, float]]:
        """Every object under ``prefix`` (recursively; ``logs/run1`` lists ``logs/run1/...``,
        not ``logs/run10/...``; empty: the bucket): (key, size, last modified in seconds)."""
    def head(self, key: str) -> tuple[str, int, float]:
        """The object ``key`` itself: (key, size, last modified in seconds);
        FileNotFoundError when there is none."""
    def get_into(self, key: str, start: int, end: int, fd: int) -> int:
        """Bytes [start, end) of object ``key`` into file descriptor ``fd`` at offset
        ``start``; the count written (fewer when the object is shorter). FileNotFoundError
        when the object is not there, ValueError for a key it cannot name, else OSError."""

@final
class EventWriter:
    """Writes one TensorBoard event file; each record call appends one Event record.

    Records are encoded and framed on the calling thread into a pending buffer; a background
    thread (one per writer) hands them to the OS when ``max_queue`` records wait (at most one
    such write per millisecond, so fast loops are batched), every ``flush_secs``, on
    ``flush()`` and on ``close()``. Above ``max_pending_bytes`` queued, a record call blocks
    until the thread has caught up (not in memory mode, which never blocks). Dropping the
    writer flushes it.

    ``path`` is created with O_EXCL (an existing file raises FileExistsError; its directory
    must exist) and gets its ``file_version`` record before the constructor returns.
    ``path=None`` is memory mode: no file and no thread; ``take()`` returns the framed records
    queued so far, starting with the ``file_version`` record, so the concatenation of
    everything taken is a valid event file.

    Errors: a failed write keeps its records queued (the file is cut back to its last whole
    record) and the next call raises OSError with the errno, the path and how much is still
    queued; ``flush()``/``close()`` retry. If the file is removed or replaced while open, the
    next call raises FileNotFoundError: the writer re-creates the directory and the file (a
    path taken by another file is left alone and ``<path>.1`` is used) and keeps the queued
    records for it.
    """

    def __new__(
        cls,
        path: str | PathLike[str] | None,
        *,
        flush_secs: float = 120.0,
        max_queue: int = 10,
        max_pending_bytes: int = ...,
    ) -> EventWriter: ...
    @property
    def path(self) -> str | None:
        """The file written to (None in memory mode)."""
    @property
    def closed(self) -> bool: ...
    @property
    def pending_bytes(self) -> int:
        """Bytes queued and not yet handed to the OS."""
    @property
    def bytes_written(self) -> int:
        """Bytes handed to the OS so far, file_version record included (memory mode: taken)."""
    @property
    def records_written(self) -> int: ...
    def scalar(
        self,
        tag: str,
        value: float,
        step: int | None = None,
        wall_time: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """One scalar: ``simple_value`` (float32), or with ``new_style`` a rank-0 DT_FLOAT
        tensor with ``scalars`` metadata (DT_DOUBLE with ``double_precision``).

        ``step=None`` leaves the step out (it reads as 0); ``wall_time=None`` means now.
        """
    def scalars(
        self,
        tags: Sequence[str],
        values: Sequence[float],
        step: int | None = None,
        wall_time: float | None = None,
    ) -> None:
        """One Event holding one ``simple_value`` per tag."""
    def scalars_dict(
        self,
        metrics: dict[str, float],
        step: int | None = None,
        wall_time: float | None = None,
    ) -> None:
        """``scalars`` from a dict (subclasses too), read item by item without building
        lists. A key that is not a str or a value ``float()`` refuses raises TypeError and
        queues nothing. The encoded Summary of the last call is kept (and with it references
        to its keys, until ``close()``): a dict with the same key objects in the same order
        only has its values rewritten."""
    def histogram(
        self,
        tag: str,
        values: Buffer,
        step: int | None = None,
        wall_time: float | None = None,
        edges: Buffer | None = None,
        max_bins: int | None = None,
    ) -> None:
        """A legacy HistogramProto of a C-contiguous float64 or float32 buffer, binned as
        PyTorch's ``make_histogram`` does (``np.histogram`` counts; TensorFlow's default
        buckets when ``edges`` is None; ``max_bins`` grouping; trimmed to the support).
        From 2**16 values on the GIL is released; from 2**17 a second thread may help. The
        last ``edges`` are kept with their lookup tables, so the same edges every step cost
        nothing to prepare.

        Raises ValueError("The input has no element.") for empty input.
        """
    def histogram_raw(
        self,
        tag: str,
        min: float,
        max: float,
        num: float,
        sum: float,
        sum_squares: float,
        bucket_limits: Sequence[float],
        bucket_counts: Sequence[float],
        step: int | None = None,
        wall_time: float | None = None,
    ) -> None:
        """A HistogramProto with the given fields, written as is."""
    def tensor(
        self,
        tag: str,
        data: Buffer,
        dtype: int,
        shape: Sequence[int],
        step: int | None = None,
        wall_time: float | None = None,
        metadata: bytes | None = None,
    ) -> None:
        """A TensorProto with ``tensor_content`` = the raw little-endian C-order bytes of
        ``data``; ``dtype`` is the TensorFlow DataType number; ``metadata`` is an encoded
        SummaryMetadata."""
    def summary(self, summary: bytes, step: int | None = None, wall_time: float | None = None) -> None:
        """An encoded Summary message, wrapped in an Event."""
    def event(self, event: bytes) -> None:
        """An encoded Event message, framed as is."""
    def flush(self, fsync: bool = False) -> None:
        """Block until everything queued is handed to the OS (and synced with ``fsync``)."""
    def close(self) -> None:
        """Flush, stop the thread and close the file. Idempotent; later record calls raise
        ValueError. If the final write fails, OSError is raised and the writer stays open so
        ``close()`` can be retried."""
    def take(self) -> bytes:
        """Memory mode only: the framed records queued so far, which are then dropped."""

def rewrite(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    runs: str | None = None,
    tags: str | None = None,
    drop_tags: str | None = None,
    drop_steps: tuple[int | None, int | None] | None = None,
    preempt: bool = False,
    merge: bool = True,
    force: bool = False,
    commit: bool = False,
    threads: int = 0,
) -> dict[str, Any]:
    """Rewrite ``src`` into a staging directory next to ``dst`` (``tbscope._rewrite`` is the
    API). Patterns are native regexes. Returns ``staging`` (None once committed), the counts of
    ``tbscope.RewriteStats``, ``files_out`` and ``problems`` as report tuples. Raises
    FileExistsError for an occupied ``dst`` without ``force``, ValueError for an output that is,
    is inside or contains the input."""

def commit_rewrite(
    src: str | PathLike[str], staging: str | PathLike[str], dst: str | PathLike[str], *, force: bool = False
) -> None:
    """Publish a staging directory of ``rewrite(commit=False)`` as ``dst``."""

def to_csv(
    table: object,
    *,
    header: bool = True,
    chunk_rows: int = 100000,
    quote_chars: str | None = None,
    quote_empty: bool = False,
    fd: int | None = None,
) -> bytes | None:
    """An Arrow table as CSV in pandas' to_csv format, UTF-8: written to the file descriptor
    ``fd`` as it is formatted (then None), or returned. ValueError for a column type it does not
    format or a negative ``fd``; OSError when writing fails. ``quote_chars``: what makes a field quoted (default:
    comma, quote, newline)."""

def downsample(
    x: Buffer,
    y: Buffer,
    n: int,
    *,
    starts: Buffer | None = None,
    ends: Buffer | None = None,
    x_lo: float | None = None,
    x_hi: float | None = None,
    smoothing: float | None = None,
) -> tuple[bytes, bytes, bytes | None, bytes]:
    """M4 downsampling of each series (rows ``starts[i]:ends[i]`` of int64/float64 ``x`` and
    float64 ``y``, or all rows) to at most ``n`` rows, inside ``[x_lo, x_hi]``: (kept rows as
    int64 bytes, rows kept per series as int64 bytes, TensorBoard-smoothed values of the whole
    series at the kept rows as float64 bytes when ``smoothing`` is given, points inside the
    window per series as int64 bytes)."""

def ema(y: Buffer, weight: float, out: Buffer, *, starts: Buffer | None = None, ends: Buffer | None = None) -> None:
    """TensorBoard's smoothing of each series of float64 ``y`` into the writable float64
    ``out`` of the same length."""

def read_trace(path: str | PathLike[str]) -> Table:
    """A Chrome trace file (gzip-compressed or not) as a table of events: name, category,
    phase, start, duration, self_duration, process, thread, pid, tid, args. ValueError when the
    file is not a Chrome trace."""

def run_name(rel: str | PathLike[str]) -> str:
    """The run name of a path relative to the logdir (its components joined with ``/``, lossily
    for names that are not UTF-8, ``.`` for the logdir itself): the reader's one rule."""

def event_files(path: str | PathLike[str]) -> list[tuple[str, str, int]]:
    """The event files below ``path`` as the reader finds them (its run discovery): (run,
    file, bytes) for each, runs and files by name. OSError when ``path`` does not exist."""

def load_progress() -> tuple[int, int]:
    """(pieces of event files read, pieces given to read) by every load of this process so far."""

def group_rows(
    runs: list[Buffer],
    tags: list[Buffer],
    tag: list[int],
    groups: list[Buffer],
    n_groups: int,
    columns: list[list[Buffer]],
) -> tuple[bytes, list[bytearray]]:
    """One tag's rows of a table's chunks, grouped by run (a stable counting sort): chunk
    ``i`` has int32 run and tag codes, keeps the rows whose tag code is ``tag[i]`` (-1: none)
    and puts each in group ``groups[i][run code]`` (int64; -1 leaves the run out).
    ``columns[c][i]`` is column ``c`` of chunk ``i`` (8-byte numbers). Returns (rows per group
    as int64 bytes, one bytearray per column holding the kept rows group after group)."""

def read_records(
    path: str | PathLike[str],
    offsets: Sequence[int] | None = None,
    *,
    containing: bytes | None = None,
    max_record_bytes: int = ...,
) -> list[tuple[int, bytes]]:
    """(offset, payload) of whole records of one event file, read with the reader's framing
    (both CRCs checked, damage skipped, a record still being written left out): the records
    starting at ``offsets`` (OSError if one does not), else every record, or only those whose
    payload contains ``containing``."""

def split_points(
    path: str | PathLike[str],
    start: int,
    piece: int,
    *,
    max_record_bytes: int = ...,
) -> list[int]:
    """Record boundaries of one event file after ``start``, about ``piece`` bytes apart, found
    by hopping from record header to record header (length and its CRC; payloads unread). Stops
    early at a header that does not check out (the piece after the last cut holds the rest)."""

def record_heads(
    path: str | PathLike[str],
    *,
    max_record_bytes: int = ...,
) -> tuple[bytes, bytes, bytes, bytes, bytes, list[tuple[int, str]], list[tuple[int, str]]]:
    """The head of every whole, decodable record of one event file, in file order, read with the
    reader's framing: little-endian columns offset (u64), step (i64), wall_time (f64), what (u8:
    the ``Event`` field number of the event's payload, 0 for none) and status (i32: the
    ``SessionLog`` status of session_log events), then (offset, file_version) and (offset,
    source writer) of the records that carry one."""
