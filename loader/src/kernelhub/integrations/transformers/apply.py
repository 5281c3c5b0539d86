"""Apply kernels to a Transformers model for its current mode, and re-apply on a switch.

``model.eval()`` / ``model.train()`` call ``PreTrainedModel.train``, which calls
``set_use_kernels(True)`` again when kernels are on and the mode changed; with the
integration enabled that lands in :func:`apply_kernels`, which kernelizes for
``Mode.INFERENCE`` or ``Mode.TRAINING``. An explicit ``mode`` (e.g.
``Mode.TRAINING | Mode.TORCH_COMPILE``) is remembered and kept across switches of the
same kind.

Four parts, in this order: layers (per instance, through
:func:`kernelhub.layer.kernelize`), module fusion (explicit KernelConfig entries only,
:mod:`.fusion`), module-global functions (seen replaced by this model's modules only,
:mod:`.rebind`) and attention (an ``AttentionInterface`` registration). Default entries that cannot load fall back to PyTorch with a warning;
entries the user named explicitly raise, suggesting a newer ``version`` first.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

from ... import settings
from ...api import get_kernel, get_local_kernel
from ...errors import KernelHubError
from ...layer import (
    LayerRepository,
    LocalLayerRepository,
    Mode,
    kernelize,
    unsupported_reason,
    use_kernel_mapping,
)
from ...layer.verify import verified_function, verify_from_env
from . import attention
from .failures import load_failure
from .fusion import apply_fusions
from .kernel_config import (
    ALLOW_ALL_ATTR,
    KernelConfig,
    KernelSpec,
    device_type_of,
    from_transformers,
)
from .rebind import bind_globals, unbind_globals
from .table import (
    ATTENTION_KEY,
    DEFAULT_MAPPING,
    FUNCTION_NAMES,
    UNVERIFIABLE_LAYERS,
    coverage_message,
    function_targets,
    is_covered,
)

logger = logging.getLogger("kernelhub.transformers")

def _default_specs(device: str) -> dict[str, KernelSpec]:
    return {
        name: KernelSpec(ref.repo_id, ref.name, version=ref.version)
        for name, per_device in DEFAULT_MAPPING.items()
        if (ref := per_device.get(device)) is not None
    }


def effective_specs(config: KernelConfig | None, device: str) -> tuple[dict[str, KernelSpec], set[str]]:
    """(name → spec for this device, names the user chose explicitly)."""
    specs: dict[str, KernelSpec] = {}
    # As in Transformers: a local-kernel config never inherits the hub defaults.
    if config is None or (config.inherit_mapping and not config.use_local_kernel):
        specs.update(_default_specs(device))
    explicit: set[str] = set()
    if config is not None:
        for name, spec in config.for_device(device).items():
            if spec is None:
                specs.pop(name, None)
            else:
                specs[name] = spec
                explicit.add(name)
    return specs, explicit


def kernel_module(spec: KernelSpec) -> ModuleType:
    """The kernel package a spec names (hub or local path)."""
    if spec.local:
        return get_local_kernel(spec.source)
    return get_kernel(
        spec.source, spec.version, spec.revision, trust_remote_code=spec.trust_remote_code
    )


def _repository(spec: KernelSpec) -> Any:
    if spec.local:
        return LocalLayerRepository(Path(spec.source), layer_name=spec.name)
    return LayerRepository(
        spec.source, layer_name=spec.name, version=spec.version, revision=spec.revision,
        trust_remote_code=spec.trust_remote_code,
    )


def _supports(obj: Any, mode: Any) -> bool:
    return unsupported_reason(obj, mode) is None


# -- the four parts ----------------------------------------------------------------


_told_unverifiable: set[str] = set()


def _apply_layers(model: Any, specs: dict[str, KernelSpec], explicit: set[str],
                  device: str, mode: Any, verify: bool) -> None:
    mapping: dict[str, Any] = {}
    for name, spec in specs.items():
        if name in FUNCTION_NAMES or name == ATTENTION_KEY:
            continue
        if verify and name in UNVERIFIABLE_LAYERS:
            if name not in _told_unverifiable:
                _told_unverifiable.add(name)
                logger.warning("%s: keeping PyTorch's forward with verify=True (its kernel "
                               "updates the KV cache, so it cannot be timed against PyTorch on "
                               "one call); its norm, MLP and attention are verified one by one",
                               name)
            continue
        if name in explicit:  # explicit entries must load: surface a helpful error now
            try:
                _repository(spec).load()
            except KernelHubError as e:
                raise load_failure(spec, name, device, e) from None
        mapping[name] = {device: _repository(spec)}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=mode, use_fallback=True, verify=verify)


def _apply_functions(model: Any, specs: dict[str, KernelSpec], explicit: set[str],
                     device: str, mode: Any, verify: bool) -> None:
    for name, (module, attr) in function_targets(model).items():
        spec = specs.get(name)
        replacement = None
        if spec is not None:
            try:
                replacement = getattr(kernel_module(spec), spec.name)
            except (KernelHubError, AttributeError) as e:
                if name in explicit:
                    raise load_failure(spec, name, device, e) from None
                logger.warning("%s: keeping PyTorch (%s)", name, e)
        if replacement is not None and _supports(replacement, mode):
            if verify:
                replacement = verified_function(name, replacement, getattr(module, attr),
                                                owner=model)
            bind_globals(model, module, {attr: replacement})
        else:
            unbind_globals(model, module, [attr])


def _apply_attention(model: Any, specs: dict[str, KernelSpec], explicit: set[str],
                     device: str, mode: Any, verify: bool) -> None:
    spec = specs.get(ATTENTION_KEY)
    current = model.config._attn_implementation
    previous = getattr(model, "_kernelhub_attn_previous", None)
    if spec is None or spec.local or (previous is None and current not in ("sdpa", "eager")):
        if previous is not None:
            model.set_attn_implementation(previous)
        return
    function = None if spec.name == attention.DEFAULT_FUNCTION else spec.name
    request = attention.AttentionRequest(spec.source, function=function)
    try:
        name = attention.register(request, allow_all_kernels=spec.trust_remote_code,
                                  verify=verify)
    except KernelHubError as e:
        if ATTENTION_KEY in explicit:
            raise load_failure(spec, ATTENTION_KEY, device, e) from None
        logger.warning("attention: keeping %s (%s)", current, e)
        return
    function = attention.attention_function(name)
    if _supports(function, mode):
        model._kernelhub_attn_previous = previous or current
        if current != name:
            # Transformers checks the name again, which registers the plain kernel:
            # put the (possibly verified) function chosen here back afterwards.
            model.set_attn_implementation(name)
            attention.register_function(name, function)
    elif previous is not None:
        model.set_attn_implementation(previous)


# -- entry point -------------------------------------------------------------------


def current_mode(model: Any, requested: Any = None) -> Any:
    """The mode to kernelize for: ``requested``, else the model's train/eval state.

    TORCH_COMPILE, once asked for, stays on across eval()/train() switches.
    """
    if requested is not None:
        model._kernelhub_compile = Mode.TORCH_COMPILE in requested
        return requested
    mode = Mode.TRAINING if model.training else Mode.INFERENCE
    if getattr(model, "_kernelhub_compile", False):
        mode |= Mode.TORCH_COMPILE
    return mode


def apply_kernels(model: Any, kernel_config: Any = None, mode: Any = None,
                  device_map: Any = None) -> None:
    """Kernelize ``model`` for its mode with the table, then the user's KernelConfig.

    ``device_map`` (what ``from_pretrained`` resolved) names the device the layers run on
    where the parameters cannot tell: offloaded ones sit on ``meta``."""
    if not settings.hub_kernels_enabled():
        model._use_kernels = False
        return
    config = kernel_config if kernel_config is not None else getattr(model, "kernel_config", None)
    config = from_transformers(config) if config is not None else None
    model.kernel_config = config
    if config is not None:
        config.check_keys(model)
        if getattr(model, ALLOW_ALL_ATTR, False):
            config = config.trusting_all()
    if not is_covered(model) and not getattr(model, "_kernelhub_coverage_told", False):
        model._kernelhub_coverage_told = True
        logger.warning(coverage_message(model))
    mode = current_mode(model, mode)
    device = device_type_of(model, device_map)
    specs, explicit = effective_specs(config, device)
    verify = (config is not None and config.verify) or verify_from_env()
    _apply_layers(model, specs, explicit, device, mode, verify)
    apply_fusions(model, config, device, mode, _repository)
    _apply_functions(model, specs, explicit, device, mode, verify)
    _apply_attention(model, specs, explicit, device, mode, verify)
    model._use_kernels = True
    model._kernelhub_mode = mode
