"""``SummaryWriter``: a drop-in for torch's and tensorboardX's, backed by the native writer.

Every ``add_*`` call encodes one event into a native buffer on the caller's thread (one call
into Rust, no protobuf objects); a Rust thread that never takes the GIL writes and flushes it.
The rich kinds (images, audio, hparams, ...) are encoded by :mod:`tbscope._summary` and handed
over as bytes.

Durability: writers still open at interpreter exit are closed (``atexit``); a SIGTERM flushes
them first; after ``os.fork()`` a child never touches its parent's native writer and opens a
file of its own only if it writes. These hooks are set by the first writer, not by ``import
tbscope``: a program that only reads registers nothing.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from tbscope import _core
from tbscope._mirror import split_url as _split_url
from tbscope._writer import lifecycle
from tbscope._writer.file_writer import _FileWriterView
from tbscope._writer.rich import RichKinds
from tbscope._writer.sinks import (
    _TENSOR_METADATA,
    _hostname,
    _join,
    _purge_events,
    _Run,
    _Sink,
    event_file_stem,
)
from tbscope._writer.values import (
    ArrayLike,
    _float_array,
    _need_mapping,
    _scalar_or_raise,
    _step,
    _to_numpy,
    _walltime,
)

__all__ = ["SummaryWriter"]

Layout = Literal["tbscope", "torch"]


class SummaryWriter(RichKinds):
    """Writes TensorBoard event files; a drop-in for ``torch.utils.tensorboard.SummaryWriter``
    and ``tensorboardX.SummaryWriter``.

    Every method and argument of both exists, so changing the import is enough. The caller's
    thread only encodes (one call into Rust per ``add_*``); a background thread writes.

    Parameters
    ----------
    log_dir: the run directory (``logdir`` is tensorboardX's name for it). Default
        ``runs/<Mon DD_HH-MM-SS>_<hostname><comment>`` like torch. A URL (``s3://...``,
        ``memory://...``; needs ``fsspec``) writes a series of objects, one per flush.
    comment: appended to the default ``log_dir``; ignored when ``log_dir`` is given.
    purge_step: write a restart marker at this step: TensorBoard then hides older points at
        steps >= ``purge_step`` (to resume a crashed run in the same ``log_dir``).
    max_queue: wake the writer thread once this many events are waiting.
    flush_secs: hand data to the OS at least this often (seconds).
    filename_suffix: appended to the event file's name.
    write_to_disk: False writes nothing at all (tensorboardX).
    comet_config: accepted for tensorboardX compatibility; ignored.
    layout: ``"tbscope"`` (default) writes ``add_scalars`` and ``add_hparams`` into the run
        itself; ``"torch"`` makes the extra run folders torch's writer makes and names text tags
        ``<tag>/text_summary`` as torch does.
    max_pending_bytes: a writer further behind than this blocks the caller until it catches up.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: float = 120,
        filename_suffix: str = "",
        write_to_disk: bool = True,
        logdir: str | os.PathLike[str] | None = None,
        comet_config: dict[str, Any] | None = None,
        *,
        layout: Layout = "tbscope",
        max_pending_bytes: int = 256 << 20,
        **kwargs: Any,
    ) -> None:
        if layout not in ("tbscope", "torch"):
            raise ValueError(f"layout must be 'tbscope' or 'torch', not {layout!r}")
        if log_dir is None or log_dir == "":
            log_dir = logdir
        if not log_dir:
            from datetime import datetime

            log_dir = os.path.join("runs", datetime.now().strftime("%b%d_%H-%M-%S") + "_" + _hostname() + comment)
        self.log_dir: str = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue = int(max_queue)
        self.flush_secs = float(flush_secs)
        self.filename_suffix = filename_suffix
        self.layout: Layout = layout
        self.kwargs = kwargs
        self._comet_config = comet_config
        self._write_to_disk = bool(write_to_disk)
        self._max_pending_bytes = int(max_pending_bytes)
        self._directory, self._remote = _split_url(self.log_dir)
        self._files: list[str] = []
        self._runs: dict[str, _Run] = {}
        self._json_exported: dict[str, int] = {}
        self._scalars_keys: dict[str, tuple[str, str]] = {}
        lifecycle.install_hooks()
        self._main = self._run_for(self._directory, main=True)
        self._w: _Sink = self._main.sink
        if self._write_to_disk:
            self._main.open()  # the run exists from the start, as with torch's writer
            lifecycle.install_sigterm()
        lifecycle.register(self)

    # -- plumbing ---------------------------------------------------------------------------

    def _run_for(self, directory: str, main: bool = False) -> _Run:
        run = self._runs.get(directory)
        if run is None:
            run = self._runs[directory] = _Run(self, directory, main)
        return run

    def _open_sink(self, run: _Run) -> _Sink:
        """Open a new event file (or remote object series) for ``run``; called by _Run.open."""
        if self._remote:
            from tbscope._remote import RemoteRun

            remote = RemoteRun(
                run.directory, event_file_stem(), self.filename_suffix, self.flush_secs, self._max_pending_bytes
            )
            run.attach_remote(self, remote)
            self._files.append(remote.stem_url)
            sink: _Sink = remote.sink
        else:
            sink = self._open_local(run.directory)
        if run.main and self.purge_step is not None:
            for ev in _purge_events(int(self.purge_step)):
                sink.event(ev)
            self.purge_step = None  # only the first file, as torch does
        return sink

    def _open_local(self, directory: str) -> _Sink:
        os.makedirs(directory, exist_ok=True)
        for _ in range(1000):
            path = os.path.join(directory, event_file_stem() + self.filename_suffix)
            try:
                sink: _Sink = _core.EventWriter(
                    path,
                    flush_secs=self.flush_secs,
                    max_queue=self.max_queue,
                    max_pending_bytes=self._max_pending_bytes,
                )
            except FileExistsError:
                continue  # a file of an earlier process with our pid, same second: next counter
            self._files.append(path)
            return sink
        raise FileExistsError(f"could not create a new event file in {directory!r}: every name is taken")

    def _after_fork(self) -> None:
        for run in self._runs.values():
            run.forget_after_fork()
        self._files = []
        self._w = self._main.sink

    # -- scalars (the hot path) -------------------------------------------------------------

    def add_scalar(
        self,
        tag: str,
        scalar_value: float | ArrayLike,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
        *,
        display_name: str = "",
        summary_description: str = "",
    ) -> None:
        """Log one number.

        ``scalar_value``: a number, numpy scalar, or 0-d / one-element array or tensor.
        ``new_style``: write a rank-0 float tensor (``"scalars"`` plugin) instead of the legacy
        ``simple_value``; ``double_precision`` makes it float64. ``display_name`` and
        ``summary_description`` (tensorboardX) set the chart title and description.
        """
        if display_name or summary_description:
            return self._add_scalar_slow(
                tag, scalar_value, global_step, walltime, new_style, double_precision, display_name, summary_description
            )
        try:
            self._w.scalar(tag, scalar_value, global_step, walltime, new_style, double_precision)
        except TypeError:
            self._add_scalar_slow(
                tag, scalar_value, global_step, walltime, new_style, double_precision, display_name, summary_description
            )

    def _add_scalar_slow(
        self,
        tag: Any,
        value: Any,
        step: Any,
        walltime: Any,
        new_style: Any,
        double_precision: Any,
        display_name: str,
        description: str,
    ) -> None:
        if not isinstance(tag, str):
            raise TypeError(f"add_scalar: tag must be a str, not {type(tag).__name__}")
        if isinstance(new_style, str):  # tensorboardX's positional order: display_name, description
            display_name, new_style = new_style, False
            if isinstance(double_precision, str):
                description, double_precision = double_precision, False
        v = _scalar_or_raise(tag, value, "add_scalar")
        s, wt = _step(step), _walltime(walltime)
        if not (display_name or description):
            self._w.scalar(tag, v, s, wt, bool(new_style), bool(double_precision))
            return
        from tbscope import _pb, _summary

        md = _summary.tensor_metadata("scalars" if new_style else "", b"", display_name, description)
        if not new_style:
            payload = _pb.float_field(2, v, keep_default=True)  # Summary.Value.simple_value
            value = _pb.bytes_field(1, tag) + payload + _pb.message_field(9, md)
            self._w.summary(_pb.message_field(1, value), s, wt)
        else:
            import numpy as np

            arr = np.array(v, dtype=np.float64 if double_precision else np.float32)
            self._w.summary(_summary.tensor_summary(tag, arr, md), s, wt)

    def log(self, step: int, metrics: Mapping[str, float | ArrayLike], walltime: float | None = None) -> None:
        """Log many scalars at one step in one event: ``writer.log(step, {"loss": l, "acc": a})``.

        Values must be scalar-like (numbers, numpy scalars, one-element arrays or tensors);
        anything else raises TypeError naming the tag.
        """
        w = self._w
        try:
            if type(w) is _core.EventWriter:
                # A dict is read natively, item by item, with no lists built; any other
                # Mapping, a step or walltime that is not an int or float, or a value that is
                # not a number comes back as TypeError and goes the careful way.
                w.scalars_dict(metrics, step, walltime)  # type: ignore[arg-type]
            else:  # write_to_disk=False, or a file that opens on its first record
                w.scalars(list(metrics), list(metrics.values()), step, walltime)
        except TypeError:
            _need_mapping("log", "metrics", metrics)
            self._scalars_slow("log", list(metrics), list(metrics.values()), step, walltime)

    def _scalars_slow(self, method: str, tags: list[Any], values: list[Any], step: Any, walltime: Any) -> None:
        for t in tags:
            if not isinstance(t, str):
                raise TypeError(f"{method}: tags must be str, got {t!r} ({type(t).__name__})")
        clean = [_scalar_or_raise(t, v, method) for t, v in zip(tags, values)]
        self._w.scalars(tags, clean, _step(step), _walltime(walltime))

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, float | ArrayLike],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log several related scalars at one step.

        Default layout: one event in this run with tags ``<main_tag>/<tag>``. With
        ``layout="torch"``: torch's way, each ``tag`` in a run folder of its own
        (``<log_dir>/<main_tag>_<tag>``) under the tag ``main_tag``.
        """
        if type(tag_scalar_dict) is not dict:
            _need_mapping("add_scalars", "tag_scalar_dict", tag_scalar_dict)
        if self.layout == "torch":
            return self._add_scalars_torch(main_tag, tag_scalar_dict, global_step, walltime)
        tags = [f"{main_tag}/{t}" for t in tag_scalar_dict]
        for full, t in zip(tags, tag_scalar_dict):
            self._scalars_keys.setdefault(_join(self.log_dir, f"{main_tag}/{t}", self._remote), (self._directory, full))
        values = list(tag_scalar_dict.values())
        try:
            self._w.scalars(tags, values, global_step, walltime)
        except TypeError:
            self._scalars_slow("add_scalars", tags, values, global_step, walltime)

    def _add_scalars_torch(self, main_tag: str, d: Mapping[str, Any], global_step: Any, walltime: Any) -> None:
        wt = time.time() if walltime is None else float(walltime)  # one instant for all, as torch
        s = _step(global_step)
        for tag, value in d.items():
            directory = _join(self._directory, main_tag.replace("/", "_") + "_" + tag, self._remote)
            run = self._run_for(directory)
            self._scalars_keys.setdefault(
                _join(self.log_dir, main_tag.replace("/", "_") + "_" + tag, self._remote), (directory, main_tag)
            )
            run.sink.scalar(main_tag, _scalar_or_raise(tag, value, "add_scalars"), s, wt, False, False)

    # -- histograms -------------------------------------------------------------------------

    @property
    def default_bins(self) -> list[float]:
        """TensorFlow's default histogram bucket limits, as torch and tensorboardX build them."""
        v = 1e-12
        pos: list[float] = []
        while v < 1e20:
            pos.append(v)
            v *= 1.1
        return [-x for x in reversed(pos)] + [0.0] + pos

    def add_histogram(
        self,
        tag: str,
        values: ArrayLike,
        global_step: int | None = None,
        bins: str | int | Sequence[float] | ArrayLike = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """Log the distribution of ``values`` (any shape; numpy, torch, jax, lists).

        ``bins="tensorflow"`` (default) gives exactly torch's buckets for the same input. Any
        other numpy rule (``"auto"``, ``"fd"``, ...), a bin count or an array of edges goes
        through ``numpy.histogram_bin_edges``. ``max_bins`` merges neighbouring buckets as torch.
        """
        import numpy as np

        # The common case (a native-order float32/float64 C-contiguous array, default bins)
        # goes straight to the native call, which takes any shape as its flat buffer.
        if (
            type(values) is np.ndarray
            and values.dtype.char in "fd"
            and values.dtype.isnative
            and values.flags.c_contiguous
            and values.size
            and max_bins is None
            and isinstance(bins, str)
            and bins == "tensorflow"
        ):
            self._w.histogram(tag, values, _step(global_step), _walltime(walltime))
            return
        arr = _float_array(values)
        if arr.size == 0:
            raise ValueError(f"add_histogram({tag!r}): The input has no element.")
        edges = None
        if not (isinstance(bins, str) and bins == "tensorflow"):
            # torch computes edges from float64 values; float32 ones would give other edges.
            wide = arr if arr.dtype == np.float64 else arr.astype(np.float64)
            try:
                edges = np.ascontiguousarray(np.histogram_bin_edges(wide, bins=bins), dtype=np.float64)
            except (IndexError, MemoryError, OverflowError) as e:
                # numpy's own message for an absurd bin count (2**63) is an IndexError.
                raise ValueError(
                    f"add_histogram({tag!r}): bins={bins!r} cannot be used ({e}); give a rule such as 'auto', a modest bin count or an array of edges"
                ) from None
        self._w.histogram(
            tag, arr, _step(global_step), _walltime(walltime), edges, None if max_bins is None else int(max_bins)
        )

    def add_histogram_raw(
        self,
        tag: str,
        min: float,
        max: float,
        num: float,
        sum: float,
        sum_squares: float,
        bucket_limits: Sequence[float] | ArrayLike,
        bucket_counts: Sequence[float] | ArrayLike,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log a histogram you computed: bucket ``i`` counts values up to ``bucket_limits[i]``."""
        import numpy as np

        limits = _to_numpy(bucket_limits).astype(np.float64).reshape(-1).tolist()
        counts = _to_numpy(bucket_counts).astype(np.float64).reshape(-1).tolist()
        if len(limits) != len(counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        self._w.histogram_raw(
            tag,
            float(min),
            float(max),
            float(num),
            float(sum),
            float(sum_squares),
            limits,
            counts,
            _step(global_step),
            _walltime(walltime),
        )

    # -- tensors ----------------------------------------------------------------------------

    def add_tensor(
        self, tag: str, tensor: ArrayLike, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        """Log an array of any dtype and shape as a TensorProto (bool, ints, uints, float16,
        bfloat16, float32/64, complex, strings and bytes)."""
        import numpy as np

        from tbscope import _summary

        arr = _to_numpy(tensor)
        s, wt = _step(global_step), _walltime(walltime)
        if arr.dtype.kind in "USO":
            # Strings go to string_val, one entry per element, which the native tensor() lacks.
            return self._w.summary(_summary.tensor_summary(tag, arr, _TENSOR_METADATA), s, wt)
        dtype = _summary.tf_dtype(arr.dtype)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        raw = arr.reshape(-1).view(np.uint8)  # any fixed-size dtype, bfloat16 included
        self._w.tensor(tag, raw, dtype, list(arr.shape), s, wt, _TENSOR_METADATA)

    def add_hparams(
        self,
        hparam_dict: Mapping[str, Any],
        metric_dict: Mapping[str, float],
        hparam_domain_discrete: Mapping[str, Sequence[Any]] | None = None,
        run_name: str | None = None,
        global_step: int | None = None,
        *,
        name: str | None = None,
    ) -> None:
        """Record hyperparameters and the metrics to compare them by.

        Default layout: the experiment, session start and session end records go into this
        run, and each metric is an ordinary scalar here (so the hparams table links to the
        run's own curves); ``run_name`` (tensorboardX: ``name``) writes them into that
        sub-folder instead. ``layout="torch"``: a sub-folder named ``run_name`` or the current
        time, as torch does.
        """
        if isinstance(hparam_domain_discrete, str):  # tensorboardX's positional order: name, step
            name, hparam_domain_discrete = hparam_domain_discrete, None
            if run_name is not None and not isinstance(run_name, str):
                global_step, run_name = run_name, None
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        from tbscope import _summary

        exp, ssi, sei = _summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        run_name = run_name or name
        if self.layout == "torch" and not run_name:
            run_name = str(time.time())
        s = _step(global_step)
        if not run_name:
            for data in (exp, ssi, sei):
                self._w.summary(data, s, None)
            already = self._scalar_tags_written(list(metric_dict))
            for k, v in metric_dict.items():
                # The dashboard takes a metric's value from the run's own curve when it has one.
                # A second point at an earlier step would cut that curve short in TensorBoard,
                # which drops earlier points at or after a step that goes back (a "restart").
                if k not in already:
                    self.add_scalar(k, v, s)
            return
        # Torch opens a whole SummaryWriter for the sub-folder and closes it: do the same
        # (its own file, written and closed before we return).
        with SummaryWriter(
            _join(self.log_dir, run_name, self._remote),
            max_queue=self.max_queue,
            flush_secs=self.flush_secs,
            filename_suffix=self.filename_suffix,
            write_to_disk=self._write_to_disk,
        ) as sub:
            for data in (exp, ssi, sei):
                sub._w.summary(data, s, None)
            for k, v in metric_dict.items():
                sub.add_scalar(k, v, s)

    def _scalar_tags_written(self, tags: list[str]) -> set[str]:
        """Which of ``tags`` this writer already wrote as scalars into its own run (read back
        from its files; URL log_dirs cannot be read back and report none)."""
        if self._remote or not tags:
            return set()
        from tbscope._reader import scan

        self.flush()
        exact = [re.compile("^" + re.escape(t) + "$") for t in tags]
        found: set[str] = set()
        for f in self._files_in(self._directory):
            series = scan(f, tags=exact, kinds="scalars").series().to_arrow()
            found.update(str(t) for t in series.column("tag").to_pylist())
        return found

    def _files_in(self, directory: str) -> list[str]:
        """This writer's event files in ``directory`` that still exist, oldest first."""
        d = os.path.normpath(directory)
        return [f for f in self._files if os.path.dirname(f) == d and os.path.exists(f)]

    # -- tensorboardX extras ----------------------------------------------------------------

    @contextlib.contextmanager
    def use_metadata(self, *, global_step: int | None = None, walltime: float | None = None) -> Iterator[SummaryWriter]:
        """Default ``global_step``/``walltime`` for every ``add_*`` call inside the block
        (tensorboardX)::

            with writer.use_metadata(global_step=10):
                writer.add_scalar("loss", 3.0)
        """
        if "_defaults_active" in self.__dict__:
            raise RuntimeError("use_metadata() blocks cannot be nested on one writer")
        if global_step is None and walltime is None:
            raise ValueError("use_metadata() needs global_step or walltime")
        names = [n for n in dir(type(self)) if n.startswith("add_") and callable(getattr(type(self), n))]
        self.__dict__["_defaults_active"] = True
        try:
            for n in names:
                self.__dict__[n] = _with_defaults(getattr(type(self), n).__get__(self), global_step, walltime)
            yield self
        finally:
            for n in names:
                self.__dict__.pop(n, None)
            del self.__dict__["_defaults_active"]

    def export_scalars_to_json(self, path: str | os.PathLike[str]) -> None:
        """Write the scalars logged with ``add_scalars`` since the last export as JSON,
        ``{key: [[wall_time, step, value], ...]}`` (tensorboardX). They are read back from the
        event files rather than kept in memory."""
        if self._remote:
            raise NotImplementedError("export_scalars_to_json reads the event files back: it needs a local log_dir")
        from tbscope._reader import scan

        self.flush()
        out: dict[str, list[list[float]]] = {}
        for key, (directory, tag) in self._scalars_keys.items():
            rows: list[list[float]] = []
            exact = re.compile("^" + re.escape(tag) + "$")
            for f in self._files_in(directory):
                df = scan(f, tags=exact, kinds="scalars").scalars().to_pandas()
                rows.extend([float(w), int(s), float(v)] for w, s, v in zip(df["wall_time"], df["step"], df["value"]))
            done = self._json_exported.get(key, 0)
            out[key] = rows[done:]
            self._json_exported[key] = len(rows)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(out, fh)

    # -- files ------------------------------------------------------------------------------

    def get_logdir(self) -> str:
        """The directory (or URL) event files are written into."""
        return self.log_dir

    @property
    def logdir(self) -> str:
        """tensorboardX's name for :attr:`log_dir`."""
        return self.log_dir

    @property
    def files(self) -> list[str]:
        """Event files this writer opened in this process, in order (for a URL: the common
        prefix of each series of objects)."""
        return list(self._files)

    @property
    def file_writer(self) -> _FileWriterView:
        """torch's low-level writer of this run: ``add_summary``/``add_event`` of protobufs."""
        return _FileWriterView(self, self._main, self.log_dir)

    @property
    def all_writers(self) -> dict[str, _FileWriterView]:
        """A file writer per run directory this writer writes into (torch layout: sub-runs)."""
        out = {}
        for directory, run in self._runs.items():
            name = self.log_dir if run.main else directory
            out[name] = _FileWriterView(self, run, name)
        return out

    def _get_file_writer(self) -> _FileWriterView:
        return self.file_writer

    def flush(self, fsync: bool = False) -> None:
        """Hand everything logged so far to the OS (it then survives the process being killed);
        ``fsync=True`` also waits for the disk (it then survives a power cut). For a URL, upload
        it as a new object. Raises OSError if data could not be written (it stays queued)."""
        first: BaseException | None = None
        for run in list(self._runs.values()):
            try:
                run.flush(fsync)
            except Exception as e:  # noqa: BLE001 - flush every run, then raise the first error
                first = first or e
        if first is not None:
            raise first

    def close(self) -> None:
        """Flush and close every file. A later ``add_*`` opens a new file (as torch does)."""
        first: BaseException | None = None
        for run in list(self._runs.values()):
            try:
                run.close()
            except Exception as e:  # noqa: BLE001 - close every run, then raise the first error
                first = first or e
        self._w = self._main.sink
        if first is not None:
            raise first

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tbscope.SummaryWriter {self.log_dir!r}>"


def _with_defaults(method: Callable[..., Any], global_step: int | None, walltime: float | None) -> Callable[..., Any]:
    """``method`` with ``global_step``/``walltime`` filled in when the caller leaves them out."""
    sig = inspect.signature(method)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        if global_step is not None and "global_step" in sig.parameters and bound.arguments.get("global_step") is None:
            bound.arguments["global_step"] = global_step
        if walltime is not None and "walltime" in sig.parameters and bound.arguments.get("walltime") is None:
            bound.arguments["walltime"] = walltime
        return method(*bound.args, **bound.kwargs)

    call.__doc__ = method.__doc__
    return call
