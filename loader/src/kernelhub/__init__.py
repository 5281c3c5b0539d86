"""kernelhub: load precompiled PyTorch compute kernels from a hub, verified and cached.

Importing this package does not import torch, and imports none of its own modules but
the errors: every public name is loaded on first use (``kernelhub.get_kernel`` imports
the loading code, ``kernelhub.kernelize`` the layers API), so ``import kernelhub`` costs
next to nothing in a program that may never load a kernel (the Transformers import
hook imports it at start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    HubError,
    IntegrityError,
    KernelHubError,
    KernelLoadError,
    MetadataError,
    NoCompatibleVariantError,
    RepoNotFoundError,
    TrustError,
    VersionSpecError,
)

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from .api import (
        Resolution,
        find_local_variant,
        get_kernel,
        get_local_kernel,
        has_kernel,
        load_locked_kernel,
        locate_kernel,
        resolve_kernel,
    )
    from .importer import (
        load_variant_dir,
    )
    from .layer import (
        CUDAProperties,
        Device,
        FuncRepository,
        KernelizeError,
        LayerRepository,
        LayerValidationError,
        LocalFuncRepository,
        LocalLayerRepository,
        LockedFuncRepository,
        LockedLayerRepository,
        Mode,
        ROCMProperties,
        kernelize,
        register_kernel_mapping,
        replace_kernel_forward_from_hub,
        use_kernel_forward_from_hub,
        use_kernel_func_from_hub,
        use_kernel_mapping,
        use_kernelized_func,
        verification_report,
    )
    from .selection import (
        Selection,
        select_variant,
    )
    from .system import (
        SystemInfo,
        detect_system,
    )

_LAZY: dict[str, str] = {
    "Resolution": "api",
    "find_local_variant": "api",
    "get_kernel": "api",
    "get_local_kernel": "api",
    "has_kernel": "api",
    "load_locked_kernel": "api",
    "locate_kernel": "api",
    "resolve_kernel": "api",
    "load_variant_dir": "importer",
    "CUDAProperties": "layer",
    "Device": "layer",
    "FuncRepository": "layer",
    "KernelizeError": "layer",
    "LayerRepository": "layer",
    "LayerValidationError": "layer",
    "LocalFuncRepository": "layer",
    "LocalLayerRepository": "layer",
    "LockedFuncRepository": "layer",
    "LockedLayerRepository": "layer",
    "Mode": "layer",
    "ROCMProperties": "layer",
    "kernelize": "layer",
    "register_kernel_mapping": "layer",
    "replace_kernel_forward_from_hub": "layer",
    "use_kernel_forward_from_hub": "layer",
    "use_kernel_func_from_hub": "layer",
    "use_kernel_mapping": "layer",
    "use_kernelized_func": "layer",
    "verification_report": "layer",
    "Selection": "selection",
    "select_variant": "selection",
    "SystemInfo": "system",
    "detect_system": "system",
}
"""Public name → the submodule that defines it, imported on first use (PEP 562)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        # A submodule used as an attribute (``kernelhub.layer.Mode`` after a bare
        # ``import kernelhub``), as it was when the package imported them all.
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'kernelhub' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CUDAProperties",
    "Device",
    "FuncRepository",
    "HubError",
    "IntegrityError",
    "KernelHubError",
    "KernelLoadError",
    "KernelizeError",
    "LayerRepository",
    "LayerValidationError",
    "LocalFuncRepository",
    "LocalLayerRepository",
    "LockedFuncRepository",
    "LockedLayerRepository",
    "MetadataError",
    "Mode",
    "NoCompatibleVariantError",
    "ROCMProperties",
    "RepoNotFoundError",
    "Resolution",
    "Selection",
    "SystemInfo",
    "TrustError",
    "VersionSpecError",
    "detect_system",
    "find_local_variant",
    "get_kernel",
    "get_local_kernel",
    "has_kernel",
    "kernelize",
    "load_locked_kernel",
    "load_variant_dir",
    "locate_kernel",
    "register_kernel_mapping",
    "replace_kernel_forward_from_hub",
    "resolve_kernel",
    "select_variant",
    "use_kernel_forward_from_hub",
    "use_kernel_func_from_hub",
    "use_kernel_mapping",
    "use_kernelized_func",
    "verification_report",
]
