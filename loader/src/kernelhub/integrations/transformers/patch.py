"""How Transformers' kernel seams are handed to kernelhub, and handed back.

Transformers routes ``use_kernels``, ``kernel_config``, ``kernels_mode`` and hub
``attn_implementation`` strings to the ecosystem's ``kernels`` package (a dependency
from 5.25). We never touch that package: ``import kernels`` keeps meaning the installed
distribution. Instead we replace, on Transformers' own classes and modules, exactly the
seams where those arguments are acted on (:mod:`.methods` says what each does), and
:func:`disable` puts them back:

* ``PreTrainedModel.set_use_kernels`` — ``from_pretrained`` after loading, and
  ``train()``/``eval()`` (through ``kernels_mode`` on 5.25);
* ``PreTrainedModel.reset_kernels`` and the ``kernels_mode`` property, where the
  installed Transformers defines them (5.25);
* ``PreTrainedModel._check_and_adjust_attn_implementation`` — every
  ``attn_implementation`` (constructor, ``from_pretrained``, ``set_attn_implementation``);
* ``hub_kernels.kernelize`` (``transformers.kernelize``),
  ``hub_kernels.register_kernel_replacements_and_fusions`` and ``hub_kernels.get_kernel``
  (what Transformers' quantization, MoE and model code load kernels with).

Which seams exist and what they take is read from the installed Transformers
(:mod:`.seams`). :func:`enable` does all of this at once; :mod:`.autoload` does each part
as the module that defines it is imported. The table's classes are marked with
``kernel_layer_name`` where Transformers has not marked them; ``disable`` removes only
the marks it added. ``enable`` is idempotent.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from ...layer.decorators import LAYER_NAME_ATTR
from ...lazy_names import deferred
from . import methods, seams
from .table import LAYER_CLASSES, import_target

if TYPE_CHECKING:
    import transformers
else:  # enable() checks the version before importing it
    transformers = deferred("transformers")

_saved: dict[tuple[object, str], object] = {}
"""(owner, attribute) → what was there before enable()."""
_marked: list[type] = []


def is_enabled() -> bool:
    return bool(_saved)


def _replace(owner: object, attr: str, value: object) -> None:
    if (owner, attr) not in _saved:
        _saved[(owner, attr)] = (owner.__dict__[attr] if isinstance(owner, type)
                                 else getattr(owner, attr))
    setattr(owner, attr, value)


def _original(owner: object, attr: str) -> object:
    """What Transformers defines as ``owner.attr`` (before any replacement of ours)."""
    if (owner, attr) in _saved:
        return _saved[(owner, attr)]
    return owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)


def _mark(cls: type, layer_name: str) -> None:
    if LAYER_NAME_ATTR not in cls.__dict__:
        setattr(cls, LAYER_NAME_ATTR, layer_name)
        _marked.append(cls)


def _mark_classes() -> None:
    for path, layer_name in LAYER_CLASSES.items():
        hit = import_target(path)
        if hit is not None:
            _mark(hit[2], layer_name)


def check_transformers() -> None:
    """Raise ImportError (saying what to install) unless a Transformers we serve is here."""
    if (problem := seams.version_problem(seams.installed_version())) is not None:
        raise ImportError(problem)


def patch_hub_kernels(hub_kernels: ModuleType) -> None:
    """Replace the seams of ``transformers.integrations.hub_kernels`` (idempotent);
    :class:`~.seams.SeamMismatch` where they are not the ones we know."""
    kernelize = _original(hub_kernels, "kernelize")
    register = _original(hub_kernels, "register_kernel_replacements_and_fusions")
    get_kernel = _original(hub_kernels, "get_kernel")
    seams.check_hub_kernels(kernelize, register, get_kernel)
    raises = seams.kernelize_takes_config(kernelize)
    _replace(hub_kernels, "kernelize", methods.hub_kernelize(raise_when_off=raises))
    if register is not None:
        _replace(hub_kernels, "register_kernel_replacements_and_fusions",
                 methods.validate_before_loading)
    if get_kernel is not None:
        _replace(hub_kernels, "get_kernel", methods.hub_get_kernel)


def patch_pretrained_model(pretrained_model: type) -> None:
    """Replace the kernel seams of ``PreTrainedModel`` (idempotent); :class:`~.seams.
    SeamMismatch` where they are not the ones we know."""
    if (pretrained_model, "set_use_kernels") not in _saved:
        seams.check_pretrained_model(pretrained_model)
    original_check = _original(pretrained_model, "_check_and_adjust_attn_implementation")
    if not callable(original_check):  # checked above, on the first patch
        raise seams.SeamMismatch("PreTrainedModel._check_and_adjust_attn_implementation is missing")
    _replace(pretrained_model, "set_use_kernels", methods.set_use_kernels)
    _replace(pretrained_model, "_check_and_adjust_attn_implementation",
             methods.check_attn_implementation(original_check))
    if "reset_kernels" in pretrained_model.__dict__:
        _replace(pretrained_model, "reset_kernels", methods.reset_kernels)
    if isinstance(pretrained_model.__dict__.get("kernels_mode"), property):
        _replace(pretrained_model, "kernels_mode", methods.kernels_mode)


def mark_module(module: ModuleType) -> None:
    """Mark the table's classes defined in ``module`` (as Transformers' decorators would)."""
    prefix = module.__name__ + "."
    for path, layer_name in LAYER_CLASSES.items():
        if path.startswith(prefix) and "." not in path[len(prefix):]:
            cls = getattr(module, path[len(prefix):], None)
            if isinstance(cls, type):
                _mark(cls, layer_name)


def enable() -> None:
    """Route Transformers' kernel arguments to kernelhub (see the module docstring).

    Raises ImportError for a Transformers we do not serve (too old, or a seam changed);
    nothing is replaced then.
    """
    check_transformers()
    pretrained = transformers.PreTrainedModel
    hub_kernels = importlib.import_module("transformers.integrations.hub_kernels")
    seams.check_hub_kernels(*(_original(hub_kernels, name) for name in (
        "kernelize", "register_kernel_replacements_and_fusions", "get_kernel")))
    if (pretrained, "set_use_kernels") not in _saved:
        seams.check_pretrained_model(pretrained)
    patch_hub_kernels(hub_kernels)
    patch_pretrained_model(pretrained)
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
