"""The newest torch of the matrix (2.15) as its users meet it: every kernel of the
repository loads from the hub in a fresh process of that torch, each from the build made
for it — its own compiled build, or the stable-ABI build that promises to load there."""

from __future__ import annotations

import json

import tomllib
from e2e import REPO, TORCH_MINORS, Workspace, last_json, run_python, torch_python
from kernelhub.formats.variants import VariantKind, parse_variant

NEWEST = TORCH_MINORS[-1]
PROJECT = tomllib.loads((REPO / "kernels.toml").read_text())

LOAD_EACH = r"""
import json, sys, torch, kernelhub
from pathlib import Path
loaded = {}
for name, major in json.loads(sys.argv[1]).items():
    module = kernelhub.get_kernel(f"kernels-community/{name}", version=major)
    where = kernelhub.locate_kernel(f"kernels-community/{name}", version=major)
    loaded[name] = {"variant": Path(where).name, "module": module.__name__}
print(json.dumps({"torch": torch.__version__, "loaded": loaded}))
"""


def test_the_newest_torch_pin_is_named_where_machines_look_for_it() -> None:
    """A machine whose pip caps torch below the newest release lifts the cap once a
    project file asks for that release: the workspace pyproject names the newest pin."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    newest_pin = PROJECT["toolchain"]["torch"][NEWEST]
    assert pyproject["project"]["optional-dependencies"]["torch-newest"] == [newest_pin]


def test_every_kernel_loads_its_own_build_on_the_newest_torch(published: Workspace) -> None:
    from kernelhub_builder.manifest import load_kernels, load_project

    # Those with a CPU build: triton-activation's are torch-cuda and torch-xpu, tested on
    # the newest torch under Triton's interpreter by `builder test` (the spine tests).
    kernels = [k for k in load_kernels(load_project(REPO)) if "cpu" in k.backends]
    majors = {k.name: k.version for k in kernels}
    python = torch_python(NEWEST)
    code = f"import sys; sys.argv[1:] = [{json.dumps(json.dumps(majors))}]\n" + LOAD_EACH
    result = last_json(run_python(python, code, published.env(cache=f"cache-load-{NEWEST}")))
    assert result["torch"].startswith(NEWEST + ".")
    newest = tuple(int(p) for p in NEWEST.split("."))
    assert set(result["loaded"]) == set(majors)
    for kernel in kernels:
        variant = parse_variant(result["loaded"][kernel.name]["variant"])
        if kernel.universal or kernel.torch.noarch:
            assert not variant.compiled, (kernel.name, variant.name)
        elif kernel.torch.stable_abi_for("cpu") is not None:
            assert variant.kind is VariantKind.STABLE_ABI, (kernel.name, variant.name)
            assert variant.torch is not None and variant.torch <= newest
        else:  # an ATen kernel: the build compiled against this very torch
            assert (variant.kind, variant.torch) == (VariantKind.COMPILED, newest), (
                kernel.name, variant.name)
