"""The ``tbscope serve`` command. Only click is imported here: the web stack loads when the
command runs, after the logdirs have started loading."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from tbscope._cli.options import storage_option
from tbscope._mirror import is_url

HELP = """Serve the dashboard and a REST API over LOGDIR on http://127.0.0.1:6006/.

\b
LOGDIR is a logdir, or name:path,name:path for several (runs are then named name/run).
The server answers at once while the logdirs load, then reloads them every
--reload_interval seconds and tells the dashboard what changed. It binds 127.0.0.1; any
other host (--host, --bind_all) needs a token (--token or TBSCOPE_TOKEN), then asked of every
request. The API is described at /api/docs and in docs/server.md.

\b
  tbscope serve runs/                      # until Ctrl-C
  tbscope serve runs/ --port 0             # any free port (the URL is printed)
  tbscope serve runs/ --path_prefix /tb    # behind a proxy at https://host/tb/

\b
Examples:
  tbscope serve runs/ --port 0 --check
  tbscope serve demo:runs/ --port 0 --reload_interval 0 --no-cache --check
"""


@click.command("serve", help=HELP, short_help="Serve the dashboard and the REST API.")
@click.argument("logdir", required=False)
@click.option("--logdir", "logdir_opt", metavar="PATH", help="The logdir (TensorBoard's flag; same as the argument).")
@click.option("--logdir_spec", metavar="NAME:PATH,...", help="Several logdirs, each with a name.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind; anything but loopback needs a token."
)
@click.option("--bind_all", is_flag=True, help="Bind every interface (needs a token).")
@click.option(
    "--port", default=6006, show_default=True, type=click.IntRange(0, 65535), help="Port; 0 picks a free one."
)
@click.option("--path_prefix", default="", metavar="PREFIX", help="Serve under PREFIX/ (behind a reverse proxy).")
@click.option(
    "--reload_interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds between reloads; 0 loads once.",
)
@click.option(
    "--token",
    envvar="TBSCOPE_TOKEN",
    metavar="TOKEN",
    help="Require this token on every request (default $TBSCOPE_TOKEN).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Accept this Host header too (a proxy's public name); repeatable.",
)
@click.option(
    "--cache/--no-cache", default=True, help="Read through the incremental cache (default), so a restart is instant."
)
@storage_option
@click.option(
    "--check",
    is_flag=True,
    help="Start, wait for the load, check that the dashboard page and the runs endpoint answer, then stop (exit status 1 if they did not): for CI and scripts.",
)
def serve_command(
    logdir: str | None,
    logdir_opt: str | None,
    logdir_spec: str | None,
    host: str,
    bind_all: bool,
    port: int,
    path_prefix: str,
    reload_interval: float,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    cache: bool,
    check: bool,
) -> None:
    from tbscope.server import bind, make_config, start
    from tbscope.server.store import Store

    if logdir and logdir_opt and logdir != logdir_opt:
        raise click.UsageError("give the logdir once: as the argument or as --logdir")
    try:
        config = make_config(
            logdir or logdir_opt,
            logdir_spec=logdir_spec,
            host=host,
            port=port,
            path_prefix=path_prefix,
            reload_interval=reload_interval,
            token=token,
            allowed_hosts=allowed_hosts,
            cache=cache,
            bind_all=bind_all,
        )
        sock = bind(config)
    except (ValueError, OSError) as e:
        raise click.UsageError(str(e)) from None
    # Reading starts before the web stack is imported: the two overlap.
    store = Store(config)
    store.start()
    server = start(config, in_thread=check, store=store, sock=sock)
    if check:
        _check(server)
        return
    for st in config.sources:
        if not is_url(st.path) and not os.path.exists(st.path):
            click.echo(f"tbscope: {st.path} does not exist yet; waiting for it", err=True)
    click.echo(f"tbscope serve: {server.url_with_token}  (Ctrl-C to stop)", err=True)
    _progress(store)
    try:
        server.run()
    except KeyboardInterrupt:
        # uvicorn has shut down cleanly and re-raised the signal: a normal way to stop.
        pass
    click.echo("tbscope serve: stopped", err=True)


def _check(server: Any) -> None:
    import json
    import urllib.request

    try:
        if not server.wait_loaded(300):
            raise click.ClickException("the logdirs did not load within 5 minutes")
        headers = {"Authorization": f"Bearer {server.config.token}"} if server.config.token else {}
        with urllib.request.urlopen(urllib.request.Request(server.url, headers=headers), timeout=60) as r:
            page = r.status == 200 and r.headers["Content-Type"].startswith("text/html")
        with urllib.request.urlopen(
            urllib.request.Request(server.url + "api/v1/runs", headers=headers), timeout=60
        ) as r:
            runs = json.load(r)["columns"]["run"]
        if not page:
            raise click.ClickException(f"{server.url} did not answer with the dashboard page")
        click.echo(f"tbscope serve: {server.url} answered: the dashboard page and {len(runs)} runs; stopped (--check)")
    finally:
        server.stop()


def _progress(store: Any) -> None:
    """A progress bar of the first load on a terminal (from a thread: serving goes on)."""
    import threading

    def show() -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

        if store.wait_loaded(0.5):
            _loaded(store)
            return
        with Progress(TextColumn("loading"), BarColumn(), DownloadColumn(), TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task("load", total=None)
            while not store.wait_loaded(0.2):
                p = store.progress.as_dict()
                bar.update(task, completed=p["bytes_done"], total=p["bytes_total"] or None)
        _loaded(store)

    def quiet() -> None:
        store.wait_loaded()
        _loaded(store)

    target = show if sys.stderr.isatty() else quiet
    threading.Thread(target=target, daemon=True, name="tbscope-progress").start()


def _loaded(store: Any) -> None:
    if store.stopping:
        return
    runs = store.snapshot.runs.num_rows
    took = store.load_seconds or 0.0
    click.echo(f"tbscope: {runs} runs loaded in {took:.2f} s{time.strftime(' at %H:%M:%S')}", err=True)
