"""Where a model of ``benchmarks/model.py`` spends its time: by module, by op, and the bound.

The same models as ``benchmarks/model.py`` (any of its families, ``--families``),
profiled for one prefill of ``--prefill`` tokens and ``--decode`` one-token steps on its
cache, per family, dtype and configuration (``pytorch``, ``use_kernels``).

First the share table by module: the wall time of each part of the decoder layers
(attention, gated delta net, Mamba mixer, MLP, router, experts, norms — named by class,
summed over layers; an MoE block is split into its router, experts and shared expert),
and ``rest`` (embedding, final norm, LM head, Python between the parts), as ms and share
of the phase, for PyTorch and ``use_kernels`` side by side. That says which layers a
kernel must win on for the model to get faster, and whether it did.
Where a whole decoder layer is one kernel (the fused ``DecoderLayer`` of Llama-style
families), the parts it runs itself (MLP, post-attention norm) call no module hooks: their
time is counted under ``rest``.

Then, per configuration, torch.profiler's table by op (self CPU time) and a summary by kind:

* ``matmul``   — the projections and the LM head (``aten::mm``/``addmm``/``bmm``, and the
  fused MLP kernel ``swiglu_mlp``, whose time is its matrix-vector products);
* ``attention``— sdpa or the kernel's attention (everything that computes softmax(QK)V);
* ``other ops``— norms, rotary, activation, residual adds, casts, KV-cache appends, …;
* ``outside ops`` — wall time that no op accounts for: Python, module calls, dispatch.

The matmul share bounds what kernels that fuse the work *around* the matmuls can give:
with the matmuls unchanged, a phase can at best become ``1 / share`` times faster (the
"bound" column), and attention is only as cheap as its kernel.

    .venv/bin/python benchmarks/model_profile.py [--families llama qwen3 mixtral ...]
        [--dtypes bfloat16 float32] [--configs pytorch use_kernels] [--rows 15]
        [--no-ops] [--layers N]
"""

from __future__ import annotations

import gc
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
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


def decoder_layers(model: Any) -> list[Any]:
    """The model's decoder layers: the longest ``ModuleList`` (``model.layers``,
    ``backbone.layers``)."""
    from torch import nn

    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


def layer_parts(model: Any) -> Iterator[Any]:
    """The modules the share table times: each decoder layer's children, an MoE block
    split into its own children (router, experts, shared expert), since which of those
    takes the time is what an MoE kernel is about."""
    from kernelhub.integrations.transformers.experts import is_experts_module

    for layer in decoder_layers(model):
        for child in layer.children():
            if any(is_experts_module(c) for c in child.children()):
                yield from child.children()
            else:
                yield child


def module_times(model: Any, fn: Callable[[], Any]) -> tuple[float, dict[str, float]]:
    """(wall seconds of ``fn``, seconds per class of :func:`layer_parts`) by forward hooks.

    On the CPU an op has finished when it returns, so a module's wall time between its
    pre- and post-hook is what it cost; the parts do not nest, so the times add up."""
    times: dict[str, float] = defaultdict(float)
    started: dict[int, float] = {}

    def before(module: Any, args: Any) -> None:
        started[id(module)] = time.perf_counter()

    def after(module: Any, args: Any, output: Any) -> None:
        times[type(module).__name__] += time.perf_counter() - started.pop(id(module))

    handles = []
    for part in layer_parts(model):
        handles += [part.register_forward_pre_hook(before), part.register_forward_hook(after)]
    try:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    finally:
        for handle in handles:
            handle.remove()
    times["rest"] = max(0.0, wall - sum(times.values()))
    return wall, dict(times)


Shares = dict[tuple[str, str], tuple[float, dict[str, float]]]
"""(configuration, phase) → (wall seconds, seconds per part) of one model."""


def module_shares(models: dict[str, Any], ids: Any, steps: int) -> Shares:
    """The share table's numbers for each prepared model (after a warm-up round)."""
    import torch

    shares: Shares = {}
    with torch.inference_mode():
        for config, model in models.items():
            token, cache = bench.prefill(model, ids)
            bench.decode(model, token, cache, 2)
            held: list[Any] = []
            shares[config, "prefill"] = module_times(
                model, lambda m=model, h=held: h.extend(bench.prefill(m, ids)))
            token, cache = held
            shares[config, "decode"] = module_times(
                model, lambda m=model, t=token, c=cache: bench.decode(m, t, c, steps))
    return shares


def print_shares(title: str, shares: Shares, configs: list[str], steps: int) -> None:
    """One share table: a row per part, ms (share of the phase) per configuration and
    phase, decode per token; parts ordered by PyTorch's prefill time."""
    columns = [(c, p) for p in ("prefill", "decode") for c in configs]
    first = shares[columns[0]][1]
    parts = sorted({k for _, t in shares.values() for k in t},
                   key=lambda k: (k == "rest", -first.get(k, 0.0)))
    print(f"\n  {title}: time by module (ms; decode per token)")
    print(f"    {'module':<30}" + "".join(f"{c + ' ' + p:>24}" for c, p in columns))
    for part in [*parts, "total"]:
        cells = []
        for config, phase in columns:
            wall, times = shares[config, phase]
            scale = steps if phase == "decode" else 1
            seconds = wall if part == "total" else times.get(part, 0.0)
            cells.append(f"{seconds * 1e3 / scale:10.2f} ({seconds / wall:4.0%})")
        print(f"    {part[:30]:<30}" + "".join(f"{c:>24}" for c in cells))
    if "pytorch" in configs:
        for config in configs[1:]:
            ratios = ", ".join(
                f"{phase} {shares['pytorch', phase][0] / shares[config, phase][0]:.2f}x"
                for phase in ("prefill", "decode"))
            print(f"    {config} vs pytorch (this profiled run): {ratios}")


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
    parser = bench.model_parser(__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=None,
                        help="layers per model (default: the family's, see model.FAMILIES)")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--configs", nargs="+", default=["pytorch", "use_kernels"])
    parser.add_argument("--prefill", type=int, default=512)
    parser.add_argument("--decode", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=15, help="ops listed per table")
    parser.add_argument("--no-ops", action="store_true",
                        help="only the share table by module (no torch.profiler pass)")
    args = parser.parse_args(argv)
    if not bench.use_hub(args.hub, "model_profile.py",
                         needed=any(c != "pytorch" for c in args.configs)):
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
            models = {config: bench.prepare(base, config) for config in args.configs}
            print_shares(f"{family} {dtype_name}", module_shares(models, ids, args.decode),
                         args.configs, args.decode)  # as soon as measured: runs are long
            if not args.no_ops:
                for config, model in models.items():
                    label = f"{family} {dtype_name} {config}"
                    tables += profile_config(model, ids, args.decode, label)
            del base, models
            gc.collect()
    for title, events in tables:
        print_table(title, events, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
