"""Assemble a built variant in a staging dir, then swap it into place.

Everything is written to ``<out>/<kernel>/.staging-<variant>-<random>/`` first — package
files, the generated ``_ops.py``, the shared library, and last ``metadata.json`` with the
digests of all of them; the import check then describes the kernel in ``symbols.json``,
and metadata.json is written again to cover it — and only then renamed over the previous
build. A failure at
any point before the rename leaves the previous build as it was.

With ``general.build-layout = "zip"`` (edition 6) the kernel's package (torch-ext/<name>)
goes into ``<id>.zip`` instead of loose files; what the builder generates for the
variant (``_ops.py``, the shared library, which no Python can import from an archive)
stays beside it, where the package's import path also looks. Such a variant needs a
loader that reads the layout (the ecosystem's 0.19): metadata.json says
``"build-layout": "zip"`` and ``"kernels-minver"``, so an older loader refuses it with
"upgrade" instead of failing to import.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelhub.deps import KERNEL_DEPENDS
from kernelhub.formats.metadata import (
    NO_LICENSE,
    BackendInfo,
    Metadata,
    compute_digests,
    write_metadata,
)
from kernelhub.formats.minver import KERNELS_MINVER, ZIP_LAYOUT_KERNELS
from kernelhub.formats.provenance import kernel_git_status
from kernelhub.formats.symbols import SYMBOLS_FILE
from kernelhub.formats.variants import Variant, VariantKind
from kernelhub.formats.zip_layout import BUILD_LAYOUT, archive_name
from kernelhub.value_types import replace

from .. import BUILDER_VERSION
from ..layout import STAGING_PREFIX, check_replaceable
from ..manifest import KernelManifest
from ..plan.cuda_archs import metadata_archs, read_compiled_archs


@dataclass(frozen=True)
class Artifacts:
    """What the compile step produced for one variant."""

    ops_py_text: str
    so_path: Path | None = None


def stage_variant(
    kernel: KernelManifest,
    variant: Variant,
    vid: str,
    artifacts: Artifacts,
    dest: Path,
    torch_version: str | None,
    extra: dict[str, Any] | None = None,
) -> tuple[Path, Metadata]:
    """Write a complete variant into a new staging dir beside ``dest``, where
    :func:`install_staged` then moves it (a rename on one filesystem).

    metadata.json is written once, last, with ``extra`` keys (the ABI record) included;
    the dir and the metadata are returned so checks need not read it back.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{variant.name}-", dir=dest.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a build dir is not a secret
        if kernel.build_layout == "zip":
            zip_package(kernel, staging / archive_name(vid))
        else:
            copy_package(kernel, staging)
        (staging / "_ops.py").write_text(artifacts.ops_py_text)
        if artifacts.so_path is not None:
            shutil.copy2(artifacts.so_path, staging / artifacts.so_path.name)
        metadata = Metadata(
            name=kernel.name,
            id=vid,
            version=kernel.version,
            release=kernel.release,
            backend=backend_info(kernel, variant, artifacts.so_path),
            digest_files=compute_digests(staging),
            license=kernel.license or NO_LICENSE,
            python_depends=python_depends(kernel, variant),
            provenance=provenance(kernel.root),
            torch=torch_version,
            extra={**(extra or {}), **format_keys(kernel, variant)},
        )
        write_metadata(staging, metadata)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging, metadata


def add_symbols(staging: Path, metadata: Metadata, symbols: str) -> Metadata:
    """Write ``symbols.json`` (what the import check found the kernel exports) into the
    staged variant and metadata.json again with the digest covering it; the new metadata."""
    (staging / SYMBOLS_FILE).write_text(symbols)
    metadata = replace(metadata, digest_files=compute_digests(staging))
    write_metadata(staging, metadata)
    return metadata


def package_files(kernel: KernelManifest) -> list[tuple[Path, Path]]:
    """(source, path in the package) of the torch-ext/<name>/ files whose suffix [torch]
    pyext lists (default: py, pyi), in a stable order."""
    source = kernel.package_dir
    if not source.is_dir():
        return []
    suffixes = {f".{ext.lstrip('.')}" for ext in kernel.torch.pyext}
    return [(path, path.relative_to(source)) for path in sorted(source.rglob("*"))
            if path.is_file() and "__pycache__" not in path.relative_to(source).parts
            and path.suffix in suffixes]


def copy_package(kernel: KernelManifest, dest: Path) -> None:
    """The package as files under ``dest`` (build-layout "files")."""
    for path, rel in package_files(kernel):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


ZIP_DATE = (1980, 1, 1, 0, 0, 0)
"""Every entry's timestamp: the zip format's epoch, so the archive's bytes depend on the
package's contents only (two builds of the same sources write the same file)."""


def zip_package(kernel: KernelManifest, archive: Path) -> None:
    """The package in one archive (build-layout "zip"): entries in path order, stored
    uncompressed (no zlib version changes the bytes), one timestamp, mode 644."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for path, rel in package_files(kernel):
            entry = zipfile.ZipInfo(rel.as_posix(), ZIP_DATE)
            entry.external_attr = 0o100644 << 16
            out.writestr(entry, path.read_bytes())


def format_keys(kernel: KernelManifest, variant: Variant) -> dict[str, Any]:
    """What metadata.json carries from edition 6: the layout (with the loader version it
    needs) and the kernels this variant loads at run time, each only when it says
    something, so a variant without them is written as before."""
    keys: dict[str, Any] = {}
    if kernel.build_layout != "files":
        keys[BUILD_LAYOUT] = kernel.build_layout
        keys[KERNELS_MINVER] = ZIP_LAYOUT_KERNELS
    if depends := kernel.kernel_depends_for(variant.backend):
        keys[KERNEL_DEPENDS] = [d.to_json() for d in depends]
    return keys


def python_depends(kernel: KernelManifest, variant: Variant) -> list[str]:
    """general.python-depends plus the variant backend's own (general.<backend>), less
    what torch itself provides (triton: see check_layout.TORCH_PROVIDED)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ..check.package import TORCH_PROVIDED

    def provided(dep: str) -> bool:
        try:
            return Requirement(dep).name.lower() in TORCH_PROVIDED
        except InvalidRequirement:
            return False

    extra = kernel.backend_python_depends.get(variant.backend or "", ())
    return [d for d in dict.fromkeys((*kernel.python_depends, *extra)) if not provided(d)]


def backend_info(
    kernel: KernelManifest, variant: Variant, so_path: Path | None = None
) -> BackendInfo:
    """The backend and its archs: for a compiled GPU variant, read from the binary.

    A compiled CUDA variant lists the capabilities its fatbins really hold
    (:func:`read_compiled_archs`), ROCm the gfx targets of its offload bundles; what
    build.toml requested is only used for pure-Python variants, which compile nothing.
    """
    if variant.kind is VariantKind.UNIVERSAL or variant.backend is None:
        return BackendInfo("universal")
    if so_path is not None and variant.backend == "cuda":
        return BackendInfo("cuda", metadata_archs(read_compiled_archs(so_path)))
    if so_path is not None and variant.backend == "rocm":
        return BackendInfo("rocm", read_rocm_archs(so_path))
    parts = kernel.parts_for(variant.backend)
    if variant.backend == "cuda":
        archs = [*kernel.torch.cuda_capabilities, *(c for p in parts for c in p.cuda_capabilities)]
    elif variant.backend == "rocm":
        archs = [*kernel.torch.rocm_archs, *(a for p in parts for a in p.rocm_archs)]
    else:
        archs = []
    return BackendInfo(variant.backend, sorted(dict.fromkeys(archs)))


def read_rocm_archs(so_path: Path) -> list[str]:
    """gfx targets of the clang offload bundles in a HIP binary (``.hip_fatbin``).

    Bundle entry ids read ``hipv4-amdgcn-amd-amdhsa--gfx90a[:xnack-]``; the target
    name is what ``rocm-archs`` lists, so that is what metadata records.
    """
    data = so_path.read_bytes()
    found = re.findall(rb"amdgcn-amd-amdhsa--(gfx[0-9a-f]+(?::[a-z]+[+-])*)", data)
    return sorted({m.decode() for m in found})


def provenance(kernel_root: Path) -> dict:
    """The ecosystem's provenance shape; the kernel's commit only when it is in git.

    ``dirty`` as the ecosystem means it: tracked files under the kernel differ from the
    commit (a SHA-1 or SHA-256 object id), so the commit does not name the sources the
    build was made from — loaders warn about such a build. Untracked files (the build
    output itself, in a repository that does not ignore it) do not count.
    """
    result: dict = {"kernel-builder": {"version": BUILDER_VERSION}}
    commit = _git(kernel_root, "rev-parse", "HEAD")
    status = commit and _git(kernel_root, "status", "--porcelain", "--untracked-files=no",
                             "--", ".")
    kernel = kernel_git_status(commit, bool(status))
    if kernel is not None:
        result["kernel"] = kernel
    return result



def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              check=False)
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def install_staged(staging: Path, dest: Path) -> None:
    """Replace ``dest`` with ``staging``: old aside, new in, old removed (only a built
    variant is ever replaced: :func:`~kernelhub_builder.layout.check_replaceable`)."""
    check_replaceable(dest)
    aside = None
    if dest.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".old-{dest.name}-", dir=dest.parent))
        aside.rmdir()
        dest.rename(aside)
    try:
        staging.rename(dest)
    except BaseException:
        if aside is not None:
            aside.rename(dest)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
