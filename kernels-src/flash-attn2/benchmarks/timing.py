"""Time causal attention on CPU: this kernel vs sdpa, eager PyTorch and torch.compile.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/flash-attn2/torch213-cxx11-cpu-x86_64-linux

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
from kernelhub.benchmark.timing import best_seconds, cpu_header, interleaved


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
    compiled = torch.compile(eager_attention, dynamic=False) if args.compile else None
    for _ in range(3 if compiled else 0):  # compile and reach the steady state before timing
        compiled(q, k, v, mask)
    times = {
        "kernel, out=": best_seconds(
            lambda: kernel.attention(q, k, v, causal=True, out=out), args.min_run_time
        ),
        "kernel, allocating": best_seconds(
            lambda: kernel.attention(q, k, v, causal=True), args.min_run_time
        ),
        "sdpa (is_causal)": best_seconds(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.min_run_time
        ),
        "eager (explicit mask)": best_seconds(
            lambda: eager_attention(q, k, v, mask), args.min_run_time
        ),
    }
    if compiled is not None:
        times["torch.compile(eager, dynamic=False)"] = best_seconds(
            lambda: compiled(q, k, v, mask), args.min_run_time)
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


MODEL_SEQS = (128, 512, 1024, 2048, 4096)
EAGER_MAX_SEQ = 1024
"""Eager and compiled attention materialise [heads, seq, seq] scores: only up to here."""


def _model_case(kernel: ModuleType, name: str, seq: int | str, compiled: object, min_run_time: float) -> None:
    dtype = getattr(torch, name)
    decode = seq == "decode"
    seq_q, seq_k = (1, 4096) if decode else (seq, seq)
    q = torch.randn(1, 32, seq_q, 128, dtype=dtype)
    k, v = (torch.randn(1, 8, seq_k, 128, dtype=dtype) for _ in range(2))
    out = torch.empty_like(q)
    causal = not decode
    candidates = {
        "out=": lambda: kernel.attention(q, k, v, causal=causal, out=out),
        "layer": lambda: kernel.attention(q, k, v, causal=causal),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                       enable_gqa=True),
    }
    if seq_k <= EAGER_MAX_SEQ:
        kr, vr = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
        mask = torch.zeros(seq_q, seq_k, dtype=dtype).masked_fill(
            ~torch.ones(seq_q, seq_k, dtype=torch.bool).tril(seq_k - seq_q),
            float("-inf"))
        candidates["eager"] = lambda: eager_attention(q, kr, vr, mask)
        if compiled is not None:
            for _ in range(3):
                compiled(q, kr, vr, mask)
            candidates["compile"] = lambda: compiled(q, kr, vr, mask)
    t = interleaved(candidates, min_run_time, rounds=3)
    pairs = seq_q * seq_k / (2 if causal else 1)
    flops = 4 * 32 * pairs * 128
    cells = "".join(f"{t[key] * 1e3:10.3f}" if key in t else f"{'-':>10}"
                    for key in ("out=", "layer", "sdpa", "eager", "compile"))
    label = f"{name} " + ("decode 1x4096" if decode else f"causal {seq}")
    print(f"  {label:<24}{cells}{t['sdpa'] / t['out=']:10.2f}x"
          f"{t['sdpa'] / t['layer']:10.2f}x{flops / t['out='] / 1e9:9.1f}")


def model_shapes(kernel: ModuleType, dtypes: list[str], min_run_time: float,
                 compile: bool = True) -> None:
    """Causal prefill at seq 128..4096 and decode (one query against a 4096-key cache), with
    Llama-shaped heads (32 query heads, 8 KV heads, dim 128): the allocating call that
    Transformers' attention interface makes ("layer"), out=, sdpa (the target), and eager /
    torch.compile of explicit-mask attention where its scores fit. The op chooses per shape
    between its loops and torch's sdpa (``set_attention_dispatch``); the choices it made
    are printed after the table."""
    print(f"\nattention at model shapes (32 query / 8 KV heads, head dim 128; loops "
          f"{kernel.cpu_capability()}); ratios: sdpa time / ours (higher is faster)")
    print(f"  {'case':<24}{'out= ms':>10}{'layer ms':>10}{'sdpa ms':>10}{'eager ms':>10}"
          f"{'compile':>10}{'out=/sdpa':>11}{'layer/sdpa':>11}{'GFLOP/s':>9}")
    compiled = torch.compile(eager_attention, dynamic=False) if compile else None
    for name in dtypes:
        for seq in (*MODEL_SEQS, "decode"):
            _model_case(kernel, name, seq, compiled, min_run_time)
    decisions = kernel.attention_dispatch_decisions()
    print("  per-shape choice (set_attention_dispatch('auto'): loops or torch's sdpa, timed on "
          "each bucket's first call):")
    print("\n".join(f"    {line}" for line in decisions) or "    (none)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    parser.add_argument("--model-shapes", action=argparse.BooleanOptionalAction, default=True,
                        help="also the model-shape table (default on)")
    parser.add_argument("--model-min-run-time", type=float, default=0.3)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                        help="the torch.compile baseline (--no-compile: minutes less where "
                             "machine time is scarce, e.g. a lent AMX machine)")
    args = parser.parse_args(argv)
    # torch.compile baselines: one static graph per shape and dtype, every one compiled.
    torch._dynamo.config.recompile_limit = 64
    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    print(cpu_header())
    for name in args.dtypes:
        run(kernel, args, getattr(torch, name))
    if args.model_shapes:
        model_shapes(kernel, args.dtypes, args.model_min_run_time, args.compile)


if __name__ == "__main__":
    main()
