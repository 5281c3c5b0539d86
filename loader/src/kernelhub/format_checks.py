"""The 0.19 formats' load-time checks, shaped as the load pipeline's validators.

Each has the pipeline's four hooks (``on_request``, ``on_resolution``, ``on_snapshot``,
``key``; :mod:`kernelhub.load.validators`) and decides on the snapshot — the one read of
the variant that is then imported:

* :class:`MinverCheck` — ``kernels-minver`` no newer than the formats this kernelhub
  reads (:mod:`kernelhub.minver`);
* :class:`DirtyBuildCheck` — one warning for a build from a dirty tree
  (:mod:`kernelhub.provenance`);
* :class:`SigstoreCheck` — the org's sigstore policy on the variant's bundle, verified
  over the snapshot's ``metadata.json`` bytes (:mod:`kernelhub.sigstore_signatures`).
  The bundle itself is read beside the snapshot: it is signature material, checked
  against the bytes that are imported, never imported itself.
"""

from __future__ import annotations

from typing import Any

from .minver import KERNELS_MINVER, check_kernels_minver
from .provenance import warn_if_dirty
from .sigstore_signatures import BUNDLE_FILE, SigstorePolicy, check_sigstore, sigstore_policy_for


class _Check:
    def on_request(self, request: Any) -> None:
        """Before the hub is asked anything: nothing to decide yet."""

    def on_resolution(self, resolution: Any) -> None:
        """Before the variant is fetched: nothing to decide yet."""

    def on_snapshot(self, snapshot: Any) -> None:
        raise NotImplementedError

    def key(self) -> object:
        return None


class MinverCheck(_Check):
    def on_snapshot(self, snapshot: Any) -> None:
        check_kernels_minver(snapshot.metadata.extra.get(KERNELS_MINVER), snapshot.variant_name)


class DirtyBuildCheck(_Check):
    def on_snapshot(self, snapshot: Any) -> None:
        warn_if_dirty(snapshot.metadata.provenance, snapshot.metadata.name,
                      snapshot.variant_name)


class SigstoreCheck(_Check):
    """For a hub load whose org has a sigstore policy (:func:`sigstore_check_for`)."""

    def __init__(self, repo_id: str, policy: SigstorePolicy) -> None:
        self.repo_id, self.policy = repo_id, policy

    def on_snapshot(self, snapshot: Any) -> None:
        try:
            bundle: bytes | None = (snapshot.source / BUNDLE_FILE).read_bytes()
        except FileNotFoundError:
            bundle = None
        check_sigstore(self.repo_id, snapshot.variant_name, snapshot.metadata_bytes, bundle,
                       self.policy)

    def key(self) -> object:
        return self.policy.token


def sigstore_check_for(repo_id: str) -> SigstoreCheck | None:
    """The sigstore check a hub load of ``repo_id`` gets, or None where its org has no
    sigstore policy (then nothing is read and sigstore is never imported)."""
    policy = sigstore_policy_for(repo_id.partition("/")[0])
    return SigstoreCheck(repo_id, policy) if policy is not None else None
