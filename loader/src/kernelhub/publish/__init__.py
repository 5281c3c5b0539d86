"""Publishing kernels to a hub: the write side of the hub protocol.

Nothing on the load path imports this package. The Hub-API publisher is
:class:`kernelhub.publish.hf.HfPublisher`, not re-exported here: huggingface_hub is slow
to import and a LocalHub publish never needs it.
"""

from __future__ import annotations

from .base import HubPublisher, PublishResult
from .local import LocalPublisher
from .select import open_publisher

__all__ = ["HubPublisher", "LocalPublisher", "PublishResult", "open_publisher"]
