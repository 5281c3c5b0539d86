"""The kernel mapping: layer name → device type → device entry → mode → repository.

Users write mappings loosely, the way the kernel ecosystem does::

    {"SiluAndMul": {
        "cuda": LayerRepository("kernels-community/activation", layer_name="SiluAndMul"),
        Device("cuda", CUDAProperties(min_capability=90, max_capability=90)): {
            Mode.INFERENCE: LayerRepository(...),
            Mode.TRAINING: LayerRepository(...),
        },
        "cpu": LayerRepository(...),
    }}

Each value is normalised once, here, into the strict form
``{name: {device_type: {Device: {Mode: repository}}}}``: a bare repository becomes
``{Mode.FALLBACK: repository}``, a device string becomes ``Device(type)``. Mistakes
(unknown device, a mode FALLBACK cannot combine with, something that is not a
repository) fail when the mapping is registered, not halfway through kernelize.

A layer name mapped to ``None`` (or ``{}``) has no kernel: it disables that layer's
kernels inherited from an outer mapping. Merging replaces entries per
(name, Device): a new ``"cuda"`` entry replaces the old ``"cuda"`` entry, while the old
``"rocm"`` entry of the same layer stays.

The active mapping lives in a :class:`contextvars.ContextVar`, so
:func:`use_kernel_mapping` is scoped to a ``with`` block (and to a thread or task).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, TypeGuard

from ..errors import MappingError
from ..system import device_type
from .device import Device
from .mode import Mode, check_mapping_mode


class Repository(Protocol):
    """What kernelize needs of a repository: every class of :mod:`kernelhub.layer.repos`,
    or any object with the same two methods."""

    def load(self) -> type:
        """The layer class this repository names (imports the kernel if needed)."""
        ...

    def cache_key(self) -> tuple[Any, ...]:
        """Identifies the kernel and layer, resolved against the current settings."""
        ...


ModeRepos = dict[Mode, Repository]
DeviceRepos = dict[str, dict[Device, ModeRepos]]
KernelMapping = dict[str, DeviceRepos]
"""The normalised mapping; an empty DeviceRepos means "no kernel for this layer"."""

_MAPPING: contextvars.ContextVar[KernelMapping] = contextvars.ContextVar(
    "kernelhub_kernel_mapping", default={}  # noqa: B039 - never mutated, always replaced
)


def _is_repository(value: object) -> TypeGuard[Repository]:
    return callable(getattr(value, "load", None)) and callable(getattr(value, "cache_key", None))


def _check_repository(value: object, where: str) -> Repository:
    if not _is_repository(value):
        raise MappingError(
            f"{where}: expected a repository (LayerRepository, FuncRepository, "
            f"LocalLayerRepository, LocalFuncRepository, LockedLayerRepository, ...), "
            f"got {type(value).__name__}: {value!r}"
        )
    return value


def _mode_repos(value: object, where: str) -> ModeRepos:
    if isinstance(value, Mapping):
        return {check_mapping_mode(m, where): _check_repository(r, f"{where}[{m!r}]")
                for m, r in value.items()}
    return {Mode.FALLBACK: _check_repository(value, where)}


def _device_key(key: object, where: str) -> Device:
    if isinstance(key, Device):
        return key
    if isinstance(key, str):
        return Device(device_type(key, where))
    raise MappingError(f"{where}: device keys must be a str or a Device, got {key!r}")


def normalize_mapping(mapping: Mapping[str, Any]) -> KernelMapping:
    """The strict form of a user's mapping; raises on anything kernelize could not use."""
    if not isinstance(mapping, Mapping):
        raise MappingError(f"a kernel mapping must be a dict, got {type(mapping).__name__}")
    result: KernelMapping = {}
    for name, devices in mapping.items():
        if not isinstance(name, str) or not name:
            raise MappingError(f"kernel mapping keys must be layer names (str), got {name!r}")
        per_type: DeviceRepos = {}
        if devices is None:
            result[name] = per_type
            continue
        if not isinstance(devices, Mapping):
            raise MappingError(
                f"mapping[{name!r}] must be a dict of device → repository (e.g. "
                f"{{'cuda': LayerRepository(...)}}) or None to disable it, got {devices!r}"
            )
        for key, value in devices.items():
            where = f"mapping[{name!r}][{key!r}]"
            device = _device_key(key, where)
            per_type.setdefault(device.type, {})[device] = _mode_repos(value, where)
        result[name] = per_type
    return result


def merge_mappings(base: KernelMapping, new: KernelMapping) -> KernelMapping:
    """``base`` updated by ``new``, per (layer name, Device); neither is modified."""
    merged = {name: {t: dict(entries) for t, entries in devs.items()}
              for name, devs in base.items()}
    for name, devs in new.items():
        if not devs:  # explicitly no kernel
            merged[name] = {}
            continue
        target = merged.setdefault(name, {})
        for kind, entries in devs.items():
            target.setdefault(kind, {}).update(entries)
    return merged


def get_kernel_mapping() -> KernelMapping:
    """A copy of the mapping kernelize would use now."""
    return merge_mappings({}, _MAPPING.get())


def register_kernel_mapping(mapping: Mapping[str, Any], inherit_mapping: bool = True) -> None:
    """Add ``mapping`` to the active mapping (or replace it: ``inherit_mapping=False``).

    Registered entries last for the current context (the process, unless called inside
    :func:`use_kernel_mapping` or another context).
    """
    new = normalize_mapping(mapping)
    _MAPPING.set(merge_mappings(_MAPPING.get() if inherit_mapping else {}, new))


@contextlib.contextmanager
def use_kernel_mapping(
    mapping: Mapping[str, Any], *, inherit_mapping: bool = True
) -> Iterator[None]:
    """Use ``mapping`` (on top of the active one, or alone with ``inherit_mapping=False``)
    inside a ``with`` block; the previous mapping is back afterwards, even on error."""
    new = normalize_mapping(mapping)
    token = _MAPPING.set(merge_mappings(_MAPPING.get() if inherit_mapping else {}, new))
    try:
        yield
    finally:
        _MAPPING.reset(token)
