"""End to end: models of today's families with and without hub kernels.

Each model is built from a Transformers config with random weights (nothing is
downloaded). Llama and Qwen3: 4 layers, hidden 2048, intermediate 5632, 16 heads, GQA with
4 KV heads. The other families (:data:`FAMILIES`) keep the released model's sizes that
Transformers' config defaults carry — hidden size, intermediate and expert sizes, heads,
state sizes — and cut what multiplies memory so that a family fits 24 GiB in float32:
the number of layers (``--layers``, default per family), the vocabulary (32000) and, for
the 512-expert Qwen3-Next, the experts (64). The header prints each model's shape.
Per family and dtype (float32, bfloat16) it times a prefill of 512 tokens and 32 decode
steps (one token each, on the prefill's KV cache; logits for the last position only) in
these configurations, all in one process and one run, so the ratios are comparable:

* ``pytorch``     — Transformers as is (sdpa attention, its default experts implementation);
* ``use_kernels`` — ``set_use_kernels(True)``: the hub kernels of kernelhub's table
  (RMSNorm, SiLU, rotary, flash-attn2 attention, MoE router and experts, …);
* ``autotune``    — the same with ``KernelConfig(autotune=True)``: each kernel is kept only
  where it is right and not slower (decisions made during warm-up, cached on disk);
* ``compile``     — ``torch.compile`` of the PyTorch model;
* ``both``        — ``use_kernels`` and ``torch.compile``.

The kernels come from the hub at ``--hub`` (default ``$KERNELHUB_HUB``, else the
``.kernelhub/hub`` that ``ci/main-job`` publishes to). Prints the CPU (with AVX-512/AMX
presence), torch, threads, and one table: milliseconds and speed relative to
``pytorch`` (higher is faster). ``--no-compile`` skips the two compiled configurations
(their compilation takes minutes on 2 cores). ``benchmarks/model_profile.py`` prints
where the time goes (the share table) for the same models.

    .venv/bin/python benchmarks/model.py [--families llama qwen3 qwen3_moe mixtral ...]
        [--dtypes float32 bfloat16] [--layers N]
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SHAPE = dict(num_hidden_layers=4, hidden_size=2048, intermediate_size=5632,
             num_attention_heads=16, num_key_value_heads=4, head_dim=128, vocab_size=32000,
             max_position_embeddings=4096)


_SCALED = dict(vocab_size=32000)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", SHAPE),
    "qwen3": ("qwen3", SHAPE),
    # Released sizes from Transformers' config defaults; layers, vocabulary (and experts
    # where noted) cut to fit 24 GiB in float32.
    "qwen3_5": ("qwen3_5_text", dict(_SCALED, num_hidden_layers=4)),   # 3 linear + 1 full
    "qwen3_next": ("qwen3_next", dict(_SCALED, num_hidden_layers=4, num_experts=64)),
    # Mamba-2 has no attention, and Transformers refuses "sdpa" for it.
    "mamba2": ("mamba2", dict(_SCALED, num_hidden_layers=4, attn_implementation="eager")),
    "falcon_h1": ("falcon_h1", dict(_SCALED, num_hidden_layers=4)),
    "qwen3_moe": ("qwen3_moe", dict(_SCALED, num_hidden_layers=2)),    # 128 experts, top 8
    "mixtral": ("mixtral", dict(_SCALED, num_hidden_layers=2)),        # 8 experts, top 2
    # gpt-oss's attention sinks: Transformers refuses "sdpa" for it.
    "gpt_oss": ("gpt_oss", dict(_SCALED, num_hidden_layers=2, num_local_experts=32,
                                attn_implementation="eager")),
}
"""Family → (Transformers model type, config overrides)."""

_SHAPE_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "moe_intermediate_size",
               "num_experts", "num_local_experts", "num_experts_per_tok", "num_attention_heads",
               "num_key_value_heads", "head_dim", "state_size", "vocab_size")


def family_config(family: str, layers: int | None = None) -> Any:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type, overrides = FAMILIES[family]
    kwargs = {"attn_implementation": "sdpa", **overrides}
    if layers is not None:
        kwargs["num_hidden_layers"] = layers
    config = CONFIG_MAPPING[model_type](**kwargs)
    types = list(getattr(config, "layer_types", None) or [])
    released = list(getattr(CONFIG_MAPPING[model_type](), "layer_types", None) or [])
    if "linear_attention" in types and "full_attention" in released \
            and "full_attention" not in types:
        # Cut below the hybrid's pattern (3 linear + 1 full): keep a full-attention layer
        # last, as the pattern ends, or Transformers has no attention layer to size masks.
        n = max(2, len(types))
        kwargs.update(num_hidden_layers=n,
                      layer_types=["linear_attention"] * (n - 1) + ["full_attention"])
        config = CONFIG_MAPPING[model_type](**kwargs)
    return config


def scaled(family: str, config: Any) -> str:
    """What the benchmark's model cuts from the released one (Transformers' config
    defaults): the sizes it changed, as ``name default→used``; the rest is as released."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if family in ("llama", "qwen3"):
        return (f"not a released model: TinyLlama-1.1B's hidden and intermediate sizes, "
                f"layers {config.num_hidden_layers}")
    released = CONFIG_MAPPING[FAMILIES[family][0]]()
    cuts = list(dict.fromkeys(  # num_experts and num_local_experts may be one attribute
        f"{k.replace('num_local_', 'num_').replace('num_', '')} "
        f"{getattr(released, k)}→{getattr(config, k)}"
        for k in ("num_hidden_layers", "vocab_size", "num_experts", "num_local_experts")
        if getattr(released, k, None) not in (None, getattr(config, k, None))))
    return "released sizes; cut: " + (", ".join(cuts) or "nothing")


def describe(family: str, config: Any) -> str:
    """The shape line printed for a family: its sizes and what was cut to fit."""
    sizes = ", ".join(f"{k.replace('num_', '')} {v}" for k in _SHAPE_KEYS
                      if (v := getattr(config, k, None)) is not None)
    return f"{family} ({config.model_type}): {sizes}\n      ({scaled(family, config)})"


def make_model(family: str, dtype: Any, layers: int | None = None) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config(family, layers), dtype=dtype)
    return model.eval()


def prepare(base: Any, config: str) -> Any:
    """A copy of ``base`` set up for one configuration (the base stays PyTorch).

    The copies share ``base``'s parameters and buffers: every configuration multiplies the
    same weight memory, so a difference between them is the code that runs, not where (on
    which pages, huge or not) a private copy of 1 GB of weights happened to land."""
    import torch
    from kernelhub.integrations.transformers import KernelConfig

    shared = {id(t): t for t in (*base.parameters(), *base.buffers())}
    model = copy.deepcopy(base, shared)
    if config in ("use_kernels", "autotune", "both"):
        kernel_config = KernelConfig(autotune=True) if config == "autotune" else None
        model.set_use_kernels(True, kernel_config)
    if config in ("compile", "both"):
        model.forward = torch.compile(model.forward, dynamic=None)
    return model


def prefill(model: Any, ids: Any) -> tuple[Any, Any]:
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1:].argmax(-1), cache


def decode(model: Any, token: Any, cache: Any, steps: int) -> None:
    for _ in range(steps):
        out = model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
        token = out.logits[:, -1:].argmax(-1)


def pytorch_rotary_everywhere(model: Any) -> bool:
    """Whether no module of ``model`` sees a replaced module-global function.

    ``use_kernels`` gives only the kernelized model's attention modules our rotary (see
    kernelhub.integrations.transformers.rebind); this checks that the baseline stayed
    PyTorch while the other configurations of its (family, dtype) were prepared."""
    from kernelhub.integrations.transformers.rebind import overrides_of

    return not any(overrides_of(m) for m in model.modules())


def measure(models: dict[str, Any], ids: Any, decode_steps: int, repeats: int, warmup: int
            ) -> dict[str, tuple[float, float]]:
    """Per configuration: (median prefill seconds, median seconds for all decode steps) over
    ``repeats`` rounds, after ``warmup`` untimed rounds (compilation, autotuning
    decisions, first-touch allocations).

    The configurations take turns, one round each, in an order reversed every round, so a
    stretch of load from other processes, and whatever running right after another
    configuration costs, falls on them all alike. The median, not the best: decode streams
    the weights from memory, whose bandwidth on a shared machine varies with the
    neighbours' traffic, and the best round is the one that met the quietest moment — a
    lucky round for one column would decide its ratio."""
    import torch

    rounds: dict[str, list[tuple[float, float]]] = {config: [] for config in models}
    order = list(models)
    with torch.inference_mode():
        for i in range(repeats + warmup):
            for config in order if i % 2 == 0 else order[::-1]:
                model = models[config]
                start = time.perf_counter()
                token, cache = prefill(model, ids)
                middle = time.perf_counter()
                decode(model, token, cache, decode_steps)
                end = time.perf_counter()
                if i >= warmup:
                    rounds[config].append((middle - start, end - middle))
    return {config: (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))
            for config, times in rounds.items()}


def autotune_lines(model: Any) -> list[str]:
    from kernelhub import autotune_report

    lines = []
    for where, seen in autotune_report(model):
        if where.endswith((".0.input_layernorm", ".0.mlp.act_fn")) or "." not in where:
            lines.append(f"    {where} {seen.bucket}: {seen.decision.chosen} — {seen.decision.reason}")
    return lines


def print_rows(family: str, dtype_name: str, times: dict[str, tuple[float, float]],
               configs: list[str], decode_steps: int) -> None:
    """The prefill and decode rows of one (family, dtype): ms and speed vs ``pytorch``."""
    for phase, index, scale in (("prefill", 0, 1), ("decode", 1, decode_steps)):
        ref = times["pytorch"][index] if "pytorch" in times else None
        cells = []
        for config in configs:
            seconds = times[config][index]
            ratio = f" ({ref / seconds:4.2f}x)" if ref else ""
            cells.append(f"{seconds * 1e3 / scale:11.2f} ms{ratio}")
        print(f"{family:<11}{dtype_name:<10}{phase:<9}" + "".join(f"{c:>22}" for c in cells),
              flush=True)


def model_parser(description: str) -> argparse.ArgumentParser:
    """The options every model benchmark takes the same way (model.py, model_profile.py,
    model_ablation.py): the hub the kernels come from and the families to build."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--hub", default=os.environ.get("KERNELHUB_HUB", str(ROOT / ".kernelhub/hub")))
    parser.add_argument("--families", nargs="+", default=["llama", "qwen3"],
                        choices=sorted(FAMILIES))
    return parser


def use_hub(hub: str, script: str, needed: bool = True) -> bool:
    """Point kernelhub at ``hub``; False, said on stderr, where kernels are needed and the
    hub is not there (the scripts then exit 2 before importing torch)."""
    os.environ["KERNELHUB_HUB"] = hub
    if needed and not Path(hub).is_dir():
        print(f"{script}: no hub at {hub}; run ci/main-job (or builder publish) first",
              file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=None,
                        help="layers per model (default: the family's, see FAMILIES)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--prefill", type=int, default=512)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds before timing (compile, autotune decisions)")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--configs", nargs="+",
                        default=["pytorch", "use_kernels", "autotune", "compile", "both"])
    args = parser.parse_args(argv)
    if not use_hub(args.hub, "model.py"):
        return 2

    import torch
    import transformers
    from kernelhub.integrations.transformers import enable
    from kernelhub.system import cpu_summary

    torch.set_num_threads(args.threads)
    enable()
    configs = [c for c in args.configs if not (args.no_compile and c in ("compile", "both"))]
    print(cpu_summary())
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} (1, 5, 15 min; "
          f"{os.cpu_count()} CPUs)")
    print(f"torch {torch.__version__} (loops {torch.backends.cpu.get_cpu_capability()}), "
          f"transformers {transformers.__version__}, {torch.get_num_threads()} threads; "
          f"prefill {args.prefill}, decode {args.decode}; median of {args.repeats} rounds "
          f"after {args.warmup} warm-up round(s)")
    for family in args.families:
        print("  " + describe(family, family_config(family, args.layers)))
    header = f"{'model':<11}{'dtype':<10}{'phase':<9}" + "".join(f"{c:>22}" for c in configs)
    print("\n" + header, flush=True)
    notes = []
    for family in args.families:
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            base = make_model(family, dtype, args.layers)
            ids = torch.randint(0, base.config.vocab_size, (1, args.prefill),
                                generator=torch.Generator().manual_seed(0))
            models = {config: prepare(base, config) for config in configs}
            for config in ("pytorch", "compile"):
                if config in models and not pytorch_rotary_everywhere(models[config]):
                    print(f"model.py: the {config} configuration runs a kernel's rotary",
                          file=sys.stderr)
                    return 1
            times = measure(models, ids, args.decode, args.repeats, args.warmup)
            if "autotune" in models:
                notes += [f"  {family} {dtype_name} autotune decisions (layer 0):",
                          *autotune_lines(models["autotune"])]
            print_rows(family, dtype_name, times, configs, args.decode)
            del base, models
            gc.collect()
    print("(decode: ms per token; ratio: pytorch time / this time, higher is faster)")
    if notes:
        print("\n".join(notes))
    print_attention_choices(configs)
    return 0


def print_attention_choices(configs: list[str]) -> None:
    """Where the kernelized models ran torch's sdpa instead of the attention kernel's loops
    (flash-attn2 times both on each shape bucket's first call and keeps the faster)."""
    if not any(c in ("use_kernels", "autotune", "both") for c in configs):
        return
    from kernelhub import get_kernel
    from kernelhub.integrations.transformers.table import FLASH_ATTN2, FLASH_ATTN2_VERSION

    try:  # the attention kernel the models loaded: the table's version of it
        attention = get_kernel(FLASH_ATTN2, version=FLASH_ATTN2_VERSION)
        lines = attention.attention_dispatch_decisions()
    except Exception as e:  # an older build without the per-shape choice
        print(f"attention kernel: no per-shape choices to show ({type(e).__name__}: {e})")
        return
    print("attention kernel, per shape bucket (loops or torch's sdpa):")
    print("\n".join(f"  {line}" for line in lines) or "  (none)")


if __name__ == "__main__":
    sys.exit(main())
