"""``kernelhub check REPO``: check a published repository the way ``builder check``
checks a local build — every variant at the resolved commit, not only this system's.

Per variant: the name parses (the ecosystem's scheme), the files arrive intact (the
cache's fetch verifies each against metadata.json's digest, or the hub's own content
hashes for an ecosystem build without one), metadata.json parses and names the variant's
backend, the package has its ``__init__.py``, a compiled variant carries the
``<id>.abi3.so`` its metadata names, and the release's signature satisfies the org's
signing policy where one applies. Nothing is imported: checking runs no kernel code.
"""

from __future__ import annotations

from pathlib import Path

from .api import HubArg, Resolution, open_hub_arg, resolve_kernel
from .cache import KernelCache
from .errors import KernelHubError
from .formats.metadata import read_metadata, read_metadata_bytes
from .formats.release_manifest import metadata_sha256
from .formats.variants import VariantKind, parse_variant
from .load.resolve import release_files
from .signing.policy import check_release, signed_metadata_digest
from .signing.trust import policy_for
from .value_types import Record, field


class VariantReport(Record):
    variant: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _check_variant(resolution: Resolution, variant: str, cache: KernelCache) -> VariantReport:
    report = VariantReport(variant)
    try:
        parsed = parse_variant(variant)
    except KernelHubError as e:
        report.problems.append(f"name: {e}")
        return report
    try:
        path = cache.install(resolution.hub, resolution.repo_id, resolution.commit, variant)
        metadata = read_metadata(path)
    except KernelHubError as e:
        report.problems.append(str(e))
        return report
    if not (Path(path) / "__init__.py").is_file():
        report.problems.append("no __init__.py: not an importable package")
    if parsed.backend and metadata.backend.type != parsed.backend:
        report.problems.append(f"metadata.json says backend {metadata.backend.type!r}, the "
                               f"variant name says {parsed.backend!r}")
    native = parsed.kind in (VariantKind.COMPILED, VariantKind.STABLE_ABI)
    if native and not (Path(path) / f"{metadata.id}.abi3.so").is_file():
        report.problems.append(f"a {parsed.kind.value} variant without {metadata.id}.abi3.so")
    return report


def check_repository(repo_id: str, version: int | str | None = None,
                     revision: str | None = None, *, hub: HubArg = None
                     ) -> tuple[Resolution, list[VariantReport]]:
    """Check every variant of ``repo_id`` at the resolved commit; nothing is imported."""
    hub = open_hub_arg(hub)
    resolution = resolve_kernel(repo_id, version, revision, hub=hub)
    if not resolution.variants:
        raise KernelHubError(f"{repo_id} at {resolution.ref} ({resolution.commit[:12]}) has "
                             "no builds under build/")
    cache = KernelCache()
    policy = policy_for(repo_id.partition("/")[0])
    manifest = None
    if policy.active:  # the org has a signing policy: the release must satisfy it
        manifest = check_release(release_files(resolution), policy, repo_id,
                                 resolution.ref, resolution.commit)
    reports = []
    for variant in resolution.variants:
        report = _check_variant(resolution, variant, cache)
        if report.ok and manifest is not None:
            where = f"{repo_id} at {resolution.ref} ({resolution.commit[:12]})"
            try:
                want = signed_metadata_digest(manifest, variant, where)
                path = cache.variant_dir(resolution.hub.key, repo_id, resolution.commit, variant)
                if metadata_sha256(read_metadata_bytes(path)) != want:
                    report.problems.append("signature: metadata.json is not the one the "
                                           "signed release covers")
            except KernelHubError as e:
                report.problems.append(f"signature: {e}")
        reports.append(report)
    return resolution, reports
