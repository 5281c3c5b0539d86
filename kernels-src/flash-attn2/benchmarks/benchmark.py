"""Time causal attention on CPU: this kernel vs sdpa, eager PyTorch and torch.compile.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/benchmark.py build/flash-attn2/torch213-cxx11-cpu-x86_64-linux

Options: --batch (1), --heads (8), --seq (1024), --head-dim (128), --dtypes
(float32 bfloat16), --min-run-time (seconds per measurement). "eager" is
softmax(QK^T * scale + mask) V with an explicit causal mask, as Transformers'
eager attention computes it; torch.compile compiles that same function.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.utils import benchmark


def median_seconds(fn, min_run_time: float) -> float:
    """Median over repeated blocks, after one untimed call (allocations, first touch)."""
    fn()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=min_run_time).median


def eager_attention(q, k, v, mask: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1])) + mask
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def run(kernel: ModuleType, args: argparse.Namespace, dtype: torch.dtype) -> None:
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, dtype=dtype) for _ in range(3))
    mask = torch.zeros(args.seq, args.seq, dtype=dtype).masked_fill(
        ~torch.ones(args.seq, args.seq, dtype=torch.bool).tril(), float("-inf")
    )
    out = torch.empty(shape, dtype=dtype)
    compiled = torch.compile(eager_attention)
    for _ in range(3):  # compile and reach the steady state before timing
        compiled(q, k, v, mask)
    times = {
        "kernel, out=": median_seconds(
            lambda: kernel.attention(q, k, v, causal=True, out=out), args.min_run_time
        ),
        "kernel, allocating": median_seconds(
            lambda: kernel.attention(q, k, v, causal=True), args.min_run_time
        ),
        "sdpa (is_causal)": median_seconds(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.min_run_time
        ),
        "eager (explicit mask)": median_seconds(
            lambda: eager_attention(q, k, v, mask), args.min_run_time
        ),
        "torch.compile(eager)": median_seconds(lambda: compiled(q, k, v, mask), args.min_run_time),
    }
    ours = times["kernel, allocating"]
    flops = 4 * args.batch * args.heads * args.seq * args.seq * args.head_dim / 2  # causal
    print(
        f"\ncausal attention [{args.batch}, {args.heads}, {args.seq}, {args.head_dim}] {dtype} "
        f"(threads {torch.get_num_threads()}, loops {kernel.cpu_capability()})"
    )
    for label, seconds in times.items():
        print(
            f"  {label:<24} {seconds * 1e3:8.2f} ms  {flops / seconds / 1e9:6.1f} GFLOP/s  "
            f"{seconds / ours:5.2f}x kernel time"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    args = parser.parse_args(argv)
    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    for name in args.dtypes:
        run(kernel, args, getattr(torch, name))


if __name__ == "__main__":
    main()
