"""kernelize: swap marked layers' ``forward`` for hub kernels, per instance, reversibly.

For every module marked with a kernel layer name (a ``kernel_layer_name`` on its class
or on the instance, or a function module in ``_kernel_funcs``), kernelize looks the name
up in the active mapping: device type → capability-matching device entries (narrowest
first) → mode entries in the fixed fallback order (:data:`~kernelhub.layer.mapping.MODE_FALLBACK_ORDER`). The
first layer that loads, validates as pure (:mod:`.validate`), and supports the mode
(``has_backward`` for TRAINING, ``can_torch_compile`` for TORCH_COMPILE) becomes the
instance's ``forward``. A class's ``kernel_condition`` (set by the decorators'
``condition=``) can exclude single instances.

Where nothing applies — no mapping entry, another device, a layer that cannot do the
mode, a kernel without a build for this system — the instance gets its class's
PyTorch ``forward`` back; :class:`KernelizeFallback` says in which of those cases an
error is raised instead. So kernelizing again with another mode or mapping always
starts from the model's own code, and kernelizing under an empty mapping restores
PyTorch everywhere.

``mode`` may be omitted: a model in ``train()`` mode is kernelized for TRAINING, one in
``eval()`` mode for INFERENCE — what the model is about to do. Only an untrusted
repository stops kernelize with an error whatever the fallback: falling back there would
hide a refusal the user has to decide about.
"""

from __future__ import annotations

import enum
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .. import settings
from ..errors import KernelHubError, NotAModelError, TrustError
from ..lazy_names import deferred
from ..system import RuntimeDevice, runtime_device
from ..value_types import Record
from .autotune import adopt, autotune_flag, autotuned_forward
from .decorators import KERNEL_FUNCS_ATTR
from .forwards import install_function, restore_forward
from .mapping import (
    MODE_FALLBACK_ORDER,
    CacheKey,
    DeviceRepos,
    Mode,
    Repository,
    check_kernelize_mode,
    describe_mode,
    get_kernel_mapping,
    order_device_entries,
    same_named_flag,
    unsupported_reason,
)
from .validate import LayerValidationError as LayerValidationError
from .validate import forward_of, validate_layer

if TYPE_CHECKING:
    from torch import nn
else:
    nn = deferred("torch.nn")

logger = logging.getLogger(__name__)

_layer_cache: dict[tuple[CacheKey, type], type] = {}

_collecting: ContextVar[list[tuple[str, str]] | None] = ContextVar(
    "kernelhub_collected_load_failures", default=None)
"""Where load failures go instead of one warning each (see :func:`collected_failures`)."""


@contextmanager
def collected_failures() -> Iterator[list[tuple[str, str]]]:
    """Inside the block (this thread or task), each kernel that fails to load is recorded
    as ``(layer or function name, why)`` in the list yielded instead of being warned about
    on its own: a caller applying a whole table of kernels (Transformers' seams) says
    once what it declined, not once per layer."""
    sink: list[tuple[str, str]] = []
    token = _collecting.set(sink)
    try:
        yield sink
    finally:
        _collecting.reset(token)


def declined(name: str, why: str) -> bool:
    """Record that ``name`` keeps PyTorch because of ``why`` where failures are being
    collected; False (nothing recorded) outside :func:`collected_failures`."""
    sink = _collecting.get()
    if sink is None:
        return False
    sink.append((name, why))
    return True


class KernelizeError(KernelHubError):
    """kernelize found no usable kernel for a marked layer where ``use_fallback`` did
    not allow PyTorch's forward."""


class KernelizeFallback(enum.Flag):
    """The cases in which kernelize keeps a layer's PyTorch forward instead of raising
    :class:`KernelizeError` (the kernel ecosystem's flag, same members)."""

    NONE = 0
    NO_LAYER = enum.auto()
    """The mapping has no entry for the layer name (or maps it to None)."""
    NO_DEVICE = enum.auto()
    """The layer's entry has nothing for this device type."""
    NO_COMPATIBLE_PROPERTIES = enum.auto()
    """Entries for this device type exist, but none for this GPU's capability."""
    NO_COMPATIBLE_MODE = enum.auto()
    """No entry for the mode, or no kernel found that can run in it."""
    CANNOT_LOAD = enum.auto()
    """A kernel failed to load or to validate as a pure layer."""
    DEFAULT = NO_LAYER | NO_DEVICE | NO_COMPATIBLE_PROPERTIES | NO_COMPATIBLE_MODE
    ALL = DEFAULT | CANNOT_LOAD


def fallback_cases(use_fallback: object) -> KernelizeFallback:
    """``use_fallback`` as cases: ``True`` is :attr:`~KernelizeFallback.ALL` (PyTorch
    wherever no kernel applies), ``False`` is :attr:`~KernelizeFallback.NO_LAYER` (an error
    for every layer the mapping names); a flag (ours or the ecosystem's) is taken as is."""
    if use_fallback is True:
        return KernelizeFallback.ALL
    if use_fallback is False:
        return KernelizeFallback.NO_LAYER
    cases = same_named_flag(use_fallback, KernelizeFallback)
    if cases is None:
        raise TypeError(f"use_fallback takes True, False or a KernelizeFallback, "
                        f"not {use_fallback!r}")
    return cases


# -- kernelize ------------------------------------------------------------------------


class _Target(Record, frozen=True):
    path: str
    module: nn.Module
    layer_name: str


def clear_layer_cache() -> None:
    """Forget loaded layers (tests; a process that republished a kernel)."""
    _layer_cache.clear()


def _targets(model: nn.Module) -> Iterator[_Target]:
    for path, module in model.named_modules():
        name = getattr(module, "kernel_layer_name", None)
        if isinstance(name, str) and name:
            yield _Target(path, module, name)
        funcs = getattr(module, KERNEL_FUNCS_ATTR, None)
        if isinstance(funcs, dict):
            for key, func_module in funcs.items():
                fname = getattr(func_module, "kernel_layer_name", None) or key
                yield _Target(f"{path}.{key}" if path else key, func_module, fname)


def _candidates(devices: DeviceRepos, device: RuntimeDevice, mode: Mode
                ) -> Iterator[tuple[Repository, Mode]]:
    entries = devices.get(device.type, {})
    for dev in order_device_entries(list(entries), device.capability):
        modes = entries[dev]
        for key in MODE_FALLBACK_ORDER[mode]:
            if key in modes:
                yield modes[key], key


def _load_layer(repo: Repository, cls: type, failures: dict[tuple[CacheKey, type], Exception]) -> type:
    """The validated layer of ``repo`` for model class ``cls`` (cached per pair)."""
    key = (repo.cache_key(), cls)
    if (layer := _layer_cache.get(key)) is not None:
        return layer
    if key in failures:
        raise failures[key]
    try:
        layer = repo.load()
        validate_layer(layer, cls, f"kernel layer {repo}")
    except Exception as e:
        failures[key] = e
        raise
    _layer_cache[key] = layer
    return layer


def _install(module: nn.Module, layer: type, repo: Repository, autotune_as: str | None = None
             ) -> None:
    forward = forward_of(layer)
    if autotune_as is not None:
        owner: type = type(module)
        forward = autotuned_forward(layer, forward, forward_of(owner), autotune_as)
    install_function(module, forward, repo)


def kernelize(
    model: nn.Module,
    *,
    mode: Mode | None = None,
    device: object = None,
    use_fallback: bool | KernelizeFallback = True,
    autotune: bool = False,
    verify: bool | None = None,
) -> nn.Module:
    """Replace the forward of every marked layer in ``model`` with its mapped kernel.

    ``mode``: INFERENCE or TRAINING, optionally ``| Mode.TORCH_COMPILE`` (the kernel
    ecosystem's ``Mode`` is accepted too); None means TRAINING for a model in train()
    mode, INFERENCE in eval() mode. ``device``: where the model runs (str or
    torch.device, e.g. ``"cuda:1"``, whose GPU's capability then chooses among ranged
    entries; default: where its parameters are; a ROCm GPU counts as ``rocm``).
    ``use_fallback``: where no kernel applies, keep PyTorch's forward (``True``, the
    default), raise :class:`KernelizeError` for layers the mapping names (``False``), or
    keep it exactly in the cases a :class:`KernelizeFallback` lists.
    ``autotune=True`` keeps PyTorch wherever the kernel is wrong or slower on the shapes
    the model actually runs: each layer's first call per shape bucket runs both and
    decides, and the decision is cached on disk for later processes (see
    :mod:`kernelhub.layer.autotune`; ``autotune_report(model)`` says what was chosen).
    ``verify`` is its former name (warns once).
    Returns ``model``. With ``USE_HUB_KERNELS=0`` nothing is changed.
    """
    if not isinstance(model, nn.Module):
        raise NotAModelError(f"kernelize needs a torch.nn.Module, not {type(model).__name__}; "
                             "pass the model itself")
    autotune = autotune_flag(autotune, verify, "kernelize")
    if not settings.hub_kernels_enabled():
        return model
    cases = fallback_cases(use_fallback)
    if mode is None:
        mode = Mode.TRAINING if model.training else Mode.INFERENCE
    mode = check_kernelize_mode(mode)
    where = runtime_device(model, device)
    mapping = get_kernel_mapping()
    failures: dict[tuple[CacheKey, type], Exception] = {}
    warned: set[tuple[str, str]] = set()
    if autotune:
        adopt(model)  # the stored decisions of its layers name it
    for target in _targets(model):
        restore_forward(target.module)
        condition = getattr(type(target.module), "kernel_condition", None)
        if callable(condition) and not condition(target.module):
            continue
        devices = mapping.get(target.layer_name, {})
        chosen, case, reasons = _choose(target, devices, where, mode, failures)
        if chosen is not None:
            _install(target.module, *chosen, autotune_as=target.layer_name if autotune else None)
            logger.debug("%s: %s runs %s", target.path, target.layer_name, chosen[1])
            continue
        if case not in cases:
            raise KernelizeError(
                f"{target.path or type(target.module).__name__}: no usable kernel for layer "
                f"{target.layer_name!r} on {where} in mode {describe_mode(mode)}"
                + "".join(f"\n  {r.text}" for r in reasons)
                + "\nRegister one with use_kernel_mapping, or pass use_fallback=True to run "
                "PyTorch's forward."
            )
        for reason in reasons:
            if reason.load_failed and (target.layer_name, reason.text) not in warned:
                warned.add((target.layer_name, reason.text))
                if not declined(target.layer_name, reason.text):
                    warnings.warn(f"{target.layer_name}: {reason.text}; using PyTorch's forward",
                                  stacklevel=2)
    return model


class _Refusal(Record, frozen=True):
    """Why one mapping entry was not used; a load failure is also warned about."""

    text: str
    load_failed: bool = False


_Choice = tuple[tuple[type, Repository] | None, KernelizeFallback, list[_Refusal]]


def _choose(target: _Target, devices: DeviceRepos, where: RuntimeDevice, mode: Mode,
            failures: dict[tuple[CacheKey, type], Exception]) -> _Choice:
    """(layer and repository, or None; the fallback case when None; the reasons)."""
    if not devices:
        return None, KernelizeFallback.NO_LAYER, [_Refusal(
            f"the mapping has no entry for layer {target.layer_name!r}")]
    if where.type not in devices:
        return None, KernelizeFallback.NO_DEVICE, [_Refusal(
            f"the mapping has no entry for {where.type} (it has: {', '.join(devices)})")]
    if not order_device_entries(list(devices[where.type]), where.capability):
        return None, KernelizeFallback.NO_COMPATIBLE_PROPERTIES, [_Refusal(
            f"no {where.type} entry covers {where} (entries: "
            f"{', '.join(map(str, devices[where.type]))})")]
    reasons: list[_Refusal] = []
    case = KernelizeFallback.NO_COMPATIBLE_MODE
    cls = type(target.module)
    tried: set[CacheKey] = set()
    for repo, key in _candidates(devices, where, mode):
        try:
            if (repo_key := repo.cache_key()) in tried:
                continue  # one repository registered for several modes: one verdict
            tried.add(repo_key)
            layer = _load_layer(repo, cls, failures)
        except TrustError:
            raise
        except Exception as e:
            reasons.append(_Refusal(f"{repo} ({describe_mode(key)} entry) failed to load: {e}",
                                    load_failed=True))
            case = KernelizeFallback.CANNOT_LOAD
            continue
        if (why := unsupported_reason(layer, mode)) is not None:
            reasons.append(_Refusal(f"{repo} ({describe_mode(key)} entry) {why}"))
            continue
        return (layer, repo), case, reasons
    if not reasons:
        reasons.append(_Refusal(f"no {where.type} entry is registered for mode "
                                f"{describe_mode(mode)} or a mode that can serve it"))
    return None, case, reasons
