"""huggingface_hub — the real client — uploads to and downloads from ``kernelhub serve``,
and kernelhub's own HfHub reads what was published through it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError
from kh_doubles import make_variant
from served import WRITE_TOKEN

REPO = "acme/demo"


def _folder(root: Path) -> Path:
    (root / "build/torch-universal").mkdir(parents=True)
    (root / "build/torch-universal/__init__.py").write_text("VALUE = 1\n")
    (root / "build/torch-universal/data.bin").write_bytes(bytes(range(256)) * 40)
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\n# demo\n")
    return root


def test_upload_folder_then_every_read_a_client_makes(server: str, tmp_path: Path) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    url = api.create_repo(REPO, repo_type="kernel")
    assert url == f"{server}/kernels/{REPO}"
    assert api.create_repo(REPO, repo_type="kernel", exist_ok=True)  # 409 → exist_ok
    api.create_branch(REPO, branch="v1", repo_type="kernel")
    folder = _folder(tmp_path / "up")
    info = api.upload_folder(folder_path=folder, repo_id=REPO, repo_type="kernel", revision="v1",
                             commit_message="first variants")
    api.create_tag(REPO, tag="v1.0.0", revision="v1", repo_type="kernel")

    refs = api.list_repo_refs(REPO, repo_type="kernel")
    assert {b.name: b.target_commit for b in refs.branches}["v1"] == info.oid
    assert [t.name for t in refs.tags] == ["v1.0.0"]
    assert api.repo_info(REPO, repo_type="kernel", revision="v1.0.0").sha == info.oid
    tree = {f.path for f in api.list_repo_tree(REPO, "build", repo_type="kernel", revision="v1",
                                               recursive=True)}
    assert tree == {"build/torch-universal", "build/torch-universal/__init__.py",
                    "build/torch-universal/data.bin"}
    assert api.file_exists(REPO, "README.md", repo_type="kernel", revision="v1")
    assert not api.file_exists(REPO, "nope.txt", repo_type="kernel", revision="v1")
    assert api.list_repo_commits(REPO, repo_type="kernel", revision="v1")[0].title == "first variants"
    # The same repository answers as a model repository too (one LocalHub namespace).
    assert api.repo_info(REPO, repo_type="model", revision="v1").sha == info.oid

    cache = tmp_path / "cache"
    got = Path(snapshot_download(REPO, repo_type="kernel", revision="v1.0.0", endpoint=server,
                                 cache_dir=cache, allow_patterns=["build/torch-universal/*"]))
    for rel in ("__init__.py", "data.bin"):
        assert (got / "build/torch-universal" / rel).read_bytes() == \
            (folder / "build/torch-universal" / rel).read_bytes()
    assert not (got / "README.md").exists()
    one = hf_hub_download(REPO, "README.md", repo_type="kernel", revision="v1", endpoint=server,
                          cache_dir=cache)
    assert Path(one).read_text() == (folder / "README.md").read_text()
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.txt", repo_type="kernel", revision="v1", endpoint=server,
                        cache_dir=cache)
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_tree(REPO, repo_type="kernel", revision="v9").__next__()


def test_resolve_answers_etag_ranges_and_conditional_requests(server: str, tmp_path: Path) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo(REPO, repo_type="kernel")
    data = bytes(range(256)) * 4
    commit = api.upload_file(path_or_fileobj=data, path_in_repo="blob.bin", repo_id=REPO,
                             repo_type="kernel").oid
    oid = api.get_paths_info(REPO, ["blob.bin"], repo_type="kernel")[0].blob_id
    url = f"{server}/kernels/{REPO}/resolve/main/blob.bin"
    with httpx.Client() as http:
        head = http.head(url)
        assert head.status_code == 200
        assert head.headers["etag"] == f'"{oid}"'
        assert head.headers["x-repo-commit"] == commit
        assert head.headers["content-length"] == str(len(data))
        assert head.content == b""
        part = http.get(url, headers={"Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == data[10:20]
        assert part.headers["content-range"] == f"bytes 10-19/{len(data)}"
        assert http.get(url, headers={"Range": "bytes=1000-"}).content == data[1000:]
        assert http.get(url, headers={"Range": "bytes=-4"}).content == data[-4:]
        assert http.get(url, headers={"Range": "bytes=5000-"}).status_code == 416
        assert http.get(url, headers={"If-None-Match": f'"{oid}"'}).status_code == 304
        missing = http.head(f"{server}/kernels/{REPO}/resolve/main/none.bin")
        assert missing.status_code == 404
        assert missing.headers["x-error-code"] == "EntryNotFound"
        assert missing.headers["x-repo-commit"] == commit
        model_url = f"{server}/{REPO}/resolve/{commit}/blob.bin"  # the model prefix, by sha
        assert http.get(model_url).content == data


def test_kernelhub_hfhub_reads_a_variant_published_through_the_server(
        server: str, tmp_path: Path) -> None:
    from kernelhub.hub.hf import HfHub

    variant = tmp_path / "variant"
    make_variant(variant, name="demo", backend="cpu")
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo(REPO, repo_type="kernel")
    api.create_branch(REPO, branch="v1", repo_type="kernel")
    api.upload_folder(folder_path=variant, path_in_repo="build/torch-cpu", repo_id=REPO,
                      repo_type="kernel", revision="v1")
    hub = HfHub(endpoint=server)
    refs = hub.list_refs(REPO)
    assert set(refs.branches) == {"main", "v1"}
    assert hub.type_of(REPO) == "kernel"
    assert hub.list_variants(REPO, refs.branches["v1"]) == ["torch-cpu"]
    dest = tmp_path / "fetched"
    hub.fetch_variant(REPO, refs.branches["v1"], "torch-cpu", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["__init__.py", "metadata.json"]
    assert (dest / "metadata.json").read_bytes() == (variant / "metadata.json").read_bytes()
