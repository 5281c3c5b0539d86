"""Time ``swiglu_mlp``'s decode op (a few rows) against the PyTorch MLP it replaces,
``down(silu(gate(x)) * up(x)) + residual`` with ``F.linear`` (the BLAS GEMV/GEMM).

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/mlp_timing.py build/rmsnorm/torch-stable-abi213-cpu-x86_64-linux

The op is bound by memory bandwidth (2 flops per weight per row), so a machine's kernel
either streams its weights as fast as the BLAS does or loses; the table says which, with
the weight bytes per second of each side. Timed by this thread's CPU time on one torch
thread, the candidates taking turns, medians (a shared, loaded machine stretches wall
time by whatever else runs; CPU time it does not). Sizes: hidden x intermediate of
Llama-style models from 256 x 704 to Llama-2 7B's 4096 x 11008.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import cpu_header, interleaved_thread_time

SIZES = ((256, 704), (512, 1408), (1024, 2816), (2048, 5632), (4096, 11008))
"""hidden x intermediate: TinyLlama-like up to Llama-2 7B."""

ROWS = (1, 2, 4)
"""Rows of x: a decode step of batch 1, 2 and the op's largest (GEMV_MAX_ROWS)."""


def pytorch_mlp(x, w_gate, w_up, w_down, residual):
    """Transformers' LlamaMLP forward plus the decoder layer's residual add."""
    return residual + F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


HEADER = (f"  {'dtype':<9}{'size':<13}{'rows':>5}{'ours ms':>10}{'torch ms':>10}"
          f"{'ours GB/s':>11}{'torch GB/s':>11}{'torch/ours':>12}")


def row(kernel, dtype: torch.dtype, hidden: int, inter: int, rows: int, rounds: int) -> str:
    generator = torch.Generator().manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=generator) * scale).to(dtype)

    w_gate, w_up = rand(inter, hidden, scale=hidden ** -0.5), rand(inter, hidden, scale=hidden ** -0.5)
    w_down = rand(hidden, inter, scale=inter ** -0.5)
    x, residual = rand(rows, hidden), rand(rows, hidden)
    args = (x, w_gate, w_up, w_down, residual)
    torch.testing.assert_close(kernel.swiglu_mlp(*args), pytorch_mlp(*args),
                               rtol=2e-2 if dtype == torch.bfloat16 else 1e-4,
                               atol=2e-2 if dtype == torch.bfloat16 else 1e-4)
    weight_bytes = 3 * hidden * inter * w_gate.element_size()
    # at least ~20 ms of work a turn, so the thread clock's tick is noise
    calls = max(1, int(2e9 / (weight_bytes * 100)))
    times = interleaved_thread_time({"ours": lambda: kernel.swiglu_mlp(*args),
                                     "torch": lambda: pytorch_mlp(*args)},
                                    rounds=rounds, calls=calls)
    ours, theirs = times["ours"], times["torch"]
    return (f"  {str(dtype)[6:]:<9}{f'{hidden}x{inter}':<13}{rows:>5}{ours * 1e3:10.3f}"
            f"{theirs * 1e3:10.3f}{weight_bytes / ours / 1e9:11.1f}"
            f"{weight_bytes / theirs / 1e9:11.1f}{theirs / ours:11.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--rows", nargs="+", type=int, default=list(ROWS))
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help="hidden sizes to run (default: all of SIZES)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--capability", default=None,
                        help="run the op on these loops (DEFAULT, AVX2, AVX512, AVX512_BF16)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    if args.capability:
        kernel.set_cpu_capability(args.capability)
    print(cpu_header())
    print(f"loops {kernel.cpu_capability()}; thread CPU time, 1 thread, medians of "
          f"{args.rounds} interleaved turns; GB/s: the three weights' bytes per call")
    print(HEADER)
    sizes = [s for s in SIZES if args.sizes is None or s[0] in args.sizes]
    for dtype in (getattr(torch, name) for name in args.dtypes):
        for hidden, inter in sizes:
            for rows in args.rows:
                print(row(kernel, dtype, hidden, inter, rows, args.rounds), flush=True)


if __name__ == "__main__":
    main()
