"""Hub fixtures shared by the loader's hub tests and the builder's publisher tests
(imported by loader/tests/hub/conftest.py and builder/tests/ship/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kernelhub_builder.ship import LocalPublisher

StageFn = Callable[..., Path]


@pytest.fixture
def stage(tmp_path: Path) -> StageFn:
    """Make a staged variant dir like the builder's: package files, a tool, metadata.json.

    ``stage("torch-cpu", tag="a")`` writes content that depends on ``tag``, so two calls
    with different tags give two different builds of the same variant.
    """
    counter = iter(range(1_000_000))

    def make(variant: str, tag: str = "1") -> Path:
        root = tmp_path / "staged" / f"{variant}-{tag}-{next(counter)}"
        (root / "layers").mkdir(parents=True)
        (root / "__init__.py").write_text(f"VARIANT = {variant!r}\nBUILD = {tag!r}\n")
        (root / "layers" / "__init__.py").write_text("class Layer:\n    pass\n")
        tool = root / "run.sh"
        tool.write_text("#!/bin/sh\necho ok\n")
        tool.chmod(0o755)
        (root / "metadata.json").write_text(json.dumps({"name": "demo", "build": tag}))
        # Bytecode caches must never be published.
        (root / "__pycache__").mkdir()
        (root / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0junk")
        return root

    return make


@pytest.fixture
def hub(tmp_path: Path) -> LocalPublisher:
    return LocalPublisher(tmp_path / "hub")
