"""Import a verified variant's modules from its verified bytes, never from bytecode.

Python's own file loaders would read each ``.py`` again (after verification) and prefer
a ``__pycache__/*.pyc`` whose header matches the source's size and mtime — a file no
digest covers. This finder answers for every module under a loaded variant's name and
only from the :class:`~kernelhub.snapshot.VerifiedVariant`: sources are compiled from the
bytes that were hashed, native extensions are loaded from the private verified copy,
and a module that is not part of the verified build cannot be imported at all.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import sys
import threading
from collections.abc import Sequence
from types import CodeType, ModuleType

from .snapshot import VerifiedVariant


class _VerifiedSourceLoader(importlib.abc.InspectLoader):
    """Executes one module from verified source bytes; writes no bytecode anywhere."""

    def __init__(self, path: str, source: bytes, is_package: bool) -> None:
        self.path = path
        self.source = source
        self._is_package = is_package

    def is_package(self, fullname: str) -> bool:
        return self._is_package

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source)

    def get_code(self, fullname: str) -> CodeType:
        return compile(self.source, self.path, "exec", dont_inherit=True)

    def exec_module(self, module: ModuleType) -> None:
        # Tracebacks and inspect.getsource (which Triton uses to compile kernels) read
        # the verified lines from here; mtime None tells linecache never to re-read them.
        lines = self.get_source(module.__name__).splitlines(keepends=True)
        linecache.cache[self.path] = (len(self.source), None, lines, self.path)
        exec(self.get_code(module.__name__), module.__dict__)


class VerifiedFinder(importlib.abc.MetaPathFinder):
    """The only finder for names under a loaded variant's top-level name."""

    def __init__(self) -> None:
        self._variants: dict[str, VerifiedVariant] = {}
        self._lock = threading.Lock()

    def add(self, name: str, variant: VerifiedVariant) -> None:
        with self._lock:
            self._variants[name] = variant
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def remove(self, name: str) -> None:
        with self._lock:
            self._variants.pop(name, None)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top, _, rest = fullname.partition(".")
        variant = self._variants.get(top)
        if variant is None:
            return None
        spec = module_spec(fullname, variant, rest)
        if spec is None:
            # Raising stops the search: no other finder may supply an unverified file.
            raise ModuleNotFoundError(
                f"{fullname} is not part of the verified build loaded from {variant.source}",
                name=fullname,
            )
        return spec


def module_spec(
    fullname: str, variant: VerifiedVariant, rest: str
) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``rest`` (dotted, relative to the variant root) from verified files."""
    rel = rest.replace(".", "/")
    prefix = f"{rel}/" if rel else ""
    init = f"{prefix}__init__.py"
    if init in variant.python_sources:
        return _source_spec(fullname, variant, init, package_dir=rel or ".")
    if not rel:
        return None
    if (module := f"{rel}.py") in variant.python_sources:
        return _source_spec(fullname, variant, module, package_dir=None)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (ext := f"{rel}{suffix}") in variant.files:
            origin = str(variant.copy / ext)
            loader = importlib.machinery.ExtensionFileLoader(fullname, origin)
            return importlib.util.spec_from_file_location(fullname, origin, loader=loader)
    if any(f.startswith(prefix) for f in variant.files):  # a directory without __init__.py
        spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        spec.submodule_search_locations = [str(variant.copy / rel)]
        return spec
    return None


def _source_spec(
    fullname: str, variant: VerifiedVariant, rel: str, package_dir: str | None
) -> importlib.machinery.ModuleSpec:
    origin = str(variant.copy / rel)
    loader = _VerifiedSourceLoader(origin, variant.python_sources[rel], package_dir is not None)
    spec = importlib.machinery.ModuleSpec(
        fullname, loader, origin=origin, is_package=package_dir is not None
    )
    spec.has_location = True  # sets __file__ (to the private verified copy)
    if package_dir is not None:
        spec.submodule_search_locations = [str(variant.copy / package_dir)]
    return spec


FINDER = VerifiedFinder()
