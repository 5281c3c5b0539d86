"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

One MoE layer of Qwen3-30B-A3B (hidden 2048, expert intermediate 768, 128 experts, top 8)
at a decode token and a 64-token prefill, float32 and bfloat16, checked against the
experts loop Transformers' MoE classes run (``verify_*``), and Qwen3.5-MoE's router
(256 experts, top 8). Weights are scaled so outputs stay small, where the runner's
absolute tolerance is wider than a bf16 rounding step.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HIDDEN, INTER, EXPERTS, TOP_K = 2048, 768, 128, 8


def _experts_inputs(tokens, dtype, device):
    hidden = torch.randn(tokens, HIDDEN, device=device).to(dtype)
    weights, index = torch.topk(torch.randn(tokens, EXPERTS, device=device).softmax(-1), TOP_K)
    gate_up = (torch.randn(EXPERTS, 2 * INTER, HIDDEN, device=device) * 0.02).to(dtype)
    down = (torch.randn(EXPERTS, HIDDEN, INTER, device=device) * 0.02).to(dtype)
    return hidden, index, weights.to(dtype), gate_up, down


def _experts_loop(hidden, index, weights, gate_up, down):
    out = torch.zeros_like(hidden, dtype=torch.float32)
    for e in index.unique().tolist():
        token, slot = torch.where(index == e)
        gate, up = F.linear(hidden[token], gate_up[e]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, down[e])
        out.index_add_(0, token, (y * weights[token, slot, None]).float())
    return out.to(hidden.dtype)


class Experts(Benchmark):
    seed = 42

    def _setup(self, tokens, dtype):
        self.args = _experts_inputs(tokens, dtype, self.device)

    def _run(self):
        self.out = self.kernel.experts(*self.args, 0)

    def _verify(self):
        return _experts_loop(*self.args)

    def setup_decode_fp32(self):
        self._setup(1, torch.float32)

    def benchmark_decode_fp32(self):
        self._run()

    def verify_decode_fp32(self):
        return self._verify()

    def setup_prefill_fp32(self):
        self._setup(64, torch.float32)

    def benchmark_prefill_fp32(self):
        self._run()

    def verify_prefill_fp32(self):
        return self._verify()

    def setup_decode_bf16(self):
        self._setup(1, torch.bfloat16)

    def benchmark_decode_bf16(self):
        self._run()

    def verify_decode_bf16(self):
        return self._verify()

    def setup_prefill_bf16(self):
        self._setup(64, torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._run()

    def verify_prefill_bf16(self):
        return self._verify()


class Router(Benchmark):
    """Qwen3.5-MoE's softmax router: logits, top-k weights (renormalised), indices."""

    seed = 42

    def setup_prefill_fp32(self):
        self.hidden = torch.randn(64, HIDDEN, device=self.device)
        self.weight = torch.randn(256, HIDDEN, device=self.device) * 0.02

    def benchmark_prefill_fp32(self):
        self.out = self.kernel.router(self.hidden, self.weight, TOP_K)[1]

    def verify_prefill_fp32(self):
        probs = F.linear(self.hidden, self.weight).softmax(-1)
        top = torch.topk(probs, TOP_K, dim=-1).values
        return top / top.sum(-1, keepdim=True)
