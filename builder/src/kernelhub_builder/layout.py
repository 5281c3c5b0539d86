"""The output layout: where builds, their scratch space and their locks live on disk.

::

    <out>/<variant>/                    a built variant of a single-kernel repository
    <out>/<kernel>/<variant>/           a built variant of a project's kernel
    <builds>/.staging-<variant>-<rand>/ a variant being assembled, beside where it goes
    <out>-scratch/<kernel>/<variant>/     the rendered build tree and ninja's outputs
    <out>-scratch/<kernel>/<variant>.lock held while one builder builds that variant

``<out>`` is ``[build] dir`` of kernels.toml, else ``build/`` at the root. The scratch
space sits beside it (``build-scratch/``), not inside: whatever reads ``<out>`` — the
ecosystem's ``get_local_kernel``, a publisher, a scanner — finds only builds. Where variants
go inside it is the loader's format (:mod:`kernelhub.formats.build_layout`): a repository whose
root is the kernel (one build.toml, built in place) keeps them in ``build/<variant>``,
the layout of a hub repository, so the ecosystem's ``get_local_kernel(<repo>)`` reads
them. Every module that needs one of these paths asks here.
"""

from __future__ import annotations

from pathlib import Path

from kernelhub.errors import VariantNameError
from kernelhub.formats.build_layout import default_build_dir, kernel_builds_dir, variant_dirs
from kernelhub.formats.metadata import METADATA_FILE
from kernelhub.formats.variants import Variant, parse_variant

from .errors import OutputDirError
from .manifest import KernelManifest, Project

SCRATCH_SUFFIX = "-scratch"
STAGING_PREFIX = ".staging-"


def check_replaceable(dest: Path) -> None:
    """Refuse to replace ``dest`` unless it is missing or a built variant (a directory
    with a metadata.json): ``--out`` may name a directory of the user's, and nothing in it
    that the builder did not make may be lost."""
    if not dest.exists() and not dest.is_symlink():
        return
    if dest.is_symlink() or not dest.is_dir() or not (dest / METADATA_FILE).is_file():
        raise OutputDirError(f"{dest} exists and is not a built variant; nothing was replaced. "
                             "Move it away, or build into another --out")


def default_out_dir(project: Project) -> Path:
    """Where builds go when the command line does not say."""
    return project.build_dir or default_build_dir(project.root)


def is_single_kernel(project: Project, kernel: KernelManifest) -> bool:
    """Whether ``kernel`` is the repository itself (its build.toml at the root) rather
    than one kernel of a project."""
    return Path(kernel.root).resolve() == Path(project.root).resolve()


def kernel_dir(out_dir: Path, project: Project, kernel: KernelManifest) -> Path:
    """Where every built variant of one kernel lives: ``<out>/`` or ``<out>/<kernel>/``."""
    return kernel_builds_dir(out_dir, kernel.name, single_kernel=is_single_kernel(project, kernel))


def variant_dir(out_dir: Path, project: Project, kernel: KernelManifest, variant: Variant
                ) -> Path:
    """One built variant."""
    return kernel_dir(out_dir, project, kernel) / variant.name


def scratch_dir(out_dir: Path) -> Path:
    """``<out>-scratch/``: the builder's scratch space for builds into ``out_dir``."""
    out_dir = Path(out_dir)
    return out_dir.parent / f"{out_dir.name}{SCRATCH_SUFFIX}"


def work_dir(out_dir: Path, kernel: KernelManifest, variant: Variant) -> Path:
    """``<out>-scratch/<kernel>/<variant>/``: the build tree ninja works in."""
    return scratch_dir(out_dir) / kernel.name / variant.name


def lock_file(out_dir: Path, kernel: KernelManifest, variant: Variant) -> Path:
    """The lock two builders of the same variant on one out dir take in turn."""
    return scratch_dir(out_dir) / kernel.name / f"{variant.name}.lock"


def built_variants(out_dir: Path, project: Project, kernel: KernelManifest
                   ) -> list[tuple[Variant, Path]]:
    """The variant dirs of ``kernel`` that hold a build (staging and work dirs skipped)."""
    root = kernel_dir(out_dir, project, kernel)
    found = []
    for name in variant_dirs(root):
        try:
            found.append((parse_variant(name), root / name))
        except VariantNameError:
            continue
    return found
