"""Layers API: mark model layers, map them to hub kernels, kernelize a model.

Importing this package does not import torch; torch is imported when a function layer
is made, a mapping is used by kernelize, or a layer is loaded.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ..lazy_names import LazyNames

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from ..system import (
        runtime_device as runtime_device,
    )
    from .autotune import (
        autotune_report as autotune_report,
    )
    from .autotune import (
        forget_decisions as forget_decisions,
    )
    from .autotune import (
        format_report as format_report,
    )
    from .autotune import (
        verification_report as verification_report,
    )
    from .decorators import (
        replace_kernel_forward_from_hub as replace_kernel_forward_from_hub,
    )
    from .decorators import (
        use_kernel_forward_from_hub as use_kernel_forward_from_hub,
    )
    from .decorators import (
        use_kernel_func_from_hub as use_kernel_func_from_hub,
    )
    from .decorators import (
        use_kernelized_func as use_kernelized_func,
    )
    from .kernelize import (
        KernelizeError as KernelizeError,
    )
    from .kernelize import (
        LayerValidationError as LayerValidationError,
    )
    from .kernelize import (
        clear_layer_cache as clear_layer_cache,
    )
    from .kernelize import (
        install_forward as install_forward,
    )
    from .kernelize import (
        kernel_of as kernel_of,
    )
    from .kernelize import (
        kernelize as kernelize,
    )
    from .kernelize import (
        restore_forward as restore_forward,
    )
    from .kernelize import (
        validate_layer as validate_layer,
    )
    from .mapping import (
        MODE_FALLBACK_ORDER as MODE_FALLBACK_ORDER,
    )
    from .mapping import (
        CUDAProperties as CUDAProperties,
    )
    from .mapping import (
        Device as Device,
    )
    from .mapping import (
        Mode as Mode,
    )
    from .mapping import (
        ROCMProperties as ROCMProperties,
    )
    from .mapping import (
        get_kernel_mapping as get_kernel_mapping,
    )
    from .mapping import (
        normalize_mapping as normalize_mapping,
    )
    from .mapping import (
        register_kernel_mapping as register_kernel_mapping,
    )
    from .mapping import (
        unsupported_reason as unsupported_reason,
    )
    from .mapping import (
        use_kernel_mapping as use_kernel_mapping,
    )
    from .repos import (
        FuncRepository as FuncRepository,
    )
    from .repos import (
        LayerRepository as LayerRepository,
    )
    from .repos import (
        LocalFuncRepository as LocalFuncRepository,
    )
    from .repos import (
        LocalLayerRepository as LocalLayerRepository,
    )
    from .repos import (
        LockedFuncRepository as LockedFuncRepository,
    )
    from .repos import (
        LockedLayerRepository as LockedLayerRepository,
    )

_LAZY: dict[str, str] = {
    "replace_kernel_forward_from_hub": "decorators",
    "use_kernel_forward_from_hub": "decorators",
    "use_kernel_func_from_hub": "decorators",
    "use_kernelized_func": "decorators",
    "CUDAProperties": "mapping",
    "Device": "mapping",
    "ROCMProperties": "mapping",
    "runtime_device": ".system",  # defined by kernelhub.system, the platform module
    "KernelizeError": "kernelize",
    "clear_layer_cache": "kernelize",
    "install_forward": "kernelize",
    "kernel_of": "kernelize",
    "kernelize": "kernelize",
    "restore_forward": "kernelize",
    "unsupported_reason": "mapping",
    "get_kernel_mapping": "mapping",
    "normalize_mapping": "mapping",
    "register_kernel_mapping": "mapping",
    "use_kernel_mapping": "mapping",
    "MODE_FALLBACK_ORDER": "mapping",
    "Mode": "mapping",
    "FuncRepository": "repos",
    "LayerRepository": "repos",
    "LocalFuncRepository": "repos",
    "LocalLayerRepository": "repos",
    "LockedFuncRepository": "repos",
    "LockedLayerRepository": "repos",
    "LayerValidationError": "kernelize",
    "validate_layer": "kernelize",
    "autotune_report": "autotune",
    "forget_decisions": "autotune",
    "format_report": "autotune",
    "verification_report": "autotune",  # the former name of autotune_report (warns once)
}
"""Public name → the module that defines it, relative to this package (``.system`` is
``kernelhub.system``), imported on first use (PEP 562): a model file that only marks its
layers (``use_kernel_forward_from_hub``) imports the decorators, not the loading code."""


_lazy = LazyNames(__name__, _LAZY)
__getattr__ = _lazy.attribute
__dir__ = _lazy.listing


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


__all__ = sorted(_LAZY)
