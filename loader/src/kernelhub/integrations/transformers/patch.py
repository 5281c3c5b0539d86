"""How ``from_pretrained(..., use_kernels=True, kernel_config=…, attn_implementation=…)``
reaches kernelhub.

Transformers 5.x routes these arguments to its pinned ``kernels`` package and, when that
package is missing, refuses ``use_kernels=True`` and hub ``attn_implementation`` strings.
We do not make Transformers believe its ``kernels`` package is installed (that would
mean impersonating another project's distribution, a fake version in its metadata, and
a silent change of meaning the day the real package is installed). Instead we replace,
on the Transformers classes, exactly the seams where those arguments are acted on, and
:func:`disable` puts them back:

* ``PreTrainedModel.set_use_kernels`` — called by ``from_pretrained`` after loading and
  by ``PreTrainedModel.train``/``eval`` on a mode change → :func:`~.apply.apply_kernels`;
* ``PreTrainedModel._check_and_adjust_attn_implementation`` — where every
  ``attn_implementation`` (constructor, ``from_pretrained``, ``set_attn_implementation``)
  is checked → hub strings and the FlashAttention fallback go to :mod:`.attention`,
  everything else to Transformers;
* ``transformers.integrations.hub_kernels.kernelize`` (``transformers.kernelize``) →
  :func:`~.apply.apply_kernels` with the given mode;
* ``transformers.integrations.hub_kernels.register_kernel_replacements_and_fusions`` —
  called by ``from_pretrained`` with the KernelConfig before the model is built → we
  validate the config against the model's structure (meta device, no weights) before any
  kernel is fetched; fusion itself happens after loading, on the real modules.

:func:`enable` does all of this at once; :mod:`.autoload` does each part as the
Transformers module that defines it is imported (no user code needed).

It also marks the table's classes with ``kernel_layer_name`` (what Transformers'
decorators would have done), recording which marks it added so that ``disable`` removes
only those. ``enable`` is idempotent.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

from ... import settings
from ...layer.decorators import LAYER_NAME_ATTR
from . import attention
from .apply import apply_kernels
from .kernel_config import ALLOW_ALL_ATTR, from_transformers
from .table import LAYER_CLASSES, import_target

_saved: dict[tuple[Any, str], Any] = {}
"""(owner, attribute) → what was there before enable()."""
_marked: list[type] = []


def is_enabled() -> bool:
    return bool(_saved)


def _replace(owner: Any, attr: str, value: Any) -> None:
    if (owner, attr) not in _saved:
        _saved[(owner, attr)] = (owner.__dict__[attr] if isinstance(owner, type)
                                 else getattr(owner, attr))
    setattr(owner, attr, value)


def _mark(cls: type, layer_name: str) -> None:
    if LAYER_NAME_ATTR not in cls.__dict__:
        setattr(cls, LAYER_NAME_ATTR, layer_name)
        _marked.append(cls)


def _mark_classes() -> None:
    for path, layer_name in LAYER_CLASSES.items():
        hit = import_target(path)
        if hit is not None:
            _mark(hit[2], layer_name)


SUPPORTED_TRANSFORMERS = ">=5.0,<5.25"
"""The Transformers releases whose seams (method names and signatures) we patch."""


def transformers_problem(found: str | None) -> str | None:
    """Why Transformers ``found`` (None: not installed) cannot be used, with the fix."""
    from packaging.specifiers import SpecifierSet

    hint = f"install a compatible one: pip install 'transformers{SUPPORTED_TRANSFORMERS}'"
    if found is None:
        return f"kernelhub's Transformers integration needs transformers; {hint}"
    if found not in SpecifierSet(SUPPORTED_TRANSFORMERS, prereleases=True):
        return (f"transformers {found} is outside the range kernelhub's integration supports "
                f"({SUPPORTED_TRANSFORMERS}); {hint}")
    return None


def check_transformers() -> None:
    """Raise ImportError (saying what to install) unless a supported Transformers is here."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found: str | None = version("transformers")
    except PackageNotFoundError:
        found = None
    if (problem := transformers_problem(found)) is not None:
        raise ImportError(problem)


def patch_hub_kernels(hub_kernels: ModuleType) -> None:
    """Replace the seams of ``transformers.integrations.hub_kernels`` (idempotent)."""

    def validate_before_loading(cls: Any, config: Any, kernel_config: Any) -> None:
        import torch

        checked = from_transformers(kernel_config)
        with torch.device("meta"):
            skeleton = cls(config)
        checked.check_keys(skeleton)

    def kernelize(model: Any, mode: Any = None) -> Any:
        apply_kernels(model, None, mode)
        return model

    _replace(hub_kernels, "register_kernel_replacements_and_fusions", validate_before_loading)
    _replace(hub_kernels, "kernelize", kernelize)


def patch_pretrained_model(pretrained_model: type) -> None:
    """Replace ``set_use_kernels`` and the attention check of ``PreTrainedModel`` (idempotent)."""
    original_check = pretrained_model.__dict__["_check_and_adjust_attn_implementation"]
    if (pretrained_model, "_check_and_adjust_attn_implementation") in _saved:
        original_check = _saved[(pretrained_model, "_check_and_adjust_attn_implementation")]

    def set_use_kernels(self: Any, use_kernels: bool, kernel_config: Any = None,
                        mode: Any = None, device_map: Any = None) -> None:
        # Transformers >= 5.25 passes the resolved device_map (from_pretrained) as the
        # fourth argument; 5.x before it passes three.
        if use_kernels:
            apply_kernels(self, kernel_config, mode, device_map)
        else:
            self._use_kernels = False

    def check_attn(self: Any, attn_implementation: str | None, is_init_check: bool = False,
                   allow_all_kernels: bool = False) -> str:
        hub_kernels = sys.modules.get("transformers.integrations.hub_kernels")
        allow = allow_all_kernels or bool(getattr(hub_kernels, "ALLOW_ALL_KERNELS", False))
        if allow:
            # from_pretrained(allow_all_kernels=True) reaches the model only here (inside
            # Transformers' allow_all_hub_kernels() context); KernelConfig entries need it too.
            self.__dict__[ALLOW_ALL_ATTR] = True
        request = attention.parse(attn_implementation)
        if request is None:
            return original_check(self, attn_implementation, is_init_check, allow_all_kernels)
        if not settings.hub_kernels_enabled():
            return original_check(self, "sdpa", is_init_check, allow_all_kernels)
        return attention.register(request, allow_all_kernels=allow)

    _replace(pretrained_model, "set_use_kernels", set_use_kernels)
    _replace(pretrained_model, "_check_and_adjust_attn_implementation", check_attn)


def mark_module(module: ModuleType) -> None:
    """Mark the table's classes defined in ``module`` (as Transformers' decorators would)."""
    prefix = module.__name__ + "."
    for path, layer_name in LAYER_CLASSES.items():
        if path.startswith(prefix) and "." not in path[len(prefix):]:
            cls = getattr(module, path[len(prefix):], None)
            if isinstance(cls, type):
                _mark(cls, layer_name)


def enable() -> None:
    """Route Transformers' kernel arguments to kernelhub (see the module docstring)."""
    check_transformers()
    from transformers import PreTrainedModel

    patch_hub_kernels(importlib.import_module("transformers.integrations.hub_kernels"))
    patch_pretrained_model(PreTrainedModel)
    _mark_classes()


def disable() -> None:
    """Undo :func:`enable`: Transformers' own methods and marks are back."""
    for (owner, attr), value in _saved.items():
        setattr(owner, attr, value)
    _saved.clear()
    for cls in _marked:
        if LAYER_NAME_ATTR in cls.__dict__:
            delattr(cls, LAYER_NAME_ATTR)
    _marked.clear()
