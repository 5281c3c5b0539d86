"""``__lazy_modules__`` (PEP 810) on the load path: what each module declares is exactly
the kernelhub modules it imports at the top but needs only inside its functions.

The declaration is inert before Python 3.15 (CI runs 3.11), so nothing at run time would
catch a wrong one; this test is what keeps it true. PEP 810 checks each ``import``
statement's fully qualified module name against the set when the statement runs, so the
set is assigned before the imports it names, and a ``from package import submodule``
is left out (the PEP makes the package's from-imports lazy, "not necessarily imports of
sub-modules").
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import kernelhub
import pytest

ROOT = Path(kernelhub.__file__).parent
LOAD_PATH = ("__init__.py", "api.py", "load", "deps", "hub", "cache", "signing", "formats")
"""What a load imports: the package, its API and the packages the pipeline reaches."""


def _files() -> list[Path]:
    found = []
    for entry in LOAD_PATH:
        path = ROOT / entry
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The fully qualified name PEP 810 checks for ``node`` in ``module``."""
    if node.level == 0:
        assert node.module is not None
        return node.module
    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
    return ".".join([*base, *([node.module] if node.module else [])])


class _ImportTimeNames(ast.NodeVisitor):
    """Names read by code that runs when the module is imported: module level, class
    bodies, decorators, defaults; not function bodies, nor annotations (every module
    has ``from __future__ import annotations``), nor ``if TYPE_CHECKING:``."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for each in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if each is not None:
                self.visit(each)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for each in node.orelse:
                self.visit(each)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)


def _is_submodule(package: str, name: str) -> bool:
    return importlib.util.find_spec(package) is not None and (
        importlib.util.find_spec(f"{package}.{name}") is not None
        if hasattr(importlib.import_module(package), "__path__") else False)


def _analyse(path: Path) -> tuple[set[str], set[str], ast.Assign | None, list[ast.stmt]]:
    """(modules that could be lazy, modules imported at the top, the declaration, the
    top-level imports) of ``path``."""
    module, is_package = _module_name(path), path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    uses = _ImportTimeNames()
    declared: ast.Assign | None = None
    imports: list[ast.stmt] = []
    bound: dict[str, set[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
            imports.append(stmt)
            target = _imported(stmt, module, is_package)
            if target.split(".")[0] == "kernelhub" and not any(
                    _is_submodule(target, alias.name) for alias in stmt.names):
                bound.setdefault(target, set()).update(a.asname or a.name for a in stmt.names)
            elif target.split(".")[0] == "kernelhub":
                bound.setdefault(target, set()).add("*eager*")  # a submodule: never listed
        elif isinstance(stmt, ast.Import):
            imports.append(stmt)
            for alias in stmt.names:
                if alias.name.split(".")[0] == "kernelhub":
                    bound.setdefault(alias.name, set()).add(
                        alias.asname or alias.name.split(".")[0])
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.targets[0], ast.Name)
              and stmt.targets[0].id == "__lazy_modules__"):
            declared = stmt
        else:
            uses.visit(stmt)
    lazy = {target for target, names in bound.items() if not names & (uses.names | {"*eager*"})}
    return lazy, set(bound), declared, imports


def _declared(node: ast.Assign | None) -> set[str]:
    if node is None:
        return set()
    value = ast.literal_eval(node.value)
    assert isinstance(value, set | frozenset | list | tuple), "__lazy_modules__ is a set"
    return set(value)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_lazy_modules_name_exactly_the_imports_needed_only_in_functions(path: Path) -> None:
    lazy, imported, node, imports = _analyse(path)
    declared = _declared(node)
    for name in declared:
        assert importlib.util.find_spec(name) is not None, f"{name} is not a module"
        assert name in imported, f"{name} is not imported at the top of {path.name}"
    assert declared == lazy, (
        f"{path.relative_to(ROOT)}: declare __lazy_modules__ = {sorted(lazy)} (the kernelhub "
        "modules imported at the top whose names only functions read)")
    if declared:
        first = min(stmt.lineno for stmt in imports if _names_lazy(stmt, path, declared))
        assert node.lineno < first, "__lazy_modules__ must come before the imports it names"


def _names_lazy(stmt: ast.stmt, path: Path, declared: set[str]) -> bool:
    if isinstance(stmt, ast.Import):
        return any(alias.name in declared for alias in stmt.names)
    assert isinstance(stmt, ast.ImportFrom)
    return _imported(stmt, _module_name(path), path.name == "__init__.py") in declared


def test_the_load_path_declares_some() -> None:
    """The rule above holds trivially for a module declaring nothing; the API and the
    pipeline have imports only some calls need, so they must declare them."""
    for path in (ROOT / "api.py", ROOT / "load" / "pipeline.py"):
        assert _declared(_analyse(path)[2]), f"{path.name} declares no __lazy_modules__"
