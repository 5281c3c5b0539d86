"""Lazy imports are declared, not scattered: a kernelhub module that defers an import
says so at its top, ``name = deferred("module")`` beside the import type checkers read
under ``TYPE_CHECKING`` (:class:`kernelhub.lazy_names.DeferredModule`), so what a module
can import is read in one place, and what a path actually imports is what it touches.
An import inside a function is the exception, and :data:`ALLOWED` says why."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "kernelhub"

ALLOWED: dict[tuple[str, str], str] = {}
"""(file relative to the package, imported module) → why that import is in a function.
Fit reasons: importing a module to test whether it is installed, a module named at run
time, a module that must be imported again. A deferred module serves everything else,
optional packages included (access it inside the ``try`` that handles its absence)."""


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
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [_absolute(node, path)]


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
        "declare these at the top of the module (kernelhub.lazy_names.deferred), or add "
        "them to ALLOWED with the reason:\n  " + "\n  ".join(scattered))
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
