"""Devices in a kernel mapping, the device a model runs on, and capability ranges.

A mapping keys kernels by device type (``"cuda"``, ``"rocm"``, ``"mps"``, ``"xpu"``,
``"npu"``, ``"cpu"``), optionally narrowed to a compute-capability range, because one
GPU kernel rarely serves every GPU generation. Capabilities are ``major * 10 + minor``
(``75`` = sm_75, ``90`` = sm_90, ``121`` = sm_121), as the kernel ecosystem writes them.

When several ranges contain the running GPU, the narrowest wins (it was written for this
hardware most specifically); equal widths prefer the higher ``min_capability`` (the entry
aimed at newer hardware), then the lower ``max_capability``. The order depends only on
the ranges, never on object identity, so every process picks the same kernel.

ROCm builds of PyTorch report their GPUs as ``cuda``; :func:`runtime_device` looks at
``torch.version.hip`` and calls them ``rocm`` so ROCm mappings apply without the user
naming the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MappingError
from ..system import capability_number, device_type, gpu_capability, torch_device_type

if TYPE_CHECKING:
    import torch

@dataclass(frozen=True)
class _CapabilityRange:
    min_capability: int
    max_capability: int

    def __post_init__(self) -> None:
        for field in ("min_capability", "max_capability"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MappingError(
                    f"{type(self).__name__}.{field} must be a non-negative int "
                    f"(major * 10 + minor, e.g. 80 for 8.0), got {value!r}"
                )
        if self.min_capability > self.max_capability:
            raise MappingError(
                f"{type(self).__name__}: min_capability {self.min_capability} is above "
                f"max_capability {self.max_capability}"
            )

    def contains(self, capability: int) -> bool:
        """Whether the range includes ``capability`` (both ends inclusive)."""
        return self.min_capability <= capability <= self.max_capability

    @property
    def width(self) -> int:
        return self.max_capability - self.min_capability

    def preference(self) -> tuple[int, int, int]:
        """Sort key among ranges that all contain the GPU: narrowest, then newest, first."""
        return (self.width, -self.min_capability, self.max_capability)


@dataclass(frozen=True)
class CUDAProperties(_CapabilityRange):
    """A CUDA compute-capability range, e.g. ``CUDAProperties(min_capability=80,
    max_capability=89)`` for Ampere and Ada."""


@dataclass(frozen=True)
class ROCMProperties(_CapabilityRange):
    """A ROCm capability range as torch reports it (gfx942 → 9.4 → ``94``)."""


_PROPERTIES = {"cuda": CUDAProperties, "rocm": ROCMProperties}


@dataclass(frozen=True)
class Device:
    """A mapping key: a device type, optionally narrowed by capability ``properties``."""

    type: str
    properties: CUDAProperties | ROCMProperties | None = None

    def __post_init__(self) -> None:
        kind = device_type(self.type, "Device")
        object.__setattr__(self, "type", kind)
        if self.properties is None:
            return
        expected = _PROPERTIES.get(kind)
        if expected is None or type(self.properties) is not expected:
            allowed = ", ".join(f"{t}: {c.__name__}" for t, c in _PROPERTIES.items())
            raise MappingError(
                f"Device({kind!r}) cannot take {type(self.properties).__name__}; capability "
                f"properties exist only for {allowed}"
            )

    def matches(self, capability: int | None) -> bool:
        """Whether this entry applies to a GPU of ``capability`` (None: unknown)."""
        if self.properties is None:
            return True
        return capability is not None and self.properties.contains(capability)

    def __str__(self) -> str:
        if self.properties is None:
            return self.type
        p = self.properties
        return f"{self.type}[{p.min_capability}-{p.max_capability}]"


def order_device_entries(devices: list[Device], capability: int | None) -> list[Device]:
    """The entries that apply to a GPU of ``capability``, best first.

    Ranged entries that contain the capability come first (narrowest, then newest), the
    type-wide entry (no properties) last: a specific kernel beats a generic one.
    """
    ranged = [d for d in devices if d.properties is not None and d.matches(capability)]
    ranged.sort(key=lambda d: d.properties.preference())  # type: ignore[union-attr]
    generic = [d for d in devices if d.properties is None]
    return ranged + generic


@dataclass(frozen=True)
class RuntimeDevice:
    """The device a model runs on, as kernelize sees it."""

    type: str
    capability: int | None = None
    index: int | None = None

    def __str__(self) -> str:
        cap = f", capability {self.capability}" if self.capability is not None else ""
        return f"{self.type}{cap}"


def _model_device(model: torch.nn.Module) -> torch.device:
    import torch

    for parameter in model.parameters():
        return parameter.device
    for buffer in model.buffers():
        return buffer.device
    return torch.device("cpu")


def _capability(index: int | None) -> int | None:
    import torch

    found = gpu_capability(torch, index)
    return capability_number(found) if found is not None else None


def runtime_device(model: torch.nn.Module, device: Any = None) -> RuntimeDevice:
    """Where ``model`` runs: ``device`` if given (str or torch.device), else where its
    first parameter or buffer lives (``cpu`` for a model with neither)."""
    import torch

    if device is None:
        dev = _model_device(model)
    elif isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        if device.strip().lower() in ("rocm", "metal"):
            kind = device_type(device, "kernelize(device=...)")
            index = None
            cap = _capability(None) if kind == "rocm" else None
            return RuntimeDevice(kind, cap, index)
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
        return RuntimeDevice(kind, _capability(index), index)
    return RuntimeDevice(kind, None, index)
