"""bfloat16 matrix products computed in float32, on CPUs without native bfloat16 products.

Without AVX512_BF16 (or AMX), PyTorch's CPU bfloat16 GEMM converts inside its inner loop
and runs at ~8 GFLOP/s on one core, several times slower than its float32 GEMM on the
same core. So a product of enough rows is cheaper widened: the activations are converted
once, the weight a block of :data:`BLOCK` output features at a time (a bounded scratch,
never a float32 copy of the whole weight), each block multiplied in float32 and rounded
once into the bfloat16 output, as PyTorch rounds its own float32 accumulation.

Fewer rows (a decode step) are bound by reading the weight, which widening would read
twice. PyTorch's bfloat16 matrix-vector product on these CPUs reads it at ~7 GB/s, less
than half its float32 one; so they run the kernel's ``linear`` op instead, which streams
each bfloat16 weight row once for all rows (several rows side by side, every row of x
reusing each chunk from L1), sums in float32 and rounds once (``benchmarks/gemv.py``).

Measured (``benchmarks/widen.py``, AMD EPYC avx2 fma, 1 thread, thread CPU time, five
projection shapes from 1024x3072 to 5632x2048): widened 0.67-0.82x at 1 row, 1.00-1.10x
at 2, 1.35-1.61x at 4, 2.2-2.6x at 8, 6.4-6.8x at 64 and 8.2-8.5x at 512 rows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._ops import add_op_namespace_prefix, ops

WIDEN_ROWS = 4
"""Rows from which a bfloat16 product runs widened rather than in PyTorch's product: it
wins from 4 rows at every shape measured (1.35-1.61x); at 2 rows it only breaks even.
Below :data:`GEMV_ROWS` the kernel's ``linear`` op runs instead (faster than both)."""

GEMV_ROWS = 12
"""Rows below which a bfloat16 product runs the kernel's ``linear`` op (:func:`streams`),
from 1 row up, ahead of widening. Measured (``benchmarks/gemv.py`` and a sweep of 8-24
rows, AMD EPYC avx2 fma, 1 thread, seven shapes 1024x1024 ... 11008x4096): the op is
2.0-2.5x PyTorch's product at 1 row and 3.0-3.4x at 3; against widening it is 1.3-1.5x
at 8 rows, 1.0-1.12x at 12, 0.85-0.93x at 16 (it multiplies without FMA, and past a few
rows the product is no longer bound by the weight's bytes)."""

BLOCK = 256
"""Output features per widened block: the float32 scratch of a 4096-wide layer's block is
4 MiB, whatever the weight's size (chosen, not tuned: the timings above are at 256)."""

NATIVE_BF16 = ops.cpu_capability() == "AVX512_BF16"
"""Whether this CPU multiplies bfloat16 natively (AVX512_BF16; AMX CPUs have it too), where
oneDNN's bfloat16 products are fast and nothing is widened. Read once at import."""


_HAS_CPU_LINEAR = torch._C._dispatch_has_kernel_for_dispatch_key(
    add_op_namespace_prefix("linear"), "CPU")
"""Whether this build has the CPU ``linear`` op (a CUDA build has none); read once at
import, so torch.compile sees a constant."""


def _rows(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1] if x.dim() and x.shape[-1] else 0


def _ours(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """bfloat16 activations and weight on a CPU without native bfloat16 products, and no
    gradients (training keeps PyTorch's product and its autograd)."""
    return (x.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16
            and x.device.type == "cpu" and weight.device.type == "cpu"
            and not NATIVE_BF16 and weight.dim() == 2
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)))


def widens(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``x @ weight.T`` runs widened: :data:`WIDEN_ROWS` rows or more of a product
    :func:`_ours` takes."""
    return _rows(x) >= WIDEN_ROWS and _ours(x, weight)


def streams(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
            residual: torch.Tensor | None = None) -> bool:
    """Whether ``x @ weight.T`` runs the kernel's ``linear`` op: 1 to ``GEMV_ROWS - 1``
    rows of a product :func:`_ours` takes, with a bias and residual of its dtype (and the
    residual of the output's shape); a build without the CPU op leaves them to PyTorch."""
    return (_HAS_CPU_LINEAR and 0 < _rows(x) < GEMV_ROWS and _ours(x, weight)
            and (bias is None or bias.dtype == torch.bfloat16)
            and (residual is None or (residual.dtype == torch.bfloat16
                                      and residual.shape == (*x.shape[:-1], weight.shape[0]))))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` (``+ residual``): widened where :func:`widens` says so,
    by the kernel's ``linear`` op where :func:`streams` does.

    Either way the sum of product, bias and residual is rounded once; PyTorch rounds the
    product and each add, so results agree within bfloat16 rounding."""
    if streams(x, weight, bias, residual):
        return ops.linear(x, weight, bias, residual)
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
