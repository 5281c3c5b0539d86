"""How ``from_pretrained(..., use_kernels=True, kernel_config=…, attn_implementation=…)``
reaches kernelhub.

Transformers 5.x routes these arguments to its pinned ``kernels`` package and, when that
package is missing, refuses ``use_kernels=True`` and hub ``attn_implementation`` strings.
We considered installing a module named ``kernels`` that Transformers'
``is_kernels_available()`` would accept; that means impersonating another project's
distribution (a fake version in its metadata), it must be in place before Transformers
is imported, and it would silently change meaning the day the real package is
installed. Instead :func:`enable` replaces, on the Transformers classes, exactly the
three seams where those arguments are acted on, and :func:`disable` puts them back:

* ``PreTrainedModel.set_use_kernels`` — called by ``from_pretrained`` after loading and
  by ``PreTrainedModel.train``/``eval`` on a mode change → :func:`~.mode_switch.apply_kernels`;
* ``PreTrainedModel._check_and_adjust_attn_implementation`` — where every
  ``attn_implementation`` (constructor, ``from_pretrained``, ``set_attn_implementation``)
  is checked → hub strings and the FlashAttention fallback go to :mod:`.attention`,
  everything else to Transformers;
* ``transformers.integrations.hub_kernels.register_kernel_replacements_and_fusions`` —
  called by ``from_pretrained`` with the KernelConfig before the model is built → we
  validate the config against the model's structure (meta device, no weights) before any
  kernel is fetched; fusion itself happens after loading, on the real modules.

It also marks the table's classes with ``kernel_layer_name`` (what Transformers'
decorators would have done), recording which marks it added so that ``disable`` removes
only those. ``enable`` is idempotent.
"""

from __future__ import annotations

import importlib
from typing import Any

from ... import settings
from .kernel_config import from_transformers
from .table import LAYER_CLASSES, import_target

_saved: dict[tuple[Any, str], Any] = {}
"""(owner, attribute) → what was there before enable()."""
_marked: list[type] = []


def is_enabled() -> bool:
    return bool(_saved)


def _replace(owner: Any, attr: str, value: Any) -> None:
    _saved[(owner, attr)] = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
    setattr(owner, attr, value)


def _mark_classes() -> None:
    for path, layer_name in LAYER_CLASSES.items():
        hit = import_target(path)
        if hit is None:
            continue
        cls = hit[2]
        if "kernel_layer_name" not in cls.__dict__:
            cls.kernel_layer_name = layer_name
            _marked.append(cls)


SUPPORTED_TRANSFORMERS = ">=5.0,<6"
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


def enable() -> None:
    """Route Transformers' kernel arguments to kernelhub (see the module docstring)."""
    if _saved:
        return
    check_transformers()
    from transformers import PreTrainedModel

    hub_kernels = importlib.import_module("transformers.integrations.hub_kernels")
    original_check = PreTrainedModel.__dict__["_check_and_adjust_attn_implementation"]

    def set_use_kernels(self: Any, use_kernels: bool, kernel_config: Any = None,
                        mode: Any = None) -> None:
        from .mode_switch import apply_kernels

        if use_kernels:
            apply_kernels(self, kernel_config, mode)
        else:
            self._use_kernels = False

    def check_attn(self: Any, attn_implementation: str | None, is_init_check: bool = False,
                   allow_all_kernels: bool = False) -> str:
        from . import attention

        request = attention.parse(attn_implementation)
        if request is None:
            return original_check(self, attn_implementation, is_init_check, allow_all_kernels)
        if not settings.hub_kernels_enabled():
            return original_check(self, "sdpa", is_init_check, allow_all_kernels)
        allow = allow_all_kernels or bool(getattr(hub_kernels, "ALLOW_ALL_KERNELS", False))
        return attention.register(request, allow_all_kernels=allow)

    def validate_before_loading(cls: Any, config: Any, kernel_config: Any) -> None:
        import torch

        checked = from_transformers(kernel_config)
        with torch.device("meta"):
            skeleton = cls(config)
        checked.check_keys(skeleton)

    _replace(PreTrainedModel, "set_use_kernels", set_use_kernels)
    _replace(PreTrainedModel, "_check_and_adjust_attn_implementation", check_attn)
    _replace(hub_kernels, "register_kernel_replacements_and_fusions", validate_before_loading)
    _mark_classes()


def disable() -> None:
    """Undo :func:`enable`: Transformers' own methods and marks are back."""
    for (owner, attr), value in _saved.items():
        setattr(owner, attr, value)
    _saved.clear()
    for cls in _marked:
        if "kernel_layer_name" in cls.__dict__:
            del cls.kernel_layer_name
    _marked.clear()
