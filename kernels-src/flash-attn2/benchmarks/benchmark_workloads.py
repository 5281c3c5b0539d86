"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads: Llama-shaped grouped-query attention (32 query heads, 8 KV heads, head dim
128, ``[batch, heads, seq, dim]``) — a 512-token causal prefill and one decode query
against a 4096-token cache, fp32 and bf16 — against PyTorch's
``scaled_dot_product_attention`` (``verify_*``, also the timed baseline). v is uniform in
[-1, 1) so outputs (weighted averages of v) stay below 1, where the runner's absolute
tolerance (1e-2) is wider than a bf16 rounding step.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HEADS_Q, HEADS_KV, DIM = 32, 8, 128


class _Attention(Benchmark):
    seed = 42

    def _make(self, queries, keys, dtype, causal):
        shape = (1, HEADS_Q, queries, DIM)
        self.q = torch.randn(shape, dtype=dtype, device=self.device)
        self.k = torch.randn(1, HEADS_KV, keys, DIM, dtype=dtype, device=self.device)
        self.v = torch.rand(1, HEADS_KV, keys, DIM, dtype=dtype, device=self.device) * 2 - 1
        self.causal = causal
        self.out = torch.empty(shape, dtype=dtype, device=self.device)

    def _run(self):
        self.kernel.attention(self.q, self.k, self.v, causal=self.causal, out=self.out)

    def _reference(self):
        # Bottom-right causal alignment (FlashAttention's) equals top-left here: the
        # prefill is square, the decode query sees the whole cache.
        return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal,
                                              enable_gqa=True)


class Attention(_Attention):
    def setup_prefill_causal_fp32(self):
        self._make(512, 512, torch.float32, True)

    def benchmark_prefill_causal_fp32(self):
        self._run()

    def verify_prefill_causal_fp32(self):
        return self._reference()

    def setup_prefill_causal_bf16(self):
        self._make(512, 512, torch.bfloat16, True)

    def benchmark_prefill_causal_bf16(self):
        self._run()

    def verify_prefill_causal_bf16(self):
        return self._reference()

    def setup_decode_fp32(self):
        self._make(1, 4096, torch.float32, False)

    def benchmark_decode_fp32(self):
        self._run()

    def verify_decode_fp32(self):
        return self._reference()

    def setup_decode_bf16(self):
        self._make(1, 4096, torch.bfloat16, False)

    def benchmark_decode_bf16(self):
        self._run()

    def verify_decode_bf16(self):
        return self._reference()
