"""Marking what kernelize may replace: layer classes and functions.

Marking never changes behaviour: a marked class gets a ``kernel_layer_name`` attribute,
and a marked function becomes a tiny module that calls the function, so every call
site keeps working. Only :func:`kernelize` swaps code, and only per instance.

A marked function is a *module instance*, shared by everything that imports it, so
kernelize cannot find it by walking a model. :func:`use_kernelized_func` attaches a
fresh copy to each instance of a model class (in ``_kernel_funcs``, name → module, the
attribute Transformers looks for), and kernelize walks those copies.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from ..lazy_names import deferred

if TYPE_CHECKING:
    from torch import nn
else:
    nn = deferred("torch.nn")

logger = logging.getLogger(__name__)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., object])

KERNEL_FUNCS_ATTR = "_kernel_funcs"
LAYER_NAME_ATTR = "kernel_layer_name"
"""The class attribute that marks a layer class, as the kernel ecosystem names it."""
CONDITION_ATTR = "kernel_condition"
"""The class attribute holding ``condition(module) -> bool``: kernelize leaves the
instances for which it is False alone (the ecosystem's name too)."""

Condition = Callable[["nn.Module"], bool]


def _set_marks(cls: type, layer_name: str, condition: Condition | None) -> None:
    setattr(cls, LAYER_NAME_ATTR, layer_name)
    if condition is not None:
        if not callable(condition):
            raise TypeError(f"condition must be a callable taking the module, not {condition!r}")
        # A staticmethod, so that reading it through an instance does not bind it.
        setattr(cls, CONDITION_ATTR, staticmethod(condition))


def _check_name(layer_name: object, what: str) -> str:
    if not isinstance(layer_name, str) or not layer_name:
        raise TypeError(f"{what} takes the layer name (a non-empty str), got {layer_name!r}")
    return layer_name


_refusals_told: set[tuple[str, str]] = set()


def forward_calling(func: Callable[..., object],
                    refuses: Callable[..., str | None] | None = None,
                    prepares: Callable[..., Callable[[], object] | str] | None = None,
                    ) -> Callable[..., object]:
    """A ``forward(self, *args, **kwargs)`` that calls ``func(*args, **kwargs)``.

    It advertises ``func``'s signature with ``self`` in front, so kernelize's signature
    check compares the function itself against the layer it replaces. A call the kernel
    declines runs the replaced module's own forward instead (the model's function), and
    the reason is logged once per function and reason. The kernel says so in one of two
    ways, each taking the call's arguments:

    - ``prepares`` (a kernel function's ``prepare_call``): the reason it declines the
      call, or the call itself, prepared: a zero-argument callable that runs the kernel
      on what deciding already worked out (rotary's layout). Deciding and calling are
      then one computation per call, where a verdict followed by the call works the
      arguments out twice; preferred when both are given.
    - ``refuses`` (``unsupported_reason``): the reason, or None to call ``func``. Kernels
      published before ``prepare_call`` carry only this.
    """

    def forward(self: nn.Module, *args: object, **kwargs: object) -> object:
        if prepares is not None:
            verdict = prepares(*args, **kwargs)
            if not isinstance(verdict, str):
                return verdict()
            why = verdict
        else:
            reason = None if refuses is None else refuses(*args, **kwargs)
            if reason is None:
                return func(*args, **kwargs)
            why = reason
        told = (getattr(func, "__name__", "kernel"), why)
        if told not in _refusals_told:
            _refusals_told.add(told)
            logger.warning("%s: running %s's own code (%s)", told[0], type(self).__name__, why)
        return type(self).forward(self, *args, **kwargs)

    try:
        sig = inspect.signature(func)
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        forward.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[self_param, *sig.parameters.values()]
        )
    except (TypeError, ValueError):  # builtins and torch ops may have no signature
        pass
    forward.__doc__ = getattr(func, "__doc__", None)
    return forward


def _function_layer(func: Callable[..., object], layer_name: str,
                    condition: Condition | None = None) -> nn.Module:
    """An instance of a new module class whose forward calls ``func``."""
    name = getattr(func, "__name__", layer_name)
    cls = type(name, (nn.Module,), {
        "forward": forward_calling(func),
        LAYER_NAME_ATTR: layer_name,
        "__doc__": func.__doc__,
        "__module__": getattr(func, "__module__", __name__),
        "__qualname__": getattr(func, "__qualname__", name),
        "__wrapped__": staticmethod(func),
    })
    _set_marks(cls, layer_name, condition)
    layer: nn.Module = cls()
    return layer


def use_kernel_forward_from_hub(layer_name: str, condition: Condition | None = None
                                ) -> Callable[[T], T]:
    """Mark a layer class (or a function) as replaceable by the kernel ``layer_name``.

    On a class: sets ``kernel_layer_name`` and returns the class unchanged otherwise.
    On a function: returns a module instance that calls the function (so call sites
    keep working) and whose class carries ``kernel_layer_name``; attach it to a model
    class with :func:`use_kernelized_func` so kernelize can reach it. ``condition``
    (module → bool), checked per instance at each kernelize, keeps the instances for
    which it is False on their own forward.
    """
    _check_name(layer_name, "use_kernel_forward_from_hub")

    def mark(obj: T) -> T:
        if isinstance(obj, type):
            _set_marks(obj, layer_name, condition)
            return obj
        if callable(obj):
            # a module called as the function was: to its callers, still the function
            return cast("T", _function_layer(obj, layer_name, condition))
        raise TypeError(
            f"use_kernel_forward_from_hub({layer_name!r}) decorates a class or a function, "
            f"not {type(obj).__name__}"
        )

    return mark


def use_kernel_func_from_hub(func_name: str) -> Callable[[F], F]:
    """Turn a function into a layer-like module marked ``func_name`` (see
    :func:`use_kernel_forward_from_hub`, which does the same for functions)."""
    _check_name(func_name, "use_kernel_func_from_hub")

    def mark(func: F) -> F:
        if isinstance(func, type) or not callable(func):
            raise TypeError(
                f"use_kernel_func_from_hub({func_name!r}) decorates functions; mark classes "
                "with use_kernel_forward_from_hub"
            )
        return cast("F", _function_layer(func, func_name))

    return mark


def replace_kernel_forward_from_hub(cls: type, layer_name: str,
                                    condition: Condition | None = None) -> None:
    """Mark a class you do not own, as :func:`use_kernel_forward_from_hub` would."""
    _check_name(layer_name, "replace_kernel_forward_from_hub")
    if not isinstance(cls, type):
        raise TypeError(f"replace_kernel_forward_from_hub takes a class, got {cls!r}")
    _set_marks(cls, layer_name, condition)


def use_kernelized_func(*funcs: object) -> Callable[[type[T]], type[T]]:
    """Give every instance of the decorated module class its own copy of each marked
    function module, in ``self._kernel_funcs[kernel_layer_name]``.

    Per-instance copies are what make kernelize per instance for functions too. The
    copies are not registered as submodules, so state dicts and module paths stay as
    the model defines them.
    """
    for f in funcs:
        if getattr(type(f), LAYER_NAME_ATTR, None) is None:
            raise TypeError(
                f"use_kernelized_func takes functions marked with use_kernel_forward_from_hub "
                f"or use_kernel_func_from_hub; {f!r} is not marked"
            )

    def decorate(cls: type[T]) -> type[T]:
        original_init = cls.__init__

        @functools.wraps(original_init)
        def __init__(self: object, *args: object, **kwargs: object) -> None:
            original_init(self, *args, **kwargs)
            copies = dict(getattr(self, KERNEL_FUNCS_ATTR, None) or {})
            for f in funcs:
                copies[getattr(type(f), LAYER_NAME_ATTR)] = type(f)()
            object.__setattr__(self, KERNEL_FUNCS_ATTR, copies)

        cls.__init__ = __init__  # type: ignore[method-assign]
        return cls

    return decorate
