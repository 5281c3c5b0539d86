"""The ASGI application: the Hub API, file downloads, LFS and the pages.

Why Starlette and not FastAPI: the protocol is someone else's (the Hub's), so the server
must accept exactly what huggingface_hub sends — NDJSON commit bodies, form-encoded
paths-info, revisions percent-encoded with ``safe=""`` — and answer with its headers.
FastAPI's gain is request validation and an OpenAPI schema derived from typed
parameters; here both would be in the way (names are checked by
:mod:`kernelhub_serve.names`, bodies parsed in one place per shape, and the schema is the
Hub's, not ours). Starlette is the routing, request and response layer FastAPI is built
on, without the rest; it is already installed wherever olah is.

The routes are :data:`kernelhub_serve.routes.TABLE`; errors become responses here, once,
through Starlette's exception handlers: JSON in the Hub's shape for API clients, an HTML
page for people (page routes, and unknown paths asked for by a browser). Anything a
handler did not expect is logged with its traceback and answered 500 in one line.

Logging: one line per request — method, path (never the query string, which may carry an
LFS upload ticket), status, time, and the caller's token *name*. Headers, and so tokens,
are never logged. The line is written before the response's last byte is sent, so a
client that has its answer can rely on the line being there.
"""

from __future__ import annotations

import logging
import time

from kernelhub.printable import printable
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .context import HubContext, error_response, segments
from .errors import ApiError
from .pages import error_page
from .routes import routes
from .settings import ServeSettings

log = logging.getLogger("kernelhub_serve")
STATIC = __file__.rsplit("/", 1)[0] + "/static"


def create_app(settings: ServeSettings) -> Starlette:
    ctx = HubContext.create(settings)
    app = Starlette(
        routes=[Mount("/-/static", StaticFiles(directory=STATIC), name="static"), *routes(ctx)],
        middleware=[Middleware(RequestLog)],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error,
                            Exception: _unexpected},
        max_body_size=settings.max_body,
    )
    app.state.hub = ctx
    return app


def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if _wants_html(request):
        return error_page(exc)
    return error_response(exc, request.method == "HEAD")


def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals: no route (404), a route without that method (405), a
    body past ``max_body`` (413)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"nothing at /{'/'.join(segments(request.scope))[:200]} on this hub (see " \
                  "docs/serve.md for the endpoints it serves)"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed here (allowed: " \
                  f"{(exc.headers or {}).get('Allow', 'none')})"
    else:
        message = str(exc.detail)
    error = ApiError(exc.status_code, printable(message))
    error.headers.update(exc.headers or {})
    return _api_error(request, error)


def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, printable(request.url.path), exc_info=exc)
    return _api_error(request, ApiError(500, "the server failed on this request; its log "
                                             "says why"))


def _wants_html(request: Request) -> bool:
    """An HTML page for a browser (its Accept lists text/html) on a page or a path no route
    knows — a person who mistyped a URL; JSON in the Hub's shape for everyone else, and
    always for the API."""
    if not request.scope.get("kernelhub.page", True):
        return False
    return "text/html" in request.headers.get("accept", "")


class RequestLog:
    """One log line per request, without query strings or headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status, logged = 500, False

        def write_line() -> None:
            nonlocal logged
            if logged:
                return
            logged = True
            caller = scope.get("state", {}).get("caller", "anonymous")
            # the path is percent-decoded: a client's "%0a" would start a forged log line
            log.info("%s %s %d %.1fms %s", scope["method"], printable(scope["path"]), status,
                     (time.perf_counter() - start) * 1000, printable(str(caller)))

        async def send_logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                write_line()
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        finally:
            write_line()
