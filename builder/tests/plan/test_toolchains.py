"""Host and toolchain detection.

The C++ compiler and nvcc tests run the real tools of this machine. ROCm, oneAPI and
Xcode are not installable here, so their tests put small stand-in scripts on PATH that
print what the real tools print; each such test says so in its name (``with_fake_…``).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub_builder.plan import toolchains as tc
from kernelhub_builder.plan.toolchains import (
    HostInfo,
    Toolchain,
    Toolchains,
    clear_toolchain_cache,
    detect_host,
    detect_toolchains,
    find_cxx,
    find_hipcc,
    find_icpx,
    find_metal,
    find_nvcc,
)

REAL_NVCC = Path("/usr/local/cuda/bin/nvcc")


def fake_tool(bin_dir: Path, name: str, script: str) -> Path:
    """A stand-in executable: a shell script printing what the real tool prints."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def no_vendor_fallbacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only what a test puts in the environment is found, whatever this host has installed.

    The cache is cleared on both sides so no detection made under these patches leaks
    into other tests.
    """
    monkeypatch.setattr(tc, "NVCC_FALLBACKS", ())
    monkeypatch.setattr(tc, "ROCM_FALLBACKS", ())
    monkeypatch.setattr(tc, "ICPX_FALLBACKS", ())
    clear_toolchain_cache()
    yield
    clear_toolchain_cache()


# ------------------------------------------------------------------ host


@pytest.mark.parametrize(
    ("system", "machine", "expected"),
    [
        ("Linux", "x86_64", HostInfo("linux", "x86_64")),
        ("Linux", "AMD64", HostInfo("linux", "x86_64")),
        ("Linux", "aarch64", HostInfo("linux", "aarch64")),
        ("Darwin", "arm64", HostInfo("darwin", "aarch64")),
    ],
)
def test_detect_host_normalises_names(
    monkeypatch: pytest.MonkeyPatch, system: str, machine: str, expected: HostInfo
) -> None:
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert detect_host() == expected


def test_detect_host_on_this_machine() -> None:
    host = detect_host()
    assert host.os == platform.system().lower()
    assert host.system == f"{host.arch}-{host.os}"
    assert host.arch in ("x86_64", "aarch64")


# ------------------------------------------------------------------ C++ (real compiler)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_detects_real_cxx_from_path() -> None:
    found = find_cxx({"PATH": str(Path(shutil.which("g++")).parent)})
    assert found is not None
    assert found.kind == "cxx"
    assert found.path.name in ("c++", "g++", "clang++")
    real = subprocess.run([found.path, "-dumpfullversion"], capture_output=True, text=True)
    assert found.version == real.stdout.strip()
    assert found.version in found.description


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cxx_env_var_wins_and_may_carry_flags(tmp_path: Path) -> None:
    gxx = shutil.which("g++")
    found = find_cxx({"PATH": str(tmp_path), "CXX": f"{gxx} -m64"})
    assert found is not None
    assert found.path == Path(gxx)


def test_broken_cxx_env_var_does_not_fall_back(tmp_path: Path) -> None:
    assert find_cxx({"PATH": "/usr/bin", "CXX": str(tmp_path / "no-such-compiler")}) is None


def test_no_cxx_on_empty_path(tmp_path: Path) -> None:
    assert find_cxx({"PATH": str(tmp_path)}) is None


def test_detects_clang_version_with_fake_clang_on_path(tmp_path: Path) -> None:
    # clang has no -dumpfullversion; the version comes from the --version banner.
    fake_tool(
        tmp_path,
        "clang++",
        'case "$1" in --version) echo "Ubuntu clang version 18.1.3 (1ubuntu1)";'
        ' echo "Target: x86_64-pc-linux-gnu";; *) exit 1;; esac\n',
    )
    found = find_cxx({"PATH": str(tmp_path)})
    assert found == Toolchain(
        "cxx", tmp_path / "clang++", "18.1.3", "Ubuntu clang version 18.1.3 (1ubuntu1)"
    )


# ------------------------------------------------------------------ nvcc


@pytest.mark.skipif(not REAL_NVCC.is_file(), reason="needs the CUDA toolkit")
def test_detects_real_nvcc_from_cuda_home(tmp_path: Path) -> None:
    found = find_nvcc({"PATH": str(tmp_path), "CUDA_HOME": str(REAL_NVCC.parent.parent)})
    assert found is not None
    assert found.path == REAL_NVCC
    real = subprocess.run([REAL_NVCC, "--version"], capture_output=True, text=True).stdout
    assert f"release {found.version}," in real
    assert found.major_minor is not None


NVCC_126 = 'echo "nvcc: NVIDIA (R) Cuda compiler driver"\necho "Cuda compilation tools, release 12.6, V12.6.85"\n'


def test_detects_nvcc_version_with_fake_nvcc_on_path(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "nvcc", NVCC_126)
    found = find_nvcc({"PATH": str(tmp_path / "bin")})
    assert found is not None
    assert (found.version, found.major_minor) == ("12.6", (12, 6))
    assert found.description == "Cuda compilation tools, release 12.6, V12.6.85"


def test_cuda_home_wins_over_path_with_fake_nvccs(tmp_path: Path) -> None:
    fake_tool(tmp_path / "path", "nvcc", NVCC_126)
    fake_tool(
        tmp_path / "cuda13" / "bin",
        "nvcc",
        'echo "Cuda compilation tools, release 13.0, V13.0.88"\n',
    )
    found = find_nvcc({"PATH": str(tmp_path / "path"), "CUDA_HOME": str(tmp_path / "cuda13")})
    assert found is not None
    assert (found.path, found.version) == (tmp_path / "cuda13" / "bin" / "nvcc", "13.0")


def test_nvcc_that_fails_has_unknown_version_with_fake_nvcc(tmp_path: Path) -> None:
    fake_tool(tmp_path, "nvcc", "exit 3\n")
    found = find_nvcc({"PATH": str(tmp_path)})
    assert found is not None
    assert found.version is None and found.major_minor is None


def test_no_nvcc(tmp_path: Path) -> None:
    assert find_nvcc({"PATH": str(tmp_path)}) is None


def test_nvcc_vendor_fallback_path_with_fake_nvcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = fake_tool(tmp_path / "cuda" / "bin", "nvcc", NVCC_126)
    monkeypatch.setattr(tc, "NVCC_FALLBACKS", (nvcc,))
    found = find_nvcc({"PATH": str(tmp_path / "empty")})
    assert found is not None and found.path == nvcc


# ------------------------------------------------------------------ ROCm, oneAPI, Metal


def test_detects_hipcc_version_with_fake_hipcc_on_path(tmp_path: Path) -> None:
    fake_tool(
        tmp_path,
        "hipcc",
        'echo "HIP version: 7.0.25314-b4ed2c4e"\necho "AMD clang version 20.0.0git"\n',
    )
    found = find_hipcc({"PATH": str(tmp_path)})
    assert found is not None
    assert (found.kind, found.version, found.major_minor) == ("hipcc", "7.0.25314", (7, 0))


def test_rocm_release_file_wins_with_fake_rocm_install(tmp_path: Path) -> None:
    rocm = tmp_path / "rocm-7.0.1"
    fake_tool(rocm / "bin", "hipcc", 'echo "HIP version: 7.0.25314"\n')
    (rocm / ".info").mkdir()
    (rocm / ".info" / "version").write_text("7.0.1-42\n")
    found = find_hipcc({"PATH": str(tmp_path / "empty"), "ROCM_PATH": str(rocm)})
    assert found is not None
    assert found.version == "7.0.1"
    assert found.path == rocm / "bin" / "hipcc"


def test_no_hipcc(tmp_path: Path) -> None:
    assert find_hipcc({"PATH": str(tmp_path)}) is None


def test_detects_icpx_version_with_fake_icpx_on_path(tmp_path: Path) -> None:
    fake_tool(
        tmp_path / "bin",
        "icpx",
        'echo "Intel(R) oneAPI DPC++/C++ Compiler 2025.2.0 (2025.2.0.20250605)"\n'
        'echo "Target: x86_64-unknown-linux-gnu"\n',
    )
    found = find_icpx({"PATH": str(tmp_path / "bin")})
    assert found is not None
    assert (found.version, found.major_minor) == ("2025.2.0", (2025, 2))


def test_detects_icpx_from_oneapi_root_with_fake_icpx(tmp_path: Path) -> None:
    icpx = fake_tool(
        tmp_path / "oneapi" / "compiler" / "latest" / "bin",
        "icpx",
        'echo "Intel(R) oneAPI DPC++/C++ Compiler 2025.1.1 (2025.1.1.20250418)"\n',
    )
    found = find_icpx({"PATH": str(tmp_path / "empty"), "ONEAPI_ROOT": str(tmp_path / "oneapi")})
    assert found is not None and (found.path, found.version) == (icpx, "2025.1.1")


def test_detects_metal_with_fake_xcrun_on_path(tmp_path: Path) -> None:
    fake_tool(
        tmp_path,
        "xcrun",
        'case "$*" in\n'
        '  "--sdk macosx --find metal") echo "/Xcode.app/usr/bin/metal";;\n'
        '  "--sdk macosx metal --version") echo "Apple metal version 32023.404 (metalfe-32023.404)";;\n'
        "  *) exit 1;;\nesac\n",
    )
    found = find_metal({"PATH": str(tmp_path)})
    assert found == Toolchain(
        "metal",
        Path("/Xcode.app/usr/bin/metal"),
        "32023.404",
        "Apple metal version 32023.404 (metalfe-32023.404)",
    )


def test_xcrun_without_metal_toolchain_with_fake_xcrun(tmp_path: Path) -> None:
    fake_tool(tmp_path, "xcrun", 'echo "xcrun: error: unable to find utility metal" >&2\nexit 72\n')
    assert find_metal({"PATH": str(tmp_path)}) is None


# ------------------------------------------------------------------ detect_toolchains


def test_detect_toolchains_reads_env_at_call_time_and_caches(tmp_path: Path) -> None:
    fake_tool(tmp_path / "a", "nvcc", NVCC_126)
    fake_tool(tmp_path / "b", "hipcc", 'echo "HIP version: 7.0.1"\n')
    first = detect_toolchains({"PATH": str(tmp_path / "a")})
    assert first.nvcc is not None and first.nvcc.version == "12.6"
    assert first.hipcc is None and first.icpx is None and first.metal is None
    assert detect_toolchains({"PATH": str(tmp_path / "a")}) is first  # cached
    second = detect_toolchains({"PATH": str(tmp_path / "b")})
    assert second.nvcc is None and second.hipcc is not None


def test_detect_toolchains_cache_can_be_cleared(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    assert detect_toolchains(env).nvcc is None
    fake_tool(tmp_path, "nvcc", NVCC_126)
    assert detect_toolchains(env).nvcc is None  # still the cached answer
    clear_toolchain_cache()
    assert detect_toolchains(env).nvcc is not None


def test_detect_toolchains_defaults_to_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_tool(tmp_path, "icpx", 'echo "Intel(R) oneAPI DPC++/C++ Compiler 2025.2.0 (x)"\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    found = detect_toolchains()
    assert found.icpx is not None and found.icpx.version == "2025.2.0"


def test_for_backend_maps_each_backend_to_its_compiler() -> None:
    tools = {k: Toolchain(k, Path(k), "1.0") for k in ("cxx", "nvcc", "hipcc", "icpx", "metal")}
    chains = Toolchains(**tools)
    assert chains.for_backend("cpu") is tools["cxx"]
    assert chains.for_backend("cuda") is tools["nvcc"]
    assert chains.for_backend("rocm") is tools["hipcc"]
    assert chains.for_backend("xpu") is tools["icpx"]
    assert chains.for_backend("metal") is tools["metal"]
