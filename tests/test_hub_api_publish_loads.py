"""What ``builder publish --hub http://…`` puts on a Hub-API server loads with our loader
and with the ecosystem's loaders (``kernels`` 0.17.2 and 0.19.1), each talking to the
server directly: no proxy maps the kernel repository type onto models, so what each loader
finds here is what a user's finds.

* A server with kernel repositories (``kernelhub serve``, tests/hub_api_served.py): the
  publish makes a kernel repository, and all three loaders load the variant from it.
* A server without them: the publish refuses unless ``--allow-model-repo``; allowed, it
  makes a model repository and says that the ecosystem's loaders will not find it. Then,
  through olah (a real Hub-API mirror with models only) serving what was published, our
  loader loads it and both ecosystem loaders fail to find it, as the publish said.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, builder, last_json, run
from hub_api_served import WRITE_TOKEN, hub_api_server
from reference_loader import (
    ecosystem_loaders,
    olah_cli,
    olah_server,
    reference_env,
)

pytestmark = pytest.mark.slow

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CURRENT = "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
"""The same build under its current name (builder publish writes both generations): what
kernelhub and kernels 0.19.1 load; kernels 0.17.2 reads only the legacy name."""
PICKS = {"0.17.2": VARIANT, "0.19.1": CURRENT}
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
ECOSYSTEM = ("import sys, kernels\nact = kernels.get_kernel(sys.argv[1], version=1, "
             "trust_remote_code=True)\n" + CHECK)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Only activation's torch 2.13 CPU variant: what every loader picks in this venv."""
    root = tmp_path_factory.mktemp("hub-api-loads")
    ws = Workspace(root=root, out=root / "build", hub=root / "unused")
    builder(ws, "build", "activation", "--variant", VARIANT)
    return ws


@pytest.fixture(scope="module")
def ecosystem(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each ecosystem loader in a directory of its own (never in our venv)."""
    return ecosystem_loaders(tmp_path_factory)


def client_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELHUB_"))}
    env.update(HF_TOKEN=WRITE_TOKEN, HF_HOME=str(tmp_path / "hf-home"), NO_PROXY="127.0.0.1",
               no_proxy="127.0.0.1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    return env


def publish(built: Workspace, url: str, env: dict[str, str], *extra: str,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "builder"), "--project", str(REPO), "--out", str(built.out),
                "publish", "activation", "--hub", url, *extra], env=env, check=check)


def load_ours(url: str, env: dict[str, str], tmp_path: Path) -> dict:
    return last_json(run([sys.executable, "-c", OURS, REPO_ID], env={
        **env, "KERNELHUB_HUB": url, "HF_ENDPOINT": url,
        "KERNELHUB_CACHE": str(tmp_path / "cache"),
        "KERNELHUB_CONFIG": str(tmp_path / "no-config.toml")}))


def load_ecosystem(version: str, target: Path, url: str, env: dict[str, str], tmp_path: Path,
                   check: bool = True) -> subprocess.CompletedProcess[str]:
    ref_env = reference_env(env, target, url, tmp_path / f"hf-cache-{version}")
    return run([sys.executable, "-c", ECOSYSTEM, REPO_ID], env=ref_env, check=check)


def test_a_kernel_repository_loads_with_our_loader_and_both_ecosystem_loaders(
    built: Workspace, ecosystem: dict[str, Path], tmp_path: Path
) -> None:
    env = client_env(tmp_path)
    built_meta = (built.out / "activation" / VARIANT / "metadata.json").read_bytes()
    with hub_api_server(tmp_path / "storage") as server:
        proc = publish(built, server.url, env)
        assert f"added     {VARIANT}" in proc.stdout and f"added     {CURRENT}" in proc.stdout
        assert "model repository" not in proc.stdout
        assert server.repo_path(REPO_ID).is_dir()

        ours = load_ours(server.url, env, tmp_path)
        assert CURRENT in ours["file"] and ours["err"] < 1e-5
        for version, target in ecosystem.items():
            theirs = last_json(load_ecosystem(version, target, server.url, env, tmp_path))
            assert f"/build/{PICKS[version]}/__init__.py" in theirs["file"], version
            assert theirs["err"] < 1e-5, version
            assert (Path(theirs["file"]).parent / "metadata.json").read_bytes() == built_meta
            # It asked for the kernel type, directly (the server saw those requests).
            assert any(r.startswith("GET /api/kernels/") for r in server.requests), version
    (cached,) = (tmp_path / "cache").rglob(f"{CURRENT}/metadata.json")
    assert cached.read_bytes() == built_meta


def test_without_kernel_repositories_the_publish_refuses_unless_allowed_and_says_who_cannot_load(
    built: Workspace, ecosystem: dict[str, Path], tmp_path: Path
) -> None:
    if olah_cli() is None:
        pytest.skip("olah is not installed (pip install olah)")
    env = client_env(tmp_path)
    storage = tmp_path / "storage"
    with hub_api_server(storage, kernel_type=False) as server:
        refused = publish(built, server.url, env, check=False)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "has no kernel repository type" in line and "--allow-model-repo" in line
        assert "will not find it" in line and "Nothing was published" in line
        assert not server.repo_path(REPO_ID).exists()

        allowed = publish(built, server.url, env, "--allow-model-repo")
    assert "created kernels-community/activation as a model repository" in allowed.stdout
    assert "ecosystem's `kernels` loader" in allowed.stdout
    assert "will not find it" in allowed.stdout
    assert f"added     {VARIANT}" in allowed.stdout

    with olah_server(storage, tmp_path / "olah") as url:
        ours = load_ours(url, env, tmp_path)
        assert CURRENT in ours["file"] and ours["err"] < 1e-5
        for version, target in ecosystem.items():
            theirs = load_ecosystem(version, target, url, env, tmp_path, check=False)
            assert theirs.returncode != 0, f"kernels {version} loaded a model repository"
            assert "404" in theirs.stderr or "not found" in theirs.stderr.lower(), theirs.stderr
