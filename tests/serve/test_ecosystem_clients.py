"""The user's story end to end through ``kernelhub serve``: ``builder publish --hub URL``
writes a real compiled kernel through the server, and the ecosystem's own clients read
it with ``HF_ENDPOINT`` pointed at the server — the ``kernels`` 0.19.1 loader, and
Transformers 5.25 with ``use_kernels=True`` and no kernelhub integration at all."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import ClientsUnavailable, client_env, install_clients
from e2e import BIN, REPO, Workspace, last_json, run
from served import WRITE_TOKEN, serving_process, write_tokens_file

pytestmark = pytest.mark.slow

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CURRENT = "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
"""The same build under its current name (builder publish writes both generations): the
one kernels 0.19.1, which Transformers 5.25 installs, picks."""
REPO_ID = "kernels-community/activation"
LFS_THRESHOLD = 64 * 1024
"""A compiled variant's ``.so`` is larger; its Python files and metadata are smaller."""

LOAD = r"""
import json, kernels, torch, torch.nn.functional as F
act = kernels.get_kernel("kernels-community/activation", version=1)
x = torch.randn(7, 128)
out = torch.empty(7, 64)
act.silu_and_mul(out, x)
err = (out - F.silu(x[:, :64]) * x[:, 64:]).abs().max().item()
print(json.dumps({"file": act.__file__, "err": err, "kernels": kernels.__version__ if hasattr(kernels, "__version__") else None}))
"""

USE_KERNELS = r"""
import json, sys, torch, transformers, kernels
from kernels import LayerRepository, Mode, register_kernel_mapping
from transformers import LlamaConfig, LlamaForCausalLM
config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=4, hidden_act="silu")
torch.manual_seed(0)
LlamaForCausalLM(config).save_pretrained(sys.argv[1])
# Transformers 5.25 maps no CPU kernels by default and its KernelConfig refuses "cpu", so a
# CPU user registers the layer with the ecosystem's own API; use_kernels=True then kernelizes.
register_kernel_mapping({"SiLU": {"cpu": {Mode.INFERENCE: LayerRepository(
    repo_id="kernels-community/activation", layer_name="Silu", version=1)}}})
model = LlamaForCausalLM.from_pretrained(sys.argv[1], use_kernels=True)
model.eval()
act = model.model.layers[0].mlp.act_fn
ids = torch.tensor([[1, 2, 3, 4]])
with torch.no_grad():
    logits = model(ids).logits
loaded = [m.__file__ for m in list(sys.modules.values())
          if getattr(m, "__file__", None) and "kernels--kernels-community--activation" in m.__file__]
forward = getattr(act.forward, "__func__", act.forward)
print(json.dumps({"transformers": transformers.__version__, "forward": forward.__code__.co_filename,
                  "loaded": loaded, "finite": bool(torch.isfinite(logits).all()),
                  "kernelhub": "kernelhub" in sys.modules and
                               "kernelhub.integrations.transformers.apply" in sys.modules}))
"""


@pytest.fixture(scope="module")
def clients() -> Path:
    try:
        return install_clients()
    except ClientsUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def build_out(request: pytest.FixtureRequest) -> Path:
    """The session's build of every kernel, shared with the other end-to-end tests (no
    compile of its own in CI); ``KERNELHUB_SERVE_BUILD_OUT`` reuses a build you already
    have (a ``builder build`` output directory holding activation's variant)."""
    mine = os.environ.get("KERNELHUB_SERVE_BUILD_OUT")
    if mine:
        return Path(mine)
    built: Workspace = request.getfixturevalue("built")
    return built.out


@pytest.fixture(scope="module")
def served_hub(build_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """activation's torch 2.13 CPU build, published with ``builder publish --hub URL``
    to a ``kernelhub-serve`` process that takes files of :data:`LFS_THRESHOLD` bytes and
    more through LFS, as the Hub stores a variant's ``.so``."""
    root = tmp_path_factory.mktemp("served")
    tokens = write_tokens_file(root / "tokens.toml")
    (root / "hub").mkdir()  # the team trusts its own org: what kernels 0.19 asks the server
    (root / "hub/kernelhub.toml").write_text('[trust]\norgs = ["kernels-community"]\n')
    with serving_process(root / "hub", tokens, root / "serve.log",
                         "--lfs-threshold", str(LFS_THRESHOLD)) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELHUB_"))}
        env.update(HF_TOKEN=WRITE_TOKEN, HF_HOME=str(root / "hf-home"), NO_PROXY="127.0.0.1",
                   HF_HUB_DISABLE_XET="1",  # LFS, the large-file path serve speaks
                   KERNELHUB_ALLOW_HOST_ABI="1")  # this host's builds, deliberately
        proc = run([str(BIN / "builder"), "--project", str(REPO), "--out", str(build_out),
                    "publish", "activation", "--hub", url], env=env)
        assert f"added     {VARIANT}" in proc.stdout, proc.stdout
        assert "as a model repository" not in proc.stdout  # the kernel type exists here
        yield url
    log = (root / "serve.log").read_text()
    assert WRITE_TOKEN not in log and "POST /api/kernels/kernels-community/activation/commit" in log


def test_kernels_0_19_loads_what_builder_published_through_the_server(
        served_hub: str, clients: Path, tmp_path: Path) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    listed = [f for f in HfApi(endpoint=served_hub, token=False).list_repo_tree(
        REPO_ID, f"build/{CURRENT}", revision="v1", repo_type="kernel", recursive=True)
        if isinstance(f, RepoFile)]
    assert {f.path.rsplit(".", 1)[-1] for f in listed if f.lfs is not None} == {"so"}, listed
    env = client_env(clients, served_hub, tmp_path / "hf-home")
    got = last_json(run([sys.executable, "-c", LOAD], env=env))
    assert CURRENT in got["file"] and str(clients) not in got["file"]
    assert "kernels--kernels-community--activation" in got["file"]
    assert got["err"] < 1e-5


def test_transformers_5_25_use_kernels_loads_it_with_the_ecosystem_loader(
        served_hub: str, clients: Path, tmp_path: Path) -> None:
    env = client_env(clients, served_hub, tmp_path / "hf-home")
    got = last_json(run([sys.executable, "-c", USE_KERNELS, str(tmp_path / "model")], env=env))
    assert got["transformers"] == "5.25.0"
    assert got["loaded"], got  # the kernel module came from the server, through kernels
    assert any(CURRENT in f for f in got["loaded"])
    assert got["finite"] and not got["kernelhub"]
    # The layer's forward now runs code from the kernel the server delivered.
    assert "kernels--kernels-community--activation" in got["forward"] and CURRENT in got["forward"]


def test_pages_describe_what_was_published(served_hub: str) -> None:
    import httpx

    page = httpx.get(f"{served_hub}/kernels/{REPO_ID}")
    assert page.status_code == 200
    assert VARIANT in page.text and "x86_64 Linux" in page.text
    assert json.dumps(REPO_ID)[1:-1] in page.text
