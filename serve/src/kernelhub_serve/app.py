"""The ASGI application: the Hub API, file downloads, LFS and the pages, one router.

Why Starlette and not FastAPI: the protocol is someone else's (the Hub's), so the server
must accept exactly what huggingface_hub sends — NDJSON commit bodies, form-encoded
paths-info, revisions percent-encoded with ``safe=""`` — and answer with its headers.
FastAPI's gain is request validation and an OpenAPI schema derived from typed
parameters; here both would be in the way (the body shapes are parsed by hand in one
place, :mod:`kernelhub_serve.commit_ops`, and the schema is the Hub's, not ours). Starlette
is the routing, request and response layer FastAPI is built on, without the rest; it is
already installed wherever olah is.

Logging: one line per request — method, path (never the query string, which may carry an
LFS upload ticket), status, time, and the caller's token *name*. Headers, and so tokens,
are never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from kernelhub.printable import printable
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import api, files
from .context import HubContext, error_response, segments
from .errors import ApiError
from .lfs import is_oid
from .pages import routes as page_routes
from .settings import ServeSettings

log = logging.getLogger("kernelhub_serve")
STATIC = __file__.rsplit("/", 1)[0] + "/static"


def create_app(settings: ServeSettings) -> Starlette:
    ctx = HubContext.create(settings)

    async def api_route(request: Request) -> Response:
        return await _guard(request, lambda: api.api(ctx, request))

    async def repo_route(request: Request) -> Response:
        return await _guard(request, lambda: _repo_paths(ctx, request))

    methods = ["GET", "HEAD", "POST", "PUT", "DELETE"]
    app = Starlette(routes=[
        Route("/api/{rest:path}", api_route, methods=methods),
        Mount("/-/static", StaticFiles(directory=STATIC), name="static"),
        *page_routes(ctx),
        Route("/{rest:path}", repo_route, methods=methods),
    ])
    app.state.hub = ctx
    return _Logged(app)  # type: ignore[return-value]


async def _repo_paths(ctx: HubContext, request: Request) -> Response:
    """``[kernels/]<org>/<name>/resolve/<rev>/<path>``, ``…<name>.git/info/lfs/objects/batch``
    and ``/-/lfs/<org>/<name>/<oid>[/verify]``."""
    segs = segments(request)
    if segs[:2] == ["-", "lfs"] and len(segs) in (5, 6):
        if not is_oid(segs[4]):  # checked before any path is made of it
            raise ApiError(404, f"nothing at /{'/'.join(segs)} on this hub: not an LFS oid")
        verify = len(segs) == 6 and segs[5] == "verify"
        return await files.lfs_object(ctx, request, f"{segs[2]}/{segs[3]}", segs[4], verify)
    prefix = ""
    if segs[:1] == ["kernels"]:
        prefix, segs = "kernels/", segs[1:]
    if len(segs) >= 5 and segs[2] == "resolve" and request.method in ("GET", "HEAD"):
        return await files.resolve(ctx, request, f"{segs[0]}/{segs[1]}", segs[3],
                                   "/".join(segs[4:]))
    if (len(segs) == 6 and segs[1].endswith(".git") and segs[2:] == ["info", "lfs", "objects",
                                                                     "batch"]
            and request.method == "POST"):
        return await files.lfs_batch(ctx, request, f"{segs[0]}/{segs[1][:-4]}", prefix)
    raise ApiError(404, f"nothing at /{'/'.join(segments(request))} on this hub")


async def _guard(request: Request, handler: Callable[[], Awaitable[Response]]) -> Response:
    try:
        return await handler()
    except ApiError as error:
        return error_response(error, request.method == "HEAD")


class _Logged:
    """One log line per request, without query strings or headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state = app.state  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        finally:
            caller = scope.get("state", {}).get("caller", "anonymous")
            # the path is percent-decoded: a client's "%0a" would start a forged log line
            log.info("%s %s %d %.1fms %s", scope["method"], printable(scope["path"]), status,
                     (time.perf_counter() - start) * 1000, printable(str(caller)))
