"""The process lifecycle of writers: every live ``SummaryWriter`` is closed at interpreter exit,
flushed on SIGTERM, and reset in a forked child, which never touches its parent's native
writer. The hooks are set by the first writer (:func:`install_hooks`), never at import.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol


class _Live(Protocol):
    """What the hooks need of a writer."""

    log_dir: str

    def flush(self, fsync: bool = False) -> None: ...
    def close(self) -> None: ...
    def _after_fork(self) -> None: ...


def _leak(obj: object) -> None:
    """Keep ``obj`` alive until the process ends, finalisation included.

    A native writer inherited through fork() must never be dropped in the child: its Drop
    would flush (the parent's data, into the parent's file) and join a thread that does not
    exist in the child, with a mutex another parent thread may have held at fork time.
    """
    _ORPHANS.append(obj)
    try:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))  # survives module teardown too
    except Exception:  # noqa: BLE001 - no ctypes: the list reference is the best we have
        pass


_ORPHANS: list[object] = []


# --------------------------------------------------------------------------------------------
# Live writers: closed at exit, flushed on SIGTERM, reset in forked children.

_LIVE: weakref.WeakSet[_Live] = weakref.WeakSet()
# Re-entrant: the SIGTERM handler runs on the main thread, possibly while that thread holds it.
_LIVE_LOCK = threading.RLock()
_SIGTERM_INSTALLED = False
_HOOKS_INSTALLED = False


def _live_writers() -> list[_Live]:
    with _LIVE_LOCK:
        return list(_LIVE)


def _report(what: str, writer: _Live, exc: BaseException) -> None:
    # At exit or in a signal handler nobody can catch an exception: say it on stderr, loudly,
    # because it means data did not reach the disk.
    print(f"tbscope: SummaryWriter({writer.log_dir!r}) could not {what}: {exc}", file=sys.stderr, flush=True)


def _close_all_at_exit() -> None:
    for w in _live_writers():
        try:
            w.close()
        except Exception as e:  # noqa: BLE001
            _report("write its last data at exit", w, e)


def _flush_all(fsync: bool = False) -> None:
    for w in _live_writers():
        try:
            w.flush(fsync)
        except Exception as e:  # noqa: BLE001
            _report("flush on SIGTERM", w, e)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Flush every writer, then die of SIGTERM as if we had never been here."""
    _flush_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _chain_sigterm(previous: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
    def handler(signum: int, frame: FrameType | None) -> Any:
        _flush_all()
        return previous(signum, frame)

    return handler


def install_sigterm() -> None:
    """Flush on SIGTERM (what schedulers send before SIGKILL). Only from the main thread (the
    only one allowed to set handlers), only once, and only over the default action or a Python
    handler, which is then chained; SIG_IGN and handlers set from C are left alone."""
    global _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    _SIGTERM_INSTALLED = True
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    elif callable(previous):
        signal.signal(signal.SIGTERM, _chain_sigterm(previous))


def _after_fork_in_child() -> None:
    global _LIVE_LOCK
    _LIVE_LOCK = threading.RLock()  # a parent thread may have held it at fork time
    for w in list(_LIVE):
        w._after_fork()


def install_hooks() -> None:
    """The exit and fork hooks, set once, by the first writer (``import tbscope`` sets none)."""
    global _HOOKS_INSTALLED
    with _LIVE_LOCK:
        if _HOOKS_INSTALLED:
            return
        _HOOKS_INSTALLED = True
    atexit.register(_close_all_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)



def register(writer: _Live) -> None:
    """Count ``writer`` among the live ones (it leaves the set when it is garbage)."""
    with _LIVE_LOCK:
        _LIVE.add(writer)
