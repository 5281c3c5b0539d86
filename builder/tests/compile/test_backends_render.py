"""ROCm, XPU and Metal builds: rendered for real, run by ninja with FAKE toolchains.

hipcc, hipify-perl, icpx and xcrun cannot be installed on this machine, so each test
puts fake scripts on PATH that record their arguments and create the file after ``-o``
(the one place a stand-in is right; every such test says "fake" in its name). What is
checked is what the builder decides: which tool compiles which source, with which flags,
in which order, and what the link line is. The real CUDA path is in test_cuda.py.
"""

from __future__ import annotations

import shlex
import struct
from pathlib import Path

import pytest
from kernelhub.formats.variants import parse_variant
from kernelhub_builder.compile.backends import DeviceTools, device_tools
from kernelhub_builder.compile.build import run_ninja
from kernelhub_builder.compile.render import render_variant
from kernelhub_builder.errors import RenderError
from kernelhub_builder.manifest import KernelManifest, load_kernel, load_project
from kernelhub_builder.plan.cuda_archs import (
    CUDA_13_CAPABILITIES,
    CudaArch,
    CudaArchError,
    _parse_fatbin,
    gencode_flags,
    metadata_archs,
    parse_capability,
)
from kernelhub_builder.plan.toolchains import Toolchain, Toolchains
from kernelhub_builder.plan.torch_env import TorchEnv

FAKE_TOOL = r"""#!/bin/sh
# Records its argv, then creates what -o / -o= / -MF name, like the real tool would.
echo "$(basename "$0") $*" >> "$KH_FAKE_LOG"
prev=""
for arg in "$@"; do
  case "$arg" in -o=*) out="${arg#-o=}" ;; esac
  [ "$prev" = "-o" ] && out="$arg"
  [ "$prev" = "-MF" ] && dep="$arg"
  prev="$arg"
done
[ -n "$out" ] && mkdir -p "$(dirname "$out")" && : > "$out"
[ -n "$dep" ] && printf '%s:\n' "$out" > "$dep"
exit 0
"""

BUILD_TOML = """\
[general]
name = "mix"
version = 1
license = "Apache-2.0"
backends = ["rocm", "xpu", "metal"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.mix_rocm]
backend = "rocm"
include = ["mix_gpu"]
src = ["mix_gpu/mix.cu", "mix_gpu/helper.hip"]
rocm-archs = ["gfx942", "gfx1100"]

[kernel.mix_xpu]
backend = "xpu"
src = ["mix_xpu/mix.cpp"]
sycl-flags = ["-fsycl-targets=spir64_gen"]

[kernel.mix_metal]
backend = "metal"
src = ["mix_metal/mix.metal", "mix_metal/mix.mm"]
"""

SOURCES = ("torch-ext/torch_binding.cpp", "mix_gpu/mix.cu", "mix_gpu/helper.hip",
           "mix_xpu/mix.cpp", "mix_metal/mix.metal", "mix_metal/mix.mm")
ROCM = "torch214-cxx11-rocm70-x86_64-linux"
XPU = "torch214-cxx11-xpu20252-x86_64-linux"
METAL = "torch214-metal-aarch64-darwin"


@pytest.fixture
def kernel(tmp_path: Path) -> KernelManifest:
    root = tmp_path / "project"
    (root / "kernels-src" / "mix").mkdir(parents=True)
    (root / "kernels.toml").write_text('kernels = ["mix"]\n[matrix]\ntorch = ["2.14"]\n')
    src = root / "kernels-src" / "mix"
    (src / "build.toml").write_text(BUILD_TOML)
    for rel in SOURCES:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("// fixture source\n")
    (src / "torch-ext" / "mix").mkdir()
    (src / "torch-ext" / "mix" / "__init__.py").write_text("")
    return load_kernel(src, load_project(root))


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin dir of fake tools (added per test) first on PATH, logging to fake.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("KH_FAKE_LOG", str(tmp_path / "fake.log"))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return bin_dir


def fake(bin_dir: Path, *names: str) -> list[str]:
    paths = []
    for name in names:
        path = bin_dir / name
        path.write_text(FAKE_TOOL)
        path.chmod(0o755)
        paths.append(str(path))
    return paths


def torch_env(tmp_path: Path, torch_version: str) -> TorchEnv:
    return TorchEnv(version="2.14", python=tmp_path / "env" / "bin" / "python",
                    torch_version=torch_version, cuda=None, cxx11_abi=True,
                    include_dirs=(tmp_path / "env" / "include",),
                    library_dir=tmp_path / "env" / "lib",
                    python_include_dir=tmp_path / "env" / "py", root=tmp_path / "env")


def calls(tmp_path: Path) -> list[list[str]]:
    return [shlex.split(line) for line in (tmp_path / "fake.log").read_text().splitlines()]


def one(found: list[list[str]], what: str) -> list[str]:
    assert len(found) == 1, f"expected one {what}, got {found}"
    return found[0]


def build(kernel: KernelManifest, variant: str, tmp_path: Path, cxx: str,
          tools: DeviceTools, torch_version: str) -> Path:
    work = tmp_path / "work"
    rendered = render_variant(kernel, parse_variant(variant), "_mix_x_0123456789",
                              torch_env(tmp_path, torch_version), cxx=cxx, work_dir=work,
                              tools=tools)
    run_ninja(work, variant)
    assert rendered.so_name is not None
    assert (work / rendered.so_name).is_file()
    return work


# ------------------------------------------------------------------ ROCm


def test_rocm_build_hipifies_cu_and_compiles_with_hipcc_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    cxx, hipcc, hipify = fake(fake_bin, "c++", "hipcc", "hipify-perl")
    tools = DeviceTools(hipcc=hipcc, hipify=hipify, rocm_root="/opt/rocm-7.0.1")
    build(kernel, ROCM, tmp_path, cxx, tools, "2.14.1+rocm7.0")
    log = calls(tmp_path)
    src = kernel.root
    hipified = one([c for c in log if c[0] == "hipify-perl"], "hipify")
    assert hipified[1] == str(src / "mix_gpu/mix.cu") and hipified[2] == "-o=hip/mix_gpu/mix.cu.hip"
    compiles = [c for c in log if c[0] == "hipcc" and "-c" in c]
    by_input = {c[c.index("-c") + 1]: c for c in compiles}
    assert set(by_input) == {"hip/mix_gpu/mix.cu.hip", str(src / "mix_gpu/helper.hip")}
    for argv in compiles:
        assert "--offload-arch=gfx942" in argv and "--offload-arch=gfx1100" in argv
        assert {"-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", "-DROCM_KERNEL"} <= set(argv)
        assert "-fPIC" in argv and "-DTORCH_EXTENSION_NAME=_mix_x_0123456789" in argv
    # The hipified copy still finds headers next to the original source.
    assert f"-I{src / 'mix_gpu'}" in by_input["hip/mix_gpu/mix.cu.hip"]
    binding = one([c for c in log if c[0] == "c++"], "host compile")
    assert {"-D__HIP_PLATFORM_AMD__=1", "-isystem/opt/rocm-7.0.1/include"} <= set(binding)
    link = one([c for c in log if c[0] == "hipcc" and "-shared" in c], "link")
    assert {"-lamdhip64", "-lc10_hip", "-ltorch_hip", "-L/opt/rocm-7.0.1/lib"} <= set(link)


def test_rocm_without_hipify_compiles_cu_as_hip_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    cxx, hipcc = fake(fake_bin, "c++", "hipcc")
    build(kernel, ROCM, tmp_path, cxx, DeviceTools(hipcc=hipcc), "2.14.1+rocm7.0")
    log = calls(tmp_path)
    cu = one([c for c in log if str(kernel.root / "mix_gpu/mix.cu") in c], "compile of mix.cu")
    assert cu[0] == "hipcc" and cu[cu.index("-x") + 1] == "hip"
    assert not [c for c in log if c[0] == "hipify-perl"]


def test_rocm_part_without_rocm_archs_gets_the_default_list_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    text = (kernel.root / "build.toml").read_text().replace(
        'rocm-archs = ["gfx942", "gfx1100"]\n', "")
    (kernel.root / "build.toml").write_text(text)
    kernel = load_kernel(kernel.root, load_project(kernel.root.parent.parent))
    cxx, hipcc = fake(fake_bin, "c++", "hipcc")
    build(kernel, ROCM, tmp_path, cxx, DeviceTools(hipcc=hipcc), "2.14.1+rocm7.0")
    compile_ = next(c for c in calls(tmp_path) if c[0] == "hipcc" and "-c" in c)
    assert {"--offload-arch=gfx90a", "--offload-arch=gfx942", "--offload-arch=gfx1201"} <= set(
        compile_)


# ------------------------------------------------------------------ XPU


def test_xpu_build_compiles_and_links_with_icpx_fsycl_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    cxx, icpx = fake(fake_bin, "c++", "icpx")
    build(kernel, XPU, tmp_path, cxx, DeviceTools(icpx=icpx), "2.14.1+xpu")
    log = calls(tmp_path)
    assert all(c[0] == "icpx" for c in log), "icpx compiles and links everything of XPU"
    part = one([c for c in log if str(kernel.root / "mix_xpu/mix.cpp") in c], "SYCL compile")
    assert {"-fsycl", "-fsycl-targets=spir64", "-fsycl-targets=spir64_gen",
            "-DXPU_KERNEL"} <= set(part)
    binding = one([c for c in log if str(kernel.root / "torch-ext/torch_binding.cpp") in c],
                  "binding compile")
    assert "-fsycl" not in binding
    link = one([c for c in log if "-shared" in c], "link")
    assert {"-fsycl", "-lc10_xpu", "-ltorch_xpu"} <= set(link)


# ------------------------------------------------------------------ Metal


def test_metal_build_makes_an_embedded_metallib_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    (clang,) = fake(fake_bin, "clang++")
    fake(fake_bin, "xcrun")
    work = build(kernel, METAL, tmp_path, clang, DeviceTools(xcrun="xcrun"), "2.14.1")
    log = calls(tmp_path)
    metal = one([c for c in log if c[:4] == ["xcrun", "-sdk", "macosx", "metal"]], "metal")
    assert metal[-3:] == [str(kernel.root / "mix_metal/mix.metal"), "-o",
                          "obj/mix_metal/mix.metal.air"]
    metallib = one([c for c in log if c[:4] == ["xcrun", "-sdk", "macosx", "metallib"]], "lib")
    assert metallib[4:] == ["obj/mix_metal/mix.metal.air", "-o", "obj/kernels.metallib"]
    mm = one([c for c in log if str(kernel.root / "mix_metal/mix.mm") in c], "Obj-C++")
    assert mm[0] == "clang++" and {"objective-c++", "-fobjc-arc", "-DMETAL_KERNEL"} <= set(mm)
    # The metallib is compiled in (one .so per variant), under symbols named by the id.
    embed = (work / "generated" / "metallib.S").read_text()
    assert f'.incbin "{work / "obj" / "kernels.metallib"}"' in embed
    assert "_mix_x_0123456789_metallib" in embed
    header = (work / "generated" / "metallib.h").read_text()
    assert "namespace _mix_x_0123456789_metallib_embed {" in header
    assert "metallib_data_len" in header
    # The define keeps its quotes (an #include operand); the fake's log cannot show them.
    ninja = (work / "build.ninja").read_text()
    assert f"""'-DEMBEDDED_METALLIB_HEADER="{work / "generated" / "metallib.h"}"'""" in ninja
    assert "-DEMBEDDED_METALLIB_NAMESPACE=_mix_x_0123456789_metallib_embed" in mm
    link = one([c for c in log if "-shared" in c], "link")
    assert "obj/metallib.S.o" in link and "obj/mix_metal/mix.metal.air" not in link
    assert {"Metal", "Foundation", "-Wl,-undefined,dynamic_lookup"} <= set(link)


def test_metallib_is_rebuilt_before_the_embedding_object_fake_toolchain(
    kernel: KernelManifest, fake_bin: Path, tmp_path: Path
) -> None:
    (clang,) = fake(fake_bin, "clang++")
    fake(fake_bin, "xcrun")
    build(kernel, METAL, tmp_path, clang, DeviceTools(xcrun="xcrun"), "2.14.1")
    order = [" ".join(c) for c in calls(tmp_path)]
    lib = next(i for i, c in enumerate(order) if "metallib" in c and "xcrun" in c)
    embed = next(i for i, c in enumerate(order) if "metallib.S" in c and c.startswith("clang"))
    assert lib < embed


# ------------------------------------------------------------------ missing tools


@pytest.mark.parametrize(("variant", "tool"), [(ROCM, "hipcc"), (XPU, "icpx"), (METAL, "xcrun")])
def test_missing_device_toolchain_is_a_render_error(
    kernel: KernelManifest, tmp_path: Path, variant: str, tool: str
) -> None:
    with pytest.raises(RenderError, match=rf"needs {tool}, which was not found"):
        render_variant(kernel, parse_variant(variant), "_mix_x_0123456789",
                       torch_env(tmp_path, "2.14.1"), cxx="c++", work_dir=tmp_path / "w",
                       tools=DeviceTools())


def test_device_tools_from_detected_fake_toolchains(tmp_path: Path) -> None:
    hipcc = tmp_path / "rocm" / "bin" / "hipcc"
    found = Toolchains(
        hipcc=Toolchain("hipcc", hipcc, "7.0.1"),
        hipify=Toolchain("hipify", tmp_path / "rocm" / "bin" / "hipify-perl", None),
        icpx=Toolchain("icpx", Path("/opt/intel/bin/icpx"), "2025.2.0"),
        metal=Toolchain("metal", Path("/Applications/Xcode/metal"), "32023.0"),
    )
    rocm = device_tools(found, "rocm")
    assert rocm.hipcc == str(hipcc) and rocm.rocm_root == str((tmp_path / "rocm").resolve())
    assert rocm.hipify is not None and rocm.hipify.endswith("hipify-perl")
    assert device_tools(found, "xpu").icpx == "/opt/intel/bin/icpx"
    assert device_tools(found, "metal").xcrun == "xcrun"
    assert device_tools(Toolchains(), "cuda").nvcc is None


# ------------------------------------------------------------------ CUDA archs (no compile)


def test_default_gencode_is_every_supported_capability_plus_ptx_of_the_newest() -> None:
    flags = gencode_flags((), CUDA_13_CAPABILITIES)
    assert flags[0] == "-gencode=arch=compute_75,code=sm_75"
    assert flags[-1] == "-gencode=arch=compute_121,code=[sm_121,compute_121]"
    assert len(flags) == len(CUDA_13_CAPABILITIES)
    assert sum("compute_121" in f for f in flags) == 1


def test_requested_capabilities_are_narrowed_to_the_toolkit() -> None:
    assert gencode_flags(("7.0", "9.0a", "10.0+PTX"), CUDA_13_CAPABILITIES) == [
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_100,code=[sm_100,compute_100]",
    ]
    with pytest.raises(CudaArchError, match=r"none of the requested CUDA capabilities 6\.0, 7\.0"):
        gencode_flags(("6.0", "7.0"), CUDA_13_CAPABILITIES)
    with pytest.raises(CudaArchError, match="not of the form"):
        parse_capability("sm_80")


def _fatbin(entries: list[tuple[int, int, int]]) -> bytes:
    """A fatbin container holding (kind, sm, flags) entries with 8-byte payloads."""
    body = b"".join(struct.pack("<HHIQIIHHIIIQ", kind, 0x101, 64, 8, 0, 0, 0, 8, sm, 0, 0,
                                flags).ljust(64, b"\0") + b"P" * 8
                    for kind, sm, flags in entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_fatbin_headers_are_parsed_across_padded_containers() -> None:
    data = (_fatbin([(2, 80, 0x11), (2, 90, 0x100011)]) + b"\0" * 8
            + _fatbin([(2, 100, 0x1200011), (1, 120, 0x8011), (2, 80, 0x11)]))
    archs = sorted(set(_parse_fatbin(data, Path("x.so"))))
    assert archs == [CudaArch(80), CudaArch(90, "a"), CudaArch(100, "f"),
                     CudaArch(120, ptx=True)]
    assert metadata_archs(tuple(archs)) == ["8.0", "9.0a", "10.0f", "12.0+PTX"]


def test_truncated_fatbin_is_an_error() -> None:
    with pytest.raises(CudaArchError, match="runs past the section"):
        _parse_fatbin(_fatbin([(2, 80, 0)])[:-4], Path("x.so"))
