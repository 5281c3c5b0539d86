"""bfloat16 matrix products computed in float32, on CPUs without native bfloat16 products.

Without AVX512_BF16 (or AMX), PyTorch's CPU bfloat16 GEMM converts inside its inner loop
and runs at ~8 GFLOP/s on one core, several times slower than its float32 GEMM on the
same core. So a product of enough rows is cheaper widened: the activations are converted
once, the weight a block of :data:`BLOCK` output features at a time (a bounded scratch,
never a float32 copy of the whole weight), each block multiplied in float32 and rounded
once into the bfloat16 output, as PyTorch rounds its own float32 accumulation. Fewer rows
(a decode step) keep PyTorch's product, which reads the bfloat16 weight only once.

Measured (``benchmarks/widen.py``, AMD EPYC avx2 fma, 1 thread, thread CPU time, five
projection shapes from 1024x3072 to 5632x2048): widened 0.67-0.82x at 1 row, 1.00-1.10x
at 2, 1.35-1.61x at 4, 2.2-2.6x at 8, 6.4-6.8x at 64 and 8.2-8.5x at 512 rows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._ops import ops

WIDEN_ROWS = 4
"""Rows from which a bfloat16 product runs widened: it wins from 4 rows at every shape
measured (1.35-1.61x); at 2 rows it only breaks even, and one row (a decode step) is
faster in PyTorch's product, which reads the bfloat16 weight once."""

BLOCK = 256
"""Output features per widened block: the float32 scratch of a 4096-wide layer's block is
4 MiB, whatever the weight's size (chosen, not tuned: the timings above are at 256)."""

NATIVE_BF16 = ops.cpu_capability() == "AVX512_BF16"
"""Whether this CPU multiplies bfloat16 natively (AVX512_BF16; AMX CPUs have it too), where
oneDNN's bfloat16 products are fast and nothing is widened. Read once at import."""


def _rows(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1] if x.dim() else 0


def widens(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``x @ weight.T`` runs widened: bfloat16 activations and weight on the CPU,
    :data:`WIDEN_ROWS` rows or more, no native bfloat16 products, and no gradients
    (training keeps PyTorch's product and its autograd)."""
    return (x.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16
            and x.device.type == "cpu" and weight.device.type == "cpu"
            and not NATIVE_BF16 and _rows(x) >= WIDEN_ROWS
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` (``+ residual``), widened where :func:`widens` says so.

    Widened, the sum of product, bias and residual is rounded once; PyTorch rounds the
    product and each add, so results agree within bfloat16 rounding."""
    if not widens(x, weight):
        out = F.linear(x, weight, bias)
        return out if residual is None else residual + out
    return widened(x, weight, bias, residual)


def widened(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
            residual: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`linear`'s widened computation, whatever the rows (benchmarks time it where
    :func:`widens` would decline)."""
    flat = x.reshape(-1, x.shape[-1]).float()
    features = weight.shape[0]
    out = torch.empty((flat.shape[0], features), dtype=x.dtype, device=x.device)
    base = None if residual is None else residual.reshape(-1, features)
    scratch = torch.empty((flat.shape[0], min(BLOCK, features)), dtype=torch.float32)
    for start in range(0, features, BLOCK):
        stop = min(start + BLOCK, features)
        block = scratch if stop - start == scratch.shape[1] else scratch[:, : stop - start].clone()
        torch.mm(flat, weight[start:stop].float().t(), out=block)
        if bias is not None:
            block += bias[start:stop].float()
        if base is not None:
            block += base[:, start:stop]
        out[:, start:stop] = block
    return out.view(*x.shape[:-1], features)
