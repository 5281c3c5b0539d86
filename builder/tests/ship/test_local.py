"""Publishing to a LocalPublisher: one commit per publish, compare-and-swap, release rules."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from kernelhub.errors import PublishConflictError
from kernelhub_builder.ship import LocalPublisher

REPO = "kernels-test/demo"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def published(stage_dir: Path) -> dict[str, bytes]:
    """What a staged dir should look like once fetched: everything but bytecode."""
    return {k: v for k, v in files_of(stage_dir).items() if "__pycache__" not in k}


def fetch(hub: LocalPublisher, rev: str, variant: str, dest: Path) -> dict[str, bytes]:
    hub.fetch_variant(REPO, rev, variant, dest)
    return files_of(dest)


def all_refs(hub: LocalPublisher) -> str:
    return git(hub.repo_path(REPO), "for-each-ref", "--format=%(refname) %(objectname)")


def test_first_publish_creates_repo_branch_tag_and_one_commit(hub, stage, tmp_path):
    cpu, universal = stage("torch-cpu"), stage("torch-universal")

    result = hub.publish(
        REPO,
        "v1",
        {"torch-cpu": cpu, "torch-universal": universal},
        tag="v1.0.0",
        message="demo 1.0.0",
    )

    repo = hub.repo_path(REPO)
    assert result.created_repo and result.changed and not result.dry_run
    assert result.added == ["torch-cpu", "torch-universal"]
    assert result.previous is None
    assert result.commit == git(repo, "rev-parse", "refs/heads/v1")
    assert git(repo, "rev-parse", "refs/tags/v1.0.0") == result.commit
    assert git(repo, "rev-list", "--count", "v1") == "1"
    assert git(repo, "log", "-1", "--format=%s", "v1") == "demo 1.0.0"
    # olah and huggingface_hub clients that look at HEAD find the published branch.
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/v1"
    assert git(repo, "rev-parse", "--is-bare-repository") == "true"
    paths = git(repo, "ls-tree", "-r", "--name-only", "v1").splitlines()
    assert "build/torch-cpu/metadata.json" in paths
    assert not [p for p in paths if "__pycache__" in p or p.endswith(".pyc")]

    got = fetch(hub, "v1.0.0", "torch-cpu", tmp_path / "out")
    assert got == published(cpu)
    assert (tmp_path / "out" / "run.sh").stat().st_mode & 0o111
    assert not (tmp_path / "out" / "__init__.py").stat().st_mode & 0o111
    assert hub.list_variants(REPO, result.commit) == ["torch-cpu", "torch-universal"]
    assert hub.list_refs(REPO).tags == {"v1.0.0": result.commit}


def test_republishing_identical_content_makes_no_commit(hub, stage):
    cpu = stage("torch-cpu")
    first = hub.publish(REPO, "v1", {"torch-cpu": cpu}, tag="v1.0.0", message="first")

    again = hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu")}, tag="v1.0.0", message="x")

    assert again.unchanged == ["torch-cpu"] and not again.changed
    assert again.commit == again.previous == first.commit
    assert not again.created_repo
    assert git(hub.repo_path(REPO), "rev-list", "--count", "v1") == "1"


def test_replacing_one_variant_leaves_the_others_untouched(hub, stage, tmp_path):
    old_cpu, universal = stage("torch-cpu", "a"), stage("torch-universal", "a")
    first = hub.publish(
        REPO,
        "v1",
        {"torch-cpu": old_cpu, "torch-universal": universal},
        tag="v1.0.0",
        message="1.0.0",
    )
    new_cpu = stage("torch-cpu", "b")
    (new_cpu / "layers" / "__init__.py").unlink()  # a file the new build no longer has

    second = hub.publish(REPO, "v1", {"torch-cpu": new_cpu}, tag="v1.1.0", message="1.1.0")

    repo = hub.repo_path(REPO)
    assert second.replaced == ["torch-cpu"] and second.previous == first.commit
    assert git(repo, "rev-parse", f"{second.commit}^") == first.commit
    assert git(repo, "rev-parse", f"{first.commit}:build/torch-universal") == git(
        repo, "rev-parse", f"{second.commit}:build/torch-universal"
    )
    assert fetch(hub, "v1.1.0", "torch-cpu", tmp_path / "new") == published(new_cpu)
    assert fetch(hub, "v1.0.0", "torch-cpu", tmp_path / "old") == published(old_cpu)
    assert fetch(hub, "v1", "torch-universal", tmp_path / "u") == published(universal)


def test_a_release_can_gain_variants_later(hub, stage):
    first = hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu")}, tag="v1.0.0", message="a")

    second = hub.publish(
        REPO, "v1", {"torch-universal": stage("torch-universal")}, tag="v1.0.0", message="b"
    )

    assert second.added == ["torch-universal"] and second.previous == first.commit
    assert hub.list_refs(REPO).tags["v1.0.0"] == second.commit
    assert hub.list_variants(REPO, "v1.0.0") == ["torch-cpu", "torch-universal"]


def test_changing_a_released_variant_is_refused_and_moves_nothing(hub, stage):
    hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "a")}, tag="v1.0.0", message="a")
    before = all_refs(hub)

    with pytest.raises(
        PublishConflictError, match=r"v1\.0\.0 of kernels-test/demo already has variant torch-cpu"
    ):
        hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "b")}, tag="v1.0.0", message="b")

    assert all_refs(hub) == before


def test_release_is_protected_even_against_changes_made_without_a_tag(hub, stage):
    hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "a")}, tag="v1.0.0", message="a")
    hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "b")}, tag=None, message="b")
    before = all_refs(hub)

    # Moving v1.0.0 to the head would silently swap its torch-cpu build.
    with pytest.raises(PublishConflictError, match="torch-cpu"):
        hub.publish(
            REPO, "v1", {"torch-universal": stage("torch-universal")}, tag="v1.0.0", message="c"
        )
    assert all_refs(hub) == before


def test_a_tag_from_another_branch_is_refused(hub, stage):
    hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "a")}, tag="v1.0.0", message="a")

    with pytest.raises(PublishConflictError, match="not on branch v2"):
        hub.publish(REPO, "v2", {"torch-cpu": stage("torch-cpu", "a")}, tag="v1.0.0", message="b")
    assert "v2" not in hub.list_refs(REPO).branches


def test_dry_run_reports_without_moving_refs(hub, stage):
    fresh = hub.publish(
        REPO, "v1", {"torch-cpu": stage("torch-cpu")}, tag="v1.0.0", message="m", dry_run=True
    )
    assert fresh.dry_run and fresh.created_repo and fresh.added == ["torch-cpu"]
    assert not hub.repo_path(REPO).exists()

    real = hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu", "a")}, tag=None, message="m")
    before = all_refs(hub)
    plan = hub.publish(
        REPO,
        "v1",
        {"torch-cpu": stage("torch-cpu", "b"), "torch-universal": stage("torch-universal")},
        tag="v1.1.0",
        message="m",
        dry_run=True,
    )

    assert plan.replaced == ["torch-cpu"] and plan.added == ["torch-universal"]
    assert plan.commit == plan.previous == real.commit
    assert all_refs(hub) == before


def test_concurrent_publishers_of_different_variants_lose_nothing(hub, stage):
    # Both start on a hub without the repo: creating it and the branch is raced too.
    rounds = 6
    staged = {
        variant: [stage(variant, str(i)) for i in range(1, rounds + 1)]
        for variant in ("torch-cpu", "torch-universal")
    }
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def publisher(variant: str) -> None:
        try:
            barrier.wait()
            for path in staged[variant]:
                result = hub.publish(REPO, "v1", {variant: path}, tag=None, message=variant)
                assert result.changed
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=publisher, args=(v,)) for v in staged]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not errors, errors
    repo = hub.repo_path(REPO)
    # Every publish is a commit on the branch: none was overwritten by a racing one.
    assert git(repo, "rev-list", "--count", "v1") == str(2 * rounds)
    for variant, paths in staged.items():
        want = git(repo, "hash-object", str(paths[-1] / "__init__.py"))
        assert git(repo, "rev-parse", f"v1:build/{variant}/__init__.py") == want


def test_annotated_tags_are_read_as_the_commit_they_mark(hub, stage):
    result = hub.publish(REPO, "v1", {"torch-cpu": stage("torch-cpu")}, tag=None, message="m")
    repo = hub.repo_path(REPO)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "tag",
            "-a",
            "v1.0.0",
            "-m",
            "release",
            "v1",
        ],
        check=True,
        capture_output=True,
    )

    assert hub.list_refs(REPO).tags == {"v1.0.0": result.commit}
    # Gaining a variant moves the annotated tag by compare-and-swap on the tag object.
    second = hub.publish(
        REPO, "v1", {"torch-universal": stage("torch-universal")}, tag="v1.0.0", message="m"
    )
    assert hub.list_refs(REPO).tags == {"v1.0.0": second.commit}


def test_staged_dirs_may_be_given_relative_to_the_working_directory(hub, stage, monkeypatch):
    cpu = stage("torch-cpu")
    monkeypatch.chdir(cpu.parent)

    result = hub.publish(REPO, "v1", {"torch-cpu": Path(cpu.name)}, tag=None, message="m")

    want = git(hub.repo_path(REPO), "hash-object", str(cpu / "metadata.json"))
    assert (
        git(hub.repo_path(REPO), "rev-parse", f"{result.commit}:build/torch-cpu/metadata.json")
        == want
    )
