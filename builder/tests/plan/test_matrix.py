"""The variant matrix: which variants a kernel has, and why this host can or cannot
build each one. Hosts and toolchains are passed in explicitly so every case is tested
on any machine; one test also plans with the real detection of this host."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from kernelhub.formats.variants import VariantKind, is_variant_name, parse_variant
from kernelhub_builder.manifest import KernelManifest, Matrix, Project, load_kernel, load_project
from kernelhub_builder.plan.matrix import (
    PlannedVariant,
    VariantSelectionError,
    filter_variants,
    format_plan,
    plan_to_json,
    plan_variants,
)
from kernelhub_builder.plan.toolchains import HostInfo, Toolchain, Toolchains, detect_toolchains

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ecosystem"
LINUX_X86 = HostInfo("linux", "x86_64")
MAC_ARM = HostInfo("darwin", "aarch64")

NOARCH_GPU_BROKEN = pytest.mark.skipif(
    not is_variant_name("torch-cuda"),
    reason="kernelhub.formats.variants rejects torch-cuda (Compute('cuda') needs a version); "
    "reported to the lead",
)


def tool(kind: str, version: str | None) -> Toolchain:
    return Toolchain(kind, Path(f"/opt/fake/bin/{kind}"), version)


GCC = tool("cxx", "12.2.0")
NVCC_130 = tool("nvcc", "13.0")
FULL_LINUX = Toolchains(
    cxx=GCC, nvcc=NVCC_130, hipcc=tool("hipcc", "7.0.1"), icpx=tool("icpx", "2025.2.0")
)


@pytest.fixture
def project() -> Project:
    return load_project(FIXTURES)


def kernel(project: Project, name: str) -> KernelManifest:
    return load_kernel(project.kernel_dir(name), project)


def write_kernel(root: Path, build_toml: str, files: list[str]) -> Path:
    (root / "torch-ext" / "demo").mkdir(parents=True)
    (root / "torch-ext" / "demo" / "__init__.py").write_text("")
    for rel in ["torch-ext/torch_binding.cpp", *files]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// not compiled in these tests\n")
    (root / "build.toml").write_text(textwrap.dedent(build_toml))
    return root


def by_name(planned: list[PlannedVariant]) -> dict[str, PlannedVariant]:
    return {p.name: p for p in planned}


def test_compiled_kernel_full_matrix(project: Project) -> None:
    planned = plan_variants(project, kernel(project, "activation"), LINUX_X86, FULL_LINUX)
    assert [p.name for p in planned] == [
        "torch213-cpu-aarch64-darwin",
        "torch213-cxx11-cpu-aarch64-linux",
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu130-aarch64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-metal-aarch64-darwin",
        "torch214-cpu-aarch64-darwin",
        "torch214-cxx11-cpu-aarch64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cu130-aarch64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
        "torch214-metal-aarch64-darwin",
    ]
    assert [p.name for p in planned if p.buildable] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cpu-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
    ]
    for p in planned:
        # Names come from kernelhub.formats.variants and round-trip through its parser.
        assert parse_variant(p.name) == p.variant
        assert p.variant.kind is VariantKind.COMPILED
        assert p.torch_version == "{}.{}".format(*p.variant.torch)
        assert (p.reason is None) == p.buildable


def test_reasons_for_other_systems_are_specific(project: Project) -> None:
    plan = by_name(plan_variants(project, kernel(project, "activation"), LINUX_X86, FULL_LINUX))
    assert plan["torch213-metal-aarch64-darwin"].reason == (
        "wrong OS: aarch64-darwin variants build on macOS (this host is x86_64-linux)"
    )
    assert plan["torch213-cxx11-cpu-aarch64-linux"].reason.startswith(
        "wrong architecture: aarch64-linux variants build on an aarch64 host "
        "(this host is x86_64-linux"
    )
    mac = by_name(
        plan_variants(project, kernel(project, "activation"), MAC_ARM, Toolchains(cxx=GCC))
    )
    assert mac["torch213-cxx11-cpu-x86_64-linux"].reason == (
        "wrong OS: x86_64-linux variants build on Linux (this host is aarch64-darwin)"
    )
    assert mac["torch213-cpu-aarch64-darwin"].buildable
    assert mac["torch213-metal-aarch64-darwin"].reason == (
        "no Metal compiler (xcrun cannot find metal; install Xcode)"
    )
    with_metal = Toolchains(cxx=GCC, metal=tool("metal", "32023.404"))
    mac = by_name(plan_variants(project, kernel(project, "activation"), MAC_ARM, with_metal))
    assert mac["torch214-metal-aarch64-darwin"].buildable


@pytest.mark.parametrize(
    ("toolchains", "reason"),
    [
        (Toolchains(cxx=GCC), "no nvcc found (set CUDA_HOME or put nvcc on PATH)"),
        (
            Toolchains(cxx=GCC, nvcc=tool("nvcc", "12.6")),
            "nvcc is CUDA 12.6 but the variant needs CUDA 13.0 "
            "(set CUDA_HOME to a CUDA 13.0 toolkit)",
        ),
        (
            Toolchains(cxx=GCC, nvcc=tool("nvcc", None)),
            "cannot read the CUDA version of /opt/fake/bin/nvcc",
        ),
        (Toolchains(nvcc=NVCC_130), "no C++ compiler (install g++ or clang++, or set CXX)"),
    ],
)
def test_cuda_reasons(project: Project, toolchains: Toolchains, reason: str) -> None:
    plan = by_name(plan_variants(project, kernel(project, "activation"), LINUX_X86, toolchains))
    cuda = plan["torch213-cxx11-cu130-x86_64-linux"]
    assert not cuda.buildable
    assert cuda.reason.startswith(reason)


def test_rocm_and_xpu_reasons(tmp_path: Path) -> None:
    root = write_kernel(
        tmp_path / "demo",
        """\
        [general]
        name = "demo"
        backends = ["rocm", "xpu"]
        [torch]
        src = ["torch-ext/torch_binding.cpp"]
        [kernel.demo_rocm]
        backend = "rocm"
        rocm-archs = ["gfx942"]
        src = ["rocm/demo.hip"]
        [kernel.demo_xpu]
        backend = "xpu"
        src = ["xpu/demo.cpp"]
        """,
        ["rocm/demo.hip", "xpu/demo.cpp"],
    )
    project = Project(root=tmp_path, kernels=(), matrix=Matrix(torch=("2.14",)))
    demo = load_kernel(root, project)
    absent = by_name(plan_variants(project, demo, LINUX_X86, Toolchains(cxx=GCC)))
    # No torch exists for ROCm or XPU on aarch64, so the matrix has no such variants.
    assert sorted(absent) == [
        "torch214-cxx11-rocm70-x86_64-linux",
        "torch214-cxx11-xpu20252-x86_64-linux",
    ]
    assert absent["torch214-cxx11-rocm70-x86_64-linux"].reason.startswith(
        "no ROCm toolchain (hipcc not found"
    )
    assert absent["torch214-cxx11-xpu20252-x86_64-linux"].reason.startswith(
        "no oneAPI/SYCL compiler (icpx not found"
    )
    old = Toolchains(cxx=GCC, hipcc=tool("hipcc", "6.4.0"), icpx=tool("icpx", "2025.1.0"))
    mismatched = by_name(plan_variants(project, demo, LINUX_X86, old))
    assert mismatched["torch214-cxx11-rocm70-x86_64-linux"].reason.startswith(
        "hipcc is ROCm 6.4 but the variant needs ROCm 7.0"
    )
    assert mismatched["torch214-cxx11-xpu20252-x86_64-linux"].reason.startswith(
        "icpx is oneAPI 2025.1 but the variant needs oneAPI 2025.2"
    )
    ok = by_name(plan_variants(project, demo, LINUX_X86, FULL_LINUX))
    assert ok["torch214-cxx11-rocm70-x86_64-linux"].buildable
    assert ok["torch214-cxx11-xpu20252-x86_64-linux"].buildable


def test_torch_minver_maxver_and_cuda_bounds_narrow_the_matrix(tmp_path: Path) -> None:
    root = write_kernel(
        tmp_path / "demo",
        """\
        [general]
        name = "demo"
        backends = ["cuda"]
        [general.cuda]
        minver = "12.8"
        [torch]
        src = ["torch-ext/torch_binding.cpp"]
        minver = "2.13"
        maxver = "2.14"
        [kernel.demo_cuda]
        backend = "cuda"
        src = ["cuda/demo.cu"]
        """,
        ["cuda/demo.cu"],
    )
    matrix = Matrix(
        torch=("2.12", "2.13", "2.14", "2.15"), systems=("x86_64-linux",), cuda=("12.6", "13.0")
    )
    project = Project(root=tmp_path, kernels=(), matrix=matrix)
    planned = plan_variants(project, load_kernel(root, project), LINUX_X86, FULL_LINUX)
    assert [p.name for p in planned] == [
        "torch213-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
    ]


def test_stable_abi_gives_one_variant_per_compute_and_system(project: Project) -> None:
    planned = plan_variants(project, kernel(project, "relu-stable"), LINUX_X86, FULL_LINUX)
    assert [p.name for p in planned] == [
        "torch-stable-abi213-cpu-aarch64-darwin",
        "torch-stable-abi213-cpu-aarch64-linux",
        "torch-stable-abi213-cpu-x86_64-linux",
        "torch-stable-abi213-cu130-aarch64-linux",
        "torch-stable-abi213-cu130-x86_64-linux",
    ]
    # GPU stable-ABI builds compile against the newest torch (see build_env_minor).
    assert {p.name: p.torch_version for p in planned if "cu130" in p.name} == {
        "torch-stable-abi213-cu130-aarch64-linux": "2.14",
        "torch-stable-abi213-cu130-x86_64-linux": "2.14",
    }
    assert {p.torch_version for p in planned if "-cpu-" in p.name} == {"2.13"}
    assert all(p.variant.kind is VariantKind.STABLE_ABI for p in planned)


def test_gpu_stable_abi_builds_in_the_gpu_torch_env_not_a_newer_one(project: Project) -> None:
    """PyPI's torch 2.15.0 is a CUDA 13.2 build: with a 13.0 matrix, GPU stable-ABI variants
    must keep compiling in the 2.14 (CUDA 13.0) env that ``[toolchain] gpu-torch`` names."""
    newer = replace(project, matrix=replace(project.matrix, torch=("2.13", "2.14", "2.15")))
    planned = plan_variants(newer, kernel(newer, "relu-stable"), LINUX_X86, FULL_LINUX)
    gpu = {p.name: p.torch_version for p in planned if "cu130" in p.name}
    assert set(gpu.values()) == {"2.15"}  # default: the newest torch of the matrix
    pinned = replace(newer, gpu_torch="2.14")
    planned = plan_variants(pinned, kernel(pinned, "relu-stable"), LINUX_X86, FULL_LINUX)
    assert {p.name: p.torch_version for p in planned if "cu130" in p.name} == {
        name: "2.14" for name in gpu}
    assert {p.torch_version for p in planned if "-cpu-" in p.name} == {"2.13"}
    compiled = plan_variants(pinned, kernel(pinned, "activation"), LINUX_X86, FULL_LINUX)
    assert "torch215-cxx11-cu130-x86_64-linux" in {p.name for p in compiled}


def test_backend_missing_from_stable_abi_table_builds_per_torch(tmp_path: Path) -> None:
    root = write_kernel(
        tmp_path / "demo",
        """\
        [general]
        name = "demo"
        backends = ["cpu", "cuda"]
        [torch]
        src = ["torch-ext/torch_binding.cpp"]
        stable-abi = { cpu = "2.13" }
        [kernel.demo_cpu]
        backend = "cpu"
        src = ["cpu/demo.cpp"]
        [kernel.demo_cuda]
        backend = "cuda"
        src = ["cuda/demo.cu"]
        """,
        ["cpu/demo.cpp", "cuda/demo.cu"],
    )
    project = Project(root=tmp_path, kernels=(), matrix=Matrix(systems=("x86_64-linux",)))
    planned = plan_variants(project, load_kernel(root, project), LINUX_X86, FULL_LINUX)
    assert [p.name for p in planned] == [
        "torch-stable-abi213-cpu-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
    ]


def test_universal_kernel_is_one_buildable_variant(project: Project) -> None:
    planned = plan_variants(project, kernel(project, "layer-norm-universal"), MAC_ARM, Toolchains())
    assert planned == [
        PlannedVariant(parse_variant("torch-universal"), True, None, None),
    ]


def test_noarch_cpu_and_metal_kernel_is_always_buildable(tmp_path: Path) -> None:
    root = write_kernel(
        tmp_path / "demo",
        '[general]\nname = "demo"\nbackends = ["metal", "cpu"]\n[torch-noarch]\n',
        [],
    )
    project = Project(root=tmp_path, kernels=())
    planned = plan_variants(project, load_kernel(root), LINUX_X86, Toolchains())
    assert [(p.name, p.buildable, p.torch_version) for p in planned] == [
        ("torch-cpu", True, None),
        ("torch-metal", True, None),
    ]
    rows = plan_to_json(planned)
    assert [(r["kind"], r["backend"], r["compute"], r["system"]) for r in rows] == [
        ("noarch", "cpu", None, None),
        ("noarch", "metal", None, None),
    ]


@NOARCH_GPU_BROKEN
def test_noarch_gpu_kernel_gets_one_variant_per_backend(project: Project) -> None:
    planned = plan_variants(project, kernel(project, "relu-triton"), LINUX_X86, Toolchains())
    assert [(p.name, p.buildable) for p in planned] == [
        ("torch-cuda", True),
        ("torch-rocm", True),
        ("torch-xpu", True),
    ]


def test_project_backends_limit_the_kernel_backends(project: Project) -> None:
    cpu_only = Project(root=project.root, kernels=(), matrix=Matrix(backends=("cpu",)))
    planned = plan_variants(cpu_only, kernel(project, "activation"), LINUX_X86, FULL_LINUX)
    assert {p.variant.backend for p in planned} == {"cpu"}


def test_plan_with_this_hosts_real_toolchains(project: Project) -> None:
    toolchains = detect_toolchains()
    if toolchains.cxx is None:
        pytest.skip("this host has no C++ compiler")
    plan = by_name(plan_variants(project, kernel(project, "activation")))
    host_cpu = [p for name, p in plan.items() if "-cpu-" in name and p.variant.os == "linux"]
    assert any(p.buildable for p in host_cpu)
    cuda = [p for p in plan.values() if p.variant.backend == "cuda" and p.buildable]
    assert bool(cuda) == (toolchains.nvcc is not None and toolchains.nvcc.version == "13.0")


# ------------------------------------------------------------------ selection and output


@pytest.fixture
def planned(project: Project) -> list[PlannedVariant]:
    return plan_variants(project, kernel(project, "activation"), LINUX_X86, FULL_LINUX)


def test_filter_by_exact_name_and_glob(planned: list[PlannedVariant]) -> None:
    chosen = filter_variants(
        planned, ["torch213-cxx11-cpu-x86_64-linux", "*-metal-*", "torch213-cxx11-cpu-x86_64-linux"]
    )
    assert [p.name for p in chosen] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-metal-aarch64-darwin",
        "torch214-metal-aarch64-darwin",
    ]
    assert filter_variants(planned, []) == planned


def test_filter_pattern_matching_nothing_lists_valid_names(planned: list[PlannedVariant]) -> None:
    with pytest.raises(VariantSelectionError) as info:
        filter_variants(planned, ["*-cpu-*", "torch213-cxx11-cu126-x86_64-linux"])
    message = str(info.value)
    assert "'torch213-cxx11-cu126-x86_64-linux' matches no variant" in message
    assert all(p.name in message for p in planned)


def test_format_plan_is_an_aligned_table(planned: list[PlannedVariant]) -> None:
    lines = format_plan(planned).splitlines()
    assert lines[0].split() == ["VARIANT", "BUILDABLE", "REASON"]
    assert len(lines) == len(planned) + 1
    column = lines[0].index("BUILDABLE")
    row = next(line for line in lines if line.startswith("torch213-metal-aarch64-darwin"))
    assert row[column:].startswith("no ")
    assert "wrong OS: aarch64-darwin variants build on macOS" in row
    row = next(line for line in lines if line.startswith("torch213-cxx11-cpu-x86_64-linux"))
    assert row[column:] == "yes"


def test_plan_to_json_rows(planned: list[PlannedVariant]) -> None:
    rows = json.loads(json.dumps(plan_to_json(planned)))
    row = next(r for r in rows if r["variant"] == "torch214-cxx11-cu130-x86_64-linux")
    assert row == {
        "variant": "torch214-cxx11-cu130-x86_64-linux",
        "buildable": True,
        "reason": None,
        "torch": "2.14",
        "kind": "compiled",
        "backend": "cuda",
        "compute": "cu130",
        "system": "x86_64-linux",
    }
    assert [r["variant"] for r in rows] == [p.name for p in planned]
