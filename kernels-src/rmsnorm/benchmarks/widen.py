"""Time bfloat16 products widened to float32 (``_widen.linear``) against PyTorch's bfloat16
``F.linear``, by rows, at the projection shapes of the model benchmarks: where the widening
pays (``WIDEN_ROWS``) and by how much.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/widen.py build/rmsnorm/torch-stable-abi213-cpu-x86_64-linux

One thread, this thread's CPU time, candidates interleaved, medians. The widened column
times the widened code itself at every row count (below ``WIDEN_ROWS`` the layer keeps
PyTorch's product); "layer" is what ``layers.Linear`` runs.
"""

from __future__ import annotations

import argparse

import kernelhub
import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import cpu_header, interleaved_thread_time

SHAPES = ((2048, 5632), (5632, 2048), (2048, 2048), (1024, 3072), (1024, 8192))
"""(in, out) features: Llama/Qwen3 in model.py (hidden 2048, intermediate 5632) and the
scaled families' hidden 1024."""
ROWS = (1, 2, 4, 8, 16, 64, 512)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="a built rmsnorm variant")
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    kernel = kernelhub.get_local_kernel(args.path)
    widen = kernel._widen
    print(cpu_header())
    print(f"native bfloat16 products: {widen.NATIVE_BF16}; WIDEN_ROWS {widen.WIDEN_ROWS}, "
          f"BLOCK {widen.BLOCK}")
    print(f"  {'in x out':<12}{'rows':>6}{'bf16 ms':>10}{'widened ms':>12}{'ratio':>8}"
          f"{'layer ratio':>13}")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for inputs, outputs in SHAPES:
            weight = torch.randn(outputs, inputs, generator=generator).bfloat16()
            for rows in args.rows:
                x = torch.randn(rows, inputs, generator=generator).bfloat16()
                times = interleaved_thread_time({
                    "bf16": lambda x=x, w=weight: F.linear(x, w),
                    "widened": lambda x=x, w=weight: widen.widened(x, w),
                }, rounds=args.rounds)
                layer = times["widened" if widen.widens(x, weight) else "bf16"]
                print(f"  {f'{inputs}x{outputs}':<12}{rows:>6}{times['bf16'] * 1e3:>10.2f}"
                      f"{times['widened'] * 1e3:>12.2f}{times['bf16'] / times['widened']:>7.2f}x"
                      f"{times['bf16'] / layer:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
