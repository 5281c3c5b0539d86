"""The moe kernel's tests: CPU tests need a variant with CPU kernels, CUDA tests a variant
with CUDA kernels and a GPU (skipped otherwise, never imitated).

The kernel module (``moe``) is registered by the ``kernelhub.testing`` plugin at
configure time, after this file is imported, so tests import it inside functions.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch


@pytest.fixture
def moe() -> ModuleType:
    module = importlib.import_module("moe")
    name = module._ops.add_op_namespace_prefix("moe_experts")
    if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"):
        pytest.skip("the variant under test has no CPU kernels")
    return module


@pytest.fixture
def moe_cuda() -> ModuleType:
    module = importlib.import_module("moe")
    name = module._ops.add_op_namespace_prefix("moe_experts")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"):
        pytest.skip("the variant under test has no CUDA kernels")
    return module
