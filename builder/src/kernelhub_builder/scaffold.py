"""``builder init NAME``: a new kernel repository that builds and tests on the first try.

The tree has the shape of the ecosystem's kernel repositories (one edition-6 build.toml at
the root, ``torch-ext/``, a C++ part, ``tests/``) and builds in place with ``builder build``
(no kernels.toml needed). Its one op runs on the CPU through torch's stable ABI, so one
build loads on every torch from 2.13 on and compiles in seconds; add CUDA/ROCm/Metal/XPU
parts to build.toml as the kernel grows.
"""

from __future__ import annotations

from pathlib import Path

from kernelhub.errors import KernelHubError
from kernelhub.user_files import user_path

from .manifest.build_toml import EDITION_NAME_RE

_FILES = {
    "build.toml": '''[general]
name = "{name}"
version = 1
edition = 6
license = "apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "{org}/{name}"

[torch]
src = ["torch-ext/torch_binding.cpp"]
stable-abi = "2.13"

[kernel.{pkg}_cpu]
language = "cpp-cpu"
depends = ["torch"]
src = ["{pkg}_cpu/{pkg}_cpu.cpp"]
''',
    "torch-ext/torch_binding.cpp": '''#include "registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {{
  ops.def("add_one(Tensor x) -> Tensor");
}}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
''',
    "{pkg}_cpu/{pkg}_cpu.cpp": '''// Only torch's stable ABI is used, so one build loads on every torch >= 2.13.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "registration.h"

using torch::stable::Tensor;

Tensor add_one(Tensor x) {{
  STD_TORCH_CHECK(x.is_contiguous(), "add_one: expected a contiguous float32 tensor");
  Tensor out = torch::stable::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* result = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {{
    result[i] = in[i] + 1.0f;
  }}
  return out;
}}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {{
  ops.impl("add_one", TORCH_BOX(&add_one));
}}
''',
    "torch-ext/{pkg}/__init__.py": '''"""{name}: a kernel built with kernelhub's builder."""

import torch

from ._ops import ops


def add_one(x: torch.Tensor) -> torch.Tensor:
    """x + 1, computed by the compiled kernel."""
    return ops.add_one(x.contiguous())


__all__ = ["add_one"]
''',
    "tests/test_{pkg}.py": '''import torch

import {pkg}


def test_add_one():
    x = torch.randn(1024)
    torch.testing.assert_close({pkg}.add_one(x), x + 1.0)
''',
    ".gitignore": "build/\nbuild-scratch/\n__pycache__/\n",
    "README.md": '''# {name}

Build the variants this machine can build, then run the tests against them:

```bash
builder build
builder test
```

Publish with `builder publish --hub PATH|URL`; load with
`kernelhub.get_kernel("{org}/{name}", version=1)`.
''',
}


def scaffold(name: str, target: Path, org: str = "my-org") -> list[Path]:
    """Write a new kernel repository ``name`` into the empty or missing dir ``target``."""
    if not EDITION_NAME_RE.fullmatch(name):
        raise KernelHubError(f"{name!r} is not a kernel name: use at least two lowercase "
                             "letters, digits or '-', starting with a letter (e.g. "
                             "'my-kernel'; the ecosystem's tools refuse '_')")
    target = user_path(target, "the new repository's directory")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise KernelHubError(f"{target} exists and is not an empty directory; choose a new "
                             "directory")
    values = {"name": name, "pkg": name.replace("-", "_"), "org": org}
    written: list[Path] = []
    for rel, text in _FILES.items():
        path = target / rel.format(**values)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.format(**values))
        except OSError as e:
            raise KernelHubError(f"cannot write {path}: {e.strerror or e}; "
                                 f"{len(written)} of {len(_FILES)} files were written") from None
        written.append(path)
    return written
