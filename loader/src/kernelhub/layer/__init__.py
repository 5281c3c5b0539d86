"""Layers API: mark model layers, map them to hub kernels, kernelize a model.

Importing this package does not import torch; torch is imported when a function layer
is made, a mapping is used by kernelize, or a layer is loaded. The public names and the
module defining each are listed once, in ``__init__.pyi`` (see :mod:`kernelhub.lazy_names`).
"""

from __future__ import annotations

import sys
import types

from ..lazy_names import attach_stub

__getattr__, __dir__, __all__, _names = attach_stub(__name__, __file__)


class _Package(types.ModuleType):
    """This package's module type: importing a submodule binds it as an attribute of the
    package, which for ``kernelize`` (module and function share the name) would hide the
    function; keep the function instead."""

    def __setattr__(self, name: str, value: object) -> None:
        if (isinstance(value, types.ModuleType) and _names.names.get(name) == name
                and value.__name__ == f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
