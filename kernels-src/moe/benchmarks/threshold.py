"""Measure from how many rows per expert ATen's GEMMs beat the kernel's few-rows loop.

Every expert of a layer-shaped problem gets exactly ``n`` rows; the experts op runs once
with every expert on the few-rows loop (``gemm_rows`` above ``n``) and once with every
expert on ATen's GEMMs (``gemm_rows=1``), rounds interleaved, thread CPU time on one
thread (the shared machine's load moves wall time by ±30%), median of the rounds. The
first ``n`` from which the GEMMs win is the row of ``kGemmFrom`` (moe_cpu.cpp) for this
CPU and dtype. Few experts are enough (the time per expert does not depend on how many
there are), which keeps Mixtral's float32 weights at 1.4 GB. ``gpt_oss`` (not run by default)
is the transposed layout with biases, whose GEMMs can win at 1 row as well (the table's
``below``).

    python benchmarks/threshold.py build/moe/torch213-cxx11-cpu-x86_64-linux \\
        [--families qwen3_moe mixtral gpt_oss] [--dtypes float32 bfloat16] [--rows 1 4 8 16 32 64]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from kernelhub import get_local_kernel
from kernelhub.benchmark.timing import cpu_header

SHAPES = {"qwen3_moe": (2048, 768, 4), "mixtral": (4096, 14336, 2), "gpt_oss": (2880, 2880, 4)}
"""Family → (hidden, expert intermediate, experts used for the measurement)."""
TRANSPOSED = {"gpt_oss"}
"""Families whose experts store weights transposed ([E, H, 2I], [E, I, H]) with biases and
the clamped SwiGLU over alternating columns (gpt-oss), the op's other loop."""


def cpu_seconds(fn: Callable[[], Any], calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def crossing(moe: Any, family: str, dtype: torch.dtype, rows: list[int], rounds: int
             ) -> int | None:
    hidden_size, inter, experts = SHAPES[family]
    gen = torch.Generator().manual_seed(0)
    gate_up = (torch.randn(experts, 2 * inter, hidden_size, generator=gen)
               / hidden_size**0.5).to(dtype)
    down = (torch.randn(experts, hidden_size, inter, generator=gen) / inter**0.5).to(dtype)
    kwargs: dict[str, Any] = {}
    activation = 0
    if family in TRANSPOSED:
        gate_up, down = gate_up.transpose(1, 2).contiguous(), down.transpose(1, 2).contiguous()
        activation = 3
        kwargs = dict(gate_up_bias=torch.randn(experts, 2 * inter, generator=gen).to(dtype),
                      down_bias=torch.randn(experts, hidden_size, generator=gen).to(dtype),
                      transposed=True, interleaved=True)
    first_win = None
    for n in rows:
        hidden = torch.randn(n * experts, hidden_size, generator=gen).to(dtype)
        index = torch.arange(experts).repeat_interleave(n)[:, None]
        weights = torch.ones(n * experts, 1, dtype=dtype)
        args = (hidden, index, weights, gate_up, down, activation)
        paths = {"loop": n + 1, "gemm": 1}
        times: dict[str, list[float]] = {path: [] for path in paths}
        calls = max(1, 8 // n)
        with torch.inference_mode():
            for gemm_rows in paths.values():  # warm-up: first touch, oneDNN's plans
                moe.experts(*args, gemm_rows=gemm_rows, **kwargs)
            for _ in range(rounds):
                for path, gemm_rows in paths.items():
                    times[path].append(cpu_seconds(
                        lambda a=args, g=gemm_rows: moe.experts(*a, gemm_rows=g, **kwargs),
                        calls))
        loop, gemm = (statistics.median(times[p]) for p in paths)
        print(f"  {family:<10} {str(dtype)[6:]:<9} rows {n:>4}   loop {loop * 1e3:9.2f} ms"
              f"   gemm {gemm * 1e3:9.2f} ms   loop/gemm {loop / gemm:5.2f}", flush=True)
        if first_win is None and gemm < loop:
            first_win = n
    return first_win


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant")
    parser.add_argument("--families", nargs="+", default=["qwen3_moe", "mixtral"],
                        choices=list(SHAPES))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 4, 8, 16, 24, 32, 48, 64])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    moe = get_local_kernel(args.variant)
    print(cpu_header())
    print("thread CPU time per call on 1 thread, median of interleaved rounds; every "
          "expert gets the same rows")
    for dtype in (getattr(torch, d) for d in args.dtypes):
        for family in args.families:
            first = crossing(moe, family, dtype, args.rows, args.rounds)
            print(f"  -> {family} {str(dtype)[6:]}: GEMMs win from "
                  f"{first if first is not None else 'no measured'} rows", flush=True)


if __name__ == "__main__":
    main()
