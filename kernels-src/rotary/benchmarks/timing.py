"""Time apply_rotary on CPU against eager PyTorch, torch.compile and a memory copy.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/rotary/torch-stable-abi213-cpu-x86_64-linux

Eager is Transformers' formula (``q * cos + rotate_half(q) * sin``, the same for k),
torch.compile is that formula compiled, in steady state. The copy is a ``copy_`` of
q and k (the bytes the in-place kernel must read and write once). Options: --batch,
--heads, --kv-heads, --seq, --head-dim (default 1, 32, 32, 2048, 128), --dtypes
(default float32 bfloat16), --capability (DEFAULT/AVX2/AVX512). Under a minute.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import torch
from kernelhub.benchmark.timing import MODEL_TOKENS, best_seconds, cpu_header, interleaved


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def eager_rotary(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def run(kernel: ModuleType, args: argparse.Namespace, dtype: torch.dtype) -> None:
    b, h, hk, s, d = args.batch, args.heads, args.kv_heads, args.seq, args.head_dim
    q = torch.randn(b, h, s, d, dtype=dtype)
    k = torch.randn(b, hk, s, d, dtype=dtype)
    angles = torch.randn(1, s, d // 2)
    cos = torch.cat([angles.cos()] * 2, dim=-1).to(dtype)
    sin = torch.cat([angles.sin()] * 2, dim=-1).to(dtype)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    q_copy, k_copy = torch.empty_like(q), torch.empty_like(k)
    compiled = torch.compile(eager_rotary, dynamic=False)
    for _ in range(3):  # compile and reach the steady state before timing
        compiled(q, k, cos, sin)

    def copy() -> None:
        q_copy.copy_(q)
        k_copy.copy_(k)

    t = args.min_run_time
    times = {
        "kernel, in place": best_seconds(lambda: kernel.apply_rotary(q, k, cos, sin), t),
        "kernel, out=": best_seconds(
            lambda: kernel.apply_rotary_out(q_out, k_out, q, k, cos, sin), t
        ),
        "kernel, allocating": best_seconds(
            lambda: kernel.apply_rotary_transformers(q, k, cos, sin), t
        ),
        "eager PyTorch": best_seconds(lambda: eager_rotary(q, k, cos, sin), t),
        "torch.compile": best_seconds(lambda: compiled(q, k, cos, sin), t),
        "copy_ of q and k": best_seconds(copy, t),
    }
    ours = times["kernel, in place"]
    moved = 2 * (q.numel() + k.numel()) * q.element_size()  # read + write q and k
    print(
        f"\napply_rotary  q [{b}, {h}, {s}, {d}]  k [{b}, {hk}, {s}, {d}]  {dtype}  "
        f"(threads {torch.get_num_threads()}, loops {kernel.cpu_capability()})"
    )
    for label, seconds in times.items():
        print(f"  {label:<22} {seconds * 1e3:8.3f} ms   {seconds / ours:5.2f}x kernel time")
    print(
        f"  bandwidth  in place {moved / ours / 1e9:6.1f} GB/s, out= "
        f"{moved / times['kernel, out='] / 1e9:6.1f} GB/s "
        f"(copy_: {moved / times['copy_ of q and k'] / 1e9:6.1f} GB/s)"
    )
    for label in ("eager PyTorch", "torch.compile"):
        print(
            f"  speedup vs {label:<14} in place {times[label] / ours:5.2f}x, out= "
            f"{times[label] / times['kernel, out=']:5.2f}x, allocating "
            f"{times[label] / times['kernel, allocating']:5.2f}x"
        )


def _model_case(kernel: ModuleType, name: str, tokens: int, min_run_time: float) -> None:
    dtype = getattr(torch, name)
    q = torch.randn(1, 32, tokens, 128, dtype=dtype)
    k = torch.randn(1, 8, tokens, 128, dtype=dtype)
    angles = torch.randn(1, tokens, 64)
    cos = torch.cat([angles.cos()] * 2, dim=-1).to(dtype)
    sin = torch.cat([angles.sin()] * 2, dim=-1).to(dtype)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    q_copy, k_copy = torch.empty_like(q), torch.empty_like(k)
    compiled = torch.compile(eager_rotary, dynamic=False)
    for _ in range(3):
        compiled(q, k, cos, sin)

    def copy() -> None:
        q_copy.copy_(q)
        k_copy.copy_(k)

    candidates = {
        "out=": lambda: kernel.apply_rotary_out(q_out, k_out, q, k, cos, sin),
        "layer": lambda: kernel.apply_rotary_transformers(q, k, cos, sin),
        "eager": lambda: eager_rotary(q, k, cos, sin),
        "compile": lambda: compiled(q, k, cos, sin),
        "copy": copy,
    }
    t = interleaved(candidates, min_run_time)
    print(f"  {name + ' ' + str(tokens) + 'x4096':<22}"
          + "".join(f"{t[key] * 1e3:10.3f}" for key in candidates)
          + f"{t['compile'] / t['out=']:9.2f}x{t['compile'] / t['layer']:9.2f}x"
          + f"{t['copy'] / t['out=']:8.0%}")


def model_shapes(kernel: ModuleType, dtypes: list[str], min_run_time: float) -> None:
    """Rotary at model shapes: the Transformers entry use_kernels installs (allocating,
    "layer") and out=, against eager, torch.compile and a copy of q and k."""
    print(f"\nrotary at model shapes (q [1, 32, tokens, 128], k [1, 8, tokens, 128]; loops "
          f"{kernel.cpu_capability()}); ratios: torch.compile time / ours")
    print(f"  {'shape':<22}{'out= ms':>10}{'layer ms':>10}{'eager ms':>10}{'compile':>10}"
          f"{'copy ms':>10}{'out=/cmp':>10}{'layer/cmp':>10}{'%copy':>8}")
    for name in dtypes:
        for tokens in MODEL_TOKENS:
            _model_case(kernel, name, tokens, min_run_time)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=32)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--capability", choices=["DEFAULT", "AVX2", "AVX512"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    parser.add_argument("--model-shapes", action=argparse.BooleanOptionalAction, default=True,
                        help="also the model-shape table (default on)")
    parser.add_argument("--model-min-run-time", type=float, default=1.0)
    args = parser.parse_args(argv)
    # torch.compile baselines: one static graph per shape and dtype, every one compiled.
    torch._dynamo.config.recompile_limit = 64

    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    if args.capability is not None:
        kernel.set_cpu_capability(args.capability)
    print(cpu_header())
    for name in args.dtypes:
        run(kernel, args, getattr(torch, name))
    if args.model_shapes:
        model_shapes(kernel, args.dtypes, args.model_min_run_time)


if __name__ == "__main__":
    main()
