"""Which calls of the public functions the kernel declines, for kernelize to hand back.

Transformers passes its model call's keyword arguments through to these functions and
its own versions ignore the ones they do not name, so ours accept and ignore them too
(``**kwargs``): otherwise kernelize would have to refuse the kernel for every model.
Arguments the kernel names but does not implement (packed sequences, indexed or circular
states) are the opposite case: a call that sets one must not run here, so each function
carries an ``unsupported_reason`` that says so before the call, and kernelize runs the
model's own function for it (the function itself raises when called directly).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

UNSUPPORTED: dict[str, tuple[str, ...]] = {
    "causal_conv1d_fn": ("seq_idx",),
    "causal_conv1d_update": ("cache_seqlens", "conv_state_indices"),
    "mamba_chunk_scan_combined": ("seq_idx", "cu_seqlens", "return_varlen_states"),
    "selective_state_update": ("state_batch_indices",),
    "selective_scan_fn": (),
}
"""Per function: the parameters it names but only takes at their defaults."""


def refusing(func: Callable[..., object]) -> Callable[..., str | None]:
    """``func``'s ``unsupported_reason``: the parameters of :data:`UNSUPPORTED` a call
    sets, or a call that does not bind to ``func``'s signature.

    It runs before every kernelized call, so the signature is read once, here: a call
    looks its declined parameters up by position and by name, and is bound
    (``Signature.bind``, for bind's own message) only when it may not bind at all, i.e.
    too many positional arguments, one given twice or a required one missing. Binding
    every call cost more than some of the decode steps it guards."""
    signature = inspect.signature(func)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    position = {p.name: i for i, p in enumerate(
        p for p in signature.parameters.values() if p.kind in kinds)}
    required = tuple(p.name for p in signature.parameters.values()
                     if p.default is p.empty and p.kind not in (
                         inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD))
    slots = tuple((name, position.get(name)) for name in UNSUPPORTED[func.__name__])

    def unsupported_reason(*args: object, **kwargs: object) -> str | None:
        n = len(args)
        if (n > len(position)
                or any(position.get(name, n) < n for name in kwargs)
                or any(name not in kwargs and position.get(name, n) >= n for name in required)):
            try:
                signature.bind(*args, **kwargs)
            except TypeError as e:
                return f"arguments the kernel does not take ({e})"
        given = [name for name, at in slots
                 if (value := args[at] if at is not None and at < n else kwargs.get(name))
                 is not None and value is not False]
        if given:
            return f"{', '.join(given)} (packed sequences or indexed states) not supported"
        return None

    return unsupported_reason
