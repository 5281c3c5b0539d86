"""Output buffers for the allocating calls: reuse released memory instead of fresh pages.

Why: an output of more than a few MB comes from a fresh ``mmap`` on every call (glibc
serves allocations above its mmap threshold, at most 32 MB, that way and unmaps them on
free), so each call first pays a page fault per 4 KB page and the kernel zeroing it — at
model shapes (2048 tokens x 11008) as much time as the op itself. The preallocated
``out=`` path never pays it; this module gives the allocating path (the layers that
``kernelize`` installs) the same memory a caller would have preallocated.

How it stays safe: the pool keeps the storages of outputs it handed out and reuses one
only when the pool holds the sole reference to it (``use_count == 1``): every tensor, view
or autograd record that still uses an output keeps its storage out of reach. Each call
gets a new tensor over a released storage. Only CPU, only outputs of at least
``MIN_BYTES``, only outside ``torch.compile`` tracing (which must see a plain
allocation); at most ``KEEP`` storages are kept, least recently used dropped.
"""

from __future__ import annotations

import threading

import torch

MIN_BYTES = 1 << 20
KEEP = 8

_lock = threading.Lock()
_pool: list[torch.UntypedStorage] = []


def _released(storage: torch.UntypedStorage) -> bool:
    return torch._C._storage_Use_Count(storage._cdata) == 1


def reusable(shape: tuple[int, ...], like: torch.Tensor,
             stride: tuple[int, ...] = ()) -> torch.Tensor | None:
    """An uninitialised ``shape`` tensor of ``like``'s dtype over pooled memory (contiguous,
    or with ``stride``: a dense layout, a permutation of the contiguous strides), or None
    where pooling does not apply (the caller then allocates as usual)."""
    numel = 1
    for size in shape:
        numel *= size
    nbytes = numel * like.element_size()
    if (nbytes < MIN_BYTES or like.device.type != "cpu" or torch.compiler.is_compiling()
            or (torch.is_grad_enabled() and like.requires_grad)):
        return None
    with _lock:
        for index, storage in enumerate(_pool):
            if storage.nbytes() == nbytes and _released(storage):
                _pool.append(_pool.pop(index))
                break
        else:
            storage = torch.UntypedStorage(nbytes)
            _pool.append(storage)
            if len(_pool) > KEEP:
                _pool.pop(0)
        # Taken inside the lock: once this tensor holds the storage, no other thread
        # can see it as released.
        return torch.empty((0,), dtype=like.dtype).set_(storage, 0, shape, stride)


def empty_like(like: torch.Tensor) -> torch.Tensor:
    """An output of ``like``'s shape: ``torch.empty_like`` below ``MIN_BYTES`` (about 1 us,
    a third of building the shape and calling ``empty``, which matters at one token), pooled
    above."""
    if like.numel() * like.element_size() < MIN_BYTES:
        return torch.empty_like(like)
    return empty(tuple(like.shape), like)


def empty(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """Like ``torch.empty(shape)`` with ``like``'s dtype and device, pooled where it applies."""
    out = reusable(shape, like)
    if out is None:
        out = torch.empty(shape, dtype=like.dtype, device=like.device)
    return out

