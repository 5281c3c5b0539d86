"""Time the Triton silu_and_mul on a GPU against eager PyTorch, torch.compile and a copy.

Usage: python benchmarks/timing.py build/triton-activation/torch-cuda [--device cuda]
Needs a GPU (Triton's CPU interpreter is for tests, not timing). Options:
--tokens (default 8192), --d (default 8192), --dtypes (default float32 bfloat16),
--device (cuda or xpu). Then the model-shape table: input [tokens, 2 x 11008] for
tokens 1, 128, 512, 2048, the layer kernelize installs (allocating) and out=.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.utils import benchmark

MODEL_TOKENS = (1, 128, 512, 2048)
"""Model shapes: tokens x intermediate 11008 (Llama-7B-sized MLP)."""


def best_seconds(fn, device: str, min_run_time: float = 1.0) -> float:
    """Best of repeated blocks, waiting for the device after each call."""
    sync = getattr(torch, device).synchronize
    fn()
    sync()
    timer = benchmark.Timer(stmt="fn(); sync()", globals={"fn": fn, "sync": sync},
                            num_threads=torch.get_num_threads())
    # The fastest block, not the median: on a shared machine the other processes only
    # ever slow a block down.
    return min(timer.blocked_autorange(min_run_time=min_run_time).times)


def eager(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def header(device: str) -> str:
    """The device and the host CPU this ran on."""
    from kernelhub.system import cpu_summary

    name = getattr(torch, device).get_device_name()
    return f"{device}: {name}; host {cpu_summary()}; torch {torch.__version__}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--d", type=int, default=8192)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "xpu"])
    parser.add_argument("--model-shapes", action=argparse.BooleanOptionalAction, default=True,
                        help="also the model-shape table (default on)")
    args = parser.parse_args(argv)
    # torch.compile baselines: one static graph per shape and dtype, every one compiled.
    torch._dynamo.config.recompile_limit = 64
    if not getattr(torch, args.device).is_available():
        parser.error(f"needs a {args.device} device; on CPU the kernel only runs under the "
                     "interpreter")
    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    print(header(args.device))
    for name in args.dtypes:
        run(kernel, args.tokens, args.d, getattr(torch, name), args.device)
    if args.model_shapes:
        model_shapes(kernel, args.dtypes, args.device)


def run(kernel: ModuleType, tokens: int, d: int, dtype: torch.dtype, device: str) -> None:
    x = torch.randn(tokens, 2 * d, dtype=dtype, device=device)
    out = torch.empty(tokens, d, dtype=dtype, device=device)
    copy_dst = torch.empty_like(x)
    compiled = torch.compile(eager, dynamic=False)
    times = {
        "triton kernel": best_seconds(lambda: kernel.silu_and_mul(out, x), device),
        "eager PyTorch": best_seconds(lambda: eager(x), device),
        "torch.compile": best_seconds(lambda: compiled(x), device),
        "copy_ of the input": best_seconds(lambda: copy_dst.copy_(x), device),
    }
    ours = times["triton kernel"]
    moved = (x.numel() + out.numel()) * x.element_size()
    print(f"\nsilu_and_mul [{tokens}, {2 * d}] {dtype}")
    for label, seconds in times.items():
        print(f"  {label:<20} {seconds * 1e6:9.1f} us   {seconds / ours:5.2f}x kernel time")
    copy_rate = 2 * x.numel() * x.element_size() / times["copy_ of the input"]
    print(f"  kernel {moved / ours / 1e9:7.1f} GB/s (copy_: {copy_rate / 1e9:7.1f} GB/s)")


def _model_case(kernel: ModuleType, layer: torch.nn.Module, compiled, name: str, tokens: int,
                device: str) -> None:
    dtype = getattr(torch, name)
    x = torch.randn(tokens, 2 * 11008, dtype=dtype, device=device)
    out = torch.empty(tokens, 11008, dtype=dtype, device=device)
    copy_dst = torch.empty_like(x)
    candidates = {
        "out=": lambda: kernel.silu_and_mul(out, x),
        "layer": lambda: layer(x),
        "eager": lambda: eager(x),
        "compile": lambda: compiled(x),
        "copy": lambda: copy_dst.copy_(x),
    }
    t = {key: best_seconds(fn, device, 0.3) for key, fn in candidates.items()}
    moved = (x.numel() + out.numel()) * x.element_size()
    copy_gbs = 2 * x.numel() * x.element_size() / t["copy"]
    print(f"  {name + ' ' + str(tokens) + 'x11008':<22}"
          + "".join(f"{t[key] * 1e6:10.1f}" for key in candidates)
          + f"{t['compile'] / t['out=']:9.2f}x{t['compile'] / t['layer']:9.2f}x"
          + f"{moved / t['out='] / copy_gbs:8.0%}")


def model_shapes(kernel: ModuleType, dtypes: list[str], device: str) -> None:
    """silu_and_mul at model shapes: the layer (allocating) and out=, against
    torch.compile, with out='s share of copy bandwidth."""
    print("\nsilu_and_mul at model shapes (input [tokens, 2 x 11008]); ratios: torch.compile "
          "time / ours")
    print(f"  {'shape':<22}{'out= us':>10}{'layer us':>10}{'eager us':>10}{'compile':>10}"
          f"{'copy us':>10}{'out=/cmp':>10}{'layer/cmp':>10}{'%copy':>8}")
    layer = kernel.layers.SiluAndMul()
    compiled = torch.compile(eager, dynamic=False)
    for name in dtypes:
        for tokens in MODEL_TOKENS:
            _model_case(kernel, layer, compiled, name, tokens, device)


if __name__ == "__main__":
    main()
