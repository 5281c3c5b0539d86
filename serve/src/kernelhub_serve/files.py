"""File bytes: ``/[kernels/]<id>/resolve/<rev>/<path>`` with ETag and Range, and the LFS
batch API with its upload and verify endpoints.

A resolve answers as the Hub does for a plain git file (huggingface_hub's
``get_hf_file_metadata`` and ``http_get`` read exactly these): ``X-Repo-Commit`` (the
commit the revision named), ``ETag`` (the git blob id, which names the bytes), the size,
``Accept-Ranges: bytes``; for a file committed through LFS the Hub's ``X-Linked-Etag``
(the object's sha256, the ETag too) and ``X-Linked-Size``; a ``Range`` gets 206 with
``Content-Range`` (resumed downloads), ``If-None-Match`` with the current ETag gets 304. A missing file is 404
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
    lfs = ctx.store.lfs_objects(repo).get(entry.oid)
    etag = entry.oid if lfs is None else lfs.sha256
    headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
               "Content-Type": "application/octet-stream",
               "Cache-Control": cache_control(call, repo.path, rev, commit)}
    if lfs is not None:
        headers |= {"X-Linked-Etag": f'"{lfs.sha256}"', "X-Linked-Size": str(lfs.size)}
    if call.request.headers.get("if-none-match", "").strip('W/"') == etag:
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
BRIEF = "public, max-age=1"
"""Which commit a revision names, in a repository anyone may read: a shared cache may
answer it for a second (nginx's stampede of cold loads asks serve once, not once a load);
the files a load then fetches are by that commit, so a late answer is never a torn one."""


def info_cache_control(call: Call, repo_path: Path) -> str:
    """``Cache-Control`` for ``repo_info`` at a revision (see :data:`BRIEF`)."""
    return BRIEF if Caller(None, call.caller.table).may_read(call.org, repo_path) else PRIVATE


def cache_control(call: Call, repo_path: Path, rev: str, commit: str) -> str:
    """``Cache-Control`` for what ``rev`` names when it is ``commit``: a file, or a tree
    listing (nothing at a full commit id ever changes)."""
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
    committed = ctx.store.lfs_blobs(ctx.store.open(repo_id))
    transfers = payload.get("transfers") or ["basic"]
    if not isinstance(transfers, list) or "basic" not in transfers:
        raise ApiError(422, "this hub speaks the LFS 'basic' transfer only")
    wanted = payload.get("objects", [])
    if not isinstance(wanted, list):
        raise ApiError(400, "an LFS batch request lists objects: [{oid, size}]")
    base = f"{ctx.base_url(call.request)}/-/lfs/{repo_id}"
    objects = [_batch_item(call, operation, base, committed, obj) for obj in wanted]
    return json_response_lfs({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})


def _batch_item(call: Call, operation: str, base: str, committed: dict[str, tuple[str, int]],
                obj: object) -> dict[str, Any]:
    """One object's answer: the actions to take (none for an upload the repository holds
    already), or the error."""
    oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
    if not is_oid(oid) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return {"oid": str(oid)[:80], "size": size if isinstance(size, int) else None,
                "error": {"code": 422, "message": "an object needs a sha256 oid (64 lowercase "
                                                  "hex) and a size"}}
    assert isinstance(oid, str)
    item: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
    present = _holds(call, committed, oid, size)
    if operation == "upload" and not present:
        ticket = call.ctx.lfs.ticket(call.repo_id, oid, size)
        item["actions"] = {
            "upload": {"href": f"{base}/{oid}?size={size}&ticket={ticket}", "expires_in": 3600},
            "verify": {"href": f"{base}/{oid}/verify"},
        }
    elif operation == "download" and not present:
        item["error"] = {"code": 404, "message": "Object does not exist"}
    elif operation == "download":
        item["actions"] = {"download": {"href": f"{base}/{oid}"}}
    return item


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
    oid, size, store = call.params["oid"], call.json.get("size"), call.ctx.store
    if not isinstance(size, int) or not _holds(call, store.lfs_blobs(store.open(call.repo_id)),
                                               oid, size):
        raise ApiError(404, f"LFS object {oid[:12]} was not received (or has another size)")
    return json_response({"oid": oid, "size": size})


def lfs_get(call: Call) -> Response:
    """An object's bytes: waiting for a commit, or committed (then read from git, as the
    Hub keeps every object a repository's commits named)."""
    oid, lfs, store = call.params["oid"], call.ctx.lfs, call.ctx.store
    if lfs.has(call.repo_id, oid, None):
        return FileResponse(lfs.path(call.repo_id, oid), media_type="application/octet-stream")
    repo = store.open(call.repo_id)
    if oid not in (committed := store.lfs_blobs(repo)):
        raise ApiError(404, f"LFS object {oid[:12]} does not exist in {call.repo_id}")
    blob, size = committed[oid]
    return StreamingResponse(store.stream(repo, blob, 0, size),
                             media_type="application/octet-stream",
                             headers={"Content-Length": str(size)})


def _holds(call: Call, committed: dict[str, tuple[str, int]], oid: str, size: int) -> bool:
    """Whether the repository holds object ``oid`` of ``size``: waiting for a commit, or
    committed (``committed``: :meth:`RepoStore.lfs_blobs`; the Hub keeps every object a
    repository's commits named, so a client need not send it again)."""
    return call.ctx.lfs.has(call.repo_id, oid, size) or committed.get(oid, ("", -1))[1] == size


def json_response_lfs(data: object) -> Response:
    response = json_response(data)
    response.headers["Content-Type"] = LFS_JSON
    return response
