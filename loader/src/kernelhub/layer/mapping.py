"""The kernel mapping and its keys: layer name → device type → Device → Mode → repository.

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
repository) fail when the mapping is registered, not halfway through kernelize. The keys
(:class:`Device`, :class:`Mode`) live here with the mapping because they mean nothing
elsewhere: each is defined together with the order in which kernelize tries its entries.

**Devices.** A mapping keys kernels by device type (see :mod:`kernelhub.system`, which
also detects the device a model runs on), optionally narrowed to a compute-capability
range, because one GPU kernel rarely serves every GPU generation. Capabilities are
``major * 10 + minor`` (``75`` = sm_75, ``90`` = sm_90, ``121`` = sm_121), as the kernel
ecosystem writes them. When several ranges contain the running GPU, the narrowest wins
(it was written for this hardware most specifically); equal widths prefer the higher
``min_capability`` (the entry aimed at newer hardware), then the lower
``max_capability``. The order depends only on the ranges, never on object identity, so
every process picks the same kernel.

**Modes.** A mapping may register different kernels for inference, training and
torch.compile. A kernel registered for a *stronger* mode can always serve a weaker one: a
training kernel (it has a backward) also runs inference, and a kernel that torch.compile
can trace also runs eagerly. So each requested mode tries its own entry first, then
stronger entries, then the mode-agnostic ``FALLBACK`` entry — never a weaker one:

==============================  ==========================================================
requested mode                  entries tried, in order
==============================  ==========================================================
INFERENCE                       INFERENCE, INFERENCE|TORCH_COMPILE, TRAINING,
                                TRAINING|TORCH_COMPILE, FALLBACK
INFERENCE | TORCH_COMPILE       INFERENCE|TORCH_COMPILE, TRAINING|TORCH_COMPILE, FALLBACK
TRAINING                        TRAINING, TRAINING|TORCH_COMPILE, FALLBACK
TRAINING | TORCH_COMPILE        TRAINING|TORCH_COMPILE, FALLBACK
==============================  ==========================================================

Whatever entry is found, the layer must still support the requested mode
(``has_backward`` for TRAINING, ``can_torch_compile`` for TORCH_COMPILE); one that does
not is skipped and the next entry is tried.

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
import enum
from collections.abc import Iterator, Mapping
from typing import Protocol, TypeGuard, TypeVar

from ..errors import MappingError
from ..system import device_type
from ..value_types import Record

# -- devices ------------------------------------------------------------------------


class _CapabilityRange(Record, frozen=True):
    min_capability: int
    max_capability: int

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
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


class CUDAProperties(_CapabilityRange, frozen=True):
    """A CUDA compute-capability range, e.g. ``CUDAProperties(min_capability=80,
    max_capability=89)`` for Ampere and Ada."""


class ROCMProperties(_CapabilityRange, frozen=True):
    """A ROCm capability range as torch reports it (gfx942 → 9.4 → ``94``)."""


_PROPERTIES = {"cuda": CUDAProperties, "rocm": ROCMProperties}


class Device(Record, frozen=True):
    """A mapping key: a device type, optionally narrowed by capability ``properties``."""

    type: str
    properties: CUDAProperties | ROCMProperties | None = None

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
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


# -- modes --------------------------------------------------------------------------


class Mode(enum.Flag):
    """What the kernelized model will be used for.

    ``FALLBACK`` is only a mapping key (a kernel for any mode); pass ``INFERENCE`` or
    ``TRAINING`` to :func:`kernelize`, optionally combined with ``TORCH_COMPILE``.
    """

    FALLBACK = enum.auto()
    TRAINING = enum.auto()
    INFERENCE = enum.auto()
    TORCH_COMPILE = enum.auto()

    def __repr__(self) -> str:  # "Mode.TRAINING|TORCH_COMPILE", stable across Python versions
        return "Mode." + describe_mode(self)


_I, _T, _C, _F = Mode.INFERENCE, Mode.TRAINING, Mode.TORCH_COMPILE, Mode.FALLBACK

MODE_FALLBACK_ORDER: dict[Mode, tuple[Mode, ...]] = {
    _I: (_I, _I | _C, _T, _T | _C, _F),
    _I | _C: (_I | _C, _T | _C, _F),
    _T: (_T, _T | _C, _F),
    _T | _C: (_T | _C, _F),
}
"""Requested mode → mapping entries to try, best first (see the module docstring)."""

_NAMES = ("FALLBACK", "TRAINING", "INFERENCE", "TORCH_COMPILE")


def describe_mode(mode: Mode) -> str:
    """``"TRAINING|TORCH_COMPILE"``: the flag names in a fixed order, for messages."""
    names = [n for n in _NAMES if Mode[n] in mode]
    return "|".join(names) or "0"


F = TypeVar("F", bound=enum.Flag)


def same_named_flag(value: object, flag: type[F]) -> F | None:
    """``value`` as a member of ``flag``, or None when it is not one.

    The kernel ecosystem's ``kernels.Mode`` and ``kernels.KernelizeFallback`` have the
    flags of ours under the same names, and Transformers 5.25 passes its ``Mode``
    (``model.train()`` sets ``kernels_mode`` to one), so a flag of another enum whose
    set members are all named like ours converts by name.
    """
    if isinstance(value, flag):
        return value
    if not isinstance(value, enum.Flag):
        return None
    names = [m.name for m in type(value) if m.value and m in value and m.name]
    if not all(n in flag.__members__ for n in names):
        return None
    result = flag(0)
    for name in names:
        result |= flag.__members__[name]
    return result


def as_mode(value: object) -> Mode | None:
    """``value`` (kernelhub's or the ecosystem's ``Mode``) as a kernelhub Mode, else None."""
    mode = same_named_flag(value, Mode)
    return mode if mode else None


def check_kernelize_mode(mode: object) -> Mode:
    """The mode kernelize was asked for, or a TypeError/ValueError saying what is valid."""
    converted = as_mode(mode)
    if converted is None:
        raise MappingError(
            f"mode must be a Mode (kernelhub's or the kernel ecosystem's), got {mode!r}; use "
            "Mode.INFERENCE, Mode.TRAINING, or either combined with Mode.TORCH_COMPILE"
        )
    mode = converted
    if mode not in MODE_FALLBACK_ORDER:
        valid = ", ".join(describe_mode(m) for m in MODE_FALLBACK_ORDER)
        raise MappingError(
            f"kernelize cannot run in mode {describe_mode(mode)}: give exactly one of INFERENCE "
            f"or TRAINING, optionally with TORCH_COMPILE (FALLBACK is only a mapping key). "
            f"Valid modes: {valid}"
        )
    return mode


MAPPING_MODES: tuple[Mode, ...] = (_I, _I | _C, _T, _T | _C, _F)
"""Every mode a mapping entry may be registered for."""


def check_mapping_mode(mode: object, where: str) -> Mode:
    """A mode used as a mapping key; anything kernelize would never look up is refused."""
    converted = as_mode(mode)
    if converted is None:
        raise MappingError(f"{where}: mapping mode keys must be Mode values, got {mode!r}")
    mode = converted
    if mode not in MAPPING_MODES:
        valid = ", ".join(describe_mode(m) for m in MAPPING_MODES)
        raise MappingError(
            f"{where}: {describe_mode(mode)} is not a mapping mode; use one of {valid} "
            "(a TRAINING kernel is used for inference automatically)"
        )
    return mode


def unsupported_reason(layer: object, mode: Mode) -> str | None:
    """Why ``layer`` (a layer class or a function kernel) cannot run in ``mode``, or None.

    The one rule, with the kernel ecosystem's defaults: a kernel has a backward unless it
    says ``has_backward = False``, and torch.compile may trace it only if it says
    ``can_torch_compile = True``.
    """
    if Mode.TRAINING in mode and not getattr(layer, "has_backward", True):
        return "has no backward (has_backward = False), so it cannot train"
    if Mode.TORCH_COMPILE in mode and not getattr(layer, "can_torch_compile", False):
        return "is not marked can_torch_compile = True"
    return None


# -- the mapping ----------------------------------------------------------------------


CacheKey = tuple[object, ...]
"""A repository's ``cache_key()``: hashable values that name one kernel and layer."""


class Repository(Protocol):
    """What kernelize needs of a repository: every class of :mod:`kernelhub.layer.repos`,
    or any object with the same two methods."""

    def load(self) -> type:
        """The layer class this repository names (imports the kernel if needed)."""
        ...

    def cache_key(self) -> CacheKey:
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


def normalize_mapping(mapping: Mapping[str, object]) -> KernelMapping:
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


def register_kernel_mapping(mapping: Mapping[str, object], inherit_mapping: bool = True) -> None:
    """Add ``mapping`` to the active mapping (or replace it: ``inherit_mapping=False``).

    Registered entries last for the current context (the process, unless called inside
    :func:`use_kernel_mapping` or another context).
    """
    new = normalize_mapping(mapping)
    _MAPPING.set(merge_mappings(_MAPPING.get() if inherit_mapping else {}, new))


@contextlib.contextmanager
def use_kernel_mapping(
    mapping: Mapping[str, object], *, inherit_mapping: bool = True
) -> Iterator[None]:
    """Use ``mapping`` (on top of the active one, or alone with ``inherit_mapping=False``)
    inside a ``with`` block; the previous mapping is back afterwards, even on error."""
    new = normalize_mapping(mapping)
    token = _MAPPING.set(merge_mappings(_MAPPING.get() if inherit_mapping else {}, new))
    try:
        yield
    finally:
        _MAPPING.reset(token)
