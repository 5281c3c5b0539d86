"""The per-org signing policy: OpenSSH allowed_signers files, config and environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kernelhub.errors import KernelHubError, SigningKeyError
from kernelhub.signing.sshsig import PublicKey
from kernelhub.signing.trust import allowed_signers, matches, policy_for

RSA_LINE = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 rsa-for-git"


def pub() -> PublicKey:
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(raw, "k")


@pytest.mark.parametrize(("name", "patterns", "expected"), [
    ("acme", "acme", True), ("acme", "ac*", True), ("acme", "a?me", True),
    ("acme", "other,acme", True), ("acme", "other", False),
    ("acme-evil", "acme*,!acme-evil", False), ("acme-labs", "acme*,!acme-evil", True),
    ("acme", "!acme", False),
])
def test_openssh_pattern_lists(name: str, patterns: str, expected: bool) -> None:
    assert matches(name, patterns) is expected


def test_allowed_signers_file_selects_keys_by_principal_and_namespace(tmp_path: Path) -> None:
    a, b, c, d = pub(), pub(), pub(), pub()
    path = tmp_path / "allowed_signers"
    path.write_text(
        "# team keys\n\n"
        f"acme {a.openssh()}\n"
        f'"acme,acme-labs" namespaces="git,kernelhub-*" {b.openssh()}\n'
        f'acme namespaces="git" {c.openssh()}\n'       # not for releases
        f"other {d.openssh()}\n"
        f"acme {RSA_LINE}\n"                            # cannot sign a release: skipped
    )
    assert [k.blob for k in allowed_signers(path, "acme")] == [a.blob, b.blob]
    assert [k.blob for k in allowed_signers(path, "acme-labs")] == [b.blob]
    assert allowed_signers(path, "nobody") == []


@pytest.mark.parametrize("line", [
    'acme valid-before="20300101" ssh-ed25519 AAAA',
    "acme cert-authority ssh-ed25519 AAAA",
])
def test_options_that_would_be_ignored_are_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "allowed_signers"
    path.write_text(f"# header\n{line}\n")
    with pytest.raises(SigningKeyError, match=rf"{path}:2: option .* is not supported"):
        allowed_signers(path, "acme")


def test_malformed_lines_and_missing_files_say_where(tmp_path: Path) -> None:
    path = tmp_path / "allowed_signers"
    path.write_text("acme ssh-ed25519\n")
    with pytest.raises(SigningKeyError, match=rf"{path}:1"):
        allowed_signers(path, "acme")
    path.write_text("acme ssh-ed25519 not-base64!\n")
    with pytest.raises(SigningKeyError, match="not valid base64"):
        allowed_signers(path, "acme")
    with pytest.raises(KernelHubError, match="KERNELHUB_ALLOWED_SIGNERS"):
        allowed_signers(tmp_path / "missing", "acme")


def test_policy_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = pub()
    assert not policy_for("acme").active  # nothing configured: nothing is checked
    (tmp_path / "config.toml").write_text(f'[signing.keys]\n"ac*" = ["{key.openssh()}"]\n')
    acme = policy_for("acme")
    assert acme.keys == (key,) and acme.refuse_unsigned
    assert not policy_for("other").active
    monkeypatch.setenv("KERNELHUB_ALLOW_UNSIGNED", "acme")
    assert policy_for("acme").active and not policy_for("acme").refuse_unsigned
    monkeypatch.setenv("KERNELHUB_REQUIRE_SIGNED", "*")
    assert not policy_for("acme").refuse_unsigned  # allow-unsigned wins over require
    other = policy_for("other")
    assert other.refuse_unsigned and other.keys == ()


def test_policy_token_changes_with_the_key_set(tmp_path: Path, monkeypatch) -> None:
    one, two = pub(), pub()
    path = tmp_path / "allowed_signers"
    monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(path))
    path.write_text(f"acme {one.openssh()}\n")
    before = policy_for("acme").token
    path.write_text(f"acme {one.openssh()}\nacme {two.openssh()}\n")
    assert policy_for("acme").token != before
    path.write_text(f"acme {one.openssh()}\nacme {one.openssh()}\n")  # duplicates collapse
    assert policy_for("acme").token == before


@pytest.mark.parametrize("config", [
    "signing = 1\n",
    "[signing]\nrequire = 1\n",
    "[signing]\nallowed-signers = [1]\n",
    "[signing]\nkeys = 'x'\n",
    "[signing.keys]\nacme = [1]\n",
])
def test_bad_signing_config_is_one_clear_error(tmp_path: Path, config: str) -> None:
    (tmp_path / "config.toml").write_text(config)
    with pytest.raises(KernelHubError, match=str(tmp_path / "config.toml")):
        policy_for("acme")
