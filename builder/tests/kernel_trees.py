"""Kernel trees written for manifest tests: every file a build.toml names exists, so
only the TOML varies (nothing here is compiled)."""

from __future__ import annotations

import textwrap
from pathlib import Path

DEMO_FILES = ("torch-ext/torch_binding.cpp", "demo_cpu/demo.cpp", "demo_cuda/demo.cu")


def write_kernel(root: Path, toml: str, files: tuple[str, ...] = DEMO_FILES) -> Path:
    """The kernel ``demo`` at ``root`` with ``toml`` (dedented) as its build.toml."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "torch-ext" / "demo").mkdir(parents=True, exist_ok=True)
    (root / "torch-ext" / "demo" / "__init__.py").write_text("")
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// not compiled in these tests\n")
    (root / "build.toml").write_text(textwrap.dedent(toml))
    return root
