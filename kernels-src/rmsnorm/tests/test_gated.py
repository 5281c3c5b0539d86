"""The gated norm (``rms_norm_gated``, ``layers.RMSNormGated``) against the PyTorch
modules it replaces: Transformers' ``RMSNormGated`` classes written out here as the models
define them (Qwen3.5's silu gate, Kimi Linear's strict-float32 sigmoid gate, Falcon-H1's
grouped norm with the gate before or after), and Transformers' own classes where the
package is importable."""

from __future__ import annotations

import types

import pytest
import rmsnorm
import torch
import torch.nn.functional as F
from rmsnorm import layers
from torch import nn

TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-5},
             torch.float64: {"rtol": 1e-10, "atol": 1e-12},
             torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2}}


class Qwen3_5RMSNormGated(nn.Module):
    """Qwen3.5 / Qwen3-Next / OLMo hybrid: rounds x * rstd to the input dtype first."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.activation = "silu"

    def forward(self, hidden_states: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight * hidden_states.to(input_dtype)
        hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        return hidden_states.to(input_dtype)


class KimiLinearRMSNormGated(nn.Module):
    """Kimi Linear / GLM-5 next / Bailing hybrid: float32 throughout, sigmoid gate."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.activation = "sigmoid"

    def forward(self, hidden_states, gate=None) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.to(torch.float32) * hidden_states
        hidden_states = hidden_states * torch.sigmoid(gate.to(torch.float32))
        return hidden_states.to(input_dtype)


class FalconH1RMSNormGated(nn.Module):
    """Falcon-H1's mixer norm: groups of columns, the gate before or after the norm."""

    def __init__(self, hidden_size, eps=1e-6, n_groups=1, norm_before_gate=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.n_groups = n_groups
        self.norm_before_gate = norm_before_gate

    def forward(self, hidden_states, gate=None):
        input_dtype = hidden_states.dtype
        if not self.norm_before_gate and gate is not None:
            hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        batch_size, seq_len, dim = hidden_states.shape
        hidden_states = hidden_states.to(torch.float32)
        hidden_states = hidden_states.view(batch_size, seq_len, self.n_groups, dim // self.n_groups)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.view(self.n_groups, dim // self.n_groups) * hidden_states
        hidden_states = hidden_states.view(batch_size, seq_len, dim)
        if self.norm_before_gate and gate is not None:
            hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        return hidden_states.to(input_dtype)


class Mamba2RMSNormGated(nn.Module):
    """Mamba-2's: gates first, and only its code says so (no attribute does)."""

    def __init__(self, hidden_size, group_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.group_size = group_size

    def forward(self, hidden_states, gate=None):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        if gate is not None:
            hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        *prefix, last = hidden_states.shape
        grouped = hidden_states.view(*prefix, last // self.group_size, self.group_size)
        grouped = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * grouped.view(*prefix, last).to(input_dtype)


def _swap(module: nn.Module) -> nn.Module:
    """What kernelize does: the layer's forward runs on the model's instance."""
    module.forward = types.MethodType(layers.RMSNormGated.forward, module)
    return module


def _data(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * 2).to(dtype)


def _weights(module: nn.Module, dtype: torch.dtype) -> nn.Module:
    with torch.no_grad():
        module.weight.copy_(1 + 0.5 * _data(module.weight.shape, torch.float64, 7))
    return module.to(dtype)


# (rows shape, hidden, group size, norm before gate, activation, gated)
CASES = [((4, 37), 128, 0, True, "silu", True),       # Qwen3.5's head_v_dim
         ((3, 5), 80, 0, True, "sigmoid", True),      # a row not a multiple of the vector
         ((2, 9), 256, 64, False, "silu", True),      # Mamba-2 order, four groups
         ((2, 9), 96, 32, True, "silu", True),
         ((7,), 13, 0, True, "silu", False),          # no gate: a plain norm
         ((1, 1), 1, 0, True, "sigmoid", True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_op_matches_its_reference(target, case, dtype):
    if target != "cpu":
        pytest.skip("rms_norm_gated is a CPU op")
    rows, hidden, group, before, activation, gated = case
    x = _data((*rows, hidden), dtype).to(target)
    gate = _data((*rows, hidden), dtype, 1).to(target) if gated else None
    weight = (1 + 0.5 * _data((hidden,), torch.float64, 2)).to(dtype).to(target)
    out = rmsnorm.rms_norm_gated(x, gate, weight, 1e-6, group, before, activation)
    expected = rmsnorm._gated.reference(
        *(t.double() if t is not None else None for t in (x, gate, weight)), 1e-6, group,
        before, activation)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("make", [lambda: Qwen3_5RMSNormGated(128),
                                  lambda: KimiLinearRMSNormGated(128, eps=1e-5),
                                  lambda: FalconH1RMSNormGated(256, n_groups=4),
                                  lambda: FalconH1RMSNormGated(256, n_groups=2,
                                                               norm_before_gate=False)],
                         ids=["qwen3_5", "kimi_linear", "falcon_h1", "falcon_h1_gate_first"])
def test_layer_matches_the_module_it_replaces(make, dtype):
    module = _weights(make(), dtype)
    hidden = module.weight.shape[0]
    x, gate = _data((2, 19, hidden), dtype), _data((2, 19, hidden), dtype, 1)
    with torch.no_grad():
        expected = module(x, gate)
        out = _swap(module)(x, gate)
    torch.testing.assert_close(out, expected, **TOLERANCE[dtype])


def test_layer_runs_the_kernel_where_the_attributes_say_the_variant(monkeypatch):
    calls = []
    real = layers.rms_norm_gated
    monkeypatch.setattr(layers, "rms_norm_gated", lambda *a: calls.append(a) or real(*a))
    x, gate = _data((3, 128), torch.float32), _data((3, 128), torch.float32, 1)
    with torch.no_grad():
        _swap(Qwen3_5RMSNormGated(128))(x, gate)
        assert len(calls) == 1
        # Mamba-2's order is only in its code, so it keeps its own forward (and its result).
        mamba = _weights(Mamba2RMSNormGated(128, group_size=32), torch.float32)
        expected = mamba(x, gate)
        torch.testing.assert_close(_swap(mamba)(x, gate), expected)
        assert len(calls) == 1
        # A weight of another dtype than the activations: the model's own formula.
        qwen = Qwen3_5RMSNormGated(128)
        torch.testing.assert_close(_swap(qwen)(x.bfloat16(), gate.bfloat16()),
                                   Qwen3_5RMSNormGated(128)(x.bfloat16(), gate.bfloat16()))
        assert len(calls) == 1


def test_layer_matches_transformers_own_classes():
    qwen3_5 = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
    x, gate = _data((2, 7, 128), torch.float32), _data((2, 7, 128), torch.float32, 1)
    for cls in (qwen3_5.Qwen3_5RMSNormGated, kimi.KimiLinearRMSNormGated):
        module = _weights(cls(128, eps=1e-6), torch.float32)
        with torch.no_grad():
            expected = module(x, gate)
            torch.testing.assert_close(_swap(module)(x, gate), expected, rtol=1e-5, atol=1e-5)


GRAD_CASES = [(0, True, "silu"), (32, False, "sigmoid"), (16, True, "sigmoid"),
              (32, False, "silu")]


@pytest.mark.parametrize("gated", [True, False], ids=["gate", "no_gate"])
@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_gradcheck_in_float64(cpu_kernels, case, gated):
    group, before, activation = case
    x = _data((3, 64), torch.float64).requires_grad_()
    gate = _data((3, 64), torch.float64, 1).requires_grad_() if gated else None
    weight = (1 + 0.5 * _data((64,), torch.float64, 2)).requires_grad_()
    torch.autograd.gradcheck(
        lambda x, g, w: rmsnorm.rms_norm_gated(x, g, w, 1e-6, group, before, activation),
        (x, gate, weight))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_fused_backward_matches_the_recomputed_one(target, case, dtype):
    """dx, dgate and dweight of the C++ backward against autograd through the float64
    PyTorch computation, rounded once to the dtype (every loop copy)."""
    if target != "cpu":
        pytest.skip("rms_norm_gated is a CPU op")
    rows, hidden, group, before, activation, gated = case
    x = _data((*rows, hidden), dtype)
    gate = _data((*rows, hidden), dtype, 1) if gated else None
    weight = (1 + 0.5 * _data((hidden,), torch.float64, 2)).to(dtype)
    grad = _data((*rows, hidden), dtype, 3)
    inputs = [t.detach().requires_grad_() if t is not None else None for t in (x, gate, weight)]
    rmsnorm.rms_norm_gated(*inputs, 1e-6, group, before, activation).backward(grad)
    wide = [t.detach().double().requires_grad_() if t is not None else None
            for t in (x, gate, weight)]
    rmsnorm._gated.reference(*wide, 1e-6, group, before, activation).backward(grad.double())
    for name, got, want in zip(("x", "gate", "weight"), inputs, wide, strict=True):
        if got is None:
            continue
        assert got.grad.dtype == dtype and got.grad.shape == got.shape
        expected = want.grad.to(dtype).double()
        tolerance = TOLERANCE[dtype]
        if name == "weight" and dtype == torch.float32:  # a float sum over every row
            tolerance = {"rtol": 1e-4, "atol": 1e-4}
        torch.testing.assert_close(got.grad.double(), expected, **tolerance,
                                   msg=lambda m, name=name: f"grad of {name}: {m}")


@pytest.mark.parametrize("gated", [True, False], ids=["gate", "no_gate"])
def test_backward_opcheck(cpu_kernels, gated):
    x, grad = _data((3, 64), torch.float32), _data((3, 64), torch.float32, 3)
    gate = _data((3, 64), torch.float32, 1) if gated else None
    weight = 1 + 0.5 * _data((64,), torch.float32, 2)
    torch.library.opcheck(rmsnorm._ops.ops.rms_norm_gated_backward,
                          (grad, x, gate, weight, 1e-6, 32, False, "silu"))


def test_layer_trains_like_the_module(cpu_kernels):
    module = _weights(Qwen3_5RMSNormGated(128), torch.float32)
    x = _data((4, 128), torch.float32).requires_grad_()
    gate = _data((4, 128), torch.float32, 1).requires_grad_()
    module(x, gate).square().sum().backward()
    expected = [t.grad.clone() for t in (x, gate, module.weight)]
    for t in (x, gate, module.weight):
        t.grad = None
    _swap(module)(x, gate).square().sum().backward()
    for got, want in zip((x.grad, gate.grad, module.weight.grad), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_torch_compile_fullgraph(cpu_kernels):
    x, gate = _data((5, 128), torch.float32), _data((5, 128), torch.float32, 1)
    weight = torch.ones(128)
    compiled = torch.compile(rmsnorm.rms_norm_gated, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, gate, weight, 1e-6), rmsnorm.rms_norm_gated(
        x, gate, weight, 1e-6))


def test_torch_compile_fullgraph_backward(cpu_kernels):
    """The fused backward traces (its fake) and gives the eager op's gradients."""
    leaves = [_data((5, 128), torch.float32, seed).requires_grad_() for seed in (0, 1)]
    leaves.append(torch.ones(128, requires_grad=True))
    compiled = torch.compile(lambda *t: rmsnorm.rms_norm_gated(*t, 1e-6), fullgraph=True,
                             backend="aot_eager")
    compiled(*leaves).square().sum().backward()
    expected = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    rmsnorm.rms_norm_gated(*leaves, 1e-6).square().sum().backward()
    for got, want in zip((t.grad for t in leaves), expected, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group_size": 48}, "group_size 48 must divide"),
    ({"activation": "gelu"}, "activation must be 'silu' or 'sigmoid'"),
])
def test_bad_arguments_are_refused_in_one_line(cpu_kernels, kwargs, message):
    x = torch.ones(2, 128)
    with pytest.raises(RuntimeError, match=message):
        rmsnorm.rms_norm_gated(x, x, torch.ones(128), 1e-6, **kwargs)
