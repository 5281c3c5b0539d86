"""Which devices the tests run on: the variant under test and this machine decide.

A built variant holds one backend: the ``cpu`` build registers CPU kernels, the
``cu130`` (or ROCm) build CUDA kernels. CPU is always a parameter, and so is CUDA
when the variant has CUDA kernels; each runs where the variant has its kernels
and the machine has the device, and is skipped with the reason otherwise (a
``cu130`` variant on a machine without a GPU: CPU skipped, no CPU kernels; CUDA
skipped, no device). CPU runs once per compiled loop copy (DEFAULT/AVX2/AVX512/AVX512_BF16)
the CPU supports.

Parametrization happens in ``pytest_generate_tests`` because the kernel module
is registered by the ``kernelhub.testing`` plugin at configure time, after this
file is imported; every import of it is inside a function.
"""

from __future__ import annotations

import importlib

import pytest
import torch

KERNEL = "rmsnorm"
PROBE_OP = "rms_norm"
"""An op every backend of the kernel implements: its dispatch entry says which are built."""
DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}


def _kernel():
    return importlib.import_module(KERNEL)


def has_kernels(device: str) -> bool:
    """Whether the variant under test registered kernels for `device`."""
    name = _kernel()._ops.add_op_namespace_prefix(PROBE_OP)
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, DISPATCH_KEYS[device])


def skip_reason(device: str) -> str | None:
    """Why `device` is not tested here, or None when it is."""
    if not has_kernels(device):
        return f"the variant under test has no {DISPATCH_KEYS[device]} kernels"
    if device == "cuda" and not torch.cuda.is_available():  # ROCm torch reports AMD GPUs here
        return "no cuda device on this machine"
    return None


def _capabilities() -> list[str]:
    """The compiled CPU loop copies this CPU can run."""
    kernel = _kernel()
    original = kernel.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            kernel.set_cpu_capability(capability)
        except RuntimeError:
            continue
        available.append(capability)
    kernel.set_cpu_capability(original)
    return available


def _devices() -> list[str]:
    return [d for d in DISPATCH_KEYS if d == "cpu" or has_kernels(d)]


def _param(value, id_: str, reason: str | None):
    return pytest.param(value, id=id_, marks=[pytest.mark.skip(reason=reason)] if reason else [])


def _targets() -> list:
    """(device, cpu capability or None) pairs; skipped ones carry their reason."""
    targets = []
    for device in _devices():
        reason = skip_reason(device)
        if device == "cpu" and reason is None:
            targets += [pytest.param(("cpu", c), id=f"cpu-{c}") for c in _capabilities()]
        else:
            targets.append(_param((device, None), device, reason))
    return targets


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``target`` (device + CPU loop copy) or ``device`` (device only)."""
    names = metafunc.fixturenames
    if "target" in names:
        metafunc.parametrize("target", _targets(), indirect=True)
    elif "device" in names:
        params = [_param(d, d, skip_reason(d)) for d in _devices()]
        metafunc.parametrize("device", params)


@pytest.fixture
def target(request: pytest.FixtureRequest):
    """The device to run on; on CPU, with the requested loop copy switched in."""
    device, capability = request.param
    if capability is None:
        yield device
        return
    kernel = _kernel()
    previous = kernel.set_cpu_capability(capability)
    yield device
    kernel.set_cpu_capability(previous)


@pytest.fixture
def cpu_kernels() -> None:
    """For tests of the CPU loops themselves: skipped on a variant without them."""
    reason = skip_reason("cpu")
    if reason:
        pytest.skip(reason)


def _exact_product(x, weight, bias=None, residual=None) -> torch.Tensor:
    """``x @ weight.T`` (+ bias) (+ residual) in float64: the value a product summed in
    float32 and rounded once must land next to."""
    out = x.double() @ weight.double().t()
    if bias is not None:
        out = out + bias.double()
    if residual is not None:
        out = out + residual.double()
    return out


def _product_ulps(got: torch.Tensor, x, weight, bias=None, residual=None) -> float:
    """Largest error of a bfloat16 product ``got`` in units of bfloat16's spacing at the
    exact value: one rounding of a float32 sum stays within 1."""
    exact = _exact_product(x, weight, bias, residual)
    spacing = exact.abs().clamp_min(1e-2) * 2.0 ** -7
    return float(((got.double() - exact).abs() / spacing).max())


@pytest.fixture
def exact_product():
    """The float64 product (test_gemv.py and test_widen.py check against it)."""
    return _exact_product


@pytest.fixture
def product_ulps():
    """A bfloat16 product's error in bfloat16 ulps (test_gemv.py and test_widen.py)."""
    return _product_ulps
