"""Layers API: mark model layers, map them to hub kernels, kernelize a model.

Importing this package does not import torch; torch is imported when a function layer
is made, a mapping is used by kernelize, or a layer is loaded.
"""

from __future__ import annotations

from .decorators import (
    replace_kernel_forward_from_hub,
    use_kernel_forward_from_hub,
    use_kernel_func_from_hub,
    use_kernelized_func,
)
from .device import CUDAProperties, Device, ROCMProperties, runtime_device
from .kernelize import (
    KernelizeError,
    clear_layer_cache,
    install_forward,
    kernel_of,
    kernelize,
    restore_forward,
    unsupported_reason,
)
from .mapping import (
    get_kernel_mapping,
    normalize_mapping,
    register_kernel_mapping,
    use_kernel_mapping,
)
from .mode import MODE_FALLBACK_ORDER, Mode
from .repos import (
    FuncRepository,
    LayerRepository,
    LocalFuncRepository,
    LocalLayerRepository,
    LockedFuncRepository,
    LockedLayerRepository,
)
from .validate import LayerValidationError, validate_layer
from .verify import format_report, verification_report

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
