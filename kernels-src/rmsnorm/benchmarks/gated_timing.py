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


def falcon_h1_rms_norm_gated(x, gate, weight, n_groups=1, norm_before_gate=True):
    """Transformers' FalconH1RMSNormGated.forward (Mamba-2's order with the gate first)."""
    input_dtype = x.dtype
    if not norm_before_gate:
        x = x * F.silu(gate.to(torch.float32))
    rows, dim = x.shape
    h = x.to(torch.float32).view(rows, n_groups, dim // n_groups)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    h = weight.view(n_groups, dim // n_groups) * h
    h = h.view(rows, dim)
    if norm_before_gate:
        h = h * F.silu(gate.to(torch.float32))
    return h.to(input_dtype)


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


GROUPED = (("Falcon-H1 d_ssm 1024, norm first", 1024, 1, True),
           ("Falcon-H1 d_ssm 1024, gate first", 1024, 1, False),
           ("Mamba-2 2.7B d_inner 5120, 8 groups, gate first", 5120, 8, False))
"""(label, width, n_groups, norm_before_gate): the Mamba mixers' output norms, one row per
token (Falcon-H1's config defaults; Mamba-2 2.7B's d_inner with 8 groups)."""


def grouped(kernel: ModuleType, dtype: torch.dtype, min_run_time: float) -> None:
    for label, width, groups, before in GROUPED:
        print(f"  {label}")
        weight = torch.rand(width, dtype=dtype) + 0.5
        layer = _layer(kernel.layers.RMSNormGated, weight, variance_epsilon=EPS,
                       n_groups=groups, norm_before_gate=before)

        def eager(x, gate, weight, groups=groups, before=before):
            return falcon_h1_rms_norm_gated(x, gate, weight, groups, before)

        compiled = torch.compile(eager, dynamic=False)
        for tokens in TOKENS[1:]:
            x = torch.randn(tokens, width, dtype=dtype)
            gate = torch.randn_like(x)
            for _ in range(3):
                compiled(x, gate, weight)
            torch.testing.assert_close(layer(x, gate), eager(x, gate, weight), rtol=2e-2,
                                       atol=2e-2)
            times = _timed(min_run_time, x, gate, weight,
                           kernel_layer=lambda x, gate, _w, layer=layer: layer(x, gate),
                           eager=eager, compile=compiled)
            print(_row(f"{str(dtype)[6:]} [{tokens}, {width}]", times))


def _train_step(forward):
    """forward + backward of ``forward`` for fresh leaves (the gradients of x, gate, weight)."""
    def step(x, gate, weight):
        x, gate, weight = (t.detach().requires_grad_() for t in (x, gate, weight))
        forward(x, gate, weight).backward(torch.ones_like(x))
        return x.grad, gate.grad, weight.grad
    return step


def training(kernel: ModuleType, dtype: torch.dtype, min_run_time: float) -> None:
    """RMSNormGated forward + backward at the Qwen3.5 shape: the fused C++ backward against
    eager autograd and torch.compile of the same forward (AOTAutograd's backward)."""
    def ours(x, gate, weight):
        return kernel.rms_norm_gated(x, gate, weight, EPS)

    compiled = torch.compile(qwen3_5_rms_norm_gated, dynamic=False)
    steps = {"kernel_layer": _train_step(ours), "eager": _train_step(qwen3_5_rms_norm_gated),
             "compile": _train_step(compiled)}
    for tokens in TOKENS[1:]:
        x = torch.randn(tokens * VALUE_HEADS, HEAD_V_DIM, dtype=dtype)
        gate = torch.randn_like(x)
        weight = torch.rand(HEAD_V_DIM, dtype=dtype) + 0.5
        for _ in range(3):
            steps["compile"](x, gate, weight)
        for got, want in zip(steps["kernel_layer"](x, gate, weight),
                             _train_step(qwen3_5_rms_norm_gated)(
                                 x.double(), gate.double(), weight.double()), strict=True):
            # against float64 (eager bf16 sums the weight's gradient in bf16)
            torch.testing.assert_close(got.double(), want, rtol=2e-2,
                                       atol=2e-2 * float(want.abs().max()))
        times = _timed(min_run_time, x, gate, weight, **steps)
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


SECTIONS = ("gated", "grouped", "training", "zero_centered")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=0.5)
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS,
                        help="which tables to print (default: all)")
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
    dtypes = [getattr(torch, name) for name in args.dtypes]
    if "gated" in args.sections:
        print("\nRMSNormGated (Qwen3.5 / Qwen3-Next gated delta net output norm, silu gate)\n"
              f"{HEADER}")
        for dtype in dtypes:
            gated(kernel, dtype, args.min_run_time)
    if "grouped" in args.sections:
        print(f"\nRMSNormGated of Mamba mixers (FalconH1RMSNormGated's forward)\n{HEADER}")
        for dtype in dtypes:
            grouped(kernel, dtype, args.min_run_time)
    if "training" in args.sections:
        print(f"\nRMSNormGated forward + backward (Qwen3.5 shape)\n{HEADER}")
        for dtype in dtypes:
            training(kernel, dtype, args.min_run_time)
    if "zero_centered" in args.sections:
        for hidden in (2048, 4096):
            print(f"\nRMSNormZeroCentered (Qwen3.5 / Qwen3-Next norm, hidden {hidden})\n"
                  f"{HEADER}")
            for dtype in dtypes:
                zero_centered(kernel, dtype, hidden, args.min_run_time)


if __name__ == "__main__":
    main()
