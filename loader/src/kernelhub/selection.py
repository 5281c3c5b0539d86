"""Pick the build variant this runtime should load, and say why every other was not.

Preference, best first (DESIGN.md "Build variants"):

1. a compiled build for exactly this torch major.minor, arch and OS; for CUDA the same
   major with a minor no newer than the runtime's (the newest such minor wins); ROCm,
   XPU and CANN need the exact toolkit version, because none promises ABI compatibility
   across minor releases;
2. a torch stable-ABI build whose ABI is no newer than this torch (newest ABI first),
   with the same compute, arch and OS rules;
3. a tvm-ffi build for the installed apache-tvm-ffi major.minor;
4. a compiled SDK for this backend, then one for any backend;
5. ``torch-<backend>`` (pure Python for this backend), then ``mlx-metal`` where MLX is
   installed;
6. ``torch-universal``;
7. a pure SDK for this backend, then ``sdk``.

Compiled variants also need this CPython: a free-threaded build loads only ``abi3t``
parts, a GIL build both, and a name's ``cpython-<M>.<m>`` is the oldest Python it loads on.

Within a tier the order is one rule, the same for every repository: native CUDA code for
the device first (below), the newest stable ABI, the newest toolkit, then ``abi3`` before
``abi3t`` and the newest Python minimum first (as pip ranks wheel tags), then the current
naming generation before the legacy one and an untagged C++ ABI before ``-cxx11``. So
when a repository holds one build under both generations' names
(``torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux`` and ``torch213-cxx11-cpu-x86_64-linux``),
the current name wins wherever it loads; the legacy one is there for kernels <= 0.18.

Within a tier, when the caller knows the candidates' compiled CUDA archs (metadata
``backend.archs``) and the device's capability, builds with native code for the device
come first (exact SASS, then SASS of an older minor of the same major), then builds the
driver must JIT from PTX; builds with no code for the device are rejected, with the
device's capability and the build's archs in the reason. Ties break by name, so the
same inputs always give the same answer.

Metal builds need macOS >= :data:`METAL_MIN_MACOS`: they are compiled with the Metal
3.1 language of the macOS 14 SDK, which older systems cannot load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .errors import NoCompatibleVariantError, VariantNameError
from .formats.variants import (
    ABI3T_MIN_PYTHON,
    Naming,
    PythonTag,
    Variant,
    VariantKind,
    parse_variant,
)
from .system import SystemInfo
from .value_types import Record, field

METAL_MIN_MACOS: tuple[int, int] = (14, 0)
"""The oldest macOS whose Metal runtime loads our Metal builds (Metal language 3.1)."""

_NATIVE, _FAMILY, _JIT, _UNKNOWN = 0, 1, 2, 3
"""How a build's CUDA archs cover a device, best first (see :func:`arch_rank`)."""

_TIER = {
    VariantKind.COMPILED: 0,
    VariantKind.STABLE_ABI: 1,
    VariantKind.TVM_FFI: 2,
    VariantKind.NOARCH: 5,
    VariantKind.MLX: 6,
    VariantKind.UNIVERSAL: 7,
}


def _tier(variant: Variant) -> int:
    if variant.kind is not VariantKind.SDK:
        return _TIER[variant.kind]
    if variant.compiled:  # compiled SDKs after the frameworks' builds, backend-specific first
        return 3 if variant.compute is not None else 4
    return 8 if variant.compute is not None else 9


class Selection(Record, frozen=True):
    """The outcome of :func:`select_variant`."""

    chosen: str | None
    ranked: list[str] = field(default_factory=list)
    """Every loadable variant, best first; ``chosen`` is ``ranked[0]``."""
    rejected: dict[str, str] = field(default_factory=dict)
    """Variant name → why this runtime cannot load it."""

    def report(self) -> list[tuple[str, str]]:
        """(name, verdict) for every variant: accepted ones first in rank order."""
        rows = [
            (name, "chosen" if name == self.chosen else f"accepted (rank {i + 1})")
            for i, name in enumerate(self.ranked)
        ]
        rows += [(name, f"rejected: {why}") for name, why in sorted(self.rejected.items())]
        return rows


def _mm(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


_LABEL = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "cann": "CANN"}


def _compute_reason(variant: Variant, system: SystemInfo) -> str | None:
    """Why the variant's compute toolkit does not fit the runtime's, or None if it does."""
    assert variant.compute is not None
    built = variant.compute.version
    runtime = system.compute_version
    if not built:
        return None
    label = _LABEL[variant.compute.backend]
    if runtime is None:
        return f"{label} {_mm(built)} build, but this torch reports no {label} version"
    if variant.compute.backend == "cuda":
        if built[0] != runtime[0]:
            return (
                f"CUDA {_mm(built)} build, runtime CUDA {_mm(runtime)} needs a "
                f"{runtime[0]}.x build"
            )
        if built[1] > runtime[1]:
            return (
                f"CUDA {_mm(built)} build is newer than runtime CUDA {_mm(runtime)} "
                f"(needs {runtime[0]}.{runtime[1]} or older {runtime[0]}.x)"
            )
        return None
    if built != runtime:
        return f"{label} {_mm(built)} build, runtime {label} {_mm(runtime)} needs an exact match"
    return None


def _backend_reason(variant: Variant, system: SystemInfo) -> str | None:
    if variant.backend == system.backend:
        return None
    reason = f"variant is for {variant.backend}; this system runs {system.backend}"
    if variant.backend == "cpu":
        reason += " (pass backend='cpu' to load CPU builds)"
    return reason


def _python_reason(python: PythonTag, system: SystemInfo) -> str | None:
    """Why this CPython cannot import compiled parts built for ``python``, or None."""
    if python.abi == "abi3" and system.free_threaded:
        return "abi3 build; free-threaded Python loads only abi3t builds"
    if python.abi == "abi3t" and system.python < ABI3T_MIN_PYTHON:
        return (f"abi3t build needs Python {_mm(ABI3T_MIN_PYTHON)} or newer, this is Python "
                f"{_mm(system.python)}")
    if system.python < python.version:
        return (f"built for Python >= {_mm(python.version)}, this is Python "
                f"{_mm(system.python)}")
    return None


def _sdk_reason(variant: Variant, system: SystemInfo) -> str | None:
    if variant.compute is not None and (reason := _backend_reason(variant, system)):
        return reason
    if variant.python is not None:
        return _python_reason(variant.python, system) or _system_reason(variant, system) or (
            _compute_reason(variant, system) if variant.compute is not None else None)
    return None


def _system_reason(variant: Variant, system: SystemInfo) -> str | None:
    if variant.os != system.os:
        return f"{variant.os} build, this machine runs {system.os}"
    if variant.arch != system.arch:
        return f"{variant.arch} build, this machine is {system.arch}"
    return None


def _reject_reason(variant: Variant, system: SystemInfo) -> str | None:
    """Why ``variant`` cannot load on ``system``; None when it can."""
    if variant.kind is VariantKind.UNIVERSAL:
        return None
    if variant.kind is VariantKind.SDK:
        return _sdk_reason(variant, system)
    if reason := _backend_reason(variant, system):
        return reason
    if variant.kind is VariantKind.MLX:
        return None if system.mlx else "MLX build; MLX is not installed (pip install mlx)"
    if variant.kind is VariantKind.NOARCH:
        return None
    assert variant.torch is not None and variant.python is not None
    if reason := _python_reason(variant.python, system):
        return reason
    if variant.os != system.os:
        return f"{variant.os} build, this machine runs {system.os}"
    if variant.arch != system.arch:
        return f"{variant.arch} build, this machine is {system.arch}"
    if variant.backend == "metal" and system.macos is not None and (
        tuple(system.macos[:2]) < METAL_MIN_MACOS
    ):
        return (
            f"Metal build needs macOS {_mm(METAL_MIN_MACOS)} or newer, this is macOS "
            f"{_mm(system.macos)}"
        )
    if variant.kind is VariantKind.COMPILED:
        if variant.torch != system.torch:
            return f"built for torch {_mm(variant.torch)}, this is torch {_mm(system.torch)}"
        if variant.cxx_abi == "cxx11" and not system.cxx11_abi:
            return "built for the C++11 ABI, this torch uses the pre-C++11 ABI"
        if variant.cxx_abi == "cxx98" and system.cxx11_abi:
            return "built for the pre-C++11 ABI, this torch uses the C++11 ABI"
    elif variant.kind is VariantKind.TVM_FFI:
        if system.tvm_ffi is None:
            return (f"tvm-ffi {_mm(variant.torch)} build; apache-tvm-ffi is not installed "
                    f"(pip install 'apache-tvm-ffi=={_mm(variant.torch)}.*')")
        if variant.torch != system.tvm_ffi:
            return (f"built for tvm-ffi {_mm(variant.torch)}, this is tvm-ffi "
                    f"{_mm(system.tvm_ffi)}")
    elif variant.torch > system.torch:
        return (
            f"stable-ABI build needs torch >= {_mm(variant.torch)}, "
            f"this is torch {_mm(system.torch)}"
        )
    return _compute_reason(variant, system)


_ARCH = r"(\d+)\.(\d+)([af]?)(\+PTX)?"  # compiled where first used: CUDA builds only


def arch_rank(archs: Sequence[str], capability: tuple[int, int]) -> int | None:
    """How well a build compiled for ``archs`` runs on a device of ``capability``.

    ``archs`` are metadata ``backend.archs`` items in torch's notation ('8.0', '9.0a',
    '12.0+PTX'). SASS runs on the same major with an equal or newer minor (arch- or
    family-specific SASS, 'a'/'f', only where compiled for exactly that capability or,
    for 'f', its family); PTX is JIT-compiled for any device at least as new. Returns
    0 (exact SASS), 1 (SASS of an older minor), 2 (PTX only), 3 (archs unknown: an
    empty list, as pure-Python builds have) or None (no code for this device).
    """
    if not archs:
        return _UNKNOWN
    best: int | None = None
    for item in archs:
        m = re.fullmatch(_ARCH, item.strip())
        if not m:
            continue
        cap, suffix, ptx = (int(m[1]), int(m[2])), m[3], bool(m[4])
        if cap == capability:
            rank = _NATIVE
        elif suffix != "a" and cap[0] == capability[0] and cap[1] < capability[1]:
            rank = _FAMILY
        elif ptx and suffix == "" and cap < capability:
            rank = _JIT
        else:
            continue
        best = rank if best is None else min(best, rank)
    return best


def archs_reason(archs: Sequence[str], system: SystemInfo) -> str | None:
    """Why a CUDA build with ``archs`` cannot run on this system's device, else None."""
    if system.backend != "cuda" or system.capability is None:
        return None
    if arch_rank(archs, system.capability) is not None:
        return None
    major, minor = system.capability
    return (
        f"built for CUDA capabilities {', '.join(archs)}; this GPU has capability "
        f"{major}.{minor}, which none of them covers (no matching SASS, no older PTX)"
    )


def check_archs(name: str, archs: Sequence[str], system: SystemInfo) -> None:
    """Raise NoCompatibleVariantError when build ``name`` has no code for this GPU.

    The last guard before a fetched build is imported: a load that would only fail at
    the first kernel launch ("no kernel image is available") fails here, saying why.
    """
    reason = archs_reason(archs, system)
    if reason and system.capability:
        raise NoCompatibleVariantError(
            f"{name}: {reason}. Try a newer version of the kernel, or ask its maintainers "
            f"for a build that includes capability {_mm(system.capability)} "
            "(cuda-capabilities in build.toml)."
        )


def _rank_key(
    variant: Variant, arch: int
) -> tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, int], str]:
    """The one ranking rule (module docstring): tier, CUDA arch coverage, newest stable ABI,
    newest toolkit, Python ABI and minimum, naming generation, then the name."""
    stable = variant.kind is VariantKind.STABLE_ABI and variant.torch is not None
    torch_key = tuple(-p for p in variant.torch) if stable and variant.torch else ()
    compute_key = tuple(-p for p in variant.compute.version) if variant.compute else ()
    python = variant.python
    python_key = (int(python.abi != "abi3"), -python.version[0], -python.version[1]) \
        if python is not None else ()
    naming_key = (int(variant.naming is Naming.LEGACY), int(variant.cxx_abi is not None))
    return (_tier(variant), arch, torch_key, compute_key, python_key, naming_key,
            variant.name)


def select_variant(
    names: list[str], system: SystemInfo, archs: Mapping[str, Sequence[str]] | None = None
) -> Selection:
    """Rank the loadable variants among ``names`` for ``system``; explain the rest.

    ``archs`` maps variant names to their metadata ``backend.archs`` where the caller
    could read them cheaply (local builds, a hub that serves single files); variants
    missing from it are ranked as if their archs were unknown.
    """
    archs = archs or {}
    accepted: list[tuple[Variant, int]] = []
    rejected: dict[str, str] = {}
    for name in sorted(set(names)):
        try:
            variant = parse_variant(name)
        except VariantNameError:
            rejected[name] = "not a variant name"
            continue
        reason = _reject_reason(variant, system)
        rank = _UNKNOWN
        if reason is None and variant.backend == "cuda" and name in archs and system.capability:
            found = arch_rank(archs[name], system.capability)
            if found is None:
                reason = archs_reason(archs[name], system)
            else:
                rank = found
        if reason:
            rejected[name] = reason
        else:
            accepted.append((variant, rank))
    ranked = [v.name for v, rank in sorted(accepted, key=lambda a: _rank_key(*a))]
    return Selection(chosen=ranked[0] if ranked else None, ranked=ranked, rejected=rejected)
