"""Benchmark classes in the kernel ecosystem's shape: ``kernelhub benchmark`` (and the
ecosystem's ``kernels benchmark``) run them against the variant the machine loads.

The path ``use_kernels=True`` installs: the ``LigerRMSNorm`` layer (which allocates its
output) on a Llama norm's ``weight`` and ``variance_epsilon``, at Llama-3-8B's hidden size
(4096) and Llama-3-70B's (8192), one decode token and a 512-token prefill, fp32 and bf16.
``verify_*`` is Transformers' LlamaRMSNorm arithmetic in PyTorch: the check and the timed
baseline. The weight is scaled to 0.1 so outputs stay below 1, where the runner's absolute
tolerance (1e-2) is wider than a bf16 rounding step: timing does not depend on the values.
"""

import torch

try:  # the ecosystem's runner discovers subclasses of its own class
    from kernels.benchmark import Benchmark
except ImportError:
    from kernelhub.benchmark import Benchmark

EPS = 1e-5


def _llama_rms_norm(x, weight):
    h = x.float()
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return weight * normed.to(x.dtype)


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _workloads(cls, hidden, phases):
    """Adds setup_/benchmark_/verify_<phase>_<dtype> for each (phase, tokens) x dtype."""
    for phase, tokens in phases.items():
        for tag, dtype in DTYPES.items():
            def setup(self, tokens=tokens, dtype=dtype):
                self.x = torch.randn(tokens, hidden, dtype=dtype, device=self.device)
                self.layer = self.kernel.layers.LigerRMSNorm()
                weight = (torch.rand(hidden, device=self.device) * 0.1).to(dtype)
                self.layer.weight = torch.nn.Parameter(weight, requires_grad=False)
                self.layer.variance_epsilon = EPS

            setattr(cls, f"setup_{phase}_{tag}", setup)
            setattr(cls, f"benchmark_{phase}_{tag}", _run)
            setattr(cls, f"verify_{phase}_{tag}", _verify)
    return cls


def _run(self):
    self.out = self.layer(self.x)


def _verify(self):
    return _llama_rms_norm(self.x, self.layer.weight)


class LigerRMSNorm8B(Benchmark):
    """Llama-3-8B (hidden 4096)."""

    seed = 42


class LigerRMSNorm70B(Benchmark):
    """Llama-3-70B (hidden 8192)."""

    seed = 42


_workloads(LigerRMSNorm8B, 4096, {"decode": 1, "prefill": 512})
_workloads(LigerRMSNorm70B, 8192, {"prefill": 512})
