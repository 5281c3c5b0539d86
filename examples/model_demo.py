"""The main job's last step: load the published activation kernel from the hub into a
small model and show that it runs, matches PyTorch and what it costs.

The model is a stack of Llama-style gated MLP blocks; each block's ``act`` starts as the
PyTorch implementation and gets the hub kernel's ``SiluAndMul.forward`` per instance,
which is what ``kernelize`` does for marked layers.
"""

from __future__ import annotations

import time
import types

import kernelhub
import torch
from torch import nn


class SiluAndMul(nn.Module):
    """The PyTorch reference: silu(gate) * up on the two halves of the last dim."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return nn.functional.silu(x[..., :d]) * x[..., d:]


class GatedMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.act = SiluAndMul()
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down_proj(self.act(self.gate_up_proj(x)))


def best_time(fn, x: torch.Tensor, repeat: int = 5) -> float:
    fn(x)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    torch.manual_seed(0)
    start = time.perf_counter()
    activation = kernelhub.get_kernel("kernels-community/activation", version=1)
    load_s = time.perf_counter() - start
    print(f"loaded {activation.__name__} from the hub in {load_s * 1000:.1f} ms")

    model = nn.Sequential(*(GatedMLP(256, 1024) for _ in range(4))).eval()
    x = torch.randn(8, 128, 256)
    with torch.inference_mode():
        reference = model(x)
        hub_forward = activation.layers.SiluAndMul.forward
        for block in model:
            block.act.forward = types.MethodType(hub_forward, block.act)
        result = model(x)
    diff = (result - reference).abs().max().item()
    print(f"model output with hub kernels vs PyTorch: max |diff| = {diff:.3e}")
    if not torch.allclose(result, reference, rtol=1e-5, atol=1e-5):
        raise SystemExit("hub kernel output differs from PyTorch")

    big = torch.randn(2048, 2 * 8192)
    out = torch.empty(2048, 8192)
    eager = best_time(SiluAndMul(), big)
    layer = best_time(activation.layers.SiluAndMul(), big)
    preallocated = best_time(lambda x: activation.silu_and_mul(out, x), big)
    print(f"silu_and_mul 2048x8192 fp32 on {torch.get_num_threads()} threads: eager "
          f"{eager * 1e3:.1f} ms; hub layer {layer * 1e3:.1f} ms ({eager / layer:.1f}x, "
          f"allocates its output); hub op into a preallocated out {preallocated * 1e3:.1f} ms "
          f"({eager / preallocated:.1f}x)")

if __name__ == "__main__":
    main()
