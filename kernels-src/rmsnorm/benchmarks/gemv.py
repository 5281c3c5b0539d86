"""Time the few-rows bfloat16 product (``ops.linear``, what ``layers.Linear`` runs for a
decode step's rows on CPUs without native bfloat16 products) against PyTorch's bfloat16
``F.linear`` and the widened product, by rows, at real projection shapes.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/gemv.py build/rmsnorm/torch-stable-abi213-cpu-x86_64-linux

One thread, this thread's CPU time, candidates interleaved, medians; ratios are PyTorch's
time over the candidate's, in the same run. GB/s is the weight's bytes over our time (the
bound a matrix-vector product has: every weight read once).
"""

from __future__ import annotations

import argparse

import kernelhub
import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import cpu_header, interleaved_thread_time

SHAPES = ((1024, 1024), (1024, 3072), (2048, 5632), (5632, 2048), (4096, 4096),
          (4096, 11008), (11008, 4096))
"""(in, out) features: the scaled families' hidden 1024, Llama/Qwen3 in model.py (hidden
2048, intermediate 5632) and Llama-7B's projections."""
LM_HEAD = (1024, 151936)
"""A Qwen-sized lm_head (``--lm-head``: 311 MB of bfloat16 weight)."""
ROWS = (1, 2, 3, 4, 8)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="a built rmsnorm variant")
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lm-head", action="store_true", help=f"add {LM_HEAD}")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    kernel = kernelhub.get_local_kernel(args.path)
    widen, ops = kernel._widen, kernel._ops.ops
    print(cpu_header())
    print(f"native bfloat16 products: {widen.NATIVE_BF16}; loops {ops.cpu_capability()}; "
          f"WIDEN_ROWS {widen.WIDEN_ROWS}")
    print(f"  {'in x out':<14}{'rows':>5}{'torch ms':>10}{'ours ms':>9}{'widened ms':>12}"
          f"{'ours':>8}{'widened':>9}{'ours GB/s':>11}")
    generator = torch.Generator().manual_seed(0)
    shapes = SHAPES + ((LM_HEAD,) if args.lm_head else ())
    with torch.no_grad():
        for inputs, outputs in shapes:
            weight = torch.randn(outputs, inputs, generator=generator).bfloat16()
            for rows in args.rows:
                x = torch.randn(rows, inputs, generator=generator).bfloat16()
                times = interleaved_thread_time({
                    "torch": lambda x=x, w=weight: F.linear(x, w),
                    "ours": lambda x=x, w=weight: ops.linear(x, w),
                    "widened": lambda x=x, w=weight: widen.widened(x, w),
                }, rounds=args.rounds)
                gbs = weight.numel() * 2 / times["ours"] / 1e9
                print(f"  {f'{inputs}x{outputs}':<14}{rows:>5}{times['torch'] * 1e3:>10.3f}"
                      f"{times['ours'] * 1e3:>9.3f}{times['widened'] * 1e3:>12.3f}"
                      f"{times['torch'] / times['ours']:>7.2f}x"
                      f"{times['torch'] / times['widened']:>8.2f}x{gbs:>11.1f}", flush=True)


if __name__ == "__main__":
    main()
