"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads —
for this pure-Python Triton kernel, a CUDA or XPU machine (its builds are torch-cuda and
torch-xpu; a CPU machine has none to load, and says so).

Workloads: a Llama-7B-shaped MLP activation (intermediate 11008) at a 512-token prefill,
fp16 and bf16, against eager PyTorch in the same dtype (``verify_*``, also the timed
baseline). Inputs are uniform
in [-1, 1) so outputs stay below 1, where the runner's absolute tolerance (1e-2) is wider
than a bf16 rounding step.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

INTERMEDIATE = 11008


def _gated(tokens, dtype, device):
    x = torch.rand(tokens, 2 * INTERMEDIATE, dtype=dtype, device=device) * 2 - 1
    return x, torch.empty(tokens, INTERMEDIATE, dtype=dtype, device=device)


def _reference(x, approximate=None):
    d = x.shape[-1] // 2
    gate = x[..., :d]
    act = F.silu(gate) if approximate is None else F.gelu(gate, approximate=approximate)
    return act * x[..., d:]


class SiluAndMul(Benchmark):
    seed = 42

    def setup_prefill_fp16(self):
        self.x, self.out = _gated(512, torch.float16, self.device)

    def benchmark_prefill_fp16(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_prefill_fp16(self):
        return _reference(self.x)

    def setup_prefill_bf16(self):
        self.x, self.out = _gated(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_prefill_bf16(self):
        return _reference(self.x)


class GeluTanhAndMul(Benchmark):
    seed = 42

    def setup_prefill_bf16(self):
        self.x, self.out = _gated(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.gelu_tanh_and_mul(self.out, self.x)

    def verify_prefill_bf16(self):
        return _reference(self.x, "tanh")
