"""Step 4, import: a verified variant imported under its unique id, once per process.

A variant is imported from outside ``sys.path`` under the module name ``metadata.id``
(``_<name>_<backend>_<hash>``), which is also its torch op namespace. That is what lets
two versions of one kernel live side by side. It also means a namespace can be claimed
only once per process: a second ``TORCH_LIBRARY`` for the same namespace aborts the
process, so a clash is refused here, before any of the variant's code runs.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.metadata", "kernelhub.load.verified_import",
}

import importlib
import importlib.metadata
import importlib.util
import mmap
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import KernelLoadError
from ..formats.metadata import Metadata
from ..lazy_names import deferred
from ..value_types import Record
from .verified_import import FINDER, NATIVE_SUFFIXES, VerifiedVariant

if TYPE_CHECKING:
    from packaging import requirements
else:  # read only for a kernel that declares python-depends
    requirements = deferred("packaging.requirements")

_OPS_PREFIX = b"torch.ops."
_IDENT_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_IDENT = _IDENT_START | frozenset(b"0123456789")
_TORCH_OPS_ATTRS = {"load_library", "import_module"}


class LoadedVariant(Record, frozen=True):
    """A variant this process imported."""

    path: Path
    digest_files: dict[str, str]
    module: ModuleType


_loaded: dict[str, LoadedVariant] = {}
"""id → what was imported under it. Entries are never removed: torch cannot unload ops."""

_loads: dict[Path, LoadedVariant] = {}
"""Every variant directory a load read, in load order, with the module it got: a build
loaded again from another path (a local copy of an already-loaded hub build) is one
module under one id, but two loads — the ecosystem's ``get_loaded_kernels`` lists both."""

_import_lock = threading.RLock()
"""Two threads importing one build would register its torch namespace twice (an abort)."""


def loaded_variants() -> dict[str, LoadedVariant]:
    """A snapshot of the variants imported by this process, by id."""
    return dict(_loaded)


def loads() -> list[LoadedVariant]:
    """A snapshot of every variant directory loaded by this process, in load order."""
    return list(_loads.values())


def _already_loaded(metadata: Metadata, path: Path) -> ModuleType | None:
    previous = _loaded.get(metadata.id)
    if previous is None:
        return None
    if previous.digest_files == metadata.digest_files:
        return previous.module
    raise KernelLoadError(
        f"cannot load {path}: a different build with the same id {metadata.id!r} is already "
        f"loaded from {previous.path}. Its ops would register namespace {metadata.id!r} a "
        "second time, which aborts the process; restart Python to load the new build."
    )


def _torch_namespace_taken(namespace: str) -> bool:
    """Whether torch already has ops in ``namespace`` that kernelhub did not put there.

    Asked about this one namespace, not by listing every op in the dispatcher (3-4 ms with
    torch's ~3600 ops, on every load). Two questions cover every way ops get there:
    whether a library claims the namespace (a TORCH_LIBRARY block, which is how builds
    register, or ``torch.library.Library(ns, "DEF")``): the dispatcher refuses a second
    claim, so claiming it and letting go at once answers that; and whether ops were
    defined into it from Python without a claim (``Library(ns, "FRAGMENT")``,
    ``torch.library.custom_op``), which torch records by qualified name. Not seen: ops
    that C++ code defined with TORCH_LIBRARY_FRAGMENT alone; builds (and the ecosystem's
    registration.h) register with TORCH_LIBRARY, which the claim catches.
    """
    torch = sys.modules.get("torch")
    if torch is None:  # nothing can have registered ops if torch was never imported
        return False
    try:
        claim = torch._C._dispatch_library("DEF", namespace, "", __file__, 0)
    except RuntimeError:  # "Only a single TORCH_LIBRARY can be used to register ..."
        return True
    claim.reset()  # lets go of the namespace again: nothing was defined in it
    library = sys.modules.get("torch.library")
    prefix = f"{namespace}::"
    return any(name.startswith(prefix) for name in getattr(library, "_defs", ()))


def _importable_elsewhere(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _check_not_claimed(metadata: Metadata, path: Path) -> None:
    if not metadata.id.isidentifier():
        raise KernelLoadError(
            f"{path}: metadata id {metadata.id!r} is not a Python identifier; rebuild the variant"
        )
    if metadata.id in sys.modules:
        other = getattr(sys.modules[metadata.id], "__file__", None) or "an unknown location"
        raise KernelLoadError(
            f"cannot load {path}: a module named {metadata.id!r} was already imported from "
            f"{other} by something other than kernelhub; restart Python"
        )
    if _importable_elsewhere(metadata.id):
        raise KernelLoadError(
            f"cannot load {path}: its id {metadata.id!r} is also the name of an importable "
            "module outside the kernel, which loading it would shadow for the whole process; "
            "rebuild the variant (builder ids look like _<name>_<backend>_<hash>)"
        )
    if _torch_namespace_taken(metadata.id):
        raise KernelLoadError(
            f"cannot load {path}: torch already has ops in namespace {metadata.id!r} that "
            "kernelhub did not load (another loader, or an earlier failed import of this "
            "build). Registering them again would abort the process; restart Python."
        )


def check_python_depends(metadata: Metadata, path: Path) -> None:
    """Fail clearly when a Python package the kernel needs is missing or too old."""
    if not metadata.python_depends:
        return
    for dep in metadata.python_depends:
        try:
            req = requirements.Requirement(dep)
        except requirements.InvalidRequirement:
            raise KernelLoadError(
                f"{path}: python-depends entry {dep!r} is not a valid requirement"
            ) from None
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            if importlib.util.find_spec(req.name.replace("-", "_")) is not None:
                continue  # importable without distribution metadata (e.g. vendored)
            raise KernelLoadError(
                f"kernel {metadata.name} needs the Python package {req.name!r}, which is not "
                f"installed; install it (pip install '{dep}') and retry"
            ) from None
        if req.specifier and not req.specifier.contains(installed, prereleases=True):
            raise KernelLoadError(
                f"kernel {metadata.name} needs {dep}, but {req.name} {installed} is installed; "
                f"install a matching version (pip install '{dep}')"
            )


def _forget_module(module_id: str) -> None:
    for name in [n for n in sys.modules if n == module_id or n.startswith(module_id + ".")]:
        del sys.modules[name]


def import_verified(variant: VerifiedVariant) -> ModuleType:
    """Import a verified snapshot under its id; return its top-level module.

    What runs is exactly the snapshot's bytes (:mod:`kernelhub.load.verified_import`). The
    same build imported before returns the module already imported. The snapshot's
    private copy is removed if the import fails (once imported, native code stays mapped
    from it until exit).
    """
    with _import_lock:
        try:
            return _import(variant, variant.source)
        except BaseException:
            variant.discard()
            raise


def _import(variant: VerifiedVariant, path: Path) -> ModuleType:
    metadata = variant.metadata
    if (module := _already_loaded(metadata, path)) is not None:
        variant.discard()
        _loads[path] = LoadedVariant(path, dict(metadata.digest_files), module)
        return module
    if "__init__.py" not in variant.python_sources:
        raise KernelLoadError(f"{path} has no __init__.py; it is not a loadable variant")
    namespace = op_namespace(variant)
    _check_not_claimed(metadata, path)
    check_python_depends(metadata, path)

    FINDER.add(namespace, variant)
    try:
        module = importlib.import_module(namespace)
    except BaseException as e:
        _forget_module(namespace)
        FINDER.remove(namespace)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise KernelLoadError(
            f"importing {metadata.name} from {path} failed: {type(e).__name__}: {e}"
        ) from e
    _loaded[namespace] = _loads[path] = LoadedVariant(path, dict(metadata.digest_files), module)
    return module


def op_namespace(variant: VerifiedVariant) -> str:
    """The torch op namespace this build will register, from what will be loaded.

    metadata.json is not covered by the digest, so its ``id`` alone proves nothing: the
    namespace ``_ops.py`` binds (verified) must be that id, and every native library must
    carry it (TORCH_LIBRARY stores it as a string). Otherwise a build with an edited id
    would slip past the duplicate-namespace guard and torch would abort the process.
    """
    metadata, path = variant.metadata, variant.source
    if not metadata.id.isidentifier():
        raise KernelLoadError(
            f"{path}: metadata id {metadata.id!r} is not a Python identifier; rebuild the variant"
        )
    ops = variant.python_sources.get("_ops.py", b"")
    named = _ops_names(ops) - _TORCH_OPS_ATTRS
    if named and named != {metadata.id}:
        raise KernelLoadError(
            f"{path}: metadata.json says id {metadata.id!r} but _ops.py uses op namespace "
            f"{', '.join(sorted(named))}; metadata.json was changed after the build. Restore "
            "it or rebuild the variant"
        )
    needle = metadata.id.encode()
    for rel in sorted(variant.files):
        if rel.endswith(NATIVE_SUFFIXES) and not _mentions(variant.copy / rel, needle):
            raise KernelLoadError(
                f"{path / rel}: this native library does not register op namespace "
                f"{metadata.id!r} that metadata.json names; the variant was assembled from "
                "different builds. Rebuild it"
            )
    return metadata.id


def _ops_names(source: bytes) -> set[str]:
    """Every ASCII identifier written right after ``torch.ops.`` in ``source``.

    A scan with bytes methods, not a regex: this runs on every load, and compiling the
    pattern cost more than the whole scan of an ``_ops.py``.
    """
    names: set[str] = set()
    at = source.find(_OPS_PREFIX)
    while at != -1:
        start = end = at + len(_OPS_PREFIX)
        while end < len(source) and source[end] in _IDENT:
            end += 1
        if end > start and source[start] in _IDENT_START:
            names.add(source[start:end].decode("ascii"))
            at = source.find(_OPS_PREFIX, end)
        else:  # not a name here; the next occurrence may start inside what was skipped
            at = source.find(_OPS_PREFIX, at + 1)
    return names


def _mentions(path: Path, needle: bytes) -> bool:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(needle) != -1
