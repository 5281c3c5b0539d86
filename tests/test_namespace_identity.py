"""A copied build with an edited metadata id cannot take the process down.

metadata.json is not covered by the digest. A copy of a real compiled build whose
``id`` was edited used to pass the duplicate-namespace guard (which trusted that id),
and loading it next to the original registered the same torch op namespace twice: the
process died (SIGSEGV with the stable ABI, "Only a single TORCH_LIBRARY" abort
otherwise). The guard now reads the namespace from what is loaded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e import REPO, Workspace, builder

FIXTURE_KERNEL = REPO / "builder/tests/fixtures/project/kernels-src/scale_stable"

PROBE = """\
import json, sys
from kernelhub.errors import KernelHubError
from kernelhub import load_variant_dir
load_variant_dir(sys.argv[1])
try:
    load_variant_dir(sys.argv[2])
    print(json.dumps({"loaded": True}))
except KernelHubError as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


@pytest.fixture(scope="module")
def compiled_variant(workspace: Workspace) -> Path:
    """One real compiled (stable-ABI, ~1 s) build of a small fixture kernel."""
    root = workspace.root / "namespace-identity"
    project = root / "project"
    shutil.copytree(FIXTURE_KERNEL, project / "kernels-src/scale_stable")
    (project / "kernels.toml").write_text(
        'kernels = ["scale_stable"]\n[hub]\norg = "kernels-community"\n'
        '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\nsystems = ["x86_64-linux"]\n'
        '[toolchain.torch]\n"2.13" = "torch==2.13.0"\n'
    )
    ws = Workspace(root=root, out=root / "build", hub=root / "hub")
    builder(ws, "build", project=project)
    (variant,) = (ws.out / "scale_stable").iterdir()
    return variant


def _load_both(first: Path, second: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, str(first), str(second)],
                          capture_output=True, text=True, cwd=cwd)


def test_copy_with_edited_id_is_refused_not_fatal(compiled_variant: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited"
    shutil.copytree(compiled_variant, edited)
    meta = json.loads((edited / "metadata.json").read_text())
    original_id = meta["id"]
    meta["id"] = original_id[:-10] + "0" * 10
    (edited / "metadata.json").write_text(json.dumps(meta))

    proc = _load_both(compiled_variant, edited, tmp_path)
    assert proc.returncode == 0, f"the process died ({proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] == "KernelLoadError"
    assert original_id in result["message"] and "metadata.json" in result["message"]
    assert "\n" not in result["message"]


def test_binary_without_the_named_namespace_is_refused(compiled_variant: Path,
                                                       tmp_path: Path) -> None:
    # _ops.py and metadata.json both edited to a new id and the digest recomputed: the
    # binary still registers the original namespace, and that must be seen before dlopen.
    from kernelhub.formats.metadata import compute_digests

    edited = tmp_path / "edited"
    shutil.copytree(compiled_variant, edited)
    meta = json.loads((edited / "metadata.json").read_text())
    new_id = meta["id"][:-10] + "1" * 10
    ops = (edited / "_ops.py").read_text()
    (edited / "_ops.py").write_text(ops.replace(f"torch.ops.{meta['id']}", f"torch.ops.{new_id}"))
    meta["id"] = new_id
    meta["digest"]["files"] = compute_digests(edited)
    (edited / "metadata.json").write_text(json.dumps(meta))

    proc = _load_both(compiled_variant, edited, tmp_path)
    assert proc.returncode == 0, f"the process died ({proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] == "KernelLoadError"
    assert "native library does not register op namespace" in result["message"]
