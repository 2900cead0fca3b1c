"""The guard in front of every request: path prefix, Host allow-list, token, body size, and the
security headers of every answer. A plain ASGI middleware, so it also covers errors raised
before routing and streamed answers."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from tbscope.server.config import MAX_BODY_BYTES, Config
from tbscope.server.errors import body as error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "tbscope_token"
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def page_csp(frame_ancestors: str) -> str:
    """The dashboard's policy: its own scripts and styles only, data from its own origin."""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
        f"base-uri 'self'; form-action 'self'; frame-ancestors {frame_ancestors}"
    )


def _host_name(value: str) -> str:
    """A Host header without its port, lowercase (``[::1]:6006`` -> ``[::1]``)."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        return v[: end + 1] if end > 0 else v
    return v.rsplit(":", 1)[0] if v.count(":") == 1 else v


class Guard:
    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.prefix = config.path_prefix
        self.token = config.token.encode() if config.token else None
        self.hosts = config.host_names()
        self.allow_any_host = "*" in config.allowed_hosts
        self.page_csp = page_csp(config.frame_ancestors)
        self.cookie_path = (self.prefix or "") + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets here: the connection is refused
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        secured = self._secured(send)
        host = _host_name(headers.get("host", ""))
        if not self.allow_any_host and host not in self.hosts:
            await _error(secured, 400, f"Host {host!r} is not allowed; if this server is reached by that name, restart it with --allowed-host {host}")
            return
        path = scope["path"]
        if self.prefix:
            if path == self.prefix:
                await _redirect(secured, self.prefix + "/" + _query(scope))
                return
            if not path.startswith(self.prefix + "/"):
                await _error(secured, 404, f"this server lives under {self.prefix}/")
                return
            scope = dict(scope)
            scope["root_path"] = self.prefix
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
            given = query.get("token")
            if given is not None and scope["method"] in ("GET", "HEAD"):
                if not hmac.compare_digest(given.encode(), self.token):
                    await _error(secured, 401, "wrong token: open the URL the server printed, or ask its owner for the token")
                    return
                rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True) if k != "token"])
                cookie = f"{COOKIE}={given}; HttpOnly; SameSite=Strict; Path={self.cookie_path}"
                raw = scope.get("raw_path") or path.encode("utf-8")
                here = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
                await _redirect(secured, here + (f"?{rest}" if rest else ""), [(b"set-cookie", cookie.encode("latin-1"))])
                return
            if not self._public(scope) and not self._authorized(headers):
                await _error(secured, 401, "a token is required: send 'Authorization: Bearer <token>' or open the URL with ?token=<token> once", [(b"www-authenticate", b"Bearer")])
                return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            await _error(secured, 413, f"request bodies are limited to {MAX_BODY_BYTES} bytes")
            return
        await self.app(scope, _limited(receive), secured)

    def _public(self, scope: Scope) -> bool:
        """The dashboard's page and its built assets pass without the token: they are the same
        public build for every server (no data, no logdir or run names; the page learns those
        from the guarded API), and a page that cannot load cannot ask for the token."""
        if scope["method"] not in ("GET", "HEAD"):
            return False
        rest: str = scope["path"][len(self.prefix) :] if self.prefix else scope["path"]
        if ".." in rest.split("/"):
            return False  # routing is literal, but a dot segment never needs to pass unguarded
        return rest == "/" or rest.startswith("/static/")

    def _authorized(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(auth[7:].strip().encode(), self.token):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header is just no cookie
            return False
        got = cookie.get(COOKIE)
        return got is not None and hmac.compare_digest(got.value.encode(), self.token)

    def _secured(self, send: Send) -> Send:
        page_csp = self.page_csp

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                hdrs = list(message.get("headers", []))
                names = {k.lower() for k, _ in hdrs}
                ctype = next((v for k, v in hdrs if k.lower() == b"content-type"), b"")
                html = ctype.startswith(b"text/html")
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                ]
                if b"content-security-policy" not in names:
                    extra.append((b"content-security-policy", (page_csp if html else API_CSP).encode()))
                if not html:
                    extra.append((b"x-frame-options", b"DENY"))
                message = dict(message)
                message["headers"] = hdrs + [h for h in extra if h[0] not in names]
            await send(message)

        return wrapped


def _limited(receive: Receive) -> Receive:
    """Stops reading a body (chunked, without Content-Length) past the size limit."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise ValueError("request body too large")
        return message

    return wrapped


def _query(scope: Scope) -> str:
    q = scope.get("query_string", b"").decode("latin-1")
    return f"?{q}" if q else ""


async def _error(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = error_body(status, message)
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())] + (headers or [])
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": data})


async def _redirect(send: Send, location: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    hdrs = [(b"location", location.encode("latin-1")), (b"content-length", b"0"), (b"cache-control", b"no-store")] + (headers or [])
    await send({"type": "http.response.start", "status": 303, "headers": hdrs})
    await send({"type": "http.response.body", "body": b""})
