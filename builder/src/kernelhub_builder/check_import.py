"""Import a variant the way a user's process will, and see which ops it registers.

Runs in a fresh subprocess of the variant's torch environment, with no GPU visible
(``CUDA_VISIBLE_DEVICES=""``): a variant must import on a machine whose GPU is busy,
absent or different, because the loader imports before anything runs on the device. The
child loads the variant with ``kernelhub.load_variant_dir`` (digests verified, unique id)
and reports every op name that appeared in torch's dispatcher during the import; an op
outside the variant's namespace would collide with another build loaded beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from .check_violation import RULE_IMPORT_CHECK, RULE_OP_NAMESPACE, Violation

IMPORT_TIMEOUT_S = 300

_PROBE = textwrap.dedent(
    """
    import json, sys
    import torch
    from kernelhub import load_variant_dir

    before = set(torch._C._dispatch_get_all_op_names())
    try:
        load_variant_dir(sys.argv[1])
    except BaseException as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(0)
    after = set(torch._C._dispatch_get_all_op_names())
    print(json.dumps({"ops": sorted(after - before), "torch": torch.__version__}))
    """
)


@dataclass(frozen=True)
class ImportResult:
    """What the import check saw."""

    torch: str | None
    """The torch version the variant was imported under."""
    ops: list[str]
    """Op names registered by the import (``namespace::name``)."""
    violations: list[Violation]


def check_import(python: Path, variant_dir: Path, variant_id: str) -> ImportResult:
    """Import ``variant_dir`` with ``python`` (a torch env) and check its ops' namespace."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run([str(python), "-c", _PROBE, str(variant_dir)], env=env,
                              capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        return _failed(f"the import did not finish within {IMPORT_TIMEOUT_S} s")
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = (done.stdout + done.stderr).strip()[-2000:]
        return _failed(f"the import crashed the interpreter (exit {done.returncode}):\n{tail}")
    if "error" in report:
        return _failed(report["error"])
    ops = list(report["ops"])
    violations = [
        Violation(RULE_OP_NAMESPACE, "(import)", op,
                  f"importing the variant registered {op} outside its namespace "
                  f"{variant_id}; define ops only in TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME"
                  ", …) and name Python ops with add_op_namespace_prefix")
        for op in ops if op.split("::", 1)[0] != variant_id
    ]
    return ImportResult(report.get("torch"), ops, violations)


def _failed(why: str) -> ImportResult:
    return ImportResult(None, [], [Violation(
        RULE_IMPORT_CHECK, "__init__.py", "import",
        f"the variant does not import without a GPU: {why}")])
