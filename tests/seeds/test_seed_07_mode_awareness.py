"""SEEDS 7 — mode awareness: eval() → inference kernels, train() → training kernels with
gradients; explicit ``kernelize(model, mode=…)`` including TRAINING | TORCH_COMPILE."""

from __future__ import annotations

import torch
from kernelhub.integrations.transformers import kernelize
from kernelhub.layer import Mode
from seeds.seedkit import ids, kernels_in, load, pytorch, require_kernel


def test_train_and_eval_switch_kernels(hub_env, model_dirs):
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert any(n.endswith("act_fn") for n in kernels_in(model))  # inference: SiLU kernel
    model.train()  # the activation kernel has no backward: training keeps PyTorch's SiLU
    assert not any(n.endswith("act_fn") for n in kernels_in(model))
    model.eval()
    assert any(n.endswith("act_fn") for n in kernels_in(model))


def test_training_gradients_match_pytorch(hub_env, model_dirs):
    require_kernel("kernels-community/rmsnorm")
    reference = pytorch(model_dirs["qwen3"]).train()
    model = load(model_dirs["qwen3"], use_kernels=True).train()
    assert any("rmsnorm" in r for r in kernels_in(model).values())
    for m in (reference, model):
        m(ids(), labels=ids()).loss.backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5, msg=name)


def test_explicit_training_compile_mode_has_no_graph_breaks(hub_env, model_dirs):
    require_kernel("kernels-community/rmsnorm")
    model = load(model_dirs["qwen3"], use_kernels=True).train()
    kernelize(model, mode=Mode.TRAINING | Mode.TORCH_COMPILE)
    assert any("rmsnorm" in r for r in kernels_in(model).values())
    explanation = torch._dynamo.explain(model.model.norm)(torch.randn(2, 5, 64))
    assert explanation.graph_break_count == 0, explanation.break_reasons
