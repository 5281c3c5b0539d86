"""The Hub HTTP API under ``/api/``: what huggingface_hub, the ecosystem's ``kernels``
loaders (0.17.2, 0.19.1) and kernelhub's HfHub and HfPublisher call.

Reads (``<type>`` is ``models`` or ``kernels``; see :mod:`kernelhub_serve.repos`)::

  GET  /api/<type>/<id>[/revision/<rev>]        repo_info / kernel_info / model_info
  GET  /api/<type>/<id>/refs                    list_repo_refs
  GET  /api/<type>/<id>/tree/<rev>[/<path>]     list_repo_tree (recursive=1), snapshot_download
  POST /api/<type>/<id>/paths-info/<rev>        get_paths_info, file_exists
  GET  /api/<type>/<id>/commits/<rev>           list_repo_commits
  GET  /api/<type>/<id>/auth-check[/write]      auth_check
  GET  /api/whoami-v2                           whoami
  GET  /api/organizations/<org>/overview        the publisher-trust check of kernels 0.19

Writes (a token with write rights on the organisation)::

  POST   /api/repos/create                      create_repo (409 if it exists)
  DELETE /api/repos/delete                      delete_repo
  POST   /api/<type>/<id>/preupload/<rev>       upload modes (regular; lfs above a threshold)
  POST   /api/<type>/<id>/commit/<rev>          create_commit, upload_file, upload_folder
  POST   /api/<type>/<id>/branch/<name>         create_branch;  DELETE: delete_branch
  POST   /api/<type>/<id>/tag/<rev>             create_tag;     DELETE …/tag/<tag>: delete_tag
  POST   /api/validate-yaml                     README metadata check before a commit
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .access import Caller
from .commit_ops import parse_commit
from .context import HubContext, json_response, segments, threaded
from .errors import ApiError
from .repos import URL_PREFIXES, repo_type_of


async def api(ctx: HubContext, request: Request) -> Response:
    segs = segments(request)[1:]  # drop "api"
    method = request.method
    caller = ctx.caller(request)
    if segs == ["whoami-v2"] and method == "GET":
        return _whoami(caller.grant)
    if segs == ["validate-yaml"] and method == "POST":
        return _validate_yaml(await _json(request))
    if segs == ["repos", "create"] and method == "POST":
        return await _create_repo(ctx, request, caller)
    if segs == ["repos", "delete"] and method == "DELETE":
        payload = await _json(request)
        repo_id = _repo_id_of(payload)
        caller.check_write(repo_id.split("/")[0])
        await threaded(ctx.writer.delete_repo, repo_id)
        return json_response({})
    if len(segs) == 3 and segs[0] == "organizations" and segs[2] == "overview" \
            and method == "GET":
        return json_response(await threaded(_org_overview, ctx, caller, segs[1]))
    if len(segs) < 3:
        raise ApiError(404, f"no API route {method} /api/{'/'.join(segs)}")
    repo_type = repo_type_of(segs[0])
    repo_id = f"{segs[1]}/{segs[2]}"
    action, rest = (segs[3] if len(segs) > 3 else ""), segs[4:]
    org = segs[1]
    path = ctx.store.path_of(repo_id)
    writing = action in ("preupload", "commit", "branch", "tag") and method in ("POST", "DELETE")
    if writing or (action == "auth-check" and rest == ["write"]):
        caller.check_write(org)
    caller.check_read(repo_id, path)
    if action == "auth-check" and method == "GET":
        await threaded(ctx.store.open, repo_id)
        return json_response({})
    if method == "GET" and action in ("", "revision"):
        rev = rest[0] if action == "revision" and rest else "main"
        return json_response(await threaded(_info, ctx, repo_id, repo_type, rev))
    if method == "GET" and action == "refs":
        return json_response(await threaded(lambda: ctx.store.refs(ctx.store.open(repo_id))))
    if method == "GET" and action == "tree" and rest:
        recursive = request.query_params.get("recursive", "false").lower() in ("1", "true")
        return json_response(await threaded(_tree, ctx, repo_id, rest[0], "/".join(rest[1:]),
                                            recursive))
    if method == "POST" and action == "paths-info" and len(rest) == 1:
        form = await request.form()
        paths = [str(p) for p in form.getlist("paths")]
        return json_response(await threaded(_paths_info, ctx, repo_id, rest[0], paths))
    if method == "GET" and action == "commits" and rest:
        return json_response(await threaded(_commits, ctx, repo_id, "/".join(rest)))
    if method == "POST" and action == "preupload" and rest:
        payload = await _json(request)
        return json_response(await threaded(_preupload, ctx, repo_id, "/".join(rest), payload))
    if method == "POST" and action == "commit" and rest:
        if request.query_params.get("create_pr") in ("1", "true"):
            raise ApiError(400, "this hub has no pull requests: commit to a branch "
                                "(create_branch, then revision=<branch>)")
        body = await request.body()
        commit = await threaded(ctx.writer.commit, repo_id, "/".join(rest), parse_commit(body),
                                caller.name)
        url = f"{ctx.base_url(request)}/{URL_PREFIXES[repo_type]}{repo_id}/commit/{commit}"
        return json_response({"commitUrl": url, "commitOid": commit, "pullRequestUrl": None,
                              "success": True})
    if action == "branch" and len(rest) >= 1:
        name = "/".join(rest)
        if method == "DELETE":
            await threaded(ctx.writer.delete_ref, repo_id, "heads", name)
            return json_response({})
        payload = await _json(request)
        await threaded(ctx.writer.create_branch, repo_id, name, payload.get("startingPoint"),
                       bool(payload.get("emptyBranch")))
        return json_response({})
    if action == "tag" and len(rest) >= 1:
        name = "/".join(rest)
        if method == "DELETE":
            await threaded(ctx.writer.delete_ref, repo_id, "tags", name)
            return json_response({})
        payload = await _json(request)
        tag = payload.get("tag")
        if not isinstance(tag, str) or not tag:
            raise ApiError(400, "create_tag needs a tag name")
        message = payload.get("message")
        await threaded(ctx.writer.create_tag, repo_id, tag, name,
                       message if isinstance(message, str) else None)
        return json_response({})
    raise ApiError(404, f"no API route {method} /api/{'/'.join(segs)} on this hub (see "
                        "docs/serve.md for the endpoints it serves)")


# -- reads -------------------------------------------------------------------------------

def _info(ctx: HubContext, repo_id: str, repo_type: str, rev: str) -> dict[str, object]:
    repo = ctx.store.open(repo_id)
    return ctx.store.info(repo, repo_id, repo_type, ctx.store.commit_of(repo, repo_id, rev))


def _tree(ctx: HubContext, repo_id: str, rev: str, path: str, recursive: bool) -> list[Any]:
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    return [e.to_api() for e in ctx.store.tree(repo, repo_id, commit, path, recursive)]


def _paths_info(ctx: HubContext, repo_id: str, rev: str, paths: list[str]) -> list[Any]:
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    return [e.to_api() for e in ctx.store.paths_info(repo, commit, paths)]


def _commits(ctx: HubContext, repo_id: str, rev: str) -> list[Any]:
    repo = ctx.store.open(repo_id)
    return ctx.store.commits(repo, ctx.store.commit_of(repo, repo_id, rev))


def _preupload(ctx: HubContext, repo_id: str, rev: str, payload: dict[str, Any]
               ) -> dict[str, object]:
    """Each file's upload mode, and the oid it has at ``rev`` (so unchanged files are
    skipped by the client)."""
    repo = ctx.store.open(repo_id)
    commit = repo.resolve_commit(f"refs/heads/{rev}") or repo.resolve_commit(rev)
    files = payload.get("files")
    if not isinstance(files, list):
        raise ApiError(400, "preupload needs {\"files\": [{\"path\", \"size\", \"sample\"}]}")
    paths = [str(f.get("path", "")) for f in files if isinstance(f, dict)]
    existing = {e.path: e.oid for e in ctx.store.paths_info(repo, commit, paths)} if commit else {}
    threshold = ctx.settings.lfs_threshold
    answer = []
    for f in files:
        size = f.get("size") if isinstance(f, dict) else None
        lfs = threshold is not None and isinstance(size, int) and 0 < threshold <= size
        path = str(f.get("path", "")) if isinstance(f, dict) else ""
        answer.append({"path": path, "uploadMode": "lfs" if lfs else "regular",
                       "shouldIgnore": False, "oid": existing.get(path)})
    return {"files": answer, "commitOid": commit}


def _org_overview(ctx: HubContext, caller: Caller, org: str) -> dict[str, object]:
    """What the ``kernels`` 0.19 loader asks before loading without ``trust_remote_code``:
    ``trustedKernelPublisher`` — here, :meth:`HubContext.trusted_publishers` (the default
    ``kernels-community`` plus the hub's ``kernelhub.toml`` ``[trust] orgs``)."""
    from kernelhub.errors import KernelHubError

    repos = [r for r in ctx.store.repo_ids() if r.split("/")[0] == org]
    if not repos or not caller.may_read(org):
        error = ApiError(404, f"this hub has no organisation {org!r} you may read", "RepoNotFound")
        raise error
    try:
        trusted = org in ctx.trusted_publishers()
    except KernelHubError as exc:
        raise ApiError(500, str(exc)) from None
    return {"name": org, "fullname": org, "type": "org", "numModels": len(repos),
            "trustedKernelPublisher": trusted}


# -- writes ------------------------------------------------------------------------------

async def _create_repo(ctx: HubContext, request: Request, caller: Any) -> Response:
    payload = await _json(request)
    repo_type = payload.get("type") or "model"
    if repo_type not in ("model", "kernel"):
        raise ApiError(400, f"Invalid repo type {repo_type!r}: this hub serves kernel and model "
                            "repositories")
    repo_id = _repo_id_of(payload)
    caller.check_write(repo_id.split("/")[0])
    private = bool(payload.get("private")) or payload.get("visibility") == "private"
    url = f"{ctx.base_url(request)}/{URL_PREFIXES[repo_type]}{repo_id}"
    if not await threaded(ctx.writer.create_repo, repo_id, private):
        error = ApiError(409, f"You already created this {repo_type} repo: {repo_id}")
        error.body["url"] = url  # huggingface_hub's exist_ok reads it from the 409
        raise error
    return json_response({"url": url, "name": repo_id, "id": repo_id})


def _repo_id_of(payload: dict[str, Any]) -> str:
    org, name = payload.get("organization"), payload.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError(400, "a repository name is required")
    repo_id = f"{org}/{name}" if org else name
    if repo_id.count("/") != 1:
        raise ApiError(400, f"{repo_id!r}: repositories on this hub are named org/name")
    from kernelhub.errors import KernelHubError
    from kernelhub.hub.local import split_repo_id

    try:
        split_repo_id(repo_id)
    except KernelHubError as exc:
        raise ApiError(400, str(exc)) from None
    return repo_id


def _whoami(grant: Any) -> Response:
    if grant is None:
        raise ApiError(401, "Invalid credentials in Authorization header: no token was sent")
    role = "write" if grant.write else "read"
    orgs = sorted((grant.write | grant.read) - {"*"})
    return json_response({
        "type": "user", "name": grant.name, "fullname": grant.name,
        "orgs": [{"name": o, "roleInOrg": "write" if grant.may_write(o) else "read"}
                 for o in orgs],
        "auth": {"type": "access_token",
                 "accessToken": {"displayName": grant.name, "role": role}},
    })


def _validate_yaml(payload: dict[str, Any]) -> Response:
    """The README's YAML front matter must parse to a mapping (the only part of the Hub's
    model-card check that applies to a kernel hub)."""
    import yaml  # type: ignore[import-untyped]  # huggingface_hub's dependency; no stubs

    content = payload.get("content")
    if not isinstance(content, str):
        raise ApiError(400, "validate-yaml needs {\"content\": <README text>}")
    lines = content.splitlines()
    if not lines or lines[0].strip() != "---":
        return json_response({"errors": [], "warnings": []})
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return json_response({"errors": [{"message": "the metadata block opened with --- is "
                                                     "never closed"}], "warnings": []}, 400)
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        return json_response({"errors": [{"message": f"invalid YAML: {exc}"}], "warnings": []},
                             400)
    if data is not None and not isinstance(data, dict):
        return json_response({"errors": [{"message": "the metadata must be a mapping"}],
                              "warnings": []}, 400)
    return json_response({"errors": [], "warnings": []})


async def _json(request: Request) -> dict[str, Any]:
    body = await request.body()
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        raise ApiError(400, "the request body is not JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data
