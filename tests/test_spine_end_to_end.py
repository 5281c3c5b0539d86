"""The kernel author's and the model user's story, end to end on CPU:
manifest → builder build → builder publish → get_kernel(..., version=1) in a fresh
process → the same numbers as eager PyTorch, for every torch version of the matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib
from e2e import REPO, TORCH_MINORS, Workspace, builder, last_json, run, run_python, torch_python

KERNELS = tomllib.loads((REPO / "kernels.toml").read_text())["kernels"]

LOAD_AND_COMPARE = r"""
import json, sys, torch, torch.nn.functional as F
import kernelhub

act = kernelhub.get_kernel("kernels-community/activation", version=1)
torch.manual_seed(0)
refs = {
    "silu_and_mul": lambda x, d: F.silu(x[..., :d]) * x[..., d:],
    "gelu_and_mul": lambda x, d: F.gelu(x[..., :d]) * x[..., d:],
    "gelu_tanh_and_mul": lambda x, d: F.gelu(x[..., :d], approximate="tanh") * x[..., d:],
}
errors = {}
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(37, 2 * 1000, dtype=dtype)
    for name, ref in refs.items():
        out = torch.full((37, 1000), float("nan"), dtype=dtype)
        getattr(act, name)(out, x)
        expected = ref(x.double(), 1000)
        errors[f"{name}/{dtype}"] = ((out.double() - expected).abs().max() / expected.abs().max()).item()
cached = kernelhub.locate_kernel("kernels-community/activation", version=1)
print(json.dumps({"module": act.__name__, "file": act.__file__, "cached": str(cached),
                  "torch": torch.__version__, "errors": errors}))
"""


@pytest.mark.parametrize("minor", TORCH_MINORS)
def test_built_published_kernel_loads_in_fresh_process_and_matches_eager(
    published: Workspace, minor: str
) -> None:
    python = torch_python(minor)
    proc = run_python(python, LOAD_AND_COMPARE, published.env(cache=f"cache-{minor}"))
    result = last_json(proc)
    # builder publish writes each build under both generations of names; kernelhub loads
    # the current one (the legacy one is there for kernels 0.17/0.18).
    name = f"torch-{minor}-cpu-cpython-3.9-abi3-x86_64-linux"
    assert result["torch"].startswith(minor)
    assert Path(result["cached"]).name == name, result["cached"]
    # What ran is the verified private copy of that variant (kernelhub.load.verified_import).
    assert f"/{name}-" in result["file"], result["file"]
    assert str(published.root / f"cache-{minor}") in result["cached"], "loaded from the cache"
    for key, err in result["errors"].items():
        limit = 1e-5 if "float32" in key else 1e-2
        assert err <= limit, f"{key}: relative error {err}"


def test_variants_list_every_matrix_entry_with_a_reason() -> None:
    proc = run([str(REPO / ".venv/bin/builder"), "--project", str(REPO), "list-variants",
                "activation", "--json"])
    rows = {r["variant"]: r for r in json.loads(proc.stdout)["activation"]}
    for minor in TORCH_MINORS:
        assert rows[f"torch{minor.replace('.', '')}-cxx11-cpu-x86_64-linux"]["buildable"] is True
    darwin = rows["torch213-cpu-aarch64-darwin"]
    assert darwin["buildable"] is False and "macOS" in darwin["reason"]


def test_rebuild_of_unchanged_sources_does_no_compile_work(built: Workspace) -> None:
    proc = builder(built, "build", "activation")
    lines = [line for line in proc.stdout.splitlines() if "activation" in line]
    assert lines and all("up to date" in line for line in lines), proc.stdout


def test_republishing_identical_content_makes_no_commit(published: Workspace) -> None:
    before = run(["git", "-C", str(published.hub / "models/kernels-community/activation"),
                  "rev-parse", "refs/heads/v1"]).stdout
    proc = builder(published, "publish", "activation", "--hub", str(published.hub))
    after = run(["git", "-C", str(published.hub / "models/kernels-community/activation"),
                 "rev-parse", "refs/heads/v1"]).stdout
    assert before == after
    assert "no change" in proc.stdout.lower(), proc.stdout


def test_kernel_variants_cli_explains_every_variant(published: Workspace) -> None:
    proc = run([str(REPO / ".venv/bin/kernelhub"), "variants", "kernels-community/activation",
                "--hub", str(published.hub)], env=published.env())
    assert "version 1 (v1 -> " in proc.stdout and f"hub:     {published.hub}" in proc.stdout
    for minor in TORCH_MINORS:
        assert f"torch{minor.replace('.', '')}-cxx11-cpu-x86_64-linux" in proc.stdout


def test_builder_test_runs_the_kernel_tests_against_each_variant(built: Workspace) -> None:
    proc = builder(built, "test", "activation")
    for minor in TORCH_MINORS:
        variant = f"torch{minor.replace('.', '')}-cxx11-cpu-x86_64-linux"
        assert f"PASS  activation  {variant}  (torch {minor})" in proc.stdout, proc.stdout


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "activation"])
def test_every_kernel_passes_its_own_tests_on_every_runnable_variant(
    built: Workspace, kernel: str
) -> None:
    """The kernel library's correctness suites (float64 references, odd shapes, gradcheck,
    opcheck) run against each built variant in its torch environment."""
    proc = builder(built, "test", kernel)
    verdicts = [line for line in proc.stdout.splitlines()
                if line.startswith(("PASS", "FAIL", "SKIP"))]
    assert any(line.startswith("PASS") for line in verdicts), proc.stdout
    assert not any(line.startswith("FAIL") for line in verdicts), proc.stdout
    # … the newest torch of the matrix included (its own build, or a stable-ABI one)
    newest = f"(torch {TORCH_MINORS[-1]})"
    assert any(line.startswith("PASS") and line.endswith(newest) for line in verdicts), proc.stdout


def test_model_demo_runs_hub_kernels_in_a_model(published: Workspace) -> None:
    proc = run([str(REPO / ".venv/bin/python"), str(REPO / "examples/model_demo.py")],
               env=published.env(cache="cache-demo"))
    assert "max |diff|" in proc.stdout, proc.stdout
