"""Ship: built variants onto a hub — the write side of the hub protocol.

:mod:`.publish` is ``builder publish`` (collect, re-check, sign, push one commit) over a
publisher: :class:`LocalPublisher` (git repositories on disk, :mod:`.local`) or
:class:`kernelhub_builder.ship.hf.HfPublisher` (any Hub-API server), chosen by
:func:`open_publisher`. The formats they write (hub layout, release manifest, release
rule's inputs) are the loader's; nothing on the loader's load path imports this package.
:mod:`.artifacts` merges CI artifacts into one build directory and :mod:`.ci_matrix`
shards the build matrix into CI jobs.

``HfPublisher`` is not re-exported here: huggingface_hub is slow to import and a LocalHub
publish never needs it.
"""

from __future__ import annotations

from .base import HubPublisher, PublishResult
from .local import LocalPublisher
from .select import open_publisher

__all__ = ["HubPublisher", "LocalPublisher", "PublishResult", "open_publisher"]
