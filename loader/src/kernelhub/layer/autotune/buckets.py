"""Which calls share a decision: shape buckets, and the exact signature that finds one fast.

Shapes are bucketed by rounding every dimension but the last up to a power of two: the
last is the model's hidden/head size (fixed), the others are batch, sequence and head
counts, whose speed changes smoothly, so one measurement serves a bucket. Flags (bool,
str and None arguments) are part of the bucket; other numbers are not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ...lazy_names import deferred

if TYPE_CHECKING:
    import torch
else:
    torch = deferred("torch")

Signature = tuple[object, ...]
"""Tensors as (dtype, shape), flags by value, nested sequences alike, anything else as
``...``: exact, hashable and cheap to build on every call."""


def bucket_dim(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else n


_FLAGS = (bool, str, type(None))


def signature(values: Iterable[object], tensor_type: type[torch.Tensor]) -> Signature:
    """What of ``values`` the bucket depends on, exactly and cheaply (the per-call path
    takes ``torch.Tensor`` as an argument rather than importing torch)."""
    found: list[object] = []
    for value in values:
        kind = type(value)
        if kind in _FLAGS:
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.append(signature(value, tensor_type))
        elif isinstance(value, tensor_type):
            found.append((value.dtype, value.shape))
        else:
            found.append(...)
    return tuple(found)


def describe(value: object) -> Iterator[str]:
    """Key parts of one argument: tensors by dtype and bucketed shape; flags by value."""
    if isinstance(value, torch.Tensor):
        shape = [*map(bucket_dim, value.shape[:-1]), *value.shape[-1:]]
        yield f"{str(value.dtype).removeprefix('torch.')}{shape}"
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from describe(item)
    elif isinstance(value, (bool, str)) or value is None:
        yield repr(value)


def bucket(args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[str, ...]:
    """The bucket of one call: its arguments' key parts, keyword arguments by name."""
    parts = [p for a in args for p in describe(a)]
    parts += [f"{k}={p}" for k, v in sorted(kwargs.items()) for p in describe(v)]
    return tuple(parts)


def first_device(args: tuple[object, ...], kwargs: dict[str, object]) -> torch.device | None:
    """The device of the call's first tensor argument (None: no tensor)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None
