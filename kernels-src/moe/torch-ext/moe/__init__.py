"""Mixture-of-experts kernels for PyTorch: fused experts and the top-k router.

``experts`` runs every (token, slot) pair's expert MLP — gather the rows per expert,
gate/up GEMM, gated activation, down GEMM, weighted sum per token — as one op.
``experts_forward`` has the signature of Transformers' experts interface
(``ExpertsInterface``: ``forward(self, hidden_states, top_k_index, top_k_weights)``), so
it can be registered there; ``unsupported_reason`` says which experts modules it serves.
``router`` is the top-k router (softmax or sigmoid scoring), and ``layers`` holds the
pure layers ``kernelize`` installs.
"""

from __future__ import annotations

import torch

from . import _fake, layers
from ._experts import ACTIVATIONS, experts, experts_forward, unsupported_reason
from ._ops import ops

__all__ = [
    "ACTIVATIONS",
    "experts",
    "experts_forward",
    "layers",
    "router",
    "unsupported_reason",
]

# Registered for its side effect: fake (meta) implementations for torch.compile.
del _fake


def router(hidden: torch.Tensor, weight: torch.Tensor, top_k: int, *, sigmoid: bool = False,
           bias: torch.Tensor | None = None, softcap: float = 0.0
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits, top-k weights renormalised to sum 1, top-k expert indices) of ``hidden``
    ``[tokens, hidden]`` against router ``weight`` ``[experts, hidden]``.

    Softmax scoring (default) ranks experts by their softmax probability; ``sigmoid``
    ranks by ``sigmoid(logits) + bias`` (logits soft-capped first when ``softcap > 0``)
    and weights by ``sigmoid(logits)``, returning float32 logits.
    """
    result: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = ops.moe_router(
        hidden, weight, top_k, 1 if sigmoid else 0, bias, softcap)
    return result
