"""Hubs as the loader reads them: where variants are loaded from.

Each name is imported on first use: ``HfHub`` brings huggingface_hub, a noticeable import
time that a load from the embedded LocalHub never needs. The names and the module
defining each are listed once, in ``__init__.pyi`` (see :mod:`kernelhub.lazy_names`).
Writing to a hub lives in :mod:`kernelhub_builder.ship`.
"""

from ..lazy_names import attach_stub

__getattr__, __dir__, __all__, _names = attach_stub(__name__, __file__, submodules=True)
