"""The application uvicorn serves from its first moment.

Building the API (importing FastAPI and pydantic, declaring the endpoints) costs more CPU than
opening a cached logdir, and on a cold start it would take CPU from the first load. So the
server starts listening with this front, which answers the requests a dashboard's first paint
makes, ``status`` and whole-series ``scalars``, through the same functions as the API's
endpoints, and builds the API in a thread of its own only when it is needed: for the first
request the front does not take (which waits for it), or once the first load is done and no
request has come for a moment (the answers that waited for the load go out first). Once it is
built, everything goes to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

if TYPE_CHECKING:
    from tbscope.server.security import Receive, Scope, Send
    from tbscope.server.store import Store

log = logging.getLogger("tbscope.server")

#: The query parameters of ``GET scalars`` that the front takes (the rest go to the API).
_SCALARS_PARAMS = frozenset({"tag", "run", "points", "x"})
#: Seconds without a request, after the first load, before the API is built unasked.
BUILD_WHEN_IDLE = 0.5


class Front:
    """An ASGI application: the API once built, a few early answers before."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.api: Any = None
        self._built = threading.Event()
        self._building = False
        self._building_lock = threading.Lock()
        self._failure: BaseException | None = None
        # Requests the front is answering, and when the last one came (for building when idle).
        self._busy = 0
        self._last_request = time.monotonic()

    def build(self) -> None:
        """Build the API (in a thread of its own)."""
        try:
            from tbscope.server.app import create_api

            self.api = create_api(self.store)
        except BaseException as e:  # reported to every request that waits
            self._failure = e
            log.exception("building the API failed")
        finally:
            self._built.set()

    def start_building(self) -> None:
        """Build the API now, in a thread (once; later calls do nothing)."""
        with self._building_lock:
            if self._building:
                return
            self._building = True
        threading.Thread(target=self.build, name="tbscope-api", daemon=True).start()

    def build_when_idle(self, idle: float = BUILD_WHEN_IDLE) -> None:
        """Build the API once the first load is done and no request has come for ``idle``
        seconds (or sooner, when a request needs it)."""

        def later() -> None:
            self.store.wait_loaded()
            while not self._built.is_set() and not self.store.stopping:
                quiet = time.monotonic() - self._last_request
                if quiet >= idle and not self._busy:
                    self.start_building()
                    return
                self._built.wait(max(idle - quiet, 0.01))

        threading.Thread(target=later, name="tbscope-api-later", daemon=True).start()

    def wait_built(self, timeout: float | None = None) -> bool:
        return self._built.wait(timeout)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = self.api
        if api is None:
            self._busy += 1
            self._last_request = time.monotonic()
            try:
                if scope["type"] == "http" and await self._early(scope, receive, send):
                    return
            finally:
                self._busy -= 1
                self._last_request = time.monotonic()
            if not self._built.is_set():
                self.start_building()
                await asyncio.get_running_loop().run_in_executor(None, self._built.wait)
            if self.api is None:
                raise RuntimeError("the API could not be built; see the server log") from self._failure
            api = self.api
        await api(scope, receive, send)

    async def _early(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answers the request if it is one the front takes; False leaves it to the API."""
        if scope["method"] != "GET":
            return False
        path = scope["path"][len(scope.get("root_path", "")) :]
        if path == "/api/v1/status":
            from tbscope.server import encode
            from tbscope.server.store import status_body

            # Off the event loop: its first call on a snapshot lists the projector configs.
            body = await asyncio.get_running_loop().run_in_executor(None, status_body, self.store)
            await encode.json_response(body)(scope, receive, send)
            return True
        if path != "/api/v1/scalars":
            return False
        q = _scalars_query(scope.get("query_string", b"").decode("latin-1"))
        if q is None:
            return False
        from starlette.requests import Request

        from tbscope.server.encode import NotModified
        from tbscope.server.scalars import respond

        request = Request(scope, receive)
        try:
            # Off the event loop, as the API runs its endpoints.
            response = await asyncio.get_running_loop().run_in_executor(None, respond, request, self.store, q)
        except NotModified as hit:
            response = hit.response()
        except Exception:  # noqa: BLE001 - ApiError or worse: the API gives the full answer
            return False
        await response(scope, receive, send)
        return True


def _scalars_query(query: str) -> SimpleNamespace | None:
    """The fields of a plain ``GET scalars`` (tag, runs, points, x), or None for anything
    else: other parameters, or values the API would refuse."""
    from tbscope._curves import MIN_POINTS
    from tbscope.server.config import MAX_POINTS

    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k not in _SCALARS_PARAMS for k, _ in pairs):
        return None
    single = {k: v for k, v in pairs if k != "run"}
    if sum(1 for k, _ in pairs if k != "run") != len(single):
        return None
    runs = [v for k, v in pairs if k == "run"] or None
    tag = single.get("tag", "")
    points_text = single.get("points", "1000")
    x = single.get("x", "step")
    if not tag or not points_text.isdigit() or x not in ("step", "relative", "wall_time"):
        return None
    points = int(points_text)
    if points > MAX_POINTS or 0 < points < MIN_POINTS:
        return None
    return SimpleNamespace(
        tag=tag,
        runs=runs,
        runs_filter=None,
        points=points,
        x=x,
        smoothing=None,
        step_min=None,
        step_max=None,
        x_min=None,
        x_max=None,
    )
