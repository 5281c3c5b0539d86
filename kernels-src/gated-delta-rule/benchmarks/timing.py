"""Time the gated delta rule at Qwen3.5 / Qwen3-Next shapes: this kernel vs the PyTorch
fallbacks Transformers runs today and torch.compile of them.

Usage (a built variant dir, or any path kernelhub.get_local_kernel accepts):

    python benchmarks/timing.py build/gated-delta-rule/torch213-cxx11-cpu-x86_64-linux

Shapes: 16 key heads, 32 value heads, head dims 128 (the Qwen3.5 config defaults, as in
Qwen3-Next), batch 1; prefill of --seqs tokens (``chunk_gated_delta_rule``) and one decode
token against a state (``fused_recurrent_gated_delta_rule``), q/k L2-normalised in the
kernel as the models call it. Ratios are the baseline's time over ours, one run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from kernelhub.benchmark.timing import cpu_header, interleaved, interleaved_thread_time
from torch import nn

KEY_HEADS, VALUE_HEADS, DIM = 16, 32, 128


def fallbacks():
    """Transformers' fallbacks (the torch functions under its hub wrappers)."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    return (
        getattr(m.torch_chunk_gated_delta_rule, "__wrapped__", m.torch_chunk_gated_delta_rule),
        getattr(
            m.torch_recurrent_gated_delta_rule, "__wrapped__", m.torch_recurrent_gated_delta_rule
        ),
    )


def inputs(seq: int, dtype: torch.dtype) -> dict:
    return dict(
        query=torch.randn(1, seq, KEY_HEADS, DIM, dtype=dtype),
        key=torch.randn(1, seq, KEY_HEADS, DIM, dtype=dtype),
        value=torch.randn(1, seq, VALUE_HEADS, DIM, dtype=dtype),
        g=-F.softplus(torch.randn(1, seq, VALUE_HEADS)),
        beta=torch.rand(1, seq, VALUE_HEADS, dtype=dtype),
        initial_state=0.1 * torch.randn(1, VALUE_HEADS, DIM, DIM),
    )


CPU_TIME = False
"""--cpu-time: one torch thread, each candidate timed by this thread's CPU time (median of
interleaved rounds): a loaded shared machine stretches wall time, not CPU time."""


def measure(candidates: dict, min_run_time: float, rounds: int) -> dict[str, float]:
    if CPU_TIME:
        return interleaved_thread_time(candidates, rounds=max(rounds, 5))
    return interleaved(candidates, min_run_time, rounds=rounds)


def case(label: str, ours, theirs, compiled, x: dict, min_run_time: float, rounds: int) -> None:
    kwargs = dict(output_final_state=True, use_qk_l2norm_in_kernel=True)
    for _ in range(2):  # compile and reach the steady state before timing
        compiled(**x, **kwargs)
    t = measure(
        {
            "kernel": lambda: ours(**x, **kwargs),
            "fallback": lambda: theirs(**x, **kwargs),
            "compile": lambda: compiled(**x, **kwargs),
        },
        min_run_time,
        rounds,
    )
    print(
        f"  {label:<26}{t['kernel'] * 1e3:11.3f}{t['fallback'] * 1e3:12.3f}{t['compile'] * 1e3:12.3f}"
        f"{t['fallback'] / t['kernel']:11.2f}x{t['compile'] / t['kernel']:11.2f}x"
    )


def _layer(name: str, dtype: torch.dtype) -> nn.Module:
    """Qwen3.5's or Qwen3-Next's gated delta net at the released hidden size 4096 (16 key /
    32 value heads of 128), random weights."""
    if name == "Qwen3NextGatedDeltaNet":
        from transformers.models.qwen3_next.modeling_qwen3_next import (
            Qwen3NextConfig,
            Qwen3NextGatedDeltaNet,
        )

        config = Qwen3NextConfig(
            hidden_size=4096, num_hidden_layers=1, layer_types=["linear_attention"]
        )
        return Qwen3NextGatedDeltaNet(config, 0).to(dtype).eval()
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet, Qwen3_5TextConfig

    config = Qwen3_5TextConfig(
        hidden_size=4096, num_hidden_layers=1, layer_types=["linear_attention"]
    )
    return Qwen3_5GatedDeltaNet(config, 0).to(dtype).eval()


def layer_case(
    kernel: ModuleType, layer_name: str, name: str, seq: int, min_run_time: float, rounds: int
) -> None:
    """The whole layer, PyTorch's forward vs this kernel's layer forward, without a cache."""
    dtype = getattr(torch, name)
    layer = _layer(layer_name, dtype)
    ours = getattr(kernel.layers, layer_name).forward.__get__(layer)  # what kernelize does
    x = torch.randn(1, seq, 4096, dtype=dtype)
    with torch.no_grad():
        t = measure({"kernel": lambda: ours(x), "pytorch": lambda: layer(x)}, min_run_time, rounds)
    label = f"{name} {'next ' if 'Next' in layer_name else ''}layer prefill {seq}"
    print(
        f"  {label:<26}{t['kernel'] * 1e3:11.3f}{t['pytorch'] * 1e3:12.3f}"
        f"{'-':>12}{t['pytorch'] / t['kernel']:11.2f}x{'-':>11}"
    )


def conv_case(kernel: ModuleType, name: str, seq: int, min_run_time: float, rounds: int) -> None:
    """The layer's causal conv + SiLU at the real width (2 x 16 x 128 + 32 x 128 = 8192
    channels, 4 taps) on the input projection's [batch, seq, channels] output: PyTorch's
    depthwise conv1d as the model runs it (channels first, then back) vs this kernel's op."""
    dtype = getattr(torch, name)
    channels = 2 * KEY_HEADS * DIM + VALUE_HEADS * DIM
    x = torch.randn(1, seq, channels, dtype=dtype)
    weight = torch.randn(channels, 1, 4, dtype=dtype)
    op = kernel._ops.ops.causal_conv1d_silu

    def pytorch() -> torch.Tensor:
        out = F.conv1d(x.transpose(1, 2), weight, None, padding=3, groups=channels)
        return F.silu(out[:, :, :seq]).transpose(1, 2)

    t = measure(
        {"kernel": lambda: op(x, weight.squeeze(1), None, None, seq), "pytorch": pytorch},
        min_run_time,
        rounds,
    )
    print(
        f"  {name + ' conv+silu ' + str(seq):<26}{t['kernel'] * 1e3:11.3f}{t['pytorch'] * 1e3:12.3f}"
        f"{'-':>12}{t['pytorch'] / t['kernel']:11.2f}x{'-':>11}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="built variant (or kernel) path")
    parser.add_argument("--seqs", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--layer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also the layer's conv and the whole Qwen3.5 and Qwen3-Next layers at prefill 256 "
        "(default on; the fallback column is then PyTorch's conv1d / PyTorch's layer)",
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="one torch thread, timed by thread CPU time (medians; for loaded machines)",
    )
    args = parser.parse_args(argv)
    if args.cpu_time:
        global CPU_TIME
        CPU_TIME = True
        torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = 64
    import kernelhub

    kernel = kernelhub.get_local_kernel(args.path)
    chunk_ref, recurrent_ref = fallbacks()
    chunk_compiled = torch.compile(chunk_ref, dynamic=False)
    recurrent_compiled = torch.compile(recurrent_ref, dynamic=False)
    print(cpu_header())
    print(
        f"gated delta rule, {KEY_HEADS} key / {VALUE_HEADS} value heads, head dims {DIM}, batch 1 "
        f"(loops {kernel.cpu_capability()}); ratios: baseline time / kernel time"
    )
    print(
        f"  {'case':<26}{'kernel ms':>11}{'fallback ms':>12}{'compile ms':>12}"
        f"{'vs fallback':>12}{'vs compile':>11}"
    )
    for name in args.dtypes:
        dtype = getattr(torch, name)
        for seq in args.seqs:
            case(
                f"{name} prefill {seq}",
                kernel.chunk_gated_delta_rule,
                chunk_ref,
                chunk_compiled,
                inputs(seq, dtype),
                args.min_run_time,
                args.rounds,
            )
        case(
            f"{name} decode 1",
            kernel.fused_recurrent_gated_delta_rule,
            recurrent_ref,
            recurrent_compiled,
            inputs(1, dtype),
            args.min_run_time,
            args.rounds,
        )
        if args.layer:
            for seq in (256, 1):
                conv_case(kernel, name, seq, args.min_run_time, args.rounds)
            for layer_name in ("Qwen3_5GatedDeltaNet", "Qwen3NextGatedDeltaNet"):
                layer_case(kernel, layer_name, name, 256, args.min_run_time, args.rounds)


if __name__ == "__main__":
    main()
