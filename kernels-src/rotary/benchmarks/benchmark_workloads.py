"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads: rotary embeddings of Llama-shaped q (32 heads) and k (8 heads), head dim 128,
``[batch, heads, seq, dim]``, at one decode token and a 512-token prefill, fp32 and bf16,
against Transformers' ``apply_rotary_pos_emb`` formula in eager PyTorch, same dtype
(``verify_*``, also the timed baseline). Both outputs land in one buffer (``out``) so the runner compares them
together. q and k are uniform in [-0.5, 0.5) so outputs stay below 1, where the runner's
absolute tolerance (1e-2) is wider than a bf16 rounding step.
"""

import torch

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HEADS_Q, HEADS_KV, DIM = 32, 8, 128


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Rotary(Benchmark):
    seed = 42

    def _make(self, seq, dtype):
        self.q = torch.rand(1, HEADS_Q, seq, DIM, dtype=dtype, device=self.device) - 0.5
        self.k = torch.rand(1, HEADS_KV, seq, DIM, dtype=dtype, device=self.device) - 0.5
        angles = torch.rand(1, seq, DIM // 2, device=self.device) * 6.28
        angles = torch.cat((angles, angles), dim=-1)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self.out = torch.empty(self.q.numel() + self.k.numel(), dtype=dtype, device=self.device)
        self.q_out = self.out[:self.q.numel()].view(self.q.shape)
        self.k_out = self.out[self.q.numel():].view(self.k.shape)

    def _run(self):
        self.kernel.apply_rotary_out(self.q_out, self.k_out, self.q, self.k, self.cos, self.sin)

    def _reference(self):
        cos, sin, q, k = self.cos.unsqueeze(1), self.sin.unsqueeze(1), self.q, self.k
        return torch.cat(((q * cos + _rotate_half(q) * sin).flatten(),
                          (k * cos + _rotate_half(k) * sin).flatten()))


class Rotary(_Rotary):
    def setup_decode_fp32(self):
        self._make(1, torch.float32)

    def benchmark_decode_fp32(self):
        self._run()

    def verify_decode_fp32(self):
        return self._reference()

    def setup_prefill_fp32(self):
        self._make(512, torch.float32)

    def benchmark_prefill_fp32(self):
        self._run()

    def verify_prefill_fp32(self):
        return self._reference()

    def setup_prefill_bf16(self):
        self._make(512, torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._run()

    def verify_prefill_bf16(self):
        return self._reference()
