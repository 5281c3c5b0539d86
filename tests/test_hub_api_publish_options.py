"""``builder publish --branch/--private/--create-pr`` and ``builder build-and-publish``
against a Hub-API server on loopback, through huggingface_hub.

The server is ``kernelhub serve`` (tests/hub_api_served.py): private repositories are
served; pull requests are not (its documented refusal is what ``--create-pr`` meets). The
kernel is triton-activation, pure Python, so a build costs no compiler.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import BIN, kernel_project, run
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError
from kh_doubles import new_signing_key

KERNEL = "triton-activation"
REPO_ID = "kernels-community/triton-activation"
VARIANTS = ["torch-cuda", "torch-xpu"]  # pure Python: both generations spell them alike


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return kernel_project(tmp_path / "project", KERNEL)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServedHub]:
    with hub_api_server(tmp_path / "server-root") as running:
        yield running


def builder(project: Path, tmp_path: Path, *args: str, check: bool = True
            ) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KERNELHUB_HUB", "KERNELHUB_ALLOW"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_TOKEN=WRITE_TOKEN,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               HF_HUB_DISABLE_PROGRESS_BARS="1", KERNELHUB_HUB_TIMEOUT="20")
    done = run([str(BIN / "builder"), "--project", str(project), *args], env=env,
               cwd=project, check=check)
    return done.returncode, done.stdout + done.stderr


def api(server: ServedHub) -> HfApi:
    return HfApi(endpoint=server.url, token=WRITE_TOKEN)


def test_build_and_publish_in_one_step_then_a_pull_request_is_refused_as_serve_does(
        project: Path, server: ServedHub, tmp_path: Path) -> None:
    status, said = builder(project, tmp_path, "build-and-publish", "--hub", server.url,
                           "--no-import-check")
    assert status == 0, said
    assert f"published {REPO_ID}@v1" in said and "tag       v1.0.0" in said
    refs = api(server).list_repo_refs(REPO_ID, repo_type="kernel", include_pull_requests=True)
    head = {b.name: b.target_commit for b in refs.branches}["v1"]
    assert [t.name for t in refs.tags] == ["v1.0.0"] and refs.pull_requests == []

    # A change proposed: kernelhub serve has no pull requests and says so (docs/serve.md);
    # the branch and the tag stay where they were, and no pull request ref appears.
    init = project / "kernels-src" / KERNEL / "torch-ext" / "triton_activation" / "__init__.py"
    init.write_text(init.read_text() + "\n# proposed change\n")
    builder(project, tmp_path, "build", "--no-import-check")
    status, said = builder(project, tmp_path, "publish", "--hub", server.url, "--create-pr",
                           check=False)
    assert status == 1, said
    assert "this hub has no pull requests" in said and "Traceback" not in said, said
    refs = api(server).list_repo_refs(REPO_ID, repo_type="kernel", include_pull_requests=True)
    assert {b.name: b.target_commit for b in refs.branches}["v1"] == head
    assert [t.name for t in refs.tags] == ["v1.0.0"] and refs.pull_requests == []
    assert not server.git(REPO_ID).refs("refs/pr/")


def test_a_pull_request_needs_a_branch_to_target(project: Path, server: ServedHub,
                                                 tmp_path: Path) -> None:
    builder(project, tmp_path, "build", "--no-import-check")
    status, said = builder(project, tmp_path, "publish", "--hub", server.url, "--create-pr",
                           check=False)
    assert status == 1
    assert "does not exist" in said and "a pull request needs a repository" in said
    assert not server.repo_path(REPO_ID).exists()  # nothing was created


def test_private_creates_a_private_repository_and_branch_is_a_preview(
        project: Path, server: ServedHub, tmp_path: Path) -> None:
    builder(project, tmp_path, "build", "--no-import-check")
    status, said = builder(project, tmp_path, "publish", "--hub", server.url, "--private",
                           "--branch", "preview")
    assert status == 0, said
    assert "no release tag: v1.0.0 marks a commit of v1, and this publish went to preview" in said
    info = api(server).repo_info(REPO_ID, repo_type="kernel")
    assert info.private is True
    with pytest.raises(RepositoryNotFoundError):  # not even its existence, without a token
        HfApi(endpoint=server.url, token=False).repo_info(REPO_ID, repo_type="kernel")
    refs = api(server).list_repo_refs(REPO_ID, repo_type="kernel")
    assert "preview" in [b.name for b in refs.branches] and refs.tags == []
    files = api(server).list_repo_files(REPO_ID, repo_type="kernel", revision="preview")
    assert {f.split("/")[1] for f in files if f.startswith("build/")} == set(VARIANTS)


def test_local_hub_says_what_it_cannot_do(project: Path, tmp_path: Path) -> None:
    builder(project, tmp_path, "build", "--no-import-check")
    hub = tmp_path / "local-hub"
    status, said = builder(project, tmp_path, "publish", "--hub", str(hub), "--create-pr",
                           check=False)
    assert status == 1 and "a LocalHub, which has no pull requests" in said
    status, said = builder(project, tmp_path, "publish", "--hub", str(hub), "--private")
    assert status == 0, said
    assert "it has no private repositories" in said and "--private changed nothing" in said
    new_signing_key(tmp_path / "release-key")
    status, said = builder(project, tmp_path, "publish", "--hub", str(hub), "--branch",
                           "preview", "--sign", str(tmp_path / "release-key"), check=False)
    assert status == 1 and "branch preview carries no release" in said
