"""Sigstore signatures of the ecosystem's shape: per-org policy, offline verification with
the real ``sigstore`` library, the cached result, and ``kernelhub verify-signature``.

Bundles come from :mod:`sigstore_test_instance` (a CA, CT log and transparency log of
our own, following the Sigstore formats); the verifier is sigstore's, given that
instance's trust root as a file, exactly as a user configures another instance.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
from kernelhub.api import get_kernel
from kernelhub.cli import main
from kernelhub.errors import KernelHubError, SignatureError
from kernelhub.formats.metadata import read_metadata_bytes
from kernelhub.signing import sigstore as sigstore_signatures
from kernelhub.signing.sigstore import (
    BUNDLE_FILE,
    PRESETS,
    SigstorePolicy,
    SigstoreSigner,
    check_sigstore,
    sigstore_policy_for,
    verify_bundle,
)
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant
from sigstore_test_instance import GITHUB, SigstoreTestInstance

REPO = "acme/kern"
WORKFLOW = "https://github.com/acme/kernels/.github/workflows/build.yaml@refs/heads/main"
HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)


@pytest.fixture(scope="module")
def instance() -> SigstoreTestInstance:
    return SigstoreTestInstance()


@pytest.fixture
def config(isolated_settings: Path, instance: SigstoreTestInstance) -> Path:
    """A config whose sigstore trust root is the test instance's; returns its path."""
    path = isolated_settings.parent / "config.toml"
    (path.parent / "trusted_root.json").write_bytes(instance.trusted_root())
    path.write_text(
        '[signing.sigstore]\ntrusted-root = "trusted_root.json"\n'
        "[signing.sigstore.orgs.acme]\n"
        f'signers = [{{issuer = "{GITHUB}", repository = "acme/kernels", '
        f'workflows = ["{WORKFLOW}"]}}]\n'
        "[signing.sigstore.orgs.kernels-community]\n"
        'signers = "huggingface"\nunsigned = "warn"\n')
    return path


def _policy(config: Path) -> SigstorePolicy:
    policy = sigstore_policy_for("acme")
    assert policy is not None
    return policy


def test_policies_from_the_config(config: Path) -> None:
    acme = _policy(config)
    assert acme.signers == (SigstoreSigner(GITHUB, "acme/kernels", (WORKFLOW,)),)
    assert acme.unsigned == "refuse" and acme.trusted_root == config.parent / "trusted_root.json"
    community = sigstore_policy_for("kernels-community")
    assert community is not None and community.unsigned == "warn"
    assert community.signers == PRESETS["huggingface"]
    assert sigstore_policy_for("someone-else") is None


@pytest.mark.parametrize(("table", "why"), [
    ('signers = "nobody"', "unknown preset 'nobody'"),
    ("unsigned = \"warn\"", "needs signers"),
    ('signers = "huggingface"\nunsigned = "maybe"', "unsigned must be one of refuse, warn, allow"),
    ('signers = [{issuer = "x"}]', "a signer names an issuer and a repository"),
    ('signers = [{identity = "a@b", colour = "red"}]', "unknown keys ['colour']"),
])
def test_malformed_policies_say_what_to_fix(isolated_settings: Path, table: str,
                                            why: str) -> None:
    (isolated_settings.parent / "config.toml").write_text(
        f"[signing.sigstore.orgs.acme]\n{table}\n")
    with pytest.raises(KernelHubError, match=why.replace("[", r"\[")):
        sigstore_policy_for("acme")


def test_a_valid_bundle_names_its_signer_and_anything_else_is_refused(
        config: Path, instance: SigstoreTestInstance) -> None:
    policy, metadata = _policy(config), b'{"name": "kern"}'
    bundle = instance.sign(metadata, identity=WORKFLOW, repository="acme/kernels")
    assert verify_bundle(metadata, bundle, policy, "v") == WORKFLOW
    with pytest.raises(SignatureError, match="Bundle message digest mismatch"):
        verify_bundle(b'{"name": "evil"}', bundle, policy, "v")
    other = instance.sign(metadata, identity=WORKFLOW.replace("build", "nightly"),
                          repository="acme/kernels")
    with pytest.raises(SignatureError, match=r"does not verify for 'acme'.*allowed signers: "
                                             r"acme/kernels workflows"):
        verify_bundle(metadata, other, policy, "v")
    stranger = SigstoreTestInstance().sign(metadata, identity=WORKFLOW, repository="acme/kernels")
    with pytest.raises(SignatureError, match="does not verify"):
        verify_bundle(metadata, stranger, policy, "v")
    with pytest.raises(SignatureError, match="is not a valid sigstore bundle"):
        verify_bundle(metadata, b"{}", policy, "v")
    # The ecosystem's own signers do not include acme's workflow.
    hf = SigstorePolicy("acme", PRESETS["huggingface"], "refuse", policy.trusted_root)
    with pytest.raises(SignatureError, match="huggingface/kernels-community workflows"):
        verify_bundle(metadata, bundle, hf, "v")


def test_a_verified_bundle_is_remembered_by_content(
        config: Path, instance: SigstoreTestInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    policy, metadata = _policy(config), b'{"name": "remembered"}'
    bundle = instance.sign(metadata, identity=WORKFLOW, repository="acme/kernels")
    assert verify_bundle(metadata, bundle, policy, "v") == WORKFLOW
    calls = []

    def failing_import() -> None:
        calls.append(1)
        raise AssertionError("the verifier ran again")

    monkeypatch.setattr(sigstore_signatures, "_import_sigstore", failing_import)
    assert verify_bundle(metadata, bundle, policy, "v") == WORKFLOW  # in-process memo
    monkeypatch.setattr(sigstore_signatures, "_verified", {})
    assert verify_bundle(metadata, bundle, policy, "v") == WORKFLOW  # the HMAC'd disk record
    assert calls == []
    with pytest.raises(AssertionError):  # other content is never answered from the record
        verify_bundle(metadata + b" ", bundle, policy, "v")
    with pytest.raises(AssertionError):
        verify_bundle(metadata, bundle, policy, "v", cached=False)


def test_unsigned_variants_follow_the_policy(config: Path) -> None:
    with pytest.raises(SignatureError, match='requires one; set unsigned = "warn"'):
        check_sigstore("acme/kern", "torch-cpu", b"{}", None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert check_sigstore("kernels-community/kern", "torch-cpu", b"{}", None) is None
        assert check_sigstore("kernels-community/kern", "torch-cpu", b"{}", None) is None
    assert [str(w.message) for w in seen] == [
        "kernels-community/kern torch-cpu is not sigstore-signed, so its integrity cannot be "
        "verified beyond the hub's own content"]
    assert check_sigstore("someone/kern", "torch-cpu", b"{}", None) is None  # no policy
    with open(config, "a") as f:
        f.write('[signing]\nallow-unsigned = ["acme"]\n')
    assert check_sigstore("acme/kern", "torch-cpu", b"{}", None) is None


@pytest.fixture
def signed_hub(tmp_path: Path, instance: SigstoreTestInstance) -> Path:
    """A LocalHub with one signed variant, one signed by a stranger, one unsigned."""
    hub, staging = LocalPublisher(tmp_path / "hub"), tmp_path / "staging"
    for name, identity in ((HOST, WORKFLOW), ("torch-universal", "https://github.com/evil/x/"
                                             ".github/workflows/b.yaml@refs/heads/main"),
                           ("torch-cpu", None)):
        make_variant(staging / name, name="kern")
        if identity is not None:
            bundle = instance.sign(read_metadata_bytes(staging / name), identity=identity,
                                   repository="acme/kernels")
            (staging / name / BUNDLE_FILE).write_bytes(bundle)
    hub.publish(REPO, "v1", {p.name: p for p in staging.iterdir()}, tag="v1.0.0", message="r")
    return tmp_path / "hub"


def test_a_variant_with_a_bundle_still_loads(signed_hub: Path) -> None:
    # The bundle is not in the digest (it signs metadata.json, which holds the digest) and
    # is never imported: a signed ecosystem variant is not "a variant with extra files".
    module = get_kernel(REPO, 1, hub=str(signed_hub), trust_remote_code=True)
    assert module.VALUE == 42


def test_verify_signature_cli(signed_hub: Path, config: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify-signature", REPO, "1", "--hub", str(signed_hub)]) == 0
    out = capsys.readouterr().out
    assert "sigstore: checked against the policy for 'acme' in the config" in out
    assert f"  ok   {HOST}: signed by {WORKFLOW}; every file matches the signed digest" in out
    assert main(["verify-signature", REPO, "1", "--hub", str(signed_hub), "--all-variants"]) == 1
    captured = capsys.readouterr()
    assert "FAIL torch-cpu: not sigstore-signed (no metadata.json.sigstore)" in captured.out
    assert "FAIL torch-universal: " in captured.out and "does not verify" in captured.out
    assert "2 of 3 variants failed verification" in captured.err
    assert main(["verify-signature", REPO, "1", "--hub", str(signed_hub), "--all-variants",
                 "--filter-unsigned"]) == 1
    assert "torch-cpu" not in capsys.readouterr().out
    # Against the ecosystem's own signers, acme's workflow is not allowed.
    assert main(["verify-signature", REPO, "--hub", str(signed_hub), "--signers",
                 "huggingface"]) == 1
    assert "the 'huggingface' signers" in capsys.readouterr().out


def test_the_shipped_trust_root_is_sigstores_public_good_instance() -> None:
    root = json.loads(sigstore_signatures.shipped_trusted_root().read_text())
    assert root["mediaType"].startswith("application/vnd.dev.sigstore.trustedroot+json")
    assert any(t["baseUrl"] == "https://rekor.sigstore.dev" for t in root["tlogs"])


def test_a_missing_sigstore_is_named_even_with_a_configured_trust_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``trusted-root`` set, the first sigstore name read is the trust root's parser:
    a missing package must still say how to install it, not fail as a parse error or a raw
    ModuleNotFoundError."""
    root = tmp_path / "root.json"
    root.write_text("{}")
    for name in ("sigstore", "sigstore.models", "sigstore.verify"):
        monkeypatch.setitem(sys.modules, name, None)
    policy = SigstorePolicy("acme", PRESETS["huggingface"], "refuse", root)
    with pytest.raises(SignatureError, match=r"not installed.*kernelhub\[sigstore\]"):
        verify_bundle(b"{}", b"{}", policy, "v")
