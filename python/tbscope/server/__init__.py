"""``tbscope serve``: a REST API and the dashboard over logdirs, live, safe by default.

>>> server = tbscope.serve("runs/", port=0)   # doctest: +SKIP
>>> server.url                                # doctest: +SKIP
'http://127.0.0.1:39173/'
>>> server.stop()                             # doctest: +SKIP

Importing this package is cheap: the web stack is imported when a server starts. See
``docs/server.md`` for the API.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tbscope.server.config import Config
    from tbscope.server.store import Store

__all__ = ["Server", "serve"]

TOKEN_ENV = "TBSCOPE_TOKEN"


class Server:
    """A running server: its ``url``, and ``stop()``. Also a context manager."""

    def __init__(
        self, config: Config, store: Store, uv: Any, sock: socket.socket, thread: threading.Thread | None
    ) -> None:
        self.config = config
        self.store = store
        self._uv = uv
        self._sock = sock
        self._thread = thread
        self.port: int = sock.getsockname()[1]

    @property
    def url(self) -> str:
        """The dashboard's URL (the token is not in it; see ``url_with_token``)."""
        host = self.config.host
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}{self.config.path_prefix}/"

    @property
    def url_with_token(self) -> str:
        """The URL to open in a browser: with ``?token=`` when a token is set."""
        from urllib.parse import quote

        return self.url + (f"?token={quote(self.config.token)}" if self.config.token else "")

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait until the first read of the logdirs is done."""
        return self.store.wait_loaded(timeout)

    def run(self) -> None:
        """Serve in this thread until stopped (Ctrl-C in the main thread)."""
        try:
            self._uv.run(sockets=[self._sock])
        finally:
            self.store.stop()
            self.store.join()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and reading; returns once the server has stopped. A cache write under
        way is abandoned (docs/server.md, "The cache")."""
        self.store.stop()
        self._uv.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.store.join(min(timeout, 5.0))
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<tbscope.Server {self.url}>"


def make_config(
    logdir: str | os.PathLike[str] | None = None,
    *,
    logdir_spec: str | None = None,
    host: str = "127.0.0.1",
    port: int = 6006,
    path_prefix: str = "",
    reload_interval: float = 5.0,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    cache: bool = True,
    bind_all: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Config:
    from tbscope.server.config import Config, parse_logdirs

    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be 0 (any free port) to 65535; got {port}")
    return Config(
        sources=parse_logdirs(logdir, logdir_spec),
        host="0.0.0.0" if bind_all else host,
        port=port,
        path_prefix=path_prefix,
        reload_interval=reload_interval,
        token=token,
        allowed_hosts=list(allowed_hosts),
        cache=cache,
        storage_options=dict(storage_options) if storage_options is not None else None,
    )


def bind(config: Config) -> socket.socket:
    """The listening socket (bound before the web stack is imported, so a taken port fails
    at once)."""
    host = "127.0.0.1" if config.host == "localhost" else config.host
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), config.port))
    except OSError as e:
        sock.close()
        hint = "; choose another with --port, or --port 0 for any free one" if config.port else ""
        raise OSError(e.errno, f"cannot listen on {host}:{config.port}: {e.strerror}{hint}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def start(
    config: Config, *, in_thread: bool = True, store: Store | None = None, sock: socket.socket | None = None
) -> Server:
    """Start reading and serving. ``in_thread``: serve from a background thread and return at
    once; else ``Server.run`` must be called by the caller (the CLI serves in the main thread,
    where Ctrl-C is handled)."""
    from tbscope.server.store import Store

    if store is None:
        store = Store(config)
        store.start()
    running: Store = store
    sock = sock or bind(config)
    import uvicorn

    from tbscope.server.front import Front
    from tbscope.server.security import Guard

    # Serving starts before the API is built (see tbscope.server.front).
    front = Front(running)
    front.build_when_idle()
    app = Guard(front, config)

    class _Uvicorn(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # Streams of change notices end when the store stops, so shutdown need not wait.
            running.stop()
            super().handle_exit(sig, frame)

    uv = _Uvicorn(
        uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
        )
    )
    thread = None
    if in_thread:
        thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, name="tbscope-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not uv.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not uv.started:
            running.stop()
            raise RuntimeError("the server did not start; see the log above")
    return Server(config, running, uv, sock, thread)


def serve(
    logdir: str | os.PathLike[str] | None = None,
    *,
    logdir_spec: str | None = None,
    host: str = "127.0.0.1",
    port: int = 6006,
    path_prefix: str = "",
    reload_interval: float = 5.0,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    cache: bool = True,
    bind_all: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Server:
    """Serve the dashboard and the REST API over ``logdir`` from a background thread, and
    return at once (the logdir loads in the background; ``Server.wait_loaded()`` waits).

    Arguments are those of ``tbscope serve`` (see ``docs/server.md``): ``logdir`` may be
    ``name:path,name:path`` for several; ``port=0`` picks a free port; ``token`` (default
    ``$TBSCOPE_TOKEN``) is required for any host but loopback; ``cache=False`` reads without
    the incremental cache; ``storage_options`` are those of :func:`tbscope.scan` for a
    logdir given as a URL (``s3://...``; reloaded every 30 s at the most often). Returns a
    :class:`Server` with ``url`` and ``stop()``.
    """
    config = make_config(
        logdir,
        logdir_spec=logdir_spec,
        host=host,
        port=port,
        path_prefix=path_prefix,
        reload_interval=reload_interval,
        token=token,
        allowed_hosts=allowed_hosts,
        cache=cache,
        bind_all=bind_all,
        storage_options=storage_options,
    )
    return start(config)
