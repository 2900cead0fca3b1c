"""The server goes away and comes back: the header says so, and the page recovers without a
reload (its state kept)."""

from __future__ import annotations

import socket
from pathlib import Path

from browser_util import Page, Server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_disconnect_then_reconnect(page: Page, logdir: Path) -> None:
    port = free_port()
    first = Server(logdir, "--port", str(port))
    try:
        first.wait_loaded()
        page.page.goto(first.url + "#scalars?tags=train/loss&smoothing=0.3")
        page.page.wait_for_function("() => document.documentElement.dataset.connection === 'live'", timeout=30_000)
        page.page.evaluate("() => { window.__same = true; }")
    finally:
        first.stop()
    page.page.wait_for_function("() => document.documentElement.dataset.connection === 'reconnecting'", timeout=30_000)
    assert "reconnecting" in page.page.inner_text(".conn").lower()
    page.screenshot("disconnected")
    second = Server(logdir, "--port", str(port))
    try:
        second.wait_loaded()
        page.page.wait_for_function("() => ['live', 'polling'].includes(document.documentElement.dataset.connection)", timeout=60_000)
        assert page.page.evaluate("() => window.__same") is True
        assert page.page.input_value("#smoothing") == "0.3"
    finally:
        second.stop()
    # The browser logs the failed stream and requests while the server was away: expected.
    unexpected = [e for e in page.errors if "ERR_CONNECTION_REFUSED" not in e and "Failed to load resource" not in e]
    assert unexpected == [], unexpected
