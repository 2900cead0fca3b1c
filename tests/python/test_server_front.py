"""The front: the requests it answers before the API is built get the same bytes as from the
API, and every other request waits for the API instead of failing."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import tbscope
from tbscope.server import make_config
from tbscope.server.front import Front
from tbscope.server.store import Store

ARROW = "application/vnd.apache.arrow.stream"


async def call(
    app: Any, path: str, query: str = "", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One GET through an ASGI application."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 6006),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(bytes(m.get("body", b"")) for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


def test_front_answers_like_the_api_and_holds_the_rest(tmp_path):
    rng = np.random.default_rng(1)
    for run in ("a", "b/c"):
        with tbscope.SummaryWriter(tmp_path / run) as w:
            for step, v in enumerate(rng.standard_normal(300)):
                w.add_scalar("loss", float(v), step)
    store = Store(make_config(tmp_path, cache=False, reload_interval=0))
    store.start()
    assert store.wait_loaded(60)
    front = Front(store)

    async def scenario() -> None:
        # Not built: the front answers status and plain scalars itself.
        assert front.api is None
        status = await call(front, "/api/v1/status")
        assert status[0] == 200 and b'"generation":1' in status[2]
        early_json = await call(front, "/api/v1/scalars", "tag=loss&points=20&run=b/c&run=a")
        early_arrow = await call(front, "/api/v1/scalars", "tag=loss&points=0", {"Accept": ARROW})
        # A revalidation too: a 304 with the API's headers.
        again = {"If-None-Match": early_json[1]["etag"]}
        early_304 = await call(front, "/api/v1/scalars", "tag=loss&points=20&run=b/c&run=a", again)
        assert front.api is None, "answered without building the API"
        # Anything else has the API built, and waits for it.
        assert (await call(front, "/api/v1/runs"))[0] == 200
        assert front.api is not None
        # The API gives the same answers.
        assert await call(front, "/api/v1/scalars", "tag=loss&points=20&run=b/c&run=a") == early_json
        assert await call(front, "/api/v1/scalars", "tag=loss&points=0", {"Accept": ARROW}) == early_arrow
        assert early_304[0] == 304 and not early_304[2]
        assert await call(front, "/api/v1/scalars", "tag=loss&points=20&run=b/c&run=a", again) == early_304
        # What the front does not take (bad values, other parameters) the API answers.
        assert (await call(front, "/api/v1/scalars", "tag=loss&points=3"))[0] == 400

    asyncio.run(scenario())
    store.stop()


def test_api_is_built_once_loaded_and_idle(tmp_path):
    with tbscope.SummaryWriter(tmp_path / "a") as w:
        w.add_scalar("loss", 1.0, 0)
    store = Store(make_config(tmp_path, cache=False, reload_interval=0))
    front = Front(store)
    front.build_when_idle(idle=2.0)
    # Not while the logdir has not been loaded: the CPU goes to the load first.
    assert not front.wait_built(0.6) and front.api is None
    store.start()
    assert store.wait_loaded(60)

    async def polling() -> None:
        # Nor while the front is answering requests that come more often than that.
        for _ in range(10):
            assert (await call(front, "/api/v1/status"))[0] == 200
            await asyncio.sleep(0.05)

    asyncio.run(polling())
    assert front.api is None
    assert front.wait_built(60) and front.api is not None
    store.stop()
