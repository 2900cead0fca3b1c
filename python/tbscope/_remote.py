"""Event files on object stores (``s3://``, ``gs://``, ``memory://``, ... through fsspec).

Object stores cannot append, and rewriting a growing file on every flush costs O(n^2) bytes.
Instead each flush uploads what was logged since the previous one as a new, complete object:
``<stem>.<segment:06d><suffix>``. Every object starts with a file_version record, so each is a
valid event file on its own, names sort in write order, and TensorBoard reads them one after
the other as one run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from tbscope import _core

__all__ = ["RemoteRun"]

_log = logging.getLogger("tbscope.writer")


class RemoteRun:
    """The objects of one run directory: a native writer in memory mode, and a daemon thread
    that uploads its buffer every ``flush_secs`` (or sooner when it holds ``max_bytes``)."""

    def __init__(self, url: str, stem: str, suffix: str, flush_secs: float, max_bytes: int) -> None:
        try:
            import fsspec
        except ImportError:
            raise ImportError(
                f"writing to {url!r} needs fsspec (and the filesystem's package, e.g. s3fs): "
                "pip install 'tbscope[remote]'"
            ) from None
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.fs.makedirs(self.root, exist_ok=True)
        self.stem = stem
        self.stem_url = url.rstrip("/") + "/" + stem
        self.suffix = suffix
        self.flush_secs = flush_secs
        # Upload early past a quarter of what the native writer would hold before blocking.
        self.max_bytes = max(1 << 20, max_bytes // 4)
        self.sink: Any = _core.EventWriter(None)
        self._segment = 0
        self._waiting: list[tuple[str, bytes]] = []  # objects not uploaded yet, in name order
        self._lock = threading.Lock()  # one upload at a time, segments in order
        self._error: BaseException | None = None
        self._closed = False
        self._stop = threading.Event()
        self._last = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=f"tbscope-upload-{stem}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(min(1.0, self.flush_secs)):
            due = time.monotonic() - self._last >= self.flush_secs
            if due or self.sink.pending_bytes >= self.max_bytes:
                try:
                    self._upload()
                except Exception as e:  # noqa: BLE001 - kept, raised by the next flush()/close()
                    self._error = e
                    _log.warning(
                        "tbscope: uploading to %s failed (kept, retried on the next flush): %s", self.stem_url, e
                    )

    def _upload(self) -> None:
        with self._lock:
            self._last = time.monotonic()
            data = self.sink.take()
            if data:
                if self._segment > 0:
                    # Segment 0 begins with the writer's own file_version record; later ones
                    # get a fresh one so that each object is a complete event file.
                    data = _core.EventWriter(None).take() + data
                name = f"{self.root.rstrip('/')}/{self.stem}.{self._segment:06d}{self.suffix}"
                self._segment += 1
                self._waiting.append((name, data))
            while self._waiting:
                name, data = self._waiting[0]
                self.fs.pipe_file(name, data)
                self._waiting.pop(0)
            self._error = None

    def flush(self) -> None:
        """Upload what is buffered now as a new object; raise if that (or an earlier upload that
        is still waiting) fails. Nothing is dropped: failed objects are retried in order."""
        self._upload()

    def close(self) -> None:
        if self._closed:
            return
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self._upload()
        self._closed = True

    def close_quietly(self) -> None:
        """For a writer that is garbage-collected without close()."""
        try:
            self.close()
        except Exception as e:  # noqa: BLE001
            _log.error("tbscope: could not upload the last events to %s: %s", self.stem_url, e)
