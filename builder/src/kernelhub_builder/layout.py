"""The output layout: where builds, their scratch space and their locks live on disk.

::

    <out>/<kernel>/<variant>/                 a built variant (what check, test, publish read)
    <out>/<kernel>/.staging-<variant>-<rand>/ a variant being assembled (never read as a build)
    <out>/.work/<kernel>/<variant>/           the rendered build tree and ninja's outputs
    <out>/.work/<kernel>/<variant>.lock       held while one builder builds that variant

``<out>`` is ``[build] dir`` of kernels.toml, else ``build/`` next to it. Every module that
needs one of these paths asks here, so the layout is written down once.
"""

from __future__ import annotations

from pathlib import Path

from kernelhub.errors import VariantNameError
from kernelhub.metadata import METADATA_FILE
from kernelhub.variants import Variant, parse_variant

from .manifest import KernelManifest, Project

WORK_DIR = ".work"
STAGING_PREFIX = ".staging-"


def default_out_dir(project: Project) -> Path:
    """Where builds go when the command line does not say."""
    return project.build_dir or project.root / "build"


def kernel_dir(out_dir: Path, kernel: KernelManifest) -> Path:
    """``<out>/<kernel>/``: every built variant of one kernel."""
    return Path(out_dir) / kernel.name


def variant_dir(out_dir: Path, kernel: KernelManifest, variant: Variant) -> Path:
    """``<out>/<kernel>/<variant>/``: one built variant."""
    return kernel_dir(out_dir, kernel) / variant.name


def work_dir(out_dir: Path, kernel: KernelManifest, variant: Variant) -> Path:
    """``<out>/.work/<kernel>/<variant>/``: the build tree ninja works in."""
    return Path(out_dir) / WORK_DIR / kernel.name / variant.name


def lock_file(out_dir: Path, kernel: KernelManifest, variant: Variant) -> Path:
    """The lock two builders of the same variant on one out dir take in turn."""
    return Path(out_dir) / WORK_DIR / kernel.name / f"{variant.name}.lock"


def built_variants(out_dir: Path, kernel: KernelManifest) -> list[tuple[Variant, Path]]:
    """Variant dirs under ``<out>/<kernel>/`` that hold a build (staging dirs skipped)."""
    found = []
    root = kernel_dir(out_dir, kernel)
    if root.is_dir():
        for path in sorted(root.iterdir()):
            if not (path / METADATA_FILE).is_file():
                continue
            try:
                found.append((parse_variant(path.name), path))
            except VariantNameError:
                continue
    return found
