"""Time silu_and_mul on CPU against eager PyTorch, torch.compile and a memory copy.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/benchmark.py build/activation/torch213-cxx11-cpu-x86_64-linux

or, for a package dir without metadata (a hand-made development build):

    python benchmarks/benchmark.py --import-dir /path/containing/activation-package

Options: --tokens (rows, default 2048), --d (output width, default 4096, so the
input is [2048, 8192]), --dtypes (default float32 bfloat16), --capability
(DEFAULT/AVX2/AVX512 loops; default the best this CPU runs). Takes under a minute.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.utils import benchmark


def load_kernel(args: argparse.Namespace) -> ModuleType:
    if args.import_dir is not None:
        sys.path.insert(0, str(args.import_dir))
        return importlib.import_module("activation")
    import kernelhub

    return kernelhub.get_local_kernel(args.path)


def median_seconds(fn, min_run_time: float) -> float:
    """Median over repeated blocks, after one untimed call (allocations, first touch)."""
    fn()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=min_run_time).median


def eager_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def run(kernel: ModuleType, tokens: int, d: int, dtype: torch.dtype, min_run_time: float) -> None:
    x = torch.randn(tokens, 2 * d, dtype=dtype)
    out = torch.empty(tokens, d, dtype=dtype)
    copy_dst = torch.empty_like(x)
    layer = kernel.layers.SiluAndMul()
    compiled = torch.compile(eager_silu_and_mul)
    for _ in range(3):  # compile and reach the steady state before timing
        compiled(x)

    times = {
        "kernel, preallocated out": median_seconds(
            lambda: kernel.silu_and_mul(out, x), min_run_time
        ),
        "kernel, allocating (layer)": median_seconds(lambda: layer(x), min_run_time),
        "eager PyTorch": median_seconds(lambda: eager_silu_and_mul(x), min_run_time),
        "torch.compile": median_seconds(lambda: compiled(x), min_run_time),
        "copy_ of the input": median_seconds(lambda: copy_dst.copy_(x), min_run_time),
    }
    element = x.element_size()
    kernel_bytes = (x.numel() + out.numel()) * element
    copy_bytes = 2 * x.numel() * element
    ours = times["kernel, preallocated out"]

    print(
        f"\nsilu_and_mul  input [{tokens}, {2 * d}] {dtype}  "
        f"(threads {torch.get_num_threads()}, loops {kernel.cpu_capability()})"
    )
    for label, seconds in times.items():
        print(f"  {label:<28} {seconds * 1e3:8.3f} ms   {seconds / ours:5.2f}x kernel time")
    print(
        f"  kernel bandwidth  {kernel_bytes / ours / 1e9:6.1f} GB/s "
        f"(copy_: {copy_bytes / times['copy_ of the input'] / 1e9:6.1f} GB/s)"
    )
    print(
        f"  speedup vs eager  {times['eager PyTorch'] / ours:5.2f}x "
        f"(allocating: {times['eager PyTorch'] / times['kernel, allocating (layer)']:5.2f}x)"
    )
    print(
        f"  speedup vs torch.compile  {times['torch.compile'] / ours:5.2f}x "
        f"(allocating: {times['torch.compile'] / times['kernel, allocating (layer)']:5.2f}x)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--import-dir", type=Path, help="import `activation` from this dir")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--d", type=int, default=4096)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--capability", choices=["DEFAULT", "AVX2", "AVX512"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    args = parser.parse_args(argv)
    if (args.path is None) == (args.import_dir is None):
        parser.error("give either a built variant path or --import-dir")

    kernel = load_kernel(args)
    if args.capability is not None:
        kernel.set_cpu_capability(args.capability)
    for name in args.dtypes:
        run(kernel, args.tokens, args.d, getattr(torch, name), args.min_run_time)


if __name__ == "__main__":
    main()
