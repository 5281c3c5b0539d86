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

from . import (
    api,
    files,
    listing,
    names,
    pages,
    pages_compare,
    pages_repo,
    pages_search,
    pages_session,
)
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
    used_by: str = ""
    """Which client call reaches it, and what of the answer that client relies on (found
    from the clients' sources, exercised by the tests with those clients)."""


R = "api/{type}/{org}/{name}"
_RESOLVE = ("`hf_hub_download`: `X-Repo-Commit`, `ETag` (git blob id; for a file committed "
            "through LFS its sha256, also in `X-Linked-Etag`, with `X-Linked-Size`), `Range` "
            "→ 206, `If-None-Match` → 304, missing → 404 `EntryNotFound` with the commit")
_LFS_BATCH = ("LFS `basic` uploads (an object the repository holds needs none) and downloads; "
              "the `PUT`/`verify` hrefs it hands out carry an HMAC ticket (huggingface_hub "
              "sends no token there)")


def _repo_pages(*pages: tuple[str, Handler, str]) -> tuple[Row, ...]:
    """Page rows for reading a repository, at ``kernels/<id>/…`` and ``<id>/…`` (the
    Hub's two spellings), the ``kernels/`` one first."""
    rows: list[Row] = []
    for tail, handler, used_by in pages:
        rows.append(Row("GET", f"kernels/{{org}}/{{name}}/{tail}", handler, "read", page=True,
                        used_by=used_by))
        rows.append(Row("GET", f"{{org}}/{{name}}/{tail}", handler, "read", page=True,
                        used_by="the same"))
    return tuple(rows)


TABLE: tuple[Row, ...] = (
    Row("GET", "api/whoami-v2", api.whoami, used_by="`whoami`"),
    Row("POST", "api/validate-yaml", api.validate_yaml, body="json",
        used_by="the README front-matter check before a commit (must parse to a mapping)"),
    Row("POST", "api/repos/create", api.create_repo, "writer", "json",
        used_by="`create_repo` (409 with `url` for `exist_ok`)"),
    Row("DELETE", "api/repos/delete", api.delete_repo, "writer", "json",
        used_by="`delete_repo`"),
    Row("POST", "api/repos/move", api.move_repo, "writer", "json",
        used_by="`move_repo` (writer on both orgs; never overwrites: 409)"),
    Row("GET", "api/organizations/{org}/overview", api.org_overview,
        used_by="kernels 0.19's publisher-trust check"),
    Row("GET", "api/models", listing.list_models,
        used_by="`list_models` (`author`, `search`, `limit`, `sort`), `hf models ls`"),
    Row("GET", "api/kernels", listing.list_kernels, used_by="the same, kernel repositories"),
    Row("GET", R, api.info, "read",
        used_by="`repo_info`/`kernel_info`, `snapshot_download`, HfPublisher"),
    Row("GET", f"{R}/revision/{{rev}}", api.info, "read", used_by="the same, at a revision"),
    Row("GET", f"{R}/refs", api.refs, "read",
        used_by="`list_repo_refs`: kernels' version resolution, HfHub"),
    Row("GET", f"{R}/tree/{{rev}}", api.tree, "read",
        used_by="`list_repo_tree` (`recursive`): kernels' variant listing, `snapshot_download`; "
                "a file committed through LFS carries `lfs` (`oid` = sha256, `size`, "
                "`pointerSize`) and its pointer's oid, as on the Hub"),
    Row("GET", f"{R}/tree/{{rev}}/{{path*}}", api.tree, "read", used_by="the same, under a path"),
    Row("POST", f"{R}/paths-info/{{rev}}", api.paths_info, "read", "form",
        used_by="`get_paths_info`, `file_exists`, HfPublisher (`lfs` as in the tree)"),
    Row("GET", f"{R}/commits/{{rev*}}", api.commits, "read",
        used_by="`list_repo_commits` (HfPublisher's release rule)"),
    Row("GET", f"{R}/auth-check", api.auth_check, "read", used_by="`auth_check`"),
    Row("GET", f"{R}/auth-check/write", api.auth_check, "write", used_by="`auth_check`"),
    Row("POST", f"{R}/preupload/{{rev*}}", api.preupload, "write", "json",
        used_by="upload modes (`regular`; `lfs` at or above `--lfs-threshold`), the oid a "
                "path has (an LFS file's sha256)"),
    Row("POST", f"{R}/commit/{{rev*}}", api.commit, "write", "file",
        used_by="`create_commit`, `upload_file`, `upload_folder`: NDJSON `header`, `file`, "
                "`lfsFile`, `deletedFile`, `deletedFolder`; `parentCommit` → 412; "
                "`create_pr` → 400 (no pull requests)"),
    Row("POST", f"{R}/branch/{{rev*}}", api.create_branch, "write", "json",
        used_by="`create_branch` (`startingPoint`, `emptyBranch`)"),
    Row("DELETE", f"{R}/branch/{{rev*}}", api.delete_branch, "write", used_by="`delete_branch`"),
    Row("POST", f"{R}/tag/{{rev*}}", api.create_tag, "write", "json",
        used_by="`create_tag` (annotated with `message`)"),
    Row("DELETE", f"{R}/tag/{{rev*}}", api.delete_tag, "write", used_by="`delete_tag`"),
    Row("GET", "kernels/{org}/{name}/resolve/{rev}/{path*}", files.resolve, "read",
        used_by=_RESOLVE),
    Row("GET", "{org}/{name}/resolve/{rev}/{path*}", files.resolve, "read", used_by=_RESOLVE),
    Row("POST", "kernels/{org}/{name}.git/info/lfs/objects/batch", files.lfs_batch, body="json",
        used_by=_LFS_BATCH),
    Row("POST", "{org}/{name}.git/info/lfs/objects/batch", files.lfs_batch, body="json",
        used_by=_LFS_BATCH),
    Row("PUT", "-/lfs/{org}/{name}/{oid}", files.lfs_put, body="stream",
        used_by="an LFS object's upload (objects wait per repository; once committed, git "
                "holds them)"),
    Row("POST", "-/lfs/{org}/{name}/{oid}/verify", files.lfs_verify, "write", "json",
        used_by="an LFS upload's verification"),
    Row("GET", "-/lfs/{org}/{name}/{oid}", files.lfs_get, "read",
        used_by="an LFS object of the repository's, uploaded or committed"),
    Row("GET", "", pages.index, page=True, used_by="people: the kernels"),
    Row("GET", "-/search", pages_search.search, page=True,
        used_by="people: kernels by name, description, backend, torch (`q`, `author`, "
                "`backend`, `torch`), from the listing's readable repositories"),
    Row("GET", "-/sign-in", pages_session.sign_in_form, page=True,
        used_by="people: the sign-in form (starts a session, not signed in, for its csrf value)"),
    Row("POST", "-/sign-in", pages_session.sign_in, body="form", page=True,
        used_by="people: a token → a signed HttpOnly SameSite=Lax session cookie (csrf and "
                "same-site checked)"),
    Row("POST", "-/sign-out", pages_session.sign_out, body="form", page=True,
        used_by="people: ends the session (csrf and same-site checked)"),
    Row("GET", "kernels/{org}/{name}", pages.kernel, "read", page=True,
        used_by="people: a kernel's releases, variants, signatures, benchmarks"),
    Row("GET", "{org}/{name}", pages.kernel, "read", page=True, used_by="the same"),
    Row("GET", "-/plot/{org}/{name}/{commit}/{path*}", pages.plot, "read", page=True,
        used_by="people: a benchmark plot"),
    *_repo_pages(
        ("commit/{rev}", pages_repo.commit, "the `commitUrl` a commit answers with: message, "
                                            "author, date, parents, files changed"),
        ("tree/{rev}", pages_repo.tree, "people: the files at a ref, sizes and digests"),
        ("tree/{rev}/{path*}", pages_repo.tree, "the same, in a folder"),
        ("blob/{rev}/{path*}", pages_repo.blob, "people: one file, its text escaped, a download"),
        ("commits/{rev}", pages_repo.commits, "people: a branch's history (`?p=` pages)"),
        ("compare", pages_repo.compare, "people: two refs (`?base=&head=`): files, variants, "
                                        "metadata side by side"),
    ),
    Row("GET", "-/compare/{org}/{name}.svg", pages_compare.compare_plot, "read", page=True,
        used_by="people: a kernel's workloads by release, one line per machine"),
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
            try:
                caller.check_read(call.repo_id, self.ctx.store.path_of(call.repo_id))
            except ApiError as error:
                if row.page:  # a person is told "not here" (and offered the sign-in)
                    error.status = 404
                raise
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
    rows = ["| method | path | handler | access | body | used by |", "|---|---|---|---|---|---|"]
    for row in TABLE:
        handler = f"{row.handler.__module__.rsplit('.', 1)[-1]}.{row.handler.__name__}"
        rows.append(f"| {row.method} | `/{row.pattern}` | `{handler}` | {row.access} | "
                    f"{row.body} | {row.used_by} |")
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
