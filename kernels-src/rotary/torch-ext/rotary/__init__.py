"""Rotary position embeddings (RoPE) for PyTorch, in the rotate_half convention.

Layout as Transformers uses it: q and k ``[batch, heads, seq, head_dim]`` (heads may
differ between q and k, as in grouped-query attention), cos and sin
``[batch or 1, seq, rot]`` (or ``[seq, rot]``) with each half of the last dimension
holding the same angles, as Transformers' rotary embedding modules return them.
``rot`` may be smaller than ``head_dim`` (partial rotary): the rest of each head row
passes through unchanged.

* :func:`apply_rotary` rotates q and k in place.
* :func:`apply_rotary_out` writes the rotated q and k into caller-owned tensors.
* :func:`rotary` returns rotated copies and is differentiable.
* :func:`apply_rotary_transformers` is a drop-in for Transformers'
  ``apply_rotary_pos_emb`` (same signature, same results).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from . import _autograd, _buffers, _fake
from ._ops import add_op_namespace_prefix, ops

__all__ = [
    "apply_rotary",
    "apply_rotary_out",
    "apply_rotary_transformers",
    "cpu_capability",
    "rotary",
    "set_cpu_capability",
]

# Imported for their side effects: fake implementations for torch.compile and
# the autograd formula of `rotary`.
del _autograd, _fake


def apply_rotary(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k in place (no autograd); returns them for convenience."""
    ops.apply_rotary(q, k, cos, sin)
    return q, k


def apply_rotary_out(
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    conj: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Write rotated q and k into q_out and k_out (``conj``: rotate by -sin)."""
    ops.apply_rotary_out(q_out, k_out, q, k, cos, sin, conj)
    return q_out, k_out


def rotary(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, conj: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotated copies of q and k; differentiable in q, k, cos and sin."""
    return ops.rotary(q, k, cos, sin, conj)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _kernel_device_types() -> frozenset[str]:
    """The device types this build registered kernels for. A variant holds one backend:
    a CPU build has none for CUDA tensors, a CUDA (or ROCm, which torch reports as
    "cuda") build none for CPU tensors. Computed once at import, so torch.compile sees
    a constant instead of a dispatcher query it would have to break the graph on."""
    name = add_op_namespace_prefix("rotary")
    return frozenset(
        device
        for device, key in (("cpu", "CPU"), ("cuda", "CUDA"))
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
    )


_KERNEL_DEVICE_TYPES = _kernel_device_types()


def _kernel_layout(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int
) -> bool | None:
    """How the kernel can take these inputs: False for [b, h, s, d] (unsqueeze_dim 1),
    True for [b, s, h, d] (unsqueeze_dim 2, passed as a transposed view), None when
    the kernel does not cover them and the PyTorch formula must run."""
    if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or sin.shape != cos.shape:
        return None
    if unsqueeze_dim in (1, -3):
        transposed = False
    elif unsqueeze_dim in (2, -2):
        transposed = True
    else:
        return None
    if not q.device == k.device == cos.device == sin.device:
        return None
    if q.device.type not in _KERNEL_DEVICE_TYPES:
        return None
    dtypes = {q.dtype, k.dtype, cos.dtype, sin.dtype}
    if len(dtypes) != 1 or q.dtype not in (
        torch.float32, torch.float64, torch.bfloat16, torch.float16
    ):
        return None
    seq_dim = 1 if transposed else 2
    batch, seq, dim = cos.shape
    for x in (q, k):
        if x.shape[0] != q.shape[0] or x.shape[seq_dim] != seq or x.shape[-1] != dim:
            return None
    if batch not in (1, q.shape[0]) or dim % 2:
        return None
    return transposed


def _prepare_call(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    unsqueeze_dim: int = 1,
) -> str | Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Why the kernel does not take this call of ``apply_rotary_transformers``, or the
    call itself with its layout worked out (kernelize's ``prepare_call``: deciding and
    calling read the arguments once).

    A model that registers ``rotary_pos_emb`` can mean another rotation by the same
    arguments: tables of ``head_dim / 2`` angles pair each column with its partner half a
    row away in gpt-oss and with its neighbour in the OpenAI privacy filter, which only the
    model's code says. kernelize hands such calls (and any the kernel does not cover:
    other ranks, dtypes, devices) back to the model's own function.
    """
    del position_ids
    if cos.dim() >= 1 and q.dim() >= 1 and cos.shape[-1] != q.shape[-1]:
        return (f"cos/sin of {cos.shape[-1]} angles for heads of {q.shape[-1]}: a layout "
                "only the model's code says")
    transposed = _kernel_layout(q, k, cos, sin, unsqueeze_dim)
    if transposed is None:
        return "inputs outside the kernel (rank, dtype, device or shape)"
    return functools.partial(_kernel_call, q, k, cos, sin, transposed)


def _unsupported_reason(*args: object, **kwargs: object) -> str | None:
    """The reason alone, for loaders that ask only that (kernelhub before
    ``prepare_call``)."""
    verdict = _prepare_call(*args, **kwargs)  # type: ignore[arg-type]
    return verdict if isinstance(verdict, str) else None


def apply_rotary_transformers(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    unsqueeze_dim: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Transformers' ``apply_rotary_pos_emb``, run by the kernel.

    Same signature and results: ``(q * cos + rotate_half(q) * sin, k * cos +
    rotate_half(k) * sin)`` with cos/sin unsqueezed at ``unsqueeze_dim``; returns new
    tensors and is differentiable. ``position_ids`` is ignored, as in Transformers
    (cos and sin already hold the positions). Inputs the kernel does not cover (other
    ranks or dtypes, mixed dtypes or devices, a device this build has no kernels for)
    run Transformers' own formula,
    so the function never refuses what the original accepts; under kernelize,
    :attr:`prepare_call` hands them to the model's own function instead.
    """
    del position_ids
    transposed = _kernel_layout(q, k, cos, sin, unsqueeze_dim)
    if transposed is None:
        cos_u, sin_u = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos_u + _rotate_half(q) * sin_u, k * cos_u + _rotate_half(k) * sin_u
    return _kernel_call(q, k, cos, sin, transposed)


def _kernel_call(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel on inputs :func:`_kernel_layout` accepted (``transposed``: its answer)."""
    if transposed:
        q_embed, k_embed = ops.rotary(q.transpose(1, 2), k.transpose(1, 2), cos, sin, False)
        return q_embed.transpose(1, 2), k_embed.transpose(1, 2)
    if ((torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, cos, sin)))
            or torch.compiler.is_compiling()):
        return ops.rotary(q, k, cos, sin, False)
    # Without gradients the out= op runs (the functional op carries the autograd wrapper,
    # which costs more than the kernel for one token), on pooled memory where large.
    # q's and k's own layout, as the functional op (and eager arithmetic) would give.
    q_out, k_out = _buffers.empty_like(q), _buffers.empty_like(k)
    ops.apply_rotary_out(q_out, k_out, q, k, cos, sin, False)
    return q_out, k_out


apply_rotary_transformers.prepare_call = _prepare_call  # type: ignore[attr-defined]
apply_rotary_transformers.unsupported_reason = _unsupported_reason  # type: ignore[attr-defined]


def _cpu_only(name: str):
    """The CPU build's loop-selection op; GPU builds have none and say so."""
    if not hasattr(ops, name):
        raise RuntimeError(
            f"rotary.{name}: this build has no CPU kernels (it was built for a GPU "
            "backend); load the cpu variant of the kernel to select CPU loops"
        )
    return getattr(ops, name)


def cpu_capability() -> str:
    """The vector loops the CPU ops run: ``DEFAULT``, ``AVX2`` or ``AVX512``."""
    return _cpu_only("cpu_capability")()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU ops on other compiled loops (one this CPU supports).

    For tests and benchmarks that compare the loops; returns the previous choice.
    """
    return _cpu_only("set_cpu_capability")(capability)
