"""Merge built variants from CI artifacts into one build dir, the way the publish job does.

Each build job uploads ``<kernel>/<variant>/…`` as one artifact; the publish job downloads
every artifact into its own directory and merges them here before ``builder publish``.
Artifacts come from other machines, so nothing is trusted: every variant must verify
against its metadata digests, carry a valid variant name and the kernel name of its
directory, and the same variant from two artifacts must be byte-identical (two jobs
building one variant differently is a broken matrix, not something to pick a winner in).
The merge stages into a temporary directory and renames each variant into place, so a
refused merge leaves the destination as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import METADATA_FILE, verify_variant
from kernelhub.formats.variants import parse_variant

from ..errors import ArtifactMergeError
from ..layout import check_replaceable


@dataclass(frozen=True)
class MergedVariant:
    kernel: str
    variant: str
    sources: tuple[Path, ...]
    """The artifact dirs that carried it (more than one only when they were identical)."""


def find_variants(artifact: Path) -> list[tuple[str, str, Path]]:
    """(kernel, variant, dir) for every ``<kernel>/<variant>/metadata.json`` in an artifact."""
    found = []
    for meta in sorted(Path(artifact).glob(f"*/*/{METADATA_FILE}")):
        variant_dir = meta.parent
        found.append((variant_dir.parent.name, variant_dir.name, variant_dir))
    return found


def merge_artifacts(artifacts: Iterable[Path], out_dir: Path) -> list[MergedVariant]:
    """Copy every variant of ``artifacts`` into ``out_dir/<kernel>/<variant>/``.

    A variant already in ``out_dir`` is replaced (the artifacts are the newer build).
    """
    chosen: dict[tuple[str, str], Path] = {}
    sources: dict[tuple[str, str], list[Path]] = {}
    for artifact in artifacts:
        artifact = Path(artifact)
        if not artifact.is_dir():
            raise ArtifactMergeError(f"artifact {artifact} is not a directory")
        variants = find_variants(artifact)
        if not variants:
            raise ArtifactMergeError(
                f"artifact {artifact} holds no <kernel>/<variant>/{METADATA_FILE}; "
                "was it uploaded from the build dir's parent?"
            )
        for kernel, variant, path in variants:
            _verify(kernel, variant, path)
            key = (kernel, variant)
            if key in chosen and _digests(chosen[key]) != _digests(path):
                raise ArtifactMergeError(
                    f"{kernel} {variant} differs between artifacts {chosen[key].parents[1]} "
                    f"and {artifact}; two jobs built one variant differently. Nothing merged"
                )
            chosen.setdefault(key, path)
            sources.setdefault(key, []).append(artifact)

    out_dir = Path(out_dir)
    for kernel, variant in chosen:
        check_replaceable(out_dir / kernel / variant)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".merge-", dir=out_dir) as tmp:
        staged = {}
        for key, path in chosen.items():
            staged[key] = Path(tmp) / key[0] / key[1]
            shutil.copytree(path, staged[key])
        for (kernel, variant), path in sorted(staged.items()):
            dest = out_dir / kernel / variant
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists():
                shutil.rmtree(dest)  # a built variant: checked before anything moved
            path.rename(dest)
    return [MergedVariant(k, v, tuple(sources[(k, v)])) for k, v in sorted(chosen)]


def _verify(kernel: str, variant: str, path: Path) -> None:
    try:
        parse_variant(variant)
        metadata = verify_variant(path)
    except KernelHubError as exc:
        raise ArtifactMergeError(f"artifact variant {path} is not valid: {exc}") from None
    if metadata.name != kernel:
        raise ArtifactMergeError(
            f"{path}: metadata names kernel {metadata.name!r}, but it sits under {kernel!r}"
        )


def _digests(path: Path) -> dict[str, str]:
    return dict(verify_variant(path).digest_files)
