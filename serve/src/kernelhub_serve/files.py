"""File bytes: ``/[kernels/]<id>/resolve/<rev>/<path>`` with ETag and Range, and the LFS
batch API with its upload and verify endpoints.

A resolve answers as the Hub does for a plain git file (huggingface_hub's
``get_hf_file_metadata`` and ``http_get`` read exactly these): ``X-Repo-Commit`` (the
commit the revision named), ``ETag`` (the git blob id, which names the bytes), the size,
``Accept-Ranges: bytes``; a ``Range`` gets 206 with ``Content-Range`` (resumed
downloads), ``If-None-Match`` with the current ETag gets 304. A missing file is 404
``EntryNotFound`` with ``X-Repo-Commit`` set, which lets huggingface_hub cache the
absence for that commit.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .context import HubContext, error_response, json_response, threaded
from .errors import ApiError
from .lfs import LfsStore
from .repos import Entry

LFS_JSON = "application/vnd.git-lfs+json"


async def resolve(ctx: HubContext, request: Request, repo_id: str, rev: str, path: str) -> Response:
    caller = ctx.caller(request)
    caller.check_read(repo_id, ctx.store.path_of(repo_id))
    head = request.method == "HEAD"

    def look_up() -> tuple[str, Entry]:
        repo = ctx.store.open(repo_id)
        commit = ctx.store.commit_of(repo, repo_id, rev)
        try:
            return commit, ctx.store.file(repo, repo_id, commit, path)
        except ApiError as error:
            error.headers["X-Repo-Commit"] = commit
            raise

    try:
        commit, entry = await threaded(look_up)
    except ApiError as error:
        return error_response(error, head)
    headers = {"X-Repo-Commit": commit, "ETag": f'"{entry.oid}"', "Accept-Ranges": "bytes",
               "Content-Type": "application/octet-stream",
               "Cache-Control": "private, max-age=0, must-revalidate"}
    if request.headers.get("if-none-match", "").strip('W/"') == entry.oid:
        return Response(status_code=304, headers=headers)
    size = entry.size
    span = _range(request.headers.get("range"), size)
    if isinstance(span, str):
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    if head:
        return Response(status_code=200, headers={**headers, "Content-Length": str(size)})
    data = await threaded(ctx.store.read, ctx.store.open(repo_id), entry.oid)
    if span is None:
        return Response(data, status_code=200, headers=headers)
    start, end = span
    return Response(data[start:end + 1], status_code=206,
                    headers={**headers, "Content-Range": f"bytes {start}-{end}/{size}"})


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

async def lfs_batch(ctx: HubContext, request: Request, repo_id: str, prefix: str) -> Response:
    caller = ctx.caller(request)
    org = repo_id.split("/")[0]
    try:
        payload = await request.json()
    except ValueError:
        raise ApiError(400, "the LFS batch request is not JSON") from None
    operation = payload.get("operation")
    if operation == "upload":
        caller.check_write(org)
    else:
        caller.check_read(repo_id, ctx.store.path_of(repo_id))
    await threaded(ctx.store.open, repo_id)
    transfers = payload.get("transfers") or ["basic"]
    if "basic" not in transfers:
        raise ApiError(422, "this hub speaks the LFS 'basic' transfer only")
    base = f"{ctx.base_url(request)}/-/lfs/{repo_id}"
    objects = []
    for obj in payload.get("objects", []):
        oid, size = obj.get("oid"), obj.get("size")
        if not isinstance(oid, str) or len(oid) != 64 or not isinstance(size, int) or size < 0:
            objects.append({"oid": oid, "size": size,
                            "error": {"code": 422, "message": "an object needs a sha256 oid and a size"}})
            continue
        item: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
        present = ctx.lfs.has(oid, size)
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


async def lfs_object(ctx: HubContext, request: Request, repo_id: str, oid: str,
                     verify: bool) -> Response:
    """``PUT`` an object (with the ticket from the batch answer), ``POST …/verify`` it
    (with a write token), or ``GET`` it (with read rights)."""
    store: LfsStore = ctx.lfs
    if request.method == "PUT":
        size_text = request.query_params.get("size", "")
        if not size_text.isdigit():
            raise ApiError(400, "the upload URL lost its size; ask the batch API again")
        size = int(size_text)
        store.check_ticket(repo_id, oid, size, request.query_params.get("ticket", ""))
        await store.receive(oid, size, request.stream())
        return Response(status_code=200)
    caller = ctx.caller(request)
    if verify:
        caller.check_write(repo_id.split("/")[0])
        payload = await request.json()
        if not store.has(oid, payload.get("size")):
            raise ApiError(404, f"LFS object {oid[:12]} was not received (or has another size)")
        return json_response({"oid": oid, "size": payload.get("size")})
    caller.check_read(repo_id, ctx.store.path_of(repo_id))
    if not store.has(oid, None):
        raise ApiError(404, f"LFS object {oid[:12]} does not exist")
    return Response(store.path(oid).read_bytes(), media_type="application/octet-stream")


def json_response_lfs(data: object) -> Response:
    response = json_response(data)
    response.headers["Content-Type"] = LFS_JSON
    return response
