"""Which devices the rotary tests run on: the variant under test and this machine decide.

A built variant holds one backend: a ``cpu`` build registers CPU kernels, a ``cu130``
(or ROCm) build CUDA kernels. CPU is always a parameter, and so is CUDA when the variant
has CUDA kernels; each runs where the variant has its kernels and the machine has the
device, and is skipped with the reason otherwise. CPU runs once per compiled loop copy
(DEFAULT/AVX2/AVX512) this CPU supports.

Tests take ``target`` (device, with the CPU loop copy switched in) or ``device`` (CPU
once). Parametrization happens in ``pytest_generate_tests`` because the kernel module
(``rotary``) is registered by the ``kernelhub.testing`` plugin at configure time, after
this file is imported; every import of it is inside a function.
"""

from __future__ import annotations

import pytest
import torch

DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}  # ROCm torch reports AMD GPUs as "cuda"


def _has_kernels(device: str) -> bool:
    import rotary

    name = rotary._ops.add_op_namespace_prefix("rotary")
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, DISPATCH_KEYS[device])


def _skip_reason(device: str) -> str | None:
    """Why `device` is not tested here, or None when it is."""
    if not _has_kernels(device):
        return f"the variant under test has no {DISPATCH_KEYS[device]} kernels"
    if device == "cuda" and not torch.cuda.is_available():
        return "no cuda device on this machine"
    return None


def _capabilities() -> list[str]:
    """The compiled CPU loop copies this CPU can run."""
    import rotary

    original = rotary.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512"):
        try:
            rotary.set_cpu_capability(capability)
        except RuntimeError:
            continue
        available.append(capability)
    rotary.set_cpu_capability(original)
    return available


def _params(with_capabilities: bool) -> list:
    params = []
    for device in DISPATCH_KEYS:
        if device != "cpu" and not _has_kernels(device):
            continue  # not built for it: no parameter, rather than a skip per test
        reason = _skip_reason(device)
        if device == "cpu" and reason is None and with_capabilities:
            params += [pytest.param(("cpu", c), id=f"cpu-{c}") for c in _capabilities()]
            continue
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        value = (device, None) if with_capabilities else device
        params.append(pytest.param(value, id=device, marks=marks))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``target`` (device + CPU loop copy) or ``device``."""
    if "target" in metafunc.fixturenames:
        metafunc.parametrize("target", _params(with_capabilities=True), indirect=True)
    elif "device" in metafunc.fixturenames:
        metafunc.parametrize("device", _params(with_capabilities=False))


@pytest.fixture
def target(request: pytest.FixtureRequest):
    """The device to run on; on CPU, with the requested loop copy switched in."""
    import rotary

    device, capability = request.param
    if capability is None:
        yield device
        return
    previous = rotary.set_cpu_capability(capability)
    yield device
    rotary.set_cpu_capability(previous)
