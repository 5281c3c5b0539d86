"""The pure parts of HfPublisher publishing: what one commit would contain, and when a variant
counts as unchanged. (Publishing itself needs a writable Hub; olah is read-only.)"""

from __future__ import annotations

import subprocess

from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.hf_api import RepoFile
from kernelhub_builder.ship.hf import classify, commit_operations, git_blob_id, same_content
from kernelhub_builder.ship.staged import staged_files


def remote_files(variant_dir, *, lfs_for: str | None = None) -> dict[str, RepoFile]:
    """How the Hub would list a variant dir: blob ids, or sha256 for LFS-tracked files."""
    import hashlib

    found = {}
    for f in staged_files("v", variant_dir):
        data = f.source.read_bytes()
        rel = f.path_in_repo.removeprefix("build/v/")
        fields = {"path": f.path_in_repo, "size": len(data), "oid": git_blob_id(data)}
        if rel == lfs_for:
            fields["oid"] = "0" * 40  # the pointer file's blob id, not the content's
            fields["lfs"] = {
                "size": len(data),
                "oid": hashlib.sha256(data).hexdigest(),
                "pointerSize": 130,
            }
        found[rel] = RepoFile(**fields)
    return found


def test_git_blob_id_matches_git(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"\x00\x01kernel\n" * 100)
    expected = subprocess.run(
        ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert git_blob_id(path.read_bytes()) == expected


def test_commit_operations_replace_only_the_given_variant_dirs(stage):
    cpu, universal = stage("torch-cpu"), stage("torch-universal")
    staged = {
        "torch-cpu": staged_files("torch-cpu", cpu),
        "torch-universal": staged_files("torch-universal", universal),
    }

    ops = commit_operations(staged, existing={"torch-cpu", "torch-cuda"})

    deletes = [op for op in ops if isinstance(op, CommitOperationDelete)]
    adds = [op for op in ops if isinstance(op, CommitOperationAdd)]
    assert [(d.path_in_repo, d.is_folder) for d in deletes] == [("build/torch-cpu/", True)]
    assert ops.index(deletes[0]) == 0  # the old dir goes before the new files land
    assert sorted(a.path_in_repo for a in adds) == sorted(
        f"build/{v}/{rel}"
        for v in ("torch-cpu", "torch-universal")
        for rel in ("__init__.py", "layers/__init__.py", "metadata.json", "run.sh")
    )


def test_classify_compares_content_without_downloading(stage):
    same, changed = stage("v", "a"), stage("v", "b")
    before = {"torch-cpu": remote_files(same, lfs_for="metadata.json")}

    staged_same = {
        "torch-cpu": staged_files("torch-cpu", same),
        "torch-cuda": staged_files("torch-cuda", same),
    }
    assert classify(staged_same, before) == (["torch-cuda"], [], ["torch-cpu"])
    staged_changed = {"torch-cpu": staged_files("torch-cpu", changed)}
    assert classify(staged_changed, before) == ([], ["torch-cpu"], [])
    assert not same_content(staged_files("torch-cpu", same), {})
