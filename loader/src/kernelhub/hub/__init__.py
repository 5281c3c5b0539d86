"""Hubs as the loader reads them: where variants are loaded from.

``HfHub`` is imported lazily: huggingface_hub costs a noticeable import time that a load
from the embedded LocalHub never needs. Writing to a hub lives in :mod:`kernelhub_builder.ship`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import BUILD_DIR, Hub
from .local import LocalHub
from .select import open_hub

if TYPE_CHECKING:
    from .hf import HfHub

__all__ = ["BUILD_DIR", "HfHub", "Hub", "LocalHub", "open_hub"]


def __getattr__(name: str) -> Any:
    if name == "HfHub":
        from .hf import HfHub

        return HfHub
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
