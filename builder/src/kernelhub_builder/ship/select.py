"""Choosing a publisher from what the user wrote: a path, a URL, ``"hf"`` or nothing.

The same words as :func:`kernelhub.hub.open_hub`, so ``--hub`` means one place whether
the builder publishes to it or the loader reads from it.
"""

from __future__ import annotations

import os

from kernelhub.hub.select import hub_address

from .base import HubPublisher
from .local import LocalPublisher


def open_publisher(target: HubPublisher | str | os.PathLike[str] | None = None, *,
                   allow_model_repo: bool = False) -> HubPublisher:
    """The publisher for ``target`` (see :func:`kernelhub.hub.open_hub` for the words).

    ``allow_model_repo``: a Hub-API server without kernel repositories may get a model
    repository (see :class:`kernelhub_builder.ship.hf.HfPublisher`); a LocalHub has no types."""
    if isinstance(target, HubPublisher):
        return target
    address = hub_address(target)
    if address.root is not None:
        return LocalPublisher(address.root)
    from .hf import HfPublisher  # huggingface_hub only when a Hub-API hub is used

    return HfPublisher(endpoint=address.endpoint, allow_model_repo=allow_model_repo)
