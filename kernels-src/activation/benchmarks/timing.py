"""Time silu_and_mul against eager PyTorch, torch.compile and a memory copy.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/activation/torch213-cxx11-cpu-x86_64-linux

or, for a package dir without metadata (a hand-made development build):

    python benchmarks/timing.py --import-dir /path/containing/activation-package

Options: --tokens (rows, default 2048), --d (output width, default 4096, so the
input is [2048, 8192]), --dtypes (default float32 bfloat16), --capability
(DEFAULT/AVX2/AVX512/AVX512_BF16 loops; default the best this CPU runs), --device (cpu, or
cuda/mps/xpu with a variant built for that backend: the copy is then a
device-to-device copy). Takes under a minute.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import (
    MODEL_HEADER,
    MODEL_TOKENS,
    cpu_header,
    interleaved,
    model_row,
)


def load_kernel(args: argparse.Namespace) -> ModuleType:
    if args.import_dir is not None:
        sys.path.insert(0, str(args.import_dir))
        return importlib.import_module("activation")
    import kernelhub

    return kernelhub.get_local_kernel(args.path)


def synchronized(fn, device: str):
    """fn, waiting for the device after each call where the timer does not.

    torch.utils.benchmark synchronizes CUDA itself; MPS and XPU queue work
    asynchronously and would otherwise be timed at enqueue speed.
    """
    if device in ("mps", "xpu"):
        sync = getattr(torch, device).synchronize
        return lambda: (fn(), sync())
    return fn


def eager_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def run(
    kernel: ModuleType, tokens: int, d: int, dtype: torch.dtype, min_run_time: float, device: str
) -> None:
    x = torch.randn(tokens, 2 * d, dtype=dtype, device=device)
    out = torch.empty(tokens, d, dtype=dtype, device=device)
    copy_dst = torch.empty_like(x)
    layer = kernel.layers.SiluAndMul()
    compiled = torch.compile(eager_silu_and_mul, dynamic=False)
    for _ in range(3):  # compile and reach the steady state before timing
        compiled(x)

    candidates = {
        "kernel, preallocated out": lambda: kernel.silu_and_mul(out, x),
        "kernel, allocating (layer)": lambda: layer(x),
        "eager PyTorch": lambda: eager_silu_and_mul(x),
        "torch.compile": lambda: compiled(x),
        "copy_ of the input": lambda: copy_dst.copy_(x),
    }
    # Interleaved rounds, each candidate's best block: on a shared machine a neighbour's
    # burst then slows one round of every candidate instead of all of one candidate.
    times = interleaved(
        {label: synchronized(fn, device) for label, fn in candidates.items()}, min_run_time
    )
    element = x.element_size()
    kernel_bytes = (x.numel() + out.numel()) * element
    copy_bytes = 2 * x.numel() * element
    ours = times["kernel, preallocated out"]

    where = (
        f"threads {torch.get_num_threads()}, loops {kernel.cpu_capability()}"
        if device == "cpu"
        else f"{device}: {device_name(device)}"
    )
    print(f"\nsilu_and_mul  input [{tokens}, {2 * d}] {dtype}  ({where})")
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


def _model_case(kernel: ModuleType, name: str, tokens: int, layer: torch.nn.Module, min_run_time: float) -> None:
    dtype = getattr(torch, name)
    x = torch.randn(tokens, 2 * 11008, dtype=dtype)
    out = torch.empty(tokens, 11008, dtype=dtype)
    copy_dst = torch.empty_like(x)
    compiled = torch.compile(eager_silu_and_mul, dynamic=False)
    for _ in range(3):
        compiled(x)
    candidates = {
        "out=": lambda: kernel.silu_and_mul(out, x),
        "layer": lambda: layer(x),
        "eager": lambda: eager_silu_and_mul(x),
        "compile": lambda: compiled(x),
        "copy": lambda: copy_dst.copy_(x),
    }
    times = interleaved(candidates, min_run_time)
    moved = (x.numel() + out.numel()) * x.element_size()
    print(model_row(f"{name} {tokens}x11008", times, moved, 2 * x.numel() * x.element_size()))


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    if device == "xpu":
        return torch.xpu.get_device_name()
    return device


def model_shapes(kernel: ModuleType, dtypes: list[str], min_run_time: float) -> None:
    """silu_and_mul at model shapes, on the layer path and on out=, fp32 and bf16."""
    print(f"\nsilu_and_mul at model shapes (input [tokens, 2 x 11008]; loops "
          f"{kernel.cpu_capability()}); ratios: torch.compile time / ours")
    print(MODEL_HEADER)
    layer = kernel.layers.SiluAndMul()
    for name in dtypes:
        for tokens in MODEL_TOKENS:
            _model_case(kernel, name, tokens, layer, min_run_time)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--import-dir", type=Path, help="import `activation` from this dir")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--d", type=int, default=4096)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--capability", choices=["DEFAULT", "AVX2", "AVX512", "AVX512_BF16"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mps", "xpu"])
    parser.add_argument("--model-shapes", action=argparse.BooleanOptionalAction, default=True,
                        help="also the model-shape table (CPU; default on)")
    parser.add_argument("--model-min-run-time", type=float, default=1.0)
    args = parser.parse_args(argv)
    # torch.compile baselines: one static graph per shape and dtype, every one compiled.
    torch._dynamo.config.recompile_limit = 64
    if (args.path is None) == (args.import_dir is None):
        parser.error("give either a built variant path or --import-dir")

    kernel = load_kernel(args)
    if args.capability is not None:
        kernel.set_cpu_capability(args.capability)
    print(cpu_header())
    for name in args.dtypes:
        run(kernel, args.tokens, args.d, getattr(torch, name), args.min_run_time, args.device)
    if args.model_shapes and args.device == "cpu":
        model_shapes(kernel, args.dtypes, args.model_min_run_time)


if __name__ == "__main__":
    main()
