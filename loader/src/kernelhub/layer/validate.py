"""Pure-layer validation: may a hub layer replace a model layer's forward?

kernelize runs a hub layer's ``forward`` on the *model's* instance, with the model's
parameters and attributes. That is only sound if the hub layer adds nothing of its own:
no ``__init__`` (it would never run), no other methods or class state (the model's
instance would not have them), and a ``forward`` that accepts every call the original
accepts. Checking this before the swap turns a silent wrong result into a clear message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import KernelHubError
from ..lazy_names import deferred

if TYPE_CHECKING:
    from torch import nn
else:
    nn = deferred("torch.nn")

FORWARD = "forward"


def forward_of(cls: type) -> Callable[..., object]:
    """``cls.forward``: layers are plain classes, so their forward is read by name (here
    for kernelize and the Transformers fusion; verification is handed the functions)."""
    forward: Callable[..., object] = getattr(cls, FORWARD)
    return forward


class LayerValidationError(KernelHubError):
    """A hub layer cannot safely replace a model layer's forward."""


ALLOWED_CLASS_ATTRS = frozenset({"forward", "has_backward", "can_torch_compile"})
"""What a pure layer may define besides Python's own bookkeeping attributes."""

_BOOKKEEPING = frozenset({
    "__module__", "__qualname__", "__doc__", "__annotations__", "__dict__", "__weakref__",
    "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__",
    "__annotate__", "__annotate_func__", "__classdictcell__", "__signature__",
})


def _own_classes(layer: type) -> list[type]:
    """The layer and its bases that are not torch's own (nn.Module, object)."""
    return [c for c in layer.__mro__ if c not in (nn.Module, object)
            and not c.__module__.startswith("torch.")]


def check_pure_layer(layer: type, where: str) -> None:
    """Raise :class:`LayerValidationError` unless ``layer`` only defines a ``forward``."""
    if not isinstance(layer, type) or not issubclass(layer, nn.Module):
        raise LayerValidationError(f"{where}: a layer must be an nn.Module subclass, got {layer!r}")
    for cls in _own_classes(layer):
        if "__init__" in cls.__dict__:
            raise LayerValidationError(
                f"{where}: {cls.__qualname__} defines __init__, which would never run on the "
                "model's instance; a kernel layer must read the model layer's attributes "
                "instead of creating its own"
            )
        extra = sorted(n for n in cls.__dict__ if n not in ALLOWED_CLASS_ATTRS
                       and n not in _BOOKKEEPING)
        if extra:
            raise LayerValidationError(
                f"{where}: {cls.__qualname__} defines {', '.join(extra)}; a kernel layer may "
                f"only define {', '.join(sorted(ALLOWED_CLASS_ATTRS))} (and a docstring), "
                "because the model's instance would not carry anything else. Move helpers "
                "to module-level functions."
            )
    if "forward" not in {n for c in _own_classes(layer) for n in c.__dict__}:
        raise LayerValidationError(f"{where}: {layer.__qualname__} has no forward of its own")


def _params(func: Callable[..., object]) -> list[inspect.Parameter] | None:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # no signature to compare: accept, as Python would
        return None
    return params[1:]  # drop self


def forward_incompatibility(original: Callable[..., object],
                            replacement: Callable[..., object]) -> str | None:
    """Why ``replacement`` cannot take every call ``original`` takes, or None if it can.

    Positional parameters are compared by position and kind (names may differ, as they
    do between a model's ``input`` and a kernel's ``x``); keyword-only parameters by
    name. ``*args``/``**kwargs`` in the replacement accept whatever they cover; extra
    replacement parameters are fine only with defaults.
    """
    P = inspect.Parameter
    orig, repl = _params(original), _params(replacement)
    if orig is None or repl is None:
        return None
    repl_var_pos = any(p.kind is P.VAR_POSITIONAL for p in repl)
    repl_var_kw = any(p.kind is P.VAR_KEYWORD for p in repl)
    positional = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    o_pos = [p for p in orig if p.kind in positional]
    r_pos = [p for p in repl if p.kind in positional]
    for i, op in enumerate(o_pos):
        if i < len(r_pos):
            rp = r_pos[i]
            if op.default is not P.empty and rp.default is P.empty:
                return f"parameter {rp.name!r} is required, but {op.name!r} has a default"
            continue
        if not repl_var_pos:
            return f"it takes {len(r_pos)} positional parameter(s), the original {len(o_pos)}"
    for rp in r_pos[len(o_pos):]:
        if rp.default is P.empty and rp.kind is not P.VAR_POSITIONAL:
            return f"it requires parameter {rp.name!r}, which the original does not have"
    if any(p.kind is P.VAR_POSITIONAL for p in orig) and not repl_var_pos:
        return "the original takes *args, the replacement does not"
    r_kwonly = {p.name: p for p in repl if p.kind is P.KEYWORD_ONLY}
    for op in (p for p in orig if p.kind is P.KEYWORD_ONLY):
        if op.name not in r_kwonly and not repl_var_kw:
            return f"it does not accept keyword argument {op.name!r}"
    o_kwonly = {p.name for p in orig if p.kind is P.KEYWORD_ONLY}
    for name, rp in r_kwonly.items():
        if name not in o_kwonly and rp.default is P.empty:
            return f"it requires keyword argument {name!r}, which the original does not have"
    if any(p.kind is P.VAR_KEYWORD for p in orig) and not repl_var_kw:
        return "the original takes **kwargs, the replacement does not"
    return None


def check_forward_compatible(original_cls: type, layer: type, where: str) -> None:
    """Raise unless ``layer.forward`` accepts every call ``original_cls.forward`` accepts."""
    original, kernel = forward_of(original_cls), forward_of(layer)
    why = forward_incompatibility(original, kernel)
    if why is not None:
        raise LayerValidationError(
            f"{where}: forward is not compatible with {original_cls.__qualname__}.forward: "
            f"{why}. Original: forward{_sig(original)}, kernel: forward{_sig(kernel)}"
        )


def _sig(func: Callable[..., object]) -> str:
    try:
        return str(inspect.signature(func))
    except (TypeError, ValueError):
        return "(...)"


def validate_layer(layer: type, original_cls: type, where: str) -> None:
    """Everything kernelize checks before using ``layer`` for ``original_cls``."""
    check_pure_layer(layer, where)
    check_forward_compatible(original_cls, layer, where)
