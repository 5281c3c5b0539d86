"""The signed release manifest: what ``builder publish --sign`` signs and loaders check.

A signed commit carries two files at the repository root, next to ``build/``::

    release.json        the manifest: format, repo id, release, and for every variant
                        under build/ the sha256 of its metadata.json
    release.json.sig    an SSHSIG signature of release.json's bytes, namespace
                        "kernelhub-release" (``ssh-keygen -Y sign -n kernelhub-release``)

Why this shape: ``metadata.json`` already lists a digest of every other file of its
variant, so signing the metadata digests signs every byte a loader will import, and a
loader that fetches one variant needs only the manifest, the signature and that variant.
The repo id and the release are inside the signed bytes, so a signature copied onto
another repository or another release does not verify for it. The manifest is the
signed message itself (not re-derived by the loader), and its bytes must be canonical,
so a file that parses to the same content but differs in bytes is refused rather than
interpreted. Keeping the signature in its own ``.sig`` file next to the message is the
layout ``ssh-keygen -Y verify -s release.json.sig < release.json`` checks directly.

Canonical bytes: JSON with keys sorted, ``,``/``:`` separators without spaces, ASCII
only, one trailing newline. Metadata digests are lowercase hex sha256 of the raw bytes of
``build/<variant>/metadata.json``.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import hashlib
import json
import re
from collections.abc import Callable, Mapping

from ..errors import SignatureError
from ..value_types import Record

RELEASE_FILE = "release.json"
SIGNATURE_FILE = "release.json.sig"
NAMESPACE = "kernelhub-release"
"""The SSHSIG namespace: a signature made for anything else (git, files) never verifies here."""
FORMAT = "kernelhub-release/1"

_HEX64 = r"[0-9a-f]{64}"  # compiled where first used: most loads check no signature

Signer = Callable[[bytes], str]
"""Signs a manifest's bytes; returns the armored SSHSIG text (see :mod:`kernelhub.signing.sshsig`)."""


def metadata_sha256(data: bytes) -> str:
    """The manifest's digest of one variant: hex sha256 of its metadata.json bytes."""
    return hashlib.sha256(data).hexdigest()


class ReleaseManifest(Record, frozen=True):
    """What a release signature covers."""

    repo_id: str
    release: str
    variants: Mapping[str, str]
    """Variant name → hex sha256 of its metadata.json."""

    def to_bytes(self) -> bytes:
        """The canonical bytes, which are what gets signed."""
        data = {
            "format": FORMAT,
            "repo": self.repo_id,
            "release": self.release,
            "variants": {
                name: {"metadata-sha256": digest} for name, digest in sorted(self.variants.items())
            },
        }
        return (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> ReleaseManifest:
        """Parse manifest bytes; only canonical bytes of this format are accepted."""

        def bad(why: str) -> SignatureError:
            return SignatureError(
                f"{where}: {RELEASE_FILE} is malformed ({why}); the release cannot be "
                "verified — ask its publisher to publish it again with builder publish --sign"
            )

        try:
            raw = json.loads(data.decode("ascii"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise bad(f"not ASCII JSON: {type(e).__name__}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise bad(f"expected format {FORMAT!r}")
        repo, release, variants = raw.get("repo"), raw.get("release"), raw.get("variants")
        if not isinstance(repo, str) or not isinstance(release, str):
            raise bad("repo and release must be strings")
        if not isinstance(variants, dict):
            raise bad("variants must be an object")
        digests: dict[str, str] = {}
        for name, entry in variants.items():
            digest = entry.get("metadata-sha256") if isinstance(entry, dict) else None
            if not isinstance(digest, str) or not re.fullmatch(_HEX64, digest):
                raise bad(f"variant {name!r} has no metadata-sha256")
            digests[name] = digest
        manifest = cls(repo, release, digests)
        if manifest.to_bytes() != data:
            raise bad("not in canonical form")
        return manifest


class ReleaseFiles(Record, frozen=True):
    """The release files found at one commit; None where a file is absent."""

    manifest: bytes | None
    signature: bytes | None

    @property
    def signed(self) -> bool:
        return self.manifest is not None and self.signature is not None


def release_files(manifest: ReleaseManifest, sign: Signer) -> dict[str, bytes]:
    """The files a signed publish adds at the repository root: path → content."""
    message = manifest.to_bytes()
    return {RELEASE_FILE: message, SIGNATURE_FILE: sign(message).encode("ascii")}
