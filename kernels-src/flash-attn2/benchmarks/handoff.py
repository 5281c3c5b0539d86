"""What the attention layer costs when its per-shape dispatch hands a shape to torch's sdpa.

Issue 32.2: where the CPU op picks torch's sdpa, calling the op must cost no more than
calling sdpa directly. This times, at Llama/Qwen3 attention shapes (16 query heads, 4 KV
heads, head dim 128; causal prefills and decode steps over a KV cache):

* ``sdpa`` — ``F.scaled_dot_product_attention(..., enable_gqa=True)``, then
  ``transpose(1, 2).contiguous()`` as Transformers' sdpa path does;
* ``op`` — this kernel's allocating ``attention`` with the dispatch set to ``torch``;
* ``transformers`` — its ``attention_forward`` (Transformers' attention interface), likewise;
* ``op, out=`` — ``attention(..., out=)`` into a ``[B, S, H, D]`` buffer (a copy of sdpa's
  result is the price of ``out=``).

It then asks the ``auto`` dispatch which side it picks for each shape on this machine.
Timing: the main thread's CPU time on one thread (``time.thread_time``) by default, so a
shared machine's load does not count; rounds interleaved, medians. Prints the CPU line.

    python benchmarks/handoff.py build/flash-attn2/torch213-cxx11-cpu-x86_64-linux [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

HEADS_Q, HEADS_KV, HEAD_DIM = 16, 4, 128
CASES = [("prefill", 64, 64), ("prefill", 256, 256), ("prefill", 512, 512),
         ("decode", 1, 64), ("decode", 1, 256), ("decode", 1, 512)]
"""(phase, query length, key length)."""


def medians(fns: dict[str, Callable[[], object]], rounds: int,
            clock: Callable[[], float]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for fn in fns.values():  # warm-up: allocator, oneDNN's kernels
        fn()
    for i in range(rounds):
        for name in order if i % 2 == 0 else order[::-1]:
            start = clock()
            fns[name]()
            times[name].append(clock() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    from kernelhub import get_local_kernel
    from kernelhub.benchmark.timing import cpu_header

    torch.set_num_threads(args.threads)
    kernel: ModuleType = get_local_kernel(args.path)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    print(cpu_header())
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; torch "
          f"{torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{'thread CPU time' if args.threads == 1 else 'wall time'}; medians of "
          f"{args.rounds} interleaved rounds; {HEADS_Q}/{HEADS_KV} heads, d {HEAD_DIM}")
    print(f"{'dtype':<10}{'case':<16}{'sdpa us':>10}{'op us':>10}{'vs sdpa':>9}"
          f"{'transformers us':>17}{'vs sdpa':>9}{'op out= us':>12}{'auto picks':>12}")
    module = torch.nn.Module()
    module.is_causal = True
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for phase, seq_q, seq_k in CASES:
            g = torch.Generator().manual_seed(0)
            # Transformers' layout: [B, S, H, D] projections viewed as [B, H, S, D].
            q = torch.randn(1, seq_q, HEADS_Q, HEAD_DIM, generator=g).to(dtype).transpose(1, 2)
            k, v = (torch.randn(1, HEADS_KV, seq_k, HEAD_DIM, generator=g).to(dtype)
                    for _ in range(2))
            causal = seq_q > 1
            out = torch.empty(1, seq_q, HEADS_Q, HEAD_DIM, dtype=dtype).transpose(1, 2)

            def sdpa(q=q, k=k, v=v, causal=causal):
                return F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=True).transpose(1, 2).contiguous()

            previous = kernel.set_attention_dispatch("torch")
            try:
                with torch.inference_mode():
                    t = medians({
                        "sdpa": sdpa,
                        "op": lambda q=q, k=k, v=v, c=causal: kernel.attention(q, k, v, causal=c),
                        "transformers": lambda q=q, k=k, v=v: kernel.attention_forward(
                            module, q, k, v, None),
                        "out": lambda q=q, k=k, v=v, c=causal, o=out: kernel.attention(
                            q, k, v, causal=c, out=o),
                    }, args.rounds, clock)
                kernel.set_attention_dispatch("auto")
                known = set(kernel.attention_dispatch_decisions())
                with torch.inference_mode():
                    kernel.attention(q, k, v, causal=causal)
                new = set(kernel.attention_dispatch_decisions()) - known
                pick = "?" if len(new) != 1 else "sdpa" if "torch sdpa (" in new.pop() else "kernel"
            finally:
                kernel.set_attention_dispatch(previous)
            case = f"{phase} {seq_q}x{seq_k}"
            print(f"{dtype_name:<10}{case:<16}{t['sdpa'] * 1e6:>10.1f}{t['op'] * 1e6:>10.1f}"
                  f"{t['sdpa'] / t['op']:>8.2f}x{t['transformers'] * 1e6:>17.1f}"
                  f"{t['sdpa'] / t['transformers']:>8.2f}x{t['out'] * 1e6:>12.1f}{pick:>12}",
                  flush=True)


if __name__ == "__main__":
    main()
