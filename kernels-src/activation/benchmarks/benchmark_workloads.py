"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads are a Llama-7B-shaped MLP activation (intermediate 11008, input 2 x 11008) at
one decode token and a 512-token prefill, fp32 and bf16; each is checked against eager
PyTorch in the same dtype (``verify_*``), which is also the timed baseline: what a model
runs without the kernel. Inputs are uniform in [-1, 1) so outputs stay below 1, where the
runner's absolute tolerance (1e-2) is wider than a few bf16 rounding steps: timing does
not depend on the values.
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


def _silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def _gelu_tanh_and_mul(x):
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]


class SiluAndMul(Benchmark):
    seed = 42

    def setup_decode_fp32(self):
        self.x, self.out = _gated(1, torch.float32, self.device)

    def benchmark_decode_fp32(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_decode_fp32(self):
        return _silu_and_mul(self.x)

    def setup_prefill_fp32(self):
        self.x, self.out = _gated(512, torch.float32, self.device)

    def benchmark_prefill_fp32(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_prefill_fp32(self):
        return _silu_and_mul(self.x)

    def setup_prefill_bf16(self):
        self.x, self.out = _gated(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_prefill_bf16(self):
        return _silu_and_mul(self.x)


class GeluTanhAndMul(Benchmark):
    seed = 42

    def setup_prefill_fp32(self):
        self.x, self.out = _gated(512, torch.float32, self.device)

    def benchmark_prefill_fp32(self):
        self.kernel.gelu_tanh_and_mul(self.out, self.x)

    def verify_prefill_fp32(self):
        return _gelu_tanh_and_mul(self.x)

    def setup_prefill_bf16(self):
        self.x, self.out = _gated(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.gelu_tanh_and_mul(self.out, self.x)

    def verify_prefill_bf16(self):
        return _gelu_tanh_and_mul(self.x)


class SiluAndMulLayer(Benchmark):
    """The path kernelize installs: the layer, which allocates its output."""

    seed = 42

    def setup_prefill_bf16(self):
        self.x, _ = _gated(512, torch.bfloat16, self.device)
        self.layer = self.kernel.layers.SiluAndMul()

    def benchmark_prefill_bf16(self):
        self.out = self.layer(self.x)

    def verify_prefill_bf16(self):
        return _silu_and_mul(self.x)
