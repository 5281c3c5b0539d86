"""Every package stub is the one table of the package's public names: what type checkers
read (``ast`` here) is what the package serves at run time, and every name resolves."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub.lazy_names import stub_names

SRC = Path(importlib.import_module("kernelhub").__file__).parent  # type: ignore[arg-type]
STUBS = sorted(SRC.rglob("__init__.pyi"))


def _package(stub: Path) -> str:
    return ".".join(stub.parent.relative_to(SRC.parent).parts)


def _as_type_checkers_read_it(stub: Path) -> dict[str, str]:
    names = {}
    for node in ast.parse(stub.read_text()).body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name  # re-exported (PEP 484 stub rule)
            names[alias.name] = "." * (node.level - 1) + (node.module or "")
    return names


def test_every_lazy_package_has_a_stub() -> None:
    assert {_package(s) for s in STUBS} >= {"kernelhub", "kernelhub.layer", "kernelhub.hub"}


@pytest.mark.parametrize("stub", STUBS, ids=_package)
def test_stub_is_what_the_package_serves(stub: Path) -> None:
    table = _as_type_checkers_read_it(stub)
    assert stub_names(stub.read_text(), str(stub)) == table
    package = importlib.import_module(_package(stub))
    assert package.__all__ == sorted(table)
    for name, module in table.items():
        defining = importlib.import_module(f".{module}", package.__name__)
        assert getattr(package, name) is getattr(defining, name), name
    assert set(dir(package)) >= set(table)


def test_a_line_the_package_cannot_serve_is_refused() -> None:
    with pytest.raises(ImportError, match=r"x.pyi:2: expected 'from \.module import name"):
        stub_names("# ok\nfrom .api import get_kernel\n", "x.pyi")
    with pytest.raises(ImportError, match="expected"):
        stub_names("from .api import a as b\n", "x.pyi")


def test_import_kernelhub_imports_no_submodule_but_the_table_reader() -> None:
    code = ("import sys, kernelhub; print(sorted(m for m in sys.modules "
            "if m.startswith('kernelhub')))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "['kernelhub', 'kernelhub.lazy_names']"
