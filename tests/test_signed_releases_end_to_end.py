"""Signed releases as a team meets them: a maintainer publishes with ``builder publish
--sign`` and an OpenSSH key; stock ``ssh-keygen -Y verify`` accepts the release; users
whose policy allows that key load it from the LocalHub directly and through olah (a real
Hub-API server); a user who does not trust the key, an unsigned release under a policy,
and metadata rewritten on the hub are all refused before anything runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kernelhub
import pytest
from e2e import Workspace, builder, make_project, run
from kernelhub.errors import SignatureError
from kernelhub.formats.release_manifest import NAMESPACE, RELEASE_FILE, SIGNATURE_FILE
from kernelhub.formats.variants import parse_variant
from kernelhub.hub.git import GitRepo
from kernelhub.load import pipeline
from kernelhub.signing import policy as release_policy
from kernelhub_builder.manifest import VariantNames
from kernelhub_builder.ship import LocalPublisher
from kernelhub_builder.ship.names import published_names
from kh_doubles import rewrite_on_branch
from reference_loader import olah_cli, olah_server

SSH_KEYGEN = shutil.which("ssh-keygen")
pytestmark = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen (openssh-client) missing")
REPO_ID = "acme/scale_stable"


@dataclass(frozen=True)
class Signed:
    ws: Workspace
    key: Path
    stranger: Path
    endpoint: str | None


def keygen(path: Path) -> Path:
    assert SSH_KEYGEN is not None
    run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)])
    return path


def fingerprint(key: Path) -> str:
    assert SSH_KEYGEN is not None
    return run([SSH_KEYGEN, "-l", "-f", f"{key}.pub"]).stdout.split()[1]


def git_show(ws: Workspace, repo_id: str, rev: str, path: str) -> bytes:
    repo = ws.hub / "models" / repo_id
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"],
                          capture_output=True, check=True).stdout


@pytest.fixture(scope="module")
def signed(workspace: Workspace) -> Iterator[Signed]:
    """acme/scale_stable built once and published signed; beside it, the same build
    unsigned (acme/unsigned, plain/scale) and with forged metadata (acme/forged)."""
    ws = Workspace(root=workspace.root / "signed", out=workspace.root / "signed/build",
                   hub=workspace.root / "signed/hub")
    project = make_project(ws.root / "project", "acme")
    key, stranger = keygen(ws.root / "release_key"), keygen(ws.root / "stranger_key")
    builder(ws, "build", project=project)
    published = builder(ws, "publish", "--hub", str(ws.hub), "--sign", str(key),
                        project=project)
    assert f"signed    by {fingerprint(key)}" in published.stdout, published.stdout

    variants = {d.name: d for d in (ws.out / "scale_stable").iterdir() if d.is_dir()}
    hub = LocalPublisher(ws.hub)
    for repo_id in ("acme/unsigned", "plain/scale"):
        hub.publish(repo_id, "v2", variants, tag="v2.0.0", message="unsigned")
    # A hub attacker copies the signed release and edits one variant's metadata.json.
    hub.publish("acme/forged", "v2", variants, tag="v2.0.0", message="signed",
                sign=lambda data: _sign_with(key, data))
    forged = GitRepo(ws.hub / "models/acme/forged")
    name = sorted(variants)[0]
    meta_path = f"build/{name}/metadata.json"
    metadata = json.loads(git_show(ws, "acme/forged", "v2", meta_path))
    metadata["python-depends"] = ["attacker-package"]
    rewrite_on_branch(forged, "v2", meta_path, json.dumps(metadata).encode())

    if olah_cli() is None:
        yield Signed(ws, key, stranger, None)
        return
    with olah_server(ws.hub, ws.root / "olah") as endpoint:
        yield Signed(ws, key, stranger, endpoint)


def _sign_with(key: Path, data: bytes) -> str:
    from kernelhub.signing.sshsig import load_signing_key

    return load_signing_key(key).sign(data, NAMESPACE)


@pytest.fixture
def policy(signed: Signed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set this process's policy: ``policy(*keys)`` allows those keys for org acme."""
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme,plain")
    for var in ("KERNELHUB_REQUIRE_SIGNED", "KERNELHUB_ALLOW_UNSIGNED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pipeline, "_memo", {})
    monkeypatch.setattr(release_policy, "_verified", {})

    def allow(*keys: Path) -> None:
        signers = tmp_path / "allowed_signers"
        signers.write_text("".join(f"acme {Path(f'{k}.pub').read_text()}" for k in keys))
        monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(signers))

    return allow


def hubs(signed: Signed) -> list[Path | str]:
    return [signed.ws.hub] + ([signed.endpoint] if signed.endpoint else [])


def test_ssh_keygen_verifies_the_published_release(signed: Signed, tmp_path: Path) -> None:
    assert SSH_KEYGEN is not None
    manifest = git_show(signed.ws, REPO_ID, "v2.0.0", RELEASE_FILE)
    (tmp_path / "sig").write_bytes(git_show(signed.ws, REPO_ID, "v2.0.0", SIGNATURE_FILE))
    (tmp_path / "allowed").write_text(f"acme {Path(f'{signed.key}.pub').read_text()}")
    verified = subprocess.run(
        [SSH_KEYGEN, "-Y", "verify", "-f", str(tmp_path / "allowed"), "-I", "acme",
         "-n", NAMESPACE, "-s", str(tmp_path / "sig")],
        input=manifest, capture_output=True, check=False)
    assert verified.returncode == 0, verified.stderr
    body = json.loads(manifest)
    assert body["repo"] == REPO_ID and body["release"] == "2.0.0"
    assert sorted(body["variants"]) == sorted(  # each build under both names
        name for d in (signed.ws.out / "scale_stable").iterdir() if d.is_dir()
        for name in published_names(parse_variant(d.name), VariantNames.BOTH))


def test_allowed_key_loads_from_the_local_hub_and_through_olah(signed: Signed, policy) -> None:
    import torch

    policy(signed.key)
    for hub in hubs(signed):
        module = kernelhub.get_kernel(REPO_ID, version=2, hub=hub)
        assert torch.equal(module.scale(torch.arange(3.0), 2.0), torch.arange(3.0) * 2)


def test_key_not_allowed_is_refused_naming_the_signer(signed: Signed, policy) -> None:
    policy(signed.stranger)
    for hub in hubs(signed):
        with pytest.raises(SignatureError) as e:
            kernelhub.get_kernel(REPO_ID, version=2, hub=hub)
        assert re.search(rf"signed by key {re.escape(fingerprint(signed.key))}.*"
                         rf"allowed: {re.escape(fingerprint(signed.stranger))}", str(e.value))


def test_unsigned_release_under_a_policy_and_where_it_allows(signed: Signed, policy,
                                                               monkeypatch) -> None:
    policy(signed.key)
    for hub in hubs(signed):
        with pytest.raises(SignatureError, match="unsigned"):
            kernelhub.get_kernel("acme/unsigned", version=2, hub=hub)
        # An org no policy names loads as it always did (an HF-style unsigned repo).
        assert kernelhub.get_kernel("plain/scale", version=2, hub=hub).scale is not None
    monkeypatch.setenv("KERNELHUB_ALLOW_UNSIGNED", "acme")
    for hub in hubs(signed):
        assert kernelhub.get_kernel("acme/unsigned", version=2, hub=hub).scale is not None


def test_metadata_rewritten_on_the_hub_is_refused(signed: Signed, policy) -> None:
    policy(signed.key)
    for hub in hubs(signed):
        with pytest.raises(SignatureError, match="not the one the release signature covers"):
            kernelhub.get_kernel("acme/forged", version=2, hub=hub)
