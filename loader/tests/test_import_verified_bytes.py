"""What runs is exactly what was verified: no bytecode, no links, no second read.

Each test plants what an attacker with write access to a cache (or a careless user)
could leave in a variant dir after it was verified, and checks that none of it runs.
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import sys
from importlib.util import cache_from_source
from pathlib import Path

import pytest
from kernelhub import load_variant_dir
from kernelhub.errors import IntegrityError, KernelLoadError
from kh_doubles import make_variant, unique_id


def _forge_pyc(source: Path, forged_text: str, tmp_path: Path) -> Path:
    """A .pyc Python would accept for ``source``: same size and mtime in its header."""
    assert len(forged_text.encode()) == source.stat().st_size
    forged = tmp_path / "forged.py"
    forged.write_text(forged_text)
    stat = source.stat()
    os.utime(forged, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    cfile = Path(cache_from_source(str(source)))
    py_compile.compile(str(forged), cfile=str(cfile), doraise=True)
    return cfile


@pytest.mark.parametrize("module", ["__init__.py", "layers.py"])
def test_forged_pycache_never_runs(tmp_path: Path, module: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    variant = tmp_path / "v"
    make_variant(variant, init="from . import layers\nVALUE = 42\n",
                 files={"layers.py": "VALUE = 42\n"})
    forged_text = {"__init__.py": "from . import layers\nVALUE = 66\n",
                   "layers.py": "VALUE = 66\n"}[module]
    _forge_pyc(variant / module, forged_text, tmp_path)
    loaded = load_variant_dir(variant)
    assert loaded.VALUE == 42
    assert loaded.layers.VALUE == 42


def test_no_bytecode_is_written_into_a_variant(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    variant = tmp_path / "v"
    make_variant(variant, init="from . import layers\n", files={"layers.py": "X = 1\n"})
    load_variant_dir(variant)
    assert not list(variant.rglob("__pycache__")) and not list(variant.rglob("*.pyc"))


def test_file_changed_after_verification_is_not_what_runs(tmp_path: Path) -> None:
    # The variant's first module rewrites a sibling on disk before importing it: the
    # same window an attacker racing the loader has between verification and import.
    variant = tmp_path / "v"
    init = (
        "from pathlib import Path\n"
        "Path(__file__).with_name('layers.py').write_text('VALUE = 666\\n')\n"
        "from . import layers\n"
    )
    make_variant(variant, init=init, files={"layers.py": "VALUE = 1\n"})
    assert load_variant_dir(variant).layers.VALUE == 1
    assert (variant / "layers.py").read_text() == "VALUE = 1\n"


def test_a_file_symlinked_out_of_the_variant_is_refused(tmp_path: Path) -> None:
    variant = tmp_path / "v"
    make_variant(variant, init="from . import layers\n", files={"layers.py": "VALUE = 1\n"})
    outside = tmp_path / "outside.py"
    outside.write_text("VALUE = 1\n")  # same bytes: the digest alone would pass it
    (variant / "layers.py").unlink()
    (variant / "layers.py").symlink_to(outside)
    with pytest.raises(IntegrityError, match=r"layers\.py.*link"):
        load_variant_dir(variant)


def test_a_symlinked_directory_is_refused_not_skipped(tmp_path: Path) -> None:
    # A directory link the digest does not mention used to be skipped by verification,
    # so its modules could be imported under the verified package's name.
    marker = tmp_path / "ran"
    variant = tmp_path / "v"
    make_variant(variant, init="VALUE = 1\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "__init__.py").write_text("")
    (elsewhere / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (variant / "extra").symlink_to(elsewhere, target_is_directory=True)
    try:
        module = load_variant_dir(variant)
        import importlib

        importlib.import_module(f"{module.__name__}.extra.evil")
    except IntegrityError as e:
        assert "extra" in str(e) and "link" in str(e)
    except ImportError:
        pytest.fail("the link was walked past at load time and only refused at import")
    assert not marker.exists()


def test_a_link_inside_the_variant_is_refused_too(tmp_path: Path) -> None:
    variant = tmp_path / "v"
    make_variant(variant, files={"a.py": "X = 1\n"})
    (variant / "b.py").symlink_to(variant / "a.py")
    with pytest.raises(IntegrityError, match=r"b\.py"):
        load_variant_dir(variant)


def test_unlisted_module_next_to_verified_ones_cannot_be_imported(tmp_path: Path) -> None:
    # After loading, a planted module must not be importable under the variant's name.
    variant = tmp_path / "v"
    meta = make_variant(variant)
    module = load_variant_dir(variant)
    (variant / "planted.py").write_text("VALUE = 'planted'\n")
    import importlib

    with pytest.raises(ImportError):
        importlib.import_module(f"{module.__name__}.planted")
    assert f"{meta.id}.planted" not in sys.modules


# -- namespace identity ---------------------------------------------------------------


def _ops_variant(dest: Path, namespace: str) -> None:
    ops = f"import torch\nops = torch.ops.{namespace}\n"
    make_variant(dest, module_id=namespace, init="from ._ops import ops\n",
                 files={"_ops.py": ops})


def test_edited_metadata_id_cannot_dodge_the_namespace_guard(tmp_path: Path) -> None:
    namespace = unique_id()
    _ops_variant(tmp_path / "a", namespace)
    load_variant_dir(tmp_path / "a")
    # A copy whose metadata claims another id; its _ops.py (covered by the digest) still
    # names the namespace the first copy registered.
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    meta_path = tmp_path / "b" / "metadata.json"
    data = json.loads(meta_path.read_text())
    data["id"] = unique_id()
    (tmp_path / "b" / "__init__.py").write_text("from ._ops import ops\nX = 1\n")
    data["digest"]["files"]["__init__.py"] = __import__("kernelhub.formats.metadata").formats.metadata.file_digest(
        tmp_path / "b" / "__init__.py")
    meta_path.write_text(json.dumps(data))
    with pytest.raises(KernelLoadError, match=namespace):
        load_variant_dir(tmp_path / "b")


def test_metadata_json_that_is_a_link_is_refused(tmp_path: Path) -> None:
    variant = tmp_path / "v"
    make_variant(variant)
    elsewhere = tmp_path / "metadata-elsewhere.json"
    (variant / "metadata.json").rename(elsewhere)
    (variant / "metadata.json").symlink_to(elsewhere)
    with pytest.raises(IntegrityError, match=r"metadata\.json is a symbolic link"):
        load_variant_dir(variant)


def test_a_hard_link_changed_after_the_read_does_not_change_what_runs(tmp_path: Path) -> None:
    # A hard link passes O_NOFOLLOW; what protects the import is that the bytes were read
    # once into the private copy before the first line ran.
    variant = tmp_path / "v"
    outside = tmp_path / "outside.py"
    outside.write_text("VALUE = 1\n")
    init = (f"from pathlib import Path\nPath({str(outside)!r}).write_text('VALUE = 666\\n')\n"
            "from . import layers\n")
    make_variant(variant, init=init, files={"placeholder.txt": ""})
    (variant / "placeholder.txt").unlink()
    os.link(outside, variant / "layers.py")
    meta = json.loads((variant / "metadata.json").read_text())
    meta["digest"]["files"].pop("placeholder.txt")
    from kernelhub.formats.metadata import file_digest

    meta["digest"]["files"]["layers.py"] = file_digest(variant / "layers.py")
    (variant / "metadata.json").write_text(json.dumps(meta))
    assert load_variant_dir(variant).layers.VALUE == 1
    assert outside.read_text() == "VALUE = 666\n"


def test_inspect_reads_the_verified_source(tmp_path: Path) -> None:
    # Triton compiles @triton.jit functions from inspect.getsource: it must see the
    # verified lines, not whatever a file on disk says later.
    import inspect

    variant = tmp_path / "v"
    make_variant(variant, init="def kernel(x):\n    return x + 1\n")
    module = load_variant_dir(variant)
    Path(module.__file__).write_text("def kernel(x):\n    return x - 666\n")
    assert inspect.getsource(module.kernel) == "def kernel(x):\n    return x + 1\n"
