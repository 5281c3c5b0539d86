"""Which devices the tests run on: the variant under test and this machine decide.

A built variant holds one backend (a ``cpu`` build registers CPU kernels, a ``cu130``
build CUDA kernels, ...). CPU is always a parameter, and so is every device the variant
has kernels for; each runs where the variant has its kernels and the machine has the
device, and is skipped with the reason otherwise (a ``cu130`` variant on a machine
without a GPU: CPU skipped, no CPU kernels; CUDA skipped, no device). Devices the
variant has no kernels for are not parameters at all, so a CPU build's report is not
full of MPS/XPU skips. CPU runs once per compiled loop copy (DEFAULT/AVX2/AVX512/AVX512_BF16) the
CPU supports.

Parametrization happens here (``pytest_generate_tests``) because the kernel module
(``gated_delta_rule``) is registered by the ``kernelhub.testing`` plugin at configure time,
after this file is imported; every import of it is inside a function.
"""

from __future__ import annotations

import pytest
import torch

DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS", "xpu": "XPU"}
CPU_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
GPU_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
"""The kernels take these (float64 is rejected with a message)."""


def _has_kernels(device: str) -> bool:
    import gated_delta_rule

    name = gated_delta_rule._ops.add_op_namespace_prefix("chunk_gated_delta_rule_fwd")
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, DISPATCH_KEYS[device])


def _machine_has(device: str) -> bool:
    if device == "cpu":
        return True
    if device == "cuda":  # ROCm builds of torch report AMD GPUs here too
        return torch.cuda.is_available()
    if device == "mps":
        return torch.backends.mps.is_available()
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def skip_reason(device: str) -> str | None:
    """Why `device` is not tested here, or None when it is."""
    if not _has_kernels(device):
        return f"the variant under test has no {DISPATCH_KEYS[device]} kernels"
    if not _machine_has(device):
        return f"no {device} device on this machine"
    return None


def _capabilities() -> list[str]:
    """The compiled CPU loop copies this CPU can run."""
    import gated_delta_rule

    original = gated_delta_rule.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            gated_delta_rule.set_cpu_capability(capability)
        except ValueError:  # not on this CPU
            continue
        available.append(capability)
    gated_delta_rule.set_cpu_capability(original)
    return available


def _tested_devices() -> list[str]:
    return [d for d in DISPATCH_KEYS if d == "cpu" or _has_kernels(d)]


def _targets() -> list:
    """(device, cpu capability or None) pairs, skipped ones marked with their reason."""
    targets = []
    for device in _tested_devices():
        reason = skip_reason(device)
        if device == "cpu" and reason is None:
            targets += [pytest.param(("cpu", c), id=f"cpu-{c}") for c in _capabilities()]
            continue
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        targets.append(pytest.param((device, None), id=device, marks=marks))
    return targets


def _devices() -> list:
    return [
        pytest.param(device, id=device, marks=[pytest.mark.skip(reason=r)] if r else [])
        for device in _tested_devices()
        for r in [skip_reason(device)]
    ]


def _with_dtypes(params: list, dtypes_override: tuple | None) -> list:
    """Each device param crossed with the dtypes that device's kernels support."""
    combined = []
    for param in params:
        (value,) = param.values
        device = value[0] if isinstance(value, tuple) else value
        dtypes = dtypes_override or (CPU_DTYPES if device == "cpu" else GPU_DTYPES)
        for dtype in dtypes:
            if dtype not in (CPU_DTYPES if device == "cpu" else GPU_DTYPES):
                continue
            combined.append(
                pytest.param(value, dtype, id=f"{param.id}-{str(dtype)[6:]}", marks=param.marks)
            )
    return combined


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``target`` (device + CPU loops) or ``device``, and ``dtype`` with it.

    A test may narrow the dtypes with ``@pytest.mark.dtypes(torch.float32, ...)``.
    """
    names = metafunc.fixturenames
    key = "target" if "target" in names else "device" if "device" in names else None
    if key is None:
        return
    params = _targets() if key == "target" else _devices()
    if "dtype" not in names:
        metafunc.parametrize(key, params, indirect=key == "target")
        return
    marker = metafunc.definition.get_closest_marker("dtypes")
    combined = _with_dtypes(params, marker.args if marker else None)
    metafunc.parametrize((key, "dtype"), combined, indirect=[key] if key == "target" else [])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dtypes(*dtypes): the dtypes a device test runs with")


@pytest.fixture
def target(request: pytest.FixtureRequest):
    """The device to run on; on CPU, with the requested loop copy switched in."""
    import gated_delta_rule

    device, capability = request.param
    if capability is None:
        yield device
        return
    previous = gated_delta_rule.set_cpu_capability(capability)
    yield device
    gated_delta_rule.set_cpu_capability(previous)
