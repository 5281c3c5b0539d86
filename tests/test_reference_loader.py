"""The ecosystem's reference loader (Hugging Face ``kernels``) reads what we build and
publish: our variant names, our metadata.json, our build/ layout and our hub — served to
it by olah, a real Hub-API server, through huggingface_hub — and our kernels compute the
same numbers under it as eager PyTorch.

The reference loader runs in a fresh process with its own install dir on PYTHONPATH; it
never enters our venv (Transformers behaves differently when ``kernels`` imports).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from e2e import REPO, Workspace, last_json, run
from reference_loader import (
    KernelRepoProxy,
    ReferenceLoaderUnavailable,
    install_reference_loader,
    reference_env,
)

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
"""What the reference loader must pick in our venv (torch 2.13, CPU, x86_64 Linux)."""

COMPARE = r"""
import torch, torch.nn.functional as F
torch.manual_seed(0)
errors = {}
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(19, 2 * 384, dtype=dtype)
    out = torch.full((19, 384), float("nan"), dtype=dtype)
    act.silu_and_mul(out, x)
    expected = F.silu(x[..., :384].double()) * x[..., 384:].double()
    errors[str(dtype)] = ((out.double() - expected).abs().max() / expected.abs().max()).item()
"""

REFERENCE_GET = r"""
import json, sys, kernels
spec = json.loads(sys.argv[1])
act = kernels.get_kernel("kernels-community/activation", trust_remote_code=True, **spec)
""" + COMPARE + r"""
meta = [k.metadata for k in kernels.get_loaded_kernels()][0]
print(json.dumps({"file": act.__file__, "module": act.__name__, "errors": errors,
                  "metadata": {"name": str(meta.name), "id": meta.id, "version": meta.version,
                               "license": meta.license,
                               "backend": str(meta.backend.backend_type)}}))
"""

REFERENCE_LOCAL = r"""
import json, sys, kernels
from pathlib import Path
act = kernels.get_local_kernel(Path(sys.argv[1]))
""" + COMPARE + r"""
print(json.dumps({"file": act.__file__, "module": act.__name__, "errors": errors}))
"""

READ_EVERY_VARIANT = r"""
import json, sys, kernels
from pathlib import Path
from kernels.variants import parse_variant
names, dirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {"unparsed": [], "renamed": [], "unreadable": [], "read": {}}
for name in names:
    try:
        again = parse_variant(name).variant_str
    except ValueError as e:
        report["unparsed"].append(f"{name}: {e}")
        continue
    if again != name:
        report["renamed"].append(f"{name} -> {again}")
for d in dirs:
    try:
        m = kernels.Metadata.read_from_file(Path(d) / "metadata.json")
    except ValueError as e:
        report["unreadable"].append(f"{d}: {e}")
        continue
    report["read"][d] = {"name": str(m.name), "id": m.id, "version": m.version,
                         "license": m.license, "python-depends": list(m.python_depends),
                         "backend": str(m.backend.backend_type).lower()}
print(json.dumps(report))
"""


@pytest.fixture(scope="session")
def reference_loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``kernels`` installed once per session into a directory of its own."""
    try:
        return install_reference_loader(tmp_path_factory.mktemp("reference-kernels"))
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e))


def python(code: str, env: dict[str, str], *args: str) -> dict:
    return last_json(run([sys.executable, "-c", code, *args], env=env))


def assert_matches_eager(result: dict) -> None:
    for dtype, err in result["errors"].items():
        limit = 1e-5 if "float32" in dtype else 1e-2
        assert err <= limit, f"silu_and_mul {dtype}: relative error {err}"


def test_reference_get_kernel_loads_our_published_variant_through_olah(
    published: Workspace, published_served: KernelRepoProxy, reference_loader: Path,
    tmp_path: Path
) -> None:
    env = reference_env(dict(os.environ), reference_loader, published_served.url,
                        tmp_path / "hf-cache")
    ours = json.loads(
        (published.out / "activation" / VARIANT / "metadata.json").read_text())

    cold = python(REFERENCE_GET, env, json.dumps({"version": 1}))
    assert f"/build/{VARIANT}/__init__.py" in cold["file"], cold["file"]
    assert cold["file"].startswith(str(tmp_path / "hf-cache")), "downloaded, not found elsewhere"
    assert cold["module"] == ours["id"], "imported under our unique id"
    assert cold["metadata"] == {"name": "activation", "id": ours["id"], "version": ours["version"],
                                "license": ours["license"], "backend": "cpu"}
    assert_matches_eager(cold)
    fetched = [r for r in published_served.requests if "/resolve/" in r and r.startswith("GET")]
    assert fetched and all(f"/build/{VARIANT}/" in r for r in fetched), \
        f"only the chosen variant is downloaded: {fetched}"

    # A second process finds the files in its cache and downloads nothing again (a
    # branch revision costs it HEAD requests to check the branch, no file bodies);
    # a branch name works as a revision as well as the version number does.
    before = published_served.count()
    warm = python(REFERENCE_GET, env, json.dumps({"revision": "v1"}))
    assert warm["file"] == cold["file"]
    assert_matches_eager(warm)
    downloads = [r for r in published_served.since(before)
                 if r.startswith("GET") and "/resolve/" in r]
    assert downloads == [], published_served.since(before)


def test_reference_get_local_kernel_reads_our_build_dir(
    built: Workspace, reference_loader: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(reference_loader), "HF_HUB_OFFLINE": "1"}
    result = python(REFERENCE_LOCAL, env, str(built.out / "activation"))
    assert result["file"] == str(built.out / "activation" / VARIANT / "__init__.py")
    assert_matches_eager(result)


def test_reference_loader_parses_every_variant_name_and_reads_every_metadata(
    built: Workspace, reference_loader: Path
) -> None:
    listing = run([str(REPO / ".venv/bin/builder"), "--project", str(REPO), "list-variants",
                   "--json"])
    names = sorted({row["variant"] for rows in json.loads(listing.stdout).values()
                    for row in rows})
    dirs = sorted(str(p.parent) for p in built.out.glob("*/*/metadata.json"))
    assert dirs, f"no built variants under {built.out}"
    env = {**os.environ, "PYTHONPATH": str(reference_loader)}
    report = python(READ_EVERY_VARIANT, env, json.dumps(names), json.dumps(dirs))

    assert report["unparsed"] == [] and report["renamed"] == [], report
    assert report["unreadable"] == [], report
    for d, seen in report["read"].items():
        ours = json.loads((Path(d) / "metadata.json").read_text())
        assert seen == {"name": ours["name"], "id": ours["id"], "version": ours["version"],
                        "license": ours["license"], "python-depends": ours["python-depends"],
                        "backend": ours["backend"]["type"]}, d


REFERENCE_TRITON = r"""
import json, sys
from pathlib import Path
import torch, kernels
act = kernels.get_local_kernel(Path(sys.argv[1]), backend="cuda")
x = torch.randn(8, 256)
out = torch.empty(8, 128)
act.silu_and_mul(out, x)
ref = torch.nn.functional.silu(x[:, :128]) * x[:, 128:]
print(json.dumps({"file": act.__file__, "kernels": kernels.__file__,
                  "error": ((out - ref).abs().max() / ref.abs().max()).item()}))
"""


def test_reference_loader_loads_our_triton_noarch_variant(
    built: Workspace, reference_loader: Path
) -> None:
    """The pure-Python Triton build (torch-cuda) loads in the reference loader too: its
    metadata no longer lists `triton` in python-depends, which that loader refuses. Run in
    the torch env that has Triton, on the CPU through Triton's interpreter."""
    from e2e import torch_python

    build = built.out / "triton-activation"
    if not (build / "torch-cuda" / "metadata.json").is_file():
        pytest.skip("triton-activation torch-cuda was not built on this host")
    python_bin = torch_python("2.14")
    if run([str(python_bin), "-c", "import triton"], check=False).returncode != 0:
        pytest.skip("the torch 2.14 env has no Triton")
    env = {**os.environ, "PYTHONPATH": str(reference_loader), "HF_HUB_OFFLINE": "1",
           "TRITON_INTERPRET": "1"}
    result = last_json(run([str(python_bin), "-c", REFERENCE_TRITON, str(build)], env=env))
    assert result["kernels"].startswith(str(reference_loader)), "the reference loader itself"
    assert result["file"] == str(build / "torch-cuda" / "__init__.py")
    assert result["error"] < 1e-5
