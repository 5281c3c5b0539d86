"""One lazy-import rule (docs/decisions.md, "One import rule, the loader by concept"):

* a heavy or optional third-party module (torch, huggingface_hub, transformers, sigstore,
  matplotlib, packaging, filelock, cryptography) is declared at the top of the module
  that uses it, ``name = deferred("module")`` beside the import type checkers read under
  ``TYPE_CHECKING`` (:class:`kernelhub.lazy_names.DeferredModule`);
* kernelhub's own modules are imported plainly at the top: laziness comes from the layout
  (a ``cli/`` package with one module per subcommand, the load path imported as a whole
  by its first use). The one exception: where a module on the warm load path reaches a
  module off it in one branch (a lock file, a signing policy, git, a config file), the
  import sits in that branch's function, and :data:`ALLOWED` says why. Never a proxy for
  a kernelhub module: ``kernelhub.api.cache`` *is* ``kernelhub.cache``."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "kernelhub"

_WARM = ("off the warm load path (test_api_localhub's NOT_ON_THE_WARM_PATH): only "
         "this branch needs it")
_LOCK = "lock files: only a locked load or `kernelhub lock` reads them; " + _WARM
_SIGNING = "a signing policy: only an org that configures one checks signatures; " + _WARM
_CONFIG = "tomllib, for a config file or build.toml on disk; " + _WARM
_MESSAGES = ("for a message (credentials out, control characters escaped); a load that "
             "says nothing needs none; " + _WARM)
_LOADING = ("imported at interpreter start-up (the Transformers hook) or by `import kernels`:"
            " the loading code only once a kernel is loaded")

ALLOWED: dict[tuple[str, str], str] = {
    ("api.py", "kernelhub.lock"): _LOCK,
    ("api.py", "kernelhub.lock_tree"): _LOCK,
    ("api.py", "kernelhub.signing.policy"): _SIGNING,
    ("api.py", "kernelhub.formats.build_layout"): "a build on disk (get_local_kernel, a "
                                                  "local dependency tree); " + _WARM,
    ("formats/build_layout.py", "kernelhub.tomlfile"): _CONFIG,
    ("cache/__init__.py", "kernelhub.formats.release_manifest"): _SIGNING,
    ("cache/__init__.py", "kernelhub.cache.ecosystem"): "a cache the ecosystem's loader wrote; " + _WARM,
    ("cache/__init__.py", "kernelhub.hub.hashes"): _LOCK,
    ("cache/__init__.py", "kernelhub.cache.root"): "claiming the cache root before a write, "
                                                "or `kernelhub cache clear`; a warm load "
                                                "writes nothing; " + _WARM,
    ("ecosystem/load.py", "kernelhub.api"): _LOADING,
    ("ecosystem/load.py", "kernelhub.signing.trust"): _LOADING,
    ("ecosystem/load.py", "kernelhub.formats.metadata"): _LOADING,
    ("ecosystem/load.py", "kernelhub.settings"): _LOADING,
    ("ecosystem/load.py", "kernelhub.lock"): _LOADING,
    ("ecosystem/records.py", "kernelhub.settings"): _LOADING,
    ("ecosystem/records.py", "kernelhub.load.importer"): _LOADING,
    ("ecosystem/records.py", "kernelhub.api"): _LOADING,
    ("hub/local.py", "kernelhub.hub.git"): "git runs only for an unpinned or cold load; " + _WARM,
    ("hub/local.py", "kernelhub.formats.release_manifest"): _SIGNING,
    ("hub/local.py", "kernelhub.tomlfile"): _CONFIG,
    ("hub/select.py", "kernelhub.hub.hf"): "only a Hub-API hub needs huggingface_hub's glue; "
                                           + _WARM,
    ("hub/select.py", "kernelhub.hub.endpoints"): "only a hub named by a URL has an "
                                                  "endpoint to check; " + _WARM,
    ("load/pipeline.py", "kernelhub.deps.loading"): "only a kernel with kernel dependencies "
                                                    "imports a tree; " + _WARM,
    ("load/validators.py", "kernelhub.signing.sigstore"): _SIGNING,
    ("load/validators.py", "kernelhub.formats.minver"): "only a variant that records a "
                                                       "kernels-minver is checked; " + _WARM,
    ("load/validators.py", "kernelhub.formats.provenance"): "only a variant built from a "
                                                           "dirty tree is warned about; "
                                                           + _WARM,
    ("load/verified_import.py", "kernelhub.formats.zip_layout"):
        "only a variant read into a new private copy is unpacked; a warm load recalls its "
        "kept copy; " + _WARM,
    ("integrations/transformers/attention.py", "kernelhub.api"): _LOADING,
    ("integrations/transformers/autoload.py", "kernelhub.integrations.transformers.patch"):
        "imported by the first seam handed over, not by installing the hook; " + _LOADING,
    ("integrations/transformers/methods.py", "kernelhub.api"): _LOADING,
    ("load/validators.py", "kernelhub.signing.policy"): _SIGNING,
    ("lock.py", "kernelhub.tomlfile"): "a project's pyproject.toml, read by `kernelhub lock` "
                                       "only; a locked load reads JSON. " + _CONFIG,
    ("load/validators.py", "kernelhub.hub.hashes"): _LOCK,
    ("settings.py", "kernelhub.tomlfile"): _CONFIG,
    ("user_files.py", "kernelhub.printable"): _MESSAGES,
    ("user_files.py", "kernelhub.redact"): _MESSAGES,
    ("hub/calls.py", "kernelhub.redact"): _MESSAGES,
    ("hub/select.py", "kernelhub.redact"): _MESSAGES,
    ("signing/trust.py", "kernelhub.formats.release_manifest"): _SIGNING,
    ("signing/trust.py", "kernelhub.signing.sshsig"): _SIGNING,
}
"""(file relative to the package, imported module) → why that import is in a function.
Fit reasons besides the one above: importing a module to test whether it is installed, a
module named at run time, a module that must be imported again."""


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    module = _module_of(path)
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(path).split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imported(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The modules an import statement names: ``from . import lock`` names kernelhub.lock."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _absolute(node, path)
    found = []
    for alias in node.names:
        inner = PACKAGE.parent.joinpath(*f"{base}.{alias.name}".split("."))
        submodule = inner.with_suffix(".py").is_file() or (inner / "__init__.py").is_file()
        found.append(f"{base}.{alias.name}" if submodule else base)
    return list(dict.fromkeys(found))


def function_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import statement inside a function of ``path``."""
    seen: set[int] = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in seen:
                seen.add(id(node))
                for module in _imported(node, path):
                    yield node.lineno, module


def test_no_import_inside_a_function_unless_allowed() -> None:
    found = {(str(path.relative_to(PACKAGE)), line, module)
             for path in _sources() for line, module in function_imports(path)}
    scattered = sorted(f"{rel}:{line}: import of {module}" for rel, line, module in found
                       if (rel, module) not in ALLOWED)
    assert not scattered, (
        "import these at the top of the module (a third-party one through "
        "kernelhub.lazy_names.deferred), or add them to ALLOWED with the reason:\n  "
        + "\n  ".join(scattered))
    stale = set(ALLOWED) - {(rel, module) for rel, _, module in found}
    assert not stale, f"ALLOWED lists imports that are gone: {sorted(stale)}"


def _declared(tree: ast.Module, path: Path) -> dict[str, str]:
    """Name → module of the imports under ``if TYPE_CHECKING:`` at the top of a module."""
    names: dict[str, str] = {}
    for block in tree.body:
        if not (isinstance(block, ast.If) and isinstance(block.test, ast.Name)
                and block.test.id == "TYPE_CHECKING"):
            continue
        for node in block.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    names[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{_absolute(node, path)}.{alias.name}"
    return names


def deferred_names(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, name, module) of every ``name = deferred("module")`` in a module."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "deferred"
                and len(node.value.args) == 1 and isinstance(node.value.args[0], ast.Constant)):
            yield node.lineno, node.targets[0].id, str(node.value.args[0].value)


def test_each_deferred_module_is_the_one_type_checkers_read() -> None:
    """A deferred name typed as one module but bound to another would pass mypy and fail
    (or import the wrong thing) only on the path that first uses it."""
    wrong = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = _declared(tree, path)
        for line, name, module in deferred_names(tree):
            if declared.get(name) != module:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line}: {name} = deferred("
                             f"{module!r}), but TYPE_CHECKING imports {declared.get(name)!r}")
    assert not wrong, "\n".join(wrong)


def test_no_kernelhub_module_is_deferred() -> None:
    """A proxy for one of our modules is a copy as far as ``mock.patch`` and ``is`` go;
    our modules are imported plainly (the layout keeps each path's imports small)."""
    found = [f"{path.relative_to(PACKAGE)}:{line}: {module}" for path in _sources()
             for line, _, module in deferred_names(ast.parse(path.read_text(encoding="utf-8")))
             if module.split(".")[0] == "kernelhub"]
    assert not found, "\n".join(found)


def test_a_module_attribute_is_the_module_itself() -> None:
    """``mock.patch("kernelhub.api.cache.X")`` patches what kernelhub.api calls."""
    api = importlib.import_module("kernelhub.api")
    assert api.cache is importlib.import_module("kernelhub.cache")
    assert importlib.import_module("kernelhub.load.validators").cache is api.cache


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n    from .cache import KernelCache\n", [(2, "kernelhub.cache")]),
    ("def f():\n    def g():\n        import json\n", [(3, "json")]),
    ("import json\nclass C:\n    x = 1\n", []),
])
def test_the_check_finds_imports_in_functions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              source: str, expected: list[tuple[int, str]]
                                              ) -> None:
    package = tmp_path / "kernelhub"
    package.mkdir()
    (package / "mod.py").write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert list(function_imports(package / "mod.py")) == expected
