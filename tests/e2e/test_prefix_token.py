"""Behind a reverse proxy's path prefix and with a token: the dashboard asks for the token once,
then works with every URL relative to the prefix."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_util import Page, Server

TOKEN = "e2e-secret-token"


def test_dashboard_under_prefix_with_token_cookie(page: Page, guarded: Server) -> None:
    """Today's way in: the URL with ?token= once (the server sets its cookie)."""
    requests: list[str] = []
    page.page.on("request", lambda r: requests.append(r.url))
    page.page.goto(guarded.url + "?token=" + TOKEN + "#scalars?tags=train/loss")
    page.page.wait_for_function(
        "() => [...document.querySelectorAll('.scalar-card')].some(c => c.dataset.state === 'ready' && c.querySelector('canvas'))",
        timeout=30_000,
    )
    assert "token=" not in page.page.url and page.page.url.endswith("#scalars?tags=train/loss")
    port_root = guarded.url.split("/tb/")[0]
    assert requests and all(u.startswith(port_root + "/tb/") for u in requests if u.startswith(port_root)), requests
    page.page.wait_for_function("() => document.documentElement.dataset.connection === 'live'", timeout=20_000)
    assert page.errors == [], page.errors


@pytest.fixture(scope="module")
def guarded(logdir: Path) -> Iterator[Server]:
    s = Server(logdir, "--path_prefix", "/tb", "--token", TOKEN)
    try:
        req = urllib.request.Request(s.url + "api/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
        for _ in range(600):
            with urllib.request.urlopen(req) as r:
                if b'"done":true' in r.read():
                    break
        yield s
    finally:
        s.stop()


def test_token_prompt_then_dashboard_under_prefix(page: Page, guarded: Server) -> None:
    assert "/tb/" in guarded.url
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(guarded.url + "api/v1/status")
    assert e.value.code == 401
    requests: list[str] = []
    page.page.on("request", lambda r: requests.append(r.url))
    page.page.goto(guarded.url + "#scalars?tags=train/loss")
    page.page.wait_for_selector("#token-input", timeout=30_000)
    page.screenshot("token-prompt")
    page.page.fill("#token-input", "wrong")
    page.page.keyboard.press("Enter")
    page.page.wait_for_selector("#token-input", timeout=30_000)
    assert "not accepted" in page.page.inner_text(".token-dialog")
    page.page.fill("#token-input", TOKEN)
    page.page.keyboard.press("Enter")
    page.page.wait_for_function(
        "() => [...document.querySelectorAll('.scalar-card')].some(c => c.dataset.state === 'ready' && c.querySelector('canvas'))",
        timeout=30_000,
    )
    # Every request stayed under the prefix.
    port_root = guarded.url.split("/tb/")[0]
    assert requests and all(u.startswith(port_root + "/tb/") for u in requests if u.startswith(port_root)), requests
    # 401s before the token are expected; nothing else may fail.
    others = [e for e in page.errors if "401" not in e]
    assert others == [], others
    # Polling replaces the event stream (EventSource cannot send the header): still live.
    page.page.wait_for_function("() => document.documentElement.dataset.connection === 'polling'", timeout=20_000)
