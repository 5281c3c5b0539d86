"""Which replaced op makes a model slower: the table's entries one at a time, in the model.

``benchmarks/model.py`` times ``use_kernels`` as a whole; when a row comes out under 1.0x
it cannot say which kernel did it. This script builds the same models (Llama and Qwen3 by
default, :mod:`model`'s shapes, ``--layers`` of them) and times, in one process and
interleaved round by round (the order reversed every round), these configurations:

* ``pytorch`` — Transformers as is;
* ``all`` — ``use_kernels=True``, every table entry (what users get);
* ``only:<entry>`` — ``use_kernels=True`` with every entry but one disabled
  (``KernelConfig({name: None, ...})``), so its ratio is that kernel's effect on the
  whole model, the ops around it included;
* ``all-<entry>`` — every entry but one, which says what the others come to without it;
* ``before`` (with ``--before VERSION``, rmsnorm's previous release on the hub) —
  ``use_kernels=True`` with that release's fused MLP/DecoderLayer and no ``Linear``: the
  model as the release before the widened projections ran it, in the same run;
* ``pinned`` (with ``--pin VERSION``) — ``use_kernels=True``, every entry, those the
  table serves from rmsnorm taken from that release of it: a new rmsnorm release against
  its predecessor, everything else alike, in the same run;
* ``moe@<version>`` — ``use_kernels=True`` with the experts served by that moe release
  on the hub, named explicitly (so a machine rule that keeps PyTorch's experts does not
  apply; gpt-oss float32 on AVX2 had one before moe 1.2.0). One per run: Transformers' experts registry
  is keyed by the repository's name, so a second release would replace the first in every
  model of the process; compare releases through their ratios to ``pytorch`` in two runs.

Entries: ``act`` (SiLU), ``norm`` (RMSNorm), ``rotary`` (rotary_pos_emb), ``attn``
(flash-attn2 through ``attention``), ``fused`` (the MLP and DecoderLayer kernels),
``widen`` (bfloat16 ``nn.Linear`` products widened to float32: ``all-widen`` against ``all``
is that change, before and after, in one run).

Timing: with ``--cpu-time`` the main thread's CPU time (``time.thread_time``), meant for
``--threads 1`` where all work runs on that thread, so other processes' load on a shared
machine does not count; otherwise wall time. Medians of ``--repeats`` rounds after one
warm-up round (the attention kernel's per-shape timing and first-touch allocations happen
there). Prints the CPU line, the load average before and after, and per (family, dtype,
phase) each configuration's ms and ``pytorch / it`` ratio.

    .venv/bin/python benchmarks/model_ablation.py --threads 1 --cpu-time \\
        [--families llama qwen3] [--dtypes float32 bfloat16] [--prefill 64 256]
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import model as bench  # benchmarks/model.py: the models and their set-up

ENTRIES: dict[str, tuple[str, ...]] = {
    "act": ("SiLU",),
    "norm": ("RMSNorm",),
    "rotary": ("rotary_pos_emb",),
    "attn": ("attention",),
    "fused": ("MLP", "DecoderLayer"),
    "widen": ("Linear",),
}
"""Short name → the table's names it turns on or off together."""


def kernel_config(keep: set[str]) -> Any:
    """A KernelConfig that disables every entry of :data:`ENTRIES` outside ``keep``."""
    from kernelhub.integrations.transformers import KernelConfig

    off = {name: None for short, names in ENTRIES.items() if short not in keep
           for name in names}
    return KernelConfig(off) if off else None


def pinned_config(base: Any, version: str | None) -> Any:
    """A KernelConfig taking every CPU entry the table serves from rmsnorm, for the layer
    names ``base`` registers, from rmsnorm's release ``version``."""
    from kernelhub.integrations.transformers import KernelConfig
    from kernelhub.integrations.transformers.table import DEFAULT_MAPPING, registered_names

    names = set(registered_names(base).values()) | {"Linear"}
    pins = {name: f"kernels-community/rmsnorm@{version}:{ref.name}"
            for name in names for ref in DEFAULT_MAPPING.get(name, {}).get("cpu", [])[:1]
            if ref.repo_id == "kernels-community/rmsnorm"}
    return KernelConfig(pins)


def prepare(base: Any, config: str, before: str | None = None, pin: str | None = None) -> Any:
    """A copy of ``base`` sharing its weights, set up for ``config`` (see the docstring)."""
    import copy

    shared = {id(t): t for t in (*base.parameters(), *base.buffers())}
    model = copy.deepcopy(base, shared)
    if config == "pytorch":
        return model
    if config == "before":
        from kernelhub.integrations.transformers import KernelConfig
        from kernelhub.integrations.transformers.table import registered_names

        names = set(registered_names(base).values())
        fused = {n: f"kernels-community/rmsnorm@{before}:{n}" for n in ENTRIES["fused"]
                 if n in names}
        model.set_use_kernels(True, KernelConfig({"Linear": None, **fused}))
        return model
    if config.startswith("moe@"):
        from kernelhub.integrations.transformers import KernelConfig

        spec = f"kernels-community/moe@{config.removeprefix('moe@')}:experts_forward"
        model.set_use_kernels(True, KernelConfig({"experts": spec}))
        return model
    if config == "pinned":
        model.set_use_kernels(True, pinned_config(base, pin))
        return model
    if config == "all":
        keep = set(ENTRIES)
    elif config.startswith("only:"):
        keep = {config.removeprefix("only:")}
    else:
        keep = set(ENTRIES) - {config.removeprefix("all-")}
    model.set_use_kernels(True, kernel_config(keep))
    return model


def measure(models: dict[str, Any], ids: Any, decode_steps: int, repeats: int,
            clock: Callable[[], float]) -> dict[str, tuple[float, float]]:
    """Per configuration: (median prefill s, median s per decode step), interleaved."""
    import torch

    rounds: dict[str, list[tuple[float, float]]] = {c: [] for c in models}
    order = list(models)
    with torch.inference_mode():
        for i in range(repeats + 1):
            for config in order if i % 2 == 0 else order[::-1]:
                model = models[config]
                start = clock()
                token, cache = bench.prefill(model, ids)
                middle = clock()
                bench.decode(model, token, cache, decode_steps)
                end = clock()
                if i:
                    rounds[config].append((middle - start, (end - middle) / decode_steps))
    return {c: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
            for c, ts in rounds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = bench.model_parser(__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--prefill", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--decode", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the main thread's CPU time (use with --threads 1)")
    parser.add_argument("--configs", nargs="+",
                        default=["pytorch", "all", *(f"only:{e}" for e in ENTRIES)])
    parser.add_argument("--pin", metavar="VERSION",
                        help="an rmsnorm release on the hub (e.g. v1.3.0): configuration "
                             "'pinned' runs every entry, rmsnorm's from that release")
    parser.add_argument("--before", metavar="VERSION",
                        help="the rmsnorm release before the widened Linear, on the hub "
                             "(e.g. v1.2.0): configuration 'before' runs its fused "
                             "MLP/DecoderLayer and no Linear (what use_kernels gave before, "
                             "in the same run)")
    args = parser.parse_args(argv)
    if not bench.use_hub(args.hub, "model_ablation.py"):
        return 2
    bad = [c for c in args.configs if c not in ("pytorch", "all")
           and not (c == "before" and args.before) and not c.startswith("moe@")
           and not (c == "pinned" and args.pin)
           and c.removeprefix("only:").removeprefix("all-") not in ENTRIES]
    if bad:
        print(f"model_ablation.py: unknown configuration(s) {bad}; entries: {list(ENTRIES)}",
              file=sys.stderr)
        return 2
    if len([c for c in args.configs if c.startswith("moe@")]) > 1:
        print("model_ablation.py: one moe@<version> per run (the experts registry is keyed "
              "by repository, so the last release loaded would serve both)", file=sys.stderr)
        return 2

    import torch
    from kernelhub.integrations.transformers import enable
    from kernelhub.system import cpu_summary

    torch.set_num_threads(args.threads)
    enable()
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(cpu_summary())
    print(f"load average at start {' '.join(f'{v:.1f}' for v in os.getloadavg())}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"{'main-thread CPU time' if args.cpu_time else 'wall time'}; "
          f"{args.layers} layer(s), decode {args.decode} steps; "
          f"median of {args.repeats} interleaved rounds after 1 warm-up")
    print(f"{'model':<7}{'dtype':<10}{'phase':<12}"
          + "".join(f"{c:>20}" for c in args.configs), flush=True)
    for family in args.families:
        for dtype_name in args.dtypes:
            base = bench.make_model(family, getattr(torch, dtype_name), args.layers)
            models = {c: prepare(base, c, args.before, args.pin) for c in args.configs}
            for length in args.prefill:
                ids = torch.randint(0, base.config.vocab_size, (1, length),
                                    generator=torch.Generator().manual_seed(0))
                times = measure(models, ids, args.decode, args.repeats, clock)
                for phase, index in ((f"prefill {length}", 0), (f"decode@{length}", 1)):
                    ref = times["pytorch"][index] if "pytorch" in times else None
                    cells = [f"{times[c][index] * 1e3:8.2f} "
                             + (f"({ref / times[c][index]:4.2f}x)" if ref else "")
                             for c in args.configs]
                    print(f"{family:<7}{dtype_name:<10}{phase:<12}"
                          + "".join(f"{cell:>20}" for cell in cells), flush=True)
            del base, models
            gc.collect()
    print(f"load average at end {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
