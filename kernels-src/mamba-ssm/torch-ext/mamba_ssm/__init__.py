"""Mamba kernels for PyTorch: the causal depthwise conv1d, Mamba-2's scan and
decode step (the state space duality layer of Mamba-2, Falcon-H1 and hybrid
models) and Mamba-1's selective scan.

The functions have the names, signatures and results of the ``causal_conv1d``
and ``mamba_ssm`` packages' functions that Transformers calls when those are
present (``causal_conv1d_fn``, ``causal_conv1d_update``,
``mamba_chunk_scan_combined``, ``selective_state_update``,
``selective_scan_fn``), so a Transformers kernel mapping can point its hub
function names at them. Inputs the compiled loops do not cover (other dtypes,
devices this build has no kernels for) run the same formulas in PyTorch, so a
function never refuses what the original accepts (other keyword arguments, which
Transformers passes through from the model call, are ignored as its own functions
ignore them; see ``_calls``); gradients are exact
(recomputed through the PyTorch formulas, see ``_recompute``).
"""

from __future__ import annotations

from ._calls import refusing
from ._conv import causal_conv1d_fn, causal_conv1d_update
from ._mamba1 import selective_scan_fn
from ._ops import ops
from ._ssd import mamba_chunk_scan_combined, selective_state_update

__all__ = [
    "causal_conv1d_fn",
    "causal_conv1d_update",
    "cpu_capability",
    "mamba_chunk_scan_combined",
    "selective_scan_fn",
    "selective_state_update",
    "set_cpu_capability",
]

# The in-place decode functions keep no autograd graph of the state; the others
# differentiate through their PyTorch formulas. None is traceable by torch.compile
# (no fake implementations), so kernelize uses them in INFERENCE and TRAINING only.
for _f in (causal_conv1d_fn, causal_conv1d_update, mamba_chunk_scan_combined,
           selective_state_update, selective_scan_fn):
    _f.has_backward = True  # type: ignore[attr-defined]
    _f.can_torch_compile = False  # type: ignore[attr-defined]
    _f.unsupported_reason = refusing(_f)  # type: ignore[attr-defined]
del _f


def cpu_capability() -> str:
    """Which compiled CPU loops run (DEFAULT, AVX2, AVX512, AVX512_BF16)."""
    if not hasattr(ops, "cpu_capability"):
        raise RuntimeError("cpu_capability: this build has no CPU kernels")
    return str(ops.cpu_capability())


def set_cpu_capability(capability: str) -> str:
    """Switch the CPU ops to other compiled loops this CPU supports; returns the previous
    choice (for tests and benchmarks)."""
    if not hasattr(ops, "set_cpu_capability"):
        raise RuntimeError("set_cpu_capability: this build has no CPU kernels")
    return str(ops.set_cpu_capability(capability))
