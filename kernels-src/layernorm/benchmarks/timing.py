"""Time layer_norm on CPU against eager PyTorch, torch.compile and a memory copy
of the same size.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/layernorm/torch-stable-abi213-cpu-x86_64-linux

Options: --rows, --hidden (default 4096 x 4096), --dtypes (default float32
bfloat16), --capability (DEFAULT/AVX2/AVX512 loops; default the best this CPU
runs). Eager and compiled references are torch.nn.functional.layer_norm.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import (
    MODEL_HEADER,
    MODEL_TOKENS,
    best_seconds,
    cpu_header,
    interleaved,
    model_row,
)

EPS = 1e-5


def eager_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, EPS)


def report(title: str, times: dict[str, float], moved_bytes: int, copy_bytes: int) -> None:
    ours = times["kernel, preallocated out"]
    print(f"\n{title}  (threads {torch.get_num_threads()})")
    for label, seconds in times.items():
        print(f"  {label:<28} {seconds * 1e3:8.3f} ms   {seconds / ours:5.2f}x kernel time")
    kernel_gbs = moved_bytes / ours / 1e9
    copy_gbs = copy_bytes / times["copy_ of the input"] / 1e9
    print(
        f"  kernel bandwidth  {kernel_gbs:6.1f} GB/s = {kernel_gbs / copy_gbs:4.0%} of copy_ "
        f"({copy_gbs:.1f} GB/s)"
    )
    for ref in ("eager PyTorch", "torch.compile"):
        print(
            f"  speedup vs {ref:<14} {times[ref] / ours:5.2f}x "
            f"(allocating: {times[ref] / times['kernel, allocating']:5.2f}x)"
        )


def run(kernel: ModuleType, rows: int, hidden: int, dtype: torch.dtype, min_run_time: float):
    x = torch.randn(rows, hidden, dtype=dtype)
    weight = torch.randn(hidden, dtype=dtype)
    out = torch.empty_like(x)
    copy_dst = torch.empty_like(x)
    element = x.element_size()
    copy_time = best_seconds(lambda: copy_dst.copy_(x), min_run_time)

    bias = torch.randn(hidden, dtype=dtype)
    compiled = torch.compile(eager_layer_norm, dynamic=False)
    for _ in range(3):  # compile and reach the steady state before timing
        compiled(x, weight, bias)
    times = {
        "kernel, preallocated out": best_seconds(
            lambda: kernel.layer_norm(x, weight, bias, EPS, out=out), min_run_time
        ),
        "kernel, allocating": best_seconds(
            lambda: kernel.layer_norm(x, weight, bias, EPS), min_run_time
        ),
        "eager PyTorch": best_seconds(lambda: eager_layer_norm(x, weight, bias), min_run_time),
        "torch.compile": best_seconds(lambda: compiled(x, weight, bias), min_run_time),
        "copy_ of the input": copy_time,
    }
    report(
        f"layer_norm [{rows}, {hidden}] {dtype} (loops {kernel.cpu_capability()})",
        times,
        2 * x.numel() * element,
        2 * x.numel() * element,
    )


def _model_case(kernel: ModuleType, name: str, tokens: int, min_run_time: float) -> None:
    dtype = getattr(torch, name)
    x = torch.randn(tokens, 4096, dtype=dtype)
    model_layer = torch.nn.LayerNorm(4096, eps=EPS, dtype=dtype)
    weight, bias = model_layer.weight.detach(), model_layer.bias.detach()
    forward = kernel.layers.LayerNorm.forward
    out, copy_dst = torch.empty_like(x), torch.empty_like(x)
    compiled = torch.compile(eager_layer_norm, dynamic=False)
    for _ in range(3):
        compiled(x, weight, bias)
    candidates = {
        "out=": lambda: kernel.layer_norm(x, weight, bias, EPS, out=out),
        "layer": lambda: forward(model_layer, x),
        "eager": lambda: eager_layer_norm(x, weight, bias),
        "compile": lambda: compiled(x, weight, bias),
        "copy": lambda: copy_dst.copy_(x),
    }
    with torch.no_grad():
        times = interleaved(candidates, min_run_time)
    moved = 2 * x.numel() * x.element_size()
    print(model_row(f"{name} {tokens}x4096", times, moved, moved))


def model_shapes(kernel: ModuleType, dtypes: list[str], min_run_time: float) -> None:
    """layer_norm at model shapes: the LayerNorm layer kernelize installs, and out=."""
    print(f"\nlayer_norm at model shapes ([tokens, 4096]; loops {kernel.cpu_capability()}); "
          "ratios: torch.compile time / ours")
    print(MODEL_HEADER)
    for name in dtypes:
        for tokens in MODEL_TOKENS:
            _model_case(kernel, name, tokens, min_run_time)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=4096)
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
        run(kernel, args.rows, args.hidden, getattr(torch, name), args.min_run_time)
    if args.model_shapes:
        model_shapes(kernel, args.dtypes, args.model_min_run_time)


if __name__ == "__main__":
    main()
