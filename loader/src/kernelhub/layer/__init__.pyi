# The public names of kernelhub.layer, each with the module that defines it: the one table
# of them. Type checkers read this stub; at run time __init__.py serves the same names,
# each imported on first use (kernelhub.lazy_names). One line per name.
from ..system import runtime_device as runtime_device
from .autotune import autotune_report as autotune_report
from .autotune import forget_decisions as forget_decisions
from .autotune import format_report as format_report
from .autotune import verification_report as verification_report
from .decorators import replace_kernel_forward_from_hub as replace_kernel_forward_from_hub
from .decorators import use_kernel_forward_from_hub as use_kernel_forward_from_hub
from .decorators import use_kernel_func_from_hub as use_kernel_func_from_hub
from .decorators import use_kernelized_func as use_kernelized_func
from .kernelize import KernelizeError as KernelizeError
from .kernelize import LayerValidationError as LayerValidationError
from .kernelize import clear_layer_cache as clear_layer_cache
from .kernelize import install_forward as install_forward
from .kernelize import kernel_of as kernel_of
from .kernelize import kernelize as kernelize
from .kernelize import restore_forward as restore_forward
from .kernelize import validate_layer as validate_layer
from .mapping import MODE_FALLBACK_ORDER as MODE_FALLBACK_ORDER
from .mapping import CUDAProperties as CUDAProperties
from .mapping import Device as Device
from .mapping import Mode as Mode
from .mapping import ROCMProperties as ROCMProperties
from .mapping import get_kernel_mapping as get_kernel_mapping
from .mapping import normalize_mapping as normalize_mapping
from .mapping import register_kernel_mapping as register_kernel_mapping
from .mapping import unsupported_reason as unsupported_reason
from .mapping import use_kernel_mapping as use_kernel_mapping
from .repos import FuncRepository as FuncRepository
from .repos import LayerRepository as LayerRepository
from .repos import LocalFuncRepository as LocalFuncRepository
from .repos import LocalLayerRepository as LocalLayerRepository
from .repos import LockedFuncRepository as LockedFuncRepository
from .repos import LockedLayerRepository as LockedLayerRepository
