"""Every package stub is the one table of the package's public names: what type checkers
read (``ast`` here) is what the package serves at run time, and every name resolves."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kernelhub.lazy_names import deferred, stub_names

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


@pytest.mark.parametrize("stub", STUBS, ids=_package)
def test_no_public_name_is_also_a_submodule(stub: Path) -> None:
    """Importing a submodule binds it on its package, so a submodule named like a public
    name (``kernelhub.layer.kernelize``) would replace the function by the module."""
    submodules = {p.stem for p in stub.parent.glob("*.py")} | {
        p.name for p in stub.parent.iterdir() if (p / "__init__.py").is_file()}
    assert not set(_as_type_checkers_read_it(stub)) & submodules


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


def test_a_deferred_module_waits_for_another_threads_import(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A deferred module read while another thread is still executing that module waits
    for it rather than reading the half-made module (an AttributeError before)."""
    started = tmp_path / "started"
    (tmp_path / "slow_deferred_target.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "time.sleep(0.5)\n"
        "VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_deferred_target", raising=False)
    importer = threading.Thread(target=importlib.import_module, args=("slow_deferred_target",))
    importer.start()
    try:
        for _ in range(500):
            if started.exists():
                break
            threading.Event().wait(0.01)
        assert started.exists() and "slow_deferred_target" in sys.modules
        assert deferred("slow_deferred_target").VALUE == 42
    finally:
        importer.join()
        sys.modules.pop("slow_deferred_target", None)


_COLLECTIONS_DURING_FIRST_LOAD_IMPORT = r"""
import gc, sys
import torch  # what a user's process holds before its first load
if sys.argv[1] == "off":
    gc.disable()
import kernelhub
def ours():
    return sum(1 for name in sys.modules if name.startswith("kernelhub"))
seen = []  # how many kernelhub modules were imported when each collection started
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(ours()))
before = ours()
kernelhub.get_kernel  # imports the load path
after = ours()
[].append([])  # an allocation: the collector, if on, now catches up
print(before, after, gc.isenabled(), *seen)
"""


@pytest.mark.parametrize("collector", ["on", "off"])
def test_the_collector_waits_while_a_lazy_name_imports_and_is_left_as_it_was(
        collector: str) -> None:
    """No collection starts while the load path is being imported; with the collector on,
    the one that was due runs right after (postponed, not skipped); a collector the user
    turned off stays off."""
    done = subprocess.run([sys.executable, "-c", _COLLECTIONS_DURING_FIRST_LOAD_IMPORT,
                           collector], capture_output=True, text=True, check=True)
    before, after, enabled, *seen = done.stdout.split()
    assert int(after) > int(before) + 20  # the load path was imported
    assert set(seen) <= {before, after}  # never in the middle of the import
    if collector == "on":
        assert enabled == "True"
        assert after in seen
    else:
        assert enabled == "False"
        assert not seen


def test_the_collector_is_turned_back_on_when_a_lazy_import_fails(tmp_path: Path) -> None:
    package = tmp_path / "lazy_failing"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from kernelhub.lazy_names import attach_stub\n"
        "__getattr__, __dir__, __all__, _names = attach_stub(__name__, __file__)\n")
    (package / "__init__.pyi").write_text("from .broken import thing as thing\n")
    (package / "broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    code = ("import gc, lazy_failing\n"
            "try:\n    lazy_failing.thing\nexcept RuntimeError as e:\n    print(e)\n"
            "print(gc.isenabled())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    assert done.stdout.split("\n")[:2] == ["broken on purpose", "True"]
