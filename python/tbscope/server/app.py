"""The ASGI application: the API routers under ``api/v1``, the OpenAPI document and its
rendered docs under ``api``, and the dashboard (``index.html`` and ``static/``), all behind the
guard of :mod:`tbscope.server.security`."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import HTMLResponse, Response

from tbscope.server.errors import ApiError, install
from tbscope.server.security import Guard
from tbscope.server.store import Store

#: The dashboard's built files (index.html and its assets), shipped in the wheel.
STATIC_DIR = Path(__file__).resolve().parent / "static"

PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tbscope</title></head>
<body>
<h1>tbscope</h1>
<p>The dashboard is not part of this build. The API is here:</p>
<ul>
<li><a href="api/docs">API reference</a> (<a href="api/openapi.json">OpenAPI document</a>)</li>
<li><a href="api/v1/status">status</a></li>
<li><a href="api/v1/runs">runs</a></li>
<li><a href="api/v1/tags?kind=scalars">scalar tags</a></li>
</ul>
</body></html>
"""


def create_app(store: Store) -> Any:
    """The application for ``store`` (wrapped in the guard: the value to give uvicorn)."""
    return Guard(create_api(store), store.config)


def create_api(store: Store) -> Any:
    """The API and the dashboard's pages (without the guard)."""
    from tbscope import __version__
    from tbscope.server.routes import core, embeddings, experiments, histograms, media, profiles, query, scalars, tensors

    app = FastAPI(
        title="tbscope",
        version=__version__,
        description="The REST API of `tbscope serve`: TensorBoard event logs, read losslessly. See docs/server.md.",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.store = store
    install(app)
    for module in (core, scalars, histograms, media, tensors, experiments, query, profiles):
        app.include_router(module.router, prefix="/api/v1")
    app.include_router(embeddings.router, prefix="/api/v1")
    _pages(app)
    _tidy_openapi(app)
    return app


def _pages(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC_DIR / "index.html"
        body = page.read_bytes() if page.is_file() else PLACEHOLDER.encode()
        return Response(body, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache"})

    @app.get("/static/{path:path}", include_in_schema=False)
    def static(path: str) -> Response:
        # Only files inside the static folder: anything that resolves elsewhere is not found.
        target = (STATIC_DIR / path).resolve()
        if not path or not target.is_relative_to(STATIC_DIR) or not target.is_file():
            raise ApiError(404, "no such file")
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        # Hashed build outputs (assets/) never change under their name.
        cache = "public, max-age=31536000, immutable" if path.startswith("assets/") else "no-cache"
        return Response(target.read_bytes(), media_type=ctype, headers={"Cache-Control": cache})

    @app.get("/api/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        from tbscope.server.docs import render

        return HTMLResponse(render(app.openapi()), headers={"Cache-Control": "no-cache"})

    @app.get("/api", include_in_schema=False)
    @app.get("/api/v1", include_in_schema=False)
    def api_root() -> Response:
        raise ApiError(404, "the endpoints are listed at api/docs")


def _tidy_openapi(app: FastAPI) -> None:
    """FastAPI documents validation failures as 422; here they are 400 with the error shape."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        for item in schema.get("paths", {}).values():
            for op in item.values():
                if isinstance(op, dict):
                    op.get("responses", {}).pop("422", None)
        comps = schema.get("components", {}).get("schemas", {})
        comps.pop("HTTPValidationError", None)
        comps.pop("ValidationError", None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
