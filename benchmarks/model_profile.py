"""Where a Llama-/Qwen3-shaped model spends its time: torch.profiler by op, and the bound.

The same models as ``benchmarks/model.py`` (4 layers, hidden 2048, intermediate 5632,
16 / 4 heads), profiled for one prefill of ``--prefill`` tokens and ``--decode`` one-token
steps on its cache, per family, dtype and configuration (``pytorch``, ``use_kernels``).
For each it prints torch.profiler's table by op (self CPU time) and a summary by kind:

* ``matmul``   — the projections and the LM head (``aten::mm``/``addmm``/``bmm``, and the
  fused MLP kernel ``swiglu_mlp``, whose time is its matrix-vector products);
* ``attention``— sdpa or the kernel's attention (everything that computes softmax(QK)V);
* ``other ops``— norms, rotary, activation, residual adds, casts, KV-cache appends, …;
* ``outside ops`` — wall time that no op accounts for: Python, module calls, dispatch.

The matmul share bounds what kernels that fuse the work *around* the matmuls can give:
with the matmuls unchanged, a phase can at best become ``1 / share`` times faster (the
"bound" column), and attention is only as cheap as its kernel.

    .venv/bin/python benchmarks/model_profile.py [--families llama qwen3]
        [--dtypes bfloat16 float32] [--configs pytorch use_kernels] [--rows 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import model as bench  # benchmarks/model.py: the models and their set-up

MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm"})
"""Ops whose self time is a matrix product of the model's weights."""

MATMUL_KERNELS = ("swiglu_mlp",)
"""Kernel ops that are a model's matrix products (with what they fuse around them)."""

ATTENTION_MARKERS = ("scaled_dot_product", "flash_attn2", "attention")
"""Substrings of the op names that compute attention itself."""


def kind_of(name: str) -> str:
    """The summary row an op's self time counts in."""
    if name in MATMUL_OPS or name.endswith(MATMUL_KERNELS):
        return "matmul"
    if any(marker in name for marker in ATTENTION_MARKERS):
        return "attention"
    return "other ops"


def profile_phase(fn: Any) -> tuple[float, list[Any]]:
    """(wall seconds, profiler events) of one call of ``fn``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    return wall, list(prof.key_averages())


def summary(wall: float, events: list[Any]) -> dict[str, float]:
    """Seconds per kind of work (self times), plus what no op accounts for."""
    kinds = {"matmul": 0.0, "attention": 0.0, "other ops": 0.0}
    for event in events:
        kinds[kind_of(event.key)] += event.self_cpu_time_total / 1e6
    kinds["outside ops"] = max(0.0, wall - sum(kinds.values()))
    return kinds


def print_summary(label: str, wall: float, kinds: dict[str, float], scale: int) -> None:
    share = kinds["matmul"] / wall if wall > 0 else 0.0
    cells = "".join(f"{kinds[k] * 1e3 / scale:10.2f} ({kinds[k] / wall:4.0%})" for k in kinds)
    bound = f"{1 / share:6.2f}x" if share > 0 else "     -"
    print(f"{label:<34}{wall * 1e3 / scale:10.2f}{cells}{bound}", flush=True)


def print_table(title: str, events: list[Any], rows: int) -> None:
    events = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]
    print(f"\n  {title}: top {len(events)} ops by self CPU time")
    print(f"    {'op':<58}{'self ms':>10}{'calls':>8}{'kind':>12}")
    for e in events:
        print(f"    {e.key[:58]:<58}{e.self_cpu_time_total / 1e3:10.2f}{e.count:8d}"
              f"{kind_of(e.key):>12}")


def profile_config(model: Any, ids: Any, steps: int, label: str) -> list[tuple[str, list[Any]]]:
    """Profile one prepared model's prefill and decode; prints their summary rows and
    returns (title, events) for the op tables."""
    import torch

    with torch.inference_mode():
        for _ in range(2):  # warm-up: kernels loaded, allocator primed, decisions made
            token, cache = bench.prefill(model, ids)
            bench.decode(model, token, cache, 2)
        wall, prefill_events = profile_phase(lambda: bench.prefill(model, ids))
        print_summary(f"{label} prefill", wall, summary(wall, prefill_events), 1)
        token, cache = bench.prefill(model, ids)
        wall, decode_events = profile_phase(lambda: bench.decode(model, token, cache, steps))
        print_summary(f"{label} decode", wall, summary(wall, decode_events), steps)
    return [(f"{label} prefill {ids.shape[1]}", prefill_events),
            (f"{label} decode x{steps}", decode_events)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub", default=os.environ.get("KERNELHUB_HUB",
                                                        str(bench.ROOT / ".kernelhub/hub")))
    parser.add_argument("--families", nargs="+", default=["llama", "qwen3"],
                        choices=sorted(bench.FAMILIES))
    parser.add_argument("--layers", type=int, default=None,
                        help="layers per model (default: the family's, see model.FAMILIES)")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--configs", nargs="+", default=["pytorch", "use_kernels"])
    parser.add_argument("--prefill", type=int, default=512)
    parser.add_argument("--decode", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=15, help="ops listed per table")
    args = parser.parse_args(argv)
    os.environ["KERNELHUB_HUB"] = args.hub
    needs_hub = any(c != "pytorch" for c in args.configs)
    if needs_hub and not Path(args.hub).is_dir():
        print(f"model_profile.py: no hub at {args.hub}; run ci/main-job (or builder publish) "
              "first", file=sys.stderr)
        return 2

    import torch
    from kernelhub.benchmark.timing import cpu_header
    from kernelhub.integrations.transformers import enable

    torch.set_num_threads(args.threads)
    enable()
    print(cpu_header())
    print(f"prefill {args.prefill} tokens, decode {args.decode} steps (ms per token); "
          "self CPU time per kind of work, share of the phase's wall time; bound: "
          "1 / matmul share, the most that fusing around unchanged matmuls can give")
    header = "".join(f"{k:>17}" for k in ("matmul", "attention", "other ops", "outside ops"))
    print(f"\n{'model dtype config phase':<34}{'wall ms':>10}{header}{'bound':>7}")
    tables: list[tuple[str, list[Any]]] = []
    ids = torch.randint(0, bench.SHAPE["vocab_size"], (1, args.prefill),
                        generator=torch.Generator().manual_seed(0))
    for family in args.families:
        for dtype_name in args.dtypes:
            print("  " + bench.describe(family, bench.family_config(family, args.layers)))
            base = bench.make_model(family, getattr(torch, dtype_name), args.layers)
            for config in args.configs:
                label = f"{family} {dtype_name} {config}"
                tables += profile_config(bench.prepare(base, config), ids, args.decode, label)
    for title, events in tables:
        print_table(title, events, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
