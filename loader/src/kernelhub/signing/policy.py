"""Check a release's signature against the org's policy before anything of it is loaded.

Runs on every hub load, warm ones included: the release files are cached per commit
like the variant lists, and the outcome of the signature check is remembered keyed by
*content* — the manifest bytes, the signature bytes and the allowed key set — never by a
path or commit id, so an edited file or a changed policy is checked afresh while a
repeated load costs one hash of a few hundred bytes. It is remembered in this process
and, under an HMAC only this user can make, on disk (:mod:`kernelhub.signing.verified_marks`),
so a new process need not load the crypto library to re-verify what it verified before.

What is verified here is the manifest; the variant's own ``metadata.json`` is compared
with the manifest by the importer, on the very bytes it then parses
(:func:`kernelhub.load.importer.load_variant_dir`), so nothing is checked on one copy and
used from another.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.release_manifest", "kernelhub.signing.trust",
    "kernelhub.versions",
}

import hashlib

from .. import settings
from ..errors import SignatureError
from ..formats.release_manifest import (
    NAMESPACE,
    RELEASE_FILE,
    SIGNATURE_FILE,
    ReleaseFiles,
    ReleaseManifest,
)
from ..versions import branch_major, tag_release
from . import sshsig, verified_marks
from .trust import OrgPolicy

_verified: dict[bytes, str] = {}
"""Content key → fingerprint of the allowed key that signed it (successes only)."""


def _how_to_add(org: str) -> str:
    return (
        f"add the key as an '{org} ssh-ed25519 AAAA…' line to an allowed_signers file named "
        f"by KERNELHUB_ALLOWED_SIGNERS, or to [signing.keys] {org} in {settings.config_path()}"
    )


def _content_key(files: ReleaseFiles, policy: OrgPolicy) -> bytes:
    assert files.manifest is not None and files.signature is not None
    h = hashlib.sha256(NAMESPACE.encode())
    for part in (files.manifest, files.signature, policy.token):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _verify_signature(files: ReleaseFiles, policy: OrgPolicy, where: str) -> str:
    """The fingerprint of the allowed key that signed the manifest, or SignatureError."""
    key = _content_key(files, policy)
    if (fingerprint := _verified.get(key) or verified_marks.recall(key)) is not None:
        _verified[key] = fingerprint
        return fingerprint
    assert files.manifest is not None and files.signature is not None
    try:
        signature = sshsig.parse_signature(files.signature)
    except SignatureError as e:
        raise SignatureError(f"refusing to load {where}: {SIGNATURE_FILE} is unusable ({e}); "
                             "ask the publisher to publish again with builder publish --sign") from None
    signer = signature.key.fingerprint
    if signature.key.blob not in {k.blob for k in policy.keys}:
        raise SignatureError(
            f"refusing to load {where}: its release is signed by key {signer}, which is not "
            f"allowed to sign for org {policy.org!r} (allowed: {policy.fingerprints()}); if you "
            f"trust that key, {_how_to_add(policy.org)}"
        )
    if not sshsig.signature_valid(signature, files.manifest, NAMESPACE):
        raise SignatureError(
            f"refusing to load {where}: the signature by {signer} does not match {RELEASE_FILE} "
            f"(namespace {signature.namespace!r}); the release was changed after it was signed "
            "— do not use it, and tell its publisher"
        )
    _verified[key] = signer
    verified_marks.remember(key, signer)
    return signer


def _check_ref(manifest: ReleaseManifest, ref: str, where: str) -> None:
    """A signature for another release must not pass for this tag or major branch."""
    release, major = tag_release(ref), branch_major(ref)
    if release is not None and release != manifest.release:
        expected = f"release {release}"
    elif major is not None and manifest.release.split(".")[0] != str(major):
        expected = f"a {major}.x release"
    else:
        return
    raise SignatureError(
        f"refusing to load {where}: its signed manifest is for release {manifest.release}, "
        f"not {expected}; a signature was copied from another release — do not use it, and "
        "tell its publisher"
    )


def check_release(
    files: ReleaseFiles, policy: OrgPolicy, repo_id: str, ref: str, commit: str
) -> ReleaseManifest | None:
    """The verified manifest of a release, or None where the policy allows it unsigned.

    Raises SignatureError when the policy refuses the release: unsigned where signatures
    are required, signed by a key not allowed for the org, a manifest changed after
    signing, or a manifest signed for another repository or release.
    """
    where = f"{repo_id} at {ref} ({commit[:12]})"
    if not files.signed:
        if not policy.refuse_unsigned:
            return None
        raise SignatureError(
            f"refusing to load {where}: the release is unsigned and your policy requires "
            f"signed releases from {policy.org!r}; ask the publisher to publish with builder "
            "publish --sign, or allow it with KERNELHUB_ALLOW_UNSIGNED / [signing] "
            f"allow-unsigned in {settings.config_path()}"
        )
    if not policy.keys:
        raise SignatureError(
            f"refusing to load {where}: your policy requires signed releases from "
            f"{policy.org!r} but allows no key to sign them; {_how_to_add(policy.org)}"
        )
    signer = _verify_signature(files, policy, where)
    assert files.manifest is not None
    manifest = ReleaseManifest.from_bytes(files.manifest, where)
    if manifest.repo_id != repo_id:
        raise SignatureError(
            f"refusing to load {where}: the release is signed (by {signer}) for repository "
            f"{manifest.repo_id}, not {repo_id}; a signature was copied from another "
            "repository — do not use it, and tell its publisher"
        )
    _check_ref(manifest, ref, where)
    return manifest


def signed_metadata_digest(manifest: ReleaseManifest, variant: str, where: str) -> str:
    """The metadata.json sha256 the signed manifest records for ``variant``."""
    digest = manifest.variants.get(variant)
    if digest is None:
        raise SignatureError(
            f"refusing to load {variant} of {where}: the signed release does not cover it "
            f"(it covers: {', '.join(sorted(manifest.variants)) or 'nothing'}); it was added "
            "after signing — ask the publisher to publish it with builder publish --sign"
        )
    return digest


def describe_release(
    files: ReleaseFiles, policy: OrgPolicy, repo_id: str, ref: str, commit: str
) -> str:
    """One line for ``kernelhub variants``: who signed, and what the user's policy says."""
    if files.signed:
        assert files.signature is not None
        try:
            state = f"signed by {sshsig.parse_signature(files.signature).key.fingerprint}"
        except SignatureError:
            state = f"signed, but {SIGNATURE_FILE} is unreadable"
    else:
        state = "unsigned"
    if not policy.active:
        return f"{state}; no signing policy for {policy.org!r}, so loads do not check it"
    try:
        check_release(files, policy, repo_id, ref, commit)
    except SignatureError as e:
        return f"{state}; REFUSED by your policy: {e}"
    return f"{state}; accepted by your policy for {policy.org!r}"
