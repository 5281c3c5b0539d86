"""Which of our modules does a user's flow pass through, and does it double back?

Measures the house (issue 15): a flow that reads top to bottom passes through few
modules, one per step, and never calls back into a module it already left. Two flows:

    .venv/bin/python benchmarks/module_path.py build --project DIR --out DIR --variant V
        ``builder build activation --variant V`` from the CLI to the .so in build/
    .venv/bin/python benchmarks/module_path.py load --hub HUB
        ``kernelize`` of a model whose layer maps to ``LayerRepository(
        "kernels-community/activation", layer_name="SiluAndMul", version=1)``: get_kernel
        (resolve, fetch, verify, import, cold cache) up to the replaced forward
    .venv/bin/python benchmarks/module_path.py get --hub HUB [--warm]
        ``get_kernel("kernels-community/activation", version=1)`` to the module: cold
        cache (resolve, fetch, verify, import), or with ``--warm`` in a process whose
        cache already holds the variant (an untraced load in a child process fills it)

How it counts: a profile hook sees every Python function call made while the flow runs
(module bodies run by imports are not counted: they are set-up, not the flow). A call
is attributed to the module whose file holds the function, for files of kernelhub and
kernelhub_builder only (Python files: templates are not modules). ``modules`` is every module entered, in order of first entry.
A *return* is a call into a module that is already on the call stack below the caller's
module (A → B → A): the flow went back into a module it had left. Child processes
(ninja, the import check in the torch env) are not traced.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

_ROOTS = ("kernelhub", "kernelhub_builder")


def _module_of(filename: str) -> str | None:
    if not filename.endswith(".py"):
        return None  # e.g. jinja templates compiled to code objects
    parts = Path(filename).with_suffix("").parts
    for i, part in enumerate(parts):
        if part in _ROOTS and i > 0 and parts[i - 1] == "src":
            name = ".".join(parts[i:])
            return name.removesuffix(".__init__")
    return None


def trace(flow: Callable[[], Any]) -> dict[str, Any]:
    """Run ``flow`` under the profile hook; the modules it entered and its returns."""
    order: list[str] = []
    returns: list[str] = []
    stack: list[str | None] = []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = None
            if frame.f_code.co_name != "<module>":
                module = _module_of(frame.f_code.co_filename)
            if module is not None:
                if module not in order:
                    order.append(module)
                below = [m for m in stack if m is not None]
                caller = below[-1] if below else None
                if module != caller and module in below:
                    returns.append(f"{caller} -> {module}")
            stack.append(module)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(hook)
    try:
        flow()
    finally:
        sys.setprofile(None)
    return {"count": len(order), "modules": order, "returns": sorted(set(returns)),
            "return_count": len(returns)}


def _build(args: argparse.Namespace) -> Callable[[], Any]:
    from kernelhub_builder.cli import main

    argv = ["--project", str(args.project), "--out", str(args.out), "build", "activation",
            "--variant", args.variant]

    def flow() -> None:
        if main(argv) != 0:
            raise SystemExit("the build failed")

    return flow


def _load(args: argparse.Namespace) -> Callable[[], Any]:
    import torch
    from kernelhub import (
        LayerRepository,
        Mode,
        kernelize,
        use_kernel_forward_from_hub,
        use_kernel_mapping,
    )

    os.environ["KERNELHUB_HUB"] = str(args.hub)
    os.environ["KERNELHUB_CACHE"] = tempfile.mkdtemp(prefix="module-path-cache-")

    @use_kernel_forward_from_hub("SiluAndMul")
    class SiluAndMul(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = x.shape[-1] // 2
            return torch.nn.functional.silu(x[..., :d]) * x[..., d:]

    model = torch.nn.Sequential(SiluAndMul())
    repo = LayerRepository("kernels-community/activation", layer_name="SiluAndMul", version=1)

    def flow() -> None:
        with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
            kernelize(model, mode=Mode.INFERENCE, device="cpu")
        if "forward" not in model[0].__dict__:
            raise SystemExit("kernelize did not replace the forward")

    return flow


def _get(args: argparse.Namespace) -> Callable[[], Any]:
    import subprocess

    import torch  # noqa: F401 - imported by the user before loading, not part of the flow

    os.environ["KERNELHUB_HUB"] = str(args.hub)
    os.environ["KERNELHUB_CACHE"] = tempfile.mkdtemp(prefix="module-path-cache-")
    load = 'import kernelhub; kernelhub.get_kernel("kernels-community/activation", version=1)'
    if args.warm:
        subprocess.run([sys.executable, "-c", load], check=True)
    from kernelhub import get_kernel  # the import is set-up, not the flow

    def flow() -> None:
        if not hasattr(get_kernel("kernels-community/activation", version=1), "silu_and_mul"):
            raise SystemExit("the kernel has no silu_and_mul")

    return flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="flow", required=True)
    build = sub.add_parser("build")
    build.add_argument("--project", type=Path, required=True)
    build.add_argument("--out", type=Path, required=True)
    build.add_argument("--variant", default="torch213-cxx11-cpu-x86_64-linux")
    load = sub.add_parser("load")
    load.add_argument("--hub", type=Path, required=True)
    get = sub.add_parser("get")
    get.add_argument("--hub", type=Path, required=True)
    get.add_argument("--warm", action="store_true")
    args = parser.parse_args()
    flow = {"build": _build, "load": _load, "get": _get}[args.flow](args)
    print(json.dumps(trace(flow), indent=2))


if __name__ == "__main__":
    main()
