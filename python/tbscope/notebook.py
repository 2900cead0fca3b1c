"""The dashboard inside Jupyter, as TensorBoard's ``%tensorboard`` magic does it.

    %load_ext tbscope
    %tbscope --logdir runs            # serves runs/ on a free loopback port, shows it inline

or from code::

    import tbscope.notebook
    tbscope.notebook.display("runs")

Each logdir gets one server per kernel (started with :func:`tbscope.serve`, reused by later
calls, stopped with ``%tbscope --stop`` or when the kernel exits); the dashboard is an iframe
on it. The server's CSP lets only this machine's notebooks (``localhost``, ``127.0.0.1``) frame
it.
"""

from __future__ import annotations

import argparse
import atexit
import shlex
from os import PathLike, fspath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tbscope.server import Server

__all__ = ["display", "load_ipython_extension", "stop"]

_servers: dict[tuple[str, str, int], Server] = {}


def _key(logdir: str | PathLike[str], host: str, port: int) -> tuple[str, str, int]:
    return (fspath(logdir), host, port)


def _alive(server: Server) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(server.url + "api/v1/status", timeout=2):
            return True
    except OSError:
        return False


def _serve(logdir: str | PathLike[str], host: str, port: int, **kwargs: Any) -> Server:
    from tbscope.server import serve

    key = _key(logdir, host, port)
    server = _servers.get(key)
    if server is not None and _alive(server):
        return server
    server = serve(fspath(logdir), host=host, port=port, **kwargs)
    _servers[key] = server
    return server


def display(
    logdir: str | PathLike[str],
    *,
    height: int = 800,
    port: int = 0,
    host: str = "127.0.0.1",
    **serve_kwargs: Any,
) -> Server:
    """Serve ``logdir`` (once per kernel) and show the dashboard inline; returns the server
    handle (``.url``, ``.stop()``). Extra keyword arguments go to :func:`tbscope.serve`."""
    try:
        from IPython.display import IFrame
        from IPython.display import display as show
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tbscope.notebook.display needs IPython (pip install ipython); outside a notebook open the URL of `tbscope serve` instead"
        ) from e
    if height < 100:
        raise ValueError(f"height={height}: give the iframe's height in pixels, at least 100")
    server = _serve(logdir, host, port, **serve_kwargs)
    show(IFrame(server.url_with_token, width="100%", height=height))  # type: ignore[no-untyped-call]  # IPython is untyped here
    return server


def stop() -> int:
    """Stop every server this kernel started; returns how many."""
    n = 0
    for key, server in list(_servers.items()):
        try:
            server.stop()
            n += 1
        finally:
            del _servers[key]
    return n


atexit.register(stop)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="%tbscope", description="Show the tbscope dashboard for a logdir inline.", add_help=False
    )
    p.add_argument("logdir_pos", nargs="?", metavar="LOGDIR")
    p.add_argument("--logdir")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--height", type=int, default=800)
    p.add_argument("--path_prefix")
    p.add_argument("--reload_interval", type=float)
    p.add_argument("--stop", action="store_true", help="stop the servers this kernel started")
    p.add_argument("--help", "-h", action="store_true")
    return p


def _magic(line: str) -> None:
    p = _parser()
    try:
        args = p.parse_args(shlex.split(line))
    except SystemExit:
        # argparse already printed what was wrong; a magic must not exit the kernel.
        return
    if args.help:
        p.print_help()
        return
    if args.stop:
        print(f"stopped {stop()} tbscope server(s)")
        return
    logdir = args.logdir or args.logdir_pos
    if not logdir:
        print("usage: %tbscope --logdir DIR [--port N] [--height PX]   (or %tbscope --stop)")
        return
    extra: dict[str, Any] = {}
    if args.path_prefix:
        extra["path_prefix"] = args.path_prefix
    if args.reload_interval is not None:
        extra["reload_interval"] = args.reload_interval
    display(logdir, height=args.height, port=args.port, host=args.host, **extra)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tbscope`` registers the ``%tbscope`` line magic."""
    ipython.register_magic_function(_magic, magic_kind="line", magic_name="tbscope")
