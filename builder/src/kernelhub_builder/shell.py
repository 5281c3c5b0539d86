"""``builder shell``: the development and test environment of one built variant.

The ecosystem's kernel-builder opens Nix shells for this (``devshell``, ``testshell``).
Ours is the environment ``builder build`` and ``builder test`` already use, handed to the
author's own shell or to one command:

* the variant's torch environment first on ``PATH`` (its python has torch, kernelhub
  and pytest) and as ``VIRTUAL_ENV``;
* ``CPATH`` with the headers the variant compiles against — torch's and Python's, the
  generated ``registration.h`` of its build, the kernel's include directories — so an
  editor's language server or a quick ``c++ -fsyntax-only`` sees what the build sees;
* ``LOCAL_KERNELS`` and ``KERNELHUB_TEST_VARIANT`` as under ``builder test``, so
  ``kernels.get_kernel("<repo-id>")`` and the kernel's tests load the build;
* ``PYTHONDONTWRITEBYTECODE=1``: no ``__pycache__`` in the variant directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kernelhub.formats.variants import Variant

from .check.kernel_tests import torch_minors_for, variant_test_env, why_not_runnable
from .compile.render import GENERATED_DIR
from .errors import UsageError
from .layout import variant_dir, work_dir
from .manifest import KernelManifest, Project
from .plan.matrix import PlannedVariant, build_env_minor
from .plan.torch_env import TorchEnv, ensure_torch_env


@dataclass(frozen=True)
class Shell:
    """The environment of one variant, ready to hand to a process."""

    variant: Variant
    path: Path
    """The built variant's directory."""
    torch_env: TorchEnv
    env: dict[str, str]
    """The whole environment of the process to start."""
    said: tuple[str, ...]
    """What was set, one line each, for the user."""


def choose_variant(kernel: KernelManifest, planned: list[PlannedVariant]) -> PlannedVariant:
    """The first variant of the plan this host can build and run (``--variant`` names
    another); none is a one-line error saying why each was passed over."""
    for plan in planned:
        if plan.buildable and why_not_runnable(plan.variant) is None:
            return plan
    reasons = "; ".join(f"{p.name}: {p.reason or why_not_runnable(p.variant)}"
                        for p in planned[:3])
    raise UsageError(f"{kernel.name}: no variant both builds and runs on this host ({reasons}"
                     f"{'; …' if len(planned) > 3 else ''}); name one with --variant")


def shell_for(project: Project, kernel: KernelManifest, variant: Variant, out_dir: Path,
              base: dict[str, str] | None = None) -> Shell:
    """The environment of ``variant`` (built under ``out_dir``) on top of ``base``
    (default: this process's)."""
    path = variant_dir(out_dir, project, kernel, variant)
    if not (path / "metadata.json").is_file():
        raise UsageError(f"{kernel.name} {variant.name} is not built under {out_dir}; "
                         f"run builder build {kernel.name} --variant {variant.name}")
    # A compiled variant: the env that compiles it (its headers are the ones that count);
    # pure Python: the newest torch it is tested under.
    minors = [build_env_minor(project, variant)] if variant.compiled else torch_minors_for(
        project, kernel, variant)
    if not minors:
        raise UsageError(f"{kernel.name} {variant.name}: no torch of the build matrix loads it")
    minor = minors[-1]
    torch_env = ensure_torch_env(minor, project.torch_pins.get(minor))
    env = variant_test_env(kernel, path, dict(os.environ if base is None else base))
    bin_dir = torch_env.python.parent
    env["PATH"] = os.pathsep.join(filter(None, (str(bin_dir), env.get("PATH"))))
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    includes = _include_dirs(kernel, variant, out_dir, torch_env)
    env["CPATH"] = os.pathsep.join(filter(None, (*map(str, includes), env.get("CPATH"))))
    said = (
        f"variant      {variant.name} ({path})",
        f"torch        {torch_env.torch_version} in {bin_dir.parent} (first on PATH)",
        f"CPATH        {len(includes)} include dirs: the kernel's, the generated "
        "registration.h, torch's and Python's",
        *( (f"LOCAL_KERNELS {kernel.repo_id} → this variant",) if kernel.repo_id else ()),
    )
    return Shell(variant, path, torch_env, env, said)


def _include_dirs(kernel: KernelManifest, variant: Variant, out_dir: Path,
                  torch_env: TorchEnv) -> list[Path]:
    """What the compiler sees when it builds ``variant``, in the order it sees it."""
    dirs = [work_dir(out_dir, kernel, variant) / GENERATED_DIR]
    parts = kernel.parts_for(variant.backend or "")
    dirs += [kernel.root / d for d in dict.fromkeys(
        (*kernel.torch.include, *(d for p in parts for d in p.include)))]
    dirs += [*torch_env.include_dirs, torch_env.python_include_dir]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]
