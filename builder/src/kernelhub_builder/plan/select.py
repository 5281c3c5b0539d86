"""What a command works on: the project, the kernels named, the variants asked for.

The ``builder`` command and anything else that drives the builder choose the same way:
the nearest kernels.toml upward (else a build.toml in the directory itself, a kernel
repository built in place), kernels by build.toml name or kernels.toml entry, variants
by name or glob.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernelhub.errors import KernelHubError

from ..errors import UsageError
from ..manifest import KERNEL_FILE, PROJECT_FILE, KernelManifest, Project, load_kernels
from .matrix import PlannedVariant, filter_variants, plan_variants


def find_project(start: Path) -> Path:
    """The nearest kernels.toml at or above ``start``; else a build.toml in ``start``
    itself (a kernel author's own repository, built in place)."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / PROJECT_FILE).is_file():
            return directory / PROJECT_FILE
    if (start / KERNEL_FILE).is_file():
        return start / KERNEL_FILE
    raise UsageError(
        f"no {PROJECT_FILE} in {start} or any parent directory, and no {KERNEL_FILE} in "
        f"{start}; run builder inside a kernel project or repository, or pass --project PATH"
    )


def select_kernels(project: Project, names: Sequence[str]) -> list[KernelManifest]:
    """The named kernels (by build.toml name or kernels.toml entry), or all of them."""
    kernels = load_kernels(project)
    if not names:
        return kernels
    by_name = {k.name: k for k in kernels}
    by_name.update({entry: k for entry, k in zip(project.kernels, kernels, strict=True)})
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(
            f"unknown kernel {', '.join(map(repr, unknown))}; this project has: "
            f"{', '.join(k.name for k in kernels) or 'none'}"
        )
    chosen: dict[str, KernelManifest] = {}
    for n in names:
        chosen.setdefault(by_name[n].name, by_name[n])
    return list(chosen.values())


def select_variants(
    project: Project, kernels: list[KernelManifest], patterns: list[str]
) -> dict[str, list[PlannedVariant]]:
    """Per kernel, the planned variants ``patterns`` select (all when none given).

    A pattern only has to match in some kernel: ``--variant 'torch213-*'`` over a
    project that also holds pure-Python kernels is not a typo.
    """
    plans = {k.name: plan_variants(project, k) for k in kernels}
    if not patterns:
        return plans
    chosen: dict[str, list[PlannedVariant]] = {}
    for pattern in patterns:
        hits = {}
        for name, planned in plans.items():
            try:
                hits[name] = filter_variants(planned, [pattern])
            except KernelHubError:
                continue
        if not hits:
            if len(plans) == 1:
                filter_variants(next(iter(plans.values())), [pattern])  # its message lists names
            raise UsageError(f"--variant {pattern!r} matches no variant of "
                             f"{', '.join(plans) or 'any kernel'}")
        for name, selected in hits.items():
            have = chosen.setdefault(name, [])
            have += [p for p in selected if p not in have]
    return chosen
