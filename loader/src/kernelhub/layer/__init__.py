"""Layers API: mark model layers, map them to hub kernels, kernelize a model.

Importing this package does not import torch; torch is imported when a function layer
is made, a mapping is used by kernelize, or a layer is loaded.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from .decorators import (
        replace_kernel_forward_from_hub,
        use_kernel_forward_from_hub,
        use_kernel_func_from_hub,
        use_kernelized_func,
    )
    from .device import (
        CUDAProperties,
        Device,
        ROCMProperties,
        runtime_device,
    )
    from .kernelize import (
        KernelizeError,
        clear_layer_cache,
        install_forward,
        kernel_of,
        kernelize,
        restore_forward,
    )
    from .mapping import (
        get_kernel_mapping,
        normalize_mapping,
        register_kernel_mapping,
        use_kernel_mapping,
    )
    from .mode import (
        MODE_FALLBACK_ORDER,
        Mode,
        unsupported_reason,
    )
    from .repos import (
        FuncRepository,
        LayerRepository,
        LocalFuncRepository,
        LocalLayerRepository,
        LockedFuncRepository,
        LockedLayerRepository,
    )
    from .validate import (
        LayerValidationError,
        validate_layer,
    )
    from .verify import (
        format_report,
        verification_report,
    )

_LAZY: dict[str, str] = {
    "replace_kernel_forward_from_hub": "decorators",
    "use_kernel_forward_from_hub": "decorators",
    "use_kernel_func_from_hub": "decorators",
    "use_kernelized_func": "decorators",
    "CUDAProperties": "device",
    "Device": "device",
    "ROCMProperties": "device",
    "runtime_device": "device",
    "KernelizeError": "kernelize",
    "clear_layer_cache": "kernelize",
    "install_forward": "kernelize",
    "kernel_of": "kernelize",
    "kernelize": "kernelize",
    "restore_forward": "kernelize",
    "unsupported_reason": "mode",
    "get_kernel_mapping": "mapping",
    "normalize_mapping": "mapping",
    "register_kernel_mapping": "mapping",
    "use_kernel_mapping": "mapping",
    "MODE_FALLBACK_ORDER": "mode",
    "Mode": "mode",
    "FuncRepository": "repos",
    "LayerRepository": "repos",
    "LocalFuncRepository": "repos",
    "LocalLayerRepository": "repos",
    "LockedFuncRepository": "repos",
    "LockedLayerRepository": "repos",
    "LayerValidationError": "validate",
    "validate_layer": "validate",
    "format_report": "verify",
    "verification_report": "verify",
}
"""Public name → the submodule that defines it, imported on first use (PEP 562): a model
file that only marks its layers (``use_kernel_forward_from_hub``) imports the decorators,
not the loading code."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelhub.layer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """This package's module type: importing a submodule binds it as an attribute of the
    package, which for ``kernelize`` (module and function share the name) would hide the
    function; keep the function instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (isinstance(value, types.ModuleType) and _LAZY.get(name) == name
                and value.__name__ == f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "MODE_FALLBACK_ORDER",
    "CUDAProperties",
    "Device",
    "FuncRepository",
    "KernelizeError",
    "LayerRepository",
    "LayerValidationError",
    "LocalFuncRepository",
    "LocalLayerRepository",
    "LockedFuncRepository",
    "LockedLayerRepository",
    "Mode",
    "ROCMProperties",
    "clear_layer_cache",
    "format_report",
    "get_kernel_mapping",
    "install_forward",
    "kernel_of",
    "kernelize",
    "normalize_mapping",
    "register_kernel_mapping",
    "replace_kernel_forward_from_hub",
    "restore_forward",
    "runtime_device",
    "unsupported_reason",
    "use_kernel_forward_from_hub",
    "use_kernel_func_from_hub",
    "use_kernel_mapping",
    "use_kernelized_func",
    "validate_layer",
    "verification_report",
]
