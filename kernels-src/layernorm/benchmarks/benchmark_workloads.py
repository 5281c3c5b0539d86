"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads: layer_norm over hidden 4096 at one decode token and a 512-token prefill, fp32
and bf16, against ``torch.nn.functional.layer_norm`` (``verify_*``, also the timed
baseline), and the LayerNorm layer kernelize installs. Weight and bias are scaled to 0.1
so outputs stay below 1, where the runner's absolute tolerance (1e-2) is wider than a
bf16 rounding step: timing does not depend on the values.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HIDDEN = 4096
EPS = 1e-5


def _inputs(tokens, dtype, device):
    x = torch.randn(tokens, HIDDEN, dtype=dtype, device=device)
    weight = (torch.rand(HIDDEN, device=device) * 0.1).to(dtype)
    bias = (torch.rand(HIDDEN, device=device) * 0.1).to(dtype)
    return x, weight, bias, torch.empty_like(x)


def _layer_norm(x, weight, bias):
    return F.layer_norm(x, (HIDDEN,), weight, bias, EPS)


class LayerNorm(Benchmark):
    seed = 42

    def setup_decode_fp32(self):
        self.x, self.weight, self.bias, self.out = _inputs(1, torch.float32, self.device)

    def benchmark_decode_fp32(self):
        self.kernel.layer_norm(self.x, self.weight, self.bias, EPS, out=self.out)

    def verify_decode_fp32(self):
        return _layer_norm(self.x, self.weight, self.bias)

    def setup_prefill_fp32(self):
        self.x, self.weight, self.bias, self.out = _inputs(512, torch.float32, self.device)

    def benchmark_prefill_fp32(self):
        self.kernel.layer_norm(self.x, self.weight, self.bias, EPS, out=self.out)

    def verify_prefill_fp32(self):
        return _layer_norm(self.x, self.weight, self.bias)

    def setup_prefill_bf16(self):
        self.x, self.weight, self.bias, self.out = _inputs(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.layer_norm(self.x, self.weight, self.bias, EPS, out=self.out)

    def verify_prefill_bf16(self):
        return _layer_norm(self.x, self.weight, self.bias)


class LayerNormLayer(Benchmark):
    """The path kernelize installs: the layer, which allocates its output."""

    seed = 42

    def setup_prefill_bf16(self):
        self.x, weight, bias, _ = _inputs(512, torch.bfloat16, self.device)
        self.layer = self.kernel.layers.LayerNorm()
        self.layer.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.layer.bias = torch.nn.Parameter(bias, requires_grad=False)
        self.layer.eps = EPS

    def benchmark_prefill_bf16(self):
        self.out = self.layer(self.x)

    def verify_prefill_bf16(self):
        return _layer_norm(self.x, self.layer.weight, self.layer.bias)
