"""kernels.toml and build.toml parsing: the ecosystem's tree shapes load unchanged, and
every mistake is reported with the file, the dotted key and what is allowed."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from kernel_trees import DEMO_FILES, write_kernel
from kernelhub.errors import KernelHubError
from kernelhub_builder.errors import ManifestError
from kernelhub_builder.manifest import Matrix, Project, load_kernel, load_kernels, load_project

FIXTURE_PROJECT = Path(__file__).parents[1] / "fixtures" / "ecosystem"

BASE_FILES = DEMO_FILES
BASE = """\
[general]
name = "demo"
version = 1
backends = ["cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_cpu]
backend = "cpu"
depends = ["torch"]
src = ["demo_cpu/demo.cpp"]
"""


@pytest.fixture
def project() -> Project:
    return load_project(FIXTURE_PROJECT)


# ------------------------------------------------------------------ kernels.toml


def test_project_reads_matrix_hub_and_pins(project: Project) -> None:
    assert project.root == FIXTURE_PROJECT.resolve()
    assert project.kernels == (
        "activation",
        "relu-triton",
        "layer-norm-universal",
        "relu-stable",
        "rmsnorm",
    )
    assert project.org == "kernels-community"
    assert project.hub == str(FIXTURE_PROJECT.resolve() / "hub")  # relative → from root
    assert project.matrix == Matrix(
        torch=("2.13", "2.14"),
        backends=("cpu", "cuda", "rocm", "xpu", "metal"),
        systems=("x86_64-linux", "aarch64-linux", "aarch64-darwin"),
        cuda=("13.0",),
        rocm=("7.0",),
        xpu=("2025.2",),
    )
    assert project.torch_pins == {"2.13": "torch==2.13.0", "2.14": "torch==2.14.1"}


def test_project_accepts_the_file_or_its_directory() -> None:
    assert load_project(FIXTURE_PROJECT / "kernels.toml") == load_project(FIXTURE_PROJECT)


def test_repository_kernels_toml_loads() -> None:
    repo = Path(__file__).resolve().parents[3]
    if not (repo / "kernels.toml").is_file():
        pytest.skip("no kernels.toml at the repository root")
    try:
        project = load_project(repo)
    except ManifestError as e:
        if "has no build.toml" in str(e):
            pytest.skip(f"a listed kernel tree is not written yet: {e}")
        raise
    assert project.matrix.torch
    assert [k.name for k in load_kernels(project)]


def test_project_without_kernels_key_discovers_kernel_dirs(tmp_path: Path) -> None:
    write_kernel(tmp_path / "kernels-src" / "zeta", BASE)
    write_kernel(tmp_path / "kernels-src" / "alpha", BASE)
    (tmp_path / "kernels-src" / "not-a-kernel").mkdir()
    (tmp_path / "kernels.toml").write_text('[hub]\ntarget = "hf"\n')
    project = load_project(tmp_path)
    assert project.kernels == ("alpha", "zeta")
    assert project.hub == "hf"
    assert project.matrix == Matrix()  # defaults when [matrix] is absent


def test_project_gpu_torch_is_read_and_must_be_in_the_matrix(tmp_path: Path) -> None:
    write_kernel(tmp_path / "kernels-src" / "alpha", BASE)
    head = '[matrix]\ntorch = ["2.14", "2.15"]\n[toolchain]\n'
    (tmp_path / "kernels.toml").write_text(head + 'gpu-torch = "2.14.1"\n')
    assert load_project(tmp_path).gpu_torch == "2.14"
    (tmp_path / "kernels.toml").write_text(head + 'gpu-torch = "2.13"\n')
    with pytest.raises(ManifestError, match=r"toolchain\.gpu-torch: '2\.13' is not in \[matrix\] torch"):
        load_project(tmp_path)
    (tmp_path / "kernels.toml").write_text('[matrix]\ntorch = ["2.14"]\n')
    assert load_project(tmp_path).gpu_torch is None


def test_project_kernel_entry_with_slash_is_a_path_from_root(tmp_path: Path) -> None:
    write_kernel(tmp_path / "extra" / "demo", BASE)
    (tmp_path / "kernels.toml").write_text('kernels = ["extra/demo"]\n')
    project = load_project(tmp_path)
    assert load_kernels(project)[0].root == (tmp_path / "extra" / "demo").resolve()


@pytest.mark.parametrize(
    ("toml", "key", "message"),
    [
        ('kernels = ["a", "a"]\n', "kernels", "listed twice"),
        ('kernels = ["missing"]\n', "kernels", "has no build.toml"),
        ('kernel = ["a"]\n', "kernel", "did you mean 'kernels'"),
        ('[matrix]\nbackends = ["cuda", "tpu"]\n', "matrix.backends", "unknown value 'tpu'"),
        ('[matrix]\ntorch = ["2.x"]\n', "matrix.torch", "not a torch version"),
        ("[matrix]\ntorch = []\n", "matrix.torch", "is empty"),
        ('[matrix]\ncuda = ["13"]\n', "matrix.cuda", "two-part version"),
        ('[matrix]\nsystems = ["x86_64-windows"]\n', "matrix.systems", "unknown value"),
        ('[toolchain.torch]\n"2.13" = "numpy==1.0"\n', "toolchain.torch.2.13", "must pin torch"),
        ('[toolchain.torch]\n"2.13" = "torch=2.13"\n', "toolchain.torch.2.13", "pip requirement"),
        ('[hub]\norg = "bad org"\n', "hub.org", "not an org name"),
        ("[hub]\norg = 3\n", "hub.org", "expected a string, got int 3"),
    ],
)
def test_project_errors_name_file_and_key(
    tmp_path: Path, toml: str, key: str, message: str
) -> None:
    (tmp_path / "kernels-src").mkdir()
    (tmp_path / "kernels.toml").write_text(toml)
    with pytest.raises(ManifestError) as info:
        load_project(tmp_path)
    assert info.value.key == key
    assert info.value.file == tmp_path / "kernels.toml"
    assert str(tmp_path / "kernels.toml") in str(info.value)
    assert message in str(info.value)


def test_toml_syntax_error_names_line(tmp_path: Path) -> None:
    (tmp_path / "kernels.toml").write_text('kernels = ["a"]\n[hub\norg = "x"\n')
    with pytest.raises(ManifestError, match=r"kernels\.toml: invalid TOML: .*line 2.*'\[hub'"):
        load_project(tmp_path)


def test_missing_project_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="file not found"):
        load_project(tmp_path)


# ------------------------------------------------------------------ build.toml shapes


def test_edition5_compiled_kernel_with_cuda_metal_cpu_parts(project: Project) -> None:
    kernel = load_kernel(project.kernel_dir("activation"), project)
    assert kernel.name == "activation"
    assert (kernel.version, kernel.release, kernel.edition) == (1, "1.0.0", 5)
    assert kernel.backends == ("cuda", "metal", "cpu")
    assert kernel.repo_id == "kernels-community/activation"
    assert kernel.license == "Apache-2.0"
    assert not kernel.torch.noarch
    assert kernel.torch.src == ("torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h")
    assert kernel.torch.pyext == ("py", "pyi")  # the ecosystem's default
    assert [p.name for p in kernel.parts_for("cpu")] == ["activation_cpu", "activation_cpu_avx512"]
    avx = kernel.parts_for("cpu")[1]
    assert avx.cxx_flags == ("-O3", "-mavx512f")
    assert avx.include == ("activation_cpu",)
    (cuda,) = kernel.parts_for("cuda")
    assert cuda.cuda_capabilities == ("8.0", "9.0")
    assert cuda.depends == ("torch",)
    assert kernel.package_dir == kernel.root / "torch-ext" / "activation"


def test_edition5_torch_noarch_kernel(project: Project) -> None:
    kernel = load_kernel(project.kernel_dir("relu-triton"), project)
    assert kernel.torch.noarch
    assert kernel.parts == ()
    assert kernel.backends == ("cuda", "rocm", "xpu")
    assert (kernel.version, kernel.release) == (2, "2.1.0")
    assert kernel.torch.pyext == ("py", "json")
    assert kernel.python_depends == ("einops",)
    assert kernel.package_dir.name == "relu_triton"


def test_legacy_universal_kernel(project: Project) -> None:
    kernel = load_kernel(project.kernel_dir("layer-norm-universal"), project)
    assert kernel.universal
    assert kernel.torch.noarch
    assert (kernel.version, kernel.release, kernel.edition) == (1, "1.0.0", None)


def test_stable_abi_table_per_backend(project: Project) -> None:
    kernel = load_kernel(project.kernel_dir("relu-stable"), project)
    assert kernel.torch.stable_abi_by_backend == {"cpu": "2.13", "cuda": "2.13"}
    assert kernel.torch.stable_abi == "2.13"
    assert kernel.torch.stable_abi_for("cuda") == "2.13"
    assert kernel.parts_for("cuda")[0].cuda_minver == "12.8"


def test_pre_edition_kernel_infers_backends_from_parts(project: Project) -> None:
    kernel = load_kernel(project.kernel_dir("rmsnorm"), project)
    assert kernel.backends == ("cpu", "xpu")
    assert kernel.parts_for("xpu")[0].sycl_flags == ("-fsycl-targets=spir64",)
    assert kernel.version == 1


def test_load_kernel_accepts_build_toml_path(project: Project) -> None:
    by_dir = load_kernel(project.kernel_dir("activation"))
    assert load_kernel(project.kernel_dir("activation") / "build.toml") == by_dir


def test_all_fixture_kernels_load(project: Project) -> None:
    names = [k.name for k in load_kernels(project)]
    assert names == ["activation", "relu-triton", "layer-norm-universal", "relu-stable", "rmsnorm"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", "2.14"), ('"2.13"', "2.13"), ('"2.14.0"', "2.14"), ("false", None)],
)
def test_stable_abi_bool_means_lowest_torch_of_matrix(
    tmp_path: Path, value: str, expected: str | None
) -> None:
    toml = BASE.replace("[torch]\n", f"[torch]\nstable-abi = {value}\n")
    project = Project(root=tmp_path, kernels=(), matrix=Matrix(torch=("2.15", "2.14")))
    kernel = load_kernel(write_kernel(tmp_path / "k", toml), project)
    assert kernel.torch.stable_abi == expected
    assert kernel.torch.stable_abi_for("cpu") == expected


def test_general_cuda_bounds_and_backend_python_depends(tmp_path: Path) -> None:
    toml = (
        BASE.replace(
            'backends = ["cpu"]\n',
            'backends = ["cpu", "cuda"]\n\n[general.cuda]\nminver = "12.8"\nmaxver = "13.0"\n'
            'python-depends = ["nvidia-cutlass-dsl"]\n',
        )
        + '\n[kernel.demo_cuda]\nbackend = "cuda"\ndepends = ["torch"]\nsrc = ["demo_cuda/demo.cu"]\n'
    )
    kernel = load_kernel(write_kernel(tmp_path, toml))
    assert (kernel.cuda_minver, kernel.cuda_maxver) == ("12.8", "13.0")
    assert kernel.backend_python_depends == {"cuda": ("nvidia-cutlass-dsl",)}


def test_legacy_cuda_hipify_part_also_builds_for_rocm(tmp_path: Path) -> None:
    toml = """\
    [general]
    name = "demo"

    [torch]
    src = ["torch-ext/torch_binding.cpp"]

    [kernel.demo]
    language = "cuda-hipify"
    depends = ["torch"]
    rocm-archs = ["gfx942"]
    src = ["demo_cuda/demo.cu"]
    """
    kernel = load_kernel(write_kernel(tmp_path, toml))
    assert kernel.backends == ("cuda", "rocm")
    assert kernel.parts_for("rocm")[0].rocm_archs == ("gfx942",)


def test_unbuildable_ecosystem_backend_is_skipped_with_a_warning(tmp_path: Path) -> None:
    toml = BASE.replace('backends = ["cpu"]', 'backends = ["cpu", "neuron"]')
    with pytest.warns(UserWarning, match="cannot build neuron"):
        kernel = load_kernel(write_kernel(tmp_path, toml))
    assert kernel.backends == ("cpu",)
    assert kernel.skipped_backends == ("neuron",)


def test_valid_kernel_loads_without_warnings(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = load_kernel(write_kernel(tmp_path, BASE))
    assert kernel.backends == ("cpu",)


# ------------------------------------------------------------------ build.toml errors


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('backends = ["cpu"]', 'backend = ["cpu"]', "general.backend", "did you mean 'backends'"),
        ("version = 1", 'version = "1"', "general.version", "expected an integer, got str '1'"),
        ("version = 1", "version = true", "general.version", "got a boolean"),
        ("version = 1", "version = -1", "general.version", "must be 0 or more"),
        ('name = "demo"', 'name = "Demo"', "general.name", "lowercase letters"),
        ('name = "demo"', 'name = "demo-"', "general.name", "is not a kernel name"),
        (
            'backends = ["cpu"]',
            'backends = ["cpu", "cdua"]',
            "general.backends",
            "unknown backend 'cdua'; did you mean 'cuda'",
        ),
        ('backends = ["cpu"]', 'backends = ["cpu", "cpu"]', "general.backends", "duplicates"),
        ("version = 1", 'version = 1\nrelease = "2.0.0"', "general.release", "has major 2"),
        ("version = 1", 'version = 1\nrelease = "two"', "general.release", "not semver"),
        (
            'src = ["demo_cpu/demo.cpp"]',
            'src = ["demo_cpu/missing.cpp"]',
            "kernel.demo_cpu.src",
            "source file 'demo_cpu/missing.cpp' does not exist",
        ),
        (
            'src = ["demo_cpu/demo.cpp"]',
            'src = ["../outside.cpp"]',
            "kernel.demo_cpu.src",
            "must be a path inside the kernel directory",
        ),
        (
            'src = ["demo_cpu/demo.cpp"]',
            'src = "demo_cpu/demo.cpp"',
            "kernel.demo_cpu.src",
            "expected a list of strings",
        ),
        (
            'depends = ["torch"]',
            'depends = ["torch"]\ninclude = ["nope"]',
            "kernel.demo_cpu.include",
            "include directory 'nope' does not exist",
        ),
        (
            'backend = "cpu"',
            'backend = "cpu"\ncuda-flags = ["-O3"]',
            "kernel.demo_cpu.cuda-flags",
            "only applies to cuda parts",
        ),
        (
            'backend = "cpu"',
            'backend = "cpu"\ncxxflags = ["-O3"]',
            "kernel.demo_cpu.cxxflags",
            "did you mean 'cxx-flags'",
        ),
        ('backend = "cpu"', 'backend = "gpu"', "kernel.demo_cpu.backend", "unknown backend 'gpu'"),
        (
            "[torch]\n",
            '[torch]\nminver = "2.14"\nmaxver = "2.13"\n',
            "torch.maxver",
            "below minver",
        ),
        (
            "[torch]\n",
            '[torch]\nstable-abi = { cpu = "2.13", tpu = "2.13" }\n',
            "torch.stable-abi.tpu",
            "unknown key",
        ),
        ("[torch]\n", "[torch]\nstable-abi = 213\n", "torch.stable-abi", "expected true"),
        ("[torch]\n", "[torch]\nsrcs = []\n", "torch.srcs", "did you mean 'src'"),
        (
            "[general]\n",
            '[general]\nlicence = "MIT"\n',
            "general.licence",
            "did you mean 'license'",
        ),
        (
            "[general]\n",
            '[general.hub]\nrepo-id = "no-slash"\n[general]\n',
            "general.hub.repo-id",
            "not of the form 'org/name'",
        ),
        (
            "[general]\n",
            '[general.cuda]\nminver = "13.0"\nmaxver = "12.8"\n[general]\n',
            "general.cuda.maxver",
            "below minver",
        ),
    ],
)
def test_build_toml_errors_name_file_key_and_fix(
    tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    assert old in BASE
    root = write_kernel(tmp_path, BASE.replace(old, new, 1))
    with pytest.raises(ManifestError) as info:
        load_kernel(root)
    assert info.value.key == key
    assert info.value.file == root / "build.toml"
    assert str(root / "build.toml") in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("toml", "key", "message"),
    [
        (BASE + "\n[torch-noarch]\n", "torch-noarch", "not both"),
        (BASE.replace("[torch]", "[tvm-ffi]"), "tvm-ffi", "torch extensions only"),
        (
            BASE.replace("[torch]\n", "[torch-noarch]\n").replace(
                'src = ["torch-ext/torch_binding.cpp"]\n', "", 1
            ),
            "kernel",
            "has no compiled parts",
        ),
        (
            BASE.replace("[torch]\n", "").replace('src = ["torch-ext/torch_binding.cpp"]\n', "", 1),
            "torch",
            "need a [torch] table",
        ),
        ('[general]\nname = "demo"\n[torch-noarch]\n', "general.backends", "missing"),
        ("[torch-noarch]\n", "general", "missing"),
        (
            '[general]\nname = "demo"\nuniversal = true\n[torch]\nsrc = ["x.cpp"]\n',
            "torch.src",
            "compiles nothing",
        ),
    ],
)
def test_build_toml_structure_errors(tmp_path: Path, toml: str, key: str, message: str) -> None:
    root = write_kernel(tmp_path, toml)
    with pytest.raises(ManifestError) as info:
        load_kernel(root)
    assert info.value.key == key
    assert message in str(info.value)


def test_build_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    root = write_kernel(tmp_path, BASE.replace('name = "demo"', "name = demo"))
    with pytest.raises(ManifestError, match=r"build\.toml: invalid TOML: .*line 2.*name = demo"):
        load_kernel(root)


def test_missing_python_package_is_reported(tmp_path: Path) -> None:
    root = write_kernel(tmp_path, BASE)
    shutil.rmtree(root / "torch-ext" / "demo")
    with pytest.raises(
        ManifestError, match=r"missing the kernel's Python package .*torch-ext/demo"
    ):
        load_kernel(root)


def test_two_kernel_dirs_with_one_name_are_refused(tmp_path: Path) -> None:
    write_kernel(tmp_path / "kernels-src" / "a", BASE)
    write_kernel(tmp_path / "kernels-src" / "b", BASE)
    (tmp_path / "kernels.toml").write_text('kernels = ["a", "b"]\n')
    with pytest.raises(ManifestError, match="'demo' is also the name of") as info:
        load_kernels(load_project(tmp_path))
    assert info.value.key == "general.name"


def test_manifest_error_is_a_kernelhub_error() -> None:
    assert issubclass(ManifestError, KernelHubError)
