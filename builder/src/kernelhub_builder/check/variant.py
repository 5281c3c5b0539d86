"""``builder check``: every rule a built variant must meet before it may be shipped.

Runs the static checks (files, Python imports and op names — :mod:`.package`; the
shared library's ABI and op registrations — :mod:`.abi`) and the import check in
the variant's torch environment (:mod:`.imports`), and collects one :class:`Violation`
per broken rule.

The ABI policy decides what a too-new host toolchain means. manylinux_2_28 is what a
published binary must meet; a workstation's gcc/glibc is usually newer, and a build made
with it runs here but not on an older distribution. So:

- ``--abi host`` (the default of ``builder build``): symbol versions beyond manylinux_2_28
  are reported and recorded in metadata.json (``"abi": {"manylinux_2_28": false, …}``),
  but the build succeeds, so kernels can be developed and tested on any machine;
- ``--abi manylinux_2_28``: they fail the build;
- ``builder publish`` re-checks every binary and refuses one that is not
  manylinux_2_28-compliant unless given ``--allow-host-abi`` (or
  ``KERNELHUB_ALLOW_HOST_ABI=1``): a host build never reaches a hub by accident.

All other rules (limited Python API, dependencies, stable ABI, layout, namespaces, the
import) fail under every policy: no toolchain choice excuses them.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import Metadata, read_metadata
from kernelhub.formats.variants import Variant, VariantKind

from ..layout import built_variants
from ..manifest import KernelManifest, Project
from ..plan.matrix import build_env_minor, torch_env_problem
from ..plan.toolchains import detect_host, detect_toolchains
from ..plan.torch_env import TorchEnv, ensure_torch_env
from ..report import warn
from .abi import (
    NotAnElfError,
    check_limited_api,
    check_needed,
    check_stable_abi,
    check_symbol_versions,
    read_elf,
)
from .imports import check_import
from .kernel_tests import torch_minors_for
from .package import check_files, check_library_namespaces, check_python
from .violation import (
    RULE_MANYLINUX,
    RULE_MISSING_FILE,
    CheckFailed,
    Violation,
)

__all__ = ["AbiPolicy", "CheckFailed", "CheckReport", "Violation", "check_kernel",
           "check_staged", "check_variant", "static_checks"]

ALLOW_HOST_ABI_ENV = "KERNELHUB_ALLOW_HOST_ABI"
ABI_METADATA_KEY = "abi"


class AbiPolicy(str, Enum):
    """Which C/C++ runtime a build may require."""

    HOST = "host"
    """Whatever the host toolchain produced; recorded, and refused by publish."""
    MANYLINUX_2_28 = "manylinux_2_28"
    """Only what a manylinux_2_28 system provides; anything newer fails the build."""


@dataclass
class CheckReport:
    """Every violation found in one variant, and what could not be checked."""

    variant: str
    path: Path
    violations: list[Violation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Checks not run here, each with the reason."""
    ops: list[str] = field(default_factory=list)
    """Ops the import registered (empty when the import check did not run)."""
    symbols: str | None = None
    """symbols.json as the import check described the kernel (None when it did not run)."""

    def fatal(self, policy: AbiPolicy) -> list[Violation]:
        return fatal_violations(self.violations, policy)


def allow_host_abi_default() -> bool:
    """``KERNELHUB_ALLOW_HOST_ABI=1`` (for a CI that publishes host builds on purpose)."""
    return os.environ.get(ALLOW_HOST_ABI_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def fatal_violations(violations: list[Violation], policy: AbiPolicy) -> list[Violation]:
    """The violations that fail under ``policy``: all of them, but symbol versions under host."""
    if policy is AbiPolicy.HOST:
        return [v for v in violations if v.rule != RULE_MANYLINUX]
    return list(violations)


def static_checks(
    variant_dir: Path, variant: Variant, metadata: Metadata | None = None,
    binary: list[Violation] | None = None,
) -> list[Violation]:
    """Layout, Python and ELF checks: no torch, no subprocess, milliseconds.

    A build passes the ``metadata`` it just wrote and the ``binary`` violations it already
    found, so nothing is read twice; otherwise both come from the directory.
    """
    variant_dir = Path(variant_dir)
    if metadata is None:
        try:
            metadata = read_metadata(variant_dir)
        except KernelHubError as e:
            return [Violation(RULE_MISSING_FILE, "metadata.json", "metadata.json", str(e))]
    found = check_files(variant_dir, variant, metadata)
    found += check_python(variant_dir, metadata)
    if binary is None:
        binary = binary_checks(variant_dir, variant, metadata.id)
    return found + binary


def binary_checks(variant_dir: Path, variant: Variant, variant_id: str) -> list[Violation]:
    """Every ELF rule for every shared library of a variant (none for pure Python)."""
    found: list[Violation] = []
    if variant.compiled:
        for so in sorted(Path(variant_dir).rglob("*.so")):
            found += check_binary(so, variant_dir, variant, variant_id)
    return found


def check_binary(so: Path, variant_dir: Path, variant: Variant, variant_id: str
                 ) -> list[Violation]:
    """Every ELF rule for one shared library of a compiled variant."""
    rel = so.relative_to(variant_dir).as_posix()
    try:
        info = read_elf(so)
    except NotAnElfError as e:
        return [Violation(RULE_MISSING_FILE, rel, rel, str(e))]
    found = check_symbol_versions(info, rel)
    found += check_limited_api(info, rel)
    found += check_needed(info, rel)
    if variant.kind is VariantKind.STABLE_ABI:
        found += check_stable_abi(info, rel)
    found += check_library_namespaces(info, rel, variant_id)
    return found


def check_variant(
    project: Project, kernel: KernelManifest, variant: Variant, variant_dir: Path,
    *, import_check: bool = True, metadata: Metadata | None = None,
    binary: list[Violation] | None = None, env: TorchEnv | None = None,
) -> CheckReport:
    """All checks of one built (or staged) variant dir.

    A build passes what it already has: the ``metadata`` it wrote, the ``binary``
    violations it found and the torch ``env`` that compiled the variant.
    """
    report = CheckReport(variant.name, Path(variant_dir),
                         static_checks(variant_dir, variant, metadata, binary))
    if not import_check:
        report.skipped.append("import check: not requested")
        return report
    python, why_not = _import_python(project, kernel, variant, env)
    if python is None:
        report.skipped.append(f"import check: {why_not}")
        return report
    if metadata is None:
        metadata = read_metadata(variant_dir)
    result = check_import(python, Path(variant_dir).resolve(), metadata)
    report.violations += result.violations
    report.ops = result.ops
    report.symbols = result.symbols
    return report


def _import_python(project: Project, kernel: KernelManifest, variant: Variant,
                   built_with: TorchEnv | None = None) -> tuple[Path | None, str]:
    """The torch env interpreter that can import ``variant`` here, or why there is none.

    ``built_with``: the env that just compiled the variant (then it is not looked up again).
    """
    host = detect_host().system
    if variant.compiled and variant.system != host:
        return None, f"built for {variant.system}, this host is {host}"
    if variant.compiled and variant.backend not in ("cpu", "cuda"):
        return None, f"no torch environment for {variant.backend} on this host"
    if variant.compiled:  # the env that built it: a CUDA one for CUDA variants
        minor = build_env_minor(project, variant)
    else:  # pure Python: the newest torch it is tested under
        minors = torch_minors_for(project, kernel, variant)
        if not minors:
            return None, "no torch of the build matrix can load it"
        minor = minors[-1]
    env = built_with if variant.compiled and built_with is not None else ensure_torch_env(
        minor, project.torch_pins.get(minor))
    if variant.compiled and (problem := torch_env_problem(variant, minor, env)):
        return None, problem
    return env.python, ""


def host_toolchain() -> str:
    """'gcc 12.2.0, glibc 2.36': what built a host binary, for messages."""
    cxx = detect_toolchains().cxx
    compiler = f"{cxx.path.name} {cxx.version}" if cxx and cxx.version else "the host compiler"
    libc, version = platform.libc_ver()
    return f"{compiler}, {libc or 'libc'} {version or '?'}"


def how_to_comply(violations: list[Violation]) -> str:
    """The advice printed once under a list of manylinux violations."""
    needs = sorted({v.detail.rsplit("@", 1)[-1] for v in violations if v.rule == RULE_MANYLINUX})
    return (
        f"this binary needs {', '.join(needs)} (built with {host_toolchain()}), newer than "
        "manylinux_2_28 allows. To ship it, build with a manylinux_2_28 toolchain (builder "
        "build inside a manylinux_2_28 container; nix build .#kernels uses this host's); "
        "to use it "
        "anyway on machines as new as this one, build with --abi host (the default) and "
        "publish with --allow-host-abi"
    )


def abi_record(violations: list[Violation], policy: AbiPolicy) -> dict:
    """What metadata.json says about the binary's ABI (key ``abi``)."""
    needs = sorted({v.detail.rsplit("@", 1)[-1] for v in violations if v.rule == RULE_MANYLINUX})
    return {"policy": policy.value, "manylinux_2_28": not needs, "too-new-versions": needs}


def format_violations(violations: list[Violation]) -> str:
    lines = [f"  {v}" for v in violations]
    if any(v.rule == RULE_MANYLINUX for v in violations):
        lines.append(f"  → {how_to_comply(violations)}")
    return "\n".join(lines)


def raise_if_fatal(label: str, violations: list[Violation], policy: AbiPolicy) -> None:
    """Raise :class:`CheckFailed` naming every violation that ``policy`` does not allow."""
    fatal = fatal_violations(violations, policy)
    if fatal:
        raise CheckFailed(
            f"{label}: {len(fatal)} check violation(s) (ABI policy {policy.value}):\n"
            f"{format_violations(fatal)}", fatal)


def check_kernel(
    project: Project, kernel: KernelManifest, out_dir: Path, *, import_check: bool = True
) -> list[CheckReport]:
    """Check every built variant of ``kernel`` under ``out_dir`` (none built: empty)."""
    found = built_variants(out_dir, project, kernel)
    return [check_variant(project, kernel, variant, path, import_check=import_check)
            for variant, path in found]


def check_staged(
    project: Project, kernel: KernelManifest, variant: Variant, staging: Path,
    policy: AbiPolicy, *, metadata: Metadata, binary: list[Violation],
    env: TorchEnv | None, import_check: bool = True,
) -> CheckReport:
    """Check a freshly staged variant before it replaces the previous build.

    ``metadata`` is what was written (with the ABI record of ``binary``, the ELF checks
    run before staging) and ``env`` the torch env that compiled it. Raises
    :class:`CheckFailed` on a violation the policy does not allow (the caller discards
    the staging dir, so the previous build stays); warns when the binary is a host-only
    build.
    """
    label = f"{kernel.name} {variant.name}"
    report = check_variant(project, kernel, variant, staging, import_check=import_check,
                           metadata=metadata, binary=binary, env=env)
    raise_if_fatal(label, report.violations, policy)
    host_only = [v for v in report.violations if v.rule == RULE_MANYLINUX]
    if host_only:
        warn(f"{label}: warning: not manylinux_2_28-compliant; {how_to_comply(host_only)}")
    return report
