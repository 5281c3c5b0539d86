"""Transformers' kernel documentation, run as written: every code example of its
"Loading kernels" guide (examples/NN_*.py, the code of the guide that SEEDS.md
summarises) runs in a fresh Python process with kernelhub installed and no line added —
under each Transformers configuration of :mod:`.ranges`: the installed release (5.25,
with the ecosystem's ``kernels`` 0.19.1), 5.24, and the installed one with
``KERNELHUB_TRANSFORMERS=0``.

Only what cannot exist here is mapped, and each mapping is in :data:`SUBSTITUTIONS`:

* the model id ``"Qwen/Qwen3-0.6B"`` is not changed at all: the process runs in a
  directory holding a tiny Llama saved under ``Qwen/Qwen3-0.6B/`` with ``save_pretrained``
  (``from_pretrained`` takes a local directory before the Hub);
* repositories we do not publish become ours (``liger-kernels:LigerRMSNorm`` →
  ``rmsnorm:RMSNorm``; flash-attn2 releases 2.x → our 4.x); ``random-repo/random-attention``
  and ``owner/fused-rmsnorm-mlp`` exist on this test hub as copies of our flash-attn2 and
  rmsnorm repositories, so the untrusted-organisation paths run for real;
* examples that use names defined earlier in the guide (``input_ids``, ``labels``,
  ``model``) get them from a prelude that imports nothing of kernelhub.

Served by kernelhub, an epilogue (not part of the example) reports what happened as
JSON, and the test checks that kernelhub's kernels are the ones in use. Switched off, a
prelude that imports nothing of kernelhub reports at exit (after an error too) that
kernelhub was never imported; what Transformers' own path did is recorded, not judged.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e import RELEASES, REPO, Workspace, run
from transformers_docs.docs_report import WATCH
from transformers_docs.ranges import environment

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

EXAMPLES = Path(__file__).parent / "examples"
MODEL_ID = "Qwen/Qwen3-0.6B"
TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=64)

SUBSTITUTIONS = {
    "kernels-community/liger-kernels:LigerRMSNorm": "kernels-community/rmsnorm:RMSNorm",
    "flash-attn2@v2.1.0": f"flash-attn2@v{RELEASES['flash-attn2']}",
    "flash-attn2@>=2.0,<3.0": "flash-attn2@>=4.0,<5.0",
    "/path/to/liger-kernels:LigerRMSNorm": "{local_rmsnorm}:RMSNorm",
}
"""Documented text → what this test hub has (applied only where the text occurs)."""

COPIES = {
    "random-repo/random-attention": "kernels-community/flash-attn2",
    "owner/fused-rmsnorm-mlp": "kernels-community/rmsnorm",
}
"""Repositories the examples name that this test hub holds as copies of ours."""

PRELUDES = {
    "06_mode_awareness": "import torch\n"
                         "input_ids = torch.randint(0, 128, (1, 8))\n"
                         "labels = input_ids.clone()\n",
    "07_explicit_mode": "from transformers import AutoModelForCausalLM\n"
                        f"model = AutoModelForCausalLM.from_pretrained({MODEL_ID!r})\n",
}

EPILOGUE = (
    "\nimport sys\nsys.path.insert(0, {tests!r})\n"
    "from transformers_docs.docs_report import report\nreport(globals())\n"
)

FUSION_EPILOGUE = """
import torch
from transformers import AutoModelForCausalLM
model.save_pretrained("saved-fused")
plain = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
again = AutoModelForCausalLM.from_pretrained("saved-fused")
assert sorted(again.state_dict()) == sorted(plain.state_dict()), "state_dict keys changed"
ids = torch.randint(0, 128, (1, 8))
with torch.no_grad():
    torch.testing.assert_close(again(ids).logits, plain(ids).logits)
    torch.testing.assert_close(model(ids).logits, plain(ids).logits, rtol=1e-3, atol=1e-4)
"""


@pytest.fixture(scope="module")
def docs_hub(published: Workspace) -> Workspace:
    """This session's hub, plus the copies the examples name."""
    for copy, original in COPIES.items():
        target = published.hub / "models" / copy
        if not target.exists():
            run(["git", "clone", "-q", "--mirror", str(published.hub / "models" / original),
                 str(target)])
    return published


@pytest.fixture(scope="module")
def docs_cwd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where ``from_pretrained("Qwen/Qwen3-0.6B")`` finds a tiny saved Llama."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    cwd = tmp_path_factory.mktemp("docs")
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(LlamaConfig(**TINY)).save_pretrained(cwd / MODEL_ID)
    return cwd


def program(name: str, ws: Workspace, served: bool = True) -> tuple[str, str]:
    """(the example as this test runs it, the whole program around it)."""
    text = (EXAMPLES / f"{name}.py").read_text()
    for documented, ours in SUBSTITUTIONS.items():
        text = text.replace(documented, ours.replace("{local_rmsnorm}", str(ws.out / "rmsnorm")))
    prelude = PRELUDES.get(name, "")
    assert "kernelhub" not in prelude + text
    if not served:
        return text, WATCH + prelude + text
    epilogue = EPILOGUE.format(tests=str(REPO / "tests"))
    if name == "12_module_fusion":
        epilogue = FUSION_EPILOGUE + epilogue
    return text, prelude + text + epilogue


def run_example(name: str, ws: Workspace, cwd: Path, config: str = "installed",
                **env: str) -> subprocess.CompletedProcess[str]:
    import sys

    _, code = program(name, ws, served=config != "off")
    environ = ws.env(cache="docs-cache", **env)
    for key in ("USE_HUB_KERNELS", "KERNELHUB_TRANSFORMERS", "PYTHONPATH"):
        environ.pop(key, None)
    environ.update(environment(config))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=environ, text=True,
                          capture_output=True)


def report_of(proc: subprocess.CompletedProcess[str], name: str) -> dict[str, Any]:
    if proc.returncode != 0:
        pytest.fail(f"example {name} failed (exit {proc.returncode}):\n--- program\n{proc.args[2]}"
                    f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}")
    lines = [x for x in proc.stdout.splitlines() if x.startswith("REPORT ")]
    return json.loads(lines[-1].removeprefix("REPORT "))


def _rmsnorm_everywhere(r: dict) -> bool:
    norms = [n for n in r["kernels"] if n.endswith("norm")]
    return len(norms) == 2 * 2 + 1 and all("rmsnorm" in r["kernels"][n] for n in norms)


def _attention(repo: str) -> Callable[[dict], bool]:
    """The model's attention is ``repo``'s kernel, imported by kernelhub."""
    return lambda r: (r["attn"] == repo and r["attn_module"] is not None
                      and r["attn_module"].partition(".")[0] in r["loaded"])


def _rotary_only(r: dict) -> bool:
    return (not r["kernels"] and len(r["funcs"]) == 2
            and all("rotary" in v or "apply_rotary_pos_emb" in v for v in r["funcs"].values()))


CHECKS: dict[str, Callable[[dict], bool]] = {
    "01_use_kernels": _rmsnorm_everywhere,
    "02_attention_kernel": _attention("kernels-community/flash-attn2"),
    "03_allow_all_kernels": _attention("random-repo/random-attention"),
    "04_version_pins": _attention("kernels-community/flash-attn2@>=4.0,<5.0"),
    "05_flash_attention_fallback": _attention("kernels-community/flash-attn2"),
    "06_mode_awareness": lambda r: (r["output_shape"][0] == 1 and 8 < r["output_shape"][1] <= 58
                                    and r["loss"] > 0 and r["mode"] == "Mode.TRAINING"
                                    and bool(r["kernels"])),
    "07_explicit_mode": lambda r: (r["mode"] == "Mode.TRAINING|TORCH_COMPILE"
                                   and _rmsnorm_everywhere(r)),
    "08_kernel_config": lambda r: (_rmsnorm_everywhere(r)
                                   and _attention("kernels-community/flash-attn2")(r)),
    "09_per_device": lambda r: set(r["entries"]["RMSNorm"]) == {"cuda", "rocm", "xpu"},
    "10_kernel_metadata": lambda r: (r["entries"]["RMSNorm"]["cpu"]
                                     == "kernels-community/rmsnorm:RMSNorm version=3"),
    "11_inherit_mapping": _rotary_only,
    "12_module_fusion": lambda r: all(
        "owner/fused-rmsnorm-mlp" in r["kernels"][f"model.layers.{i}.post_attention_layernorm"]
        for i in range(2)),
    "13_local_kernels": lambda r: _rmsnorm_everywhere(r) and all(
        "/rmsnorm" in repo for repo in r["kernels"].values()),
}
"""What each example must have done. 09 and 10 only build a KernelConfig (nothing loads,
as in the guide); kernelhub's parser must read it as the guide means it."""

ENV = {"12_module_fusion": {"KERNELHUB_TRUSTED_ORGS": "owner"}}
"""The fusion example names a placeholder org; trusting it is configuration, not code."""


def outcome(proc: subprocess.CompletedProcess[str]) -> str:
    """One line for the results table: exit 0, or the error the example ended with."""
    if proc.returncode == 0:
        return "exit 0"
    last = [x for x in proc.stderr.strip().splitlines() if x.strip()]
    return f"exit {proc.returncode}: {last[-1][:160] if last else ''}"


class Runs:
    """Every example of a configuration, run the first time one of them is asked for, two
    processes at a time (each is mostly one core importing torch and Transformers, and
    CI has two): 39 fresh processes take half the wall time they would one by one."""

    def __init__(self, ws: Workspace, cwd: Path) -> None:
        self.ws, self.cwd = ws, cwd
        self.done: dict[tuple[str, str], subprocess.CompletedProcess[str]] = {}

    def get(self, name: str, config: str) -> subprocess.CompletedProcess[str]:
        if (name, config) not in self.done:
            import os
            from concurrent.futures import ThreadPoolExecutor

            names = sorted(CHECKS)
            with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
                procs = pool.map(lambda n: run_example(n, self.ws, self.cwd, config,
                                                       **ENV.get(n, {})), names)
                self.done.update(((n, config), p) for n, p in zip(names, procs, strict=True))
        return self.done[(name, config)]


@pytest.fixture(scope="module")
def runs(docs_hub: Workspace, docs_cwd: Path) -> Runs:
    return Runs(docs_hub, docs_cwd)


def test_every_example_is_checked():
    assert sorted(CHECKS) == sorted(p.stem for p in EXAMPLES.glob("*.py"))
    assert len(CHECKS) == 13


@pytest.mark.slow
@pytest.mark.parametrize("config", ["installed", "5.24"])
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_documented_example_runs_as_written_on_kernelhub(name: str, config: str, runs: Runs):
    proc = runs.get(name, config)
    result = report_of(proc, name)
    print(f"RANGE {name} {config}: {outcome(proc)}; kernelhub kernels {result['loaded']}")
    assert CHECKS[name](result), result
    if name not in ("09_per_device", "10_kernel_metadata"):
        assert result["loaded"], f"{name} ran without a kernel loaded by kernelhub: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_documented_example_with_kernelhub_switched_off_is_left_alone(name: str, runs: Runs):
    proc = runs.get(name, "off")
    print(f"RANGE {name} off: {outcome(proc)}")
    marks = [x for x in proc.stdout.splitlines() if x.startswith("KERNELHUB ")]
    assert marks == ["KERNELHUB False False"], (proc.stdout, proc.stderr[-3000:])
