"""Time the Triton silu_and_mul on a GPU against eager PyTorch, torch.compile and a copy.

Usage: python benchmarks/benchmark.py build/triton-activation/torch-cuda
Needs a CUDA device (Triton's CPU interpreter is for tests, not timing). Options:
--tokens (default 8192), --d (default 8192), --dtypes (default float32 bfloat16).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils import benchmark


def median_seconds(fn) -> float:
    fn()
    torch.cuda.synchronize()
    return benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(
        min_run_time=1.0
    ).median


def eager(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--d", type=int, default=8192)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA device; on CPU the kernel only runs under the interpreter")
    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    for name in args.dtypes:
        run(kernel, args.tokens, args.d, getattr(torch, name))


def run(kernel, tokens: int, d: int, dtype: torch.dtype) -> None:
    x = torch.randn(tokens, 2 * d, dtype=dtype, device="cuda")
    out = torch.empty(tokens, d, dtype=dtype, device="cuda")
    copy_dst = torch.empty_like(x)
    compiled = torch.compile(eager)
    times = {
        "triton kernel": median_seconds(lambda: kernel.silu_and_mul(out, x)),
        "eager PyTorch": median_seconds(lambda: eager(x)),
        "torch.compile": median_seconds(lambda: compiled(x)),
        "copy_ of the input": median_seconds(lambda: copy_dst.copy_(x)),
    }
    ours = times["triton kernel"]
    moved = (x.numel() + out.numel()) * x.element_size()
    print(f"\nsilu_and_mul [{tokens}, {2 * d}] {dtype}")
    for label, seconds in times.items():
        print(f"  {label:<20} {seconds * 1e6:9.1f} us   {seconds / ours:5.2f}x kernel time")
    copy_rate = 2 * x.numel() * x.element_size() / times["copy_ of the input"]
    print(f"  kernel {moved / ours / 1e9:7.1f} GB/s (copy_: {copy_rate / 1e9:7.1f} GB/s)")

if __name__ == "__main__":
    main()
