"""Pages for reading a repository: its files at any ref (with sizes, git blob ids and the
sha256 digests its variants' metadata declares), one file's text, the commit history of a
branch a page at a time, one commit, and two refs compared.

The URLs are the Hub's (``tree/<rev>/<path>``, ``blob/<rev>/<path>``, ``commits/<rev>``,
``commit/<sha>``), under ``/kernels/<id>`` and ``/<id>``; ``compare?base=&head=`` is
ours (a GET form: nothing here changes state). Every file a page shows is escaped by the
template, so a file's bytes never become markup; downloads link the resolve URL at the
full commit, which never changes.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import METADATA_FILE, parse_metadata
from kernelhub.hub.git import GitRepo
from starlette.responses import Response

from . import history, names
from .compare import compare as compare_refs
from .context import Call
from .errors import ApiError
from .hubview import default_ref, list_refs
from .pages import _html
from .repos import Entry, RepoStore

MAX_TEXT_VIEW = 512 * 1024
"""The largest file shown as text; larger ones are offered as a download."""


@dataclass(frozen=True)
class Nav:
    """The repository header every page of this module shares."""

    id: str
    rev: str | None
    tab: str


def tree(call: Call) -> Response:
    ctx, repo_id, rev = call.ctx, call.repo_id, call.params["rev"]
    path = call.params.get("path", "").strip("/")
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    below = ctx.store.tree(repo, repo_id, commit, path, recursive=True)
    prefix = f"{path}/" if path else ""
    entries = sorted((e for e in below if "/" not in e.path[len(prefix):]),
                     key=lambda e: (e.kind != "directory", e.path))
    folders: dict[str, list[int]] = {}
    """A folder's path → [files, bytes] in all of it (one recursive listing)."""
    for e in below:
        head, _, rest = e.path[len(prefix):].partition("/")
        if rest and e.kind == "file":
            totals = folders.setdefault(prefix + head, [0, 0])
            totals[0] += 1
            totals[1] += e.size
    return _html("tree.html", nav=Nav(repo_id, rev, "files"), rev=rev, commit=commit,
                 path=path, crumbs=_crumbs(path), entries=entries, name=_name, folders=folders,
                 declared=declared_digests(ctx.store, repo, repo_id, commit, path))


def blob(call: Call) -> Response:
    ctx, repo_id, rev = call.ctx, call.repo_id, call.params["rev"]
    path = call.params["path"].strip("/")
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    entry = ctx.store.file(repo, repo_id, commit, path)
    digest, text = _read(ctx.store, repo, entry)
    parent = path.rpartition("/")[0]
    declared = declared_digests(ctx.store, repo, repo_id, commit, parent).get(path)
    return _html("blob.html", nav=Nav(repo_id, rev, "files"), rev=rev, commit=commit, path=path,
                 crumbs=_crumbs(path), entry=entry, sha256=digest, text=text,
                 declared=declared)


def commits(call: Call) -> Response:
    ctx, repo_id, rev = call.ctx, call.repo_id, call.params["rev"]
    repo = ctx.store.open(repo_id)
    commit = ctx.store.commit_of(repo, repo_id, rev)
    page = _page_number(call.request.query_params.get("p", "1"))
    total = history.count(repo, commit)
    pages = max(1, -(-total // history.PAGE_SIZE))
    if page > pages:
        raise ApiError(404, f"{rev} has {total} commits: {pages} page"
                            f"{'' if pages == 1 else 's'} of history, not {page}")
    items = history.log(repo, commit, (page - 1) * history.PAGE_SIZE)
    return _html("commits.html", nav=Nav(repo_id, rev, "history"), rev=rev, commit=commit,
                 commits=items, page=page, pages=pages, total=total)


def commit(call: Call) -> Response:
    """One commit: the page a commit's ``commitUrl`` (from the Hub API) leads to."""
    ctx, repo_id, rev = call.ctx, call.repo_id, call.params["rev"]
    repo = ctx.store.open(repo_id)
    full = ctx.store.commit_of(repo, repo_id, rev)
    info = history.show(repo, full)
    changed = history.changes(repo, info.parents[0] if info.parents else None, full)
    at = [r for r in list_refs(ctx.store, repo) if r.commit == full]
    return _html("commit.html", nav=Nav(repo_id, full, "history"), c=info, changes=changed,
                 refs=at)


def compare(call: Call) -> Response:
    """Two refs from ``?base=&head=`` compared; without them, the two newest releases (or
    the newest release and the default branch) are offered."""
    ctx, repo_id, query = call.ctx, call.repo_id, call.request.query_params
    repo = ctx.store.open(repo_id)
    refs = list_refs(ctx.store, repo)
    releases = [r.name for r in refs if r.kind == "release"]
    default = default_ref(refs)
    head = query.get("head") or (releases[0] if releases else default.name if default else "")
    base = query.get("base") or (releases[1] if len(releases) > 1 else
                                 default.name if default else "")
    result = None
    if base and head:
        result = compare_refs(ctx.store, repo, repo_id, names.revision(base),
                              names.revision(head))
    return _html("compare.html", nav=Nav(repo_id, default.name if default else None, "compare"),
                 refs=refs, base=base, head=head, result=result)


def declared_digests(store: RepoStore, repo: GitRepo, repo_id: str, commit: str, folder: str
                     ) -> dict[str, str]:
    """Path → hex sha256 that the variant's ``metadata.json`` declares, for files in
    ``folder`` when it lies inside ``build/<variant>/`` (the digests a loader verifies)."""
    parts = folder.split("/")
    if len(parts) < 2 or parts[0] != "build":
        return {}
    root = "/".join(parts[:2])
    found = [e for e in store.paths_info(repo, commit, [f"{root}/{METADATA_FILE}"])
             if e.kind == "file"]
    if not found:
        return {}
    try:
        meta = parse_metadata(store.read(repo, found[0].oid), f"{repo_id}@{commit[:12]}:{root}")
    except KernelHubError:
        return {}
    digests = {}
    for rel, value in meta.digest_files.items():
        try:
            digests[f"{root}/{rel}"] = base64.b64decode(value, validate=True).hex()
        except ValueError:
            digests[f"{root}/{rel}"] = f"unreadable ({value[:60]})"
    return digests


def _read(store: RepoStore, repo: GitRepo, entry: Entry) -> tuple[str, str | None]:
    """The file's sha256, and its text when it is small UTF-8 without NUL bytes (streamed
    for the digest alone otherwise)."""
    if entry.size > MAX_TEXT_VIEW:
        digest = hashlib.sha256()
        for chunk in store.stream(repo, entry.oid, 0, entry.size):
            digest.update(chunk)
        return digest.hexdigest(), None
    data = store.read(repo, entry.oid)
    try:
        text = None if b"\0" in data else data.decode()
    except UnicodeDecodeError:
        text = None
    return hashlib.sha256(data).hexdigest(), text


def _crumbs(path: str) -> list[tuple[str, str]]:
    """(name, folder path up to it) for each part of ``path``."""
    parts = path.split("/") if path else []
    return [(p, "/".join(parts[:i + 1])) for i, p in enumerate(parts)]


def _name(entry: Entry) -> str:
    return entry.path.rsplit("/", 1)[-1]


def _page_number(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 10**9:
        raise ApiError(400, f"?p={text[:40]!r}: a page number is a whole number from 1")
    return int(text)
