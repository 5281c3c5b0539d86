"""Transformers never loses by installing kernelhub: with only ``HF_ENDPOINT`` set (a
server standing in for the Hugging Face Hub, holding ``kernels-community`` repositories),
the same model loads every repository through kernelhub that the ecosystem's own path
(``kernels`` 0.19.1, ``KERNELHUB_TRANSFORMERS=0``) loads, from that server; and a model
with nothing to load says so in at most one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant
from served import serving

LAYERS = {
    "kernels-community/activation": (
        "activation",
        "import torch\nimport torch.nn.functional as F\n\n"
        "class Silu(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return F.silu(x)\n"),
    "kernels-community/rmsnorm": (
        "rmsnorm",
        "import torch\n\n"
        "class RMSNorm(torch.nn.Module):\n"
        "    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        x = hidden_states.float()\n"
        "        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)\n"
        "        return self.weight * x.to(hidden_states.dtype)\n"),
}

MODEL = r"""
import json, logging, sys, torch
import transformers.utils.logging as tlog
from transformers import LlamaConfig, LlamaForCausalLM
tlog.disable_progress_bar()
config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=4, hidden_act="silu")
torch.manual_seed(0)
LlamaForCausalLM(config).save_pretrained(sys.argv[1])
if sys.argv[2] == "map":  # 5.25 maps no CPU kernels: a CPU user maps with the ecosystem's API
    from kernels import LayerRepository, Mode, register_kernel_mapping
    register_kernel_mapping({"SiLU": {"cpu": {Mode.INFERENCE: LayerRepository(
        repo_id="kernels-community/activation", layer_name="Silu", version=1)}}})
model = LlamaForCausalLM.from_pretrained(sys.argv[1], use_kernels=True)
model.eval()
with torch.no_grad():
    assert torch.isfinite(model(torch.tensor([[1, 2, 3]])).logits).all()
import kernels
loaded = list(kernels.get_loaded_kernels())
if "kernelhub" in sys.modules:
    from kernelhub import ecosystem
    loaded += ecosystem.get_loaded_kernels()
print("RESULT " + json.dumps(sorted({k.repo_info.repo_id for k in loaded if k.repo_info})))
"""


@pytest.fixture
def hf_server(hub: Path, tmp_path: Path) -> Iterator[str]:
    for repo_id, (name, layers) in LAYERS.items():
        staged = tmp_path / "staging" / repo_id / "torch-universal"
        make_variant(staged, name=name, init="from . import layers\n",
                     files={"layers.py": layers})
        LocalPublisher(hub).publish(repo_id, "v1", {"torch-universal": staged}, tag="v1.0.0",
                                    message="release")
    with serving(hub) as url:
        yield url


def _run(tmp_path: Path, endpoint: str, name: str, *args: str,
         **extra: str) -> subprocess.CompletedProcess[str]:
    """The model script as a new user would run it: only HF_ENDPOINT set, an empty home."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KERNELHUB_", "HF_", "LOCAL_KERNELS", "USE_HUB_KERNELS"))}
    env.update(HOME=str(tmp_path / f"home-{name}"), HF_HOME=str(tmp_path / f"hf-{name}"),
               HF_ENDPOINT=endpoint, NO_PROXY="127.0.0.1", PYTHONWARNINGS="default", **extra)
    (tmp_path / "script.py").write_text(MODEL)
    return subprocess.run([sys.executable, str(tmp_path / "script.py"),
                           str(tmp_path / f"model-{name}"), *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


def _repos(proc: subprocess.CompletedProcess[str]) -> set[str]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return set(json.loads(line.removeprefix("RESULT ")))


def test_the_same_model_loads_the_same_repositories_with_and_without_kernelhub(
        hf_server: str, tmp_path: Path) -> None:
    theirs = _repos(_run(tmp_path, hf_server, "ecosystem", "map", KERNELHUB_TRANSFORMERS="0"))
    assert theirs == {"kernels-community/activation"}
    ours = _repos(_run(tmp_path, hf_server, "kernelhub", "map"))
    assert theirs <= ours  # kernelhub's CPU table adds rmsnorm; it never loads less
    assert "kernels-community/rmsnorm" in ours


def test_a_model_with_nothing_to_load_says_it_in_one_line(tmp_path: Path) -> None:
    """No hub has any kernel (the server named by HF_ENDPOINT refuses connections): the
    model runs PyTorch and kernelhub says so once."""
    proc = _run(tmp_path, "http://127.0.0.1:9", "nothing", "plain")
    assert _repos(proc) == set()
    said = [line for line in proc.stderr.splitlines() if "kernel" in line.lower()]
    assert len(said) <= 1, proc.stderr[-3000:]
