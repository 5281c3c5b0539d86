"""CUDA variants built for real with this host's nvcc 13.0 against torch 2.14.1+cu130.

The fixture project (fixtures/cuda_project) has an ATen kernel and a stable-ABI kernel,
each with one .cu file and one or two capabilities, so the compiles stay short. No GPU
is needed to build or to load: the libraries are loaded (ops registered) in the 2.14
env, never run. Kernel tests that need a GPU skip themselves here.
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
from kernelhub.formats.metadata import read_metadata, verify_variant
from kernelhub_builder.compile.build import BuildResult, build_kernel
from kernelhub_builder.layout import scratch_dir
from kernelhub_builder.manifest import Project, load_kernel, load_project
from kernelhub_builder.plan.cuda_archs import CudaArch, read_compiled_archs
from kernelhub_builder.plan.matrix import filter_variants, plan_variants
from kernelhub_builder.plan.toolchains import detect_toolchains
from kernelhub_builder.plan.torch_env import peek_torch_env

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "cuda_project"
CU130 = "torch214-cxx11-cu130-x86_64-linux"
STABLE_CU130 = "torch-stable-abi213-cu130-x86_64-linux"


def _cuda_build_ready() -> str | None:
    """Why this host cannot build the CUDA fixtures (None when it can)."""
    nvcc = detect_toolchains().nvcc
    if nvcc is None or nvcc.major_minor != (13, 0):
        return "needs nvcc 13.0 (set CUDA_HOME)"
    env = peek_torch_env("2.14", "torch==2.14.1")
    if env is None or not (env.cuda or "").startswith("13.0"):
        return "needs the torch 2.14 env with torch 2.14.1+cu130 (builder build creates it)"
    return None


@dataclass
class CudaBuilt:
    project: Project
    out: Path
    results: dict[str, BuildResult]

    def variant_dir(self, kernel: str, variant: str) -> Path:
        return self.out / kernel / variant


@pytest.fixture(scope="session")
def cuda_built(tmp_path_factory: pytest.TempPathFactory) -> CudaBuilt:
    if reason := _cuda_build_ready():
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("cuda")
    shutil.copytree(FIXTURE, root / "project", ignore=shutil.ignore_patterns("__pycache__"))
    project = load_project(root / "project")
    out = root / "out"
    results: dict[str, BuildResult] = {}
    for name, variant in (("scale_cuda", CU130), ("scale_cuda_stable", STABLE_CU130)):
        kernel = load_kernel(project.kernel_dir(name), project)
        planned = filter_variants(plan_variants(project, kernel), [variant])
        for result in build_kernel(project, kernel, planned, out):
            results[f"{name}/{result.variant}"] = result
    return CudaBuilt(project, out, results)


def test_cuda_variants_are_planned_with_the_torch_env_matched_to_the_toolkit() -> None:
    if reason := _cuda_build_ready():
        pytest.skip(reason)
    project = load_project(FIXTURE)
    kernel = load_kernel(project.kernel_dir("scale_cuda"), project)
    plan = {p.name: p for p in plan_variants(project, kernel)}
    assert plan[CU130].buildable
    # torch 2.13 is pinned to a CPU-only build here: its CUDA variant is not buildable,
    # and the reason says which torch the env holds and what the variant needs.
    cu130_213 = plan["torch213-cxx11-cu130-x86_64-linux"]
    if not cu130_213.buildable:
        assert cu130_213.reason is not None
        assert "torch 2.13" in cu130_213.reason and "CUDA 13.0" in cu130_213.reason


def test_metadata_lists_the_archs_compiled_into_the_binary(cuda_built: CudaBuilt) -> None:
    dest = cuda_built.variant_dir("scale_cuda", CU130)
    metadata = read_metadata(dest)
    verify_variant(dest, metadata)
    # build.toml asks for 7.0, 8.0 and 9.0+PTX; CUDA 13 has no Volta, so 7.0 is absent.
    assert metadata.backend.type == "cuda"
    assert metadata.backend.archs == ["8.0", "9.0+PTX"]
    (so,) = dest.glob("*.abi3.so")
    assert read_compiled_archs(so) == (CudaArch(80), CudaArch(90), CudaArch(90, ptx=True))


def test_gencode_flags_follow_the_part_capabilities(cuda_built: CudaBuilt) -> None:
    ninja = (scratch_dir(cuda_built.out) / "scale_cuda" / CU130 / "build.ninja").read_text()
    assert "-gencode=arch=compute_80,code=sm_80" in ninja
    assert "compute_90,code=[sm_90,compute_90]" in ninja
    assert "compute_70" not in ninja


def test_stable_abi_cuda_variant_targets_the_abi_minimum(cuda_built: CudaBuilt) -> None:
    dest = cuda_built.variant_dir("scale_cuda_stable", STABLE_CU130)
    metadata = read_metadata(dest)
    assert metadata.backend.archs == ["9.0+PTX"]
    assert metadata.torch == "2.14.1"  # compiled with the newest CUDA torch's headers …
    ninja = (scratch_dir(cuda_built.out) / "scale_cuda_stable" / STABLE_CU130 / "build.ninja")
    assert "-DTORCH_TARGET_VERSION=0x020d000000000000" in ninja.read_text()  # … for 2.13
    (so,) = dest.glob("*.abi3.so")
    with so.open("rb") as stream:
        dynamic = ELFFile(stream).get_section_by_name(".dynamic")
        assert isinstance(dynamic, DynamicSection)
        needed = {t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
    assert not needed & {"libtorch.so", "libtorch_python.so", "libc10_cuda.so"}
    assert "libcudart.so.13" in needed


@pytest.mark.parametrize(("kernel", "variant"), [("scale_cuda", CU130),
                                                 ("scale_cuda_stable", STABLE_CU130)])
def test_cuda_variant_loads_in_the_cuda_torch_env_without_a_gpu(
    cuda_built: CudaBuilt, kernel: str, variant: str
) -> None:
    env = peek_torch_env("2.14", "torch==2.14.1")
    assert env is not None
    dest = cuda_built.variant_dir(kernel, variant)
    vid = read_metadata(dest).id
    script = (
        "import json, torch\n"
        "from kernelhub import load_variant_dir\n"
        f"m = load_variant_dir({str(dest)!r})\n"
        "print(json.dumps({'op': str(m.ops.scale), 'gpu': torch.cuda.is_available()}))\n"
    )
    done = subprocess.run([str(env.python), "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["op"] == f"{vid}.scale"
