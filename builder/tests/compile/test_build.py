"""Building real variants: real compiler, real torch environments, real loads.

The fixture project (tests/fixtures/project) holds an ATen kernel (``scale``), a
stable-ABI kernel (``scale_stable``) and a pure-Python one (``relu_py``). Builds are
session-scoped so each compile happens once per run; tests that change sources work on
their own copy (``scratch``) so they cannot disturb the others.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import read_metadata, verify_variant
from kernelhub.formats.variants import parse_variant
from kernelhub_builder import BUILDER_VERSION, layout
from kernelhub_builder.check.kernel_tests import run_kernel_tests
from kernelhub_builder.compile import build
from kernelhub_builder.compile.build import BuildResult, build_kernel, build_variant
from kernelhub_builder.errors import CompileError
from kernelhub_builder.manifest import KernelManifest, Project, load_kernel, load_project
from kernelhub_builder.plan.matrix import filter_variants, plan_variants
from kernelhub_builder.plan.torch_env import (
    MARKER_FILE,
    ensure_torch_env,
    loader_dependencies_digest,
)

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "project"
SCALE_213 = "torch213-cxx11-cpu-x86_64-linux"
STABLE_213 = "torch-stable-abi213-cpu-x86_64-linux"


@dataclass
class Built:
    project: Project
    out: Path
    results: dict[str, BuildResult]

    def kernel(self, name: str) -> KernelManifest:
        return load_kernel(self.project.kernel_dir(name), self.project)


def _copy_project(dest: Path) -> Project:
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return load_project(dest)


def _build(project: Project, kernel_name: str, out: Path, *patterns: str) -> list[BuildResult]:
    kernel = load_kernel(project.kernel_dir(kernel_name), project)
    planned = filter_variants(plan_variants(project, kernel), list(patterns))
    return build_kernel(project, kernel, planned, out)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """scale for torch 2.13, scale_stable (ABI 2.13) and relu_py, built once."""
    root = tmp_path_factory.mktemp("built")
    project = _copy_project(root / "project")
    out = root / "out"
    results = [
        *_build(project, "scale", out, SCALE_213),
        *_build(project, "scale_stable", out, STABLE_213),
        *_build(project, "relu_py", out),
    ]
    return Built(project, out, {f"{r.kernel}/{r.variant}": r for r in results})


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A separate copy of the project whose sources tests may change."""
    root = tmp_path_factory.mktemp("scratch")
    project = _copy_project(root / "project")
    out = root / "out"
    results = _build(project, "scale", out, SCALE_213)
    return Built(project, out, {f"{r.kernel}/{r.variant}": r for r in results})


def _snapshot(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_build_writes_a_complete_verified_variant(built: Built) -> None:
    result = built.results[f"scale/{SCALE_213}"]
    assert result.compiled and not result.up_to_date
    variant_dir = built.out / "scale" / SCALE_213
    assert result.path == variant_dir
    so_name = f"{result.variant_id}.abi3.so"
    assert sorted(p.name for p in variant_dir.iterdir()) == sorted(
        ["__init__.py", "_ops.py", so_name, "metadata.json", "symbols.json"]
    )
    metadata = verify_variant(variant_dir)
    assert metadata.name == "scale"
    assert metadata.id == result.variant_id
    assert metadata.id.startswith("_scale_cpu_") and len(metadata.id) == len("_scale_cpu_") + 10
    assert (metadata.version, metadata.release, metadata.license) == (1, "1.2.0", "Apache-2.0")
    assert (metadata.backend.type, metadata.backend.archs) == ("cpu", [])
    assert metadata.torch == "2.13.0"
    # The fixture copy is not in git, so provenance names only the builder.
    assert metadata.provenance == {"kernel-builder": {"version": BUILDER_VERSION}}
    assert set(metadata.digest_files) == {"__init__.py", "_ops.py", so_name, "symbols.json"}
    # What the import check found the kernel exports (kernelhub describe-api reads it).
    symbols = json.loads((variant_dir / "symbols.json").read_text())
    assert symbols["module"] == result.variant_id and symbols["schema_version"] == 1
    assert [f["name"] for f in symbols["functions"]] == ["scale"]
    ops_py = (variant_dir / "_ops.py").read_text()
    assert f"torch.ops.{result.variant_id}" in ops_py and so_name in ops_py
    # Nothing half-done is left next to the variant.
    assert [p.name for p in (built.out / "scale").iterdir()] == [SCALE_213]


def test_compiled_library_registers_ops_under_the_variant_id(built: Built) -> None:
    result = built.results[f"scale/{SCALE_213}"]
    with open(result.path / f"{result.variant_id}.abi3.so", "rb") as f:
        elf = ELFFile(f)
        dynamic = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
        needed = {t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
        symbols = {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()}
    assert {"libc10.so", "libtorch_cpu.so"} <= needed
    assert f"PyInit_{result.variant_id}" in symbols  # REGISTER_EXTENSION(TORCH_EXTENSION_NAME)


def test_rebuild_of_unchanged_sources_runs_no_compiler(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    variant_dir = built.out / "scale" / SCALE_213
    work_dir = layout.scratch_dir(built.out) / "scale" / SCALE_213
    assert not (built.out / ".work").exists()  # scratch is beside the builds, not among them
    before = (_snapshot(variant_dir), _snapshot(work_dir))

    def no_compiler(*args: object, **kwargs: object) -> bool:
        raise AssertionError("ninja was started for an up-to-date variant")

    monkeypatch.setattr(build, "run_ninja", no_compiler)
    (again,) = _build(built.project, "scale", built.out, SCALE_213)
    assert again.up_to_date and not again.compiled
    assert again.variant_id == built.results[f"scale/{SCALE_213}"].variant_id
    assert (_snapshot(variant_dir), _snapshot(work_dir)) == before


def test_pure_python_variant_has_package_ops_and_metadata_but_no_library(built: Built) -> None:
    result = built.results["relu_py/torch-cpu"]
    assert not result.compiled
    files = sorted(str(p.relative_to(result.path)) for p in result.path.rglob("*") if p.is_file())
    assert files == ["__init__.py", "_ops.py", "layers/__init__.py", "metadata.json",
                     "symbols.json"]
    metadata = verify_variant(result.path)
    assert metadata.torch is None and metadata.backend.type == "cpu"
    ops_py = (result.path / "_ops.py").read_text()
    assert "load_library" not in ops_py and f"torch.ops.{result.variant_id}" in ops_py


def test_stable_abi_variant_links_only_the_c_shim(built: Built) -> None:
    result = built.results[f"scale_stable/{STABLE_213}"]
    assert result.compiled
    with open(result.path / f"{result.variant_id}.abi3.so", "rb") as f:
        dynamic = next(s for s in ELFFile(f).iter_sections() if isinstance(s, DynamicSection))
        needed = {t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
    assert "libtorch_cpu.so" in needed  # where torch's stable C shim lives
    assert not needed & {"libtorch.so", "libtorch_python.so"}
    assert read_metadata(result.path).torch == "2.13.0"


def test_stable_abi_variant_loads_and_passes_under_every_torch(built: Built) -> None:
    kernel = built.kernel("scale_stable")
    runs, skipped = run_kernel_tests(built.project, kernel, built.out)
    assert skipped == []
    assert [(r.variant, r.torch) for r in runs] == [(STABLE_213, "2.13"), (STABLE_213, "2.14")]
    for run in runs:
        assert run.passed, run.output
        assert "1 passed" in run.output


def test_builder_test_passes_on_the_built_fixture(built: Built) -> None:
    runs, _ = run_kernel_tests(built.project, built.kernel("scale"), built.out)
    assert [(r.variant, r.torch, r.passed) for r in runs] == [(SCALE_213, "2.13", True)], (
        runs[0].output if runs else "no runs"
    )


def test_changed_source_rebuilds_with_a_new_id(scratch: Built) -> None:
    kernel_dir = scratch.project.kernel_dir("scale")
    header = kernel_dir / "scale_cpu" / "scale.h"  # a header of an include dir counts too
    dest = scratch.out / "scale" / SCALE_213
    old_id = read_metadata(dest).id
    original = header.read_text()
    header.write_text(original + "\n// a comment changes the content hash\n")
    try:
        (result,) = _build(scratch.project, "scale", scratch.out, SCALE_213)
    finally:
        header.write_text(original)
    assert result.compiled and not result.up_to_date
    assert result.variant_id != old_id
    assert verify_variant(dest).id == result.variant_id
    assert (dest / f"{result.variant_id}.abi3.so").is_file()
    assert not (dest / f"{old_id}.abi3.so").exists()


def test_compile_error_reports_the_compiler_and_keeps_the_previous_build(
    scratch: Built,
) -> None:
    source = scratch.project.kernel_dir("scale") / "scale_cpu" / "scale.cpp"
    dest = scratch.out / "scale" / SCALE_213
    before = _snapshot(dest)
    previous_id = read_metadata(dest).id
    original = source.read_text()
    source.write_text(original.replace("result[i] = in[i] * f;", "result[i] = in[i] * undeclared;"))
    try:
        with pytest.raises(CompileError) as caught:
            _build(scratch.project, "scale", scratch.out, SCALE_213)
    finally:
        source.write_text(original)
    message = str(caught.value)
    assert "scale.cpp" in message and "undeclared" in message and "error" in message
    assert "undeclared" in caught.value.output
    assert _snapshot(dest) == before
    assert verify_variant(dest).id == previous_id
    assert [p.name for p in (scratch.out / "scale").iterdir()] == [SCALE_213]


def test_builder_test_fails_when_a_kernel_test_fails(scratch: Built) -> None:
    test_file = scratch.project.kernel_dir("scale") / "tests" / "test_scale.py"
    original = test_file.read_text()
    test_file.write_text(original.replace("x * 3.0)", "x * 4.0)"))
    try:
        runs, _ = run_kernel_tests(
            scratch.project, scratch.kernel("scale"), scratch.out
        )
    finally:
        test_file.write_text(original)
    assert len(runs) == 1 and not runs[0].passed
    assert runs[0].returncode == 1
    assert "1 failed" in runs[0].output and "test_scale_matches_torch" in runs[0].output


def test_build_variant_of_a_cuda_variant_needs_a_cuda_torch(built: Built) -> None:
    # The 2.13 env holds a CPU-only torch: a CUDA variant must be refused up front with a
    # message saying how to fix it, not fail deep inside a compile.
    variant = parse_variant("torch213-cxx11-cu130-x86_64-linux")
    with pytest.raises(KernelHubError, match=r"CPU only.*pin"):
        build_variant(built.project, built.kernel("scale"), variant, built.out)


def test_the_same_sources_elsewhere_get_the_same_id(built: Built, scratch: Built) -> None:
    # No absolute path reaches the hash: two checkouts of one tree agree on the id.
    assert built.project.root != scratch.project.root
    assert (built.results[f"scale/{SCALE_213}"].variant_id
            == scratch.results[f"scale/{SCALE_213}"].variant_id)


def test_torch_envs_are_ready_and_recorded(built: Built) -> None:
    env = ensure_torch_env("2.13", built.project.torch_pins.get("2.13"))
    assert env.torch_version.startswith("2.13.")
    assert env.python.is_file() and env.library_dir.is_dir()
    assert any((d / "torch" / "library.h").is_file() for d in env.include_dirs)
    marker = json.loads((env.root / MARKER_FILE).read_text())
    assert marker["torch"]["torch_version"] == env.torch_version
    # A loader that gains a dependency gets reinstalled: the marker knows which it has.
    assert marker["loader-deps"] == loader_dependencies_digest()
    # The loader is installed, so builder test can load variants there.
    done = subprocess.run([str(env.python), "-c", "import kernelhub.testing"], check=False)
    assert done.returncode == 0


def test_provenance_records_the_git_commit_and_dirtiness(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    kernel_dir = project.kernel_dir("relu_py")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(kernel_dir)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "relu"]):
        subprocess.run([*git, *args], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    (result,) = _build(project, "relu_py", tmp_path / "out")
    assert read_metadata(result.path).provenance["kernel"] == {"commit": head, "dirty": False}

    init = kernel_dir / "torch-ext" / "relu_py" / "__init__.py"
    init.write_text(init.read_text() + "\n# work in progress\n")
    (result,) = _build(project, "relu_py", tmp_path / "out")
    assert read_metadata(result.path).provenance["kernel"] == {"commit": head, "dirty": True}
