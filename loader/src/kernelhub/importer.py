"""Import a verified variant under its unique id, once per process.

A variant is imported from outside ``sys.path`` under the module name ``metadata.id``
(``_<name>_<backend>_<hash>``), which is also its torch op namespace. That is what lets
two versions of one kernel live side by side. It also means a namespace can be claimed
only once per process: a second ``TORCH_LIBRARY`` for the same namespace aborts the
process, so a clash is refused here, before any of the variant's code runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from packaging.requirements import InvalidRequirement, Requirement

from .errors import KernelLoadError
from .metadata import Metadata, read_metadata, verify_variant


@dataclass(frozen=True)
class LoadedVariant:
    """A variant this process imported."""

    path: Path
    digest_files: dict[str, str]
    module: ModuleType


_loaded: dict[str, LoadedVariant] = {}
"""id → what was imported under it. Entries are never removed: torch cannot unload ops."""

_import_lock = threading.RLock()
"""Two threads importing one build would register its torch namespace twice (an abort)."""


def loaded_variants() -> dict[str, LoadedVariant]:
    """A snapshot of the variants imported by this process, by id."""
    return dict(_loaded)


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
    torch = sys.modules.get("torch")
    if torch is None:  # nothing can have registered ops if torch was never imported
        return False
    prefix = f"{namespace}::"
    get_names = getattr(torch._C, "_dispatch_get_all_op_names", None)
    if get_names is not None:
        names = get_names()
    else:  # pragma: no cover - older torch
        names = [s.name for s in torch._C._jit_get_all_schemas()]
    return any(name.startswith(prefix) for name in names)


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
    if _torch_namespace_taken(metadata.id):
        raise KernelLoadError(
            f"cannot load {path}: torch already has ops in namespace {metadata.id!r} that "
            "kernelhub did not load (another loader, or an earlier failed import of this "
            "build). Registering them again would abort the process; restart Python."
        )


def check_python_depends(metadata: Metadata, path: Path) -> None:
    """Fail clearly when a Python package the kernel needs is missing or too old."""
    for dep in metadata.python_depends:
        try:
            req = Requirement(dep)
        except InvalidRequirement:
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


def load_variant_dir(path: Path, *, verify: bool = True) -> ModuleType:
    """Verify and import the variant at ``path``; return its top-level module.

    Every file's digest is checked before any of it runs (``verify=False`` skips that
    for callers that just verified). Loading the same build again returns the module
    already imported without re-hashing: what runs is what was verified at first load.
    """
    with _import_lock:
        return _load(Path(path).resolve(), verify)


def _load(path: Path, verify: bool) -> ModuleType:
    metadata = read_metadata(path)
    if (module := _already_loaded(metadata, path)) is not None:
        return module
    if verify:
        verify_variant(path, metadata)
    init = path / "__init__.py"
    if not init.is_file():
        raise KernelLoadError(f"{path} has no __init__.py; it is not a loadable variant")
    _check_not_claimed(metadata, path)
    check_python_depends(metadata, path)

    spec = importlib.util.spec_from_file_location(
        metadata.id, init, submodule_search_locations=[str(path)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
        raise KernelLoadError(f"{init}: Python cannot create an import spec for it")
    module = importlib.util.module_from_spec(spec)
    sys.modules[metadata.id] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        _forget_module(metadata.id)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise KernelLoadError(
            f"importing {metadata.name} from {path} failed: {type(e).__name__}: {e}"
        ) from e
    _loaded[metadata.id] = LoadedVariant(path, dict(metadata.digest_files), module)
    return module
