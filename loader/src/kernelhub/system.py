"""The platform: its vocabulary, its rules, and the running system's facts.

The one module that knows platforms; everything else asks it. Two vocabularies exist
because two worlds name the same hardware differently, and only this module translates:

* a **backend** is how a kernel is built and named (``cpu``, ``cuda``, ``rocm``, ``xpu``,
  ``metal``): variant names, ``build.toml``, metadata and :class:`SystemInfo` use it;
* a **device type** is where torch runs a tensor (``cpu``, ``cuda``, ``rocm``, ``mps``,
  ``xpu``, ``npu``): kernel mappings and kernelize use it. ROCm builds of torch call
  their GPUs ``cuda``; here they are ``rocm``, so ROCm mappings apply by themselves.
  :func:`runtime_device` is kernelize's question to this module: which device type, and
  which GPU capability, does this model run on.

Metal kernels run on torch's ``mps`` device: ``metal`` and ``mps`` are accepted for each
other wherever a user writes one. Detection reads torch lazily (importing kernelhub must
stay cheap and must not import torch before the user does). :class:`SystemInfo` is a
plain frozen record so tests (and ``kernelhub variants --backend``) can describe
systems this machine is not, e.g. a ROCm box or a Mac.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import KernelHubError, MappingError
from .lazy_names import deferred
from .value_types import Record

if TYPE_CHECKING:
    from importlib import metadata as importlib_metadata
    from importlib import util as importlib_util

    import torch
    from torch_npu.utils import collect_env as npu_env  # type: ignore[import-not-found]
else:
    torch = deferred("torch")
    importlib_metadata = deferred("importlib.metadata")
    importlib_util = deferred("importlib.util")
    npu_env = deferred("torch_npu.utils.collect_env")  # a plug-in, present on Ascend machines

BACKENDS: tuple[str, ...] = ("cpu", "cuda", "rocm", "xpu", "metal")
"""Backends kernelhub builds, as variant names write them (and KernelConfig keys)."""
FOREIGN_BACKENDS: tuple[str, ...] = ("cann", "neuron", "tpu")
"""Backends the ecosystem names that kernelhub does not build: their variant names parse,
their builds are selected and loaded where the running torch has that device, and the
builder lists them with :data:`FOREIGN_BACKEND_REASONS`."""
ALL_BACKENDS: tuple[str, ...] = (*BACKENDS, *FOREIGN_BACKENDS)
"""Every backend a variant name or metadata.json may carry."""
UNBUILDABLE_BACKENDS: tuple[str, ...] = FOREIGN_BACKENDS
"""Backends of the ecosystem's build.toml schema that kernelhub's builder skips."""
TOOLKIT_BACKENDS: tuple[str, ...] = ("cuda", "rocm", "xpu", "cann")
"""Backends whose builds are tied to a toolkit version (CUDA 13.0, ROCm 7.0, XPU 2025.2,
CANN 8.1)."""
FOREIGN_BACKEND_REASONS: dict[str, str] = {
    "cann": "CANN (Huawei Ascend NPU) builds need the CANN toolkit and torch_npu, which "
            "kernelhub's builder has no toolchain for; build them with the ecosystem's "
            "kernel-builder on an Ascend host (kernelhub loads them)",
    "neuron": "AWS Neuron kernels are compiled by the Neuron SDK (NKI) on Trainium/Inferentia "
              "hosts, which kernelhub's builder has no toolchain for (kernelhub loads them)",
    "tpu": "TPU kernels are built against torch_tpu (Pallas/XLA), which kernelhub's builder "
           "has no toolchain for (kernelhub loads them)",
}
"""Why the builder cannot build each foreign backend, for ``builder list-variants``."""
MLX_REASON = ("MLX kernels (mlx-metal) are written for Apple's MLX framework, not torch; "
              "kernelhub builds torch kernels (it lists and loads mlx-metal variants where "
              "mlx is installed on macOS)")
"""Why the builder cannot build the ecosystem's ``mlx-noarch`` kernels."""
ARCHES: tuple[str, ...] = ("x86_64", "aarch64")
OSES: tuple[str, ...] = ("linux", "darwin")
"""Operating systems kernelhub builds for and loads on."""
VARIANT_OSES: tuple[str, ...] = (*OSES, "windows")
"""Operating systems a variant name may end in (the ecosystem also builds for Windows)."""
ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
"""What ``platform.machine()`` reports → the arch variant names use."""

DEVICE_TYPES: tuple[str, ...] = ("cuda", "rocm", "mps", "xpu", "npu", "neuron", "tpu", "cpu")
"""Device types a kernel mapping can name."""

_DIGITS = "0123456789"

_DEVICE_OF_BACKEND = {"metal": "mps", "cann": "npu"}
_BACKEND_OF_DEVICE = {"mps": "metal", "npu": "cann"}


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
            "('metal' is accepted for 'mps', 'cann' for 'npu')"
        )
    return kind


def backend_of(name: str) -> str:
    """A device type or backend word → the backend name: ``"mps"`` → ``"metal"``,
    ``"npu"`` → ``"cann"``.

    Words that are no backend come back unchanged, for the caller to refuse with its own
    list of what is valid.
    """
    return _BACKEND_OF_DEVICE.get(name, name)


def platform_problem(backend: str, os_name: str | None, arch: str | None = None) -> str | None:
    """Why ``backend`` builds cannot exist for this OS (and arch, if given), else None."""
    if os_name == "darwin" and backend not in ("cpu", "metal"):
        return f"{backend} builds do not exist on macOS"
    if backend in FOREIGN_BACKENDS and os_name is not None and os_name != "linux":
        return f"{backend} builds exist only on Linux"
    if os_name is not None and os_name != "darwin" and backend == "metal":
        return "Metal builds exist only on macOS"
    if backend == "metal" and arch is not None and arch != "aarch64":
        return "Metal builds exist only on Apple silicon (aarch64)"
    if backend in ("rocm", "xpu") and arch is not None and arch != "x86_64":
        return f"{backend} builds exist only on x86_64 (PyTorch publishes no {backend} torch for {arch})"
    return None


# -- detection (torch is imported by the caller or on first use) -----------------------


def torch_is_rocm(torch: ModuleType) -> bool:
    """ROCm builds of torch report their GPUs as CUDA; ``torch.version.hip`` tells."""
    return bool(getattr(torch.version, "hip", None))


def auto_backend(torch: ModuleType) -> str:
    """The backend of the best accelerator this torch can use, else ``cpu``.

    GPUs first (a Neuron or TPU plug-in can be installed next to a CUDA torch), then the
    ecosystem's other accelerators as their torch plug-ins announce them: ``torch_tpu``
    as torch's current accelerator, ``torch_neuronx`` as ``torch.neuron``, ``torch_npu``
    (CANN) as the ``npu`` private-use backend.
    """
    if torch.cuda.is_available():
        return "rocm" if torch_is_rocm(torch) else "cuda"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "metal"
    accelerator = getattr(torch, "accelerator", None)
    current = accelerator.current_accelerator() if accelerator is not None else None
    if current is not None and current.type == "tpu":
        return "tpu"
    if hasattr(torch, "neuron"):
        return "neuron"
    if _privateuse1_name(torch) == "npu":
        return "cann"
    return "cpu"


def _privateuse1_name(torch: ModuleType) -> str | None:
    """The out-of-tree backend a plug-in registered (``npu`` for torch_npu), if any."""
    get_name = getattr(torch._C, "_get_privateuse1_backend_name", None)
    name = get_name() if get_name is not None else None
    return name if isinstance(name, str) and name != "privateuseone" else None


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


def torch_device_type(device: torch.device, torch: ModuleType) -> str:
    """The device type of a torch device, ``rocm`` for a ROCm torch's ``cuda``."""
    if device.type == "cuda" and torch_is_rocm(torch):
        return "rocm"
    return device.type


# -- the device a model runs on (kernelize's view of the running system) --------------


class RuntimeDevice(Record, frozen=True):
    """The device a model runs on, as kernelize sees it: a device type and, on CUDA and
    ROCm, the GPU's capability as mappings write it (``major * 10 + minor``)."""

    type: str
    capability: int | None = None
    index: int | None = None

    def __str__(self) -> str:
        cap = f", capability {self.capability}" if self.capability is not None else ""
        return f"{self.type}{cap}"


def _model_device(model: torch.nn.Module) -> torch.device:
    for parameter in model.parameters():
        return parameter.device
    for buffer in model.buffers():
        return buffer.device
    return torch.device("cpu")


def _capability_number_of(torch: ModuleType, index: int | None) -> int | None:
    found = gpu_capability(torch, index)
    return capability_number(found) if found is not None else None


def runtime_device(model: torch.nn.Module, device: object = None) -> RuntimeDevice:
    """Where ``model`` runs: ``device`` if given (str or torch.device), else where its
    first parameter or buffer lives (``cpu`` for a model with neither). A ROCm torch's
    ``cuda`` device is ``rocm``, so ROCm mappings apply without the user naming it."""
    if device is None:
        dev = _model_device(model)
    elif isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        if device.strip().lower() in ("rocm", "metal"):
            kind = device_type(device, "kernelize(device=...)")
            cap = _capability_number_of(torch, None) if kind == "rocm" else None
            return RuntimeDevice(kind, cap, None)
        try:
            dev = torch.device(device)
        except RuntimeError as e:
            raise MappingError(
                f"kernelize(device={device!r}): not a device torch knows ({e}); use e.g. "
                f"'cuda', 'cuda:1', 'cpu', 'mps', 'xpu' or 'rocm'"
            ) from None
    else:
        raise MappingError(
            f"kernelize(device=...) takes a str or torch.device, got {type(device).__name__}"
        )
    kind, index = torch_device_type(dev, torch), dev.index
    if kind in ("cuda", "rocm"):
        return RuntimeDevice(kind, _capability_number_of(torch, index), index)
    return RuntimeDevice(kind, None, index)


# -- the running system ----------------------------------------------------------


class SystemInfo(Record, frozen=True):
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
    cann: tuple[int, int] | None = None
    python: tuple[int, int] = (sys.version_info[0], sys.version_info[1])
    """The running CPython's major.minor (compiled variants name the oldest they need)."""
    free_threaded: bool = False
    """A free-threaded CPython build: loads ``abi3t`` extensions, never ``abi3``."""
    tvm_ffi: tuple[int, int] | None = None
    """apache-tvm-ffi's major.minor where it is installed (tvm-ffi variants need it)."""
    mlx: bool = False
    """Whether MLX is installed (``mlx-metal`` variants need it)."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if self.backend not in ALL_BACKENDS:
            raise KernelHubError(
                f"unknown backend {self.backend!r}; expected one of {', '.join(ALL_BACKENDS)}"
            )

    @property
    def compute_version(self) -> tuple[int, int] | None:
        """The toolkit version of the active backend (CUDA, ROCm, XPU or CANN), if any."""
        return {"cuda": self.cuda, "rocm": self.rocm, "xpu": self.xpu,
                "cann": self.cann}.get(self.backend)

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


def is_ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` alone also takes other
    scripts' digits and superscripts)."""
    return text.isascii() and text.isdigit()


def _version_pair(text: str | None) -> tuple[int, int] | None:
    """``"2.13.0+cpu"`` → (2, 13): the leading ``<major>.<minor>`` of a version string.
    With str methods: every load asks, and compiling a regex for it costs more."""
    major, dot, rest = (text or "").partition(".")
    minor = rest[:len(rest) - len(rest.lstrip(_DIGITS))]
    if not (dot and minor and is_ascii_digits(major)):
        return None
    return int(major), int(minor)


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
    chosen = backend_of(backend) if backend else auto_backend(torch)
    if chosen == "cuda" and torch_is_rocm(torch):
        chosen = "rocm"
    if chosen not in ALL_BACKENDS:
        raise KernelHubError(
            f"unknown backend {chosen!r}; expected one of {', '.join(ALL_BACKENDS)}"
        )

    cuda = rocm = xpu = cann = None
    if chosen in ("cuda", "rocm"):
        label = "CUDA" if chosen == "cuda" else "ROCm"
        # torch.version.rocm (torch >= 2.10) is the ROCm release; the HIP version can
        # differ from it (ROCm 10.0 ships HIP 7.15), so it is only the fallback.
        found = _version_pair(torch.version.cuda if chosen == "cuda" else
                              getattr(torch.version, "rocm", None) or torch.version.hip)
        if found is None:
            raise KernelHubError(
                f"backend={chosen!r} was requested but torch {torch.__version__} was built "
                f"without {label}; install a {label} build of torch or pass backend='cpu'"
            )
        cuda, rocm = (found, None) if chosen == "cuda" else (None, found)
    elif chosen == "xpu":
        xpu = _xpu_version(getattr(torch.version, "xpu", None))
        if xpu is None:
            raise KernelHubError(
                f"backend='xpu' was requested but torch {torch.__version__} reports no "
                "XPU toolkit version; install an XPU build of torch or pass backend='cpu'"
            )
    elif chosen in ("tpu", "neuron") and auto_backend(torch) != chosen:
        plugin = {"tpu": "torch_tpu", "neuron": "torch_neuronx"}[chosen]
        raise KernelHubError(
            f"backend={chosen!r} was requested but torch has no {chosen} device here "
            f"({plugin} is not loaded); install {plugin} on a {chosen.upper()} host or "
            "pass backend='cpu'"
        )
    elif chosen == "cann":
        cann = _cann_version() if _privateuse1_name(torch) == "npu" else None
        if cann is None:
            raise KernelHubError(
                "backend='cann' was requested but torch_npu reports no CANN version; "
                "install torch_npu with the CANN toolkit or pass backend='cpu'"
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
        cann=cann,
        free_threaded="t" in getattr(sys, "abiflags", ""),
        tvm_ffi=_tvm_ffi_version(),
        mlx=_os_name() == "darwin" and _installed("mlx"),
    )


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (~0.1 ms)."""
    try:
        return importlib_util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def _tvm_ffi_version() -> tuple[int, int] | None:
    """apache-tvm-ffi's major.minor from its distribution metadata, without importing it."""
    if not _installed("tvm_ffi"):
        return None
    try:
        return _version_pair(importlib_metadata.version("apache-tvm-ffi"))
    except importlib_metadata.PackageNotFoundError:
        return None


def _cann_version() -> tuple[int, int] | None:
    """The CANN toolkit's major.minor as torch_npu reports it (``"8.1.RC1"`` → (8, 1))."""
    try:
        get_cann_version = npu_env.get_cann_version
    except (ImportError, AttributeError):  # no torch_npu, or one without the probe
        return None
    try:
        return _version_pair(str(get_cann_version()))
    except Exception:  # a plug-in's probe must not break detection
        return None


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


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    return _cpu_identity()[1]


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
