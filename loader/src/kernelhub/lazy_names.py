"""Public names of a package that are imported on first use (PEP 562).

``import kernelhub`` runs at interpreter start-up wherever the Transformers hook is
installed, and a model file that only marks its layers imports ``kernelhub.layer``;
neither may pay for the loading code. Both packages list their public names here, each
with the submodule that defines it, and hand their module ``__getattr__``/``__dir__`` to
one :class:`LazyNames`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any


class LazyNames:
    """The lazily imported names of ``package``: name → defining submodule."""

    def __init__(self, package: str, names: Mapping[str, str], *,
                 submodules: bool = False) -> None:
        self.package = package
        self.names = dict(names)
        self.submodules = submodules
        """Whether other attributes may name submodules (``kernelhub.layer`` after a
        bare ``import kernelhub``, as when the package imported them all)."""

    def attribute(self, name: str) -> Any:
        """The module ``__getattr__``: import the defining submodule, bind the name in
        the package so later lookups skip this function."""
        module = self.names.get(name)
        if module is None:
            return self._submodule(name)
        value = getattr(importlib.import_module(f".{module}", self.package), name)
        setattr(sys.modules[self.package], name, value)
        return value

    def listing(self) -> list[str]:
        """The module ``__dir__``: what is bound already and what can be."""
        return sorted(set(vars(sys.modules[self.package])) | set(self.names))

    def _submodule(self, name: str) -> Any:
        missing = AttributeError(f"module {self.package!r} has no attribute {name!r}")
        if not self.submodules:
            raise missing
        try:
            return importlib.import_module(f".{name}", self.package)
        except ModuleNotFoundError as e:
            if e.name != f"{self.package}.{name}":
                raise
            raise missing from None
