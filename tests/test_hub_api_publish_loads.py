"""What ``builder publish --hub http://…`` puts on a Hub-API server loads, with our loader
and with the reference loader, through olah — a real Hub-API mirror — serving the test
server's storage (tests/hub_api_test_server.py keeps repositories in the LocalHub layout).

olah serves model repositories only, so the test server runs without the kernel repository
type here, and the publisher falls back to a model repository and says so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, builder, last_json, run
from hub_api_test_server import HubApiTestServer
from reference_loader import (
    KernelRepoProxy,
    ReferenceLoaderUnavailable,
    install_reference_loader,
    olah_cli,
    olah_server,
    reference_env,
)

pytestmark = pytest.mark.slow

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CURRENT = "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
"""The same build under its current name (builder publish writes both): what kernelhub
loads; the reference loader (0.17.2) reads only the legacy name."""
REPO_ID = "kernels-community/activation"

CHECK = r"""
import json, sys, torch, torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(7, 2 * 64)
out = torch.empty(7, 64)
act.silu_and_mul(out, x)
ref = F.silu(x[..., :64]) * x[..., 64:]
print(json.dumps({"file": act.__file__, "err": (out - ref).abs().max().item()}))
"""
OURS = "import sys, kernelhub\nact = kernelhub.get_kernel(sys.argv[1], version=1)\n" + CHECK
REFERENCE = ("import sys, kernels\nact = kernels.get_kernel(sys.argv[1], version=1, "
             "trust_remote_code=True)\n" + CHECK)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Only activation's torch 2.13 CPU variant: what both loaders pick in this venv."""
    root = tmp_path_factory.mktemp("hub-api-loads")
    ws = Workspace(root=root, out=root / "build", hub=root / "unused")
    builder(ws, "build", "activation", "--variant", VARIANT)
    return ws


def test_published_through_the_hub_api_loads_with_both_loaders_through_olah(
    built: Workspace, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if olah_cli() is None:
        pytest.skip("olah is not installed (pip install olah)")
    try:
        reference = install_reference_loader(tmp_path_factory.mktemp("reference-kernels"))
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e))
    storage = tmp_path / "storage"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_TOKEN="hf_test_write_token", HF_HOME=str(tmp_path / "hf-home"),
               NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    with HubApiTestServer(storage, kernel_type=False).running() as server:
        proc = run([str(BIN / "builder"), "--project", str(REPO), "--out", str(built.out),
                    "publish", "activation", "--hub", server.url], env=env)
    assert "created kernels-community/activation as a model repository" in proc.stdout
    assert f"added     {VARIANT}" in proc.stdout and f"added     {CURRENT}" in proc.stdout

    built_meta = (built.out / "activation" / VARIANT / "metadata.json").read_bytes()
    with olah_server(storage, tmp_path / "olah") as url:
        ours = last_json(run([sys.executable, "-c", OURS, REPO_ID], env={
            **env, "KERNELHUB_HUB": url, "HF_ENDPOINT": url,
            "KERNELHUB_CACHE": str(tmp_path / "cache"),
            "KERNELHUB_CONFIG": str(tmp_path / "no-config.toml")}))
        assert CURRENT in ours["file"] and ours["err"] < 1e-5

        proxy = KernelRepoProxy(url)  # the reference loader asks for the kernel repo type
        try:
            ref_env = reference_env(env, reference, proxy.url, tmp_path / "hf-cache")
            theirs = last_json(run([sys.executable, "-c", REFERENCE, REPO_ID], env=ref_env))
        finally:
            proxy.close()
    assert f"/build/{VARIANT}/__init__.py" in theirs["file"] and theirs["err"] < 1e-5
    # Both got the bytes that were built (ours imports from a verified private copy of
    # its cache entry, so its cache holds the downloaded files).
    (cached,) = (tmp_path / "cache").rglob(f"{CURRENT}/metadata.json")
    assert cached.read_bytes() == built_meta
    assert (Path(theirs["file"]).parent / "metadata.json").read_bytes() == built_meta
