"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads at Qwen3.5 / Qwen3-Next shapes (16 key heads, 32 value heads, head dims 128,
batch 1, q/k L2-normalised in the kernel): a 256-token chunked prefill and one recurrent
decode token against a state, fp32 and bf16. ``verify_*`` is the gated delta rule token by
token in float32 (the recurrence the models' fallbacks compute), which is also the timed
baseline. Inputs keep outputs near 1, where the runner's tolerance covers bf16 rounding.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

KEY_HEADS, VALUE_HEADS, DIM = 16, 32, 128


def _recurrence(q, k, v, g, beta, state):
    """o_t = S_t^T q_t, S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T."""
    group = v.shape[2] // k.shape[2]
    q, k = (F.normalize(x.float(), dim=-1, eps=1e-6).repeat_interleave(group, 2) for x in (q, k))
    q = q * q.shape[-1] ** -0.5
    v, beta, state = v.float(), beta.float(), state.clone()
    out = torch.empty_like(v)
    for t in range(v.shape[1]):
        state = state * g[:, t].exp()[..., None, None]
        delta = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", state, k[:, t]))
        state = state + k[:, t, :, :, None] * delta[:, :, None, :]
        out[:, t] = torch.einsum("bhkv,bhk->bhv", state, q[:, t])
    return out


class GatedDeltaRule(Benchmark):
    seed = 42

    def _make(self, seq, dtype):
        def rand(*shape):
            return torch.randn(*shape, device=self.device)

        self.q = rand(1, seq, KEY_HEADS, DIM).to(dtype)
        self.k = rand(1, seq, KEY_HEADS, DIM).to(dtype)
        self.v = (torch.rand(1, seq, VALUE_HEADS, DIM, device=self.device) * 2 - 1).to(dtype)
        self.g = -F.softplus(rand(1, seq, VALUE_HEADS))
        self.beta = torch.rand(1, seq, VALUE_HEADS, device=self.device).to(dtype)
        self.state = 0.05 * rand(1, VALUE_HEADS, DIM, DIM)

    def _chunk(self):
        self.out = self.kernel.chunk_gated_delta_rule(
            self.q,
            self.k,
            self.v,
            g=self.g,
            beta=self.beta,
            initial_state=self.state,
            use_qk_l2norm_in_kernel=True,
        )[0]

    def _decode(self):
        self.out = self.kernel.fused_recurrent_gated_delta_rule(
            self.q,
            self.k,
            self.v,
            g=self.g,
            beta=self.beta,
            initial_state=self.state,
            use_qk_l2norm_in_kernel=True,
        )[0]

    def _reference(self):
        return _recurrence(self.q, self.k, self.v, self.g, self.beta, self.state).to(self.v.dtype)

    def setup_prefill_fp32(self):
        self._make(256, torch.float32)

    def benchmark_prefill_fp32(self):
        self._chunk()

    def verify_prefill_fp32(self):
        return self._reference()

    def setup_prefill_bf16(self):
        self._make(256, torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._chunk()

    def verify_prefill_bf16(self):
        return self._reference()

    def setup_decode_fp32(self):
        self._make(1, torch.float32)

    def benchmark_decode_fp32(self):
        self._decode()

    def verify_decode_fp32(self):
        return self._reference()

    def setup_decode_bf16(self):
        self._make(1, torch.bfloat16)

    def benchmark_decode_bf16(self):
        self._decode()

    def verify_decode_bf16(self):
        return self._reference()
