"""``builder publish --hub http://…`` against a Hub-API server on loopback, for real.

The server is ``kernelhub serve`` (tests/hub_api_served.py); huggingface_hub does all the
talking. The kernel published is triton-activation
(pure Python, so building it costs no compiler), copied into a throwaway project whose
release the tests can bump. Loads of a published compiled kernel through olah, with both
loaders, are in test_hub_api_publish_loads.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import BIN, kernel_project, run
from hub_api_served import READ_TOKEN, WRITE_TOKEN, ServedHub, hub_api_server
from kernelhub.hub.git import GitRepo
from kernelhub.hub.local import LocalHub
from kh_doubles import new_signing_key

KERNEL = "triton-activation"
REPO_ID = "kernels-community/triton-activation"
VARIANTS = ["torch-cuda", "torch-xpu"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project holding only triton-activation, built for both its variants."""
    root = kernel_project(tmp_path / "project", KERNEL)
    build(root)
    return root


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServedHub]:
    with hub_api_server(tmp_path / "server-root") as running:
        yield running


def env(tmp_path: Path, token: str | None = WRITE_TOKEN, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("HF_", "KERNELHUB_HUB", "KERNELHUB_ALLOW"))}
    base.update({"HF_HOME": str(tmp_path / "hf-home"), "NO_PROXY": "127.0.0.1,localhost",
                 "no_proxy": "127.0.0.1,localhost", "KERNELHUB_HUB_TIMEOUT": "20",
                 "HF_HUB_DISABLE_PROGRESS_BARS": "1", **extra})
    if token is not None:
        base["HF_TOKEN"] = token
    return base


def builder(project: Path, *args: str, environ: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "builder"), "--project", str(project), *args],
               env=environ, check=check, cwd=project)


def build(project: Path, *variants: str) -> None:
    selection = [a for v in variants for a in ("--variant", v)]
    builder(project, "build", KERNEL, "--no-import-check", *selection)


def bump(project: Path, release: str, keep: list[str]) -> None:
    """Set the kernel's release and rebuild only ``keep``; the other builds are removed."""
    toml = project / "kernels.toml"  # [releases] holds each kernel's semver release
    text, count = re.subn(rf'(?m)^{KERNEL} = ".*"$', f'{KERNEL} = "{release}"',
                          toml.read_text())
    assert count == 1, "kernels.toml has no [releases] entry for the kernel"
    toml.write_text(text)
    shutil.rmtree(project / "build" / KERNEL)
    build(project, *keep)


def git(server: ServedHub) -> GitRepo:
    return server.git(REPO_ID)


def tree(repo: GitRepo, rev: str) -> list[str]:
    return sorted(e.path for e in repo.ls_tree(rev, recursive=True))


def refs(repo: GitRepo) -> dict[str, str]:
    return {name: value.commit for name, value in repo.refs("refs/").items()}


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_publish_creates_the_kernel_repo_branch_tag_and_readme_and_is_idempotent(
    project: Path, server: ServedHub, tmp_path: Path
) -> None:
    proc = builder(project, "publish", "--hub", server.url, environ=env(tmp_path))
    assert "(new repository)" in proc.stdout and "note:" not in proc.stdout
    repo = git(server)
    found = refs(repo)
    assert set(found) == {"refs/heads/main", "refs/heads/v1", "refs/tags/v1.0.0"}
    assert found["refs/tags/v1.0.0"] == found["refs/heads/v1"]
    published = [p for p in tree(repo, "v1") if p.startswith("build/")]
    local = sorted(f"build/{p.relative_to(project / 'build' / KERNEL)}"
                   for p in (project / "build" / KERNEL).rglob("*") if p.is_file())
    assert published == local
    for path in published:  # byte for byte what was built
        (entry,) = repo.ls_tree("v1", path)
        built = (project / "build" / KERNEL / path.removeprefix("build/")).read_bytes()
        assert next(repo.read_blobs([entry.oid])) == built
    readme = next(repo.read_blobs([repo.ls_tree("main", "README.md")[0].oid])).decode()
    assert f'get_kernel("{REPO_ID}", version=1)' in readme
    # One commit on v1 on top of the repository's initial commit.
    assert repo.out("rev-list", "--count", "v1") == "2"
    assert [ln.strip() for ln in proc.stdout.splitlines() if "operations" in ln] == [
        "operations:"]

    again = builder(project, "publish", "--hub", server.url, environ=env(tmp_path))
    assert "no change" in again.stdout
    assert refs(repo) == found


def test_a_signed_publish_signs_every_variant_in_the_commit_that_adds_them(
    project: Path, server: ServedHub, tmp_path: Path
) -> None:
    key = tmp_path / "release_key"
    fingerprint = new_signing_key(key).public.fingerprint
    proc = builder(project, "publish", "--hub", server.url, "--sign", str(key),
                   environ=env(tmp_path))

    assert f"signed    by {fingerprint}: {', '.join(VARIANTS)}" in proc.stdout, proc.stdout
    repo = git(server)
    assert repo.out("rev-list", "--count", "v1.0.0") == "2"  # variants + signature: one commit
    manifest = json.loads(next(repo.read_blobs([repo.ls_tree("v1.0.0", "release.json")[0].oid])))
    assert manifest["repo"] == REPO_ID and manifest["release"] == "1.0.0"
    assert sorted(manifest["variants"]) == VARIANTS


def test_a_server_without_the_kernel_type_gets_a_model_repo_only_when_allowed(
    project: Path, tmp_path: Path
) -> None:
    """The ecosystem's loaders read kernel repositories only (test_hub_api_publish_loads.py
    shows them failing on the model repository): refused by default, and said when allowed."""
    with hub_api_server(tmp_path / "root", kernel_type=False) as server:
        refused = builder(project, "publish", "--hub", server.url, environ=env(tmp_path),
                          check=False)
        line = one_line_error(refused)
        assert "has no kernel repository type" in line and "--allow-model-repo" in line
        assert not server.repo_path(REPO_ID).exists()
        dry = builder(project, "publish", "--hub", server.url, "--dry-run",
                      environ=env(tmp_path))
        assert "refused where the server has no kernel type" in dry.stdout
        proc = builder(project, "publish", "--hub", server.url, "--allow-model-repo",
                       environ=env(tmp_path))
        again = builder(project, "publish", "--hub", server.url, environ=env(tmp_path),
                        check=False)
        assert "is a model repository" in one_line_error(again)
    assert "has no kernel repository type" in proc.stdout
    assert "created kernels-community/triton-activation as a model repository" in proc.stdout
    assert "will not find it" in proc.stdout
    assert sorted(refs(git(server))) == ["refs/heads/main", "refs/heads/v1", "refs/tags/v1.0.0"]


def test_dry_run_reads_the_server_and_prints_the_real_operations(
    project: Path, server: ServedHub, tmp_path: Path
) -> None:
    fresh = builder(project, "publish", "--hub", server.url, "--dry-run", environ=env(tmp_path))
    assert "would publish" in fresh.stdout and "(new repository)" in fresh.stdout
    assert "create kernel repository kernels-community/triton-activation" in fresh.stdout
    assert not server.repo_path(REPO_ID).exists()

    builder(project, "publish", "--hub", server.url, environ=env(tmp_path))
    before = refs(git(server))
    bump(project, "1.0.1", keep=VARIANTS)
    seen = len(server.requests)
    proc = builder(project, "publish", "--hub", server.url, "--dry-run", environ=env(tmp_path))
    out = proc.stdout
    assert "new repository" not in out and "create kernel repository" not in out
    assert "replaced  torch-cuda" in out and "replaced  torch-xpu" in out
    assert "delete build/torch-cuda/" in out and "add    build/torch-xpu/ (" in out
    assert "create tag v1.0.1 at the new commit" in out
    assert refs(git(server)) == before
    posts = [r for r in server.requests[seen:] if r.startswith(("POST", "PUT", "DELETE"))]
    assert all("/paths-info/" in r for r in posts), posts  # reads only


def test_unreachable_server_is_one_line_and_nonzero(project: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = builder(project, "publish", "--hub", f"http://127.0.0.1:{port}",
                   environ=env(tmp_path), check=False)
    assert "cannot reach the hub at http://127.0.0.1:" in one_line_error(proc)


@pytest.mark.parametrize(("token", "status", "words", "source"), [
    (None, 401, "rejected the token", "token from nowhere"),
    (READ_TOKEN, 403, "gave the token no write access",
     "token from the HF_TOKEN environment variable"),
])
def test_auth_errors_say_how_to_get_write_access_and_which_token_was_used(
    project: Path, server: ServedHub, tmp_path: Path, token: str | None, status: int,
    words: str, source: str
) -> None:
    proc = builder(project, "publish", "--hub", server.url, environ=env(tmp_path, token=token),
                   check=False)
    line = one_line_error(proc)
    assert words in line and f"({status}:" in line and source in line
    assert "set HF_TOKEN" in line and "Nothing was published" in line
    assert not server.repo_path(REPO_ID).exists()


def test_token_from_the_token_file_is_named(
    project: Path, server: ServedHub, tmp_path: Path
) -> None:
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text("hf_wrong_file_token")
    proc = builder(project, "publish", "--hub", server.url, environ=env(tmp_path, token=None),
                   check=False)
    assert f"token from the token file {tmp_path / 'hf-home' / 'token'}" in one_line_error(proc)


def test_404_read_only_409_and_timeouts_are_one_line_and_publish_nothing(
    project: Path, tmp_path: Path
) -> None:
    with hub_api_server(tmp_path / "a") as server:
        proc = builder(project, "publish", "--hub", f"{server.url}/no/such/prefix",
                       environ=env(tmp_path), check=False)
        assert "answered 404" in one_line_error(proc)

    with hub_api_server(tmp_path / "b", writable=False) as server:
        proc = builder(project, "publish", "--hub", server.url, environ=env(tmp_path),
                       check=False)
        # serve without a tokens file is read-only: it knows no token, so none may write
        assert "rejected the token" in (line := one_line_error(proc)) and "(401:" in line
        assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("HEAD"))

    with hub_api_server(tmp_path / "c") as server:
        server.fail = {"POST /commit/v1": 409}
        proc = builder(project, "publish", "--hub", server.url, environ=env(tmp_path),
                       check=False)
        assert "reported a conflict" in one_line_error(proc)
        repo = git(server)
        assert set(refs(repo)) == {"refs/heads/main", "refs/heads/v1"}  # no tag, no variants
        assert not [p for p in tree(repo, "v1") if p.startswith("build/")]

    with hub_api_server(tmp_path / "d", delay=3) as server:
        proc = builder(project, "publish", "--hub", server.url,
                       environ=env(tmp_path, KERNELHUB_HUB_TIMEOUT="1"), check=False)
        assert "did not answer within 1 s" in one_line_error(proc)
        assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("HEAD"))


@pytest.mark.parametrize("hub_kind", ["hub-api", "local"])
def test_a_new_release_never_silently_carries_an_older_release(
    project: Path, tmp_path: Path, hub_kind: str
) -> None:
    """1.0.1 with only torch-cuda rebuilt: refused by default; --carry-stale keeps 1.0.0's
    torch-xpu under v1.0.1 and says so; --drop-stale removes it from the branch."""
    with hub_api_server(tmp_path / "root") as server:
        hub = server.url if hub_kind == "hub-api" else str(tmp_path / "local-hub")
        e = env(tmp_path)

        def variants_at(rev: str) -> list[str]:
            if hub_kind == "local":
                local = LocalHub(tmp_path / "local-hub")
                return local.list_variants(REPO_ID, _rev(local, rev))
            repo = git(server)
            return sorted({p.split("/")[1] for p in tree(repo, rev) if p.startswith("build/")})

        builder(project, "publish", "--hub", hub, environ=e)
        bump(project, "1.0.1", keep=["torch-cuda"])
        refused = builder(project, "publish", "--hub", hub, environ=e, check=False)
        line = one_line_error(refused)
        assert "torch-xpu (1.0.0)" in line and "--drop-stale" in line and "--carry-stale" in line
        assert variants_at("v1") == VARIANTS and "v1.0.1" not in _tags(hub_kind, server, tmp_path)

        carried = builder(project, "publish", "--hub", hub, "--carry-stale", environ=e)
        assert "carried under v1.0.1" in carried.stdout and "torch-xpu (1.0.0)" in carried.stdout
        assert variants_at("v1.0.1") == VARIANTS

        bump(project, "1.0.2", keep=["torch-cuda"])
        dropped = builder(project, "publish", "--hub", hub, "--drop-stale", environ=e)
        assert "removed   torch-xpu" in dropped.stdout
        assert variants_at("v1.0.2") == ["torch-cuda"] and variants_at("v1") == ["torch-cuda"]
        assert variants_at("v1.0.0") == VARIANTS  # older releases stay as they were


def _rev(hub: LocalHub, rev: str) -> str:
    found = hub.list_refs(REPO_ID)
    return found.branches.get(rev) or found.tags[rev]


def _tags(hub_kind: str, server: ServedHub, tmp_path: Path) -> list[str]:
    if hub_kind == "local":
        return sorted(LocalHub(tmp_path / "local-hub").list_refs(REPO_ID).tags)
    return sorted(r.removeprefix("refs/tags/") for r in refs(git(server)) if "tags" in r)


def test_publishing_to_kernelhub_serve_without_a_token_is_one_typed_line(
    project: Path, tmp_path: Path
) -> None:
    """The probe of issue 33: the served hub's 401 text holds ``token=?``, so the error
    was redacted, and the redactor's copy of it crashed (a raw TypeError)."""
    from kernelhub_serve.tokens import TokenTable
    from serve.served import serving, write_tokens_file

    hub = tmp_path / "served-hub"
    hub.mkdir()
    with serving(hub, TokenTable.load(write_tokens_file(tmp_path / "tokens.toml"))) as url:
        proc = builder(project, "publish", "--hub", url, environ=env(tmp_path, token=None),
                       check=False)
    line = one_line_error(proc)
    assert "rejected the token" in line and "(401:" in line and "Nothing was published" in line
    assert "TypeError" not in proc.stderr
    assert not any(hub.rglob("*.pack")) and not (hub / "kernels" / REPO_ID).exists()
