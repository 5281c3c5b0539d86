"""Our SSHSIG signatures interoperate with OpenSSH's own ``ssh-keygen -Y`` both ways."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kernelhub.errors import SignatureError, SigningKeyError
from kernelhub.formats.release_manifest import NAMESPACE
from kernelhub.signing.sshsig import (
    load_signing_key,
    parse_public_key,
    parse_signature,
    signature_valid,
)

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen not installed")


def keygen(path: Path, kind: str = "ed25519", passphrase: str = "") -> Path:
    assert SSH_KEYGEN is not None
    subprocess.run([SSH_KEYGEN, "-q", "-t", kind, "-N", passphrase, "-C", "release@acme",
                    "-f", str(path)], check=True)
    return path


@needs_ssh_keygen
def test_ssh_keygen_verifies_our_signature(tmp_path: Path) -> None:
    key = load_signing_key(keygen(tmp_path / "key"))
    message = b'{"repo":"acme/demo"}\n'
    (tmp_path / "msg").write_bytes(message)
    (tmp_path / "msg.sig").write_text(key.sign(message, NAMESPACE))
    (tmp_path / "allowed").write_text(f"acme {(tmp_path / 'key.pub').read_text()}")

    def verify(namespace: str, data: bytes) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SSH_KEYGEN, "-Y", "verify", "-f", str(tmp_path / "allowed"), "-I", "acme",
             "-n", namespace, "-s", str(tmp_path / "msg.sig")],
            input=data.decode(), capture_output=True, text=True, check=False)

    good = verify(NAMESPACE, message)
    assert good.returncode == 0 and "Good" in good.stdout, good.stderr
    assert verify("git", message).returncode != 0
    assert verify(NAMESPACE, message.replace(b"demo", b"dema")).returncode != 0


@needs_ssh_keygen
def test_we_verify_an_ssh_keygen_signature(tmp_path: Path) -> None:
    keygen(tmp_path / "key")
    message = tmp_path / "release.json"
    message.write_bytes(b'{"release":"1.0.0"}\n')
    subprocess.run([SSH_KEYGEN, "-q", "-Y", "sign", "-f", str(tmp_path / "key"),
                    "-n", NAMESPACE, str(message)], check=True, capture_output=True)
    signature = parse_signature((tmp_path / "release.json.sig").read_bytes())

    pub = parse_public_key((tmp_path / "key.pub").read_text())
    assert signature.key.blob == pub.blob
    assert signature_valid(signature, message.read_bytes(), NAMESPACE)
    assert not signature_valid(signature, message.read_bytes() + b" ", NAMESPACE)
    assert not signature_valid(signature, message.read_bytes(), "file")


@needs_ssh_keygen
def test_fingerprint_is_the_one_ssh_keygen_prints(tmp_path: Path) -> None:
    keygen(tmp_path / "key")
    printed = subprocess.run([SSH_KEYGEN, "-l", "-f", str(tmp_path / "key.pub")],
                             capture_output=True, text=True, check=True).stdout.split()[1]
    assert parse_public_key((tmp_path / "key.pub").read_text()).fingerprint == printed
    assert load_signing_key(tmp_path / "key").public.fingerprint == printed


@needs_ssh_keygen
def test_unusable_keys_are_typed_errors_that_say_what_to_use(tmp_path: Path) -> None:
    keygen(tmp_path / "rsa", kind="rsa")
    with pytest.raises(SigningKeyError, match="ssh-keygen -t ed25519"):
        load_signing_key(tmp_path / "rsa")
    with pytest.raises(SigningKeyError, match="ssh-keygen -t ed25519"):
        parse_public_key((tmp_path / "rsa.pub").read_text())
    keygen(tmp_path / "ed")
    with pytest.raises(SigningKeyError, match=r"not the \.pub"):
        load_signing_key(tmp_path / "ed.pub")
    with pytest.raises(SigningKeyError, match="cannot read signing key"):
        load_signing_key(tmp_path / "missing")


@pytest.mark.parametrize("text", [
    "", "hello", "-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n",
    "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
])
def test_malformed_signatures_are_signature_errors(text: str) -> None:
    with pytest.raises(SignatureError):
        parse_signature(text)


@needs_ssh_keygen
def test_an_unreadable_key_is_told_apart_by_its_file_not_the_error_text(tmp_path: Path) -> None:
    protected = keygen(tmp_path / "protected", passphrase="secret")
    plain = keygen(tmp_path / "plain")
    with pytest.raises(SigningKeyError, match=r"set KERNELHUB_SIGNING_KEY_PASSPHRASE$"):
        load_signing_key(protected)
    with pytest.raises(SigningKeyError, match="has no passphrase: unset"):
        load_signing_key(plain, passphrase="secret")
    with pytest.raises(SigningKeyError, match=r"ssh-keygen -t ed25519 \(not the \.pub\)$"):
        load_signing_key(tmp_path / "plain.pub")
