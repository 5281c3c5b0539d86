"""Apply kernels to a Transformers model for a mode, and take them all off again.

First the entries this machine declines for the model are dropped (:mod:`.machine`:
kernels measured slower than PyTorch on CPUs of its kind), and the widened ``Linear`` is
kept only where it widens (:mod:`.widen`). Then five parts, in this order: layers and the function modules a model attaches
(``_kernel_funcs``), both through :func:`kernelhub.layer.kernelize`; module fusion
(explicit KernelConfig entries only, :mod:`.fusion`); module-global functions of models
that attach none (seen replaced by this model's modules only, :mod:`.rebind`); experts
(an ``ExpertsInterface`` registration, :mod:`.experts`); and attention (an
``AttentionInterface`` registration). Default entries that cannot load
fall back to PyTorch with a warning; entries the user named explicitly raise,
suggesting a newer ``version`` first.

:func:`remove_kernels` undoes all five: what ``reset_kernels()``, ``use_kernels=False``
and Transformers' ``nn.DataParallel`` wrapping ask for.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, cast

from ...api import get_kernel, get_local_kernel
from ...errors import KernelHubError
from ...layer import (
    CUDAProperties,
    Device,
    FuncRepository,
    LayerRepository,
    LocalFuncRepository,
    LocalLayerRepository,
    Mode,
    ROCMProperties,
    kernelize,
    restore_forward,
    unsupported_reason,
    use_kernel_mapping,
)
from ...layer.autotune import autotune_from_env, autotuned_function
from ...layer.kernelizing import collected_failures, declined
from ...layer.mapping import MODE_FALLBACK_ORDER, Repository
from . import attention, experts
from .failures import load_failure
from .fusion import apply_fusions
from .kernel_config import (
    ALLOW_ALL_ATTR,
    KernelConfig,
    KernelSpec,
    from_transformers,
)
from .machine import drop_declined
from .rebind import bind_attention, bind_globals, unbind_attention, unbind_globals
from .table import (
    ATTENTION_KEY,
    DEFAULT_MAPPING,
    EXPERTS_KEY,
    FUNCTION_NAMES,
    UNVERIFIABLE_LAYERS,
    KernelRef,
    coverage_message,
    function_targets,
    has_function_modules,
    is_covered,
)
from .widen import linear_marked, settle_widening

if TYPE_CHECKING:
    from torch import nn

    from ...layer.autotune.call_site import Kernel


class _AttentionConfig(Protocol):
    _attn_implementation: str | None


class _AttentionSeams(Protocol):
    """What a Transformers model has for choosing its attention (``PreTrainedModel``)."""

    config: _AttentionConfig

    def set_attn_implementation(self, attn_implementation: str) -> None: ...


logger = logging.getLogger("kernelhub.transformers")

APPLIED_MODE_ATTR = "_kernelhub_mode"
"""On a model: the mode its kernels were last applied for (None: none applied)."""


class Entry:
    """One candidate kernel for a name on this device: where it comes from, the modes
    it is registered for and, on GPUs, the capability range it is meant for."""

    __slots__ = ("capability", "modes", "spec")

    def __init__(self, spec: KernelSpec, modes: tuple[Mode, ...] = (Mode.FALLBACK,),
                 capability: tuple[int, int] | None = None) -> None:
        self.spec, self.modes, self.capability = spec, modes, capability

    @classmethod
    def of(cls, ref: KernelRef) -> Entry:
        spec = KernelSpec(ref.repo_id, ref.name, version=ref.version, revision=ref.revision,
                          trust_remote_code=ref.trust_remote_code)
        return cls(spec, ref.modes, ref.capability)

    def serves(self, mode: Mode) -> bool:
        return any(key in self.modes for key in MODE_FALLBACK_ORDER[mode])


def effective_entries(config: KernelConfig | None, device: str
                      ) -> tuple[dict[str, list[Entry]], set[str]]:
    """(name → its candidates on ``device``, names the user chose explicitly)."""
    entries: dict[str, list[Entry]] = {}
    # As in Transformers: a local-kernel config never inherits the hub defaults.
    if config is None or (config.inherit_mapping and not config.use_local_kernel):
        for name, per_device in DEFAULT_MAPPING.items():
            if refs := per_device.get(device):
                entries[name] = [Entry.of(r) for r in refs]
    explicit: set[str] = set()
    if config is not None:
        for name, spec in config.for_device(device).items():
            if spec is None:
                entries.pop(name, None)
            else:
                entries[name] = [Entry(spec)]
                explicit.add(name)
    return entries, explicit


def first_serving(candidates: list[Entry], mode: Mode) -> KernelSpec | None:
    """The spec of the first candidate registered for ``mode`` or a mode serving it."""
    return next((e.spec for e in candidates if e.serves(mode)), None)


def kernel_module(spec: KernelSpec) -> ModuleType:
    """The kernel package a spec names (hub or local path)."""
    if spec.local:
        return get_local_kernel(spec.source)
    return get_kernel(
        spec.source, spec.version, spec.revision, trust_remote_code=spec.trust_remote_code
    )


def repository(spec: KernelSpec, function: bool = False) -> Repository:
    """The kernelize repository of a spec: a layer class, or a function (``function``)
    wrapped as a pure layer."""
    if spec.local:
        if function:
            return LocalFuncRepository(Path(spec.source), func_name=spec.name)
        return LocalLayerRepository(Path(spec.source), layer_name=spec.name)
    if function:
        return FuncRepository(spec.source, func_name=spec.name, version=spec.version,
                              revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    return LayerRepository(spec.source, layer_name=spec.name, version=spec.version,
                           revision=spec.revision, trust_remote_code=spec.trust_remote_code)


def _device_key(device: str, capability: tuple[int, int] | None) -> str | Device:
    if capability is None:
        return device
    low, high = capability
    props = (CUDAProperties(min_capability=low, max_capability=high) if device == "cuda"
             else ROCMProperties(min_capability=low, max_capability=high))
    return Device(device, props)


def _supports(obj: object, mode: Mode) -> bool:
    return unsupported_reason(obj, mode) is None


# -- the four parts ----------------------------------------------------------------


_told_unverifiable: set[str] = set()


def _keep_own(name: str, why: object, kept: str | None = None) -> None:
    """Say once that ``name`` keeps its own code because of ``why`` (``kept``: the
    attention implementation it keeps; None: PyTorch's): recorded for the one summary
    line where kernelize collects failures (:func:`declined`), a warning otherwise."""
    if not declined(name, str(why) if kept is None else f"keeping {kept}: {why}"):
        logger.warning("%s: keeping %s (%s)", name, kept or "PyTorch", why)


def _apply_layers(model: nn.Module, entries: dict[str, list[Entry]], explicit: set[str],
                  device: str, mode: Mode, autotune: bool) -> None:
    mapping: dict[str, dict[str | Device, dict[Mode, Repository]]] = {}
    for name, candidates in entries.items():
        if name in (ATTENTION_KEY, EXPERTS_KEY):
            continue
        if autotune and name in UNVERIFIABLE_LAYERS:
            if name not in _told_unverifiable:
                _told_unverifiable.add(name)
                logger.warning("%s: keeping PyTorch's forward with autotune=True (its kernel "
                               "updates the KV cache, so it cannot be timed against PyTorch on "
                               "one call); its norm, MLP and attention are verified one by one",
                               name)
            continue
        function = name in FUNCTION_NAMES
        if function and not has_function_modules(model, name):
            continue  # a module global: the rebind part serves it
        per_device: dict[str | Device, dict[Mode, Repository]] = {}
        for entry in candidates:
            repo = repository(entry.spec, function)
            if name in explicit:  # explicit entries must load: surface a helpful error now
                try:
                    repo.load()
                except KernelHubError as e:
                    raise load_failure(entry.spec, name, device, e) from None
            key = _device_key(device, entry.capability)
            per_device.setdefault(key, {}).update(dict.fromkeys(entry.modes, repo))
        mapping[name] = per_device
    with use_kernel_mapping(mapping, inherit_mapping=False), linear_marked():
        kernelize(model, mode=mode, use_fallback=True, autotune=autotune)


def _apply_functions(model: nn.Module, entries: dict[str, list[Entry]], explicit: set[str],
                     device: str, mode: Mode, autotune: bool) -> None:
    for name, (module, attr) in function_targets(model).items():
        if has_function_modules(model, name):
            continue  # the model's own function modules: kernelized with the layers
        spec = first_serving(entries.get(name, []), mode)
        replacement = None
        if spec is not None:
            try:
                replacement = getattr(kernel_module(spec), spec.name)
            except (KernelHubError, AttributeError) as e:
                if name in explicit:
                    raise load_failure(spec, name, device, e) from None
                _keep_own(name, e)
        if replacement is not None and _supports(replacement, mode):
            if autotune:
                replacement = autotuned_function(name, replacement, getattr(module, attr),
                                                owner=model)
            bind_globals(model, module, {attr: replacement})
        else:
            unbind_globals(model, module, [attr])


def _apply_experts(model: nn.Module, entries: dict[str, list[Entry]], explicit: set[str],
                   device: str, mode: Mode, autotune: bool) -> None:
    if not experts.experts_modules(model):
        return
    spec = first_serving(entries.get(EXPERTS_KEY, []), mode)
    function = None
    if spec is not None:
        try:
            kernel = kernel_module(spec)
            function = getattr(kernel, spec.name)
        except (KernelHubError, AttributeError) as e:
            if EXPERTS_KEY in explicit:
                raise load_failure(spec, EXPERTS_KEY, device, e) from None
            _keep_own(EXPERTS_KEY, e)
    if spec is None or function is None or not _supports(function, mode):
        experts.uninstall(model)
        return
    reason = getattr(kernel, "unsupported_reason", None)
    if not experts.install(model, spec.source, function, reason if callable(reason) else None):
        experts.uninstall(model)


_ATTN_PREVIOUS = "_kernelhub_attn_previous"
"""On a model: the attention implementation it had before ours (restored when ours goes)."""


def _restore_attention(model: nn.Module) -> None:
    previous = model.__dict__.pop(_ATTN_PREVIOUS, None)
    if previous is not None:
        cast("_AttentionSeams", model).set_attn_implementation(previous)


def _needs_own_attention(model: nn.Module, repo_id: str) -> str | None:
    """Why the table's (optional) attention kernel must not replace ``model``'s, or None.

    A model class that lists the flash kernels its attention is compatible with
    (``_compatible_flash_implementations``: gpt-oss, Flint, the Granite SWA models,
    MiMo-V2-Flash) needs what a generic kernel ignores (attention sinks passed as
    ``s_aux``, asymmetric head dims); Transformers itself moves a flash request to one of
    the listed kernels. Ours is not listed, so such a model keeps its own attention.
    """
    compatible = getattr(model, "_compatible_flash_implementations", None)
    if not compatible or repo_id in compatible:
        return None
    return (f"{type(model).__name__} runs only the flash kernels it lists "
            f"({', '.join(compatible)}), not {repo_id}")


def _apply_attention(model: nn.Module, entries: dict[str, list[Entry]], explicit: set[str],
                     device: str, mode: Mode, autotune: bool) -> None:
    spec = first_serving(entries.get(ATTENTION_KEY, []), mode)
    current = cast("_AttentionSeams", model).config._attn_implementation
    previous = getattr(model, _ATTN_PREVIOUS, None)
    unbind_attention(model)
    if spec is None or spec.local or (previous is None and current not in ("sdpa", "eager")):
        _restore_attention(model)
        return
    if ATTENTION_KEY not in explicit and (why := _needs_own_attention(model, spec.source)):
        _restore_attention(model)
        _keep_own("attention", why, kept=current)
        return
    function = None if spec.name == attention.DEFAULT_FUNCTION else spec.name
    # An int major is the table's choice (the name stays "org/repo", as Transformers
    # writes it); any other pin is part of the name, as in "org/repo@v1.2.0".
    major = spec.version if isinstance(spec.version, int) else None
    request = attention.AttentionRequest(
        spec.source, version=None if major is not None else spec.version, function=function,
        default_version=major)
    try:
        name = attention.register(request, allow_all_kernels=spec.trust_remote_code)
    except KernelHubError as e:
        if ATTENTION_KEY in explicit:
            raise load_failure(spec, ATTENTION_KEY, device, e) from None
        _keep_own("attention", e, kept=current)
        return
    chosen = attention.attention_function(name)
    if _supports(chosen, mode):
        if current != name:
            try:
                cast("_AttentionSeams", model).set_attn_implementation(name)
            except ValueError as e:  # the model refuses it (e.g. a prefix-LM mask): its own
                if ATTENTION_KEY in explicit:  # attention stays, as the table's is optional
                    raise
                _keep_own("attention", e, kept=current)
                return
        setattr(model, _ATTN_PREVIOUS, previous or current)
        if autotune:
            _autotune_attention(model, request, spec, name, chosen)
    else:
        _restore_attention(model)


def _autotune_attention(model: nn.Module, request: attention.AttentionRequest,
                        spec: KernelSpec, name: str, function: Kernel) -> None:
    """This model's attention modules (only theirs: the registry under ``name`` is the
    process's) see ``function`` autotuned against Transformers' own implementation of the
    mask interface the kernel asks for, which takes the same inputs."""
    wanted, reference = attention.reference_of(request, allow_all_kernels=spec.trust_remote_code)
    if reference is None:
        logger.warning("%s: cannot autotune (Transformers has no %r attention to compare "
                       "with); using the kernel as it is", request.name, wanted)
        return
    bind_attention(model, name, autotuned_function(attention.ATTENTION_NAME, function,
                                                   reference, owner=model))


# -- entry points ------------------------------------------------------------------


def apply_kernels(model: nn.Module, kernel_config: object, mode: Mode, device: str) -> None:
    """Kernelize ``model`` for ``mode`` on ``device`` with the table, then the user's
    KernelConfig (Transformers' or ours; None: the model's ``kernel_config``)."""
    config = kernel_config if kernel_config is not None else getattr(model, "kernel_config", None)
    config = from_transformers(config) if config is not None else None
    if config is not None:
        config.check_keys(model)
        if getattr(model, ALLOW_ALL_ATTR, False):
            config = config.trusting_all()
    if (not is_covered(model) and not experts.experts_modules(model)
            and not getattr(model, "_kernelhub_coverage_told", False)):
        model.__dict__["_kernelhub_coverage_told"] = True
        logger.warning(coverage_message(model))
    entries, explicit = effective_entries(config, device)
    drop_declined(entries, explicit, model, device)
    settle_widening(entries, explicit, model, device)
    autotune = (config is not None and config.autotune) or autotune_from_env()
    with collected_failures() as failed:
        _apply_layers(model, entries, explicit, device, mode, autotune)
        apply_fusions(model, config, device, mode, repository)
        _apply_functions(model, entries, explicit, device, mode, autotune)
        _apply_experts(model, entries, explicit, device, mode, autotune)
        _apply_attention(model, entries, explicit, device, mode, autotune)
    if failed:
        logger.warning(declined_line(failed))
    setattr(model, APPLIED_MODE_ATTR, mode)


def declined_line(failed: list[tuple[str, str]]) -> str:
    """The one line a model's kernelization says about every kernel it could not load
    (the table's kernels are optional: PyTorch runs there), with the first reason; the
    same model loaded by the ecosystem's path says nothing, so this says no more than
    once per model."""
    names = list(dict.fromkeys(name for name, _ in failed))
    why = " ".join(failed[0][1].split())
    if len(why) > 400:
        why = why[:400] + "…"
    return (f"kernelhub: {len(names)} of this model's kernels did not load, PyTorch runs "
            f"there ({', '.join(names)}); first reason: {why} (`kernelhub env` shows the hubs "
            "searched)")


def remove_kernels(model: nn.Module) -> None:
    """Every layer, fused module, function and attention kernel of ``model`` back to
    Transformers' own code (the model's marks stay, so kernels can come back)."""
    for layer in model.modules():  # layers, fused children, attached function modules
        restore_forward(layer)
        for func in (getattr(layer, "_kernel_funcs", None) or {}).values():
            restore_forward(func)
    for module, attr in function_targets(model).values():
        unbind_globals(model, module, [attr])
    experts.uninstall(model)
    unbind_attention(model)
    _restore_attention(model)
    if hasattr(model, APPLIED_MODE_ATTR):
        delattr(model, APPLIED_MODE_ATTR)
