"""OpenSSH signatures (SSHSIG) over Ed25519 keys: make, read and verify them.

Release signatures use the format ``ssh-keygen -Y sign`` writes and ``ssh-keygen -Y
verify`` checks (the one git uses for SSH-signed tags), so publishers sign with keys they
already have and anyone can check a release with stock OpenSSH. The cryptography package
does the Ed25519 arithmetic; this module only frames it, following OpenSSH's
PROTOCOL.sshsig:

* the signed data is ``"SSHSIG" ‖ string(namespace) ‖ string(reserved) ‖
  string(hash algorithm) ‖ string(H(message))``;
* the signature blob is ``"SSHSIG" ‖ uint32(1) ‖ string(public key) ‖ string(namespace)
  ‖ string(reserved) ‖ string(hash algorithm) ‖ string(signature)``, armored as base64
  between ``-----BEGIN SSH SIGNATURE-----`` lines.

Only Ed25519 keys are accepted: one key type keeps the code small and is what
``ssh-keygen -t ed25519`` (the default since OpenSSH 9.5) makes.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.user_files"}  # PEP 810: imported when first used

import base64
import binascii
import hashlib
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SignatureError, SigningKeyError
from ..lazy_names import deferred
from ..user_files import read_bounded, user_path
from ..value_types import Record

if TYPE_CHECKING:  # cryptography is imported when first used: a load with no signing
    # policy never pays for importing it (tens of ms)
    from cryptography import exceptions as crypto_errors
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
else:
    crypto_errors = deferred("cryptography.exceptions")
    serialization = deferred("cryptography.hazmat.primitives.serialization")
    ed25519 = deferred("cryptography.hazmat.primitives.asymmetric.ed25519")

KEY_TYPE = "ssh-ed25519"
_MAGIC = b"SSHSIG"
_VERSION = 1
_HASHES = {"sha512": hashlib.sha512, "sha256": hashlib.sha256}
_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_END = "-----END SSH SIGNATURE-----"
_ARMOR_WIDTH = 70  # what ssh-keygen writes; any width is accepted on read


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    """Reads SSH wire-format fields, raising SignatureError on truncated input."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SignatureError("SSH signature is truncated; it was damaged in transit or edited")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def uint32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def string(self) -> bytes:
        return self.take(self.uint32())

    def done(self) -> bool:
        return self.pos == len(self.data)


class PublicKey(Record, frozen=True):
    """An Ed25519 public key with the names users see for it."""

    raw: bytes
    """The 32 key bytes."""
    comment: str = ""

    @property
    def blob(self) -> bytes:
        """The SSH wire encoding, which fingerprints and signatures are computed over."""
        return _string(KEY_TYPE.encode()) + _string(self.raw)

    @property
    def fingerprint(self) -> str:
        """``SHA256:…`` exactly as ``ssh-keygen -l`` prints it."""
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    def openssh(self) -> str:
        """The ``ssh-ed25519 AAAA… comment`` line of a ``.pub`` file."""
        line = f"{KEY_TYPE} {base64.b64encode(self.blob).decode()}"
        return f"{line} {self.comment}" if self.comment else line



def _key_from_blob(blob: bytes, where: str) -> PublicKey:
    reader = _Reader(blob)
    try:
        kind = reader.string().decode("ascii", "replace")
        raw = reader.string()
    except SignatureError:
        raise SigningKeyError(f"{where}: the key is truncated") from None
    if kind != KEY_TYPE:
        raise SigningKeyError(
            f"{where}: {kind} keys are not supported; release signing uses Ed25519 keys "
            "(ssh-keygen -t ed25519)"
        )
    if len(raw) != 32 or not reader.done():
        raise SigningKeyError(f"{where}: not a well-formed Ed25519 key")
    return PublicKey(raw)


def parse_public_key(text: str, where: str = "public key") -> PublicKey:
    """Parse ``ssh-ed25519 AAAA… [comment]`` (a ``.pub`` line or an allowed-signers key)."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2:
        raise SigningKeyError(
            f"{where}: expected 'ssh-ed25519 AAAA… [comment]' (the contents of a .pub file)"
        )
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise SigningKeyError(f"{where}: the key is not valid base64") from None
    key = _key_from_blob(blob, where)
    if parts[0] != KEY_TYPE:
        raise SigningKeyError(f"{where}: key type {parts[0]!r} does not match the key ({KEY_TYPE})")
    return PublicKey(key.raw, parts[2].strip() if len(parts) > 2 else "")


class SigningKey(Record, frozen=True):
    """An Ed25519 private key loaded from an OpenSSH private key file."""

    path: Path
    _key: Ed25519PrivateKey

    @property
    def public(self) -> PublicKey:
        return PublicKey(self._key.public_key().public_bytes_raw(), comment=str(self.path))

    def sign(self, message: bytes, namespace: str) -> str:
        """An armored SSHSIG signature of ``message``, as ``ssh-keygen -Y sign`` writes it."""
        hash_alg = "sha512"
        signed = _signed_data(message, namespace, hash_alg)
        raw_sig = self._key.sign(signed)
        blob = (
            _MAGIC
            + struct.pack(">I", _VERSION)
            + _string(self.public.blob)
            + _string(namespace.encode())
            + _string(b"")
            + _string(hash_alg.encode())
            + _string(_string(KEY_TYPE.encode()) + _string(raw_sig))
        )
        text = base64.b64encode(blob).decode()
        lines = [text[i : i + _ARMOR_WIDTH] for i in range(0, len(text), _ARMOR_WIDTH)]
        return "\n".join([_BEGIN, *lines, _END]) + "\n"


def load_signing_key(path: Path | str, passphrase: str | None = None) -> SigningKey:
    """Read an OpenSSH Ed25519 private key (``ssh-keygen -t ed25519`` output)."""
    path = user_path(path, "the signing key")
    try:
        data = read_bounded(path)
    except OSError as e:
        raise SigningKeyError(f"cannot read signing key {path}: {e.strerror or e}") from None
    password = passphrase.encode() if passphrase is not None else None
    try:
        key = serialization.load_ssh_private_key(data, password=password)
    except crypto_errors.UnsupportedAlgorithm:
        raise SigningKeyError(
            f"{path}: the key is passphrase-protected and reading such keys needs the bcrypt "
            "package; pip install bcrypt, or sign with an unprotected key kept as a CI secret"
        ) from None
    except (ValueError, TypeError) as e:
        protected = _passphrase_protected(data)
        if protected and passphrase is None:
            hint = "set KERNELHUB_SIGNING_KEY_PASSPHRASE"
        elif protected is False and passphrase is not None:
            hint = "the key has no passphrase: unset KERNELHUB_SIGNING_KEY_PASSPHRASE"
        else:
            hint = "give the private key file made by ssh-keygen -t ed25519 (not the .pub)"
        raise SigningKeyError(f"{path}: not a usable OpenSSH private key ({e}); {hint}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningKeyError(
            f"{path}: {type(key).__name__.removesuffix('PrivateKey') or 'this'} keys are not "
            "supported; release signing uses Ed25519 keys (ssh-keygen -t ed25519)"
        )
    return SigningKey(path, key)


_PRIVATE_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
_PRIVATE_END = "-----END OPENSSH PRIVATE KEY-----"
_PRIVATE_MAGIC = b"openssh-key-v1\x00"


def _passphrase_protected(data: bytes) -> bool | None:
    """Whether an OpenSSH private key file is passphrase-protected (its cipher is not
    ``none``, PROTOCOL.key); None when ``data`` is no such file. What a failed read is
    told from, rather than the wording of cryptography's error."""
    text = data.decode("ascii", "replace")
    _, begin, rest = text.partition(_PRIVATE_BEGIN)
    body, end, _ = rest.partition(_PRIVATE_END)
    if not (begin and end):
        return None
    try:
        blob = base64.b64decode("".join(body.split()), validate=True)
    except binascii.Error:
        return None
    if not blob.startswith(_PRIVATE_MAGIC):
        return None
    try:
        cipher = _Reader(blob[len(_PRIVATE_MAGIC):]).string()
    except SignatureError:
        return None
    return cipher != b"none"


def _signed_data(message: bytes, namespace: str, hash_alg: str) -> bytes:
    digest = _HASHES[hash_alg](message).digest()
    return (
        _MAGIC
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_alg.encode())
        + _string(digest)
    )


class Signature(Record, frozen=True):
    """A parsed SSHSIG signature: who claims to have signed, for what namespace."""

    key: PublicKey
    namespace: str
    hash_alg: str
    raw: bytes


def parse_signature(armored: str | bytes) -> Signature:
    """Parse an armored SSHSIG signature; SignatureError if it is malformed."""
    text = armored.decode("ascii", "replace") if isinstance(armored, bytes) else armored
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) < 3 or lines[0] != _BEGIN or lines[-1] != _END:
        raise SignatureError("not an SSH signature (expected -----BEGIN SSH SIGNATURE-----)")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("SSH signature is not valid base64") from None
    reader = _Reader(blob)
    if reader.take(6) != _MAGIC or reader.uint32() != _VERSION:
        raise SignatureError("not an SSHSIG version 1 signature")
    key_blob = reader.string()
    namespace = reader.string().decode("utf-8", "replace")
    reader.string()  # reserved
    hash_alg = reader.string().decode("ascii", "replace")
    sig = _Reader(reader.string())
    if not reader.done():
        raise SignatureError("SSH signature has trailing data")
    try:
        key = _key_from_blob(key_blob, "the key in the signature")
    except SigningKeyError as e:
        raise SignatureError(str(e)) from None
    if sig.string() != KEY_TYPE.encode():
        raise SignatureError("SSH signature is not an Ed25519 signature")
    raw = sig.string()
    if len(raw) != 64 or not sig.done():
        raise SignatureError("SSH signature has a malformed Ed25519 signature")
    if hash_alg not in _HASHES:
        raise SignatureError(f"SSH signature uses hash {hash_alg!r}; only sha512/sha256 exist")
    return Signature(key, namespace, hash_alg, raw)


def signature_valid(signature: Signature, message: bytes, namespace: str) -> bool:
    """Whether ``signature`` is ``signature.key``'s signature of ``message`` in ``namespace``.

    Says nothing about whether that key is trusted: the caller compares it to its
    allowed keys.
    """
    if signature.namespace != namespace:
        return False
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(signature.key.raw).verify(
            signature.raw, _signed_data(message, namespace, signature.hash_alg)
        )
    except crypto_errors.InvalidSignature:
        return False
    return True
