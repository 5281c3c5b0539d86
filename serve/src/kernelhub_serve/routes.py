"""The protocol as one table: ``(method, pattern, handler)`` per endpoint, matched on the
raw path's segments.

Patterns are matched on segments split *before* percent-decoding (huggingface_hub quotes a
revision with ``safe=""``, so ``refs%2Fpr%2F1`` is one segment), which is why these are
not Starlette's own path routes. ``{x}`` is one segment, ``{x*}`` the rest of the path
(joined with '/'), ``{x}.git`` a segment with that suffix. A parameter's name chooses its
check in :mod:`kernelhub_serve.names`, applied before the handler runs; a row also
declares who may call it and what body it takes, and the route enforces both — access
*before* any byte of the body is read, the body's size while it streams in — so a handler
starts from names, rights and a body that are already known to be good.

Handlers written ``def`` (everything that runs git) run in Starlette's threadpool;
``async def`` ones (the LFS upload, which streams) on the event loop.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any, Literal
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, request_response
from starlette.types import Receive, Scope, Send

from . import api, files, listing, names, pages
from .context import Call, HubContext, segments
from .errors import ApiError
from .repos import repo_type_of

Handler = Callable[[Call], Response] | Callable[[Call], Awaitable[Response]]
Access = Literal["any", "read", "write", "writer"]
"""``read``/``write``: rights on the route's ``{org}`` (``write`` implies ``read``);
``writer``: a token that may write somewhere (the org is in the body); ``any``: the
handler decides (whoami, pages, the ticketed LFS upload)."""
Body = Literal["none", "json", "form", "file", "stream"]

JSON_BODY = 16 * 1024**2
"""The largest JSON or form body (batch requests, paths-info lists, repository settings)."""
ANONYMOUS_BODY = 1024**2
"""The largest body from a caller that may write nothing: such a request only ever carries
a short listing, and the server reads no more than this before answering."""
SPOOL_IN_MEMORY = 8 * 1024**2


@dataclass(frozen=True)
class Row:
    method: str
    pattern: str
    handler: Handler
    access: Access = "any"
    body: Body = "none"
    page: bool = False
    """A page for people: its errors are HTML."""


R = "api/{type}/{org}/{name}"
TABLE: tuple[Row, ...] = (
    Row("GET", "api/whoami-v2", api.whoami),
    Row("POST", "api/validate-yaml", api.validate_yaml, body="json"),
    Row("POST", "api/repos/create", api.create_repo, "writer", "json"),
    Row("DELETE", "api/repos/delete", api.delete_repo, "writer", "json"),
    Row("POST", "api/repos/move", api.move_repo, "writer", "json"),
    Row("GET", "api/organizations/{org}/overview", api.org_overview),
    Row("GET", "api/models", listing.list_models),
    Row("GET", "api/kernels", listing.list_kernels),
    Row("GET", R, api.info, "read"),
    Row("GET", f"{R}/revision/{{rev}}", api.info, "read"),
    Row("GET", f"{R}/refs", api.refs, "read"),
    Row("GET", f"{R}/tree/{{rev}}", api.tree, "read"),
    Row("GET", f"{R}/tree/{{rev}}/{{path*}}", api.tree, "read"),
    Row("POST", f"{R}/paths-info/{{rev}}", api.paths_info, "read", "form"),
    Row("GET", f"{R}/commits/{{rev*}}", api.commits, "read"),
    Row("GET", f"{R}/auth-check", api.auth_check, "read"),
    Row("GET", f"{R}/auth-check/write", api.auth_check, "write"),
    Row("POST", f"{R}/preupload/{{rev*}}", api.preupload, "write", "json"),
    Row("POST", f"{R}/commit/{{rev*}}", api.commit, "write", "file"),
    Row("POST", f"{R}/branch/{{rev*}}", api.create_branch, "write", "json"),
    Row("DELETE", f"{R}/branch/{{rev*}}", api.delete_branch, "write"),
    Row("POST", f"{R}/tag/{{rev*}}", api.create_tag, "write", "json"),
    Row("DELETE", f"{R}/tag/{{rev*}}", api.delete_tag, "write"),
    Row("GET", "kernels/{org}/{name}/resolve/{rev}/{path*}", files.resolve, "read"),
    Row("GET", "{org}/{name}/resolve/{rev}/{path*}", files.resolve, "read"),
    Row("POST", "kernels/{org}/{name}.git/info/lfs/objects/batch", files.lfs_batch, body="json"),
    Row("POST", "{org}/{name}.git/info/lfs/objects/batch", files.lfs_batch, body="json"),
    Row("PUT", "-/lfs/{org}/{name}/{oid}", files.lfs_put, body="stream"),
    Row("POST", "-/lfs/{org}/{name}/{oid}/verify", files.lfs_verify, "write", "json"),
    Row("GET", "-/lfs/{org}/{name}/{oid}", files.lfs_get, "read"),
    Row("GET", "", pages.index, page=True),
    Row("GET", "kernels/{org}/{name}", pages.kernel, "read", page=True),
    Row("GET", "{org}/{name}", pages.kernel, "read", page=True),
    Row("GET", "kernels/{org}/{name}/commit/{rev}", pages.kernel, "read", page=True),
    Row("GET", "{org}/{name}/commit/{rev}", pages.kernel, "read", page=True),
    Row("GET", "-/plot/{org}/{name}/{commit}/{path*}", pages.plot, "read", page=True),
)
"""Every endpoint, first match wins (the ``kernels/`` forms before the plain ones)."""

_CHECKS: dict[str, Callable[[str], str]] = {
    "type": lambda v: (repo_type_of(v), v)[1],
    "org": lambda v: names.repo_part(v, "organisation"),
    "name": lambda v: names.repo_part(v, "repository"),
    "rev": names.revision,
    "path": lambda v: names.file_path(v.strip("/")),  # a quoted "build/" lists build
    "oid": names.oid,
    "commit": names.segment,
}


class SegmentRoute(BaseRoute):
    """One row of :data:`TABLE` as a Starlette route."""

    def __init__(self, row: Row, ctx: HubContext) -> None:
        self.row = row
        self.ctx = ctx
        self.tokens = [t for t in row.pattern.split("/") if t]
        self.methods = {row.method, "HEAD"} if row.method == "GET" else {row.method}
        self.app = request_response(self._endpoint)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        params = _match(self.tokens, segments(scope))
        if params is None:
            return Match.NONE, {}
        child = {"path_params": params, "kernelhub.page": self.row.page}
        return (Match.FULL if scope["method"] in self.methods else Match.PARTIAL), child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in self.methods:
            raise HTTPException(405, headers={"Allow": ", ".join(sorted(self.methods))})
        await self.app(scope, receive, send)

    async def _endpoint(self, request: Request) -> Response:
        row = self.row
        params = {key: _CHECKS[key](value) for key, value in request.path_params.items()}
        caller = self.ctx.caller(request)
        call = Call(self.ctx, request, caller, params)
        if row.access == "writer":
            caller.check_writer()
        elif row.access in ("read", "write"):
            if row.access == "write":
                caller.check_write(call.org)
            caller.check_read(call.repo_id, self.ctx.store.path_of(call.repo_id))
        limit = self.ctx.settings.max_body if caller.may_write_somewhere else ANONYMOUS_BODY
        if row.body in ("json", "form"):
            data = await read_body(request, min(limit, JSON_BODY))
            if row.body == "json":
                call.json = _json_object(data)
            else:
                call.form = _form(data)
        elif row.body == "file":
            call.upload = await spool_body(request, limit)
        if row.body == "stream" or _is_async(row.handler):
            return await row.handler(call)  # type: ignore[misc]
        try:
            return await run_in_threadpool(row.handler, call)  # type: ignore[arg-type]
        finally:
            if call.upload is not None:
                call.upload.close()


def table_markdown() -> str:
    """:data:`TABLE` as the Markdown table docs/serve.md carries (a test keeps them equal,
    so the docs cannot drift from the routes)."""
    rows = ["| method | path | handler | access | body |", "|---|---|---|---|---|"]
    for row in TABLE:
        handler = f"{row.handler.__module__.rsplit('.', 1)[-1]}.{row.handler.__name__}"
        rows.append(f"| {row.method} | `/{row.pattern}` | `{handler}` | {row.access} | "
                    f"{row.body} |")
    return "\n".join(rows) + "\n"


def routes(ctx: HubContext) -> list[BaseRoute]:
    return [SegmentRoute(row, ctx) for row in TABLE]


def _match(tokens: list[str], segs: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if token.endswith("*}"):
            rest = segs[i:]
            if not rest:
                return None
            params[token[1:-2]] = "/".join(rest)
            return params
        if i >= len(segs):
            return None
        seg = segs[i]
        if token.startswith("{"):
            key, _, suffix = token[1:].partition("}")
            if not seg.endswith(suffix) or len(seg) == len(suffix):
                return None
            params[key] = seg[:len(seg) - len(suffix)] if suffix else seg
        elif token != seg:
            return None
    return params if len(segs) == len(tokens) else None


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes ``limit`` (before reading
    anything when ``Content-Length`` already says so)."""
    _check_length(request, limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def spool_body(request: Request, limit: int) -> IO[bytes]:
    """The body in a temporary file (in memory up to a few MiB), within ``limit``."""
    _check_length(request, limit)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def _check_length(request: Request, limit: int) -> None:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _too_large(limit)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this hub takes here ({limit} bytes)"
                         "; large files go through the LFS batch API")


def _json_object(data: bytes) -> dict[str, Any]:
    if not data.strip():
        return {}
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not JSON") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return value


def _form(data: bytes) -> dict[str, list[str]]:
    try:
        return parse_qs(data.decode(), keep_blank_values=True, max_num_fields=100_000)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "the request body is not a urlencoded form") from None
