"""HfHub against a real Hub-API server: olah mirroring a LocalHub, offline.

This is how a team shares one hub without the public Hub, and it checks that what
huggingface_hub clients see through olah is exactly what LocalHub says.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile
from kernelhub.errors import HubError, RepoNotFoundError, VersionSpecError
from kernelhub.hub.hf import HfHub
from kernelhub_builder.ship.hf import same_content
from kernelhub_builder.ship.staged import staged_files

REPO = "acme/demo"


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def served(olah_hub, tmp_path_factory):
    """Publish two releases to the served LocalHub; return (local, remote, staged dirs)."""
    local, endpoint = olah_hub
    tmp = tmp_path_factory.mktemp("staged")
    dirs = {}
    for variant in ("torch-cpu", "torch-universal"):
        root = tmp / variant
        (root / "layers").mkdir(parents=True)
        (root / "__init__.py").write_text(f"NAME = {variant!r}\n")
        (root / "layers" / "__init__.py").write_text("class Layer: pass\n")
        (root / "metadata.json").write_text('{"name": "demo"}\n')
        dirs[variant] = root
    local.publish(REPO, "v1", dirs, tag="v1.0.0", message="1.0.0")
    return local, HfHub(endpoint=endpoint, token=False), dirs


def test_refs_and_variants_match_the_local_hub(served):
    local, remote, _ = served
    refs = remote.list_refs(REPO)
    assert refs == local.list_refs(REPO)
    commit = refs.branches["v1"]
    assert remote.list_variants(REPO, commit) == ["torch-cpu", "torch-universal"]
    assert remote.list_variants(REPO, "v1.0.0") == local.list_variants(REPO, "v1.0.0")


def test_fetch_downloads_only_that_variant(served, tmp_path):
    local, remote, dirs = served
    commit = local.list_refs(REPO).branches["v1"]

    remote.fetch_variant(REPO, commit, "torch-cpu", tmp_path / "remote")
    local.fetch_variant(REPO, commit, "torch-cpu", tmp_path / "local")

    got = files_of(tmp_path / "remote")
    assert got == files_of(tmp_path / "local") == files_of(dirs["torch-cpu"])
    # Nothing of the other variant, and none of huggingface_hub's bookkeeping, arrived.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "remote"]


def test_a_new_publish_is_visible_through_the_server(served, tmp_path):
    local, remote, _ = served
    before = remote.list_refs(REPO).branches["v1"]
    extra = tmp_path / "torch-cuda"
    extra.mkdir()
    (extra / "__init__.py").write_text("NAME = 'torch-cuda'\n")

    result = local.publish(REPO, "v1", {"torch-cuda": extra}, tag="v1.1.0", message="1.1.0")

    refs = remote.list_refs(REPO)
    assert refs.branches["v1"] == result.commit != before
    assert refs.tags["v1.1.0"] == result.commit and refs.tags["v1.0.0"] == before
    assert remote.list_variants(REPO, "v1.1.0") == ["torch-cpu", "torch-cuda", "torch-universal"]


def test_errors_name_what_is_missing(served, tmp_path):
    _, remote, _ = served
    with pytest.raises(RepoNotFoundError, match="no repository acme/nope"):
        remote.list_refs("acme/nope")
    with pytest.raises(VersionSpecError, match=r"no commit '1{40}'.*branches: v1"):
        remote.list_variants(REPO, "1" * 40)
    with pytest.raises(HubError, match="no variant torch-rocm; variants: torch-cpu"):
        remote.fetch_variant(REPO, "v1.0.0", "torch-rocm", tmp_path / "out")
    with pytest.raises(VersionSpecError, match=r"no commit '2{40}'"):
        remote.fetch_variant(REPO, "2" * 40, "torch-cpu", tmp_path / "out2")


def test_same_content_agrees_with_the_blob_ids_the_server_reports(served, tmp_path):
    _, remote, dirs = served
    api = HfApi(endpoint=remote.endpoint, token=False)
    listing = api.list_repo_tree(
        REPO, path_in_repo="build/torch-cpu", revision="v1.0.0", recursive=True
    )
    files = {e.path.removeprefix("build/torch-cpu/"): e for e in listing if isinstance(e, RepoFile)}

    assert same_content(staged_files("torch-cpu", dirs["torch-cpu"]), files)
    changed = tmp_path / "changed"
    changed.mkdir()
    for rel, data in files_of(dirs["torch-cpu"]).items():
        (changed / rel).parent.mkdir(parents=True, exist_ok=True)
        (changed / rel).write_bytes(data)
    (changed / "metadata.json").write_text('{"name": "other"}\n')
    assert not same_content(staged_files("torch-cpu", changed), files)
