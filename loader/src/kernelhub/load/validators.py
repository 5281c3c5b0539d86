"""What must hold before a kernel is imported: every check, behind one protocol.

A :class:`Validator` looks at the values of the pipeline as they appear and refuses by
raising. Its verdict on the code is given on the :class:`~kernelhub.load.verify.Snapshot`
(:meth:`Validator.on_snapshot`): the one read of the variant's files, whose bytes are
then imported, so nothing is checked on one copy and run from another. The earlier
hooks only refuse sooner, where the answer needs no bytes — an untrusted organisation is
refused before the hub is asked anything, an unsigned release before anything of it is
fetched.

A check holds only what it was configured with (a policy, a lock entry, a flag): what it
learns before the bytes travels in the pipeline's values, not in the check.
:meth:`Validator.on_resolution` returns the :class:`~kernelhub.load.resolve.Resolution`
with it added (the release signature's verdict, :class:`ReleaseVerdict`); the fetched
variant carries that resolution, and its :class:`~kernelhub.load.verify.Snapshot` carries
what the check on the bytes needs (the verdict, the system the variant was picked for).
So one set of checks can serve any number of loads, and a check's configuration is all
the memo of loads needs to know about it (:meth:`Validator.key`).

:func:`validators_for` decides, in one place, which checks a load gets — a hub load of a
request, a variant inside the kernel cache named by its path, or a local build:

* :class:`TrustValidator` — the organisation is trusted, or the caller vouched for it;
* :class:`SignatureValidator` — where the org's signing policy applies: the release is
  signed by an allowed key, and the snapshot's ``metadata.json`` is the one it signed;
* :class:`LockValidator` — for a locked load: the snapshot matches the lock's hash;
* :class:`ArchValidator` — a build without code for this GPU fails here, not at its
  first kernel launch;
* :class:`SigstoreValidator` — where the org has a sigstore policy: the variant's bundle
  (the ecosystem's ``metadata.json.sigstore``) verifies over the snapshot's
  ``metadata.json`` bytes and names an allowed signer;
* :class:`MinverValidator` — ``kernels-minver`` no newer than the formats this kernelhub
  reads;
* :class:`DirtyBuildValidator` — one warning for a build from a dirty git tree.

The last two are the format checks, which local builds get too.

A new check is one more class here and one more line in :func:`validators_for`.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.metadata", "kernelhub.load.resolve", "kernelhub.selection", "kernelhub.signing.trust",
    "kernelhub.value_types",
}

import hashlib
from typing import TYPE_CHECKING

from .. import cache, settings
from ..errors import IntegrityError, LockFileError, SignatureError
from ..formats.metadata import KERNELS_MINVER, dirty_sources
from ..hub import search
from ..selection import check_archs
from ..signing.trust import OrgPolicy, Vouch, check_trusted, is_trusted, policy_for, vouches_for
from ..value_types import replace
from .resolve import ReleaseVerdict, release_files

if TYPE_CHECKING:
    from ..formats.release_manifest import ReleaseFiles
    from ..lock import LockEntry
    from ..signing.sigstore import SigstorePolicy
    from .request import KernelRequest
    from .resolve import Resolution
    from .verify import Snapshot


class Validator:
    """One check, holding only its configuration. Each hook refuses by raising a
    KernelHubError; the defaults admit."""

    def on_request(self, request: KernelRequest) -> None:
        """Before the hub is asked anything."""

    def on_resolution(self, resolution: Resolution) -> Resolution:
        """Before anything of the variant is fetched: ``resolution``, with what the check
        learned added for its :meth:`on_snapshot` (the next steps carry it there)."""
        return resolution

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """On the bytes that will be imported: the check that decides."""

    def key(self) -> object:
        """What the verdict depends on besides the request (the memo of loads is keyed by
        it): a changed policy or lock makes the next load check again."""
        return None


class TrustValidator(Validator):
    """Refuse code from an organisation neither the user nor the caller trusts."""

    def __init__(self, trust_remote_code: Vouch) -> None:
        self.trust_remote_code = trust_remote_code

    def on_request(self, request: KernelRequest) -> None:
        if search.is_search_path(request.hub) \
                and not vouches_for(self.trust_remote_code, request.repo_id) \
                and not is_trusted(request.repo_id, None):
            return  # which hub's operator vouches is known once one serves it (below)
        check_trusted(request.repo_id, request.hub, self.trust_remote_code)

    def on_resolution(self, resolution: Resolution) -> Resolution:
        """Again with the hub that serves it: through a search path, the trust its
        operator declares applies only to what that hub serves, so it is asked only
        now (refs and the variant list have been read; nothing of the code)."""
        check_trusted(resolution.repo_id, resolution.hub, self.trust_remote_code)
        return resolution

    def key(self) -> object:
        return self.trust_remote_code


class SignatureValidator(Validator):
    """The org's signing policy: a release signed by an allowed key, and the snapshot's
    ``metadata.json`` (whose digests cover every other file) the one the release signed."""

    def __init__(self, policy: OrgPolicy) -> None:
        self.policy = policy

    def on_resolution(self, resolution: Resolution) -> Resolution:
        return replace(resolution, release=self.verdict(
            release_files(resolution), resolution.repo_id, resolution.ref,
            resolution.commit, resolution.variant))

    def on_cached(self, hub_key: str, repo_id: str, commit: str, variant: str) -> ReleaseVerdict:
        """The verdict on a variant inside the kernel cache named by its path, from the
        release files the cache holds for its commit (a load never asks a hub for a path it
        was handed)."""
        files = cache.KernelCache().read_release(hub_key, repo_id, commit)
        if files is None:
            raise SignatureError(
                f"refusing to load {variant} of {repo_id} at {commit[:12]} from the cache: "
                f"your policy requires signed releases from {self.policy.org!r}, and the "
                "release files of that commit are not cached; load it with get_kernel, which "
                "checks them"
            )
        return self.verdict(files, repo_id, commit, commit, variant)

    def verdict(self, files: ReleaseFiles, repo_id: str, ref: str, commit: str,
                variant: str) -> ReleaseVerdict:
        """Verify the release files of ``commit``: what they sign for ``variant``."""
        from ..signing import policy as release_policy
        manifest = release_policy.check_release(files, self.policy, repo_id, ref, commit)
        if manifest is None:
            return ReleaseVerdict(None)
        return ReleaseVerdict(release_policy.signed_metadata_digest(
            manifest, variant, f"{repo_id} at {ref} ({commit[:12]})"))

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.release is None:
            raise SignatureError(f"refusing to load {snapshot.verified.source}: its release signature "
                                 "was not checked; load it through get_kernel")
        if (signed := snapshot.release.metadata_sha256) is None:
            return
        where = snapshot.verified.source
        actual = hashlib.sha256(snapshot.verified.metadata_bytes).hexdigest()
        if actual != signed:
            raise SignatureError(
                f"refusing to load {where}: its metadata.json (sha256 {actual[:16]}…) is not "
                f"the one the release signature covers ({signed[:16]}…); it was "
                "changed after signing. Run `kernelhub cache clear` to fetch it again, and "
                "tell the publisher if the hub serves it so"
            )
        if not snapshot.verified.own_digest:
            raise SignatureError(
                f"refusing to load {where}: its metadata.json lists no file digests, so the "
                "release signature does not cover its files; ask the publisher to rebuild it "
                "with builder build and publish it signed again"
            )

    def key(self) -> object:
        return self.policy.token


class LockValidator(Validator):
    """A locked load: the snapshot must match the hash its lock entry records (kernelhub's
    metadata sha256 when present, else the ecosystem's ``git_lfs_concat``)."""

    def __init__(self, entry: LockEntry) -> None:
        self.entry = entry

    def _where(self, variant: str) -> str:
        return f"{variant} of {self.entry.repo_id} at {self.entry.sha[:12]}"

    def on_resolution(self, resolution: Resolution) -> Resolution:
        self._wanted(resolution.variant)  # refused before it is fetched
        return resolution

    def _wanted(self, variant: str) -> tuple[str, str] | None:
        """(kind, hash) the lock records for ``variant``; None for a pin without hashes (the
        older ``{repo: sha}`` form, where the commit is the pin)."""
        entry = self.entry
        if (want := entry.metadata_sha256.get(variant)) is not None:
            return "metadata sha256", want
        if (want := entry.variant_hashes.get(variant)) is not None:
            return "hash (git_lfs_concat)", want
        if locked := entry.variant_hashes or entry.metadata_sha256:
            raise LockFileError(
                f"the lock file has no hash for {self._where(variant)}, the build this system "
                f"loads; it locks {', '.join(sorted(locked))}. Run `kernelhub lock` again"
            )
        return None

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if (wanted := self._wanted(snapshot.variant_name)) is None:
            return
        from ..hub import hashes as hub_hashes
        kind, want = wanted
        if kind == "metadata sha256":
            actual = hashlib.sha256(snapshot.verified.metadata_bytes).hexdigest()
        else:  # each file hashed the way its hub stores it (LFS use recorded at fetch)
            lfs = hub_hashes.read_lfs_record(snapshot.cached) if snapshot.cached else frozenset()
            actual = hub_hashes.variant_dir_hash(snapshot.verified.copy, lfs)
        if actual != want:
            raise IntegrityError(
                f"refusing to load {self._where(snapshot.variant_name)}: its {kind} is "
                f"{actual[:23]}…, but the lock file records {want[:23]}…; nothing of it was "
                "imported. Run `kernelhub cache clear` and `kernelhub download` if the cache "
                "is damaged, or `kernelhub lock` if the lock is stale"
            )

    def key(self) -> object:
        return self.entry.key()


class ArchValidator(Validator):
    """A build without code for this GPU fails here, not at its first kernel launch."""

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.system is not None:
            check_archs(snapshot.variant_name, snapshot.verified.metadata.backend.archs,
                        snapshot.system)


class SigstoreValidator(Validator):
    """The org's sigstore policy (:mod:`kernelhub.signing.sigstore`) on the variant's
    bundle, verified over the snapshot's ``metadata.json`` bytes — the ones whose digests
    the imported files matched. The bundle is read beside the snapshot: it is signature
    material, never imported."""

    def __init__(self, repo_id: str, policy: SigstorePolicy) -> None:
        self.repo_id, self.policy = repo_id, policy

    def on_snapshot(self, snapshot: Snapshot) -> None:
        from ..signing import sigstore as sigstore_signatures  # imported by validators_for

        try:
            bundle: bytes | None = (snapshot.verified.source
                                    / sigstore_signatures.BUNDLE_FILE).read_bytes()
        except FileNotFoundError:
            bundle = None
        sigstore_signatures.check_sigstore(self.repo_id, snapshot.variant_name,
                                           snapshot.verified.metadata_bytes, bundle, self.policy)

    def key(self) -> object:
        return self.policy.token


class MinverValidator(Validator):
    """Refuse a variant that needs a newer ecosystem format than this kernelhub reads."""

    def on_snapshot(self, snapshot: Snapshot) -> None:
        needed = snapshot.verified.metadata.extra.get(KERNELS_MINVER)
        if needed is not None:  # most variants need no newer format than 0.17's
            from ..formats.minver import check_kernels_minver
            check_kernels_minver(needed, snapshot.variant_name)


class DirtyBuildValidator(Validator):
    """Warn once about a variant built from uncommitted sources (it still loads)."""

    def on_snapshot(self, snapshot: Snapshot) -> None:
        metadata = snapshot.verified.metadata
        if dirty_sources(metadata.provenance):
            from ..formats.provenance import warn_if_dirty
            warn_if_dirty(metadata.provenance, metadata.name, snapshot.variant_name)


def validators_for(repo_id: str | None, request: KernelRequest | None = None
                   ) -> list[Validator]:
    """Every check a load gets, in the order they run: a hub load of ``request`` (of
    ``repo_id``); a variant inside the kernel cache named by its path (``request`` None:
    naming it trusts it, but its org's signing policies apply as to any load from a hub);
    a local build (``repo_id`` None too: the format checks only)."""
    checks: list[Validator] = []
    if repo_id is not None:
        org = repo_id.partition("/")[0]
        if request is not None:
            checks.append(TrustValidator(request.trust_remote_code))
        if (policy := policy_for(org)).active:
            checks.append(SignatureValidator(policy))
        if request is not None and request.lock is not None:
            checks.append(LockValidator(request.lock))
        if settings.sigstore_section() is not None:  # an org may have a sigstore policy
            from ..signing import sigstore as sigstore_signatures

            if (sigstore := sigstore_signatures.sigstore_policy_for(org)) is not None:
                checks.append(SigstoreValidator(repo_id, sigstore))
        if request is not None and request.check_arch:
            checks.append(ArchValidator())
    return [*checks, MinverValidator(), DirtyBuildValidator()]
