"""Which devices the tests run on: the variant under test and this machine decide.

A built variant holds one backend: the ``cpu`` build registers CPU kernels, the ``cu130``
(or ROCm) build CUDA kernels. Each device runs where the variant has its kernels and the
machine has the device, and is skipped with the reason otherwise. Parametrization happens
in ``pytest_generate_tests`` because the kernel module is registered by the
``kernelhub.testing`` plugin at configure time, after this file is imported.
"""

from __future__ import annotations

import pytest
import torch

DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}  # ROCm torch reports AMD GPUs as "cuda"


def _skip_reason(device: str) -> str | None:
    import liger_kernels

    name = liger_kernels._ops.add_op_namespace_prefix("rms_norm")
    if not torch._C._dispatch_has_kernel_for_dispatch_key(name, DISPATCH_KEYS[device]):
        return f"the variant under test has no {DISPATCH_KEYS[device]} kernels"
    if device == "cuda" and not torch.cuda.is_available():
        return "no cuda device on this machine"
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        params = []
        for device in DISPATCH_KEYS:
            reason = _skip_reason(device)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param(device, id=device, marks=marks))
        metafunc.parametrize("device", params)
