"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads are Llama-7B-shaped (hidden 4096): rms_norm and fused_add_rms_norm at one decode
token and a 512-token prefill, fp32 and bf16, checked against Transformers' LlamaRMSNorm
arithmetic in PyTorch (``verify_*``, also the timed baseline). The weight is scaled to
0.1 so outputs stay below 1, where the runner's absolute tolerance (1e-2) is wider than a
bf16 rounding step: timing does not depend on the values.
"""

import torch

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HIDDEN = 4096
EPS = 1e-6


def _inputs(tokens, dtype, device):
    x = torch.randn(tokens, HIDDEN, dtype=dtype, device=device)
    weight = (torch.rand(HIDDEN, device=device) * 0.1).to(dtype)
    return x, weight, torch.empty_like(x)


def _rms_norm(x, weight):
    h = x.float()
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return weight * normed.to(x.dtype)


class RMSNorm(Benchmark):
    seed = 42

    def setup_decode_fp32(self):
        self.x, self.weight, self.out = _inputs(1, torch.float32, self.device)

    def benchmark_decode_fp32(self):
        self.kernel.rms_norm(self.x, self.weight, EPS, out=self.out)

    def verify_decode_fp32(self):
        return _rms_norm(self.x, self.weight)

    def setup_prefill_fp32(self):
        self.x, self.weight, self.out = _inputs(512, torch.float32, self.device)

    def benchmark_prefill_fp32(self):
        self.kernel.rms_norm(self.x, self.weight, EPS, out=self.out)

    def verify_prefill_fp32(self):
        return _rms_norm(self.x, self.weight)

    def setup_prefill_bf16(self):
        self.x, self.weight, self.out = _inputs(512, torch.bfloat16, self.device)

    def benchmark_prefill_bf16(self):
        self.kernel.rms_norm(self.x, self.weight, EPS, out=self.out)

    def verify_prefill_bf16(self):
        return _rms_norm(self.x, self.weight)


class FusedAddRMSNorm(Benchmark):
    """residual <- x + residual, then rms_norm(residual): the decoder layer's seam. The
    residual is restored before each call, so every call does the same work."""

    seed = 42

    def setup_prefill_bf16(self):
        self.x, self.weight, self.out = _inputs(512, torch.bfloat16, self.device)
        self.start = torch.randn_like(self.x)
        self.residual = self.start.clone()

    def benchmark_prefill_bf16(self):
        self.residual.copy_(self.start)
        self.kernel.fused_add_rms_norm(self.x, self.residual, self.weight, EPS, out=self.out)

    def verify_prefill_bf16(self):
        return _rms_norm((self.x.float() + self.start.float()).to(self.x.dtype), self.weight)


class RMSNormLayer(Benchmark):
    """The path kernelize installs: the layer, which allocates its output."""

    seed = 42

    def setup_prefill_bf16(self):
        self.x, weight, _ = _inputs(512, torch.bfloat16, self.device)
        self.layer = self.kernel.layers.RMSNorm()
        self.layer.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.layer.variance_epsilon = EPS

    def benchmark_prefill_bf16(self):
        self.out = self.layer(self.x)

    def verify_prefill_bf16(self):
        return _rms_norm(self.x, self.layer.weight)


VALUE_HEADS, HEAD_V_DIM = 32, 128
"""Qwen3-Next-80B-A3B's gated delta net: 32 value heads of 128, normalised per head."""


def _qwen3_5_rms_norm_gated(x, gate, weight):
    """Transformers' Qwen3_5RMSNormGated arithmetic."""
    h = x.float()
    h = weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)
    return (h * torch.nn.functional.silu(gate.float())).to(x.dtype)


class RMSNormGated(Benchmark):
    """The gated delta net's output norm through the layer kernelize installs
    (``[tokens * 32, 128]`` rows, silu gate), one decode token and a 512-token prefill."""

    seed = 42

    def _setup(self, tokens, dtype):
        self.x = torch.randn(tokens * VALUE_HEADS, HEAD_V_DIM, dtype=dtype, device=self.device)
        self.gate = torch.randn_like(self.x)
        self.layer = self.kernel.layers.RMSNormGated()
        weight = (torch.rand(HEAD_V_DIM, device=self.device) * 0.1).to(dtype)
        self.layer.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.layer.variance_epsilon = EPS
        self.layer.activation = "silu"

    def _run(self):
        self.out = self.layer(self.x, self.gate)

    def _verify(self):
        return _qwen3_5_rms_norm_gated(self.x, self.gate, self.layer.weight)

    def setup_decode_fp32(self):
        self._setup(1, torch.float32)

    def benchmark_decode_fp32(self):
        self._run()

    def verify_decode_fp32(self):
        return self._verify()

    def setup_prefill_fp32(self):
        self._setup(512, torch.float32)

    def benchmark_prefill_fp32(self):
        self._run()

    def verify_prefill_fp32(self):
        return self._verify()

    def setup_prefill_bf16(self):
        self._setup(512, torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._run()

    def verify_prefill_bf16(self):
        return self._verify()
