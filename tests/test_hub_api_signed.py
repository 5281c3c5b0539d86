"""Signed releases published to a Hub-API server and loaded back under a signing policy.

The publisher is HfPublisher (what ``builder publish --hub http://… --sign KEY`` runs), the
server ``kernelhub serve`` (tests/hub_api_served.py), the loader ours, reading the kernel repository type.
Keys are real OpenSSH Ed25519 keys; the forgery is made as an attacker with write access
to the server's storage would make it, with git plumbing.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kernelhub
import pytest
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from kernelhub.errors import HubError, SignatureError
from kernelhub.formats.release_manifest import NAMESPACE, RELEASE_FILE, SIGNATURE_FILE
from kernelhub.hub.git import GitRepo
from kernelhub.load import pipeline
from kernelhub.signing.sshsig import SigningKey
from kernelhub_builder.ship.hf import HfPublisher
from kh_doubles import make_variant, new_signing_key, rewrite_on_branch

REPO_ID = "acme/signed"
pytestmark = pytest.mark.usefixtures("hub_api_client")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServedHub]:
    with hub_api_server(tmp_path / "server") as running:
        yield running


@pytest.fixture
def key(tmp_path: Path) -> SigningKey:
    return new_signing_key(tmp_path / "release_key")


def allow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *keys: SigningKey) -> None:
    path = tmp_path / "allowed_signers"
    path.write_text("".join(f"acme {k.public.openssh()}\n" for k in keys))
    monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(path))
    monkeypatch.setattr(pipeline, "_memo", {})


def stage(tmp_path: Path, variant: str, value: int) -> Path:
    dest = tmp_path / "staged" / f"{variant}-{value}"
    make_variant(dest, name="signed", init=f"VALUE = {value}\n",
                 backend=variant.removeprefix("torch-"))
    return dest


def publish(server: ServedHub, variants: dict[str, Path], release: str,
            key: SigningKey | None, dry_run: bool = False):
    sign = (lambda data: key.sign(data, NAMESPACE)) if key is not None else None
    return HfPublisher(server.url, token=WRITE_TOKEN).publish(
        REPO_ID, "v1", variants, tag=f"v{release}", message=release, sign=sign,
        dry_run=dry_run)


def git(server: ServedHub) -> GitRepo:
    return server.git(REPO_ID)


def show(repo: GitRepo, rev: str, path: str) -> bytes:
    (entry,) = repo.ls_tree(rev, path)
    return next(repo.read_blobs([entry.oid]))


def test_signature_lands_with_the_variants_and_loads_only_under_the_allowed_key(
    server: ServedHub, key: SigningKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged = stage(tmp_path, "torch-universal", 7)
    result = publish(server, {"torch-universal": staged}, "1.0.0", key)

    assert result.signed == ["torch-universal"]
    repo = git(server)
    head = repo.resolve_commit("v1")
    assert head == result.commit == repo.resolve_commit("v1.0.0")
    # One commit on top of main carries the variant and the release files together.
    assert repo.out("rev-list", "--count", f"main..{head}").strip() == "1"
    files = {e.path for e in repo.ls_tree(head, recursive=True)}
    assert {RELEASE_FILE, SIGNATURE_FILE, "build/torch-universal/metadata.json"} <= files
    manifest = json.loads(show(repo, head, RELEASE_FILE))
    assert manifest["repo"] == REPO_ID and manifest["release"] == "1.0.0"
    assert manifest["variants"] == {"torch-universal": {"metadata-sha256": hashlib.sha256(
        (staged / "metadata.json").read_bytes()).hexdigest()}}
    if (ssh_keygen := shutil.which("ssh-keygen")) is not None:  # stock OpenSSH agrees
        (tmp_path / "sig").write_bytes(show(repo, head, SIGNATURE_FILE))
        (tmp_path / "signers").write_text(f"acme {key.public.openssh()}\n")
        verified = subprocess.run(
            [ssh_keygen, "-Y", "verify", "-f", str(tmp_path / "signers"), "-I", "acme",
             "-n", NAMESPACE, "-s", str(tmp_path / "sig")],
            input=show(repo, head, RELEASE_FILE), capture_output=True, check=False)
        assert verified.returncode == 0, verified.stderr

    allow(tmp_path, monkeypatch, key)
    assert kernelhub.get_kernel(REPO_ID, version=1, hub=server.url).VALUE == 7

    stranger = new_signing_key(tmp_path / "stranger_key")
    allow(tmp_path, monkeypatch, stranger)
    with pytest.raises(SignatureError, match=re.escape(f"signed by key {key.public.fingerprint}")):
        kernelhub.get_kernel(REPO_ID, version=1, hub=server.url)


def test_the_signature_covers_variants_earlier_publishes_left_on_the_branch(
    server: ServedHub, key: SigningKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu = stage(tmp_path, "torch-cpu", 1)
    publish(server, {"torch-cpu": cpu}, "1.0.0", None)
    universal = stage(tmp_path, "torch-universal", 2)

    dry = publish(server, {"torch-universal": universal}, "1.1.0", key, dry_run=True)
    assert dry.signed == ["torch-cpu", "torch-universal"]
    assert f"  add    {RELEASE_FILE}" in dry.operations
    assert RELEASE_FILE not in {e.path for e in git(server).ls_tree("v1")}  # wrote nothing

    result = publish(server, {"torch-universal": universal}, "1.1.0", key)

    assert result.signed == ["torch-cpu", "torch-universal"]
    manifest = json.loads(show(git(server), "v1.1.0", RELEASE_FILE))
    assert manifest["variants"] == {
        name: {"metadata-sha256": hashlib.sha256((path / "metadata.json").read_bytes())
               .hexdigest()}
        for name, path in (("torch-cpu", cpu), ("torch-universal", universal))}
    allow(tmp_path, monkeypatch, key)
    # This CPU process loads the build the earlier, unsigned publish left: signed now too.
    assert kernelhub.get_kernel(REPO_ID, version=1, hub=server.url).VALUE == 1


def test_metadata_rewritten_on_the_server_is_refused(
    server: ServedHub, key: SigningKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(server, {"torch-universal": stage(tmp_path, "torch-universal", 7)}, "1.0.0", key)
    repo = git(server)
    path = "build/torch-universal/metadata.json"
    metadata = json.loads(show(repo, "v1", path))
    metadata["python-depends"] = ["attacker-package"]
    rewrite_on_branch(repo, "v1", path, json.dumps(metadata).encode())

    allow(tmp_path, monkeypatch, key)
    with pytest.raises(SignatureError, match="not the one the release signature covers"):
        kernelhub.get_kernel(REPO_ID, version=1, hub=server.url)


def test_an_unsigned_publish_removes_the_release_files_it_would_leave_wrong(
    server: ServedHub, key: SigningKey, tmp_path: Path
) -> None:
    publish(server, {"torch-universal": stage(tmp_path, "torch-universal", 1)}, "1.0.0", key)
    result = publish(server, {"torch-cpu": stage(tmp_path, "torch-cpu", 2)}, "1.1.0", None)

    assert result.signed == []
    assert f"  delete {RELEASE_FILE} (this publish is unsigned)" in result.operations
    paths = {e.path for e in git(server).ls_tree("v1")}
    assert RELEASE_FILE not in paths and SIGNATURE_FILE not in paths
    assert RELEASE_FILE in {e.path for e in git(server).ls_tree("v1.0.0")}  # history kept


def test_a_branch_variant_without_file_digests_cannot_be_signed(
    server: ServedHub, key: SigningKey, tmp_path: Path
) -> None:
    ecosystem = tmp_path / "ecosystem-build"
    ecosystem.mkdir()
    (ecosystem / "__init__.py").write_text("VALUE = 0\n")
    (ecosystem / "metadata.json").write_text('{"python-depends": []}\n')
    publish(server, {"torch-universal": ecosystem}, "1.0.0", None)
    before = git(server).resolve_commit("v1")

    with pytest.raises(HubError, match="torch-universal lists no file digests"):
        publish(server, {"torch-cpu": stage(tmp_path, "torch-cpu", 2)}, "1.1.0", key)
    assert git(server).resolve_commit("v1") == before  # nothing was published


def test_signing_a_release_already_published_unsigned_is_reported_as_a_change(
    server: ServedHub, key: SigningKey, tmp_path: Path
) -> None:
    staged = stage(tmp_path, "torch-universal", 3)
    first = publish(server, {"torch-universal": staged}, "1.0.0", None)
    again = publish(server, {"torch-universal": staged}, "1.0.0", key)

    assert again.unchanged == ["torch-universal"] and again.signed == ["torch-universal"]
    assert again.previous == first.commit != again.commit and again.changed
    assert git(server).resolve_commit("v1.0.0") == again.commit
    assert RELEASE_FILE in {e.path for e in git(server).ls_tree("v1.0.0")}


def test_a_signature_only_dry_run_counts_the_release_files_it_would_commit(
    server: ServedHub, key: SigningKey, tmp_path: Path
) -> None:
    from kernelhub_builder.ship.publish import describe_result

    staged = stage(tmp_path, "torch-universal", 4)
    first = publish(server, {"torch-universal": staged}, "1.0.0", None)
    plan = publish(server, {"torch-universal": staged}, "1.0.0", key, dry_run=True)

    assert plan.unchanged == ["torch-universal"] and plan.changed and plan.commit_needed
    (commit_line,) = [op for op in plan.operations if op.startswith("commit to v1")]
    assert commit_line.startswith("commit to v1 (2 file(s), ") and " 0 bytes" not in commit_line
    assert describe_result(plan).startswith("dry run: would publish")
    assert git(server).resolve_commit("v1") == first.commit
