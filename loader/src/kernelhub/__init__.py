"""kernelhub: load precompiled PyTorch compute kernels from a hub, verified and cached.

Importing this package does not import torch; torch is needed only once a kernel is
selected or loaded.
"""

from __future__ import annotations

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
from .importer import load_variant_dir
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
from .selection import Selection, select_variant
from .system import SystemInfo, detect_system

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
