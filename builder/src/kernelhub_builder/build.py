"""Build the planned variants of one kernel: hash → (skip | render → compile → assemble).

For each buildable variant the source hash gives the variant id. When
``<out>/<kernel>/<variant>/metadata.json`` already has that id and its files verify, the
variant is up to date and no compiler starts. Otherwise the build is rendered into
``<out>/.work/<kernel>/<variant>/`` (kept, so ninja reuses objects), compiled, staged
and swapped into place; a failure anywhere leaves the previous build untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from kernelhub.errors import KernelHubError
from kernelhub.metadata import read_metadata, verify_variant
from kernelhub.variants import Variant, VariantKind

from . import BUILDER_VERSION
from .assemble import Artifacts, install_staged, stage_variant
from .compile import run_ninja
from .manifest_model import KernelManifest, Project
from .matrix import PlannedVariant
from .progress import say
from .render import render_ops_py, render_variant, settings_flags
from .source_hash import BuildSettings, build_id
from .toolchains import Toolchain, detect_toolchains
from .torch_env import TorchEnv, ensure_torch_env, minor_str

WORK_DIR = ".work"


@dataclass(frozen=True)
class BuildResult:
    """One variant after ``build_kernel``."""

    kernel: str
    variant: str
    variant_id: str
    path: Path
    compiled: bool
    """Whether a compiler ran for this variant."""
    up_to_date: bool
    """True when an existing build already had this id: nothing was done."""


def default_out_dir(project: Project) -> Path:
    return project.build_dir or project.root / "build"


def build_kernel(
    project: Project,
    kernel: KernelManifest,
    planned: list[PlannedVariant],
    out_dir: Path,
) -> list[BuildResult]:
    """Build every buildable planned variant of ``kernel`` into ``out_dir/<kernel>/``."""
    results = []
    for plan in planned:
        if plan.buildable:
            results.append(build_variant(project, kernel, plan.variant, out_dir))
    return results


def build_variant(
    project: Project, kernel: KernelManifest, variant: Variant, out_dir: Path
) -> BuildResult:
    out_dir = Path(out_dir)
    work_dir = out_dir / WORK_DIR / kernel.name / variant.name
    work_dir.mkdir(parents=True, exist_ok=True)
    # Two builders on one out dir must not swap the same variant at once.
    with FileLock(str(work_dir.parent / f"{variant.name}.lock")):
        return _build_locked(project, kernel, variant, out_dir, work_dir)


def _build_locked(
    project: Project, kernel: KernelManifest, variant: Variant, out_dir: Path, work_dir: Path
) -> BuildResult:
    dest = out_dir / kernel.name / variant.name
    compiles = variant.kind in (VariantKind.COMPILED, VariantKind.STABLE_ABI)
    env = _torch_env(project, variant) if compiles else None
    cxx = host_cxx() if compiles else None
    vid = _variant_id(kernel, variant, env, cxx)

    if _is_current(dest, vid):
        say(f"{kernel.name} {variant.name}: up to date (no compile work)")
        return BuildResult(kernel.name, variant.name, vid, dest, compiled=False, up_to_date=True)

    if env is None or cxx is None:  # pure Python: the package and _ops.py, nothing to compile
        artifacts, compiled = Artifacts(render_ops_py(variant, vid, so_name=None)), False
    else:
        artifacts, compiled = _compile(kernel, variant, vid, env, cxx, work_dir)
    staging = stage_variant(kernel, variant, vid, artifacts, out_dir,
                            env.torch_release if env else None)
    install_staged(staging, dest)
    say(f"{kernel.name} {variant.name}: built {dest}")
    return BuildResult(kernel.name, variant.name, vid, dest, compiled=compiled, up_to_date=False)


def _variant_id(
    kernel: KernelManifest, variant: Variant, env: TorchEnv | None, cxx: Toolchain | None
) -> str:
    settings = BuildSettings(
        variant=variant.name,
        compiler=compiler_identity(cxx) if cxx else None,
        flags=settings_flags(kernel, variant, env) if env else (),
        torch_version=env.torch_version if env else None,
        release=kernel.release,
        builder_version=BUILDER_VERSION,
    )
    vid, _ = build_id(kernel, variant.backend or "universal", settings)
    return vid


def _compile(
    kernel: KernelManifest, variant: Variant, vid: str, env: TorchEnv, cxx: Toolchain,
    work_dir: Path,
) -> tuple[Artifacts, bool]:
    """Render and run ninja; returns the artifacts and whether a compiler ran."""
    say(f"{kernel.name} {variant.name}: building {vid} against torch {env.torch_version}")
    rendered = render_variant(kernel, variant, vid, env, cxx=str(cxx.path), nvcc=host_nvcc(),
                              work_dir=work_dir)
    compiled = run_ninja(work_dir, f"{kernel.name} {variant.name}")
    assert rendered.so_name is not None
    return Artifacts(rendered.ops_py.read_text(), work_dir / rendered.so_name), compiled


def _torch_env(project: Project, variant: Variant) -> TorchEnv:
    # A stable-ABI build compiles against its minimum torch: what it targets.
    assert variant.torch is not None and variant.compute is not None
    minor = minor_str(variant.torch)
    env = ensure_torch_env(minor, project.torch_pins.get(minor))
    if variant.backend == "cuda":
        wanted = variant.compute.version_str
        have = ".".join((env.cuda or "").split(".")[:2])
        if have != wanted:
            built_for = f"CUDA {env.cuda}" if env.cuda else "CPU only"
            raise KernelHubError(
                f"{variant.name} needs a torch {minor} built for CUDA {wanted}, but the "
                f"torch {minor} environment has torch {env.torch_version} ({built_for}); pin "
                f'one in kernels.toml, e.g. [toolchain.torch] "{minor}" = "torch=={minor}.0" '
                f"from the cu{wanted.replace('.', '')} index, or build other variants with "
                "--variant"
            )
    return env


def _is_current(dest: Path, vid: str) -> bool:
    """An existing build of exactly this id whose files still match their digests."""
    if not (dest / "metadata.json").is_file():
        return False
    try:
        metadata = read_metadata(dest)
        if metadata.id != vid:
            return False
        verify_variant(dest, metadata)
    except KernelHubError:
        return False
    return True


def host_cxx() -> Toolchain:
    """The host C++ compiler ($CXX, else c++/g++/clang++ on PATH)."""
    found = detect_toolchains().cxx
    if found is None:
        raise KernelHubError(
            "no working C++ compiler found; install g++ or clang++, or point CXX at one"
        )
    return found


def host_nvcc() -> str | None:
    found = detect_toolchains().nvcc
    return str(found.path) if found is not None else None


def compiler_identity(cxx: Toolchain) -> str:
    """What the id hashes about the compiler: a new compiler means a new build id."""
    return f"{cxx.path.name} {cxx.version or '?'} ({cxx.description})"
