"""Large files through the LFS batch API, the way huggingface_hub sends them when the
server asks for ``lfs`` and Xet is off (``HF_HUB_DISABLE_XET=1``), and read back as the
Hub reports LFS files."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    HfApi,
    constants,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
)
from huggingface_hub.hf_api import RepoFile
from kernelhub.hub.git import GitRepo
from served import WRITE_TOKEN, serving

REPO = "acme/big"


def test_lfs_upload_lands_as_a_plain_git_blob(hub: Path, tokens_file: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelhub_serve.tokens import TokenTable

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    big = bytes(range(256)) * 4096  # 1 MiB
    with serving(hub, TokenTable.load(tokens_file), lfs_threshold=512 * 1024) as url:
        api = HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo(REPO, repo_type="kernel")
        with httpx.Client() as http:
            modes = http.post(f"{url}/api/kernels/{REPO}/preupload/main",
                              headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
                              json={"files": [{"path": "big.so", "size": len(big), "sample": ""},
                                              {"path": "small.py", "size": 10, "sample": ""}]})
        assert [f["uploadMode"] for f in modes.json()["files"]] == ["lfs", "regular"]
        api.upload_file(path_or_fileobj=big, path_in_repo="build/x/big.so", repo_id=REPO,
                        repo_type="kernel")
        sha = hashlib.sha256(big).hexdigest()
        # Committed into git, the waiting copy is dropped: the file is stored once.
        assert not (hub / ".kernelhub-serve/lfs" / REPO / sha[:2] / sha).exists()
        assert not list((hub / ".kernelhub-serve/lfs").rglob(sha))
        got = hf_hub_download(REPO, "build/x/big.so", repo_type="kernel", endpoint=url,
                              cache_dir=tmp_path / "cache")
        assert Path(got).read_bytes() == big
        # Stored as git stores any file, so the LocalHub reader (no HTTP) reads it too.
        repo = GitRepo(hub / "models" / REPO)
        entry = repo.ls_tree("main", "build/x/big.so")[0]
        assert next(repo.read_blobs([entry.oid])) == big

        # A PUT whose bytes do not hash to the announced oid is refused and not kept.
        other = b"not the announced bytes" * 100
        oid = hashlib.sha256(other + b"!").hexdigest()
        with httpx.Client() as http:
            batch = http.post(f"{url}/kernels/{REPO}.git/info/lfs/objects/batch",
                              headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
                              json={"operation": "upload", "transfers": ["basic"],
                                    "objects": [{"oid": oid, "size": len(other)}]})
            href = batch.json()["objects"][0]["actions"]["upload"]["href"]
            assert http.put(href, content=other).status_code == 400
            assert http.put(href.replace("ticket=", "ticket=1"), content=other).status_code == 403
        assert not list((hub / ".kernelhub-serve/lfs").rglob(oid))


def pointer_oid(sha256: str, size: int) -> str:
    """The git id of the LFS pointer file git-lfs writes for an object, computed by git."""
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    return subprocess.run(["git", "hash-object", "--stdin"], input=pointer.encode(),
                          capture_output=True, check=True).stdout.decode().strip()


def test_a_file_committed_through_lfs_is_listed_and_resolved_as_the_hub_lists_lfs_files(
    hub: Path, tokens_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelhub_serve.tokens import TokenTable

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    big, small = bytes(range(256)) * 64, b"VALUE = 1\n"  # 16 KiB through LFS, 10 B inline
    sha = hashlib.sha256(big).hexdigest()
    with serving(hub, TokenTable.load(tokens_file), lfs_threshold=1024) as url:
        api = HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo(REPO, repo_type="kernel")
        api.create_commit(REPO, [CommitOperationAdd("build/x/big.so", big),
                                 CommitOperationAdd("build/y/big.so", big),  # one object, twice
                                 CommitOperationAdd("build/x/small.py", small)],
                          commit_message="add", repo_type="kernel")
        small_blob = GitRepo(hub / "models" / REPO).ls_tree("main", "build/x/small.py")[0].oid
        pointer_size = len(f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\n"
                           f"size {len(big)}\n")

        reader = HfApi(endpoint=url, token=False)
        listed = {e.path: e for e in reader.list_repo_tree(REPO, "build/x", repo_type="kernel")
                  if isinstance(e, RepoFile)}
        infos = {e.path: e for e in reader.get_paths_info(
            REPO, ["build/x/big.so", "build/y/big.so", "build/x/small.py"], repo_type="kernel")}
        siblings = {s.rfilename: s for s in reader.model_info(
            REPO, files_metadata=True, revision="main").siblings or []}
        for big_entry in (listed["build/x/big.so"], infos["build/x/big.so"],
                          infos["build/y/big.so"]):
            assert isinstance(big_entry, RepoFile)
            assert big_entry.lfs is not None
            assert (big_entry.lfs.sha256, big_entry.lfs.size, big_entry.lfs.pointer_size) == (
                sha, len(big), pointer_size)
            assert (big_entry.size, big_entry.blob_id) == (len(big), pointer_oid(sha, len(big)))
        for small_entry in (listed["build/x/small.py"], infos["build/x/small.py"]):
            assert isinstance(small_entry, RepoFile)
            assert (small_entry.lfs, small_entry.blob_id) == (None, small_blob)
        sibling = siblings["build/x/big.so"]
        assert sibling.lfs is not None and sibling.blob_id == pointer_oid(sha, len(big))
        assert (sibling.lfs.sha256, sibling.lfs.size, sibling.lfs.pointer_size) == (
            sha, len(big), pointer_size)
        assert siblings["build/x/small.py"].lfs is None

        # A download is named by the object's sha256, as huggingface_hub names LFS blobs.
        meta = get_hf_file_metadata(hf_hub_url(REPO, "build/x/big.so", repo_type="kernel",
                                               endpoint=url))
        assert (meta.etag, meta.size) == (sha, len(big))
        got = Path(hf_hub_download(REPO, "build/x/big.so", repo_type="kernel", endpoint=url,
                                   cache_dir=tmp_path / "cache"))
        assert got.read_bytes() == big and got.resolve().name == sha
        with httpx.Client() as http:
            resolve = f"{url}/kernels/{REPO}/resolve/main/build/x/big.so"
            head = http.head(resolve)
            assert (head.headers["x-linked-etag"], head.headers["x-linked-size"]) == (
                f'"{sha}"', str(len(big)))
            assert http.get(resolve, headers={"If-None-Match": f'"{sha}"'}).status_code == 304
            assert "x-linked-etag" not in http.head(
                f"{url}/kernels/{REPO}/resolve/main/build/x/small.py").headers
            # What the Hub answers for an object its commits named: present, downloadable.
            batch = http.post(f"{url}/kernels/{REPO}.git/info/lfs/objects/batch",
                              json={"operation": "download",
                                    "objects": [{"oid": sha, "size": len(big)}]}).json()
            assert http.get(batch["objects"][0]["actions"]["download"]["href"]).content == big
        # preupload names an LFS file by its sha256, so an unchanged one is not sent again.
        before = reader.list_repo_refs(REPO, repo_type="kernel").branches[0].target_commit
        api.upload_file(path_or_fileobj=big, path_in_repo="build/x/big.so", repo_id=REPO,
                        repo_type="kernel")
        assert reader.list_repo_refs(REPO, repo_type="kernel").branches[0].target_commit == before


def lfs_commit(url: str, repo: str, path: str, oid: str, size: int) -> httpx.Response:
    """One NDJSON commit adding ``path`` as LFS object ``oid``, as create_commit sends it."""
    lines = [{"key": "header", "value": {"summary": f"add {path}"}},
             {"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": oid,
                                          "size": size}}]
    return httpx.post(f"{url}/api/kernels/{repo}/commit/main", timeout=60,
                      headers={"Authorization": f"Bearer {WRITE_TOKEN}",
                               "Content-Type": "application/x-ndjson"},
                      content="\n".join(json.dumps(line) for line in lines).encode())


def upload_lfs_object(url: str, repo: str, data: bytes) -> str:
    """Send ``data`` through the LFS batch API (not yet committed); its oid."""
    oid = hashlib.sha256(data).hexdigest()
    batch = httpx.post(f"{url}/kernels/{repo}.git/info/lfs/objects/batch",
                       headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
                       json={"operation": "upload", "transfers": ["basic"],
                             "objects": [{"oid": oid, "size": len(data)}]}).json()
    assert httpx.put(batch["objects"][0]["actions"]["upload"]["href"],
                     content=data).status_code == 200
    return oid


def commits_at_once(url: str, paths: list[str], oid: str, size: int
                    ) -> dict[str, httpx.Response]:
    """One commit per path, each adding LFS object ``oid`` there, all started together."""
    barrier = threading.Barrier(len(paths))
    answers: dict[str, httpx.Response] = {}

    def commit(path: str) -> None:
        barrier.wait()
        answers[path] = lfs_commit(url, REPO, path, oid, size)

    threads = [threading.Thread(target=commit, args=(path,)) for path in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return answers


def test_concurrent_commits_of_one_uploaded_lfs_object_both_land(
    hub: Path, tokens_file: Path
) -> None:
    from kernelhub_serve.tokens import TokenTable

    with serving(hub, TokenTable.load(tokens_file), lfs_threshold=1024) as url:
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo(REPO, repo_type="kernel")
        HfApi(endpoint=url, token=WRITE_TOKEN).create_repo("acme/other", repo_type="kernel")
        for round_ in range(6):
            data = f"object {round_}\n".encode() * 4096
            oid = upload_lfs_object(url, REPO, data)

            paths = [f"r{round_}/{side}.bin" for side in ("a", "b", "c")]

            answers = commits_at_once(url, paths, oid, len(data))

            assert {p: a.status_code for p, a in answers.items()} == dict.fromkeys(paths, 200), {
                p: a.text for p, a in answers.items()}
            repo = GitRepo(hub / "models" / REPO)
            for side in ("a", "b", "c"):
                entry = repo.ls_tree("main", f"r{round_}/{side}.bin")[0]
                assert next(repo.read_blobs([entry.oid])) == data
            # Committed once more later, by oid alone: the object is the repository's now.
            assert lfs_commit(url, REPO, f"r{round_}/d.bin", oid, len(data)).status_code == 200
            # ... and only this repository's: another one cannot commit it by its sha256.
            assert lfs_commit(url, "acme/other", "stolen.bin", oid, len(data)).status_code == 422
        store = hub / ".kernelhub-serve/lfs" / REPO
        assert [p.name for p in store.rglob("*") if p.is_file()] == []  # no copy, no pin left
