"""Two ``kernelhub serve`` processes over one hub directory, alone and behind nginx as a
caching reverse proxy (issue 34 item 4): concurrent commits through both processes all
land; an LFS upload may cross processes; files by commit id come from nginx's cache; a
private repository's bytes never reach an anonymous client, from the cache or otherwise."""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, constants, snapshot_download
from huggingface_hub.errors import HfHubHTTPError
from kernelhub.formats.metadata import verify_variant
from kernelhub_serve.errors import ServeError
from kernelhub_serve.nginx import render_nginx_conf
from kh_doubles import make_variant
from proxied import NGINX, nginx_in_front
from served import READ_TOKEN, WRITE_TOKEN, serving_process, write_tokens_file

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
COMMITS = 12


def two_processes(stack: ExitStack, work: Path, *extra: str) -> list[str]:
    tokens = write_tokens_file(work / "tokens.toml")
    return [stack.enter_context(serving_process(work / "hub", tokens, work / f"serve{i}.log",
                                                *extra)) for i in range(2)]


def test_concurrent_commits_through_two_processes_all_land(tmp_path: Path, monkeypatch
                                                           ) -> None:
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    with ExitStack() as stack:
        urls = two_processes(stack, tmp_path, "--lfs-threshold", "1024")
        first, second = (HfApi(endpoint=u, token=WRITE_TOKEN) for u in urls)
        first.create_repo("acme/shared", repo_type="kernel")

        def publish(i: int) -> None:
            (first, second)[i % 2].create_commit(
                "acme/shared", [CommitOperationAdd(f"p/{i}.txt", f"{i}\n".encode())],
                commit_message=f"publish {i}", repo_type="kernel")

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(publish, range(COMMITS)))

        heads = {api.repo_info("acme/shared", repo_type="kernel").sha for api in (first, second)}
        assert len(heads) == 1, f"the two processes disagree on main: {heads}"
        titles = {c.title for c in second.list_repo_commits("acme/shared", repo_type="kernel")}
        files = {f.path for f in first.list_repo_tree("acme/shared", "p", repo_type="kernel")}
        assert files == {f"p/{i}.txt" for i in range(COMMITS)}
        assert {f"publish {i}" for i in range(COMMITS)} <= titles
        # No branch may be named like a commit: a resolve by commit id is cached for good.
        with pytest.raises(HfHubHTTPError, match="not a valid branch"):
            first.create_branch("acme/shared", branch="a" * 40, repo_type="kernel")

        # An LFS upload whose batch answer came from one process and whose PUT goes to the
        # other: the ticket is signed with the hub's secret, not a process's own.
        blob = os.urandom(4096)
        batch = httpx.post(f"{urls[0]}/acme/shared.git/info/lfs/objects/batch", json={
            "operation": "upload", "transfers": ["basic"],
            "objects": [{"oid": hashlib.sha256(blob).hexdigest(), "size": len(blob)}]},
            headers={"Authorization": f"Bearer {WRITE_TOKEN}"})
        batch.raise_for_status()
        href = batch.json()["objects"][0]["actions"]["upload"]["href"]
        put = httpx.put(href.replace(urls[0], urls[1]), content=blob)
        assert put.status_code == 200, put.text


def test_nginx_caches_files_by_commit_and_never_private_ones(tmp_path: Path) -> None:
    if NGINX is None:
        pytest.skip("needs the system's nginx (ci/setup installs it with apt)")
    variant = tmp_path / "variant"
    make_variant(variant, name="cached")
    with ExitStack() as stack:
        urls = two_processes(stack, tmp_path)
        proxy = stack.enter_context(nginx_in_front(tmp_path, urls))
        writer = HfApi(endpoint=proxy, token=WRITE_TOKEN)
        for repo_id, private in (("acme/public", False), ("acme/secret", True)):
            writer.create_repo(repo_id, repo_type="kernel", private=private)
            writer.upload_folder(folder_path=variant, path_in_repo=f"build/{VARIANT}",
                                 repo_id=repo_id, repo_type="kernel")

        # A load through the proxy, as a fresh machine does it, with every byte verified.
        path = snapshot_download("acme/public", repo_type="kernel", endpoint=proxy,
                                 cache_dir=tmp_path / "hf-cache", token=False,
                                 allow_patterns=[f"build/{VARIANT}/*"])
        verify_variant(Path(path) / "build" / VARIANT)

        commit = writer.repo_info("acme/public", repo_type="kernel").sha
        url = f"{proxy}/kernels/acme/public/resolve/{commit}/build/{VARIANT}/metadata.json"
        first, again = httpx.get(url), httpx.get(url)
        assert first.status_code == again.status_code == 200
        assert again.headers["x-cache-status"] == "HIT"
        assert "immutable" in again.headers["cache-control"]
        assert again.content == first.content == (variant / "metadata.json").read_bytes()
        by_branch = httpx.get(f"{proxy}/kernels/acme/public/resolve/main/build/{VARIANT}/"
                              "metadata.json")
        assert by_branch.status_code == 200 and "x-cache-status" not in by_branch.headers

        # The listing snapshot_download asks for, by commit: as immutable as the files.
        listing = f"{proxy}/api/kernels/acme/public/tree/{commit}?recursive=true"
        first_list, again_list = httpx.get(listing), httpx.get(listing)
        assert again_list.headers["x-cache-status"] == "HIT"
        assert "immutable" in again_list.headers["cache-control"]
        assert again_list.json() == first_list.json() and len(first_list.json()) > 3
        assert httpx.get(listing.replace("?recursive=true", "")).json() != first_list.json()

        secret = writer.repo_info("acme/secret", repo_type="kernel").sha
        secret_list = httpx.get(f"{proxy}/api/kernels/acme/secret/tree/{secret}",
                                headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert secret_list.status_code == 200 and secret_list.headers["x-cache-status"] == "BYPASS"
        assert secret_list.headers["cache-control"].startswith("private")
        assert httpx.get(f"{proxy}/api/kernels/acme/secret/tree/{secret}").status_code == 401
        private_url = (f"{proxy}/kernels/acme/secret/resolve/{secret}/build/{VARIANT}/"
                       "metadata.json")
        reader = {"Authorization": f"Bearer {READ_TOKEN}"}
        for _ in range(2):  # the reader's answers are never stored...
            answer = httpx.get(private_url, headers=reader)
            assert answer.status_code == 200 and answer.headers["x-cache-status"] == "BYPASS"
            assert answer.headers["cache-control"].startswith("private")
        anonymous = httpx.get(private_url)  # ...so anonymous gets serve's refusal
        assert anonymous.status_code == 401
        assert anonymous.headers["x-cache-status"] == "MISS"
        assert anonymous.content != answer.content


def test_nginx_keeps_which_commit_a_branch_names_for_a_second(tmp_path: Path) -> None:
    """repo_info at a branch (a cold load's one call not by commit) is answered from the
    cache for anonymous readers of a public repository, for at most about a second; a
    token always reaches serve, and a private repository's answer is never stored."""
    if NGINX is None:
        pytest.skip("needs the system's nginx (ci/setup installs it with apt)")
    with ExitStack() as stack:
        proxy = stack.enter_context(nginx_in_front(tmp_path, two_processes(stack, tmp_path)))
        writer = HfApi(endpoint=proxy, token=WRITE_TOKEN)
        for repo_id, private in (("acme/public", False), ("acme/secret", True)):
            writer.create_repo(repo_id, repo_type="kernel", private=private)
            writer.upload_file(path_or_fileobj=b"one\n", path_in_repo="f.txt",
                               repo_id=repo_id, repo_type="kernel")
        first = writer.repo_info("acme/public", repo_type="kernel").sha
        url = f"{proxy}/api/kernels/acme/public/revision/main"

        statuses = []
        for _ in range(5):  # a pair of requests inside one second: the second is a HIT
            answers = [httpx.get(url), httpx.get(url)]
            statuses.append(answers[1].headers["x-cache-status"])
            assert all(a.status_code == 200 and a.json()["sha"] == first for a in answers)
            assert answers[1].headers["cache-control"] == "public, max-age=1"
            if statuses[-1] == "HIT":
                break
        assert "HIT" in statuses, statuses

        second = writer.upload_file(path_or_fileobj=b"two\n", path_in_repo="f.txt",
                                    repo_id="acme/public", repo_type="kernel").oid
        own = httpx.get(url, headers={"Authorization": f"Bearer {WRITE_TOKEN}"})
        assert own.headers["x-cache-status"] == "BYPASS" and own.json()["sha"] == second
        seen = {httpx.get(url).json()["sha"]}
        for _ in range(100):  # the branch move reaches anonymous readers once the second is up
            if second in seen:
                break
            time.sleep(0.1)
            seen.add(httpx.get(url).json()["sha"])
        assert second in seen and seen <= {first, second}, seen

        secret_url = f"{proxy}/api/kernels/acme/secret/revision/main"
        reader = {"Authorization": f"Bearer {READ_TOKEN}"}
        for _ in range(2):
            answer = httpx.get(secret_url, headers=reader)
            assert answer.status_code == 200 and answer.headers["x-cache-status"] == "BYPASS"
            assert answer.headers["cache-control"].startswith("private")
            anonymous = httpx.get(secret_url)
            assert anonymous.status_code == 401 and anonymous.headers["x-cache-status"] == "MISS"
            assert "sha" not in anonymous.json()


def test_nginx_conf_refuses_values_that_would_change_it(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="not an address"):
        render_nginx_conf("127.0.0.1:80; include /etc/passwd", ["127.0.0.1:1"], tmp_path,
                          tmp_path / "c")
    with pytest.raises(ServeError, match="absolute"):
        render_nginx_conf("8080", ["127.0.0.1:1"], tmp_path / "a;b", tmp_path / "c")
    text = render_nginx_conf("8080", ["127.0.0.1:1", "127.0.0.1:2"], tmp_path, tmp_path / "c")
    assert "server 127.0.0.1:1;" in text and "server 127.0.0.1:2;" in text
    assert f"proxy_cache_path {tmp_path / 'c'} " in text


def test_docs_show_the_rendered_template() -> None:
    """docs/serve.md's nginx.conf is the template rendered, so the two cannot drift."""
    docs = (Path(__file__).resolve().parents[2] / "docs/serve.md").read_text()
    shown = docs.split("<!-- nginx.conf: begin -->\n```nginx\n")[1].split("```\n<!-- nginx")[0]
    assert shown == render_nginx_conf(
        "80", ["127.0.0.1:8901", "127.0.0.1:8902"], Path("/var/lib/kernelhub-nginx"),
        Path("/var/cache/kernelhub-nginx"), user="www-data")
