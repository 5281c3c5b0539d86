"""Layers API: mark model layers, map them to hub kernels, kernelize a model.

Importing this package does not import torch; torch is imported when a function layer
is made, a mapping is used by kernelize, or a layer is loaded. The public names and the
module defining each are listed once, in ``__init__.pyi`` (see :mod:`kernelhub.lazy_names`).
No submodule is named like a public name (``kernelize`` the function lives in
``kernelizing``), since importing a submodule binds it on the package.
"""

from __future__ import annotations

from ..lazy_names import attach_stub

__getattr__, __dir__, __all__, _names = attach_stub(__name__, __file__)

