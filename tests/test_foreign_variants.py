"""Variants built by the ecosystem's builder: metadata.json without a digest.

The fixture is a hub repository written by us in the ecosystem's exact shape — files at
``build/<variant>/``, a ``main`` and a ``v1`` branch, and metadata.json with the keys
its builder writes (name, id, version, license, python-depends, backend, provenance with
``kernel-builder``; no ``digest``, no ``release``). The variant's code is our own build
of the activation kernel. Such a variant loads, verified against the hub's own content
hashes (git blob ids), and is checked against what was recorded on every later load.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e import Workspace, run

REPO_ID = "kernels-community/ecosystem-activation"

LOAD = """
import torch, kernelhub
act = kernelhub.get_kernel({repo!r}, version=1)
x = torch.randn(4, 64)
out = torch.empty(4, 32)
act.silu_and_mul(out, x)
ref = torch.nn.functional.silu(x[:, :32]) * x[:, 32:]
torch.testing.assert_close(out, ref)
print("loaded", act.__name__)
"""


def _ecosystem_metadata(ours: dict) -> dict:
    """The metadata.json the ecosystem's builder writes for the same build."""
    return {
        "name": ours["name"],
        "id": ours["id"],
        "version": ours["version"],
        "license": ours["license"],
        "python-depends": ours["python-depends"],
        "backend": {"type": ours["backend"]["type"]},
        "provenance": {"kernel-builder": {"version": "0.17.0"}},
    }


def _publish_as_ecosystem(ws: Workspace, tmp: Path) -> tuple[Path, str]:
    """A bare repo under the hub's models/ with one ecosystem-built variant."""
    build = ws.out / "activation"
    variant = next(p for p in sorted(build.iterdir()) if "cpu-x86_64-linux" in p.name)
    tree = tmp / "tree"
    target = tree / "build" / variant.name
    shutil.copytree(variant, target, ignore=shutil.ignore_patterns("__pycache__"))
    ours = json.loads((target / "metadata.json").read_text())
    (target / "metadata.json").write_text(json.dumps(_ecosystem_metadata(ours), indent=2) + "\n")
    (tree / "README.md").write_text("An activation kernel, as the ecosystem publishes it.\n")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    run(["git", "init", "-q", "-b", "main", str(tree)])
    run([*git, "add", "-A"])
    run([*git, "commit", "-q", "-m", "Build uploaded using `kernels`."])
    bare = ws.hub / "models" / REPO_ID
    if bare.exists():
        shutil.rmtree(bare)
    run(["git", "clone", "-q", "--bare", str(tree), str(bare)])
    run(["git", "-C", str(bare), "branch", "v1", "main"])
    return bare, variant.name


@pytest.mark.slow
def test_ecosystem_variant_loads_verified_by_hub_hashes(published: Workspace, tmp_path: Path):
    _, variant = _publish_as_ecosystem(published, tmp_path)
    env = published.env(cache="foreign-cache")
    shutil.rmtree(published.root / "foreign-cache", ignore_errors=True)
    code = LOAD.format(repo=REPO_ID)
    assert "loaded" in run([sys.executable, "-c", code], env=env).stdout

    # What matched the hub was recorded beside the cached variant ...
    records = list((published.root / "foreign-cache").rglob(f"{variant}.hub-digest.json"))
    assert len(records) == 1 and "_ops.py" in json.loads(records[0].read_text())
    cached = records[0].parent / variant

    # ... and is checked on every load: a changed file is refused before import.
    ops = cached / "_ops.py"
    ops.chmod(0o644)
    ops.write_text(ops.read_text() + "\nprint('injected')\n")
    proc = run([sys.executable, "-c", code], env=env, check=False)
    assert proc.returncode != 0 and "injected" not in proc.stdout
    assert "_ops.py" in proc.stderr and "sha256 does not match" in proc.stderr

    # Without the record there is nothing to verify against: refused, not trusted.
    shutil.rmtree(cached)
    shutil.copytree(published.out / "activation" / variant, cached,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (cached / "metadata.json").write_text(json.dumps(_ecosystem_metadata(
        json.loads((published.out / "activation" / variant / "metadata.json").read_text()))))
    records[0].unlink()
    proc = run([sys.executable, "-c", code], env=env, check=False)
    assert proc.returncode != 0 and "no hub content hashes were recorded" in proc.stderr


def test_hub_lists_git_blob_ids(published: Workspace, tmp_path: Path):
    """LocalHub.file_hashes is what `git ls-tree` says, per file of the variant."""
    from kernelhub.hub.local import LocalHub

    bare, variant = _publish_as_ecosystem(published, tmp_path)
    commit = subprocess.run(["git", "-C", str(bare), "rev-parse", "v1"], text=True,
                            capture_output=True, check=True).stdout.strip()
    hashes = LocalHub(published.hub).file_hashes(REPO_ID, commit, variant)
    listing = run(["git", "-C", str(bare), "ls-tree", "-r", commit, f"build/{variant}/"]).stdout
    assert hashes == {line.split("\t")[1].removeprefix(f"build/{variant}/"):
                      "git:" + line.split()[2] for line in listing.splitlines()}
