"""A test instance of the Sigstore protocol: a CA, a CT log and a transparency log, offline.

Sigstore's public-good services (Fulcio, its CT log, Rekor) cannot be reached from tests,
and their bundles can only be made by an OIDC identity they trust. This module plays all
three roles with keys of its own, following the documented formats, so the real
``sigstore`` library verifies what it makes against the trust root it publishes:

* **Fulcio** — a root CA issuing short-lived code-signing certificates whose extensions
  carry the OIDC claims (issuer v1/v2, source repository URI, build signer URI; OIDs from
  fulcio docs/oid-info.md), with the identity as a URI subject alternative name;
* **CT log** — an RFC 6962 precertificate SCT over the certificate's TBS without its SCT
  list, embedded in the certificate (extension 1.3.6.1.4.1.11129.2.4.2);
* **Rekor** — a ``hashedrekord`` 0.0.1 entry (canonicalised body), its signed entry
  timestamp (RFC 8785 JSON of body, integratedTime, logID, logIndex), and an RFC 6962
  inclusion proof in a one-leaf tree with a signed checkpoint (a signed note);
* **trust root** — ``application/vnd.dev.sigstore.trustedroot+json;version=0.1`` naming
  the CA, the CT log key and the log key;
* **bundle** — ``application/vnd.dev.sigstore.bundle.v0.3+json`` with the certificate,
  the log entry and the message signature.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
BUILD_SIGNER_URI = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
SOURCE_REPOSITORY_URI = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.12")
SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
GITHUB = "https://token.actions.githubusercontent.com"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spki(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def _utf8_der(text: str) -> bytes:
    data = text.encode()
    assert len(data) < 128
    return bytes([0x0C, len(data)]) + data


def _der_length(length: int) -> bytes:
    if length < 128:
        return bytes([length])
    size = (length.bit_length() + 7) // 8
    return bytes([0x80 | size]) + length.to_bytes(size, "big")


def _canonical(value: object) -> bytes:
    """RFC 8785 for the flat objects used here (string keys, ints and strings)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _when(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SigstoreTestInstance:
    """Keys of one instance; ``trusted_root()`` publishes them, ``sign()`` makes bundles."""

    ca_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP384R1()))
    ct_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    log_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    start: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(
        datetime.timezone.utc).replace(microsecond=0) - datetime.timedelta(days=1))

    def __post_init__(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kernelhub-test"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "kernelhub-test-fulcio")])
        public = self.ca_key.public_key()
        self.ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.start + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self.ca_key, hashes.SHA384()))

    # -- the trust root ---------------------------------------------------------------

    def _log(self, key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, object]:
        return {"baseUrl": url, "hashAlgorithm": "SHA2_256",
                "publicKey": {"rawBytes": _b64(_spki(key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                              "validFor": {"start": _when(self.start)}},
                "logId": {"keyId": _b64(hashlib.sha256(_spki(key)).digest())}}

    def trusted_root(self) -> bytes:
        return json.dumps({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [self._log(self.log_key, "https://rekor.kernelhub-test.invalid")],
            "certificateAuthorities": [{
                "subject": {"organization": "kernelhub-test", "commonName": "kernelhub-test-fulcio"},
                "uri": "https://fulcio.kernelhub-test.invalid",
                "certChain": {"certificates": [
                    {"rawBytes": _b64(self.ca_cert.public_bytes(serialization.Encoding.DER))}]},
                "validFor": {"start": _when(self.start)}}],
            "ctlogs": [self._log(self.ct_key, "https://ctfe.kernelhub-test.invalid")],
            "timestampAuthorities": [],
        }, indent=2).encode()

    # -- Fulcio and its CT log --------------------------------------------------------

    def _certificate(self, key: ec.EllipticCurvePrivateKey, now: datetime.datetime,
                     identity: str, issuer: str, repository: str | None) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([]))
            .issuer_name(self.ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=30))
            .not_valid_after(now + datetime.timedelta(minutes=10))
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]),
                           critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.ca_key.public_key()), critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(identity)]), critical=True)
            .add_extension(x509.UnrecognizedExtension(ISSUER_V1, issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(ISSUER_V2, _utf8_der(issuer)),
                           critical=False)
            .add_extension(x509.UnrecognizedExtension(BUILD_SIGNER_URI, _utf8_der(identity)),
                           critical=False))
        if repository is not None:
            builder = builder.add_extension(x509.UnrecognizedExtension(
                SOURCE_REPOSITORY_URI, _utf8_der(f"https://github.com/{repository}")),
                critical=False)
        precert = builder.sign(self.ca_key, hashes.SHA256())
        sct = self._sct(precert, now)
        return builder.add_extension(x509.UnrecognizedExtension(SCT_LIST, sct),
                                     critical=False).sign(self.ca_key, hashes.SHA256())

    def _sct(self, precert: x509.Certificate, now: datetime.datetime) -> bytes:
        """The DER OCTET STRING holding a one-SCT list for ``precert`` (RFC 6962 3.2)."""
        timestamp = int(now.timestamp() * 1000)
        tbs = precert.tbs_certificate_bytes
        issuer_key_hash = hashlib.sha256(_spki(self.ca_key)).digest()
        signed = (struct.pack("!BBQH", 0, 0, timestamp, 1) + issuer_key_hash
                  + len(tbs).to_bytes(3, "big") + tbs + struct.pack("!H", 0))
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (bytes([0]) + hashlib.sha256(_spki(self.ct_key)).digest()
               + struct.pack("!QH", timestamp, 0) + bytes([4, 3])
               + struct.pack("!H", len(signature)) + signature)
        body = struct.pack("!H", len(sct)) + sct
        sct_list = struct.pack("!H", len(body)) + body
        return bytes([0x04]) + _der_length(len(sct_list)) + sct_list

    # -- Rekor --------------------------------------------------------------------------

    def sign(self, artifact: bytes, *, identity: str, issuer: str = GITHUB,
             repository: str | None = None, log_index: int = 0) -> bytes:
        """A bundle for ``artifact`` signed as ``identity`` (the build signer URI for a
        GitHub workflow), logged in this instance's transparency log."""
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._certificate(key, now, identity, issuer, repository)
        cert_der = cert.public_bytes(serialization.Encoding.DER)
        digest = hashlib.sha256(artifact).digest()
        signature = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
        pem = cert.public_bytes(serialization.Encoding.PEM)
        body = _canonical({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
            "signature": {"content": _b64(signature), "publicKey": {"content": _b64(pem)}}}})
        log_id = hashlib.sha256(_spki(self.log_key)).digest()
        integrated = int(now.timestamp())
        promise = self.log_key.sign(_canonical({
            "body": _b64(body), "integratedTime": integrated, "logID": log_id.hex(),
            "logIndex": log_index}), ec.ECDSA(hashes.SHA256()))
        root = hashlib.sha256(b"\x00" + body).digest()  # a one-leaf tree: the leaf hash
        note = f"rekor.kernelhub-test.invalid - 1\n1\n{_b64(root)}\n"
        note_signature = self.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = f"{note}\n\u2014 rekor.kernelhub-test.invalid {_b64(log_id[:4] + note_signature)}\n"
        return json.dumps({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": _b64(cert_der)},
                "tlogEntries": [{
                    "logIndex": str(log_index), "logId": {"keyId": _b64(log_id)},
                    "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                    "integratedTime": str(integrated),
                    "inclusionPromise": {"signedEntryTimestamp": _b64(promise)},
                    "inclusionProof": {"logIndex": "0", "rootHash": _b64(root), "treeSize": "1",
                                       "hashes": [], "checkpoint": {"envelope": checkpoint}},
                    "canonicalizedBody": _b64(body)}]},
            "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
                                 "signature": _b64(signature)},
        }, indent=2).encode()
