"""Time the gated-delta-net norms at Qwen3-Next / Qwen3.5 shapes on the CPU: the layers
kernelize installs (``layers.RMSNormGated``, ``layers.GemmaRMSNorm`` for
``RMSNormZeroCentered``) against the PyTorch forward Transformers runs without them and
torch.compile of that forward.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/gated_timing.py build/rmsnorm/torch-stable-abi213-cpu-x86_64-linux

Shapes: Qwen3-Next-80B-A3B's config (hidden 2048, 32 value heads of 128; the gated delta
net normalises ``[tokens * 32, 128]`` rows with its output gate) and a hidden of 4096 for
the zero-centred norm; tokens 1 (decode), 128, 512 and 2048 (prefill).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import cpu_header, interleaved

EPS = 1e-6
VALUE_HEADS, HEAD_V_DIM = 32, 128
TOKENS = (1, 128, 512, 2048)


def qwen3_5_rms_norm_gated(x, gate, weight):
    """Transformers' Qwen3_5RMSNormGated.forward."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    h = weight * h.to(input_dtype)
    return (h * F.silu(gate.to(torch.float32))).to(input_dtype)


def qwen3_5_rms_norm(x, weight):
    """Transformers' Qwen3_5RMSNorm.forward (RMSNormZeroCentered)."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return (h * (1.0 + weight.float())).type_as(x)


def _layer(cls: type, weight: torch.Tensor, **attrs) -> torch.nn.Module:
    layer = cls()
    layer.weight = torch.nn.Parameter(weight, requires_grad=False)
    for key, value in attrs.items():
        setattr(layer, key, value)
    return layer


CPU_TIME = False
"""--cpu-time: time each candidate by this thread's CPU time on one torch thread (a shared,
loaded machine stretches wall time by whatever else runs; CPU time it does not)."""


def cpu_seconds(fn, min_run_time: float, rounds: int = 5) -> float:
    """The best per-call thread CPU time of ``rounds`` blocks of calls."""
    fn()
    start = time.thread_time()
    fn()
    per_call = max(time.thread_time() - start, 1e-6)
    calls = max(3, int(min_run_time / rounds / per_call))
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - start) / calls)
    return best


def _timed(min_run_time: float, *args: torch.Tensor, **candidates) -> dict[str, float]:
    """Each candidate called on ``args``, interleaved (keys: ``kernel_layer`` → "kernel layer")."""
    calls = {key.replace("_", " "): (lambda fn=fn: fn(*args)) for key, fn in candidates.items()}
    if CPU_TIME:
        return {key: cpu_seconds(fn, min_run_time) for key, fn in calls.items()}
    return interleaved(calls, min_run_time)


def _row(label: str, times: dict[str, float]) -> str:
    ours = times["kernel layer"]
    return (f"  {label:<26}{ours * 1e3:10.3f}{times['eager'] * 1e3:10.3f}"
            f"{times['compile'] * 1e3:10.3f}{times['eager'] / ours:9.2f}x"
            f"{times['compile'] / ours:9.2f}x")


HEADER = (f"  {'shape':<26}{'ours ms':>10}{'eager ms':>10}{'compile':>10}"
          f"{'eager/us':>10}{'cmp/us':>10}")


def gated(kernel: ModuleType, dtype: torch.dtype, min_run_time: float) -> None:
    weight = torch.rand(HEAD_V_DIM, dtype=dtype) + 0.5
    layer = _layer(kernel.layers.RMSNormGated, weight, variance_epsilon=EPS, activation="silu")
    compiled = torch.compile(qwen3_5_rms_norm_gated, dynamic=False)
    for tokens in TOKENS:
        x = torch.randn(tokens * VALUE_HEADS, HEAD_V_DIM, dtype=dtype)
        gate = torch.randn_like(x)
        for _ in range(3):
            compiled(x, gate, weight)
        torch.testing.assert_close(layer(x, gate), qwen3_5_rms_norm_gated(x, gate, weight),
                                   rtol=2e-2, atol=2e-2)
        times = _timed(min_run_time, x, gate, weight,
                       kernel_layer=lambda x, gate, _w: layer(x, gate),
                       eager=qwen3_5_rms_norm_gated, compile=compiled)
        print(_row(f"{str(dtype)[6:]} [{tokens}x{VALUE_HEADS}, {HEAD_V_DIM}]", times))


def zero_centered(kernel: ModuleType, dtype: torch.dtype, hidden: int,
                  min_run_time: float) -> None:
    weight = torch.randn(hidden, dtype=dtype) * 0.1
    layer = _layer(kernel.layers.GemmaRMSNorm, weight, eps=EPS)
    compiled = torch.compile(qwen3_5_rms_norm, dynamic=False)
    for tokens in TOKENS:
        x = torch.randn(tokens, hidden, dtype=dtype)
        for _ in range(3):
            compiled(x, weight)
        torch.testing.assert_close(layer(x), qwen3_5_rms_norm(x, weight), rtol=2e-2, atol=2e-2)
        times = _timed(min_run_time, x, weight, kernel_layer=lambda x, _w: layer(x),
                       eager=qwen3_5_rms_norm, compile=compiled)
        print(_row(f"{str(dtype)[6:]} [{tokens}, {hidden}]", times))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=0.5)
    parser.add_argument("--cpu-time", action="store_true",
                        help="one torch thread, timed by thread CPU time (loaded machines)")
    args = parser.parse_args(argv)
    if args.cpu_time:
        global CPU_TIME
        CPU_TIME = True
        torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = 64  # one static graph per shape and dtype

    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    print(cpu_header())
    clock = "thread CPU time, 1 thread" if CPU_TIME else "wall time, interleaved"
    print(f"loops {kernel.cpu_capability()}; {clock}; ratios: PyTorch (eager, torch.compile) "
          "time / ours")
    print(f"\nRMSNormGated (Qwen3.5 / Qwen3-Next gated delta net output norm, silu gate)\n{HEADER}")
    for name in args.dtypes:
        gated(kernel, getattr(torch, name), args.min_run_time)
    for hidden in (2048, 4096):
        print(f"\nRMSNormZeroCentered (Qwen3.5 / Qwen3-Next norm, hidden {hidden})\n{HEADER}")
        for name in args.dtypes:
            zero_centered(kernel, getattr(torch, name), hidden, args.min_run_time)


if __name__ == "__main__":
    main()
