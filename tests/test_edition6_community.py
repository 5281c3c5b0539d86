"""A kernel author's edition-6 tree meets both generations of the ecosystem's loader.

The tree (tests/fixtures/community-relu-v6, written for this test in the shape the
ecosystem's 0.19 builder works with) uses what edition 6 added: the zip layout, a kernel
dependency (on tests/fixtures/community-scale, published first) taken with
``kernels.get_kernel_dep`` while it loads, and a layers module, so symbols.json has
functions and layers. Our builder builds it, checks it (the import check resolves the
dependency from the hub) and publishes it under both generations of variant names; then,
through a real Hub-API server (olah):

* the ecosystem's 0.19.1 loader loads it — the archive and the dependency — and its
  ``kernels describe-api`` reads our symbols.json (olah serves no publisher trust flags,
  so it is told to trust the repositories);
* the ecosystem's 0.17.2 loader, which cannot import the zip layout, refuses it with
  "upgrade" (metadata.json's kernels-minver), not with a failed import;
* kernelhub loads it too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, last_json, run
from reference_loader import (
    KernelRepoProxy,
    ReferenceLoaderUnavailable,
    install_reference_loader,
    olah_cli,
    reference_env,
    served_hub,
)

pytestmark = pytest.mark.slow

CURRENT = "torch-stable-abi-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
LEGACY = "torch-stable-abi213-cpu-x86_64-linux"
"""The one build under both names. kernels 0.19.1 ranks them equal (a stable-ABI name
carries no C++ ABI tag, and a legacy name means cpython-3.9, as this one says), so it may
take either — the same bytes; for a torch-bound Linux build the untagged current name
wins (see test_our_variants_load_under_both_generations_of_the_ecosystems_loader)."""

LOAD = r"""
import json, sys, torch, kernels
relu = kernels.get_kernel("kernels-community/relu", version=1, trust_remote_code=TRUST)
x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])
loaded = {str(k.metadata.name): {"layout": str(k.metadata.build_layout),
                                  "minver": str(k.metadata.kernels_minver)}
          for k in kernels.get_loaded_kernels()}
print(json.dumps({"file": relu.__file__, "relu": relu.relu(x).tolist(),
                  "scaled": relu.scaled_relu(x, 2.0).tolist(),
                  "layer": relu.layers.ReLU()(x).tolist(), "loaded": loaded}))
"""

REFUSED = r"""
import json, kernels
try:
    kernels.get_kernel("kernels-community/relu", version=1, trust_remote_code=True)
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
else:
    print(json.dumps({"error": None}))
"""

DESCRIBE = r"""
import sys
from kernels._internals.cli import main
sys.argv = ["kernels", "describe-api", "kernels-community/relu", "--version", "1", "--json",
            "--trust-remote-code"]
main()
"""


@pytest.fixture(scope="module")
def community(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """scale published first, then relu built (its import check takes scale from the
    hub), checked and published — all with the real builder CLI."""
    root = tmp_path_factory.mktemp("edition6")
    ws = Workspace(root=root, out=root / "build", hub=root / "hub")
    project = root / "project"
    for name, fixture in (("scale", "community-scale"), ("relu", "community-relu-v6")):
        shutil.copytree(REPO / "tests" / "fixtures" / fixture, project / "kernels-src" / name)
    (project / "kernels.toml").write_text(
        'kernels = ["scale", "relu"]\n[hub]\norg = "kernels-community"\n'
        '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\nsystems = ["x86_64-linux"]\n'
        '[toolchain.torch]\n"2.13" = "torch==2.13.0"\n')
    for kernel in ("scale", "relu"):
        for step in (["build", kernel], ["check", kernel], ["publish", kernel]):
            run([str(BIN / "builder"), "--project", str(project), "--out", str(ws.out), *step],
                env=ws.env())
    return ws


@pytest.fixture(scope="module")
def served(community: Workspace, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[KernelRepoProxy]:
    if olah_cli() is None:
        pytest.skip("olah is not installed (pip install olah)")
    with served_hub(community.hub, tmp_path_factory.mktemp("olah")) as proxy:
        yield proxy


def reference(version: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return install_reference_loader(tmp_path_factory.mktemp(f"kernels-{version}"), version)
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e).splitlines()[0])


def python(code: str, env: dict[str, str]) -> dict:
    return last_json(run([sys.executable, "-c", code], env=env))


def test_the_build_is_edition_6_shaped(community: Workspace) -> None:
    variant = community.out / "relu" / LEGACY
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["build-layout"] == "zip" and metadata["kernels-minver"] == "0.19.0"
    assert metadata["kernel-depends"] == [{"repo-id": "kernels-community/scale", "version": 1}]
    assert sorted(p.name for p in variant.iterdir()) == sorted([
        f"{metadata['id']}.zip", f"{metadata['id']}.abi3.so", "_ops.py", "metadata.json",
        "symbols.json"])
    assert set(metadata["digest"]["files"]) == {p.name for p in variant.iterdir()} - {
        "metadata.json"}
    symbols = json.loads((variant / "symbols.json").read_text())
    assert [f["name"] for f in symbols["functions"]] == ["relu", "scaled_relu"]
    assert symbols["layers"] == [{"name": "ReLU", "doc": symbols["layers"][0]["doc"],
                                  "attributes": {"has_backward": False,
                                                 "can_torch_compile": True}}]


def test_the_ecosystems_0_19_loader_loads_the_current_name_and_its_dependency(
        served: KernelRepoProxy, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    env = reference_env(dict(os.environ), reference("0.19.1", tmp_path_factory), served.url,
                        tmp_path / "hf-cache")
    result = python(LOAD.replace("TRUST", "True"), env)  # olah serves no org trust flags
    chosen = result["file"].split("/build/")[1].split("/")[0]
    assert chosen in (CURRENT, LEGACY) and ".zip/" in result["file"], result["file"]
    assert result["relu"] == [0.0, 0.0, 0.0, 1.5, 3.0]
    assert result["scaled"] == [0.0, 0.0, 0.0, 3.0, 6.0]
    assert result["layer"] == result["relu"]
    assert result["loaded"]["relu"] == {"layout": "zip", "minver": "0.19.0"}
    assert result["loaded"]["scale"]["layout"] == "files"
    fetched = [r for r in served.requests if "/resolve/" in r and "kernels-community/relu" in r]
    assert fetched and all(f"/build/{chosen}/" in r for r in fetched), fetched


def test_the_ecosystems_describe_api_reads_our_symbols(
        served: KernelRepoProxy, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    env = reference_env(dict(os.environ), reference("0.19.1", tmp_path_factory), served.url,
                        tmp_path / "hf-cache")
    described = json.loads(run([sys.executable, "-c", DESCRIBE], env=env).stdout)
    assert described["variant"] in (CURRENT, LEGACY)
    assert [f["name"] for f in described["functions"]] == ["relu", "scaled_relu"]
    assert [layer["name"] for layer in described["layers"]] == ["ReLU"]


def test_the_ecosystems_0_17_loader_says_upgrade(
        served: KernelRepoProxy, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    env = reference_env(dict(os.environ), reference("0.17.2", tmp_path_factory), served.url,
                        tmp_path / "hf-cache")
    error = python(REFUSED, env)["error"]
    assert error is not None and "requires kernels>=0.19.0" in error, error


LOCKED = r"""
import json, sys, torch
from pathlib import Path
from kernels import get_locked_kernel
from kernels._rust import KernelLocks
lock = Path(sys.argv[1])
pins = sorted({d.repo_id for d in KernelLocks.from_json(lock.read_text())})
relu = get_locked_kernel("kernels-community/relu", lockfile=lock, trust_remote_code=True)
x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])
print(json.dumps({"pins": pins, "scaled": relu.scaled_relu(x, 2.0).tolist()}))
"""


def test_the_ecosystems_0_19_loader_loads_it_and_its_dependency_from_kernelhubs_lock(
        community: Workspace, served: KernelRepoProxy, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``kernelhub lock`` pins relu's dependency too, so the 0.19 loader's locked load —
    which looks every kernel-depends entry up in the lock — finds scale there."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n'
        '[tool.kernels.dependencies]\n"kernels-community/relu" = 1\n')
    env = community.env(KERNELHUB_TRUSTED_ORGS="kernels-community")
    run([str(BIN / "kernelhub"), "lock", str(project)], env=env)
    lock = project / "kernels.lock"
    assert {e["dependency"]["repo-id"] for e in json.loads(lock.read_text())} == {
        "kernels-community/relu", "kernels-community/scale"}
    theirs = reference_env(dict(os.environ), reference("0.19.1", tmp_path_factory), served.url,
                           tmp_path / "hf-cache")
    loaded = last_json(run([sys.executable, "-c", LOCKED, str(lock)], env=theirs))
    assert loaded == {"pins": ["kernels-community/relu", "kernels-community/scale"],
                      "scaled": [0.0, 0.0, 0.0, 3.0, 6.0]}
    ours = ('import json, sys, torch, kernelhub\n'
            'relu = kernelhub.load_locked_kernel("kernels-community/relu", lockfile=sys.argv[1])\n'
            'x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])\n'
            'print(json.dumps({"scaled": relu.scaled_relu(x, 2.0).tolist()}))\n')
    assert last_json(run([str(BIN / "python"), "-c", ours, str(lock)], env=env)) == {
        "scaled": [0.0, 0.0, 0.0, 3.0, 6.0]}


def test_kernelhub_loads_it(community: Workspace) -> None:
    env = community.env(KERNELHUB_TRUSTED_ORGS="kernels-community")
    code = LOAD.replace("import json, sys, torch, kernels",
                        "import json, sys, torch, kernelhub as kernels").replace(
                            "trust_remote_code=TRUST", "trust_remote_code=False")
    code = code.split("loaded = ")[0] + (
        'print(json.dumps({"file": relu.__file__, "relu": relu.relu(x).tolist(), '
        '"scaled": relu.scaled_relu(x, 2.0).tolist()}))\n')
    result = last_json(run([str(BIN / "python"), "-c", code], env=env))
    assert result["relu"] == [0.0, 0.0, 0.0, 1.5, 3.0]
    assert result["scaled"] == [0.0, 0.0, 0.0, 3.0, 6.0]


OURS = r"""
import json, sys, torch, kernels
act = kernels.get_kernel("kernels-community/activation", version=1, trust_remote_code=True)
x = torch.randn(4, 64)
out = torch.empty(4, 32)
act.silu_and_mul(out, x)
expected = torch.nn.functional.silu(x[:, :32]) * x[:, 32:]
print(json.dumps({"file": act.__file__,
                  "error": (out - expected).abs().max().item()}))
"""


@pytest.mark.parametrize(("version", "name"), [
    ("0.19.1", "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"),
    ("0.17.2", "torch213-cxx11-cpu-x86_64-linux"),
])
def test_our_variants_load_under_both_generations_of_the_ecosystems_loader(
        published_served: KernelRepoProxy, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory, version: str, name: str) -> None:
    """One build, published under both names: each loader takes the name it prefers."""
    env = reference_env(dict(os.environ), reference(version, tmp_path_factory),
                        published_served.url, tmp_path / "hf-cache")
    result = python(OURS, env)
    assert f"/build/{name}/" in result["file"], result["file"]
    assert result["error"] < 1e-5
