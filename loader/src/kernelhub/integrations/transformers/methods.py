"""What each Transformers kernel seam does once kernelhub serves it.

Transformers keeps the protocol: ``from_pretrained`` calls ``set_use_kernels(use_kernels,
kernel_config, kernels_mode, device_map)``; on 5.25 ``train()``/``eval()`` set
``model.kernels_mode``, whose setter calls ``set_use_kernels(True, mode=…)`` again, and
``model.use_kernels = False`` (also what its Trainer does before wrapping a model in
``nn.DataParallel``) calls ``reset_kernels()``; on 5.24 ``train()``/``eval()`` call
``set_use_kernels(True)``. The functions here are what those calls reach: the same
contracts, served from kernelhub's hubs by :mod:`.apply`.

Modes may be kernelhub's or the ecosystem's ``kernels.Mode`` (what Transformers 5.25 and
its documentation use); ``model.kernels_mode`` returns the kind that ``import kernels``
gives, as Transformers' own would.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from ... import settings
from ...errors import NoCompatibleVariantError, RepoNotFoundError, VersionSpecError
from ...layer.mapping import Mode, as_mode
from ...lazy_names import deferred
from . import attention
from .apply import APPLIED_MODE_ATTR, apply_kernels, remove_kernels
from .kernel_config import ALLOW_ALL_ATTR, device_type_of, from_transformers
from .seams import has_kernels_mode

if TYPE_CHECKING:
    from types import ModuleType

    import torch
    from torch import nn
else:
    torch = deferred("torch")
    nn = deferred("torch.nn")

ModelT = TypeVar("ModelT", bound="nn.Module")


class _Seams(Protocol):
    """What Transformers' ``PreTrainedModel`` adds to the ``nn.Module`` we are handed and
    these functions use (``torch`` types a module's unknown attributes as tensors)."""

    kernel_config: object

    def set_use_kernels(self, use_kernels: bool, *, mode: object = None) -> None: ...


class Kernelize(Protocol):
    """``transformers.kernelize``'s signature: returns the model it was given."""

    def __call__(self, model: ModelT, mode: object = None, kernel_config: object = None,
                 device_map: object = None) -> ModelT: ...

MODE_ATTR = "_kernels_mode"
USE_ATTR = "_use_kernels"
DEVICE_ATTR = "_kernels_device"
"""Where Transformers 5.25 keeps these on the model; we keep them in the same place."""

_COMPILE_ATTR = "_kernelhub_compile"


def public_mode(mode: Mode) -> object:
    """``mode`` as the ``Mode`` that ``import kernels`` gives (the ecosystem's when it is
    installed), so ``model.kernels_mode == kernels.Mode.TRAINING`` holds."""
    kernels = sys.modules.get("kernels")
    if kernels is None:
        try:
            kernels = importlib.import_module("kernels")
        except ImportError:
            return mode
    ecosystem_mode = getattr(kernels, "Mode", None)
    if ecosystem_mode is None or ecosystem_mode is Mode:
        return mode
    value = ecosystem_mode(0)
    for name in ("FALLBACK", "TRAINING", "INFERENCE", "TORCH_COMPILE"):
        if Mode[name] in mode:
            value = value | ecosystem_mode[name]
    return value


def _checked_mode(value: object) -> Mode:
    mode = as_mode(value)
    if mode is None:
        raise ValueError(f"Received {value!r} for kernels mode, which is not a Mode; use "
                         "Mode.INFERENCE or Mode.TRAINING (from kernels or kernelhub), "
                         "optionally | Mode.TORCH_COMPILE")
    return mode


def _training_mode(model: nn.Module) -> Mode:
    return Mode.TRAINING if model.training else Mode.INFERENCE


def _mode_before_5_25(model: nn.Module, requested: object) -> Mode:
    """Transformers before 5.25 keeps no mode: an explicit one is remembered by us, and
    TORCH_COMPILE, once asked for, stays on across ``eval()``/``train()`` switches."""
    if requested is not None:
        mode = _checked_mode(requested)
        model.__dict__[_COMPILE_ATTR] = Mode.TORCH_COMPILE in mode
        return mode
    mode = _training_mode(model)
    if model.__dict__.get(_COMPILE_ATTR, False):
        mode |= Mode.TORCH_COMPILE
    return mode


def kernel_device(model: nn.Module, device_map: object = None) -> str:
    """The device type to choose kernels for. A ``device_map`` (from ``from_pretrained``)
    is remembered, as Transformers 5.25 does, so re-kernelizing an offloaded model
    (parameters on ``meta``) after ``train()`` still knows where it runs."""
    if isinstance(device_map, dict):
        placed = [v for v in device_map.values() if v not in ("cpu", "disk", "meta")]
        model.__dict__[DEVICE_ATTR] = placed[0] if placed else "cpu"
    remembered = model.__dict__.get(DEVICE_ATTR)
    return device_type_of(model, {"": remembered} if remembered is not None else None)


def _kernelize(model: nn.Module, kernel_config: object, mode: Mode, device_map: object) -> None:
    apply_kernels(model, kernel_config, mode, kernel_device(model, device_map))
    model.__dict__[USE_ATTR] = True


# -- PreTrainedModel ---------------------------------------------------------------


def set_use_kernels(self: nn.Module, use_kernels: object, kernel_config: object = None,
                    mode: object = None, device_map: object = None) -> None:
    """Kernelize the model for its mode (``use_kernels``), or take every kernel off."""
    if not use_kernels:
        _switch_off(self)
        return
    if not settings.hub_kernels_enabled():  # warns once per process
        self.__dict__[USE_ATTR] = False
        return
    if kernel_config is not None:
        from_transformers(kernel_config)  # a wrong type is refused before anything loads
        cast("_Seams", self).kernel_config = kernel_config
    if has_kernels_mode(type(self)):  # 5.25: the model keeps its mode
        chosen = mode if mode is not None else (self.kernels_mode or public_mode(
            _training_mode(self)))
        applied = _checked_mode(chosen)
        self.__dict__[MODE_ATTR] = chosen
    else:
        applied = _mode_before_5_25(self, mode)
    _kernelize(self, None, applied, device_map)


def _switch_off(model: nn.Module) -> None:
    if model.__dict__.get(USE_ATTR) or getattr(model, APPLIED_MODE_ATTR, None) is not None:
        remove_kernels(model)
    model.__dict__[USE_ATTR] = False
    if has_kernels_mode(type(model)):
        model.__dict__[MODE_ATTR] = None


def reset_kernels(self: nn.Module) -> bool:
    """Take every kernel off (PyTorch everywhere); return whether kernels were on."""
    previous = bool(self.__dict__.get(USE_ATTR, False))
    _switch_off(self)
    return previous


def _get_kernels_mode(self: nn.Module) -> object:
    return self.__dict__.get(MODE_ATTR)


def _set_kernels_mode(self: nn.Module, value: object) -> None:
    new = _checked_mode(value) if value is not None else None
    current = self.__dict__.get(MODE_ATTR)
    if new != (as_mode(current) if current is not None else None):
        cast("_Seams", self).set_use_kernels(value is not None, mode=value)


kernels_mode = property(_get_kernels_mode, _set_kernels_mode,
                        doc="The mode the model's kernels run in; setting it re-kernelizes "
                            "(None takes the kernels off).")


def check_attn_implementation(original: Callable[..., object]) -> Callable[..., str]:
    """``_check_and_adjust_attn_implementation`` serving hub strings and the
    FlashAttention fallback from kernelhub; every other string goes to ``original``."""

    def check(self: nn.Module, attn_implementation: str | None, is_init_check: bool = False,
              allow_all_kernels: bool = False) -> str:
        hub_kernels = sys.modules.get("transformers.integrations.hub_kernels")
        allow = allow_all_kernels or bool(getattr(hub_kernels, "ALLOW_ALL_KERNELS", False))
        if allow:
            # from_pretrained(allow_all_kernels=True) reaches the model only here (inside
            # Transformers' allow_all_hub_kernels() context); KernelConfig entries need it too.
            self.__dict__[ALLOW_ALL_ATTR] = True
        request = attention.parse(attn_implementation)
        if request is None:
            return str(original(self, attn_implementation, is_init_check, allow_all_kernels))
        if not settings.hub_kernels_enabled():
            return str(original(self, "sdpa", is_init_check, allow_all_kernels))
        return attention.register(request, allow_all_kernels=allow)

    return check


# -- transformers.integrations.hub_kernels -----------------------------------------


def hub_kernelize(raise_when_off: bool) -> Kernelize:
    """``transformers.kernelize``: kernelize a model for ``mode`` (default: its
    ``kernels_mode``, else its train/eval state) with ``kernel_config`` (default: the
    model's). ``raise_when_off``: 5.25 refuses an explicit kernelize while
    ``USE_HUB_KERNELS`` is off (earlier releases did nothing)."""

    def kernelize(model: ModelT, mode: object = None, kernel_config: object = None,
                  device_map: object = None) -> ModelT:
        if not settings.hub_kernels_enabled():
            if raise_when_off:
                value = os.environ.get("USE_HUB_KERNELS", "")
                raise ValueError(
                    f"Hub kernels are disabled through the environment variable "
                    f"`USE_HUB_KERNELS={value}`. Unset it (or set USE_HUB_KERNELS=YES) to "
                    "enable them.")
            return model
        if has_kernels_mode(type(model)):
            chosen = mode if mode is not None else model.kernels_mode
            applied = _checked_mode(chosen) if chosen is not None else _training_mode(model)
        else:
            applied = _mode_before_5_25(model, mode)
        _kernelize(model, kernel_config, applied, device_map)
        return model

    return kernelize


def hub_get_kernel(kernel_name: str, revision: str | None = None,
                   version: int | str | None = None, allow_all_kernels: bool = False) -> ModuleType:
    """``hub_kernels.get_kernel``: what Transformers' quantization, MoE and model code
    load kernels with (``lazy_load_kernel("finegrained-fp8")`` and others), from
    kernelhub's hub. A repository, version or build this system lacks is a
    FileNotFoundError, as from the ecosystem's loader: Transformers catches that one to
    fall back to PyTorch."""
    from ... import api
    try:
        return api.get_kernel(kernel_name, version, revision, trust_remote_code=allow_all_kernels)
    except (RepoNotFoundError, VersionSpecError, NoCompatibleVariantError) as e:
        raise FileNotFoundError(str(e)) from None


def validate_before_loading(cls: Callable[[object], nn.Module], config: object,
                            kernel_config: object) -> None:
    """``register_kernel_replacements_and_fusions``: check the KernelConfig against the
    model's structure (built on the meta device, no weights) before any kernel is
    fetched; fusion itself happens after loading, on the real modules."""
    checked = from_transformers(kernel_config)
    with torch.device("meta"):
        skeleton = cls(config)
    checked.check_keys(skeleton)
