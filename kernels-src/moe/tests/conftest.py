"""The moe kernel's tests run on the CPU variant (the only backend built so far).

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
