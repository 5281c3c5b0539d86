"""Importing variants: verify first, unique names, no half-loaded modules, no clashes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from kernelhub import load_variant_dir
from kernelhub.errors import IntegrityError, KernelLoadError
from kernelhub.load.importer import loaded_variants
from kh_doubles import make_variant, unique_id

# A variant that registers a real torch op under its own namespace, like a compiled
# build's TORCH_LIBRARY does, but from Python so no compiler is needed.
OPS_INIT = """\
import torch
_lib = torch.library.Library(__name__, "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
ops = getattr(torch.ops, __name__)
from . import layers
"""


def test_loads_under_its_id_from_outside_sys_path(tmp_path: Path) -> None:
    meta = make_variant(tmp_path / "v", init=OPS_INIT, files={"layers.py": "NAME = 'layers'\n"})
    module = load_variant_dir(tmp_path / "v")
    assert module.__name__ == meta.id
    assert sys.modules[meta.id] is module
    assert sys.modules[f"{meta.id}.layers"].NAME == "layers"
    assert str(tmp_path / "v") not in sys.path
    assert torch.equal(module.ops.twice(torch.tensor([1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert loaded_variants()[meta.id].path == (tmp_path / "v").resolve()


def test_second_load_returns_the_same_module(tmp_path: Path) -> None:
    make_variant(tmp_path / "v", init="import itertools\nCOUNTER = next(itertools.count())\n")
    first = load_variant_dir(tmp_path / "v")
    first.COUNTER = 99
    assert load_variant_dir(tmp_path / "v") is first


def test_same_build_copied_elsewhere_is_the_same_module(tmp_path: Path) -> None:
    import shutil

    make_variant(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert load_variant_dir(tmp_path / "b") is load_variant_dir(tmp_path / "a")


def test_flipped_byte_is_refused_naming_the_file_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    meta = make_variant(
        tmp_path / "v",
        init="from pathlib import Path\n",
        files={"sub/code.py": f"open({str(marker)!r}, 'w').close()\n"},
    )
    code = tmp_path / "v" / "sub" / "code.py"
    data = bytearray(code.read_bytes())
    data[-2] ^= 0x20
    code.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"sub/code\.py: sha256 does not match"):
        load_variant_dir(tmp_path / "v")
    assert meta.id not in sys.modules
    assert not marker.exists()


def test_extra_file_is_refused(tmp_path: Path) -> None:
    meta = make_variant(tmp_path / "v")
    (tmp_path / "v" / "sitecustomize.py").write_text("print('surprise')\n")
    with pytest.raises(IntegrityError, match=r"sitecustomize\.py: not listed"):
        load_variant_dir(tmp_path / "v")
    assert meta.id not in sys.modules


def test_failed_import_leaves_no_half_registered_module(tmp_path: Path) -> None:
    meta = make_variant(
        tmp_path / "v",
        init="from . import helper\nraise RuntimeError('boom in init')\n",
        files={"helper.py": "X = 1\n"},
    )
    with pytest.raises(KernelLoadError, match="RuntimeError: boom in init") as err:
        load_variant_dir(tmp_path / "v")
    assert isinstance(err.value.__cause__, RuntimeError)
    assert [n for n in sys.modules if n == meta.id or n.startswith(meta.id + ".")] == []
    assert meta.id not in loaded_variants()


def test_same_id_different_build_is_refused_naming_both_paths(tmp_path: Path) -> None:
    module_id = unique_id()
    make_variant(tmp_path / "old", module_id=module_id, init=OPS_INIT, files={"layers.py": ""})
    make_variant(tmp_path / "new", module_id=module_id, init=OPS_INIT + "NEW = True\n",
                 files={"layers.py": ""})
    load_variant_dir(tmp_path / "old")
    with pytest.raises(KernelLoadError) as err:
        load_variant_dir(tmp_path / "new")
    assert str((tmp_path / "new").resolve()) in str(err.value)
    assert str((tmp_path / "old").resolve()) in str(err.value)
    assert not hasattr(sys.modules[module_id], "NEW")


@pytest.mark.parametrize("kind", ["DEF", "FRAGMENT"])
def test_namespace_registered_by_someone_else_is_refused(tmp_path: Path, kind: str) -> None:
    # DEF claims the namespace; FRAGMENT claims nothing, yet defining the op again fails.
    module_id = unique_id()
    foreign = torch.library.Library(module_id, kind)
    foreign.define("other(Tensor x) -> Tensor")
    make_variant(tmp_path / "v", module_id=module_id, init=OPS_INIT, files={"layers.py": ""})
    with pytest.raises(KernelLoadError, match="torch already has ops in namespace"):
        load_variant_dir(tmp_path / "v")
    assert module_id not in sys.modules


def test_the_clash_guard_asks_only_about_its_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listing every op in the dispatcher cost 3-4 ms per load; the guard must not need it,
    # and its own claim on the namespace must be gone before the variant registers it.
    def listing(*_: object) -> list[str]:
        raise AssertionError("the guard listed every op")

    monkeypatch.setattr(torch._C, "_dispatch_get_all_op_names", listing)
    monkeypatch.setattr(torch._C, "_jit_get_all_schemas", listing, raising=False)
    taken = unique_id()
    foreign = torch.library.Library(taken, "DEF")
    foreign.define("other(Tensor x) -> Tensor")
    make_variant(tmp_path / "taken", module_id=taken, init=OPS_INIT, files={"layers.py": ""})
    with pytest.raises(KernelLoadError, match="torch already has ops in namespace"):
        load_variant_dir(tmp_path / "taken")
    meta = make_variant(tmp_path / "free", init=OPS_INIT, files={"layers.py": ""})
    module = load_variant_dir(tmp_path / "free")
    assert module.__name__ == meta.id
    assert torch.equal(module.ops.twice(torch.tensor([1.0])), torch.tensor([2.0]))


def test_missing_python_dependency_is_named(tmp_path: Path) -> None:
    make_variant(tmp_path / "v", python_depends=["definitely-not-installed-pkg"])
    with pytest.raises(KernelLoadError, match="'definitely-not-installed-pkg', which is not installed"):
        load_variant_dir(tmp_path / "v")


def test_python_dependency_versions_are_checked(tmp_path: Path) -> None:
    make_variant(tmp_path / "ok", python_depends=["packaging>=20"])
    load_variant_dir(tmp_path / "ok")
    make_variant(tmp_path / "old", python_depends=["packaging<1"])
    with pytest.raises(KernelLoadError, match=r"needs packaging<1, but packaging .* is installed"):
        load_variant_dir(tmp_path / "old")


def test_directory_without_metadata_is_explained(tmp_path: Path) -> None:
    from kernelhub.errors import MetadataError

    (tmp_path / "v").mkdir()
    with pytest.raises(MetadataError, match="is not a built variant"):
        load_variant_dir(tmp_path / "v")


def test_retry_after_a_failed_import_that_registered_ops_is_refused_cleanly(tmp_path: Path) -> None:
    # The ops stay registered in torch even though the module was removed; a second
    # attempt must be refused instead of registering the namespace twice.
    meta = make_variant(tmp_path / "v", init=OPS_INIT.replace("from . import layers", "1 / 0"))
    with pytest.raises(KernelLoadError, match="ZeroDivisionError"):
        load_variant_dir(tmp_path / "v")
    with pytest.raises(KernelLoadError, match="torch already has ops in namespace"):
        load_variant_dir(tmp_path / "v")
    assert meta.id not in sys.modules


def test_concurrent_loads_in_threads_import_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    make_variant(tmp_path / "v", init=OPS_INIT, files={"layers.py": "import time\ntime.sleep(0.2)\n"})
    with ThreadPoolExecutor(4) as pool:
        modules = list(pool.map(lambda _: load_variant_dir(tmp_path / "v"), range(4)))
    assert all(m is modules[0] for m in modules)
