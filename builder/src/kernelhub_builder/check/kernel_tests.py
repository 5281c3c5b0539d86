"""``builder test``: run a kernel's own tests against each built variant this host can run.

Each run is ``<torch env python> -m pytest -p kernelhub.testing <kernel>/tests`` with
``KERNELHUB_TEST_VARIANT`` naming the variant dir (and, for tests written for the
ecosystem — ``import kernels`` then ``get_kernel(repo_id)`` — ``LOCAL_KERNELS`` mapping
the kernel's ``general.hub.repo-id`` to it): the loader verifies and imports the
built artefact, so the tests exercise exactly what would be published, never the
sources on sys.path. A stable-ABI variant runs under every torch of the matrix at or
above its ABI minimum — that it loads on all of them is the point of the stable ABI.

A pure-Python CUDA or XPU variant (``torch-cuda``, ``torch-xpu``) on a host without
that device still runs when its torch env has Triton: the tests then run with
``TRITON_INTERPRET=1``, Triton's CPU interpreter, so Triton kernels are checked
everywhere. (Such a kernel's tests must skip what the interpreter cannot do, as
any GPU test skips without a GPU.)
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernelhub.formats.variants import Variant, VariantKind

from ..errors import BuilderError
from ..layout import built_variants, kernel_dir
from ..manifest import KernelManifest, Project, version_key
from ..plan.matrix import kernel_torch_versions
from ..plan.toolchains import detect_host
from ..plan.torch_env import ensure_torch_env, minor_str
from ..report import task

_NO_TESTS_COLLECTED = 5  # pytest's exit status
_INTERPRETABLE_BACKENDS = ("cuda", "xpu")
"""Backends whose pure-Python (Triton) variants can run under TRITON_INTERPRET=1."""


@dataclass(frozen=True)
class TestRun:
    """One pytest run of one variant under one torch."""

    variant: str
    torch: str
    """The torch minor the tests ran under."""
    passed: bool
    returncode: int
    output: str

    # Not a test class, whatever pytest's collector thinks of the name.
    __test__ = False


@dataclass(frozen=True)
class Skipped:
    variant: str
    reason: str


def torch_minors_for(project: Project, kernel: KernelManifest, variant: Variant) -> list[str]:
    """The torch envs a variant is tested under."""

    matrix = kernel_torch_versions(project, kernel)
    if variant.kind is VariantKind.COMPILED:
        assert variant.torch is not None
        return [minor_str(variant.torch)]
    if variant.kind is VariantKind.STABLE_ABI:
        assert variant.torch is not None
        return [m for m in matrix if version_key(m) >= variant.torch]
    return matrix[-1:]  # pure Python: the newest torch of the matrix


def why_not_runnable(variant: Variant) -> str | None:
    """None when this host can run the variant; else the reason it cannot."""
    host = detect_host().system
    if variant.compiled and variant.system != host:
        return f"built for {variant.system}, this host is {host}"
    if variant.kind is not VariantKind.UNIVERSAL and variant.backend != "cpu":
        return f"needs a {variant.backend} device; only cpu variants are tested on this host"
    return None


def run_kernel_tests(
    project: Project, kernel: KernelManifest, out_dir: Path
) -> tuple[list[TestRun], list[Skipped]]:
    """Run the kernel's tests against each built, runnable variant."""
    tests_dir = kernel.root / "tests"
    if not tests_dir.is_dir():
        raise BuilderError(
            f"{kernel.name} has no tests directory ({tests_dir}); add tests for builder test "
            "to run"
        )
    variants = built_variants(out_dir, project, kernel)
    if not variants:
        raise BuilderError(
            f"no built variants of {kernel.name} under {kernel_dir(out_dir, project, kernel)}; "
            f"run builder build {kernel.name} first"
        )
    runs: list[TestRun] = []
    skipped: list[Skipped] = []
    for variant, path in variants:
        reason = why_not_runnable(variant)
        interpret = False
        if reason and _may_interpret(variant):
            interpret = True
        elif reason:
            skipped.append(Skipped(variant.name, reason))
            continue
        for minor in torch_minors_for(project, kernel, variant):
            if interpret and not _has_triton(project, minor):
                skipped.append(Skipped(
                    variant.name,
                    f"{reason}, and the torch {minor} env has no Triton for TRITON_INTERPRET=1",
                ))
                continue
            runs.append(
                _run_pytest(project, kernel, variant, path, minor, tests_dir, interpret)
            )
    return runs, skipped


def _may_interpret(variant: Variant) -> bool:
    return variant.kind is VariantKind.NOARCH and variant.backend in _INTERPRETABLE_BACKENDS


def _has_triton(project: Project, minor: str) -> bool:
    env = ensure_torch_env(minor, project.torch_pins.get(minor))
    done = subprocess.run([str(env.python), "-c", "import triton"], capture_output=True,
                          check=False)
    return done.returncode == 0


def variant_test_env(kernel: KernelManifest, path: Path, base: dict[str, str]) -> dict[str, str]:
    """``base`` as the environment in which a kernel's tests (or a ``builder shell``) see
    the built variant at ``path``: ``KERNELHUB_TEST_VARIANT`` names it and, for code
    written for the ecosystem (``kernels.get_kernel(repo_id)``), ``LOCAL_KERNELS`` maps
    the kernel's repo id to it."""
    child_env = dict(base)
    child_env["KERNELHUB_TEST_VARIANT"] = str(path.resolve())
    if kernel.repo_id:
        others = child_env.get("LOCAL_KERNELS")
        child_env["LOCAL_KERNELS"] = ":".join(
            filter(None, (f"{kernel.repo_id}={path.resolve()}", others)))
    # Keep __pycache__ out of the variant dir the tests import from.
    child_env["PYTHONDONTWRITEBYTECODE"] = "1"
    child_env.pop("PYTHONPATH", None)
    return child_env


def _run_pytest(
    project: Project, kernel: KernelManifest, variant: Variant, path: Path, minor: str,
    tests_dir: Path, interpret: bool = False,
) -> TestRun:
    env = ensure_torch_env(minor, project.torch_pins.get(minor))
    child_env = variant_test_env(kernel, path, dict(os.environ))
    if interpret:
        child_env["TRITON_INTERPRET"] = "1"
    # --confcutdir: conftest files above the kernel (a workspace's, which may well
    # ignore kernels-src/ for its own suite) must not decide what the kernel tests are.
    cmd = [str(env.python), "-m", "pytest", "-p", "kernelhub.testing", "-p",
           "no:cacheprovider", "--confcutdir", str(kernel.root), str(tests_dir), "-q"]
    how = " (TRITON_INTERPRET=1)" if interpret else ""
    with task(f"testing {kernel.name} {variant.name} under torch {minor}{how}"):
        done = subprocess.run(cmd, cwd=kernel.root, env=child_env, capture_output=True,
                              text=True, check=False)
    output = done.stdout + done.stderr
    if done.returncode == _NO_TESTS_COLLECTED:
        output += f"\npytest found no tests in {tests_dir}; a kernel without tests cannot pass\n"
    return TestRun(variant.name, minor, done.returncode == 0, done.returncode, output)
