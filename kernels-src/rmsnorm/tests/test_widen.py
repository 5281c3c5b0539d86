"""bfloat16 products widened to float32 (``_widen``, ``layers.Linear`` and the fused MLP's
prefill path): when they widen (rows, dtype, gradients, the CPU) and that the widened
result is PyTorch's product within bfloat16 rounding (one rounding of a float32 sum)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from rmsnorm import _widen, layers
from rmsnorm._functional import fused_swiglu
from torch import nn

needs_widening = pytest.mark.skipif(
    _widen.NATIVE_BF16, reason="this CPU multiplies bfloat16 natively: nothing is widened")


def _rand(shape, seed: int, scale: float = 1.0, dtype=torch.bfloat16) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator) * scale).to(dtype)




@needs_widening
@pytest.mark.parametrize("rows", [_widen.WIDEN_ROWS, 37, 300])
@pytest.mark.parametrize("features", [64, _widen.BLOCK, _widen.BLOCK + 77])
def test_widened_is_one_rounding_of_the_float32_product(rows, features, product_ulps):
    x, weight = _rand((rows, 192), 0), _rand((features, 192), 1, 192 ** -0.5)
    bias, residual = _rand((features,), 2), _rand((rows, features), 3)
    assert _widen.widens(x, weight)
    for b, r in ((None, None), (bias, None), (None, residual), (bias, residual)):
        got = _widen.linear(x, weight, b, r)
        assert got.dtype == torch.bfloat16 and got.shape == (rows, features)
        assert product_ulps(got, x, weight, b, r) <= 1.0  # one rounding, float32 sum: within 1 ulp
        theirs = F.linear(x, weight, b) if r is None else r + F.linear(x, weight, b)
        torch.testing.assert_close(got, theirs, rtol=2e-2, atol=2e-2)


@needs_widening
def test_leading_dimensions_are_kept():
    x, weight = _rand((2, 5, 3, 64), 0), _rand((96, 64), 1, 0.125)
    got = _widen.linear(x, weight)
    assert got.shape == (2, 5, 3, 96)
    torch.testing.assert_close(got, F.linear(x, weight), rtol=2e-2, atol=2e-2)


@needs_widening
def test_only_bfloat16_products_of_enough_rows_without_gradients_widen():
    weight = _rand((32, 64), 1)
    assert _widen.widens(_rand((_widen.WIDEN_ROWS, 64), 0), weight)
    assert _widen.widens(_rand((2, _widen.WIDEN_ROWS // 2, 64), 0), weight)  # rows, not dim 0
    assert not _widen.widens(_rand((_widen.WIDEN_ROWS - 1, 64), 0), weight)  # a decode step
    assert not _widen.widens(_rand((64, 64), 0, dtype=torch.float32), weight.float())
    assert not _widen.widens(_rand((64, 64), 0, dtype=torch.float16), weight.half())
    assert not _widen.widens(_rand((64, 64), 0), weight.float())  # mixed: PyTorch decides
    trained = weight.clone().requires_grad_()
    assert not _widen.widens(_rand((64, 64), 0), trained)
    with torch.no_grad():
        assert _widen.widens(_rand((64, 64), 0), trained)


def test_what_does_not_widen_is_pytorchs_product_exactly():
    x, weight, bias = _rand((3, 64), 0), _rand((32, 64), 1), _rand((32,), 2)
    x.requires_grad_()  # training keeps PyTorch's product (3 rows would stream otherwise)
    assert torch.equal(_widen.linear(x, weight, bias), F.linear(x, weight, bias))
    x32, w32 = _rand((40, 64), 0, dtype=torch.float32), weight.float()
    assert torch.equal(_widen.linear(x32, w32, bias.float()), F.linear(x32, w32, bias.float()))


def test_the_native_flag_is_the_cpus_avx512_bf16():
    from kernelhub.system import cpu_flags

    flags = cpu_flags()
    if not flags:
        pytest.skip("/proc/cpuinfo cannot be read here")
    assert ("avx512_bf16" in flags) is _widen.NATIVE_BF16


def _linear(features: int, inputs: int, cls: type = nn.Linear, bias: bool = True):
    torch.manual_seed(0)
    return cls(inputs, features, bias=bias).to(torch.bfloat16).eval()


class _Scaled(nn.Linear):
    """A subclass with a forward of its own (as quantised or adapter-wrapped layers have)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return super().forward(input) * 2


@needs_widening
def test_the_linear_layer_widens_prefill_streams_decode_and_keeps_subclasses(product_ulps):
    module = _linear(96, 64)
    prefill, step = _rand((1, 20, 64), 0), _rand((1, 1, 64), 1)
    with torch.no_grad():
        got = layers.Linear.forward(module, prefill)
        assert product_ulps(got, prefill, module.weight, module.bias) <= 1.0
        decoded = layers.Linear.forward(module, step)  # the few-rows op (test_gemv.py)
        assert product_ulps(decoded, step, module.weight, module.bias) <= 1.0
        scaled = _linear(96, 64, _Scaled)
        assert torch.equal(layers.Linear.forward(scaled, prefill), scaled(prefill))


def test_the_linear_layer_keeps_gradients():
    module = _linear(16, 32).train()
    x = _rand((20, 32), 0).requires_grad_()
    layers.Linear.forward(module, x).float().sum().backward()
    assert x.grad is not None and module.weight.grad is not None


@needs_widening
@pytest.mark.parametrize("residual", [False, True])
def test_the_fused_mlp_widens_its_prefill_products(residual):
    hidden, inter, rows = 64, 160, 24
    weights = (_rand((inter, hidden), 1, hidden ** -0.5), _rand((inter, hidden), 2, hidden ** -0.5),
               _rand((hidden, inter), 3, inter ** -0.5))
    x = _rand((1, rows, hidden), 0)
    res = _rand((1, rows, hidden), 4) if residual else None
    with torch.no_grad():
        got = fused_swiglu(x, weights, (None, None, None), res)
        gate, up = F.linear(x, weights[0]), F.linear(x, weights[1])
        theirs = F.linear(F.silu(gate) * up, weights[2])
        if res is not None:
            theirs = res + theirs
    torch.testing.assert_close(got, theirs, rtol=2e-2, atol=2e-2)


@needs_widening
def test_a_tiny_bfloat16_llama_decodes_the_same_tokens_greedily():
    """Every ``nn.Linear`` and MLP of a bfloat16 Llama on this kernel's layers (as the
    Transformers table installs them): the prompt's products widen, decode steps run the
    few-rows op, and greedy decoding gives PyTorch's tokens."""
    import types

    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=352,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()
    prompt = torch.randint(0, 256, (1, 24), generator=torch.Generator().manual_seed(1))
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(prompt, **settings)
        widened = 0
        for module in model.modules():
            if type(module) is nn.Linear:
                module.forward = types.MethodType(layers.Linear.forward, module)
                widened += 1
            elif type(module).__name__ == "LlamaMLP":
                module.forward = types.MethodType(layers.MLP.forward, module)
        assert widened == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer and the lm_head
        got = model.generate(prompt, **settings)
    assert torch.equal(got, expected)


@needs_widening
def test_the_linear_layer_compiles_to_the_same_bits():
    """``can_torch_compile = True``: the block loop traces into one graph (fullgraph)."""
    import types

    module = _linear(300, 64)  # 300 features: a whole block and a partial one
    module.forward = types.MethodType(layers.Linear.forward, module)
    x = _rand((2, 10, 64), 0)
    with torch.no_grad():
        eager = module(x)
        compiled = torch.compile(module, fullgraph=True)(x)
    assert torch.equal(compiled, eager)
