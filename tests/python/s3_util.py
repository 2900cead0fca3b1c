"""A real S3 API for the tests: moto's standalone server on 127.0.0.1, on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: Credentials the moto server accepts (any are), set for the store's own credential chain.
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str
    proc: subprocess.Popen[bytes]

    @property
    def options(self) -> dict[str, Any]:
        """storage_options for tbscope (and s3fs) against this server."""
        return {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing"}

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.options)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """moto's standalone S3 server on a free port of 127.0.0.1, once it answers: the process
    and its endpoint URL (bench/remote.py starts its server with this too)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).close()
            return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto's S3 server did not start") from None
            time.sleep(0.05)


@contextmanager
def s3_server() -> Iterator[S3Server]:
    proc, endpoint = start_moto()
    server = S3Server(endpoint, proc)
    try:
        yield server
    finally:
        if proc.poll() is None:
            server.kill()


@contextmanager
def environ(**values: str) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class FlakyProxy:
    """An HTTP proxy on loopback in front of an S3 server that answers the first ``fail``
    ranged GETs (the fetches of object bytes, not listings) with ``status`` (503 SlowDown:
    S3's throttling) and forwards everything else; ``ranged`` counts the ranged GETs seen."""

    endpoint: str
    fail: int
    status: int = 503
    ranged: int = 0
    failed: int = 0


@contextmanager
def flaky_proxy(upstream: str, fail: int, status: int = 503) -> Iterator[FlakyProxy]:
    import http.client
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlparse

    up = urlparse(upstream)
    lock = threading.Lock()
    state = FlakyProxy("", fail, status)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            if self.headers.get("Range"):
                with lock:
                    state.ranged += 1
                    refuse = state.failed < state.fail
                    state.failed += refuse
                if refuse:
                    body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
                    self.send_response(state.status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=data, headers=dict(self.headers))
                resp = conn.getresponse()
                payload = resp.read()
            finally:
                conn.close()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
