"""LayerNorm kernels for PyTorch: layer_norm forward and backward, and a drop-in layer.

Reduced-precision inputs (bf16/fp16) are computed in float32 and rounded once,
as ``torch.nn.functional.layer_norm`` does on CPU. ``out=`` writes a
preallocated tensor (no autograd then, as in PyTorch).
"""

from __future__ import annotations

from . import _autograd, _fake, layers
from ._functional import cpu_capability, layer_norm, set_cpu_capability

__all__ = ["cpu_capability", "layer_norm", "layers", "set_cpu_capability"]

# Imported for their side effects: fake implementations and the autograd formula.
del _autograd, _fake
