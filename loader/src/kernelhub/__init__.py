"""kernelhub: load precompiled PyTorch compute kernels from a hub, verified and cached.

Importing this package does not import torch, and imports none of its own modules but
the errors: every public name is loaded on first use (``kernelhub.get_kernel`` imports
the loading code, ``kernelhub.kernelize`` the layers API), so ``import kernelhub`` costs
next to nothing in a program that may never load a kernel (the Transformers import
hook imports it at start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import (
    HubError as HubError,
)
from .errors import (
    IntegrityError as IntegrityError,
)
from .errors import (
    KernelHubError as KernelHubError,
)
from .errors import (
    KernelLoadError as KernelLoadError,
)
from .errors import (
    MetadataError as MetadataError,
)
from .errors import (
    NoCompatibleVariantError as NoCompatibleVariantError,
)
from .errors import (
    RepoNotFoundError as RepoNotFoundError,
)
from .errors import (
    TrustError as TrustError,
)
from .errors import (
    VersionSpecError as VersionSpecError,
)
from .lazy_names import LazyNames

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from .api import (
        Resolution as Resolution,
    )
    from .api import (
        find_local_variant as find_local_variant,
    )
    from .api import (
        get_kernel as get_kernel,
    )
    from .api import (
        get_local_kernel as get_local_kernel,
    )
    from .api import (
        has_kernel as has_kernel,
    )
    from .api import (
        load_locked_kernel as load_locked_kernel,
    )
    from .api import (
        locate_kernel as locate_kernel,
    )
    from .api import (
        resolve_kernel as resolve_kernel,
    )
    from .importer import (
        load_variant_dir as load_variant_dir,
    )
    from .layer import (
        CUDAProperties as CUDAProperties,
    )
    from .layer import (
        Device as Device,
    )
    from .layer import (
        FuncRepository as FuncRepository,
    )
    from .layer import (
        KernelizeError as KernelizeError,
    )
    from .layer import (
        LayerRepository as LayerRepository,
    )
    from .layer import (
        LayerValidationError as LayerValidationError,
    )
    from .layer import (
        LocalFuncRepository as LocalFuncRepository,
    )
    from .layer import (
        LocalLayerRepository as LocalLayerRepository,
    )
    from .layer import (
        LockedFuncRepository as LockedFuncRepository,
    )
    from .layer import (
        LockedLayerRepository as LockedLayerRepository,
    )
    from .layer import (
        Mode as Mode,
    )
    from .layer import (
        ROCMProperties as ROCMProperties,
    )
    from .layer import (
        autotune_report as autotune_report,
    )
    from .layer import (
        forget_decisions as forget_decisions,
    )
    from .layer import (
        kernelize as kernelize,
    )
    from .layer import (
        register_kernel_mapping as register_kernel_mapping,
    )
    from .layer import (
        replace_kernel_forward_from_hub as replace_kernel_forward_from_hub,
    )
    from .layer import (
        use_kernel_forward_from_hub as use_kernel_forward_from_hub,
    )
    from .layer import (
        use_kernel_func_from_hub as use_kernel_func_from_hub,
    )
    from .layer import (
        use_kernel_mapping as use_kernel_mapping,
    )
    from .layer import (
        use_kernelized_func as use_kernelized_func,
    )
    from .layer import (
        verification_report as verification_report,
    )
    from .selection import (
        Selection as Selection,
    )
    from .selection import (
        select_variant as select_variant,
    )
    from .system import (
        SystemInfo as SystemInfo,
    )
    from .system import (
        detect_system as detect_system,
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
    "autotune_report": "layer",
    "forget_decisions": "layer",
    "kernelize": "layer",
    "register_kernel_mapping": "layer",
    "replace_kernel_forward_from_hub": "layer",
    "use_kernel_forward_from_hub": "layer",
    "use_kernel_func_from_hub": "layer",
    "use_kernel_mapping": "layer",
    "use_kernelized_func": "layer",
    "verification_report": "layer",  # the former name of autotune_report (warns once)
    "Selection": "selection",
    "select_variant": "selection",
    "SystemInfo": "system",
    "detect_system": "system",
}
"""Public name → the submodule that defines it, imported on first use (PEP 562)."""


_lazy = LazyNames(__name__, _LAZY, submodules=True)
__getattr__ = _lazy.attribute
__dir__ = _lazy.listing

__all__ = sorted([
    "HubError",
    "IntegrityError",
    "KernelHubError",
    "KernelLoadError",
    "MetadataError",
    "NoCompatibleVariantError",
    "RepoNotFoundError",
    "TrustError",
    "VersionSpecError",
    *_LAZY,
])
