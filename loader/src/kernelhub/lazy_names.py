"""Public names of a package, written once in its stub and imported on first use.

``import kernelhub`` runs at interpreter start-up wherever the Transformers hook is
installed, and a model file that only marks its layers imports ``kernelhub.layer``;
neither may pay for the loading code. So a package's public names are imported on first
use (PEP 562), and which submodule defines each is written in one place: the package's
stub, ``__init__.pyi``, one line per name::

    from .api import get_kernel as get_kernel

Type checkers and editors read the stub, so they see every name with its type; at run
time :func:`attach_stub` reads the same lines (the approach of Scientific Python's SPEC 1,
``lazy_loader.attach_stub``, with a line reader instead of ``ast``, which the start-up
import cannot afford) and gives the package its ``__getattr__``, ``__dir__`` and
``__all__``. A test parses every stub with ``ast`` and compares.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType


class LazyNames:
    """The lazily imported names of ``package``: name → defining module (relative to the
    package, or with a leading ``.`` relative to its parent)."""

    def __init__(self, package: str, names: Mapping[str, str], *,
                 submodules: bool = False) -> None:
        self.package = package
        self.names = dict(names)
        self.submodules = submodules
        """Whether other attributes may name submodules (``kernelhub.layer`` after a
        bare ``import kernelhub``, as when the package imported them all)."""

    def attribute(self, name: str) -> object:
        """The module ``__getattr__``: import the defining submodule, bind the name in
        the package so later lookups skip this function.

        The garbage collector waits while it imports (if it was on): importing our
        modules allocates thousands of objects that all live as long as the process
        (functions, classes, their dicts), and the collections they trigger — a young
        generation one and a middle one of ~1 ms beside torch's objects on the first
        load — find nothing to free. Collection is only postponed: the count keeps
        growing, so the first allocation after the import collects as it would have;
        nothing is frozen and a collector the user turned off stays off.
        """
        module = self.names.get(name)
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            if module is None:
                return self._submodule(name)
            value = getattr(importlib.import_module(f".{module}", self.package), name)
        finally:
            if collecting:
                gc.enable()
        setattr(sys.modules[self.package], name, value)
        return value

    def listing(self) -> list[str]:
        """The module ``__dir__``: what is bound already and what can be."""
        return sorted(set(vars(sys.modules[self.package])) | set(self.names))

    def _submodule(self, name: str) -> object:
        missing = AttributeError(f"module {self.package!r} has no attribute {name!r}")
        if not self.submodules:
            raise missing
        try:
            return importlib.import_module(f".{name}", self.package)
        except ModuleNotFoundError as e:
            if e.name != f"{self.package}.{name}":
                raise
            raise missing from None


def stub_names(text: str, where: str) -> dict[str, str]:
    """Name → module of a stub's ``from .module import name as name`` lines.

    Lines that are blank or comments are skipped; any other line is an error, so a
    stub cannot hold a name that the package would not serve.
    """
    names: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if (len(words) != 6 or words[0] != "from" or words[2] != "import" or words[4] != "as"
                or words[3] != words[5] or not words[1].startswith(".")):
            raise ImportError(f"{where}:{number}: expected 'from .module import name as "
                              f"name', not {line.strip()!r}")
        names[words[3]] = words[1][1:]
    return names


def attach_stub(package: str, init_file: str, *, submodules: bool = False
                ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str], LazyNames]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for the package whose ``__init__.py``
    is ``init_file``, from the names its ``__init__.pyi`` lists; and the table itself."""
    stub = f"{init_file[:-3]}.pyi" if init_file.endswith(".py") else f"{init_file}.pyi"
    try:
        with open(stub, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ImportError(f"{package} cannot read its name table {stub}: {e.strerror or e}; "
                          "reinstall kernelhub") from None
    lazy = LazyNames(package, stub_names(text, stub), submodules=submodules)
    return lazy.attribute, lazy.listing, sorted(lazy.names), lazy


class DeferredModule(ModuleType):
    """A heavy or optional third-party module that a kernelhub module declares at its top
    and imports on first attribute access, so ``import kernelhub``, a model file that only
    marks its layers and a warm load pay only for what they touch. Declared beside the
    real import, which type checkers read::

        if TYPE_CHECKING:
            import torch
        else:
            torch = deferred("torch")

    Every access looks the module up again (one dict lookup once it is imported), so
    nothing is copied from it and it may be imported by anyone first. Only for modules
    outside kernelhub (torch, huggingface_hub, transformers, sigstore, matplotlib,
    packaging, filelock, cryptography): kernelhub's own modules are imported plainly, and
    laziness among them comes from the layout (a test refuses ``deferred("kernelhub.…")``).
    Where an optional package is missing, its ImportError comes at the first access, so a
    feature that handles the absence makes that access inside its ``try``. An
    ``except mod.Error:`` clause reads ``mod`` only when an exception reaches it. The
    rule and its one exception are ``loader/tests/test_declared_imports.py``."""

    def __getattr__(self, attr: str) -> object:
        module = sys.modules.get(self.__name__)
        if module is None or getattr(module.__spec__, "_initializing", False):
            # Another thread may be executing the module right now: import_module waits
            # for it (taking the module's import lock) instead of reading a half-made one.
            module = importlib.import_module(self.__name__)
        return getattr(module, attr)


def deferred(name: str) -> ModuleType:
    """Module ``name``, imported when first used (see :class:`DeferredModule`)."""
    return DeferredModule(name)
