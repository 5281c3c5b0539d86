"""Gated delta rule kernels (Gated DeltaNet; the linear attention of Qwen3.5 and Qwen3-Next).

``chunk_gated_delta_rule`` (prefill, chunked) and ``fused_recurrent_gated_delta_rule``
(decode, token by token) take the arguments the Transformers modeling code passes to its
PyTorch fallbacks of the same names and return what those return: the output
``[batch, seq, value_heads, value_dim]`` in the input dtype, and the float32 final state
``[batch, value_heads, key_dim, value_dim]`` when ``output_final_state`` (else None).
``layers.Qwen3_5GatedDeltaNet`` and ``layers.Qwen3NextGatedDeltaNet`` are the whole layers
for ``kernelize``.
"""

from __future__ import annotations

from . import _fake, layers
from ._functional import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from ._ops import ops

__all__ = [
    "chunk_gated_delta_rule",
    "cpu_capability",
    "fused_recurrent_gated_delta_rule",
    "layers",
    "set_cpu_capability",
]

# Registered for its side effect: Meta kernels for torch.compile.
del _fake


def _cpu_only(name: str):
    """The CPU build's loop-selection op; GPU builds have none and say so."""
    if not hasattr(ops, name):
        raise RuntimeError(
            f"gated_delta_rule.{name}: this build has no CPU kernels (it was built for a GPU "
            "backend); load the cpu variant of the kernel to select CPU loops"
        )
    return getattr(ops, name)


def cpu_capability() -> str:
    """The vector loops the CPU ops run: ``DEFAULT``, ``AVX2``, ``AVX512`` or ``AVX512_BF16``."""
    return _cpu_only("cpu_capability")()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU ops on other compiled loops (one this CPU supports); returns the previous
    choice. For tests and benchmarks that compare the loops."""
    return _cpu_only("set_cpu_capability")(capability)
