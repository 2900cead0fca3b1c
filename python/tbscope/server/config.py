"""What a server is asked to do: its logdirs, address, security settings and limits."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from tbscope._mirror import is_url

__all__ = ["Config", "Source", "is_loopback", "parse_logdirs"]

#: Upper bounds on what one request may ask for (documented in docs/server.md).
MAX_POINTS = 100_000
MAX_RESPONSE_POINTS = 20_000_000
MAX_RUNS_PAGE = 100_000
MAX_BODY_BYTES = 1 << 20
MAX_SQL_ROWS = 100_000
SQL_SECONDS = 10.0
#: DuckDB's memory limit and threads for the server's SQL: a query shares the machine with
#: the server's own work (and other users' queries), so it gets a bounded part of it.
SQL_MEMORY_LIMIT = "2GB"
SQL_THREADS = 2
MAX_TENSOR_VALUES = 10_000
MAX_FULL_TENSOR_VALUES = 10_000_000


#: Seconds between reloads of a remote logdir at the least (``--reload_interval`` below it is raised).
MIN_REMOTE_RELOAD = 30.0


@dataclass(frozen=True)
class Source:
    """One logdir: ``name`` is None for a single logdir given without one (runs keep their
    names), else the prefix of its runs (``name/run``)."""

    name: str | None
    path: str


def parse_logdirs(logdir: str | os.PathLike[str] | None, logdir_spec: str | None = None) -> list[Source]:
    """``path`` (one logdir), or ``name:path,name:path`` (several, TensorBoard's
    ``--logdir_spec``; also accepted as ``logdir``). A path that exists is always one logdir."""
    if logdir_spec:
        text = logdir_spec
    elif logdir is not None and os.fspath(logdir):
        text = os.fspath(logdir)
        head = text.split(",")[0].partition(":")[0]
        if is_url(text) and "," not in text:
            return [Source(None, text)]
        if os.path.exists(text) or "," not in text and (":" not in text or "/" in head or not head):
            return [Source(None, os.path.abspath(os.path.expanduser(text)))]
    else:
        raise ValueError("give a logdir: tbscope serve LOGDIR (or --logdir_spec name:path,...)")
    out: list[Source] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, path = part.partition(":")
        if not sep or not name or not path or "/" in name:
            raise ValueError(f"{part!r} is not name:path; several logdirs are given as name:path,name:path")
        out.append(Source(name, path if is_url(path) else os.path.abspath(os.path.expanduser(path))))
    names = [s.name for s in out]
    if not out or len(set(names)) != len(names):
        raise ValueError(f"logdir names must be given and differ: {names}")
    return out


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _machine_names() -> set[str]:
    names = {socket.gethostname()}
    try:
        names.add(socket.getfqdn())
    except OSError:
        pass
    return {n.lower() for n in names if n}


@dataclass
class Config:
    """Everything ``tbscope serve`` takes (see ``docs/server.md``)."""

    sources: list[Source]
    host: str = "127.0.0.1"
    port: int = 6006
    path_prefix: str = ""
    reload_interval: float = 5.0
    token: str | None = None
    allowed_hosts: list[str] = field(default_factory=list)
    cache: bool = True
    #: For logdirs given as URLs (None: the command line's --storage-option, else the store's own).
    storage_options: dict[str, Any] | None = None
    frame_ancestors: str = "'self' http://localhost:* http://127.0.0.1:*"

    def __post_init__(self) -> None:
        p = self.path_prefix.strip()
        if p and not p.startswith("/"):
            p = "/" + p
        self.path_prefix = p.rstrip("/")
        if self.token == "":
            self.token = None
        if self.reload_interval < 0:
            raise ValueError("--reload_interval takes seconds >= 0 (0 loads once)")
        if 0 < self.reload_interval < MIN_REMOTE_RELOAD and any(is_url(s.path) for s in self.sources):
            # Each reload of a remote logdir is a LIST request (billed, and rate-limited).
            self.reload_interval = MIN_REMOTE_RELOAD
        if not is_loopback(self.host) and self.token is None:
            raise ValueError(
                f"refusing to serve on {self.host} without a token: anyone who can reach it could read your logs. "
                "Set one with --token or TBSCOPE_TOKEN (e.g. TBSCOPE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe())')), "
                "or keep the default --host 127.0.0.1"
            )

    def host_names(self) -> set[str]:
        """Host header values accepted (lowercase, without port)."""
        names = {"localhost", "127.0.0.1", "::1", "[::1]"}
        names.update(h.lower() for h in self.allowed_hosts)
        h = self.host.lower()
        if h in ("0.0.0.0", "::", ""):
            names.update(_machine_names())
        else:
            names.add(h)
            names.add(f"[{h}]" if ":" in h and not h.startswith("[") else h)
        return names
