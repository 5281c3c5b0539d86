"""Describe the running system: the facts variant selection is decided on.

:class:`SystemInfo` is a plain frozen dataclass so tests (and ``kernelhub versions
--backend``) can describe systems this machine is not, e.g. a ROCm box or a Mac.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import KernelHubError
from .platforms import ARCH_ALIASES, BACKENDS, auto_backend, gpu_capability, torch_is_rocm


@dataclass(frozen=True)
class SystemInfo:
    """The runtime a kernel must match."""

    torch: tuple[int, int]
    os: str
    arch: str
    backend: str
    cuda: tuple[int, int] | None = None
    rocm: tuple[int, int] | None = None
    xpu: tuple[int, int] | None = None
    macos: tuple[int, ...] | None = None
    capability: tuple[int, int] | None = None
    """Compute capability of CUDA device 0, when one exists."""
    cxx11_abi: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise KernelHubError(
                f"unknown backend {self.backend!r}; expected one of {', '.join(BACKENDS)}"
            )

    @property
    def compute_version(self) -> tuple[int, int] | None:
        """The toolkit version of the active backend (CUDA, ROCm or XPU), if any."""
        return {"cuda": self.cuda, "rocm": self.rocm, "xpu": self.xpu}.get(self.backend)

    def describe(self) -> str:
        """One line for error messages: ``torch 2.13, cuda 13.0 (sm 9.0), x86_64-linux``."""
        compute = self.backend
        if self.compute_version:
            compute += " " + ".".join(map(str, self.compute_version))
        if self.capability:
            compute += f" (capability {self.capability[0]}.{self.capability[1]})"
        where = f"{self.arch}-{self.os}"
        if self.macos:
            where += f" (macOS {'.'.join(map(str, self.macos))})"
        abi = "" if self.cxx11_abi else ", pre-cxx11 ABI"
        return f"torch {self.torch[0]}.{self.torch[1]}, {compute}, {where}{abi}"


def _version_pair(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m[1]), int(m[2])) if m else None


def _xpu_version(text: str | None) -> tuple[int, int] | None:
    # torch reports the oneAPI release either as "2025.2" or packed as "20250200".
    if not text:
        return None
    if m := re.match(r"(\d{4})\.(\d+)", text):
        return int(m[1]), int(m[2])
    if m := re.match(r"(\d{4})(\d{2})", text):
        return int(m[1]), int(m[2])
    return None


def _os_name() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "darwin":
        return "darwin"
    return sys.platform


def detect_system(backend: str | None = None) -> SystemInfo:
    """Describe this process's torch and machine.

    ``backend`` overrides the automatic choice (e.g. ``"cpu"`` on a GPU machine to load
    CPU builds). ROCm torch reports itself as CUDA; ``torch.version.hip`` tells them
    apart, so ``backend="cuda"`` on a ROCm torch means ROCm.
    """
    import torch

    chosen = backend or auto_backend(torch)
    if chosen == "cuda" and torch_is_rocm(torch):
        chosen = "rocm"
    if chosen not in BACKENDS:
        raise KernelHubError(f"unknown backend {chosen!r}; expected one of {', '.join(BACKENDS)}")

    cuda = rocm = xpu = None
    if chosen == "cuda":
        cuda = _version_pair(torch.version.cuda)
        if cuda is None:
            raise KernelHubError(
                f"backend='cuda' was requested but torch {torch.__version__} was built "
                "without CUDA; install a CUDA build of torch or pass backend='cpu'"
            )
    elif chosen == "rocm":
        rocm = _version_pair(torch.version.hip)
        if rocm is None:
            raise KernelHubError(
                f"backend='rocm' was requested but torch {torch.__version__} was built "
                "without ROCm; install a ROCm build of torch or pass backend='cpu'"
            )
    elif chosen == "xpu":
        xpu = _xpu_version(getattr(torch.version, "xpu", None))
        if xpu is None:
            raise KernelHubError(
                f"backend='xpu' was requested but torch {torch.__version__} reports no "
                "XPU toolkit version; install an XPU build of torch or pass backend='cpu'"
            )

    capability = None
    if chosen == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() > 0:
        capability = gpu_capability(torch, 0)

    macos = None
    if _os_name() == "darwin" and (release := platform.mac_ver()[0]):
        macos = tuple(int(p) for p in release.split(".") if p.isdigit())

    torch_mm = _version_pair(torch.__version__)
    assert torch_mm is not None, torch.__version__
    machine = platform.machine().lower()
    return SystemInfo(
        torch=torch_mm,
        os=_os_name(),
        arch=ARCH_ALIASES.get(machine, machine),
        backend=chosen,
        cuda=cuda,
        rocm=rocm,
        xpu=xpu,
        macos=macos,
        capability=capability,
        cxx11_abi=bool(torch.compiled_with_cxx11_abi()),
    )


@functools.cache
def _cpu_identity() -> tuple[str, frozenset[str]]:
    """(model name, feature flags) from /proc/cpuinfo; elsewhere the platform's processor."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), frozenset()
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "CPU part") and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return model or platform.machine(), flags


_SPEED_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_tile",
                "amx_bf16", "amx_fp16", "asimd", "sve", "sve2")


def cpu_features() -> str:
    """The CPU facts a speed decision depends on: model name and vector/matrix extensions.

    Only the flags that change which loops run are kept (verification decisions are
    keyed by this, so an unrelated flag does not invalidate them).
    """
    model, flags = _cpu_identity()
    return f"{model} [{' '.join(f for f in _SPEED_FLAGS if f in flags)}]"


def cpu_summary() -> str:
    """One line for benchmark headers: the CPU, and whether AVX-512 and AMX are present."""
    model, flags = _cpu_identity()
    avx512 = "yes" if "avx512f" in flags else "no"
    amx = "yes" if {"amx_tile", "amx_bf16"} <= flags else "no"
    return (f"CPU {model}; flags {' '.join(f for f in _SPEED_FLAGS if f in flags) or '-'}; "
            f"AVX-512 {avx512}; AMX {amx}")
