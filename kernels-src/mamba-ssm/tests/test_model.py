"""A tiny Mamba-2 model with these kernels in place of Transformers' PyTorch
fallbacks (the build under test, placed as kernelize places function kernels)
gives PyTorch's logits, at prefill and through cached greedy decoding."""

from __future__ import annotations

import types

import pytest
import torch

FUNCTIONS = ("causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
             "selective_state_update")


@pytest.fixture
def tiny_mamba2():
    transformers = pytest.importorskip("transformers")
    config = transformers.Mamba2Config(
        vocab_size=64, hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16,
        expand=2, state_size=16, n_groups=2, chunk_size=16, conv_kernel=4)
    torch.manual_seed(0)
    return transformers.Mamba2ForCausalLM(config).eval()


def _kernelize(model: torch.nn.Module) -> None:
    """Put the build's functions where kernelize puts function kernels: the forward of
    each function module Transformers 5.25 attaches to a mixer (``_kernel_funcs``).
    (Through kernelhub's KernelConfig this needs the table to list these names as
    functions; the table is owned elsewhere, see the README.)"""
    import mamba_ssm

    replaced = set()
    for module in model.modules():
        for key, func in getattr(module, "_kernel_funcs", {}).items():
            name = getattr(type(func), "kernel_layer_name", None) or key
            if name in FUNCTIONS:
                kernel = getattr(mamba_ssm, name)
                # a bound method, as Transformers' call path expects of `forward`
                func.forward = types.MethodType(
                    lambda _self, *a, _k=kernel, **kw: _k(*a, **kw), func)
                replaced.add(name)
    assert replaced == set(FUNCTIONS), f"the model attaches {replaced}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_tiny_mamba2_prefill_matches_pytorch(tiny_mamba2, dtype) -> None:
    model = tiny_mamba2.to(dtype)
    ids = torch.randint(0, 64, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids).logits.float()
        _kernelize(model)
        got = model(ids).logits.float()
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    scale = expected.abs().max()
    torch.testing.assert_close(got / scale, expected / scale, atol=tol, rtol=tol)


def test_tiny_mamba2_cached_decoding_matches_pytorch(tiny_mamba2) -> None:
    ids = torch.randint(0, 64, (1, 21), generator=torch.Generator().manual_seed(2))
    kwargs = dict(max_new_tokens=6, do_sample=False, output_logits=True,
                  return_dict_in_generate=True)
    with torch.no_grad():
        expected = tiny_mamba2.generate(ids, **kwargs)
        _kernelize(tiny_mamba2)
        got = tiny_mamba2.generate(ids, **kwargs)
    assert torch.equal(got.sequences, expected.sequences)
    for g, e in zip(got.logits, expected.logits, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
