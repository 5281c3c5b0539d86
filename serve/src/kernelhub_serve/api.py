"""The Hub HTTP API under ``/api/``: what huggingface_hub, the ecosystem's ``kernels``
loaders (0.17.2, 0.19.1) and kernelhub's HfHub and HfPublisher call.

One handler per endpoint; which path reaches which handler, who may call it and what body
it takes is declared once, in :data:`kernelhub_serve.routes.TABLE`. Handlers run git, so
they are plain ``def`` functions (Starlette runs them in its threadpool).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # huggingface_hub's dependency; no stubs
from kernelhub.errors import KernelHubError
from kernelhub.hub.local import split_repo_id
from starlette.responses import Response

from . import names
from .commit_ops import parse_commit
from .context import Call, json_response
from .errors import ApiError
from .files import cache_control, info_cache_control
from .repos import URL_PREFIXES, URL_TYPES
from .writer import is_private

MAX_YAML_NESTING = 64

# -- reads -------------------------------------------------------------------------------


def info(call: Call) -> Response:
    """``repo_info`` / ``kernel_info`` / ``model_info`` at a revision (``main`` if none),
    with file sizes when asked (``blobs``, what ``files_metadata=True`` sends), and
    ``private`` as the repository was created (what ``create_repo(private=True)`` reads
    back)."""
    store, repo_id = call.ctx.store, call.repo_id
    repo = store.open(repo_id)
    commit = store.commit_of(repo, repo_id, call.params.get("rev", "main"))
    blobs = call.request.query_params.get("blobs", "false").lower() in ("1", "true")
    answer = store.info(repo, repo_id, URL_TYPES[call.params["type"]], commit, blobs)
    answer["private"] = is_private(store.path_of(repo_id))
    answer["downloads"] = call.ctx.downloads.total(repo_id)
    response = json_response(answer)
    response.headers["Cache-Control"] = info_cache_control(call, repo.path)
    return response


def refs(call: Call) -> Response:
    return json_response(call.ctx.store.refs(call.ctx.store.open(call.repo_id)))


def tree(call: Call) -> Response:
    store, repo_id = call.ctx.store, call.repo_id
    recursive = call.request.query_params.get("recursive", "false").lower() in ("1", "true")
    repo = store.open(repo_id)
    commit = store.commit_of(repo, repo_id, call.params["rev"])
    entries = store.tree(repo, repo_id, commit, call.params.get("path", ""), recursive)
    lfs = store.lfs_objects(repo)
    response = json_response([e.to_api(lfs) for e in entries])
    response.headers["Cache-Control"] = cache_control(call, repo.path, call.params["rev"], commit)
    return response


def paths_info(call: Call) -> Response:
    store, repo_id = call.ctx.store, call.repo_id
    paths = [names.file_path(p.strip("/")) for p in call.form.get("paths", []) if p.strip("/")]
    repo = store.open(repo_id)
    commit = store.commit_of(repo, repo_id, call.params["rev"])
    lfs = store.lfs_objects(repo)
    return json_response([e.to_api(lfs) for e in store.paths_info(repo, commit, paths)])


def commits(call: Call) -> Response:
    store, repo_id = call.ctx.store, call.repo_id
    repo = store.open(repo_id)
    return json_response(store.commits(repo, store.commit_of(repo, repo_id, call.params["rev"])))


def auth_check(call: Call) -> Response:
    call.ctx.store.open(call.repo_id)
    return json_response({})


def whoami(call: Call) -> Response:
    grant = call.caller.grant
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


def org_overview(call: Call) -> Response:
    """What the ``kernels`` 0.19 loader asks before loading without ``trust_remote_code``:
    ``trustedKernelPublisher`` — here, :meth:`HubContext.trusted_publishers` (the default
    ``kernels-community`` plus the hub's ``kernelhub.toml`` ``[trust] orgs``), the answer the
    loader gives, so endpoint, pages and loaders agree. Only
    repositories the caller may read are counted, so a private one stays unseen."""
    ctx, org, caller = call.ctx, call.org, call.caller
    repos = [r for r in ctx.store.repo_ids()
             if r.split("/")[0] == org and caller.may_read(org, ctx.store.path_of(r))]
    if not repos:
        raise ApiError(404, f"this hub has no organisation {org!r} you may read", "RepoNotFound")
    try:
        trusted = org in ctx.trusted_publishers()
    except KernelHubError as exc:
        raise ApiError(500, str(exc)) from None
    return json_response({"name": org, "fullname": org, "type": "org", "numModels": len(repos),
                          "trustedKernelPublisher": trusted})


def validate_yaml(call: Call) -> Response:
    """The README's YAML front matter must parse to a mapping (the only part of the Hub's
    model-card check that applies to a kernel hub)."""
    content = call.json.get("content")
    if not isinstance(content, str):
        raise ApiError(400, "validate-yaml needs {\"content\": <README text>}")
    lines = content.splitlines()
    if not lines or lines[0].strip() != "---":
        return _yaml_verdict(None)
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return _yaml_verdict("the metadata block opened with --- is never closed")
    block = "\n".join(lines[1:end])
    if _nesting(block) > MAX_YAML_NESTING:
        return _yaml_verdict(f"the metadata nests deeper than {MAX_YAML_NESTING} levels")
    try:
        data = yaml.safe_load(block)
    except (yaml.YAMLError, RecursionError) as exc:
        return _yaml_verdict(f"invalid YAML: {exc}")
    if data is not None and not isinstance(data, dict):
        return _yaml_verdict("the metadata must be a mapping")
    return _yaml_verdict(None)


def _nesting(text: str) -> int:
    """How deep ``[``/``{`` nest (quotes ignored: an over-estimate), checked before YAML
    parses it, because PyYAML's recursion on deep nesting takes seconds to fail."""
    depth = deepest = 0
    for c in text:
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _yaml_verdict(problem: str | None) -> Response:
    errors = [{"message": problem}] if problem else []
    return json_response({"errors": errors, "warnings": []}, 400 if problem else 200)


# -- writes ------------------------------------------------------------------------------

def preupload(call: Call) -> Response:
    """Each file's upload mode, and the oid it has at the revision (so unchanged files are
    skipped by the client): the sha256 of a file committed through LFS, which is what
    huggingface_hub compares an ``lfs`` upload with, else the git blob id."""
    store = call.ctx.store
    repo = store.open(call.repo_id)
    rev = call.params["rev"]
    commit = repo.resolve_commit(f"refs/heads/{rev}") or repo.resolve_commit(rev)
    files = call.json.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise ApiError(400, "preupload needs {\"files\": [{\"path\", \"size\", \"sample\"}]}")
    paths = [names.file_path(str(f.get("path", "")).strip("/"), "preupload: ") for f in files]
    committed = store.lfs_objects(repo)
    existing = {e.path: committed[e.oid].sha256 if e.oid in committed else e.oid
                for e in store.paths_info(repo, commit, paths)} if commit else {}
    threshold = call.ctx.settings.lfs_threshold
    answer = []
    for f, path in zip(files, paths, strict=True):
        size = f.get("size")
        lfs = threshold is not None and isinstance(size, int) and 0 < threshold <= size
        answer.append({"path": path, "uploadMode": "lfs" if lfs else "regular",
                       "shouldIgnore": False, "oid": existing.get(path)})
    return json_response({"files": answer, "commitOid": commit})


def commit(call: Call) -> Response:
    ctx, repo_id = call.ctx, call.repo_id
    if call.request.query_params.get("create_pr") in ("1", "true"):
        raise ApiError(400, "this hub has no pull requests: commit to a branch "
                            "(create_branch, then revision=<branch>)")
    assert call.upload is not None  # a "file" route always has one
    with tempfile.TemporaryDirectory(prefix="kernelhub-serve-commit-") as scratch:
        oid = ctx.writer.commit(repo_id, call.params["rev"],
                                parse_commit(call.upload, Path(scratch)), call.caller.name)
    prefix = URL_PREFIXES[URL_TYPES[call.params["type"]]]
    url = f"{ctx.base_url(call.request)}/{prefix}{repo_id}/commit/{oid}"
    return json_response({"commitUrl": url, "commitOid": oid, "pullRequestUrl": None,
                          "success": True})


def create_repo(call: Call) -> Response:
    ctx, payload = call.ctx, call.json
    repo_type = payload.get("type") or "model"
    if repo_type not in ("model", "kernel"):
        raise ApiError(400, f"Invalid repo type {str(repo_type)[:40]!r}: this hub serves kernel "
                            "and model repositories")
    repo_id = _repo_id_of(payload)
    call.caller.check_write(repo_id.split("/")[0])
    private = bool(payload.get("private")) or payload.get("visibility") == "private"
    url = f"{ctx.base_url(call.request)}/{URL_PREFIXES[repo_type]}{repo_id}"
    if not ctx.writer.create_repo(repo_id, private):
        error = ApiError(409, f"You already created this {repo_type} repo: {repo_id}")
        error.body["url"] = url  # huggingface_hub's exist_ok reads it from the 409
        raise error
    return json_response({"url": url, "name": repo_id, "id": repo_id})


def delete_repo(call: Call) -> Response:
    repo_id = _repo_id_of(call.json)
    call.caller.check_write(repo_id.split("/")[0])
    call.ctx.writer.delete_repo(repo_id)
    return json_response({})


def move_repo(call: Call) -> Response:
    """``move_repo``: the caller needs write rights on both organisations. Unlike the Hub,
    the old name does not redirect afterwards (see docs/serve.md)."""
    repo_type = call.json.get("type") or "model"
    if repo_type not in ("model", "kernel"):
        raise ApiError(400, f"Invalid repo type {str(repo_type)[:40]!r}: this hub serves kernel "
                            "and model repositories")
    source, target = (_checked_repo_id(call.json.get(key)) for key in ("fromRepo", "toRepo"))
    call.caller.check_write(source.split("/")[0])
    call.caller.check_write(target.split("/")[0])
    call.ctx.writer.move_repo(source, target)
    url = f"{call.ctx.base_url(call.request)}/{URL_PREFIXES[repo_type]}{target}"
    return json_response({"url": url})


def create_branch(call: Call) -> Response:
    start = call.json.get("startingPoint")
    if start is not None and not isinstance(start, str):
        raise ApiError(400, "startingPoint must be a revision name")
    call.ctx.writer.create_branch(call.repo_id, call.params["rev"],
                                  names.revision(start) if start else None,
                                  bool(call.json.get("emptyBranch")))
    return json_response({})


def delete_branch(call: Call) -> Response:
    call.ctx.writer.delete_ref(call.repo_id, "heads", call.params["rev"])
    return json_response({})


def create_tag(call: Call) -> Response:
    tag, message = call.json.get("tag"), call.json.get("message")
    if not isinstance(tag, str) or not tag:
        raise ApiError(400, "create_tag needs a tag name")
    call.ctx.writer.create_tag(call.repo_id, names.revision(tag), call.params["rev"],
                               message if isinstance(message, str) else None)
    return json_response({})


def delete_tag(call: Call) -> Response:
    call.ctx.writer.delete_ref(call.repo_id, "tags", call.params["rev"])
    return json_response({})


def _repo_id_of(payload: dict[str, Any]) -> str:
    org, name = payload.get("organization"), payload.get("name")
    if not isinstance(name, str) or not name or (org is not None and not isinstance(org, str)):
        raise ApiError(400, "a repository name is required (name, and organization or "
                            "name = org/name)")
    return _checked_repo_id(f"{org}/{name}" if org else name)


def _checked_repo_id(repo_id: object) -> str:
    if not isinstance(repo_id, str):
        raise ApiError(400, "a repository id (org/name) is required")
    try:
        split_repo_id(repo_id)
    except KernelHubError:
        raise ApiError(400, f"{repo_id[:200]!r}: repositories on this hub are named org/name "
                            "(letters, digits, '.', '_' and '-')") from None
    return repo_id
