"""Time the moe kernel against the PyTorch code Transformers runs, at real layer shapes.

Experts: one MoE layer of Qwen3-30B-A3B (hidden 2048, expert intermediate 768, 128
experts, top 8), of Mixtral-8x7B (hidden 4096, intermediate 14336, 8 experts, top 2) and
of gpt-oss-20b (hidden 2880, intermediate 2880, 32 experts, top 4; transposed weights,
biases, clamped SwiGLU), at a decode token and a prefill, float32 and bfloat16. Baselines, all in one run:
Transformers' default experts implementation on the CPU (``grouped_mm``), its
``batched_mm`` (decode only: it copies every slot's weights), the experts class's own
loop (``eager``), and ``torch.compile`` of ``grouped_mm``. Router: Qwen3.5-MoE's
(hidden 2048, 256 experts, top 8) against its PyTorch forward and torch.compile of it.
Ratios are baseline time / kernel time (higher: the kernel is faster).

    python benchmarks/timing.py build/moe/torch213-cxx11-cpu-x86_64-linux \\
        [--families qwen3_moe mixtral gpt_oss] [--tokens 1 128] [--dtypes float32 bfloat16]
        [--cpu-time]

``--cpu-time``: thread CPU time on one thread, median of interleaved rounds, instead of
the best wall-clock block on the configured threads (for a loaded, shared machine).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from kernelhub import get_local_kernel
from kernelhub.benchmark.timing import cpu_header, interleaved, interleaved_thread_time
from torch import nn
from transformers.integrations import moe as tmoe

SHAPES = {"qwen3_moe": (2048, 768, 128, 8), "mixtral": (4096, 14336, 8, 2),
          "gpt_oss": (2880, 2880, 32, 4)}
"""Family → (hidden, expert intermediate, experts, top-k)."""


class Experts(nn.Module):
    """Transformers' experts module (``@use_experts_implementation`` attributes and the
    class loop every MoE model in Transformers has)."""

    has_gate, is_concatenated, is_transposed = True, True, False
    has_bias, has_post_expert_norm, _is_expert_parallel = False, False, False

    def __init__(self, hidden: int, inter: int, experts: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.num_experts = experts
        self.gate_up_proj = nn.Parameter(torch.randn(experts, 2 * inter, hidden, dtype=dtype)
                                         / hidden**0.5, requires_grad=False)
        self.down_proj = nn.Parameter(torch.randn(experts, hidden, inter, dtype=dtype)
                                      / inter**0.5, requires_grad=False)
        self.act_fn = nn.SiLU()

    _apply_gate = tmoe._default_apply_gate

    def eager(self, hidden: torch.Tensor, index: torch.Tensor, weights: torch.Tensor
              ) -> torch.Tensor:
        out = torch.zeros_like(hidden)
        mask = F.one_hot(index, num_classes=self.num_experts + 1).permute(2, 1, 0)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            e = e[0]
            slot, token = torch.where(mask[e])
            gate, up = F.linear(hidden[token], self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(self.act_fn(gate) * up, self.down_proj[e]) * weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        return out


class GptOssExperts(Experts):
    """gpt-oss's experts layout: ``[E, H, 2I]`` / ``[E, I, H]``, biases, its own gate."""

    is_concatenated, is_transposed, has_bias = False, True, True

    def __init__(self, hidden: int, inter: int, experts: int, dtype: torch.dtype) -> None:
        super().__init__(hidden, inter, experts, dtype)
        self.gate_up_proj = nn.Parameter(self.gate_up_proj.transpose(1, 2).contiguous(),
                                         requires_grad=False)
        self.down_proj = nn.Parameter(self.down_proj.transpose(1, 2).contiguous(),
                                      requires_grad=False)
        self.gate_up_proj_bias = nn.Parameter(torch.randn(experts, 2 * inter, dtype=dtype)
                                              * 0.1, requires_grad=False)
        self.down_proj_bias = nn.Parameter(torch.randn(experts, hidden, dtype=dtype) * 0.1,
                                           requires_grad=False)
        self.alpha, self.limit = 1.702, 7.0

    def _apply_gate(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate = gate_up[..., ::2].clamp(min=None, max=self.limit)
        up = gate_up[..., 1::2].clamp(min=-self.limit, max=self.limit)
        return (up + 1) * (gate * torch.sigmoid(gate * self.alpha))

    def eager(self, hidden: torch.Tensor, index: torch.Tensor, weights: torch.Tensor
              ) -> torch.Tensor:
        out = torch.zeros_like(hidden)
        for e in index.unique():
            token, slot = torch.where(index == e)
            gu = hidden[token] @ self.gate_up_proj[e] + self.gate_up_proj_bias[e]
            y = self._apply_gate(gu) @ self.down_proj[e] + self.down_proj_bias[e]
            out.index_add_(0, token, (y * weights[token, slot, None]).to(out.dtype))
        return out


CPU_TIME = False
"""Whether times are thread CPU time on one thread (``--cpu-time``)."""


def router_reference(hidden: torch.Tensor, weight: torch.Tensor, top_k: int):
    logits = F.linear(hidden, weight)
    probs = torch.softmax(logits, dtype=torch.float, dim=-1)
    top, index = torch.topk(probs, top_k, dim=-1)
    top /= top.sum(dim=-1, keepdim=True)
    return logits, top.to(logits.dtype), index


def _row(label: str, times: dict[str, float]) -> None:
    ours = times["kernel"]
    cells = "".join(f"{k} {v * 1e3:9.2f} ms ({v / ours:5.2f}x)  " for k, v in times.items()
                    if k != "kernel")
    print(f"  {label:<28} kernel {ours * 1e3:9.2f} ms   {cells}", flush=True)


COMPILE = True
"""Whether the torch.compile baselines run (``--no-compile``: compiling takes minutes)."""


def _experts_candidates(moe: Any, args: tuple[Any, ...]
                        ) -> dict[str, Callable[[], Any]]:
    module, hidden, index, weights = args
    candidates: dict[str, Callable[[], Any]] = {
        "kernel": lambda: moe.experts_forward(*args),
        "grouped_mm": lambda: tmoe.grouped_mm_experts_forward(*args),
        "eager": lambda: module.eager(hidden, index, weights),
    }
    if COMPILE:
        compiled = torch.compile(tmoe.grouped_mm_experts_forward, dynamic=False)
        candidates["compile(grouped_mm)"] = lambda: compiled(*args)
    if hidden.shape[0] == 1:
        candidates["batched_mm"] = lambda: tmoe.batched_mm_experts_forward(*args)
    return candidates


def _router_candidates(moe: Any, hidden: torch.Tensor, weight: torch.Tensor, top_k: int
                       ) -> dict[str, Callable[[], Any]]:
    candidates: dict[str, Callable[[], Any]] = {
        "kernel": lambda: moe.router(hidden, weight, top_k),
        "pytorch": lambda: router_reference(hidden, weight, top_k),
    }
    if COMPILE:
        compiled = torch.compile(router_reference, dynamic=False)
        candidates["compile"] = lambda: compiled(hidden, weight, top_k)
    return candidates


def experts_rows(moe: Any, family: str, tokens: list[int], dtypes: list[torch.dtype],
                 min_run_time: float) -> None:
    hidden_size, inter, experts, top_k = SHAPES[family]
    for dtype in dtypes:
        module = (GptOssExperts if family == "gpt_oss" else Experts)(hidden_size, inter,
                                                                    experts, dtype)
        for n in tokens:
            gen = torch.Generator().manual_seed(n)
            hidden = torch.randn(n, hidden_size, generator=gen).to(dtype)
            probs = torch.randn(n, experts, generator=gen).softmax(-1)
            weights, index = torch.topk(probs, top_k, dim=-1)
            weights = (weights / weights.sum(-1, keepdim=True)).to(dtype)
            args = (module, hidden, index, weights)
            candidates = _experts_candidates(moe, args)
            with torch.inference_mode():
                got = moe.experts_forward(*args).float()
                want = tmoe.grouped_mm_experts_forward(*args).float()
                err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
                times = (interleaved_thread_time(candidates, rounds=5) if CPU_TIME
                         else interleaved(candidates, min_run_time))
            _row(f"{family} {str(dtype)[6:]} tokens {n}", times)
            print(f"  {'':<28} max |kernel - grouped_mm| / max |grouped_mm| = {err:.2e}")


def router_rows(moe: Any, tokens: list[int], dtypes: list[torch.dtype],
                min_run_time: float) -> None:
    hidden_size, experts, top_k = 2048, 256, 8
    for dtype in dtypes:
        weight = torch.randn(experts, hidden_size).to(dtype)
        for n in tokens:
            hidden = torch.randn(n, hidden_size).to(dtype)
            with torch.inference_mode():
                times = interleaved(_router_candidates(moe, hidden, weight, top_k),
                                    min_run_time)
            _row(f"router {str(dtype)[6:]} tokens {n}", times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant")
    parser.add_argument("--families", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--tokens", nargs="+", type=int, default=[1, 128])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=1.0)
    parser.add_argument("--no-router", action="store_true")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args(argv)
    global COMPILE, CPU_TIME
    COMPILE = not args.no_compile
    CPU_TIME = args.cpu_time
    if CPU_TIME:
        torch.set_num_threads(1)
    moe = get_local_kernel(args.variant)
    dtypes = [getattr(torch, d) for d in args.dtypes]
    print(cpu_header())
    print("ms per call (" + ("thread CPU time on 1 thread, median of 5 interleaved rounds"
                             if CPU_TIME else "best block of interleaved rounds")
          + "); (Nx) = that time / kernel time")
    for family in args.families:
        experts_rows(moe, family, args.tokens, dtypes, args.min_run_time)
    if not args.no_router:
        router_rows(moe, args.tokens, dtypes, args.min_run_time)


if __name__ == "__main__":
    main()
