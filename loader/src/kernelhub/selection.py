"""Pick the build variant this runtime should load, and say why every other was not.

Preference, best first (DESIGN.md "Build variants"):

1. a compiled build for exactly this torch major.minor, arch and OS; for CUDA the same
   major with a minor no newer than the runtime's (the newest such minor wins); ROCm and
   XPU need the exact toolkit version, because neither promises ABI compatibility
   across minor releases;
2. a torch stable-ABI build whose ABI is no newer than this torch (newest ABI first),
   with the same compute, arch and OS rules;
3. ``torch-<backend>`` (pure Python for this backend);
4. ``torch-universal``.

Ties break by name, so the same inputs always give the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import VariantNameError
from .system import SystemInfo
from .variants import Variant, VariantKind, parse_variant

_TIER = {
    VariantKind.COMPILED: 0,
    VariantKind.STABLE_ABI: 1,
    VariantKind.NOARCH: 2,
    VariantKind.UNIVERSAL: 3,
}


@dataclass(frozen=True)
class Selection:
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


_LABEL = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU"}


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


def _reject_reason(variant: Variant, system: SystemInfo) -> str | None:
    """Why ``variant`` cannot load on ``system``; None when it can."""
    if variant.kind is VariantKind.UNIVERSAL:
        return None
    if reason := _backend_reason(variant, system):
        return reason
    if variant.kind is VariantKind.NOARCH:
        return None
    assert variant.torch is not None
    if variant.os != system.os:
        return f"{variant.os} build, this machine runs {system.os}"
    if variant.arch != system.arch:
        return f"{variant.arch} build, this machine is {system.arch}"
    if variant.kind is VariantKind.COMPILED:
        if variant.torch != system.torch:
            return f"built for torch {_mm(variant.torch)}, this is torch {_mm(system.torch)}"
        if variant.os == "linux" and not system.cxx11_abi:
            return "built for the C++11 ABI, this torch uses the pre-C++11 ABI"
    elif variant.torch > system.torch:
        return (
            f"stable-ABI build needs torch >= {_mm(variant.torch)}, "
            f"this is torch {_mm(system.torch)}"
        )
    return _compute_reason(variant, system)


def _rank_key(variant: Variant) -> tuple[int, tuple[int, ...], tuple[int, ...], str]:
    # Newer stable ABI first; for a fixed torch, the newest compatible toolkit first.
    torch_key = tuple(-p for p in variant.torch) if variant.kind is VariantKind.STABLE_ABI else ()
    compute_key = tuple(-p for p in variant.compute.version) if variant.compute else ()
    return _TIER[variant.kind], torch_key, compute_key, variant.name


def select_variant(names: list[str], system: SystemInfo) -> Selection:
    """Rank the loadable variants among ``names`` for ``system``; explain the rest."""
    accepted: list[Variant] = []
    rejected: dict[str, str] = {}
    for name in sorted(set(names)):
        try:
            variant = parse_variant(name)
        except VariantNameError:
            rejected[name] = "not a variant name"
            continue
        if reason := _reject_reason(variant, system):
            rejected[name] = reason
        else:
            accepted.append(variant)
    ranked = [v.name for v in sorted(accepted, key=_rank_key)]
    return Selection(chosen=ranked[0] if ranked else None, ranked=ranked, rejected=rejected)
