"""One error shape for every answer that is not a success, and never a stack trace:
``{"error": {"status": 404, "code": "not_found", "message": "..."}}``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from fastapi.exceptions import RequestValidationError

log = logging.getLogger("tbscope.server")

CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
    500: "internal",
    504: "timeout",
}


class ApiError(Exception):
    """An error answer: the status, and a message saying what to do."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or CODES.get(status, "bad_request" if status < 500 else "internal")


def body(status: int, message: str, code: str | None = None) -> bytes:
    from tbscope.server.encode import dumps

    return dumps({"error": {"status": status, "code": code or CODES.get(status, "internal"), "message": message}})


def error_response(
    status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    return Response(body(status, message, code), status_code=status, media_type="application/json", headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = [str(x) for x in e.get("loc", ()) if x not in ("query", "body", "path")]
        where = ".".join(loc) or "request"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return "; ".join(parts) + " (see /api/docs for the parameters)"


def install(app: Any) -> None:
    """Exception handlers giving every error the one shape."""
    # Here, not at the top: the front answers its first requests before FastAPI is imported.
    from fastapi.exceptions import RequestValidationError

    from tbscope.server.encode import NotModified

    async def not_modified(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, NotModified)
        return exc.response()

    async def api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.message, exc.code)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        msg = {
            404: "no such endpoint; the API is under api/v1/ (see api/docs)",
            405: "method not allowed here (see api/docs)",
        }.get(exc.status_code, str(exc.detail))
        return error_response(exc.status_code, msg, headers=getattr(exc, "headers", None))

    async def validation_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, _validation_message(exc))

    async def internal(_request: Request, exc: Exception) -> Response:
        log.error("internal error", exc_info=exc)
        return error_response(500, "internal error; the server log has the details")

    app.add_exception_handler(NotModified, not_modified)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, internal)
