"""Layout rules on variant dirs written here: files, imports and op names."""

from __future__ import annotations

from pathlib import Path

from kernelhub.formats.metadata import BackendInfo, Metadata, compute_digests, write_metadata
from kernelhub.formats.variants import parse_variant
from kernelhub_builder.check.variant import static_checks
from kernelhub_builder.check.violation import RULE_IMPORT, RULE_MISSING_FILE, RULE_OP_NAME

VID = "_toy_cpu_0123456789"
OPS_PY = f'import torch\nops = torch.ops.{VID}\n\ndef add_op_namespace_prefix(n):\n' \
         f'    return f"{VID}::{{n}}"\n'
GOOD_INIT = """
import math
from typing import Any

import torch
from . import _ops
from ._ops import add_op_namespace_prefix, ops
from .layers import Toy

@torch.library.custom_op(add_op_namespace_prefix("double"), mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2

torch.library.register_fake(add_op_namespace_prefix("double"))(lambda x: x)
"""


def make_variant(root: Path, files: dict[str, str], *, depends: list[str] | None = None,
                 variant: str = "torch-cpu") -> Path:
    path = root / variant
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    write_metadata(path, Metadata(
        name="toy", id=VID, version=1, release="1.0.0", backend=BackendInfo("cpu"),
        digest_files=compute_digests(path), python_depends=depends or []))
    return path


def checks(path: Path) -> list[tuple[str, str, str]]:
    return [(v.rule, v.file, v.detail) for v in static_checks(path, parse_variant(path.name))]


def test_a_well_formed_package_passes(tmp_path: Path) -> None:
    path = make_variant(tmp_path, {"__init__.py": GOOD_INIT, "_ops.py": OPS_PY,
                                   "layers/__init__.py": "import torch\nclass Toy: ...\n"})
    assert checks(path) == []


def test_missing_files_are_named(tmp_path: Path) -> None:
    path = make_variant(tmp_path, {"__init__.py": "from ._ops import ops\n"})
    assert checks(path) == [(RULE_MISSING_FILE, "_ops.py", "_ops.py")]
    compiled = make_variant(tmp_path, {"__init__.py": "", "_ops.py": OPS_PY},
                            variant="torch213-cxx11-cpu-x86_64-linux")
    assert checks(compiled) == [(RULE_MISSING_FILE, f"{VID}.abi3.so", f"{VID}.abi3.so")]


def test_absolute_self_import_and_undeclared_packages_are_violations(tmp_path: Path) -> None:
    init = "import numpy\nfrom toy import layers\nimport einops\n\ndef f():\n    import scipy\n"
    path = make_variant(tmp_path, {"__init__.py": init, "_ops.py": OPS_PY},
                        depends=["einops>=0.7"])
    assert checks(path) == [
        (RULE_IMPORT, "__init__.py", "line 1: import numpy"),
        (RULE_IMPORT, "__init__.py", "line 2: import toy"),
    ]
    messages = [v.message for v in static_checks(path, parse_variant(path.name))]
    assert "relative import" in messages[1] and "python-depends" in messages[0]


def test_optional_imports_are_the_authors_business(tmp_path: Path) -> None:
    """As the ecosystem accepts them: imports inside functions, and in a try whose except
    catches ImportError; an unguarded import (even in a class or an if) is still checked."""
    init = """
try:
    import numpy
except ImportError:
    numpy = None
try:
    from scipy import special
except (ModuleNotFoundError, AttributeError):
    special = None

def lazy():
    import pandas
    return pandas

class Uses:
    import jax

if True:
    import sklearn
try:
    import polars
finally:
    pass
import triton
"""
    path = make_variant(tmp_path, {"__init__.py": init, "_ops.py": OPS_PY})
    assert checks(path) == [
        (RULE_IMPORT, "__init__.py", "line 16: import jax"),
        (RULE_IMPORT, "__init__.py", "line 19: import sklearn"),
        (RULE_IMPORT, "__init__.py", "line 21: import polars"),
    ]


def test_literal_op_namespaces_are_violations(tmp_path: Path) -> None:
    init = (
        "import torch\n"
        "torch.library.register_fake('toy::double')(lambda x: x)\n"
        "@torch.library.custom_op('toy::triple', mutates_args=())\n"
        "def triple(x: torch.Tensor) -> torch.Tensor:\n    return x * 3\n"
        "y = torch.ops.toy.double\n"
    )
    path = make_variant(tmp_path, {"__init__.py": init, "_ops.py": OPS_PY})
    found = static_checks(path, parse_variant(path.name))
    assert [(v.rule, v.detail) for v in found] == [
        (RULE_OP_NAME, "line 2: 'toy::double'"),
        (RULE_OP_NAME, "line 3: 'toy::triple'"),
        (RULE_OP_NAME, "line 6: torch.ops.toy"),
    ]
    assert "add_op_namespace_prefix('double')" in found[0].message
