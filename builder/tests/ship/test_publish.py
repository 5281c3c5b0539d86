"""Publishing built variants to a real LocalHub (git repositories on disk).

Uses the pure-Python fixture kernel ``relu_py``: its build needs no compiler, so every
test can build its own copy and change it freely.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernelhub.errors import IntegrityError, KernelHubError, MetadataError, RepoNotFoundError
from kernelhub.formats.metadata import verify_variant
from kernelhub_builder.compile.build import build_kernel
from kernelhub_builder.manifest import KernelManifest, Project, load_kernel, load_project
from kernelhub_builder.plan.matrix import plan_variants
from kernelhub_builder.ship import LocalPublisher
from kernelhub_builder.ship.publish import (
    collect_variants,
    describe_result,
    publish_kernel,
    repo_id_for,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "project"


@dataclass
class Setup:
    project: Project
    kernel: KernelManifest
    out: Path
    hub: LocalPublisher

    def reload(self) -> KernelManifest:
        self.kernel = load_kernel(self.kernel.root, self.project)
        return self.kernel

    def build(self) -> None:
        build_kernel(self.project, self.kernel, plan_variants(self.project, self.kernel),
                     self.out)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    shutil.copytree(FIXTURE, tmp_path / "project")
    project = load_project(tmp_path / "project")
    kernel = load_kernel(project.kernel_dir("relu_py"), project)
    result = Setup(project, kernel, tmp_path / "out", LocalPublisher(tmp_path / "hub"))
    result.build()
    return result


def _edit_build_toml(kernel: KernelManifest, old: str, new: str) -> None:
    path = kernel.root / "build.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_publish_commits_variants_to_the_major_branch_and_tags_the_release(
    setup: Setup, tmp_path: Path
) -> None:
    result = publish_kernel(setup.project, setup.kernel, setup.out, setup.hub)
    repo = "kernelhub-tests/relu_py"
    assert (result.repo_id, result.branch, result.tag) == (repo, "v1", "v1.0.0")
    assert result.added == ["torch-cpu"] and result.created_repo and result.changed
    refs = setup.hub.list_refs(repo)
    assert refs.branches["v1"] == result.commit
    assert refs.tags["v1.0.0"] == result.commit
    assert setup.hub.list_variants(repo, result.commit) == ["torch-cpu"]
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    setup.hub.fetch_variant(repo, result.commit, "torch-cpu", fetched)
    built = verify_variant(setup.out / "relu_py" / "torch-cpu")
    assert verify_variant(fetched).id == built.id
    text = describe_result(result)
    assert f"published {repo}@v1 → commit {result.commit[:12]}" in text
    assert "added     torch-cpu" in text and "tag       v1.0.0" in text


def test_publishing_the_same_build_again_changes_nothing(setup: Setup) -> None:
    first = publish_kernel(setup.project, setup.kernel, setup.out, setup.hub)
    again = publish_kernel(setup.project, setup.kernel, setup.out, setup.hub)
    assert not again.changed
    assert again.unchanged == ["torch-cpu"] and again.commit == first.commit
    assert "no change" in describe_result(again)


def test_dry_run_reports_and_publishes_nothing(setup: Setup) -> None:
    result = publish_kernel(setup.project, setup.kernel, setup.out, setup.hub, dry_run=True)
    assert result.dry_run and result.added == ["torch-cpu"]
    assert "dry run" in describe_result(result)
    with pytest.raises(RepoNotFoundError):
        setup.hub.list_refs("kernelhub-tests/relu_py")


def test_repo_id_comes_from_build_toml_when_set(setup: Setup) -> None:
    _edit_build_toml(setup.kernel, 'license = "Apache-2.0"',
                     'license = "Apache-2.0"\nhub = { repo-id = "my-team/relu" }')
    setup.reload()
    setup.build()
    assert repo_id_for(setup.project, setup.kernel) == "my-team/relu"
    result = publish_kernel(setup.project, setup.kernel, setup.out, setup.hub)
    assert result.repo_id == "my-team/relu"
    assert setup.hub.list_refs("my-team/relu").tags == {"v1.0.0": result.commit}


def test_a_build_of_another_release_is_refused(setup: Setup) -> None:
    _edit_build_toml(setup.kernel, "version = 1", 'version = 1\nrelease = "1.1.0"')
    setup.reload()
    with pytest.raises(MetadataError, match=r"release 1\.0\.0.*release 1\.1\.0.*rebuild"):
        publish_kernel(setup.project, setup.kernel, setup.out, setup.hub)
    with pytest.raises(RepoNotFoundError):  # refused before anything reached the hub
        setup.hub.list_refs("kernelhub-tests/relu_py")


def test_a_changed_file_in_a_build_is_refused(setup: Setup) -> None:
    init = setup.out / "relu_py" / "torch-cpu" / "__init__.py"
    init.write_text(init.read_text() + "\nprint('tampered')\n")
    with pytest.raises(IntegrityError, match=r"__init__\.py"):
        collect_variants(setup.project, setup.kernel, setup.out)


def test_nothing_built_says_what_to_run(setup: Setup, tmp_path: Path) -> None:
    with pytest.raises(KernelHubError, match="run builder build relu_py"):
        publish_kernel(setup.project, setup.kernel, tmp_path / "empty", setup.hub)


def test_an_unreachable_hub_is_one_hub_error(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from kernelhub.errors import HubError
    from kernelhub_builder.ship import open_publisher

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed once the block ends
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    with pytest.raises(HubError) as err:
        publish_kernel(setup.project, setup.kernel, setup.out, open_publisher(endpoint))
    assert endpoint in str(err.value) and "\n" not in str(err.value)
