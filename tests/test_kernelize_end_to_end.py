"""The model user's story with layers: a model marks its SiluAndMul layer, maps it to the
published activation kernel, kernelizes for inference on CPU, gets the same numbers as
PyTorch from the real compiled kernel, and gets PyTorch back by kernelizing again
without a mapping."""

from __future__ import annotations

from e2e import Workspace, last_json, run_python, torch_python

KERNELIZE_SILU_AND_MUL = r"""
import json, torch, torch.nn.functional as F
from torch import nn
from kernelhub import (LayerRepository, Mode, kernelize, use_kernel_forward_from_hub,
                       use_kernel_mapping)
from kernelhub.layer import kernel_of

@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, input):
        d = input.shape[-1] // 2
        return F.silu(input[..., :d]) * input[..., d:]

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(64, 256), SiluAndMul(), nn.Linear(128, 64)
    def forward(self, x):
        return self.down(self.act(self.up(x)))

torch.manual_seed(0)
model = MLP().eval()
x = torch.randn(8, 64)
with torch.no_grad():
    expected = model(x)
    mapping = {"SiluAndMul": {"cpu": LayerRepository("kernels-community/activation",
                                                     layer_name="SiluAndMul", version=1)}}
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)
    forward = model.act.forward
    kernel_out = model(x)
    kernelize(model, mode=Mode.INFERENCE)  # no mapping now: PyTorch again
    restored_out = model(x)
print(json.dumps({
    "kernel_module": forward.__func__.__module__,
    "repository": str(kernel_of(model.act)),
    "kernel_err": (kernel_out - expected).abs().max().item(),
    "restored_exact": bool(torch.equal(restored_out, expected)),
    "restored": "forward" not in model.act.__dict__,
}))
"""


def test_kernelize_swaps_silu_and_mul_for_the_published_kernel_and_restores_pytorch(
    published: Workspace,
) -> None:
    proc = run_python(torch_python("2.13"), KERNELIZE_SILU_AND_MUL,
                      published.env(cache="cache-kernelize"))
    result = last_json(proc)
    # The forward that ran is the activation kernel's layer, imported under its unique id.
    assert result["kernel_module"].startswith("_activation_cpu_"), result
    assert result["kernel_module"].endswith(".layers"), result
    assert result["kernel_err"] <= 1e-5, result
    assert result["restored"] and result["restored_exact"], result
    assert result["repository"] == "None", "kernel_of reports PyTorch after restore"
