"""Who may read and write, and what a failed, interrupted or concurrent commit leaves."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from kernelhub.hub.git import GitRepo
from served import OTHER_TOKEN, READ_TOKEN, WRITE_TOKEN, serving

REPO = "acme/demo"


def _status(exc: pytest.ExceptionInfo[HfHubHTTPError]) -> int:
    return exc.value.response.status_code


def _new_repo(server: str) -> HfApi:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo(REPO, repo_type="kernel")
    return api


def _refs(hub: Path) -> dict[str, str]:
    repo = GitRepo(hub / "models" / REPO)
    return {name: value.commit for name, value in repo.refs().items()}


def test_writes_need_a_token_with_write_rights_on_the_org(server: str) -> None:
    _new_repo(server)
    for token, status in ((None, 401), (READ_TOKEN, 403), (OTHER_TOKEN, 403)):
        api = HfApi(endpoint=server, token=token or False)
        with pytest.raises(HfHubHTTPError) as exc:
            api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO,
                            repo_type="kernel")
        assert _status(exc) == status, token
        with pytest.raises(HfHubHTTPError) as exc:
            api.create_repo("acme/other", repo_type="kernel")
        assert _status(exc) == status
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi(endpoint=server, token="hf_not_a_token_of_this_hub").list_repo_refs(
            REPO, repo_type="kernel")
    assert _status(exc) == 401 and "does not know that token" in str(exc.value)
    assert HfApi(endpoint=server, token=OTHER_TOKEN).whoami()["name"] == "other"
    # Anonymous reads are on by default.
    assert HfApi(endpoint=server, token=False).list_repo_refs(REPO, repo_type="kernel").branches


def test_reads_can_require_a_token_and_private_repos_need_read_rights(
        hub: Path, tokens_file: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    table = TokenTable.load(tokens_file)
    with serving(hub, table) as url:
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo("acme/secret", repo_type="kernel",
                                                          private=True)
        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=url, token=False).repo_info("acme/secret", repo_type="kernel")
        info = HfApi(endpoint=url, token=READ_TOKEN).repo_info("acme/secret", repo_type="kernel")
        assert info.private is True  # as created, read back as create_repo's caller expects
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo("acme/open", repo_type="kernel")
        assert HfApi(endpoint=url, token=False).repo_info("acme/open").private is False
    closed = TokenTable(table.grants, frozenset())
    with serving(hub, closed) as url:
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo(REPO, repo_type="kernel")
        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=url, token=False).list_repo_refs(REPO, repo_type="kernel")
        assert HfApi(endpoint=url, token=READ_TOKEN).list_repo_refs(REPO, repo_type="kernel")
        page = httpx.get(f"{url}/")
        assert page.status_code == 200 and REPO not in page.text  # pages follow the same rule


def test_parent_commit_is_compare_and_swap_and_a_failed_commit_changes_nothing(
        server: str, hub: Path) -> None:
    api = _new_repo(server)
    first = api.upload_file(path_or_fileobj=b"one", path_in_repo="a.txt", repo_id=REPO,
                            repo_type="kernel").oid
    api.upload_file(path_or_fileobj=b"two", path_in_repo="b.txt", repo_id=REPO,
                    repo_type="kernel")
    before = _refs(hub)
    with pytest.raises(HfHubHTTPError) as exc:  # the branch moved since `first`
        api.create_commit(REPO, [CommitOperationAdd("c.txt", b"three")], commit_message="late",
                          repo_type="kernel", parent_commit=first)
    assert _status(exc) == 412
    headers = {"Authorization": f"Bearer {WRITE_TOKEN}", "Content-Type": "application/x-ndjson"}
    bad_payloads = [  # each fails after some lines were read: nothing of it may land
        [{"key": "file", "value": {"path": "d.txt", "content": "ZA==", "encoding": "base64"}},
         {"key": "deletedFile", "value": {"path": "no-such-file.txt"}}],
        [{"key": "file", "value": {"path": "e.txt", "content": "ZQ==", "encoding": "base64"}},
         {"key": "lfsFile", "value": {"path": "big.bin", "algo": "sha256", "oid": "0" * 64,
                                      "size": 10}}],
        [{"key": "file", "value": {"path": "../escape.txt", "content": "", "encoding": "base64"}}],
    ]
    for ops in bad_payloads:
        body = "\n".join(json.dumps(x) for x in
                         [{"key": "header", "value": {"summary": "bad"}}, *ops]).encode()
        answer = httpx.post(f"{server}/api/kernels/{REPO}/commit/main", content=body,
                            headers=headers)
        assert answer.status_code in (400, 404, 422), answer.text
        assert answer.headers["x-error-message"]
    assert _refs(hub) == before
    assert not api.file_exists(REPO, "d.txt", repo_type="kernel")


def test_an_interrupted_upload_leaves_the_hub_as_it_was(server: str, hub: Path) -> None:
    api = _new_repo(server)
    before = _refs(hub)
    line = json.dumps({"key": "file", "value": {"path": "half.txt", "content": "aGk=",
                                                 "encoding": "base64"}})
    body = (json.dumps({"key": "header", "value": {"summary": "cut"}}) + "\n" + line).encode()
    host = urlsplit(server)
    with socket.create_connection((host.hostname, host.port)) as sock:
        sock.sendall((f"POST /api/kernels/{REPO}/commit/main HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {WRITE_TOKEN}\r\n"
                      f"Content-Length: {len(body) + 5000}\r\n\r\n").encode() + body)
    # The client went away 5000 bytes short: the server must not have committed anything.
    assert api.list_repo_refs(REPO, repo_type="kernel").branches  # still serving
    assert _refs(hub) == before
    assert not api.file_exists(REPO, "half.txt", repo_type="kernel")


def test_concurrent_publishers_never_lose_a_commit(server: str, hub: Path) -> None:
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import make_variant

    api = _new_repo(server)
    api.create_branch(REPO, branch="v1", repo_type="kernel")
    errors: list[BaseException] = []

    def publish_over_http(i: int) -> None:
        try:
            HfApi(endpoint=server, token=WRITE_TOKEN).create_commit(
                REPO, [CommitOperationAdd(f"files/{i}.txt", f"{i}".encode())],
                commit_message=f"http {i}", repo_type="kernel", revision="v1")
        except BaseException as exc:  # reported below
            errors.append(exc)

    def publish_locally(i: int) -> None:  # another writer on the same storage
        try:
            variant = hub.parent / f"variant-{i}"
            make_variant(variant, name="demo")
            name = "torch-cpu" if i == 0 else "torch-cuda"
            LocalPublisher(hub).publish(REPO, "v1", {name: variant}, tag=None,
                                        message=f"local {i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publish_over_http, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=publish_locally, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    paths = {f.path for f in api.list_repo_tree(REPO, repo_type="kernel", revision="v1",
                                                recursive=True)}
    assert {f"files/{i}.txt" for i in range(8)} <= paths
    assert {"build/torch-cpu/metadata.json", "build/torch-cuda/metadata.json"} <= paths
    titles = [c.title for c in api.list_repo_commits(REPO, repo_type="kernel", revision="v1")]
    assert sorted(t for t in titles if t.startswith(("http", "local"))) == sorted(
        [f"http {i}" for i in range(8)] + ["local 0", "local 1"])


LOG_LINE_GUARD_S = 600
"""How long to wait for a request's log line before calling it lost: a last-resort guard.
The server logs a request once its answer is sent, so the client can see the answer
before the line exists; the test waits for the line itself, however loaded the machine."""


class _LogLines(logging.Handler):
    """The server's log lines as they are made, and a way to wait for one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.changed:
            self.lines.append(record.getMessage())
            self.changed.notify_all()

    def wait_for(self, *wanted: Callable[[str], bool]) -> list[str]:
        """Every line so far, once each of ``wanted`` matches one of them."""
        with self.changed:
            if not self.changed.wait_for(
                    lambda: all(any(map(w, self.lines)) for w in wanted),
                    timeout=LOG_LINE_GUARD_S):
                raise AssertionError(f"no such log line within {LOG_LINE_GUARD_S} s: "
                                     f"{self.lines}")
            return list(self.lines)


@pytest.fixture
def log_lines() -> Iterator[_LogLines]:
    handler = _LogLines()
    loggers = [logging.getLogger(name) for name in ("kernelhub_serve", "uvicorn")]
    for logger in loggers:
        logger.addHandler(handler)
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    yield handler
    for logger, level in zip(loggers, saved, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_no_credential_in_any_log_line(server: str, log_lines: _LogLines) -> None:
    api = _new_repo(server)
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO, repo_type="kernel")
    with pytest.raises(HfHubHTTPError):
        HfApi(endpoint=server, token=READ_TOKEN).upload_file(
            path_or_fileobj=b"y", path_in_repo="y.txt", repo_id=REPO, repo_type="kernel")
    served = log_lines.wait_for(  # logged after each answer was sent: wait for them
        lambda line: line.startswith("POST /api/kernels/acme/demo/commit/main 200")
        and line.endswith(" ci"),
        lambda line: " 403 " in line and line.endswith(" reader"))
    text = "\n".join(served)  # the server's lines (the client's own debug log is its business)
    assert WRITE_TOKEN not in text and READ_TOKEN not in text
    assert "Bearer" not in text and "ticket" not in text
