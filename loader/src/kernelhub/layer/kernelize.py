"""kernelize: swap marked layers' ``forward`` for hub kernels, per instance, reversibly.

For every module marked with a kernel layer name (a ``kernel_layer_name`` on its class
or on the instance, or a function module in ``_kernel_funcs``), kernelize looks the name
up in the active mapping: device type → capability-matching device entries (narrowest
first) → mode entries in the fixed fallback order (:data:`~kernelhub.layer.mapping.MODE_FALLBACK_ORDER`). The
first layer that loads, validates as pure, and supports the mode (``has_backward`` for
TRAINING, ``can_torch_compile`` for TORCH_COMPILE) becomes the instance's ``forward``.

Where nothing applies — no mapping entry, another device, a layer that cannot do the
mode, a kernel without a build for this system — the instance gets its class's
PyTorch ``forward`` back (``use_fallback=False`` makes that an error instead). So
kernelizing again with another mode or mapping always starts from the model's own code,
and kernelizing under an empty mapping restores PyTorch everywhere.

``mode`` may be omitted: a model in ``train()`` mode is kernelized for TRAINING, one in
``eval()`` mode for INFERENCE — what the model is about to do. Only an untrusted
repository stops kernelize with an error: falling back there would hide a refusal the
user has to decide about.

A hub layer is checked before it is used (:func:`validate_layer`), because kernelize runs
its ``forward`` on the *model's* instance, with the model's parameters and attributes.
That is only sound if the hub layer adds nothing of its own: no ``__init__`` (it would
never run), no other methods or class state (the model's instance would not have them),
and a ``forward`` that accepts every call the original accepts. Checking this before the
swap turns a silent wrong result into a clear message; it lives here because it is one
of kernelize's steps and nothing else asks it.
"""

from __future__ import annotations

import inspect
import logging
import types
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import settings
from ..errors import KernelHubError, TrustError
from ..records import Record
from ..system import RuntimeDevice, runtime_device
from .autotune import adopt, autotune_flag, autotuned_forward
from .decorators import KERNEL_FUNCS_ATTR
from .mapping import (
    MODE_FALLBACK_ORDER,
    DeviceRepos,
    Mode,
    Repository,
    check_kernelize_mode,
    describe_mode,
    get_kernel_mapping,
    order_device_entries,
    unsupported_reason,
)

if TYPE_CHECKING:
    from torch import nn

logger = logging.getLogger(__name__)

_installed: set[Any] = set()
"""Forward functions kernelize installed: how restore tells its own forwards apart."""

_REPO_ATTR = "_kernelhub_repository"
"""Instance attribute naming the repository whose kernel runs the instance's forward."""

_layer_cache: dict[tuple[Any, type], type] = {}
"""(repository cache key, model class) → validated layer; loading and checking run once."""


class KernelizeError(KernelHubError):
    """kernelize(use_fallback=False) found no usable kernel for a marked layer."""


FORWARD = "forward"


def forward_of(cls: type) -> Callable[..., Any]:
    """``cls.forward``: layers are plain classes, so their forward is read by name (here
    for kernelize and the Transformers fusion; autotuning is handed the functions)."""
    forward: Callable[..., Any] = getattr(cls, FORWARD)
    return forward


# -- pure-layer validation: may a hub layer replace a model layer's forward? ------


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
    from torch import nn

    return [c for c in layer.__mro__ if c not in (nn.Module, object)
            and not c.__module__.startswith("torch.")]


def check_pure_layer(layer: type, where: str) -> None:
    """Raise :class:`LayerValidationError` unless ``layer`` only defines a ``forward``."""
    from torch import nn

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


def _params(func: Any) -> list[inspect.Parameter] | None:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # no signature to compare: accept, as Python would
        return None
    return params[1:]  # drop self


def forward_incompatibility(original: Any, replacement: Any) -> str | None:
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


def _sig(func: Any) -> str:
    try:
        return str(inspect.signature(func))
    except (TypeError, ValueError):
        return "(...)"


def validate_layer(layer: type, original_cls: type, where: str) -> None:
    """Everything kernelize checks before using ``layer`` for ``original_cls``."""
    check_pure_layer(layer, where)
    check_forward_compatible(original_cls, layer, where)


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


def _load_layer(repo: Repository, cls: type, failures: dict[Any, Exception]) -> type:
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


def install_forward(module: nn.Module, layer: type, repo: Repository) -> None:
    """Run ``layer.forward`` as ``module``'s forward (per instance, undone by restore_forward).

    For callers that place kernels themselves (module fusion) yet want
    :func:`kernel_of` and :func:`restore_forward` to treat them like kernelize's own.
    """
    _install(module, layer, repo)


def _install(module: nn.Module, layer: type, repo: Repository, autotune_as: str | None = None
             ) -> None:
    # A plain bound method, as torch.compile expects of a forward; it survives deepcopy
    # (rebound to the copy), and the function identifies it as ours for restore.
    forward = forward_of(layer)
    if autotune_as is not None:
        owner: type = type(module)
        forward = autotuned_forward(layer, forward, forward_of(owner), autotune_as)
    _installed.add(forward)
    module.__dict__["forward"] = types.MethodType(forward, module)
    module.__dict__[_REPO_ATTR] = repo


def _our_forward(module: nn.Module) -> Any:
    current = module.__dict__.get("forward")
    if (isinstance(current, types.MethodType) and current.__self__ is module
            and current.__func__ in _installed):
        return current.__func__
    return None


def restore_forward(module: nn.Module) -> None:
    """Give ``module`` its class's forward back, if kernelize replaced it."""
    if _our_forward(module) is not None:
        del module.__dict__["forward"]
        module.__dict__.pop(_REPO_ATTR, None)


def kernel_of(module: nn.Module) -> Repository | None:
    """The repository whose kernel runs ``module``'s forward, or None (PyTorch)."""
    if _our_forward(module) is None:
        return None
    return module.__dict__.get(_REPO_ATTR)


def kernelize(
    model: nn.Module,
    *,
    mode: Mode | None = None,
    device: Any = None,
    use_fallback: bool = True,
    autotune: bool = False,
    verify: bool | None = None,
) -> nn.Module:
    """Replace the forward of every marked layer in ``model`` with its mapped kernel.

    ``mode``: INFERENCE or TRAINING, optionally ``| Mode.TORCH_COMPILE``; None means
    TRAINING for a model in train() mode, INFERENCE in eval() mode. ``device``: where
    the model runs (str or torch.device; default: where its parameters are; a ROCm GPU
    counts as ``rocm``). ``use_fallback=False`` raises :class:`KernelizeError` for a
    layer the mapping names but none of whose entries fits this device and mode (or
    loads), instead of keeping its PyTorch forward; layers the mapping does not name
    keep PyTorch either way.
    ``autotune=True`` keeps PyTorch wherever the kernel is wrong or slower on the shapes
    the model actually runs: each layer's first call per shape bucket runs both and
    decides, and the decision is cached on disk for later processes (see
    :mod:`kernelhub.layer.autotune`; ``autotune_report(model)`` says what was chosen).
    ``verify`` is its former name (warns once).
    Returns ``model``. With ``USE_HUB_KERNELS=0`` nothing is changed.
    """
    autotune = autotune_flag(autotune, verify, "kernelize")
    if not settings.hub_kernels_enabled():
        return model
    if mode is None:
        mode = Mode.TRAINING if model.training else Mode.INFERENCE
    mode = check_kernelize_mode(mode)
    where = runtime_device(model, device)
    mapping = get_kernel_mapping()
    failures: dict[Any, Exception] = {}
    warned: set[tuple[Any, ...]] = set()
    if autotune:
        adopt(model)  # the stored decisions of its layers name it
    for target in _targets(model):
        devices = mapping.get(target.layer_name, {})
        chosen, reasons = _choose(target, devices, where, mode, failures)
        restore_forward(target.module)
        if chosen is not None:
            _install(target.module, *chosen, autotune_as=target.layer_name if autotune else None)
            logger.debug("%s: %s runs %s", target.path, target.layer_name, chosen[1])
            continue
        if not use_fallback and devices:
            raise KernelizeError(
                f"{target.path or type(target.module).__name__}: no usable kernel for layer "
                f"{target.layer_name!r} on {where} in mode {describe_mode(mode)}"
                + "".join(f"\n  {r.text}" for r in reasons or [_Refusal(
                    f"the mapping has no entry for {where.type} (it has: {', '.join(devices)})")])
                + "\nRegister one with use_kernel_mapping, or pass use_fallback=True to run "
                "PyTorch's forward."
            )
        for reason in reasons:
            if reason.load_failed and (target.layer_name, reason.text) not in warned:
                warned.add((target.layer_name, reason.text))
                warnings.warn(f"{target.layer_name}: {reason.text}; using PyTorch's forward",
                              stacklevel=2)
    return model


class _Refusal(Record, frozen=True):
    """Why one mapping entry was not used; a load failure is also warned about."""

    text: str
    load_failed: bool = False


def _choose(target: _Target, devices: DeviceRepos, where: RuntimeDevice, mode: Mode,
            failures: dict[Any, Exception]
            ) -> tuple[tuple[type, Repository] | None, list[_Refusal]]:
    reasons: list[_Refusal] = []
    cls = type(target.module)
    for repo, key in _candidates(devices, where, mode):
        try:
            layer = _load_layer(repo, cls, failures)
        except TrustError:
            raise
        except Exception as e:
            reasons.append(_Refusal(f"{repo} ({describe_mode(key)} entry) failed to load: {e}",
                                    load_failed=True))
            continue
        if (why := unsupported_reason(layer, mode)) is not None:
            reasons.append(_Refusal(f"{repo} ({describe_mode(key)} entry) {why}"))
            continue
        return (layer, repo), reasons
    return None, reasons
