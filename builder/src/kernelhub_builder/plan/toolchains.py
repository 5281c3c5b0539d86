"""What this host can build with: its OS/architecture and the compilers on it.

The matrix asks this module, per variant, whether the host has the compiler that
variant needs (a C++ compiler always; nvcc of the right CUDA release, hipcc, icpx or
Apple's metal for GPU backends). Each detector looks where users put these tools
(an environment variable first, then PATH, then the vendor's default install path),
asks the tool for its version, and returns None when the tool is absent.

Detection runs subprocesses, so results are cached per process, keyed on the
environment values that influence them; the environment is read at call time.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelhub.system import ARCH_ALIASES

#: Environment variables whose values change what detection finds.
ENV_KEYS = (
    "PATH",
    "CXX",
    "CUDA_HOME",
    "CUDA_PATH",
    "ROCM_PATH",
    "HIP_PATH",
    "ONEAPI_ROOT",
    "CMPLR_ROOT",
)
#: Vendor default install locations, tried after the environment and PATH.
NVCC_FALLBACKS: tuple[Path, ...] = (Path("/usr/local/cuda/bin/nvcc"),)
ROCM_FALLBACKS: tuple[Path, ...] = (Path("/opt/rocm"),)
ICPX_FALLBACKS: tuple[Path, ...] = (Path("/opt/intel/oneapi/compiler/latest/bin/icpx"),)

_TIMEOUT_S = 30


@dataclass(frozen=True)
class HostInfo:
    """The machine the builder runs on, in variant-name terms."""

    os: str
    """"linux" or "darwin" (anything else is reported as platform.system() lowercased)."""
    arch: str
    """"x86_64" or "aarch64" (normalised from amd64/arm64)."""

    @property
    def system(self) -> str:
        """The Nix-style system string variant names use, e.g. ``x86_64-linux``."""
        return f"{self.arch}-{self.os}"


def detect_host() -> HostInfo:
    """This machine's OS and architecture, normalised to the names variants use."""
    machine = platform.machine().lower()
    return HostInfo(os=platform.system().lower(), arch=ARCH_ALIASES.get(machine, machine))


@dataclass(frozen=True)
class Toolchain:
    """One compiler found on this host."""

    kind: str
    """"cxx", "nvcc", "hipcc", "icpx" or "metal"."""
    path: Path
    version: str | None
    """As the tool reports it ("12.2.0", CUDA "13.0", ROCm "7.0.1", oneAPI "2025.2.0");
    None when the tool ran but its version could not be read."""
    description: str = ""
    """The tool's own first line of version output, for logs and error messages."""

    @property
    def major_minor(self) -> tuple[int, int] | None:
        """(major, minor) of :attr:`version`: what variant names compare against."""
        if self.version and (m := re.match(r"(\d+)\.(\d+)", self.version)):
            return int(m[1]), int(m[2])
        return None


@dataclass(frozen=True)
class Toolchains:
    """Every compiler kind the builder can use; None where this host lacks it."""

    cxx: Toolchain | None = None
    nvcc: Toolchain | None = None
    hipcc: Toolchain | None = None
    icpx: Toolchain | None = None
    metal: Toolchain | None = None
    hipify: Toolchain | None = None
    """hipify-perl (optional: without it, hipcc compiles .cu sources as HIP directly)."""

    def for_backend(self, backend: str) -> Toolchain | None:
        """The device compiler a backend needs (the C++ compiler for cpu)."""
        return {
            "cpu": self.cxx,
            "cuda": self.nvcc,
            "rocm": self.hipcc,
            "xpu": self.icpx,
            "metal": self.metal,
        }[backend]


def detect_toolchains(env: Mapping[str, str] | None = None) -> Toolchains:
    """Find the compilers on this host (cached per process per relevant environment)."""
    env = os.environ if env is None else env
    return _detect_cached(tuple((key, env.get(key)) for key in ENV_KEYS))


def clear_toolchain_cache() -> None:
    """Forget cached detections (after installing a toolkit in this process)."""
    _detect_cached.cache_clear()


@functools.cache
def _detect_cached(env_items: tuple[tuple[str, str | None], ...]) -> Toolchains:
    env = {key: value for key, value in env_items if value is not None}
    return Toolchains(
        cxx=find_cxx(env),
        nvcc=find_nvcc(env),
        hipcc=find_hipcc(env),
        icpx=find_icpx(env),
        metal=find_metal(env),
        hipify=find_hipify(env),
    )


def _run(argv: list[str], env: Mapping[str, str]) -> str | None:
    """stdout+stderr of a version query, or None when the tool cannot be run."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env={**os.environ, **env},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout + done.stderr


def _which(name: str, env: Mapping[str, str]) -> Path | None:
    found = shutil.which(name, path=env.get("PATH", ""))
    return Path(found) if found else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def find_cxx(env: Mapping[str, str]) -> Toolchain | None:
    """``$CXX`` if set, else c++, g++ or clang++ on PATH; version via -dumpfullversion."""
    path: Path | None = None
    if words := shlex.split(env.get("CXX", "")):
        # CXX may carry a launcher ("ccache g++") or flags ("g++ -m64"): take the compiler.
        launcher = len(words) > 1 and Path(words[0]).name in ("ccache", "sccache")
        first = words[1] if launcher else words[0]
        path = Path(first) if os.sep in first else _which(first, env)
        if path is None or not _executable(path):
            return None  # an explicit choice that does not work must not fall back silently
    else:
        path = next((p for name in ("c++", "g++", "clang++") if (p := _which(name, env))), None)
    if path is None:
        return None
    banner = _run([str(path), "--version"], env)
    if banner is None:
        return None
    version = (_run([str(path), "-dumpfullversion"], env) or "").strip()
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        m = re.search(r"version (\d+\.\d+(?:\.\d+)?)", banner) or re.search(
            r"(\d+\.\d+\.\d+)", banner
        )
        version = m[1] if m else ""
    return Toolchain("cxx", path, version or None, _first_line(banner))


def find_nvcc(env: Mapping[str, str]) -> Toolchain | None:
    """nvcc from $CUDA_HOME (or $CUDA_PATH), PATH, then /usr/local/cuda."""
    candidates = [Path(env[k]) / "bin" / "nvcc" for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k)]
    candidates += [p for p in (_which("nvcc", env),) if p] + list(NVCC_FALLBACKS)
    path = next((p for p in candidates if _executable(p)), None)
    if path is None:
        return None
    out = _run([str(path), "--version"], env)
    if out is None:
        return Toolchain("nvcc", path, None)
    m = re.search(r"release (\d+\.\d+)", out)
    return Toolchain("nvcc", path, m[1] if m else None, _last_line(out, "release"))


def find_hipcc(env: Mapping[str, str]) -> Toolchain | None:
    """hipcc from $ROCM_PATH/$HIP_PATH, PATH, then /opt/rocm; the ROCm release version."""
    roots = [Path(env[k]) for k in ("ROCM_PATH", "HIP_PATH") if env.get(k)]
    candidates = [r / "bin" / "hipcc" for r in roots]
    candidates += [p for p in (_which("hipcc", env),) if p]
    candidates += [r / "bin" / "hipcc" for r in ROCM_FALLBACKS]
    path = next((p for p in candidates if _executable(p)), None)
    if path is None:
        return None
    # The ROCm release (7.0.1) is what variant names use; hipcc itself reports the HIP
    # version (7.0.25314), whose major.minor matches the release. Prefer the release file.
    info = path.resolve().parent.parent / ".info" / "version"
    if info.is_file() and (m := re.match(r"\d+\.\d+(?:\.\d+)?", info.read_text().strip())):
        return Toolchain("hipcc", path, m[0], f"ROCm {m[0]} ({info})")
    out = _run([str(path), "--version"], env)
    m = re.search(r"HIP version:\s*(\d+\.\d+(?:\.\d+)?)", out or "")
    return Toolchain("hipcc", path, m[1] if m else None, _last_line(out or "", "HIP version"))


def find_hipify(env: Mapping[str, str]) -> Toolchain | None:
    """hipify-perl from $ROCM_PATH/$HIP_PATH, PATH, then /opt/rocm (no version needed:
    it is a source translator whose output hipcc checks)."""
    roots = [Path(env[k]) for k in ("ROCM_PATH", "HIP_PATH") if env.get(k)]
    candidates = [r / "bin" / "hipify-perl" for r in roots]
    candidates += [p for p in (_which("hipify-perl", env),) if p]
    candidates += [r / "bin" / "hipify-perl" for r in ROCM_FALLBACKS]
    path = next((p for p in candidates if _executable(p)), None)
    return Toolchain("hipify", path, None, "hipify-perl") if path else None


def find_icpx(env: Mapping[str, str]) -> Toolchain | None:
    """Intel's oneAPI DPC++/SYCL compiler from $CMPLR_ROOT/$ONEAPI_ROOT, PATH, /opt/intel."""
    candidates = []
    if env.get("CMPLR_ROOT"):
        candidates.append(Path(env["CMPLR_ROOT"]) / "bin" / "icpx")
    if env.get("ONEAPI_ROOT"):
        candidates.append(Path(env["ONEAPI_ROOT"]) / "compiler" / "latest" / "bin" / "icpx")
    candidates += [p for p in (_which("icpx", env),) if p] + list(ICPX_FALLBACKS)
    path = next((p for p in candidates if _executable(p)), None)
    if path is None:
        return None
    out = _run([str(path), "--version"], env) or ""
    m = re.search(r"Compiler (\d{4}\.\d+(?:\.\d+)?)", out)
    return Toolchain("icpx", path, m[1] if m else None, _first_line(out))


def find_metal(env: Mapping[str, str]) -> Toolchain | None:
    """Apple's Metal shader compiler, found through ``xcrun`` (macOS only)."""
    xcrun = _which("xcrun", env)
    if xcrun is None:
        return None
    found = _run([str(xcrun), "--sdk", "macosx", "--find", "metal"], env)
    if not found or not found.strip():
        return None
    path = Path(_first_line(found))
    out = _run([str(xcrun), "--sdk", "macosx", "metal", "--version"], env) or ""
    m = re.search(r"metal version (\d+(?:\.\d+)+)", out, re.IGNORECASE)
    return Toolchain("metal", path, m[1] if m else None, _first_line(out))


def _last_line(text: str, containing: str) -> str:
    lines = [line.strip() for line in text.splitlines() if containing in line]
    return lines[-1] if lines else _first_line(text)
