"""File bytes: ``/[kernels/]<id>/resolve/<rev>/<path>`` with ETag and Range, and the LFS
batch API with its upload and verify endpoints.

A resolve answers as the Hub does for a plain git file (huggingface_hub's
``get_hf_file_metadata`` and ``http_get`` read exactly these): ``X-Repo-Commit`` (the
commit the revision named), ``ETag`` (the git blob id, which names the bytes), the size,
``Accept-Ranges: bytes``; a ``Range`` gets 206 with ``Content-Range`` (resumed
downloads), ``If-None-Match`` with the current ETag gets 304. A missing file is 404
``EntryNotFound`` with ``X-Repo-Commit`` set, which lets huggingface_hub cache the
absence for that commit.

``Cache-Control`` tells a shared cache (nginx in front of several serve processes, see
docs/serve.md) what it may keep: a file named by a full commit id in a repository anyone
may read never changes, so it is ``public, immutable``; everything else — a branch or
tag (it moves), a private repository or one only tokens may read — is ``private``, which
no shared cache stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.responses import FileResponse, Response, StreamingResponse

from .access import Caller
from .context import Call, json_response
from .errors import ApiError
from .lfs import is_oid

LFS_JSON = "application/vnd.git-lfs+json"


def resolve(call: Call) -> Response:
    ctx, repo_id, rev, path = call.ctx, call.repo_id, call.params["rev"], call.params["path"]
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    try:
        entry = ctx.store.file(repo, repo_id, commit, path)
    except ApiError as error:
        error.headers["X-Repo-Commit"] = commit
        raise
    headers = {"X-Repo-Commit": commit, "ETag": f'"{entry.oid}"', "Accept-Ranges": "bytes",
               "Content-Type": "application/octet-stream",
               "Cache-Control": _cache_control(call, repo.path, rev, commit)}
    if call.request.headers.get("if-none-match", "").strip('W/"') == entry.oid:
        return Response(status_code=304, headers=headers)
    size = entry.size
    span = _range(call.request.headers.get("range"), size)
    if isinstance(span, str):
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    if call.head:
        return Response(status_code=200, headers={**headers, "Content-Length": str(size)})
    if span is None or span[0] == 0:  # a resumed download was counted when it began
        ctx.downloads.record(repo_id, path)
    if span is None:
        return StreamingResponse(ctx.store.stream(repo, entry.oid, 0, size), status_code=200,
                                 headers={**headers, "Content-Length": str(size)})
    start, end = span
    return StreamingResponse(ctx.store.stream(repo, entry.oid, start, end + 1 - start),
                             status_code=206,
                             headers={**headers, "Content-Length": str(end + 1 - start),
                                      "Content-Range": f"bytes {start}-{end}/{size}"})


IMMUTABLE = "public, max-age=31536000, immutable"
PRIVATE = "private, max-age=0, must-revalidate"


def _cache_control(call: Call, repo_path: Path, rev: str, commit: str) -> str:
    anonymous = Caller(None, call.caller.table)
    if rev == commit and anonymous.may_read(call.org, repo_path):
        return IMMUTABLE
    return PRIVATE


def _range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(first, last) byte of a single ``bytes=`` range; None for the whole file (no range,
    or one this server answers whole, as RFC 9110 allows: several ranges, other units)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes="):].strip().partition("-")
    try:
        if not first:  # the last N bytes
            count = int(last)
            return (max(size - count, 0), size - 1) if count > 0 and size else "unsatisfiable"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


# -- LFS ---------------------------------------------------------------------------------

def lfs_batch(call: Call) -> Response:
    ctx, repo_id, caller, payload = call.ctx, call.repo_id, call.caller, call.json
    operation = payload.get("operation")
    if operation not in ("upload", "download"):
        raise ApiError(400, "an LFS batch request names operation upload or download")
    if operation == "upload":
        caller.check_write(call.org)
    caller.check_read(repo_id, ctx.store.path_of(repo_id))
    ctx.store.open(repo_id)
    transfers = payload.get("transfers") or ["basic"]
    if not isinstance(transfers, list) or "basic" not in transfers:
        raise ApiError(422, "this hub speaks the LFS 'basic' transfer only")
    wanted = payload.get("objects", [])
    if not isinstance(wanted, list):
        raise ApiError(400, "an LFS batch request lists objects: [{oid, size}]")
    base = f"{ctx.base_url(call.request)}/-/lfs/{repo_id}"
    objects = []
    for obj in wanted:
        oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
        if not is_oid(oid) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            objects.append({"oid": str(oid)[:80], "size": size if isinstance(size, int) else None,
                            "error": {"code": 422, "message": "an object needs a sha256 oid "
                                                              "(64 lowercase hex) and a size"}})
            continue
        assert isinstance(oid, str)
        item: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
        present = ctx.lfs.has(repo_id, oid, size)
        if operation == "upload" and not present:
            ticket = ctx.lfs.ticket(repo_id, oid, size)
            item["actions"] = {
                "upload": {"href": f"{base}/{oid}?size={size}&ticket={ticket}", "expires_in": 3600},
                "verify": {"href": f"{base}/{oid}/verify"},
            }
        elif operation == "download":
            if not present:
                item["error"] = {"code": 404, "message": "Object does not exist"}
            else:
                item["actions"] = {"download": {"href": f"{base}/{oid}"}}
        objects.append(item)
    return json_response_lfs({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})


async def lfs_put(call: Call) -> Response:
    """The bytes of one object, to the ``href`` (with its ticket) a batch answer handed
    out; streamed to disk, hashed as they come."""
    oid, repo_id, query = call.params["oid"], call.repo_id, call.request.query_params
    size_text = query.get("size", "")
    if not size_text.isdigit() or len(size_text) > 20:
        raise ApiError(400, "the upload URL lost its size; ask the batch API again")
    size = int(size_text)
    call.ctx.lfs.check_ticket(repo_id, oid, size, query.get("ticket", ""))
    await call.ctx.lfs.receive(repo_id, oid, size, call.request.stream())
    return Response(status_code=200)


def lfs_verify(call: Call) -> Response:
    oid, size = call.params["oid"], call.json.get("size")
    if not isinstance(size, int) or not call.ctx.lfs.has(call.repo_id, oid, size):
        raise ApiError(404, f"LFS object {oid[:12]} was not received (or has another size)")
    return json_response({"oid": oid, "size": size})


def lfs_get(call: Call) -> Response:
    oid, lfs = call.params["oid"], call.ctx.lfs
    if not lfs.has(call.repo_id, oid, None):
        raise ApiError(404, f"LFS object {oid[:12]} does not exist in {call.repo_id}")
    return FileResponse(lfs.path(call.repo_id, oid), media_type="application/octet-stream")


def json_response_lfs(data: object) -> Response:
    response = json_response(data)
    response.headers["Content-Type"] = LFS_JSON
    return response
