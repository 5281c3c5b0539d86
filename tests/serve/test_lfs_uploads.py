"""Large files through the LFS batch API, the way huggingface_hub sends them when the
server asks for ``lfs`` and Xet is off (``HF_HUB_DISABLE_XET=1``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, constants, hf_hub_download
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
