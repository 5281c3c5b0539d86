"""Fuzzing the signed-release inputs: signatures, manifests, allowed_signers files, keys
and cached release files — whatever comes from a hub, a cache or a user's file, only
kernelhub's own one-line errors come out (see test_fuzz for the property)."""

from __future__ import annotations

import base64
import json
import struct
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from kernelhub.cache import KernelCache
from kernelhub.formats.release_manifest import NAMESPACE, ReleaseFiles, ReleaseManifest
from kernelhub.signing.policy import check_release
from kernelhub.signing.sshsig import PublicKey, parse_public_key, parse_signature
from kernelhub.signing.trust import OrgPolicy, allowed_signers
from test_fuzz import FUZZ, SHA, SMALL, only_kernelhub_errors

_PRIVATE = Ed25519PrivateKey.generate()
KEY = PublicKey(_PRIVATE.public_key().public_bytes(
    serialization.Encoding.Raw, serialization.PublicFormat.Raw))
POLICY = OrgPolicy("acme", (KEY,), refuse_unsigned=True)


def armor(blob: bytes) -> str:
    return "-----BEGIN SSH SIGNATURE-----\n" + base64.b64encode(blob).decode() + \
        "\n-----END SSH SIGNATURE-----\n"


def string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


sshsig_blobs = st.builds(
    lambda version, key, ns, alg, sig, tail: (
        b"SSHSIG" + struct.pack(">I", version) + string(key) + string(ns) + string(b"")
        + string(alg) + string(sig) + tail),
    st.integers(0, 3),
    st.one_of(st.binary(max_size=60), st.just(KEY.blob)),
    st.sampled_from([NAMESPACE.encode(), b"git", b""]),
    st.sampled_from([b"sha512", b"sha256", b"md5", b""]),
    st.one_of(st.binary(max_size=90),
              st.builds(lambda raw: string(b"ssh-ed25519") + string(raw), st.binary(max_size=70))),
    st.binary(max_size=4),
)


@FUZZ
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300), sshsig_blobs.map(armor)))
def test_signatures(data: bytes | str) -> None:
    only_kernelhub_errors(lambda: parse_signature(data))


@FUZZ
@given(st.one_of(
    st.binary(max_size=300),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({
        "format": st.sampled_from(["kernelhub-release/1", "x", 1]),
        "repo": st.one_of(st.just("acme/k"), st.integers()),
        "release": st.one_of(st.just("1.0.0"), st.none()),
        "variants": st.dictionaries(st.text(max_size=8), st.one_of(
            st.just({"metadata-sha256": "0" * 64}), st.text(max_size=5),
            st.dictionaries(st.text(max_size=5), st.text(max_size=5))), max_size=3),
    }).map(lambda d: (json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n").encode()),
))
def test_manifests(data: bytes) -> None:
    only_kernelhub_errors(lambda: ReleaseManifest.from_bytes(data, "acme/k"))
    files = ReleaseFiles(data, armor(b"SSHSIG").encode())
    only_kernelhub_errors(lambda: check_release(files, POLICY, "acme/k", "v1", SHA))


@FUZZ
@given(st.binary(max_size=200), sshsig_blobs)
def test_release_files_from_a_hub(manifest: bytes, blob: bytes) -> None:
    files = ReleaseFiles(manifest, armor(blob).encode())
    only_kernelhub_errors(lambda: check_release(files, POLICY, "acme/k", "v1.0.0", SHA))


@SMALL
@given(st.lists(st.one_of(
    st.text(max_size=60),
    st.sampled_from(["acme", "acme,b", '"acme"', "*", "!acme", "acme namespaces=\"x\"",
                     'acme namespaces="a,b', "acme cert-authority", "acme valid-after=1",
                     f"acme {KEY.openssh()}", f'acme namespaces="kernelhub-*" {KEY.openssh()}',
                     "acme ssh-ed25519 AAAA", "acme ssh-rsa AAAA", "#"]),
), max_size=6))
def test_allowed_signers_files(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "allowed_signers"
        path.write_text("\n".join(lines), errors="replace")
        only_kernelhub_errors(lambda: allowed_signers(path, "acme"))


@SMALL
@given(st.binary(max_size=120))
def test_allowed_signers_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "allowed_signers"
        path.write_bytes(raw)
        only_kernelhub_errors(lambda: allowed_signers(path, "acme"))


def test_deeply_nested_manifest() -> None:
    only_kernelhub_errors(lambda: ReleaseManifest.from_bytes(b"[" * 100_000, "acme/k"))


@FUZZ
@given(st.one_of(st.text(max_size=120),
                 st.builds(lambda kind, blob, comment: f"{kind} "
                           f"{base64.b64encode(blob).decode()} {comment}",
                           st.sampled_from(["ssh-ed25519", "ssh-rsa", ""]),
                           st.one_of(st.binary(max_size=60), st.just(KEY.blob)),
                           st.text(max_size=10))))
def test_public_keys(text: str) -> None:
    only_kernelhub_errors(lambda: parse_public_key(text))


@SMALL
@given(st.binary(max_size=200))
def test_cached_release_files(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = KernelCache(Path(tmp))
        path = cache.commit_dir("local-x", "acme/k", SHA)
        path.mkdir(parents=True)
        (path / "release-files.json").write_bytes(raw)
        only_kernelhub_errors(lambda: cache.read_release("local-x", "acme/k", SHA))
