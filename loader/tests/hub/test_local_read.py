"""Reading from a LocalHub: refs, variants, fetches, trust, and errors that list what exists."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kernelhub.errors import HubError, RepoNotFoundError, VariantNameError, VersionSpecError
from kernelhub.hub import Hub
from kernelhub.hub.local import LocalHub


def test_local_hub_satisfies_the_protocol_and_has_a_stable_key(tmp_path):
    a, b = LocalHub(tmp_path / "a"), LocalHub(tmp_path / "b")
    assert isinstance(a, Hub)
    assert a.key == LocalHub(tmp_path / "x" / ".." / "a").key
    assert a.key != b.key and a.key.startswith("local-") and len(a.key) == len("local-") + 12


def test_unknown_repo_on_an_empty_hub_says_so(hub):
    with pytest.raises(RepoNotFoundError, match="the hub is empty") as info:
        hub.list_refs("kernels-community/activation")
    assert str(hub.root) in str(info.value)


def test_unknown_repo_lists_what_the_org_has(hub, stage):
    for name in ("activation", "layer-norm"):
        hub.publish(f"acme/{name}", "v1", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")

    with pytest.raises(RepoNotFoundError, match="acme has: activation, layer-norm"):
        hub.list_refs("acme/activaton")
    with pytest.raises(RepoNotFoundError, match="no org 'other', only: acme"):
        hub.list_variants("other/activation", "v1")
    assert hub.list_repos() == {"acme": ["activation", "layer-norm"]}


def test_malformed_repo_ids_are_rejected_before_touching_disk(hub):
    for bad in ("noslash", "a/b/c", "../etc", "org/.."):
        with pytest.raises(RepoNotFoundError, match="not a valid repository id"):
            hub.list_refs(bad)


def test_unknown_commit_lists_branches_and_releases(hub, stage):
    hub.publish("acme/k", "v1", {"torch-cpu": stage("torch-cpu")}, tag="v1.0.0", message="m")

    with pytest.raises(
        VersionSpecError, match=r"no commit '0{40}'.*branches: v1; release tags: v1.0.0"
    ):
        hub.list_variants("acme/k", "0" * 40)
    with pytest.raises(VersionSpecError, match="no commit '--all'"):
        hub.list_variants("acme/k", "--all")


def test_fetch_of_a_missing_variant_lists_the_variants(hub, stage, tmp_path):
    hub.publish("acme/k", "v1", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")

    with pytest.raises(HubError, match="no variant torch-cuda; variants: torch-cpu"):
        hub.fetch_variant("acme/k", "v1", "torch-cuda", tmp_path / "out")
    with pytest.raises(VariantNameError):
        hub.fetch_variant("acme/k", "v1", "../../etc", tmp_path / "out")


def test_fetch_refuses_a_non_empty_destination(hub, stage, tmp_path):
    hub.publish("acme/k", "v1", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "leftover").write_text("x")

    with pytest.raises(HubError, match="not empty"):
        hub.fetch_variant("acme/k", "v1", "torch-cpu", dest)


def test_a_commit_without_builds_has_no_variants(hub, stage):
    result = hub.publish("acme/k", "v1", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")
    repo = hub.repo_path("acme/k")
    empty_tree = (
        subprocess.run(
            ["git", "-C", str(repo), "hash-object", "-t", "tree", "-w", "--stdin"],
            input=b"",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    bare = (
        subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit-tree",
                empty_tree,
                "-p",
                result.commit,
                "-m",
                "empty",
            ],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )

    assert hub.list_variants("acme/k", bare) == []


def test_trusted_orgs_come_from_the_hub_config(tmp_path):
    hub = LocalHub(tmp_path)
    assert hub.trusted_orgs() == frozenset()

    (tmp_path / "kernelhub.toml").write_text('[trust]\norgs = ["acme", "my-team"]\n')
    assert hub.trusted_orgs() == frozenset({"acme", "my-team"})

    (tmp_path / "kernelhub.toml").write_text('[trust]\norgs = "acme"\n')
    with pytest.raises(HubError, match="must be a list"):
        hub.trusted_orgs()

    (tmp_path / "kernelhub.toml").write_text("[trust\n")
    with pytest.raises(HubError, match="cannot read the hub config"):
        hub.trusted_orgs()


def test_publish_validates_its_inputs(hub, stage, tmp_path: Path):
    empty = tmp_path / "empty"
    (empty / "__pycache__").mkdir(parents=True)
    with pytest.raises(HubError, match="holds no files"):
        hub.publish("acme/k", "v1", {"torch-cpu": empty}, tag=None, message="m")
    with pytest.raises(HubError, match="not a directory"):
        hub.publish("acme/k", "v1", {"torch-cpu": tmp_path / "nope"}, tag=None, message="m")
    with pytest.raises(HubError, match="not a valid git branch name"):
        hub.publish("acme/k", "v1..2", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")
    with pytest.raises(HubError, match="no variants"):
        hub.publish("acme/k", "v1", {}, tag=None, message="m")
    assert not hub.repo_path("acme/k").exists()
