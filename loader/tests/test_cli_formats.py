"""``kernelhub variants``, ``cache ls`` and ``describe-api`` over a real LocalHub.

The repository holds two kernel versions; v2 carries one build under both generations'
names plus builds this system cannot load, so every verdict shows. Its variants'
``__init__`` raises on import: describe-api and variants must never import anything.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from kernelhub.cli import main
from kernelhub.formats.symbols import SymbolsError, parse_symbols, symbols_of
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/kern"
MM = detect_system("cpu").torch
PY = sys.version_info
LEGACY = "torch{}{}-cxx11-cpu-x86_64-linux".format(*MM)
CURRENT = f"torch-{MM[0]}.{MM[1]}-cpu-cpython-3.{PY.minor}-abi3-x86_64-linux"
TOO_NEW_PY = f"torch-{MM[0]}.{MM[1]}-cpu-cpython-3.{PY.minor + 1}-abi3-x86_64-linux"
CUDA = "torch-{}.{}-cuda-13.0-cpython-3.10-abi3-x86_64-linux".format(*MM)

KERNEL_INIT = '''
"""A kernel whose import must never happen in these tests."""
from . import layers

__all__ = ["relu", "scaled", "layers"]


def relu(out: "torch.Tensor", x: "torch.Tensor") -> "torch.Tensor":
    """out = max(x, 0)."""
    raise AssertionError("describing must not call the kernel")


def scaled(x, *, factor: float = 2.0, **options):
    return x
'''
KERNEL_LAYERS = '''
class ReLU:
    """Drop-in ReLU."""
    has_backward = False
    can_torch_compile = True

    def __init__(self):
        raise AssertionError("describing must not instantiate layers")


class Helper:
    pass


__all__ = ["ReLU", "Unsaid"]


class Unsaid:
    pass
'''


def _symbols_json(tmp_path: Path) -> str:
    """symbols.json as the builder writes it: from the imported package (here imported
    once, by this helper, under a throwaway name)."""
    pkg = tmp_path / "symbols_pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text(KERNEL_INIT)
    (pkg / "layers.py").write_text(KERNEL_LAYERS)
    spec = importlib.util.spec_from_file_location("_symbols_pkg", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_symbols_pkg"] = module
    try:
        spec.loader.exec_module(module)
        return symbols_of(module, "_kern_cpu_0123456789").dumps()
    finally:
        sys.modules.pop("_symbols_pkg", None)
        sys.modules.pop("_symbols_pkg.layers", None)


@pytest.fixture
def hub_dir(tmp_path: Path) -> Path:
    hub = LocalPublisher(tmp_path / "hub")
    symbols = _symbols_json(tmp_path)
    exploding = "raise AssertionError('nothing may import this variant')\n"
    for major, names in ((1, [LEGACY]), (2, [LEGACY, CURRENT, TOO_NEW_PY, CUDA, "torch-cpu"])):
        staging = tmp_path / f"staging{major}"
        for name in names:
            make_variant(staging / name, name="kern", init=exploding,
                         files={"symbols.json": symbols, "layers.py": KERNEL_LAYERS})
        hub.publish(REPO, f"v{major}", {p.name: p for p in staging.iterdir()},
                    tag=f"v{major}.0.0", message=f"release {major}.0.0")
    return tmp_path / "hub"


def test_variants_json_is_the_ecosystems_document(
        hub_dir: Path, isolated_settings: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["variants", REPO, "--hub", str(hub_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["repo_id"] == REPO and [r["version"] for r in doc["revisions"]] == [2]
    (v2,) = doc["revisions"]
    assert v2["revision"] == "v2" and len(v2["commit"]) == 40
    rows = {row["variant"]: row for row in v2["variants"]}
    assert set(rows) == {LEGACY, CURRENT, TOO_NEW_PY, CUDA, "torch-cpu"}
    assert all(set(row) == {"variant", "compatible", "preferred", "reason"} for row in rows.values())
    # One build under both names: the current name is preferred, the legacy one next.
    assert [row["variant"] for row in v2["variants"] if row["compatible"]] == [
        CURRENT, LEGACY, "torch-cpu"]
    assert rows[CURRENT]["preferred"] and not rows[LEGACY]["preferred"]
    assert rows[TOO_NEW_PY]["reason"] == (
        f"built for Python >= 3.{PY.minor + 1}, this is Python 3.{PY.minor}")
    assert rows[CUDA]["reason"].startswith("variant is for cuda; this system runs cpu")


def test_variants_options(hub_dir: Path, isolated_settings: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    def doc(*args: str) -> dict:
        assert main(["variants", REPO, "--hub", str(hub_dir), "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)

    assert [r["version"] for r in doc("--all-versions")["revisions"]] == [1, 2]
    assert [r["version"] for r in doc("--version", "1")["revisions"]] == [1]
    assert [r["version"] for r in doc("--version", "latest")["revisions"]] == [2]
    (tagged,) = doc("--revision", "v1.0.0")["revisions"]
    assert tagged["version"] is None and tagged["revision"] == "v1.0.0"
    compatible = doc("--only-compatible")["revisions"][0]["variants"]
    assert all(row["compatible"] for row in compatible) and len(compatible) == 3

    assert main(["variants", REPO, "--hub", str(hub_dir), "--only-compatible"]) == 0
    out = capsys.readouterr().out
    assert f"{REPO} version 2 (v2 -> " in out
    assert f"* {CURRENT}" in out and "preferred" in out and "rejected" not in out
    with pytest.raises(SystemExit) as usage:
        main(["variants", REPO, "--hub", str(hub_dir), "--all-versions", "--version", "1"])
    assert usage.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_cache_ls_lists_what_loads_fetched(
        hub_dir: Path, isolated_settings: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "ls"]) == 0
    assert capsys.readouterr().out.startswith("no cached kernels in ")
    assert main(["describe-api", REPO, "--hub", str(hub_dir), "--version", "1"]) == 0
    assert main(["describe-api", REPO, "--hub", str(hub_dir)]) == 0
    capsys.readouterr()
    assert main(["cache", "ls", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cache_dir"] == str(isolated_settings)
    (repo,) = doc["repos"]
    assert repo["repo_id"] == REPO and repo["size_on_disk"] > 0
    assert {(v["version"], tuple(v["variants"])) for v in repo["versions"]} == {
        ("v1", (LEGACY,)), ("v2", (CURRENT,))}
    assert all("v{}.0.0".format(v["version"][1]) in v["refs"] for v in repo["versions"])
    assert main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    assert REPO in out and CURRENT in out and LEGACY in out and "VERSION" in out


def test_describe_api_reads_symbols_without_importing(
        hub_dir: Path, isolated_settings: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe-api", REPO, "--hub", str(hub_dir)]) == 0
    out = capsys.readouterr().out
    assert f"{REPO} at v2 (" in out and f"variant {CURRENT}" in out
    assert ("  relu(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor" in out)
    assert "  scaled(x, *, factor: float = 2.0, **options)" in out
    assert "  ReLU  has_backward=False  can_torch_compile=True" in out
    assert "  Unsaid  has_backward=unknown  can_torch_compile=unknown" in out
    assert "Helper" not in out  # not in layers.__all__

    assert main(["describe-api", REPO, "--hub", str(hub_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1 and doc["repo_id"] == REPO and doc["variant"] == CURRENT
    assert [f["name"] for f in doc["functions"]] == ["relu", "scaled"]
    assert doc["functions"][0]["signature"]["return_annotation"] == "torch.Tensor"
    assert doc["functions"][0]["doc"] == "out = max(x, 0)."
    assert doc["layers"][0] == {"name": "ReLU", "doc": "Drop-in ReLU.",
                                "attributes": {"has_backward": False, "can_torch_compile": True}}


def test_describe_api_trust_and_local_builds(
        hub_dir: Path, isolated_settings: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    stranger = "someone/kern"
    staging = tmp_path / "stranger"
    make_variant(staging / LEGACY, name="kern", files={"symbols.json": _symbols_json(tmp_path)})
    LocalPublisher(hub_dir).publish(stranger, "v1", {LEGACY: staging / LEGACY}, tag="v1.0.0",
                                    message="r")
    assert main(["describe-api", stranger, "--hub", str(hub_dir)]) == 1
    assert "organisation 'someone' is not trusted" in capsys.readouterr().err
    assert main(["describe-api", stranger, "--hub", str(hub_dir), "--trust-remote-code"]) == 0
    assert "ReLU" in capsys.readouterr().out
    # A local build is trusted by naming it; one without symbols.json says how to get one.
    assert main(["describe-api", str(staging)]) == 0
    assert f"{staging}, variant {LEGACY}" in capsys.readouterr().out
    bare = tmp_path / "bare" / LEGACY
    make_variant(bare, name="kern")
    assert main(["describe-api", str(bare.parent)]) == 1
    assert f"{LEGACY} has no symbols.json" in capsys.readouterr().err


def test_a_symbols_file_that_is_not_the_builds_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variant = tmp_path / LEGACY
    make_variant(variant, name="kern", files={"symbols.json": _symbols_json(tmp_path)})
    (variant / "symbols.json").write_text('{"schema_version": 1, "functions": [], "layers": []}')
    assert main(["describe-api", str(variant)]) == 1
    assert "does not match the digest in metadata.json" in capsys.readouterr().err


@pytest.mark.parametrize(("raw", "why"), [
    (b"{", "is not JSON"),
    (b'{"schema_version": 2, "functions": [], "layers": []}', "unsupported schema"),
    (b'{"schema_version": 1, "functions": [{"nam": "x"}], "layers": []}',
     "functions must be a list of objects with a string name"),
    (b'{"schema_version": 1, "functions": [], "layers": [{"name": "L", "attributes": {"a": 1}}]}',
     "attributes must be booleans or null"),
])
def test_malformed_symbols_files(raw: bytes, why: str) -> None:
    with pytest.raises(SymbolsError, match=why):
        parse_symbols(raw)
