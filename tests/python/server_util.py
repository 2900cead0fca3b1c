"""Helpers for the server tests: raw HTTP to a real uvicorn server on loopback."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(url: str, path: str, method: str = "GET", headers: dict[str, str] | None = None, body: bytes | None = None, timeout: float = 60) -> Reply:
    """``path`` is sent as is (no normalisation of ``..``), relative to the server's base URL."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, u.path.rstrip("/") + "/" + path.lstrip("/"), body=body, headers=headers or {})
        r = conn.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def get_json(url: str, path: str, **kw: Any) -> Any:
    r = request(url, path, **kw)
    assert r.status == 200, (path, r.status, r.body[:500])
    assert r.headers["content-type"].startswith("application/json")
    return r.json()
