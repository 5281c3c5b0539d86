"""Pure layers ``kernelize`` installs (no ``__init__``, no state: ``forward`` runs on the
model's own module and reads its parameters).

``SoftmaxTopKRouter`` is the name Transformers registers for two routers: Qwen3.5-MoE's
(softmax over experts, top-k, renormalised) and Laguna's (sigmoid of soft-capped logits,
top-k of sigmoid + ``e_score_correction_bias``, renormalised). The layer tells them apart
by that bias parameter, as their code differs by it. No backward: Transformers maps the
router for inference only.
"""

from __future__ import annotations

import torch
from torch import nn

from ._experts import experts_forward
from ._ops import ops


class SoftmaxTopKRouter(nn.Module):
    """``(router_logits, top-k weights, top-k indices)`` of ``hidden_states``."""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        weight = self.weight
        assert isinstance(weight, torch.Tensor)
        hidden = hidden_states.reshape(-1, weight.shape[1])
        bias = getattr(self, "e_score_correction_bias", None)
        top_k = self.top_k
        assert isinstance(top_k, int)
        if bias is None:
            result = ops.moe_router(hidden, weight, top_k, 0, None, 0.0)
        else:
            softcap = float(getattr(self, "router_logit_softcapping", 0.0) or 0.0)
            result = ops.moe_router(hidden, weight, top_k, 1, bias, softcap)
        logits, weights, indices = result
        return logits, weights, indices


class Experts(nn.Module):
    """Transformers' experts layer (``gate_up_proj``, ``down_proj``, ``act_fn``) as one
    fused op; the same function Transformers' experts interface gets."""

    has_backward: bool = False
    can_torch_compile: bool = True
    forward = experts_forward
