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
    sets, or a call that does not bind to ``func``'s signature."""
    signature = inspect.signature(func)
    declined = UNSUPPORTED[func.__name__]

    def unsupported_reason(*args: object, **kwargs: object) -> str | None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            return f"arguments the kernel does not take ({e})"
        given = [n for n in declined
                 if (value := bound.arguments.get(n)) is not None and value is not False]
        if given:
            return f"{', '.join(given)} (packed sequences or indexed states) not supported"
        return None

    return unsupported_reason
