"""Time the Mamba kernels on CPU against what Transformers runs today (its PyTorch
fallbacks, eager) and against torch.compile of those fallbacks, at real layer shapes.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/mamba-ssm/torch213-cxx11-cpu-x86_64-linux

Shapes (batch 1 prefill, batch 1 and 8 decode): Mamba-2 2.7B's mixer (d_model 2560:
80 heads x 64, dstate 128, one group, conv over 5376 channels, width 4, chunk 256),
Falcon-H1's at its Transformers config defaults (128 heads x 8, dstate 256, conv over
1536 channels), and Mamba-1 130m's (1536 channels, dstate 16). The inputs are views
into one projection, as the models pass them. Options: --tokens (default 256 1024),
--dtypes, --shapes, --capability, --min-run-time, --cpu-time (one thread, timed by
thread CPU time: for a loaded machine), --cases (conv, scan, step). Baselines are Transformers 5.25's
functions from transformers.models.mamba2 / falcon_h1 / mamba (which must be
installed). Several minutes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from kernelhub.benchmark.timing import cpu_header, interleaved


@dataclass(frozen=True)
class Mixer:
    """One model's Mamba-2 mixer shape, and the Transformers module whose fallbacks it runs."""

    name: str
    module: str
    heads: int
    headdim: int
    dstate: int
    groups: int = 1
    width: int = 4
    chunk: int = 256

    @property
    def inner(self) -> int:
        return self.heads * self.headdim

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.groups * self.dstate


MIXERS = {
    "mamba2-2.7b": Mixer("mamba2-2.7b", "mamba2", heads=80, headdim=64, dstate=128),
    "falcon-h1": Mixer("falcon-h1", "falcon_h1", heads=128, headdim=8, dstate=256),
}
M1_INNER, M1_DSTATE = 1536, 16


CASES = frozenset({"conv", "scan", "step"})
"""--cases: which rows to time (conv1d prefill and decode, chunk scan, decode step)."""

CPU_TIME = False
"""--cpu-time: one torch thread, each candidate timed by this thread's CPU time. On a
shared, loaded machine wall time stretches with whatever else runs (eager's conv1d
swung 0.4-100 ms for one call here); a thread's CPU time does not."""


def _cpu_seconds(fn: Callable[[], Any], seconds: float) -> float:
    """The per-call thread CPU time of one block of calls lasting about ``seconds``."""
    start = time.thread_time()
    fn()
    per_call = max(time.thread_time() - start, 1e-7)
    calls = max(3, int(seconds / per_call))
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def _cpu_interleaved(candidates: dict[str, Callable[[], Any]], min_run_time: float,
                     rounds: int = 7) -> dict[str, float]:
    """Each candidate's median block over ``rounds`` rounds in which they take turns."""
    blocks: dict[str, list[float]] = {key: [] for key in candidates}
    for _ in range(rounds):
        for key, fn in candidates.items():
            blocks[key].append(_cpu_seconds(fn, min_run_time / rounds))
    return {key: statistics.median(times) for key, times in blocks.items()}


def _row(label: str, kernel: Callable[[], Any], eager: Callable[[], Any],
         compiled: Callable[[], Any], min_run_time: float) -> None:
    case = "conv" if label.startswith("conv1d") else "scan" if "scan" in label else "step"
    if case not in CASES:
        return
    for _ in range(3):  # compile and reach the steady state before timing
        compiled()
    candidates = {"kernel": kernel, "eager": eager, "compile": compiled}
    t = (_cpu_interleaved(candidates, min_run_time) if CPU_TIME
         else interleaved(candidates, min_run_time))
    print(f"  {label:<44}{t['kernel'] * 1e3:10.3f}{t['eager'] * 1e3:10.3f}"
          f"{t['compile'] * 1e3:10.3f}{t['eager'] / t['kernel']:9.2f}x"
          f"{t['compile'] / t['kernel']:9.2f}x")


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(lambda *a, **k: fn(*a, **k), dynamic=False)


def _prefill(kernel: ModuleType, tm: ModuleType, m: Mixer, dtype: torch.dtype, T: int,
             params: dict[str, torch.Tensor], min_run_time: float) -> None:
    name, w, bias = f"{m.name} {str(dtype)[6:]}", params["w"], params["bias"]
    A, D, dt_bias = params["A"], params["D"], params["dt_bias"]
    proj = torch.randn(1, T, m.conv_dim + m.heads, dtype=dtype)
    xbc = proj[..., :m.conv_dim].transpose(1, 2)
    conv_cmp = _compiled(tm.causal_conv1d_fn)
    _row(f"conv1d prefill {T} {name}",
         lambda: kernel.causal_conv1d_fn(xbc, w, bias, activation="silu"),
         lambda: tm.causal_conv1d_fn(xbc, w, bias, activation="silu"),
         lambda: conv_cmp(xbc, w, bias, activation="silu"), min_run_time)
    act = torch.randn(1, T, m.conv_dim, dtype=dtype)
    gn = m.groups * m.dstate
    x = act[..., :m.inner].view(1, T, m.heads, m.headdim)
    B = act[..., m.inner: m.inner + gn].view(1, T, m.groups, m.dstate)
    C = act[..., m.inner + gn:].view(1, T, m.groups, m.dstate)
    dt = proj[..., m.conv_dim:]
    kw: dict[str, Any] = dict(D=D, dt_bias=dt_bias, dt_softplus=True, return_final_states=True,
                              dt_limit=(0.0, float("inf")))
    scan_cmp = _compiled(tm.mamba2_chunk_scan)
    _row(f"chunk scan {T} {name}",
         lambda: kernel.mamba_chunk_scan_combined(x, dt, A, B, C, m.chunk, **kw),
         lambda: tm.mamba2_chunk_scan(x, dt, A, B, C, m.chunk, **kw),
         lambda: scan_cmp(x, dt, A, B, C, m.chunk, **kw), min_run_time)


def _decode(kernel: ModuleType, tm: ModuleType, m: Mixer, dtype: torch.dtype, batch: int,
            params: dict[str, torch.Tensor], min_run_time: float) -> None:
    """One token, with the arguments as Mamba2's decode passes them (broadcast views)."""
    name, w, bias = f"{m.name} {str(dtype)[6:]}", params["w"], params["bias"]
    P, N = m.headdim, m.dstate
    state = torch.randn(batch, m.heads, P, N)
    x = torch.randn(batch, m.heads, P, dtype=dtype)
    dt = torch.randn(batch, m.heads, 1, dtype=dtype).expand(-1, -1, P)
    A = params["A"][:, None, None].expand(-1, P, N)
    B = torch.randn(batch, m.groups, N, dtype=dtype)
    C = torch.randn(batch, m.groups, N, dtype=dtype)
    D, dt_bias = params["D"][:, None].expand(-1, P), params["dt_bias"][:, None].expand(-1, P)
    step_cmp = _compiled(tm.mamba2_selective_state_update)
    _row(f"decode step b{batch} {name}",
         lambda: kernel.selective_state_update(state, x, dt, A, B, C, D, dt_bias=dt_bias, dt_softplus=True),
         lambda: tm.mamba2_selective_state_update(state, x, dt, A, B, C, D, dt_bias=dt_bias, dt_softplus=True),
         lambda: step_cmp(state, x, dt, A, B, C, D, dt_bias=dt_bias, dt_softplus=True), min_run_time)
    cstate = torch.randn(batch, m.conv_dim, m.width, dtype=dtype)
    xs = torch.randn(batch, m.conv_dim, 1, dtype=dtype)
    upd_cmp = _compiled(tm.causal_conv1d_update)
    _row(f"conv1d decode b{batch} {name}",
         lambda: kernel.causal_conv1d_update(xs, cstate, w, bias, activation="silu"),
         lambda: tm.causal_conv1d_update(xs, cstate, w, bias, activation="silu"),
         lambda: upd_cmp(xs, cstate, w, bias, activation="silu"), min_run_time)


def mamba2(kernel: ModuleType, m: Mixer, dtype: torch.dtype, tokens: list[int],
           min_run_time: float) -> None:
    tm = importlib.import_module(f"transformers.models.{m.module}.modeling_{m.module}")
    params = dict(A=-torch.exp(torch.rand(m.heads) * 2), D=torch.randn(m.heads),
                  dt_bias=torch.randn(m.heads) - 2,
                  w=torch.randn(m.conv_dim, m.width, dtype=dtype) * 0.3,
                  bias=torch.randn(m.conv_dim, dtype=dtype))
    for T in tokens:
        _prefill(kernel, tm, m, dtype, T, params, min_run_time)
    for batch in (1, 8):
        _decode(kernel, tm, m, dtype, batch, params, min_run_time)


def _mamba1_case(kernel: ModuleType, tm1: ModuleType, dtype: torch.dtype, T: int,
                 min_run_time: float) -> None:
    A = -torch.exp(torch.rand(M1_INNER, M1_DSTATE))
    u = torch.randn(1, M1_INNER, T, dtype=dtype)
    delta, z = torch.randn_like(u), torch.randn_like(u)
    B = torch.randn(1, T, M1_DSTATE, dtype=dtype).transpose(1, 2)
    C = torch.randn(1, T, M1_DSTATE, dtype=dtype).transpose(1, 2)
    kw: dict[str, Any] = dict(D=torch.randn(M1_INNER), z=z, delta_bias=torch.randn(M1_INNER) - 2,
                              delta_softplus=True, return_last_state=True)
    cmp = _compiled(tm1.mamba_selective_scan)
    _row(f"mamba1 selective scan {T} {str(dtype)[6:]}",
         lambda: kernel.selective_scan_fn(u, delta, A, B, C, **kw),
         lambda: tm1.mamba_selective_scan(u, delta, A, B, C, **kw),
         lambda: cmp(u, delta, A, B, C, **kw), min_run_time)


def main(argv: list[str] | None = None) -> None:
    global CASES, CPU_TIME
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--tokens", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--shapes", nargs="+", choices=sorted(MIXERS), default=sorted(MIXERS))
    parser.add_argument("--capability", choices=["DEFAULT", "AVX2", "AVX512", "AVX512_BF16"])
    parser.add_argument("--min-run-time", type=float, default=0.5)
    parser.add_argument("--mamba1", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--cpu-time", action="store_true",
                        help="one torch thread, medians of thread CPU time (loaded machines)")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    args = parser.parse_args(argv)
    CASES = frozenset(args.cases)
    if args.cpu_time:
        CPU_TIME = True
        torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = 64
    logging.getLogger("transformers").setLevel(logging.ERROR)  # the fallback warning, once per name

    import kernelhub
    from transformers.models.mamba import modeling_mamba as tm1

    kernel = kernelhub.get_local_kernel(args.path)
    if args.capability is not None:
        kernel.set_cpu_capability(args.capability)
    torch.manual_seed(0)
    print(cpu_header())
    clock = ("thread CPU time, medians of 7 interleaved rounds" if CPU_TIME
             else "wall time, best of interleaved rounds")
    print(f"threads {torch.get_num_threads()}, {clock}, loops {kernel.cpu_capability()}; eager = "
          "Transformers' PyTorch fallback, compile = torch.compile of it; ratios: their time / ours")
    print(f"  {'case':<44}{'ours ms':>10}{'eager ms':>10}{'compile':>10}{'eager/us':>10}{'cmp/us':>10}")
    with torch.inference_mode():
        for shape in args.shapes:
            for name in args.dtypes:
                mamba2(kernel, MIXERS[shape], getattr(torch, name), args.tokens, args.min_run_time)
        if args.mamba1:
            for name in args.dtypes:
                for T in [t for t in args.tokens if t <= 256]:  # PyTorch's loop is slow
                    _mamba1_case(kernel, tm1, getattr(torch, name), T, args.min_run_time)


if __name__ == "__main__":
    main()
