"""The platform vocabulary: backends, torch device types, systems, detection and rules.

Two vocabularies exist because two worlds name the same hardware differently, and this
module is the only place that knows both and translates:

* a **backend** is how a kernel is built and named (``cpu``, ``cuda``, ``rocm``, ``xpu``,
  ``metal``): variant names, ``build.toml``, metadata and :class:`SystemInfo` use it;
* a **device type** is where torch runs a tensor (``cpu``, ``cuda``, ``rocm``, ``mps``,
  ``xpu``, ``npu``): kernel mappings and kernelize use it. ROCm builds of torch call
  their GPUs ``cuda``; here they are ``rocm``, so ROCm mappings apply by themselves.

Metal kernels run on torch's ``mps`` device: ``metal`` and ``mps`` are accepted for each
other wherever a user writes one. Detection reads torch lazily (importing kernelhub must
stay cheap and must not import torch before the user does).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from .errors import MappingError

if TYPE_CHECKING:
    import torch as torch_module

BACKENDS: tuple[str, ...] = ("cpu", "cuda", "rocm", "xpu", "metal")
"""Build backends, as variant names write them."""
TOOLKIT_BACKENDS: tuple[str, ...] = ("cuda", "rocm", "xpu")
"""Backends whose builds are tied to a toolkit version (CUDA 13.0, ROCm 7.0, XPU 2025.2)."""
UNBUILDABLE_BACKENDS: tuple[str, ...] = ("neuron", "cann")
"""Backends of the ecosystem's build.toml schema that have no variant names here."""
ARCHES: tuple[str, ...] = ("x86_64", "aarch64")
OSES: tuple[str, ...] = ("linux", "darwin")
ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
"""What ``platform.machine()`` reports → the arch variant names use."""

DEVICE_TYPES: tuple[str, ...] = ("cuda", "rocm", "mps", "xpu", "npu", "cpu")
"""Device types a kernel mapping can name."""

_DEVICE_OF_BACKEND = {"metal": "mps"}
_BACKEND_OF_DEVICE = {"mps": "metal"}


def device_type(name: object, where: str = "device") -> str:
    """A user's word for a device → its device type: ``"metal"`` → ``"mps"``.

    Raises MappingError (a TypeError and ValueError) naming ``where`` for anything else.
    """
    if not isinstance(name, str):
        raise MappingError(f"{where}: a device type must be a string, got {name!r}")
    word = name.strip().lower()
    kind = _DEVICE_OF_BACKEND.get(word, word)
    if kind not in DEVICE_TYPES:
        raise MappingError(
            f"{where}: unknown device type {name!r}; valid types: {', '.join(DEVICE_TYPES)} "
            "('metal' is accepted for 'mps')"
        )
    return kind


def backend_of(name: str) -> str:
    """A device type or backend word → the backend name: ``"mps"`` → ``"metal"``.

    Words that are no backend come back unchanged, for the caller to refuse with its own
    list of what is valid.
    """
    return _BACKEND_OF_DEVICE.get(name, name)


def platform_problem(backend: str, os_name: str | None, arch: str | None = None) -> str | None:
    """Why ``backend`` builds cannot exist for this OS (and arch, if given), else None."""
    if os_name == "darwin" and backend not in ("cpu", "metal"):
        return f"{backend} builds do not exist on macOS"
    if os_name is not None and os_name != "darwin" and backend == "metal":
        return "Metal builds exist only on macOS"
    if backend == "metal" and arch is not None and arch != "aarch64":
        return "Metal builds exist only on Apple silicon (aarch64)"
    return None


# -- detection (torch is imported by the caller or on first use) -----------------------


def torch_is_rocm(torch: ModuleType) -> bool:
    """ROCm builds of torch report their GPUs as CUDA; ``torch.version.hip`` tells."""
    return bool(getattr(torch.version, "hip", None))


def auto_backend(torch: ModuleType) -> str:
    """The backend of the best accelerator this torch can use, else ``cpu``."""
    if torch.cuda.is_available():
        return "rocm" if torch_is_rocm(torch) else "cuda"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "metal"
    return "cpu"


def gpu_capability(torch: ModuleType, index: int | None = None) -> tuple[int, int] | None:
    """Compute capability (major, minor) of a CUDA/ROCm GPU; None without one."""
    try:
        major, minor = torch.cuda.get_device_capability(index)
    except (RuntimeError, AssertionError, AttributeError):  # no GPU, or not initialisable
        return None
    return int(major), int(minor)


def capability_number(capability: tuple[int, int]) -> int:
    """(8, 9) → 89: capabilities as the kernel ecosystem writes them in mappings."""
    return capability[0] * 10 + capability[1]


def torch_device_type(device: torch_module.device, torch: ModuleType) -> str:
    """The device type of a torch device, ``rocm`` for a ROCm torch's ``cuda``."""
    if device.type == "cuda" and torch_is_rocm(torch):
        return "rocm"
    return device.type
