"""The kernel ecosystem's loader API (``kernels`` 0.19.1's ``__all__``), served by kernelhub.

Code written for the ecosystem's loader runs on kernelhub by changing one import::

    from kernels import get_kernel, kernelize, Mode            # the ecosystem's loader
    from kernelhub.ecosystem import get_kernel, kernelize, Mode  # the same API on kernelhub

Every name of ``kernels.__all__`` is here with the ecosystem's signature (each accepts
every call the ecosystem's does; a test compares them against the installed
``kernels``), and is what ``import kernels`` returns when the ecosystem's own package is
not installed (see ``_kernelhub_autoload``). Names are imported on first use:
Transformers imports ``kernels`` just to probe for it, which must stay cheap.

``__version__`` is the ecosystem release whose API this module serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import LazyNames

if TYPE_CHECKING:
    from ..layer import CUDAProperties as CUDAProperties
    from ..layer import Device as Device
    from ..layer import FuncRepository as FuncRepository
    from ..layer import KernelizedFunc as KernelizedFunc
    from ..layer import KernelizedLayer as KernelizedLayer
    from ..layer import KernelizedLayers as KernelizedLayers
    from ..layer import KernelizeFallback as KernelizeFallback
    from ..layer import LayerRepository as LayerRepository
    from ..layer import LocalFuncRepository as LocalFuncRepository
    from ..layer import LocalLayerRepository as LocalLayerRepository
    from ..layer import LockedFuncRepository as LockedFuncRepository
    from ..layer import LockedLayerRepository as LockedLayerRepository
    from ..layer import Mode as Mode
    from ..layer import ROCMProperties as ROCMProperties
    from ..layer import get_kernelized_layers as get_kernelized_layers
    from ..layer import register_kernel_mapping as register_kernel_mapping
    from ..layer import replace_kernel_forward_from_hub as replace_kernel_forward_from_hub
    from ..layer import use_kernel_forward_from_hub as use_kernel_forward_from_hub
    from ..layer import use_kernel_func_from_hub as use_kernel_func_from_hub
    from ..layer import use_kernel_mapping as use_kernel_mapping
    from ..layer import use_kernelized_func as use_kernelized_func
    from .layers import kernelize as kernelize
    from .load import get_kernel as get_kernel
    from .load import get_local_kernel as get_local_kernel
    from .load import get_locked_kernel as get_locked_kernel
    from .load import has_kernel as has_kernel
    from .load import install_kernel as install_kernel
    from .load import load_kernel as load_kernel
    from .records import LoadedKernel as LoadedKernel
    from .records import Metadata as Metadata
    from .records import RepoInfo as RepoInfo
    from .records import VariantAccepted as VariantAccepted
    from .records import VariantRejected as VariantRejected
    from .records import get_kernel_variants as get_kernel_variants
    from .records import get_loaded_kernels as get_loaded_kernels

__version__ = "0.19.1"

_LAYER = ".layer"
"""``kernelhub.layer``: names are imported relative to this package, so a leading dot
climbs to ``kernelhub``."""

_LAZY: dict[str, str] = {
    **dict.fromkeys((
        "CUDAProperties", "Device", "FuncRepository", "KernelizeFallback", "KernelizedFunc",
        "KernelizedLayer", "KernelizedLayers", "LayerRepository", "LocalFuncRepository",
        "LocalLayerRepository", "LockedFuncRepository", "LockedLayerRepository", "Mode",
        "ROCMProperties", "get_kernelized_layers", "register_kernel_mapping",
        "replace_kernel_forward_from_hub", "use_kernel_forward_from_hub",
        "use_kernel_func_from_hub", "use_kernel_mapping", "use_kernelized_func",
    ), _LAYER),
    "kernelize": "layers",
    **dict.fromkeys(("get_kernel", "get_local_kernel", "get_locked_kernel", "has_kernel",
                     "install_kernel", "load_kernel", "local_override"), "load"),
    **dict.fromkeys(("LoadedKernel", "Metadata", "RepoInfo", "VariantAccepted",
                     "VariantRejected", "get_kernel_variants", "get_loaded_kernels"),
                    "records"),
    # Served by the modules of other parts of kernelhub, as they land:
    "Benchmark": ".benchmark",
    "get_kernel_dep": ".deps",
}
"""Public name → the module that defines it (relative to this package; a leading dot:
relative to ``kernelhub``), imported on first use."""

_lazy = LazyNames(__name__, _LAZY)


def __getattr__(name: str) -> object:
    try:
        return _lazy.attribute(name)
    except ModuleNotFoundError as e:
        if name in _LAZY:
            raise AttributeError(
                f"kernelhub does not serve the ecosystem's {name!r} yet ({e.name} is not "
                "part of this kernelhub); install the ecosystem's package (pip install "
                "kernels) to use it") from None
        raise
    except AttributeError:
        raise AttributeError(
            f"kernelhub serves the ecosystem's `kernels` API (its __all__); {name!r} is not "
            "part of it") from None


__dir__ = _lazy.listing

__all__ = sorted([
    "__version__", "Benchmark", "CUDAProperties", "Device", "KernelizeFallback",
    "KernelizedFunc", "KernelizedLayer", "KernelizedLayers", "ROCMProperties",
    "FuncRepository", "LayerRepository", "LoadedKernel", "LocalFuncRepository",
    "LocalLayerRepository", "LockedFuncRepository", "LockedLayerRepository", "Metadata",
    "Mode", "RepoInfo", "VariantAccepted", "VariantRejected", "get_kernel",
    "get_kernel_dep", "get_kernel_variants", "get_kernelized_layers", "get_loaded_kernels",
    "get_local_kernel", "get_locked_kernel", "has_kernel", "install_kernel", "kernelize",
    "load_kernel", "register_kernel_mapping", "replace_kernel_forward_from_hub",
    "use_kernel_forward_from_hub", "use_kernel_func_from_hub", "use_kernel_mapping",
    "use_kernelized_func",
])

