"""Build the planned variants of one kernel: hash → (skip | render → compile → assemble).

Compiling is ninja on the rendered work dir (:func:`run_ninja`). ninja is the ``ninja``
pip package (a dependency) so every machine has the same one; a ninja on PATH is the
fallback for source trees used without installing.

For each buildable variant the source hash gives the variant id. When
``<out>/<kernel>/<variant>/metadata.json`` already has that id and its files verify, the
variant is up to date and no compiler starts. Otherwise the build is rendered into
``<out>-scratch/<kernel>/<variant>/`` (kept, so ninja reuses objects), compiled, staged
and swapped into place; a failure anywhere leaves the previous build untouched.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import NO_LICENSE, read_metadata, verify_variant
from kernelhub.formats.provenance import dirty_sources
from kernelhub.formats.variants import Variant

from .. import BUILDER_VERSION
from ..check.variant import (
    ABI_METADATA_KEY,
    AbiPolicy,
    abi_record,
    check_binary,
    check_staged,
    raise_if_fatal,
    static_checks,
)
from ..errors import BuilderError, CompileError, ToolchainMismatchError
from ..layout import lock_file, variant_dir, work_dir
from ..manifest import KernelManifest, Project
from ..plan.matrix import PlannedVariant, build_env_minor, torch_env_problem
from ..plan.toolchains import Toolchain, detect_toolchains
from ..plan.torch_env import TorchEnv, ensure_torch_env
from ..report import note, task, warn
from .assemble import Artifacts, add_symbols, install_staged, stage_variant
from .backends import DeviceTools, device_tools
from .portable import build_environment
from .render import VariantFlags, render_ops_py, render_variant, variant_flags
from .source_hash import BuildSettings, build_id


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
    dirty: bool = False
    """Built (now) from a tree with uncommitted changes; metadata.json marks it."""


def build_kernel(
    project: Project,
    kernel: KernelManifest,
    planned: list[PlannedVariant],
    out_dir: Path,
    *,
    abi: AbiPolicy = AbiPolicy.HOST,
    import_check: bool = True,
    strict: bool = False,
) -> list[BuildResult]:
    """Build every buildable planned variant of ``kernel`` into ``out_dir/<kernel>/``.

    Each fresh build is checked (:mod:`check`) before it replaces the previous one.
    A torch env only shows which CUDA it was built for once it exists, so on a fresh
    machine the plan can name a variant its env turns out unable to build: that variant
    is skipped with the reason, unless ``strict`` (the user asked for it by name).
    """
    results = []
    for plan in planned:
        if not plan.buildable:
            continue
        try:
            results.append(build_variant(project, kernel, plan.variant, out_dir, abi=abi,
                                         import_check=import_check))
        except ToolchainMismatchError as e:
            if strict:
                raise
            note(f"{kernel.name} {plan.name}: skipped: {e}")
    if any(r.dirty for r in results):
        warn(f"{kernel.name}: built from uncommitted changes under {kernel.root}; metadata.json "
             "marks these builds dirty and loaders warn about them — commit, then rebuild, "
             "for builds their commit names")
    if kernel.license is None and any(not r.up_to_date for r in results):
        warn(f"{kernel.name}: build.toml declares no general.license; metadata.json records "
             f'"{NO_LICENSE}" (SPDX: none stated), which the ecosystem\'s loaders accept — '
             'add license = "<SPDX id>" to say what users may do with the kernel')
    return results


def build_variant(
    project: Project, kernel: KernelManifest, variant: Variant, out_dir: Path,
    *, abi: AbiPolicy = AbiPolicy.HOST, import_check: bool = True,
) -> BuildResult:
    out_dir = Path(out_dir)
    work = work_dir(out_dir, kernel, variant)
    work.mkdir(parents=True, exist_ok=True)
    # Two builders on one out dir must not swap the same variant at once.
    with FileLock(str(lock_file(out_dir, kernel, variant))):
        return _build_locked(project, kernel, variant, out_dir, work, abi, import_check)


def _build_locked(
    project: Project, kernel: KernelManifest, variant: Variant, out_dir: Path, work_dir: Path,
    abi: AbiPolicy = AbiPolicy.HOST, import_check: bool = True,
) -> BuildResult:
    dest = variant_dir(out_dir, project, kernel, variant)
    env = _torch_env(project, variant) if variant.compiled else None  # resolved once
    cxx = host_cxx() if variant.compiled else None
    tools = device_tools(detect_toolchains(), variant.backend)
    flags = variant_flags(kernel, variant, env, tools) if env else None  # worked out once
    vid = _variant_id(kernel, variant, env, cxx, flags)

    if _is_current(dest, vid):
        if abi is not AbiPolicy.HOST:  # checked at build time, but maybe under host policy
            raise_if_fatal(f"{kernel.name} {variant.name}", static_checks(dest, variant), abi)
        note(f"{kernel.name} {variant.name}: up to date (no compile work)")
        return BuildResult(kernel.name, variant.name, vid, dest, compiled=False, up_to_date=True)

    extra = {}
    if env is None or cxx is None or flags is None:  # pure Python: nothing to compile
        artifacts, compiled = Artifacts(render_ops_py(variant, vid, so_name=None)), False
        binary = []
    else:
        artifacts, compiled = _compile(kernel, variant, vid, env, cxx, tools, flags, work_dir)
        assert artifacts.so_path is not None  # ELF rules read the library once, here
        binary = check_binary(artifacts.so_path, artifacts.so_path.parent, variant, vid)
        extra[ABI_METADATA_KEY] = abi_record(binary, abi)
    staging, metadata = stage_variant(kernel, variant, vid, artifacts, dest,
                                      env.torch_release if env else None, extra)
    try:  # a variant that breaks a rule never replaces the previous build
        report = check_staged(project, kernel, variant, staging, abi, metadata=metadata,
                              binary=binary, env=env, import_check=import_check)
        if report.symbols is not None:
            metadata = add_symbols(staging, metadata, report.symbols)
        else:
            why = "; ".join(report.skipped) or "its torch env's kernelhub describes no kernels"
            note(f"{kernel.name} {variant.name}: no symbols.json (the import check writes it: "
                 f"{why})")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    install_staged(staging, dest)
    note(f"{kernel.name} {variant.name}: built {dest}")
    return BuildResult(kernel.name, variant.name, vid, dest, compiled=compiled, up_to_date=False,
                       dirty=bool(dirty_sources(metadata.provenance)))


def _variant_id(
    kernel: KernelManifest, variant: Variant, env: TorchEnv | None, cxx: Toolchain | None,
    flags: VariantFlags | None,
) -> str:
    settings = BuildSettings(
        variant=variant.name,
        compiler=compiler_identity(cxx) if cxx else None,
        flags=flags.settings if flags else (),
        torch_version=env.torch_version if env else None,
        release=kernel.release,
        builder_version=BUILDER_VERSION,
    )
    vid, _ = build_id(kernel, variant.backend or "universal", settings)
    return vid


def _compile(
    kernel: KernelManifest, variant: Variant, vid: str, env: TorchEnv, cxx: Toolchain,
    tools: DeviceTools, flags: VariantFlags, work_dir: Path,
) -> tuple[Artifacts, bool]:
    """Render and run ninja; returns the artifacts and whether a compiler ran."""
    note(f"{kernel.name} {variant.name}: building {vid} against torch {env.torch_version}")
    rendered = render_variant(kernel, variant, vid, env, cxx=str(cxx.path), work_dir=work_dir,
                              tools=tools, flags=flags)
    compiled = run_ninja(work_dir, f"{kernel.name} {variant.name}")
    assert rendered.so_name is not None
    return Artifacts(rendered.ops_py.read_text(), work_dir / rendered.so_name), compiled


def _torch_env(project: Project, variant: Variant) -> TorchEnv:
    # A stable-ABI build compiles against its minimum torch (GPU ones: see build_env_minor).
    assert variant.torch is not None and variant.compute is not None
    minor = build_env_minor(project, variant)
    env = ensure_torch_env(minor, project.torch_pins.get(minor))
    if problem := torch_env_problem(variant, minor, env):
        raise ToolchainMismatchError(f"cannot build {variant.name}: {problem}")
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
        raise BuilderError(
            "no working C++ compiler found; install g++ or clang++, or point CXX at one"
        )
    return found


def compiler_identity(cxx: Toolchain) -> str:
    """What the id hashes about the compiler: a new compiler means a new build id."""
    return f"{cxx.path.name} {cxx.version or '?'} ({cxx.description})"


_PROGRESS_RE = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")


def ninja_program() -> str:
    try:
        import ninja

        bundled = shutil.which("ninja", path=ninja.BIN_DIR)
    except (ImportError, AttributeError):
        bundled = None
    found = bundled or shutil.which("ninja")
    if not found:
        raise CompileError("ninja was not found; install it with: pip install ninja", "")
    return found


def run_ninja(work_dir: Path, what: str) -> bool:
    """Build ``work_dir``; return whether ninja ran any command (False: all up to date).

    Progress lines (``[2/3] CXX …``) are shown as they come; the full output is kept and
    attached to the CompileError when a step fails.
    """
    cmd = [ninja_program(), "-C", str(work_dir)]
    lines: list[str] = []
    ran_something = False
    with task(f"compiling {what}") as progress, subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=build_environment(),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if m := _PROGRESS_RE.match(line):
                ran_something = True
                progress.step(m[3], int(m[1]), int(m[2]))
        returncode = proc.wait()
    output = "".join(lines)
    if returncode != 0:
        raise CompileError(f"compiling {what} failed (ninja exit {returncode}):",
                           _compiler_message(output))
    return ran_something


def _compiler_message(output: str) -> str:
    """Drop ninja's own bookkeeping lines; keep what the compiler said."""
    keep = [
        line for line in output.splitlines()
        if not line.startswith(("ninja: Entering directory", "ninja: build stopped"))
    ]
    return "\n".join(keep)
