"""Module-global functions replaced for one model only.

Transformers' attention layers call ``apply_rotary_pos_emb`` as a global of their
modeling module. Replacing that global (what liger-kernel does) changes every model of
the family in the process: a second, un-kernelized Llama would run our rotary kernel
too, and a PyTorch baseline measured next to a kernelized model would not be PyTorch.

So the global stays as it is. Instead each module of the kernelized model whose class
``forward`` reads it gets a per-instance ``forward``: the same code, run with a copy of
the modeling module's globals in which the replaced names have new values. Functions
the forward wraps through its closure (decorators such as Transformers'
``deprecate_kwarg``) are rebuilt the same way, so the code that actually reads the name
sees the new value. Nothing is traced or hooked at run time: it is an ordinary function,
as cheap to call as the original and as understandable to ``torch.compile``. All
modules of one class in one model share one rebuilt function.

The copy of the globals is taken when the model is kernelized: a global the modeling
module changes afterwards reaches this model when it is kernelized again.

Attention is found the same way: an attention module's forward looks its implementation
up in ``ALL_ATTENTION_FUNCTIONS``, a global of its modeling module (Transformers'
process-wide registry). :func:`bind_attention` gives one model's attention modules their
own ``AttentionInterface`` whose local entry overrides one name, which is how an
autotuned attention function reaches that model only.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import CodeType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

from ...layer.validate import forward_of
from ...lazy_names import deferred

if TYPE_CHECKING:
    import transformers
    from torch import nn
    from transformers import modeling_utils
else:
    transformers = deferred("transformers")
    modeling_utils = deferred("transformers.modeling_utils")

Globals = Mapping[str, object]
"""A module's globals, or the names and values that override some of them."""

_OVERRIDES_ATTR = "_kernelhub_overrides"
"""On a rebuilt forward: the globals it overrides (name → value)."""


_Built = dict[tuple[type, tuple[tuple[str, int], ...]], FunctionType | None]
"""(class, overridden names and value ids) → its rebuilt forward, within one call."""


def _names(code: CodeType) -> Iterator[str]:
    """Names ``code`` (and code nested in it: comprehensions, lambdas) may read as globals."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _names(const)


def _globals(namespace: Globals, overrides: Globals) -> dict[str, Any]:
    """The module's globals with ``overrides``, without ``__name__``: torch.compile takes
    a globals dict with a module name for that module's ``__dict__`` and guards on the
    module's attributes (the original function, not ours); without one it guards on
    this dict itself."""
    copy = {**namespace, **overrides}
    copy.pop("__name__", None)
    return copy


def _rebuilt(fn: FunctionType, namespace: Globals, overrides: Globals,
             done: dict[FunctionType, FunctionType | None]) -> FunctionType | None:
    """``fn`` with ``overrides`` in place of ``namespace``'s globals, wherever it or a
    function in its closure reads them; None when none of them is read."""
    if fn in done:
        return done[fn]
    done[fn] = None  # a function that (indirectly) holds itself
    cells = list(fn.__closure__ or ())
    for i, cell in enumerate(cells):
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(content, FunctionType):
            inner = _rebuilt(content, namespace, overrides, done)
            if inner is not None:
                cells[i] = types.CellType(inner)
    reads = fn.__globals__ is namespace and not overrides.keys().isdisjoint(_names(fn.__code__))
    if not reads and cells == list(fn.__closure__ or ()):
        return None
    new = FunctionType(fn.__code__, _globals(namespace, overrides) if reads else fn.__globals__,
                       fn.__name__, fn.__defaults__, tuple(cells) if cells else None)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__doc__, new.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
    new.__dict__.update(fn.__dict__)
    wrapped = fn.__dict__.get("__wrapped__")
    if isinstance(wrapped, FunctionType) and done.get(wrapped) is not None:
        new.__wrapped__ = done[wrapped]  # type: ignore[attr-defined]
    done[fn] = new
    return new


def overrides_of(module: nn.Module) -> dict[str, object]:
    """The globals whose values ``module``'s forward sees replaced (empty: none)."""
    forward = getattr(module.__dict__.get("forward"), "__func__", None)
    return dict(getattr(forward, _OVERRIDES_ATTR, None) or {})


def _ours(module: nn.Module) -> bool:
    return bool(overrides_of(module))


def _set(module: nn.Module, overrides: Globals, namespace: Globals,
         built: _Built) -> bool:
    """Give ``module`` a forward seeing ``overrides`` (none: its class's forward back)."""
    if not overrides:
        if _ours(module):
            del module.__dict__["forward"]
        return False
    cls = type(module)
    key = (cls, tuple(sorted((name, id(value)) for name, value in overrides.items())))
    if key not in built:
        original = forward_of(cls)
        new = (_rebuilt(original, namespace, overrides, {})
               if isinstance(original, FunctionType) else None)
        if new is not None:
            setattr(new, _OVERRIDES_ATTR, dict(overrides))
        built[key] = new
    new = built[key]
    if new is None:
        return False
    module.__dict__["forward"] = types.MethodType(new, module)
    return True


def bind_globals(model: nn.Module, module: ModuleType, overrides: Globals) -> int:
    """Make the modules of ``model`` whose forward reads any of ``overrides``' names as
    globals of ``module`` see the given values instead (other modules' forwards are not
    touched, nor is ``module``). Returns how many modules now see them."""
    namespace = vars(module)
    built: _Built = {}
    count = 0
    for sub in model.modules():
        if "forward" in sub.__dict__ and not _ours(sub):
            continue  # someone else's per-instance forward: leave it alone
        count += _set(sub, {**overrides_of(sub), **overrides}, namespace, built)
    return count


def unbind_globals(model: nn.Module, module: ModuleType, names: Iterable[str]) -> None:
    """Undo :func:`bind_globals` of ``names`` (globals of ``module``) on ``model``."""
    drop = set(names)
    built: _Built = {}
    for sub in model.modules():
        current = overrides_of(sub)
        if not drop.isdisjoint(current):
            _set(sub, {k: v for k, v in current.items() if k not in drop}, vars(module), built)


ATTENTION_GLOBAL = "ALL_ATTENTION_FUNCTIONS"
"""The global of a modeling module in which its attention modules look up their
implementation (Transformers' registry, shared by the process)."""


def _attention_modules(model: nn.Module) -> list[ModuleType]:
    """The modeling modules of ``model``'s classes that hold Transformers' registry."""
    registry = modeling_utils.ALL_ATTENTION_FUNCTIONS
    found = {}
    for sub in model.modules():
        module = sys.modules.get(type(sub).__module__)
        if module is not None and vars(module).get(ATTENTION_GLOBAL) is registry:
            found[module.__name__] = module
    return list(found.values())


def bind_attention(model: nn.Module, name: str, function: Callable[..., object]) -> int:
    """Make ``model``'s attention modules run ``function`` for implementation ``name``
    (other models, and the registry itself, keep what is registered under ``name``).
    Returns how many modules now see it."""
    interface = transformers.AttentionInterface()
    interface[name] = function
    return sum(bind_globals(model, module, {ATTENTION_GLOBAL: interface})
               for module in _attention_modules(model))


def unbind_attention(model: nn.Module) -> None:
    """Undo :func:`bind_attention` on ``model``."""
    for module in _attention_modules(model):
        unbind_globals(model, module, [ATTENTION_GLOBAL])
