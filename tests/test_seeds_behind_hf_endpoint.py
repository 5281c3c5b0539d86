"""The seed examples in a real user's world: the kernels live only behind ``HF_ENDPOINT``
(this session's published hub served by olah on loopback), the user has a fresh home —
no local hub, no config, empty caches — and then works with ``HF_HUB_OFFLINE=1`` after
the server is gone, from what the first run cached.

Each phase is a fresh Python process running what a Transformers user writes (SEEDS 2/5
``get_kernel(..., version=1)``, by the release's tag and by a version range; SEEDS 3
``use_kernels=True``; SEEDS 8 a ``KernelConfig``), so nothing is carried over in memory;
it reports where every kernel it imported came from (the cache path names the hub,
repository, commit and variant) and its outputs next to PyTorch's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from e2e import RELEASES, Workspace, last_json, run
from kernelhub.hub.hf import HfHub
from kernelhub.hub.local import LocalHub
from reference_loader import olah_cli, served_hub

pytest.importorskip("transformers")

USED = ("kernels-community/activation", "kernels-community/rmsnorm")
"""The kernels the examples below must take from the hub (the CPU builds every session
publishes); others ``use_kernels=True`` maps may be missing and fall back to PyTorch."""

USER = r"""
import json, sys
import torch, torch.nn.functional as F
import kernelhub
from pathlib import Path
from transformers import AutoModelForCausalLM, Qwen3Config
from kernelhub.integrations.transformers import KernelConfig
from kernelhub.layer import kernel_of
from kernelhub.load import importer
from kernelhub import settings

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=64)
model_dir = Path(sys.argv[1])
if not model_dir.exists():
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(Qwen3Config(**TINY)).save_pretrained(model_dir)
ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1))

def load(**kwargs):
    return AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)

def kernels(model):
    return {n: str(k) for n, m in model.named_modules() if (k := kernel_of(m)) is not None}

out = {}
# SEEDS 2/5: a kernel function, pinned to its major.
activation = kernelhub.get_kernel("kernels-community/activation", version=1)
x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
y = torch.empty(4, 32)
activation.silu_and_mul(y, x)
out["get_kernel_err"] = (y - F.silu(x[:, :32]) * x[:, 32:]).abs().max().item()
# SEEDS 5: the same release by its tag and by a semantic-version range.
out["pins_same_module"] = all(
    kernelhub.get_kernel("kernels-community/activation", version=pin) is activation
    for pin in (sys.argv[2], ">=1.0,<2.0"))

with torch.no_grad():
    reference = load(use_kernels=False)(ids).logits
    # SEEDS 3: use_kernels=True.
    model = load(use_kernels=True)
    out["use_kernels"] = kernels(model)
    out["use_kernels_err"] = (model(ids).logits - reference).abs().max().item()
    # SEEDS 8: a KernelConfig naming one layer's kernel and its version.
    config = KernelConfig({"SiLU": ("kernels-community/activation:Silu", {"version": 1})},
                          inherit_mapping=False)
    model = load(kernel_config=config)
    out["kernel_config"] = kernels(model)
    out["kernel_config_err"] = (model(ids).logits - reference).abs().max().item()

cache = settings.cache_dir().resolve()
out["cache"] = str(cache)
out["loaded"] = sorted({"/".join(Path(l.path).resolve().relative_to(cache).parts)
                        for l in importer.loads()})
print(json.dumps(out))
"""


def user_env(home: Path, endpoint: str, **extra: str) -> dict[str, str]:
    """A user whose only setting is ``HF_ENDPOINT``: every kernelhub, Hugging Face and
    XDG variable of this environment dropped, and a home of its own."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KERNELHUB_", "XDG_", "HUGGINGFACE_"))
           and k not in ("LOCAL_KERNELS", "USE_HUB_KERNELS")}
    env.update(HOME=str(home), HF_ENDPOINT=endpoint, NO_PROXY="127.0.0.1",
               no_proxy="127.0.0.1", PYTHONUNBUFFERED="1", **extra)
    return env


def user_run(home: Path, endpoint: str, model_dir: Path, **extra: str) -> dict:
    return last_json(run([sys.executable, "-c", USER, str(model_dir),
                          f"v{RELEASES['activation']}"],
                         env=user_env(home, endpoint, **extra), cwd=home))


def where_from(result: dict, repo_id: str) -> tuple[str, str, str]:
    """(hub directory, commit, variant) of the one load of ``repo_id`` the run made."""
    found = [p.split("/") for p in result["loaded"] if p.split("/")[1:3] == repo_id.split("/")]
    assert len(found) == 1, result["loaded"]
    hub_dir, _, _, commit, variant = found[0]
    return hub_dir, commit, variant


def check(result: dict, published: Workspace, home: Path) -> dict[str, tuple[str, str, str]]:
    """The outputs equal PyTorch's and each used kernel came from the published v1 head,
    as a variant of it for this CPU; returns where each came from."""
    assert Path(result["cache"]).is_relative_to(home.resolve()), result["cache"]
    assert result["get_kernel_err"] <= 1e-6, result
    assert result["pins_same_module"], result
    assert result["use_kernels_err"] <= 1e-3, result
    assert result["kernel_config_err"] <= 1e-5, result
    acts = [n for n in result["use_kernels"] if n.endswith("mlp.act_fn")]
    assert len(acts) == 2 and all("kernels-community/activation" in result["use_kernels"][n]
                                  for n in acts), result["use_kernels"]
    assert any(n.endswith("input_layernorm") and "kernels-community/rmsnorm" in r
               for n, r in result["use_kernels"].items()), result["use_kernels"]
    assert result["kernel_config"] and all(
        n.endswith("act_fn") and r == "kernels-community/activation version 1:Silu"
        for n, r in result["kernel_config"].items()), result["kernel_config"]
    hub = LocalHub(published.hub)
    origins = {}
    for repo_id in USED:
        hub_dir, commit, variant = where_from(result, repo_id)
        assert commit == hub.list_refs(repo_id).branches["v1"], (repo_id, commit)
        assert variant in hub.list_variants(repo_id, commit) and "cpu" in variant, variant
        origins[repo_id] = (hub_dir, commit, variant)
    return origins


def test_seed_examples_load_from_hf_endpoint_then_offline(
        published: Workspace, tmp_path: Path) -> None:
    if olah_cli() is None:
        pytest.skip("olah is not installed (pip install olah)")
    hub = LocalHub(published.hub)
    for repo_id in USED:
        if "v1" not in hub.list_refs(repo_id).branches:
            pytest.skip(f"{repo_id} is not published to this session's hub")
    home, model_dir = tmp_path / "home", tmp_path / "qwen3"
    home.mkdir()

    with served_hub(published.hub, tmp_path / "olah") as server:
        online = check(user_run(home, server.url, model_dir), published, home)
        endpoint = server.url
        assert {o[0] for o in online.values()} == {HfHub(endpoint).key}, online
        downloads = [r for r in server.requests if r.startswith("GET") and "/resolve/" in r]
    # The variants came over the network, from this server (cached under its key).
    for repo_id, (_, commit, variant) in online.items():
        assert any(f"/{repo_id}/resolve/{commit}/build/{variant}/" in r for r in downloads), (
            repo_id, downloads)

    # The server is gone; the same user, offline, gets the same kernels from the cache.
    offline = check(user_run(home, endpoint, model_dir, HF_HUB_OFFLINE="1"), published, home)
    assert offline == online
