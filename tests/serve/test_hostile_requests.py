"""Requests an attacker would send: each probe of issue 33's server part, answered with a
4xx and nothing read or stored outside what the caller may see."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from huggingface_hub import HfApi
from kernelhub.hub.git import GitRepo, IndexEntry, RefUpdate
from served import OTHER_TOKEN, WRITE_TOKEN, serving

WRITER = {"Authorization": f"Bearer {WRITE_TOKEN}"}


def _upload_lfs_object(server: str, repo: str, data: bytes) -> str:
    """One real LFS upload through the batch API (the precondition of the file-read hole:
    the LFS store directory exists)."""
    oid = hashlib.sha256(data).hexdigest()
    with httpx.Client() as http:
        batch = http.post(f"{server}/kernels/{repo}.git/info/lfs/objects/batch", headers=WRITER,
                          json={"operation": "upload", "transfers": ["basic"],
                                "objects": [{"oid": oid, "size": len(data)}]})
        assert batch.status_code == 200, batch.text
        href = batch.json()["objects"][0]["actions"]["upload"]["href"]
        assert http.put(href, content=data).status_code == 200
    return oid


def test_lfs_urls_read_no_file_outside_the_object_store(server: str, tokens_file: Path) -> None:
    """Issue 33, high 1: a ``%2F`` inside the oid segment was decoded after the split and the
    oid never checked, so ``..%2F..%2Ftokens.toml`` served the tokens file to anyone."""
    with httpx.Client() as http:
        assert http.post(f"{server}/api/repos/create", headers=WRITER,
                         json={"name": "big", "organization": "acme", "type": "kernel"}
                         ).status_code == 200
    _upload_lfs_object(server, "acme/big", b"some large file" * 100)
    secret = tokens_file.read_bytes()
    probes = ["..%2F..%2Ftokens.toml", "%2Fetc%2Fpasswd", "..%2F..%2F..%2F..%2F..%2F..%2F..%2F"
              "..%2F..%2F..%2Fetc%2Fpasswd", "../../tokens.toml", "%2e%2e%2F%2e%2e%2Ftokens.toml",
              "0" * 63 + "%2F", "g" * 64]
    with httpx.Client() as http:
        for repo in ("acme/big", "no/such-repo"):
            for oid in probes:
                for suffix in ("", "/verify"):
                    url = f"{server}/-/lfs/{repo}/{oid}{suffix}"
                    for method in ("GET", "POST", "PUT"):
                        answer = http.request(method, url, headers=WRITER)
                        assert 400 <= answer.status_code < 500, (method, url, answer.status_code)
                        assert secret not in answer.content and b"root:" not in answer.content


# -- LFS objects belong to one repository (issue 33, medium 3) ---------------------------

def test_an_lfs_object_is_readable_and_committable_only_in_its_repository(server: str) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    api.create_repo("acme/public", repo_type="kernel")
    HfApi(endpoint=server, token=OTHER_TOKEN).create_repo("elsewhere/pub", repo_type="kernel")
    data = b"private weights " * 1000
    oid = _upload_lfs_object(server, "acme/secret", data)
    with httpx.Client() as http:
        assert http.get(f"{server}/-/lfs/acme/secret/{oid}").status_code == 401
        assert http.get(f"{server}/-/lfs/acme/secret/{oid}", headers=WRITER).content == data
        for repo in ("acme/public", "elsewhere/pub"):
            answer = http.get(f"{server}/-/lfs/{repo}/{oid}")
            assert answer.status_code == 404 and data not in answer.content
        # Another org's writer knows the sha256 but not the bytes: no commit of it.
        answer = http.post(f"{server}/api/kernels/elsewhere/pub/commit/main",
                           headers={"Authorization": f"Bearer {OTHER_TOKEN}"},
                           content=_ndjson({"key": "lfsFile", "value": {
                               "path": "stolen.bin", "algo": "sha256", "oid": oid,
                               "size": len(data)}}))
        assert answer.status_code == 422, answer.text
    assert not HfApi(endpoint=server).file_exists("elsewhere/pub", "stolen.bin",
                                                  repo_type="kernel")


# -- bodies and memory (issue 33, mediums 4 and 5) ---------------------------------------

def _raw_request(server: str, head: str, body: bytes = b"") -> int:
    """The status the server answers a request head (and partial body) with, without the
    client sending the rest: a server that waited for the announced body would never
    answer, and the generous socket timeout would fail the test."""
    host = urlsplit(server)
    with socket.create_connection((host.hostname, host.port), timeout=120) as sock:
        sock.sendall(head.encode() + body)
        first = sock.makefile("rb").readline()
    return int(first.split()[1])


def test_bodies_are_refused_before_they_are_read(server: str) -> None:
    huge = "Content-Length: 419430400\r\n\r\n"
    create = "POST /api/repos/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    assert _raw_request(server, create + huge, b"{") == 401  # no token: not one byte read
    paths = "POST /api/models/acme/none/paths-info/main HTTP/1.1\r\nHost: x\r\n"
    assert _raw_request(server, paths + huge, b"paths=") in (404, 413)
    with httpx.Client() as http:
        HfApi(endpoint=server, token=WRITE_TOKEN).create_repo("acme/demo", repo_type="kernel")
        answer = http.post(f"{server}/api/models/acme/demo/paths-info/main",
                           content=b"paths=x&" * (300 * 1024))  # 2.4 MB, anonymous
        assert answer.status_code == 413


def test_max_body_is_enforced_while_streaming(hub: Path, tokens_file: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    with serving(hub, TokenTable.load(tokens_file), max_body=64 * 1024) as url:
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo("acme/demo", repo_type="kernel")
        big = base64.b64encode(b"x" * 100 * 1024).decode()

        def chunks() -> Iterator[bytes]:  # no Content-Length: only counting can stop it
            yield _ndjson({"key": "file", "value": {"path": "big.bin", "content": big,
                                                    "encoding": "base64"}})

        answer = httpx.post(f"{url}/api/kernels/acme/demo/commit/main", headers=WRITER,
                            content=chunks())
        assert answer.status_code == 413, answer.text
        assert not HfApi(endpoint=url).file_exists("acme/demo", "big.bin", repo_type="kernel")


def test_downloads_stream_in_constant_memory(server: str, hub: Path, tmp_path: Path) -> None:
    HfApi(endpoint=server, token=WRITE_TOKEN).create_repo("acme/big", repo_type="kernel")
    size = 48 * 1024**2
    source = tmp_path / "big.bin"
    with source.open("wb") as out:
        for i in range(size // 4096):
            out.write(i.to_bytes(4, "big") * 1024)
    repo = GitRepo(hub / "models/acme/big")
    head = repo.refs("refs/heads/main")["refs/heads/main"]
    tree = repo.write_tree(head.commit, [], [IndexEntry("100644", repo.hash_files([source])[0],
                                                        "big.bin")])
    commit = repo.commit_tree(tree, head.commit, "a big file")
    repo.update_refs([RefUpdate("refs/heads/main", commit, head.oid)])
    url = f"{server}/kernels/acme/big/resolve/main/big.bin"
    tracemalloc.start()
    try:
        with httpx.Client() as http:
            digest, received = hashlib.sha256(), 0
            with http.stream("GET", url) as answer:
                for chunk in answer.iter_bytes(64 * 1024):
                    digest.update(chunk)
                    received += len(chunk)
            with http.stream("GET", url, headers={"Range": f"bytes=4096-{size - 2}"}) as part:
                assert part.status_code == 206
                ranged = sum(len(c) for c in part.iter_bytes(64 * 1024))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == size and digest.hexdigest() == hashlib.sha256(
        source.read_bytes()).hexdigest()
    assert ranged == size - 1 - 4096
    assert peak < 16 * 1024**2, f"serving a {size >> 20} MiB file took {peak >> 20} MiB"


def test_a_large_inline_file_is_committed_in_bounded_memory(server: str, hub: Path) -> None:
    """The default upload mode sends a file base64 inside its commit line: the line is
    never held whole (issue 33, medium 5: 150 MiB took 1.16 GiB)."""
    _demo(server, hub)
    block = bytes(range(256)) * 3 * 1024  # 768 KiB: a multiple of 3, so base64 concatenates
    count = 48

    def body() -> Iterator[bytes]:
        yield _ndjson() + b"\n"
        yield b'{"key": "file", "value": {"path": "big.bin", "encoding": "base64", "content": "'
        for _ in range(count):
            yield base64.b64encode(block)
        yield b'"}}\n'
        yield _ndjson(_add("small.txt")).split(b"\n", 1)[1] + b"\n"

    tracemalloc.start()
    try:
        answer = httpx.post(f"{server}/api/kernels/acme/demo/commit/main", content=body(),
                            headers={**WRITER, "Content-Type": "application/x-ndjson"},
                            timeout=300)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.status_code == 200, answer.text
    assert peak < 24 * 1024**2, f"a {len(block) * count >> 20} MiB commit took {peak >> 20} MiB"
    repo = GitRepo(hub / "models/acme/demo")
    entry = repo.ls_tree("main", "big.bin")[0]
    assert hashlib.sha256(next(repo.read_blobs([entry.oid]))).digest() == hashlib.sha256(
        block * count).digest()
    assert repo.ls_tree("main", "small.txt")


def test_a_stale_part_file_or_pin_is_removed_when_the_server_starts(hub: Path,
                                                                    tokens_file: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    store = hub / ".kernelhub-serve/lfs/acme/big/ab"
    store.mkdir(parents=True)
    stale, live = store / ".abcdef.x.part", store / ".abcdef.y.part"
    stale.write_bytes(b"x" * 1000)
    live.write_bytes(b"y" * 1000)
    os.utime(stale, (time.time() - 7200, time.time() - 7200))  # a killed upload
    # A commit's hard links to the objects it reads (a killed commit's, a running one's).
    stale_pins, live_pins = store.parent / ".0011.pins", store.parent / ".0022.pins"
    for pins in (stale_pins, live_pins):
        pins.mkdir()
        (pins / ("ab" * 32)).write_bytes(b"z" * 1000)
    os.utime(stale_pins, (time.time() - 7200, time.time() - 7200))
    with serving(hub, TokenTable.load(tokens_file)):
        assert not stale.exists() and not stale_pins.exists()
        assert live.exists() and live_pins.exists()  # another server's upload or commit


# -- lows --------------------------------------------------------------------------------

def _ndjson(*ops: dict[str, object], header: dict[str, object] | None = None) -> bytes:
    lines = [{"key": "header", "value": header or {"summary": "probe"}}, *ops]
    return "\n".join(json.dumps(x) for x in lines).encode()


def _add(path: str) -> dict[str, object]:
    return {"key": "file", "value": {"path": path, "content": "eA==", "encoding": "base64"}}


def _demo(server: str, hub: Path) -> dict[str, str]:
    HfApi(endpoint=server, token=WRITE_TOKEN).create_repo("acme/demo", repo_type="kernel")
    return {n: v.commit for n, v in GitRepo(hub / "models/acme/demo").refs().items()}


def _commit(server: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{server}/api/kernels/acme/demo/commit/main", content=body,
                      headers={**WRITER, "Content-Type": "application/x-ndjson"})


def test_paths_git_would_store_elsewhere_are_refused(server: str, hub: Path) -> None:
    before = _demo(server, hub)
    for path in (".GIT/config", "a/.Git/hooks/x", "./x", "x/.", "a/./b", "a//b"):
        answer = _commit(server, _ndjson(_add(path)))
        assert answer.status_code == 400, (path, answer.status_code)
    assert {n: v.commit for n, v in GitRepo(hub / "models/acme/demo").refs().items()} == before


def test_a_file_and_a_folder_of_one_name_are_refused(server: str, hub: Path) -> None:
    before = _demo(server, hub)
    answer = _commit(server, _ndjson(_add("conf"), _add("conf/sub")))
    assert answer.status_code == 400 and "conf" in answer.json()["error"]
    assert {n: v.commit for n, v in GitRepo(hub / "models/acme/demo").refs().items()} == before


def test_control_characters_in_a_path_get_a_4xx(server: str, hub: Path) -> None:
    _demo(server, hub)
    with httpx.Client() as http:
        for path in ("api/models/acme/demo/revision/main%0A", "api/models/acme/demo/revision/ma"
                     "in%00", "acme/demo/resolve/main/a%00b", "api/models/acme/de%00mo/refs",
                     "api/models/acme/demo/tree/main/%0a", "-/lfs/acme/demo/%00",
                     "api/%0D%0AX-Injected:%201/acme/demo/refs"):
            answer = http.get(f"{server}/{path}")
            assert 400 <= answer.status_code < 500, (path, answer.status_code)
            assert "x-injected" not in answer.headers


def test_malformed_bodies_get_a_4xx(server: str, hub: Path) -> None:
    _demo(server, hub)
    r = f"{server}/api/kernels/acme/demo"
    probes = [
        ("POST", f"{server}/api/repos/create", b"[1]"),
        ("POST", f"{server}/api/repos/create", b'{"name": 5}'),
        ("POST", f"{server}/api/repos/create", b'{"name": "x", "organization": ["acme"]}'),
        ("POST", f"{server}/api/repos/create", b'{"name": "acme/x", "type": ["x"]}'),
        ("DELETE", f"{server}/api/repos/delete", b"\xff\xfe"),
        ("POST", f"{r}/preupload/main", b'{"files": [1, 2]}'),
        ("POST", f"{r}/preupload/main", b'{"files": [{"path": "../x"}]}'),
        ("POST", f"{r}/commit/main", b'{"key": "header", "value": {"summary": ["x"]}}'),
        ("POST", f"{r}/commit/main", b'{"key": "header", "value": {"summary": "x"}}\n'
                                     b'{"key": "file", "value": {"path": "a", "content": '
                                     b'"\\ud800"}}'),
        ("POST", f"{r}/commit/main", b"[" * 100_000),
        ("POST", f"{r}/branch/b1", b'{"startingPoint": 7}'),
        ("POST", f"{r}/tag/main", b'{"tag": "x\\ny"}'),
        ("POST", f"{server}/kernels/acme/demo.git/info/lfs/objects/batch",
         b'{"operation": "upload", "objects": 5}'),
        ("POST", f"{server}/kernels/acme/demo.git/info/lfs/objects/batch",
         b'{"operation": ["upload"], "objects": []}'),
        ("POST", f"{server}/api/validate-yaml", b'{"content": "---\\n' + b"[" * 5000 + b'\\n---"}'),
        ("POST", f"{r}/paths-info/main", b"paths=%00"),
    ]
    with httpx.Client() as http:
        for method, url, body in probes:
            answer = http.request(method, url, content=body, headers=WRITER)
            assert 400 <= answer.status_code < 500, (method, url, body[:60], answer.text)


def test_a_short_parent_commit_is_refused(server: str, hub: Path) -> None:
    before = _demo(server, hub)
    head = before["refs/heads/main"]
    answer = _commit(server, _ndjson(_add("a.txt"), header={"summary": "s",
                                                            "parentCommit": head[:1]}))
    assert answer.status_code == 400, answer.text
    assert {n: v.commit for n, v in GitRepo(hub / "models/acme/demo").refs().items()} == before


def test_a_non_hex_oid_gets_no_upload_ticket(server: str, hub: Path) -> None:
    _demo(server, hub)
    answer = httpx.post(f"{server}/kernels/acme/demo.git/info/lfs/objects/batch", headers=WRITER,
                        json={"operation": "upload", "objects": [{"oid": "g" * 64, "size": 3}]})
    assert answer.status_code == 200
    (obj,) = answer.json()["objects"]
    assert "actions" not in obj and obj["error"]["code"] == 422


def test_the_anonymous_org_overview_counts_only_public_repos(server: str) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    api.create_repo("acme/public", repo_type="kernel")
    url = f"{server}/api/organizations/acme/overview"
    assert httpx.get(url).json()["numModels"] == 1
    assert httpx.get(url, headers=WRITER).json()["numModels"] == 2
    api.delete_repo("acme/public", repo_type="kernel")
    assert httpx.get(url).status_code == 404  # only a private repo: no org to an outsider


def test_the_commit_url_handed_back_resolves(server: str) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/demo", repo_type="kernel")
    info = api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="acme/demo",
                           repo_type="kernel")
    page = httpx.get(info.commit_url)
    assert page.status_code == 200 and info.oid in page.text


def test_a_mistyped_path_answers_a_browser_in_html_and_a_client_in_json(server: str) -> None:
    for path in ("acme/demo/blob/main/x", "no-such-page", "api/nothing-here"):
        browser = httpx.get(f"{server}/{path}", headers={"Accept": "text/html,*/*;q=0.8"})
        assert browser.status_code == 404 and "text/html" in browser.headers["content-type"]
        client = httpx.get(f"{server}/{path}")
        assert client.status_code == 404 and client.json()["error"]
