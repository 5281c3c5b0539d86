"""Every build variant of a kernel, and whether this host can build it (and if not, why).

The full matrix is: torch versions (the project's, narrowed by ``[torch] minver/maxver``)
x backends (the kernel's, within the project's) x systems (CUDA, ROCm and XPU build on
Linux only, Metal on aarch64-darwin only, CPU everywhere) x toolkit versions (the
project's CUDA/ROCm/XPU lists, CUDA narrowed by ``general.cuda``). A stable-ABI backend
gets one variant per compute and system instead of one per torch; pure-Python kernels
get ``torch-<backend>`` per backend, or one ``torch-universal``.

Names come from :mod:`kernelhub.formats.variants` (never formatted here), so the builder, the
loader and the Nix flake agree on them. A variant this host cannot build stays in the
plan with a reason saying what to change, so ``builder list-variants`` shows the whole
matrix and CI on other machines knows what is left for them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kernelhub.formats.variants import Compute, Variant, VariantKind
from kernelhub.system import platform_problem

from ..errors import VariantSelectionError
from ..manifest import KernelManifest, Project, version_key
from .toolchains import HostInfo, Toolchain, Toolchains, detect_host, detect_toolchains
from .torch_env import TorchEnv, peek_torch_env, torch_requirement

TorchEnvLookup = Callable[[str], "TorchEnv | None"]
"""torch minor → its ready env, or None where none exists yet (it is made on demand)."""

_OS_NAMES = {"linux": "Linux", "darwin": "macOS"}


@dataclass(frozen=True)
class PlannedVariant:
    """One cell of the matrix."""

    variant: Variant
    buildable: bool
    reason: str | None
    """Why this host cannot build it (None when buildable)."""
    torch_version: str | None
    """The torch major.minor whose toolchain env builds it (for stable ABI: the ABI's
    minimum); None for pure-Python variants."""

    @property
    def name(self) -> str:
        return self.variant.name


def plan_variants(
    project: Project,
    kernel: KernelManifest,
    host: HostInfo | None = None,
    toolchains: Toolchains | None = None,
    torch_envs: TorchEnvLookup | None = None,
) -> list[PlannedVariant]:
    """The kernel's full variant matrix, sorted by name, each marked buildable or not.

    ``torch_envs`` tells which torch envs exist already; by default (when the host is
    detected rather than described) the real ones are peeked at, so a CUDA variant whose
    env holds a torch of another CUDA (or a CPU-only torch) is reported as not buildable.
    An env that does not exist yet is judged by what it will hold
    (:func:`missing_env_problem`), so the count is the same before and after it is made.
    """
    if torch_envs is None and host is None and toolchains is None:
        def torch_envs(minor: str) -> TorchEnv | None:
            return peek_torch_env(minor, project.torch_pins.get(minor))
    if kernel.universal:
        return [PlannedVariant(Variant(VariantKind.UNIVERSAL), True, None, None)]
    backends = [b for b in kernel.backends if b in project.matrix.backends]
    if kernel.torch.noarch:
        planned = [
            PlannedVariant(Variant(VariantKind.NOARCH, compute=Compute(b)), True, None, None)
            for b in backends
        ]
        return sorted(planned, key=lambda p: p.name)

    host = host or detect_host()
    toolchains = toolchains or detect_toolchains()
    planned = []
    for variant, torch_version in _compiled_variants(project, kernel, backends):
        reason = _why_not_buildable(variant, host, toolchains)
        if reason is None and torch_envs is not None:
            env = torch_envs(torch_version)
            reason = (torch_env_problem(variant, torch_version, env) if env is not None
                      else missing_env_problem(project, variant, torch_version))
        planned.append(PlannedVariant(variant, reason is None, reason, torch_version))
    return sorted(planned, key=lambda p: p.name)


def _compiled_variants(
    project: Project, kernel: KernelManifest, backends: Iterable[str]
) -> Iterable[tuple[Variant, str]]:
    matrix = project.matrix
    torch_versions = kernel_torch_versions(project, kernel)
    for backend in backends:
        stable_abi = kernel.torch.stable_abi_for(backend)
        for compute in _computes(backend, project, kernel):
            for system in matrix.systems:
                arch, os_name = system.split("-", 1)
                if platform_problem(backend, os_name, arch) is not None:
                    continue
                if stable_abi is not None:
                    variant = Variant(
                        VariantKind.STABLE_ABI, version_key(stable_abi), compute, arch, os_name
                    )
                    yield variant, build_env_minor(project, variant)
                    continue
                for torch_version in torch_versions:
                    variant = Variant(
                        VariantKind.COMPILED, version_key(torch_version), compute, arch, os_name
                    )
                    yield variant, torch_version


def build_env_minor(project: Project, variant: Variant) -> str:
    """The torch minor whose env compiles ``variant``.

    A regular variant: its own torch. A CPU stable-ABI variant: the ABI minimum (what it
    targets). A GPU stable-ABI variant: the project's GPU torch (``[toolchain] gpu-torch``,
    default the newest torch of the matrix) when it is at least the minimum, with
    ``TORCH_TARGET_VERSION`` set to the ABI minimum so only stable APIs of that minimum
    are usable. GPU builds need a torch built for the variant's toolkit, and only that
    torch is pinned to one (torch 2.13 is CPU-only here, 2.14 is the CUDA 13.0 build,
    PyPI's 2.15 is CUDA 13.2); the stable ABI promises that the result loads on every
    torch from the minimum on, whichever headers compiled it.
    """
    assert variant.torch is not None
    minimum = f"{variant.torch[0]}.{variant.torch[1]}"
    if variant.kind is VariantKind.STABLE_ABI and variant.backend != "cpu":
        gpu = version_key(project.gpu_torch) if project.gpu_torch else None
        newer = [v for v in project.matrix.torch if version_key(v) >= variant.torch
                 and (gpu is None or version_key(v) <= gpu)]
        if newer:
            return max(newer, key=version_key)
    return minimum


def kernel_torch_versions(project: Project, kernel: KernelManifest) -> list[str]:
    """The project's torch versions within the kernel's ``[torch] minver/maxver``, oldest first."""
    low, high = kernel.torch.minver, kernel.torch.maxver
    return sorted(
        (
            v
            for v in project.matrix.torch
            if (low is None or version_key(v) >= version_key(low))
            and (high is None or version_key(v) <= version_key(high))
        ),
        key=version_key,
    )


def torch_env_problem(variant: Variant, minor: str, env: TorchEnv | None) -> str | None:
    """Why an existing torch env cannot build ``variant`` (toolkit mismatch), else None."""
    if env is None or variant.backend not in ("cuda", "rocm"):
        return None
    assert variant.compute is not None
    wanted = variant.compute.version_str
    label = "CUDA" if variant.backend == "cuda" else "ROCm"
    have = env.cuda if variant.backend == "cuda" else env.hip
    if have is not None and ".".join(have.split(".")[:2]) == wanted:
        return None
    built_for = f"built for {label} {have}" if have else f"without {label} (CPU only)"
    return (
        f"the torch {minor} environment holds torch {env.torch_version}, {built_for}; "
        f"the variant needs a torch built for {label} {wanted} (pin one in kernels.toml, "
        f'e.g. [toolchain.torch] "{minor}" = "torch=={minor}.0" from the {variant.compute.tag} '
        f"index, or delete {env.root} to recreate it, or build other variants with --variant)"
    )


def missing_env_problem(project: Project, variant: Variant, minor: str) -> str | None:
    """Why the torch ``minor`` env, not made yet, will not build GPU ``variant``.

    Its torch comes from the pin: one naming a local version (``torch==2.13.0+cu130``)
    says which toolkit it is built for; otherwise only the newest torch of the matrix is
    pinned to a GPU build (:func:`build_env_minor`), so an older one will be made CPU-only,
    and the variant is not counted as buildable until its env shows otherwise.
    """
    if variant.backend not in ("cuda", "rocm"):
        return None
    assert variant.compute is not None
    pin = project.torch_pins.get(minor) or f"torch=={minor}.*"
    local = next((s.version.partition("+")[2] for s in torch_requirement(minor, pin).specifier
                  if "+" in s.version), "")
    if local:
        if local == variant.compute.tag:
            return None
        return (f"the torch {minor} pin {pin!r} is a {local} build; the variant needs one "
                f"for {variant.compute.tag}")
    newest = max(project.matrix.torch, key=version_key)
    if minor == newest:
        return None
    return (f"no torch {minor} environment yet, and only the newest torch of the matrix "
            f"({newest}) is pinned to a GPU build: the env will be CPU-only. Pin a "
            f"{variant.compute.tag} build of torch {minor} in kernels.toml to build it")


def _computes(backend: str, project: Project, kernel: KernelManifest) -> list[Compute]:
    matrix = project.matrix
    if backend == "cuda":
        return [
            Compute.from_version_string("cuda", v)
            for v in matrix.cuda
            if (kernel.cuda_minver is None or version_key(v) >= version_key(kernel.cuda_minver))
            and (kernel.cuda_maxver is None or version_key(v) <= version_key(kernel.cuda_maxver))
        ]
    if backend in ("rocm", "xpu"):
        versions = matrix.rocm if backend == "rocm" else matrix.xpu
        return [Compute.from_version_string(backend, v) for v in versions]
    return [Compute(backend)]


_TOOLKIT_CHECKS: dict[str, tuple[str, str, str, str, str]] = {
    # backend: (Toolchains field, missing, version label, toolkit, how to fix a mismatch)
    "cuda": ("nvcc", "no nvcc found (set CUDA_HOME or put nvcc on PATH)", "nvcc is CUDA",
             "CUDA", "set CUDA_HOME to a CUDA {want} toolkit"),
    "rocm": ("hipcc", "no ROCm toolchain (hipcc not found; set ROCM_PATH or put hipcc on PATH)",
             "hipcc is ROCm", "ROCm", "set ROCM_PATH to a ROCm {want} install"),
    "xpu": ("icpx", "no oneAPI/SYCL compiler (icpx not found; source oneAPI's setvars.sh)",
            "icpx is oneAPI", "oneAPI", "source the setvars.sh of oneAPI {want}"),
}
"""What the host needs to build each toolkit backend, and what to say when it lacks it."""


def _why_not_buildable(variant: Variant, host: HostInfo, toolchains: Toolchains) -> str | None:
    """The first thing that stops this host from building the variant, said actionably."""
    system = variant.system
    if variant.os != host.os:
        where = _OS_NAMES.get(variant.os or "", variant.os)
        return f"wrong OS: {system} variants build on {where} (this host is {host.system})"
    if variant.arch != host.arch:
        return (
            f"wrong architecture: {system} variants build on an {variant.arch} host "
            f"(this host is {host.system}; cross-compiling is not supported)"
        )
    if toolchains.cxx is None:
        return "no C++ compiler (install g++ or clang++, or set CXX)"
    compute = variant.compute
    assert compute is not None
    if compute.backend in _TOOLKIT_CHECKS:
        tool, missing, label, wanted, fix = _TOOLKIT_CHECKS[compute.backend]
        return _version_problem(getattr(toolchains, tool), compute, missing=missing,
                                label=label, wanted=wanted, fix=fix)
    if compute.backend == "metal" and toolchains.metal is None:
        return "no Metal compiler (xcrun cannot find metal; install Xcode)"
    return None


def _version_problem(
    tool: Toolchain | None, compute: Compute, *, missing: str, label: str, wanted: str, fix: str
) -> str | None:
    if tool is None:
        return missing
    want = compute.version_str
    have = tool.major_minor
    if have is None:
        return f"cannot read the {wanted} version of {tool.path}; {fix.format(want=want)}"
    if have != compute.version:
        have_str = f"{have[0]}.{have[1]}"
        found = found_compute(tool)
        builds = (f"; it builds {found.tag} variants (add \"{have_str}\" to [matrix] "
                  f"{found.backend} in kernels.toml for those)" if found else "")
        return (f"{label} {have_str} but the variant needs {wanted} {want} "
                f"({fix.format(want=want)}){builds}")
    return None


def found_compute(tool: Toolchain) -> Compute | None:
    """The compute a found device toolchain builds, named as variants name it.

    nvcc 13.0 → cu130, hipcc of ROCm 7.0.1 → rocm70, icpx 2025.2.0 → xpu20252.
    """
    backend = {"nvcc": "cuda", "hipcc": "rocm", "icpx": "xpu"}.get(tool.kind)
    if backend is None or tool.major_minor is None:
        return None
    return Compute(backend, tool.major_minor)


def filter_variants(planned: list[PlannedVariant], patterns: list[str]) -> list[PlannedVariant]:
    """Keep the variants named by ``--variant`` (exact names or fnmatch globs), in plan order.

    A pattern that matches nothing is an error listing the valid names: a typo must not
    silently build nothing.
    """
    if not patterns:
        return list(planned)
    names = [p.name for p in planned]
    chosen: set[str] = set()
    for pattern in patterns:
        matched = [n for n in names if n == pattern or fnmatch.fnmatchcase(n, pattern)]
        if not matched:
            valid = "\n  ".join(names) or "(none: this kernel has no variants in the matrix)"
            raise VariantSelectionError(
                f"--variant {pattern!r} matches no variant of this kernel; valid names:\n  {valid}"
            )
        chosen.update(matched)
    return [p for p in planned if p.name in chosen]


def format_plan(planned: list[PlannedVariant]) -> str:
    """A plain-text table (variant, buildable, reason) for ``builder list-variants``."""
    header = ("VARIANT", "BUILDABLE", "REASON")
    rows = [(p.name, "yes" if p.buildable else "no", p.reason or "") for p in planned]
    width = max([len(header[0])] + [len(r[0]) for r in rows])
    lines = [f"{a:<{width}}  {b:<9}  {c}".rstrip() for a, b, c in [header, *rows]]
    return "\n".join(lines)


def plan_to_json(planned: list[PlannedVariant]) -> list[dict[str, Any]]:
    """JSON-ready rows for ``builder list-variants --json`` (keys are stable API)."""
    return [
        {
            "variant": p.name,
            "buildable": p.buildable,
            "reason": p.reason,
            "torch": p.torch_version,
            "kind": p.variant.kind.value,
            "backend": p.variant.backend,
            "compute": _compute_tag(p.variant),
            "system": p.variant.system,
        }
        for p in planned
    ]


def _compute_tag(variant: Variant) -> str | None:
    """cu130, rocm70, cpu…; None for pure-Python variants, which name only a backend."""
    if variant.compute is None or variant.kind is VariantKind.NOARCH:
        return None
    return variant.compute.tag
