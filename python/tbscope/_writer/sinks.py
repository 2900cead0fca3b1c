"""Where a writer's events go: per run, the native ``EventWriter`` (or, for a URL, a series of
objects) opened on first use, stand-ins before that and for ``write_to_disk=False``; the
few events encoded here rather than natively; and event file names.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tbscope._mirror import split_url as _split_url
from tbscope._writer.lifecycle import _leak

if TYPE_CHECKING:
    from tbscope._remote import RemoteRun


class _Sink(Protocol):
    """What a run's event destination offers: the native ``EventWriter`` or a stand-in."""

    def scalar(self, tag: str, value: float, step: int | None = None, wall_time: float | None = None,
               new_style: bool = False, double_precision: bool = False) -> None: ...
    def scalars(self, tags: Sequence[str], values: Sequence[float], step: int | None = None,
                wall_time: float | None = None) -> None: ...
    def histogram(self, tag: str, values: Any, step: int | None = None, wall_time: float | None = None,
                  edges: Any = None, max_bins: int | None = None) -> None: ...
    def histogram_raw(self, tag: str, min: float, max: float, num: float, sum: float, sum_squares: float,
                      bucket_limits: Sequence[float], bucket_counts: Sequence[float],
                      step: int | None = None, wall_time: float | None = None) -> None: ...
    def tensor(self, tag: str, data: Any, dtype: int, shape: Sequence[int], step: int | None = None,
               wall_time: float | None = None, metadata: bytes | None = None) -> None: ...
    def summary(self, summary: bytes, step: int | None = None, wall_time: float | None = None) -> None: ...
    def event(self, event: bytes) -> None: ...
    def flush(self, fsync: bool = False) -> None: ...
    def close(self) -> None: ...


class _Owner(Protocol):
    """What a run needs of the ``SummaryWriter`` it belongs to."""

    _write_to_disk: bool
    _w: _Sink

    def _open_sink(self, run: _Run) -> _Sink: ...


# --------------------------------------------------------------------------------------------
# The few messages the native writer has no method for (purge markers, events handed over as
# protobuf objects), encoded with the encoders' wire-format helpers (imported lazily: they need
# numpy, which ``import tbscope`` does not load).

_EV_WALL_TIME, _EV_STEP, _EV_FILE_VERSION, _EV_GRAPH_DEF, _EV_SESSION_LOG, _EV_TAGGED_RUN_METADATA = 1, 2, 3, 4, 7, 8
_SESSION_START = 1


#: torch's add_tensor marks its tensors with the "tensor" plugin: SummaryMetadata{plugin_data{
#: plugin_name: "tensor"}}.
_TENSOR_METADATA = b"\x0a\x08\x0a\x06tensor"


def _event_head(step: int | None, walltime: float | None) -> bytes:
    """Event wall_time and step fields. Written even when 0: appended to an encoded Event they
    override what it had (protobuf keeps the last value of a non-repeated field)."""
    from tbscope import _pb

    head = _pb.double_field(_EV_WALL_TIME, time.time() if walltime is None else walltime, keep_default=True)
    return head if step is None else head + _pb.int_field(_EV_STEP, step, keep_default=True)


def _purge_events(step: int) -> list[bytes]:
    """What torch writes for ``purge_step``: a file_version event and a SessionLog START at that
    step (TensorBoard hides the older points at steps >= ``step`` when it sees the START)."""
    from tbscope import _pb

    return [
        _event_head(step, None) + _pb.bytes_field(_EV_FILE_VERSION, "brain.Event:2"),
        _event_head(step, None) + _pb.message_field(_EV_SESSION_LOG, _pb.int_field(1, _SESSION_START)),
    ]


# --------------------------------------------------------------------------------------------
# Stand-ins for the native writer.

class _Null:
    """``write_to_disk=False``: everything is accepted and dropped."""

    def scalar(self, *args: Any) -> None: ...
    def scalars(self, *args: Any) -> None: ...
    def histogram(self, *args: Any) -> None: ...
    def histogram_raw(self, *args: Any) -> None: ...
    def tensor(self, *args: Any) -> None: ...
    def summary(self, *args: Any) -> None: ...
    def event(self, *args: Any) -> None: ...
    def flush(self, fsync: bool = False) -> None: ...
    def close(self) -> None: ...


class _Lazy:
    """A run whose file is not open (yet, or again): the first write opens it.

    Used after ``close()`` (torch's writer also reopens on the next write), and in a forked
    child, which must never use the parent's native writer and must leave no file behind if it
    never writes. flush() and close() have nothing to do.
    """

    __slots__ = ("_run",)

    def __init__(self, run: _Run) -> None:
        self._run = run

    def scalar(self, *args: Any) -> None:
        self._run.open().scalar(*args)

    def scalars(self, *args: Any) -> None:
        self._run.open().scalars(*args)

    def histogram(self, *args: Any) -> None:
        self._run.open().histogram(*args)

    def histogram_raw(self, *args: Any) -> None:
        self._run.open().histogram_raw(*args)

    def tensor(self, *args: Any) -> None:
        self._run.open().tensor(*args)

    def summary(self, *args: Any) -> None:
        self._run.open().summary(*args)

    def event(self, *args: Any) -> None:
        self._run.open().event(*args)

    def flush(self, fsync: bool = False) -> None: ...
    def close(self) -> None: ...


class _Run:
    """One run directory this writer writes into (its own, or a torch-layout sub-run), and the
    event file (or, for a URL, the series of objects) that is currently open there."""

    def __init__(self, writer: _Owner, directory: str, main: bool) -> None:
        self._writer = weakref.ref(writer)
        self.directory = directory
        self.main = main
        self.sink: _Sink = _Null() if not writer._write_to_disk else _Lazy(self)
        self.remote: RemoteRun | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.lock = threading.Lock()

    def open(self) -> _Sink:
        with self.lock:
            if isinstance(self.sink, _Lazy):
                writer = self._writer()
                if writer is None:
                    raise ValueError("the SummaryWriter this run belongs to no longer exists")
                self._set_sink(writer._open_sink(self))
            return self.sink

    def _set_sink(self, sink: _Sink) -> None:
        self.sink = sink
        writer = self._writer()
        if self.main and writer is not None:
            writer._w = sink  # the hot path calls the main run's sink without looking it up

    def attach_remote(self, writer: _Owner, remote: RemoteRun) -> None:
        self.remote = remote
        # A writer dropped without close() still uploads what it holds (the native memory
        # buffer has no file to flush to on its own).
        self._finalizer = weakref.finalize(writer, remote.close_quietly)

    def flush(self, fsync: bool) -> None:
        if self.remote is not None:
            self.remote.flush()
        else:
            self.sink.flush(fsync)

    def close(self) -> None:
        with self.lock:
            if self.remote is not None:
                self.remote.close()
                if self._finalizer is not None:
                    self._finalizer.detach()
                self.remote = self._finalizer = None
            else:
                self.sink.close()
            if not isinstance(self.sink, _Null):
                self._set_sink(_Lazy(self))

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's writer without ever calling into it."""
        self.lock = threading.Lock()  # another parent thread may have held it at fork time
        if self._finalizer is not None:
            self._finalizer.detach()  # or the child's exit would upload the parent's buffer
        if self.remote is not None:
            _leak(self.remote.sink)
        if not isinstance(self.sink, (_Lazy, _Null)):
            _leak(self.sink)
        self.remote = self._finalizer = None
        if not isinstance(self.sink, _Null):
            self._set_sink(_Lazy(self))


# --------------------------------------------------------------------------------------------
# File names.

_COUNTER = itertools.count()
def _hostname() -> str:
    return socket.gethostname()


def event_file_stem() -> str:
    """``events.out.tfevents.<10-digit time>.<host>.<pid>.<n>``: TensorBoard's own writer's
    name, with a per-process counter so that several writers (and ranks) share a directory."""
    return f"events.out.tfevents.{int(time.time()):010d}.{_hostname()}.{os.getpid()}.{next(_COUNTER)}"


def _join(directory: str, name: str, remote: bool) -> str:
    return directory.rstrip("/") + "/" + name if remote else os.path.join(directory, name)
