"""A Hub-API server that reports chosen files as stored with Git LFS, for the tests of
the ecosystem's LFS-aware lock hashes (tests/test_ecosystem_locks_and_installs.py).

Every other Hub-API test runs against ``kernelhub serve`` (tests/hub_api_served.py), whose
route table is the protocol's one declaration; serve stores LFS uploads as plain git blobs
and reports no ``lfs`` entries (docs/serve.md), so the listings these tests need — the
public Hub's, where a variant's files carry ``lfs.oid`` = their sha256 — come from here
until serve reports LFS. ``lfs_patterns``: paths (fnmatch) reported so, the ETag too; the
bytes stay plain git blobs. Every request is recorded in ``requests``. One write token; no
pull requests, private repositories or fault knobs (serve's tests have those).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from kernelhub.hub.git import ZERO_OID, GitRepo, IndexEntry, RefUpdate

_TYPES = {"models": "model", "kernels": "kernel"}
GITATTRIBUTES = b"# made by the kernelhub Hub-API test server: no LFS here\n"


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class HubApiTestServer:
    root: Path
    write_token: str = "hf_test_write_token"
    lfs_patterns: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- lifecycle ---------------------------------------------------------------------

    @contextmanager
    def running(self) -> Iterator[HubApiTestServer]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append(f"{self.command} {urlsplit(self.path).path}")
                try:
                    status, headers, payload = server.handle(self.command, self.path,
                                                             dict(self.headers), body)
                except ApiError as e:
                    status, payload = e.status, json.dumps({"error": e.message}).encode()
                    headers = {"Content-Type": "application/json",
                               **({"X-Error-Code": e.code} if e.code else {}),
                               "X-Error-Message": e.message}
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()

    # -- routing -----------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes
               ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        segs = [unquote(s) for s in parts.path.strip("/").split("/")]
        reads_by_post = segs[:2] == ["api", "validate-yaml"] or segs[4:5] == ["paths-info"]
        if method in ("POST", "PUT", "DELETE") and not reads_by_post:
            self._authorize(headers, write=True)
        if segs[:2] == ["api", "whoami-v2"]:
            user = self._authorize(headers, write=False)
            return self._json({"type": "user", "name": user,
                               "auth": {"accessToken": {"role": "write"}}})
        if segs[:2] == ["api", "validate-yaml"] and method == "POST":
            return self._json({"errors": [], "warnings": []})
        if segs[:3] == ["api", "repos", "create"] and method == "POST":
            return self._create_repo(json.loads(body or b"{}"))
        if len(segs) >= 4 and segs[0] == "api" and segs[1] in _TYPES:
            kind = _TYPES[segs[1]]
            repo_id = f"{segs[2]}/{segs[3]}"
            return self._repo_api(method, kind, repo_id, segs[4:], query, headers, body)
        if "resolve" in segs and method in ("GET", "HEAD"):
            kind = "model"
            if segs[0] == "kernels":
                kind, segs = "kernel", segs[1:]
            if len(segs) >= 5 and segs[2] == "resolve":
                repo_id = f"{segs[0]}/{segs[1]}"
                return self._resolve(kind, repo_id, segs[3], "/".join(segs[4:]))
        raise ApiError(404, f"test server: no route for {method} {parts.path}")

    def _authorize(self, headers: dict[str, str], *, write: bool) -> str:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if not token:
            raise ApiError(401, "Invalid username or password.")
        if token != self.write_token:
            raise ApiError(403, "You don't have the rights to write to this repository: "
                                "the token has no write access")
        return "kernelhub-test"

    def _repo_api(self, method: str, kind: str, repo_id: str, rest: list[str],
                  query: dict[str, list[str]], headers: dict[str, str], body: bytes
                  ) -> tuple[int, dict[str, str], bytes]:
        repo = self._repo(kind, repo_id)
        action = rest[0] if rest else ""
        if method == "GET" and action in ("", "revision"):
            return self._info(repo, repo_id, rest[1] if action == "revision" else "main")
        if method == "GET" and action == "refs":
            return self._json(self._refs(repo))
        if method == "GET" and action == "tree" and len(rest) >= 2:
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            return self._json(self._tree(repo, rest[1], "/".join(rest[2:]), recursive))
        if method == "POST" and action == "paths-info" and len(rest) == 2:
            form = parse_qs(body.decode())
            paths = form.get("paths", []) or json.loads(body or b"{}").get("paths", [])
            return self._json(self._paths_info(repo, rest[1], paths))
        if method == "GET" and action == "commits" and len(rest) == 2:
            return self._json(self._commits(repo, rest[1]))
        if method == "POST" and action == "preupload" and len(rest) == 2:
            return self._preupload(repo, rest[1], json.loads(body))
        if method == "POST" and action == "commit" and len(rest) == 2:
            return self._commit(kind, repo, repo_id, rest[1], body)
        if action == "branch" and len(rest) == 2:
            return self._branch(repo, method, rest[1], json.loads(body or b"{}"))
        if action == "tag" and len(rest) == 2:
            return self._tag(repo, method, rest[1], json.loads(body or b"{}"))
        raise ApiError(404, f"test server: no route for {method} {'/'.join(rest)}")

    # -- storage -----------------------------------------------------------------------

    def repo_path(self, kind: str, repo_id: str) -> Path:
        return self.root / f"{kind}s" / repo_id

    def _repo(self, kind: str, repo_id: str, must_exist: bool = True) -> GitRepo:
        repo = GitRepo(self.repo_path(kind, repo_id))
        if must_exist and not repo.is_repo():
            raise ApiError(404, f"Repository Not Found for url: {repo_id}", "RepoNotFound")
        return repo

    def _commit_of(self, repo: GitRepo, rev: str) -> str:
        commit = repo.resolve_commit(rev)
        if commit is None:
            raise ApiError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return commit

    def _entry(self, repo: GitRepo, commit: str, path: str, kind: str, oid: str
               ) -> dict[str, object]:
        if kind == "tree":
            return {"type": "directory", "oid": oid, "size": 0, "path": path}
        size = int(repo.out("cat-file", "-s", oid))
        entry: dict[str, object] = {"type": "file", "oid": oid, "size": size, "path": path}
        if self._lfs(path):
            sha256 = hashlib.sha256(next(repo.read_blobs([oid]))).hexdigest()
            entry["lfs"] = {"oid": sha256, "size": size, "pointerSize": 134}
        return entry

    def _lfs(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in self.lfs_patterns)

    # -- reads -------------------------------------------------------------------------

    def _info(self, repo: GitRepo, repo_id: str, rev: str) -> tuple[int, dict[str, str], bytes]:
        commit = self._commit_of(repo, rev)
        files = [e.path for e in repo.ls_tree(commit, recursive=True)]
        return self._json({"id": repo_id, "_id": repo_id, "modelId": repo_id, "sha": commit,
                           "private": False, "disabled": False, "gated": False,
                           "downloads": 0, "likes": 0, "tags": [],
                           "siblings": [{"rfilename": f} for f in files]})

    def _refs(self, repo: GitRepo) -> dict[str, object]:
        def listing(prefix: str) -> list[dict[str, str]]:
            return [{"name": ref.removeprefix(prefix), "ref": ref, "targetCommit": value.commit}
                    for ref, value in sorted(repo.refs(prefix).items())]

        return {"branches": listing("refs/heads/"), "tags": listing("refs/tags/"),
                "converts": []}

    def _tree(self, repo: GitRepo, rev: str, path: str, recursive: bool) -> list[dict]:
        commit = self._commit_of(repo, rev)
        path = path.strip("/")
        if path:
            found = repo.ls_tree(commit, path)
            if not found or found[0].kind != "tree":
                raise ApiError(404, f"Entry not found: {path}", "EntryNotFound")
        entries = repo.ls_tree(commit, *([f"{path}/"] if path else []), recursive=False)
        result = []
        while entries:
            entry = entries.pop(0)
            result.append(self._entry(repo, commit, entry.path, entry.kind, entry.oid))
            if recursive and entry.kind == "tree":
                entries += repo.ls_tree(commit, f"{entry.path}/")
        return result

    def _paths_info(self, repo: GitRepo, rev: str, paths: list[str]) -> list[dict]:
        commit = self._commit_of(repo, rev)
        found = []
        for path in paths:
            for e in repo.ls_tree(commit, path.strip("/")):
                found.append(self._entry(repo, commit, e.path, e.kind, e.oid))
        return found

    def _commits(self, repo: GitRepo, rev: str) -> list[dict]:
        commit = self._commit_of(repo, rev)
        out = repo.out("log", "--format=%H%x00%s%x00%B%x00%cI%x1e", commit)
        commits = []
        for record in filter(None, (r.strip("\n") for r in out.split("\x1e"))):
            oid, title, message, date = record.split("\x00")
            commits.append({"id": oid, "title": title, "message": message.strip(),
                            "authors": [{"user": "kernelhub-test"}], "date": date})
        return commits

    def _resolve(self, kind: str, repo_id: str, rev: str, path: str
                 ) -> tuple[int, dict[str, str], bytes]:
        repo = self._repo(kind, repo_id)
        commit = self._commit_of(repo, rev)
        found = repo.ls_tree(commit, path)
        if not found or found[0].kind != "blob":
            raise ApiError(404, f"Entry not found: {path}", "EntryNotFound")
        data = next(repo.read_blobs([found[0].oid]))
        etag = hashlib.sha256(data).hexdigest() if self._lfs(path) else found[0].oid
        return 200, {"Content-Type": "application/octet-stream", "X-Repo-Commit": commit,
                     "ETag": f'"{etag}"'}, data

    # -- writes ------------------------------------------------------------------------

    def _create_repo(self, payload: dict) -> tuple[int, dict[str, str], bytes]:
        kind = payload.get("type") or "model"
        if kind not in _TYPES.values():
            raise ApiError(400, f"Invalid repo type {kind!r}")
        org, name = payload.get("organization"), payload.get("name", "")
        repo_id = f"{org}/{name}" if org else name
        if repo_id.count("/") != 1:
            raise ApiError(400, f"invalid repo id {repo_id!r}")
        with self._lock:
            path = self.repo_path(kind, repo_id)
            if GitRepo(path).is_repo():
                raise ApiError(409, f"You already created this {kind} repo")
            GitRepo.init_bare(path, initial_branch="main")
            repo = GitRepo(path)
            blob = repo.out("hash-object", "-w", "--stdin", input=GITATTRIBUTES)
            tree = repo.write_tree(None, [], [IndexEntry("100644", blob, ".gitattributes")])
            commit = repo.commit_tree(tree, None, "initial commit")
            repo.update_refs([RefUpdate("refs/heads/main", commit, ZERO_OID)])
        prefix = "" if kind == "model" else f"{kind}s/"
        return self._json({"url": f"{self.url}/{prefix}{repo_id}", "name": repo_id})

    def _preupload(self, repo: GitRepo, rev: str, payload: dict
                   ) -> tuple[int, dict[str, str], bytes]:
        commit = repo.resolve_commit(rev)
        files = []
        for f in payload.get("files", []):
            oid = None
            if commit is not None:
                found = repo.ls_tree(commit, f["path"])
                oid = found[0].oid if found and found[0].kind == "blob" else None
            files.append({"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                          "oid": oid})
        return self._json({"files": files, "commitOid": commit})

    def _commit(self, kind: str, repo: GitRepo, repo_id: str, rev: str, body: bytes
                ) -> tuple[int, dict[str, str], bytes]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise ApiError(400, "commit payload must start with a header line")
        header = lines[0]["value"]
        with self._lock:
            branch = f"refs/heads/{rev}"
            head = repo.refs(branch).get(branch)
            if head is None:
                raise ApiError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            parent = header.get("parentCommit")
            if parent and parent != head.commit:
                raise ApiError(412, "A commit has happened since. Please refresh and try again.")
            ref, current = branch, head
            remove: list[str] = []
            add: dict[str, IndexEntry] = {}
            for line in lines[1:]:
                key, value = line["key"], line["value"]
                path = value["path"].strip("/")
                if key == "file":
                    data = (base64.b64decode(value["content"])
                            if value.get("encoding") == "base64" else value["content"].encode())
                    oid = repo.out("hash-object", "-w", "--stdin", input=data)
                    add[path] = IndexEntry("100644", oid, path)
                elif key == "deletedFile":
                    remove.append(path)
                elif key == "deletedFolder":
                    remove += [e.path for e in repo.ls_tree(current.commit, f"{path}/",
                                                            recursive=True)]
                elif key == "lfsFile":
                    raise ApiError(422, "test server: no LFS; preupload answered 'regular' "
                                        f"for {path}")
                else:
                    raise ApiError(400, f"test server: unsupported commit operation {key!r}")
            remove = [p for p in remove if p not in add]
            tree = repo.write_tree(current.commit, remove, add.values())
            message = header.get("summary", "")
            if header.get("description"):
                message += "\n\n" + header["description"]
            commit = repo.commit_tree(tree, current.commit, message)
            if repo.update_refs([RefUpdate(ref, commit, current.oid)]) is not None:
                raise ApiError(412, "A commit has happened since. Please refresh and try again.")
        prefix = "" if kind == "model" else f"{kind}s/"
        return self._json({"commitUrl": f"{self.url}/{prefix}{repo_id}/commit/{commit}",
                           "commitOid": commit, "pullRequestUrl": None})

    def _branch(self, repo: GitRepo, method: str, branch: str, payload: dict
                ) -> tuple[int, dict[str, str], bytes]:
        ref = f"refs/heads/{branch}"
        with self._lock:
            existing = repo.refs(ref).get(ref)
            if method == "DELETE":
                if existing is None:
                    raise ApiError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
                repo.run("update-ref", "-d", ref, existing.oid)
                return self._json({})
            if existing is not None:
                raise ApiError(409, f"Reference already exists: {ref}")
            start = self._commit_of(repo, payload.get("startingPoint") or "main")
            repo.update_refs([RefUpdate(ref, start, ZERO_OID)])
        return self._json({})

    def _tag(self, repo: GitRepo, method: str, name: str, payload: dict
             ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            if method == "DELETE":
                ref = f"refs/tags/{name}"
                existing = repo.refs(ref).get(ref)
                if existing is None:
                    raise ApiError(404, f"Invalid rev id: {name}", "RevisionNotFound")
                repo.run("update-ref", "-d", ref, existing.oid)
                return self._json({})
            tag = payload.get("tag", "")
            ref = f"refs/tags/{tag}"
            if not tag:
                raise ApiError(400, "a tag name is required")
            if repo.refs(ref).get(ref) is not None:
                raise ApiError(409, f"Tag {tag} already exists")
            commit = self._commit_of(repo, name)
            repo.update_refs([RefUpdate(ref, commit, ZERO_OID)])
        return self._json({})

    @staticmethod
    def _json(data: object) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, json.dumps(data).encode()
