"""Which devices and CPU loops the tests run on: the variant under test and this
machine decide (the pattern of kernels-src/activation/tests/conftest.py).

CPU is always a parameter, once per compiled loop copy (DEFAULT, AVX2, AVX512,
AVX512_BF16) this CPU supports; CUDA is one where the variant has CUDA kernels,
skipped without a GPU. The kernel module (``mamba_ssm``) is registered by the
``kernelhub.testing`` plugin at configure time, so every import of it is inside a
function.
"""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}
DTYPES = (torch.float32, torch.bfloat16)


def _has_kernels(device: str) -> bool:
    import mamba_ssm

    name = mamba_ssm._ops.add_op_namespace_prefix("ssd_scan")
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, DISPATCH_KEYS[device])


def _capabilities() -> list[str]:
    import mamba_ssm

    original = mamba_ssm.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            mamba_ssm.set_cpu_capability(capability)
        except RuntimeError:
            continue
        available.append(capability)
    mamba_ssm.set_cpu_capability(original)
    return available


def _targets() -> list:
    targets = []
    if _has_kernels("cpu"):
        targets += [pytest.param(("cpu", c), id=f"cpu-{c}") for c in _capabilities()]
    else:  # a GPU build still runs its PyTorch fallbacks on the CPU
        targets.append(pytest.param(("cpu", None), id="cpu-fallback"))
    if _has_kernels("cuda"):
        marks = [] if torch.cuda.is_available() else [
            pytest.mark.skip(reason="no cuda device on this machine")]
        targets.append(pytest.param(("cuda", None), id="cuda", marks=marks))
    return targets


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``target`` (device + CPU loops), crossed with ``dtype`` when asked."""
    if "target" not in metafunc.fixturenames:
        return
    targets = _targets()
    if "dtype" not in metafunc.fixturenames:
        metafunc.parametrize("target", targets, indirect=True)
        return
    combined = [
        pytest.param(t.values[0], dtype, id=f"{t.id}-{str(dtype)[6:]}", marks=t.marks)
        for t in targets for dtype in DTYPES
    ]
    metafunc.parametrize(("target", "dtype"), combined, indirect=["target"])


@pytest.fixture
def target(request: pytest.FixtureRequest):
    """The device to run on; on CPU, with the requested loop copy switched in."""
    import mamba_ssm

    device, capability = request.param
    if capability is None:
        yield device
        return
    previous = mamba_ssm.set_cpu_capability(capability)
    yield device
    mamba_ssm.set_cpu_capability(previous)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Per-dtype tolerance against a float64 oracle (bf16 keeps 8 mantissa bits)."""
    return {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 3e-2, "rtol": 3e-2}


# ---- independent oracles in float64, written from the definitions (a loop over
# the tokens), not from the kernels' own PyTorch code ----


def conv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, silu: bool) -> torch.Tensor:
    width = w.shape[-1]
    xp = F.pad(x.double(), (width - 1, 0))
    out = sum(w.double()[None, :, k, None] * xp[..., k: k + x.shape[-1]] for k in range(width))
    if bias is not None:
        out = out + bias.double()[None, :, None]
    return F.silu(out) if silu else out


def ssd(x, dt, A, B, C, D=None, z=None, init=None):
    """x [b,l,h,p], dt [b,l,h] (final, after bias/softplus), A [h], B/C [b,l,g,n]."""
    b, seqlen, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    rep = h // g
    S = init.double().clone() if init is not None else torch.zeros(b, h, p, n, dtype=torch.float64)
    ys = []
    for t in range(seqlen):
        Bt = B[:, t].double().repeat_interleave(rep, 1)
        Ct = C[:, t].double().repeat_interleave(rep, 1)
        d = dt[:, t].double()
        S = S * torch.exp(d * A.double())[..., None, None] + (d[..., None] * x[:, t].double())[..., None] * Bt[:, :, None, :]
        y = torch.einsum("bhpn,bhn->bhp", S, Ct)
        if D is not None:
            y = y + (D.double()[:, None] if D.dim() == 1 else D.double()) * x[:, t].double()
        if z is not None:
            y = y * F.silu(z[:, t].double())
        ys.append(y)
    return torch.stack(ys, 1), S


def selective_scan(u, delta, A, B, C, D=None, z=None):
    """u/delta [b,d,l]; A [d,n]; B/C [b,g,n,l]."""
    b, d, seqlen = u.shape
    rep = d // B.shape[1]
    Bh = B.double().repeat_interleave(rep, 1)
    Ch = C.double().repeat_interleave(rep, 1)
    s = torch.zeros(b, d, A.shape[1], dtype=torch.float64)
    ys = []
    for t in range(seqlen):
        dl = delta[..., t].double()
        s = torch.exp(dl[..., None] * A.double()) * s + (dl * u[..., t].double())[..., None] * Bh[..., t]
        ys.append((s * Ch[..., t]).sum(-1))
    y = torch.stack(ys, -1)
    if D is not None:
        y = y + D.double()[:, None] * u.double()
    if z is not None:
        y = y * F.silu(z.double())
    return y, s


@pytest.fixture
def ref() -> types.SimpleNamespace:
    """The oracles and tolerances (a fixture: tests import no sibling module)."""
    return types.SimpleNamespace(conv=conv, ssd=ssd, selective_scan=selective_scan,
                                 tolerance=tolerance)
