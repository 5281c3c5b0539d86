"""The import check: load a built variant in its torch environment, as a user's loader
would, and see what it registers and exports.

It runs in a fresh subprocess of the variant's torch environment, with no GPU visible
(``CUDA_VISIBLE_DEVICES=""``): a variant must import on a machine whose GPU is busy,
absent or different, because the loader imports before anything runs on the device. The
child loads the variant with ``kernelhub.load_variant_dir`` (digests verified, unique id)
and reports every op name that appeared in torch's dispatcher during the import — an op
outside the variant's namespace would collide with another build loaded beside it — and
what the kernel exports (:func:`kernelhub.formats.symbols.symbols_of`), which the build writes to
``symbols.json``.

What edition 6 added is loaded the way kernelhub's loader loads it:

* a kernel with ``kernel-depends`` gets its dependencies while it loads: each is loaded
  first with ``kernelhub.get_kernel`` from the hub the environment names (trust as for
  any load), then handed to ``kernels.get_kernel_dep`` (:func:`kernelhub.deps.providing`);
  their ops are not the variant's, so the namespace check starts after them;
* a zip-layout variant is imported from its archive unpacked into a private copy
  (:func:`kernelhub.formats.zip_layout.extract_verified`: members that could leave the package or
  shadow a file are refused), never from the archive on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from kernelhub.deps import KERNEL_DEPENDS
from kernelhub.formats.metadata import METADATA_FILE, Metadata, compute_digests, write_metadata
from kernelhub.formats.zip_layout import BUILD_LAYOUT, archive_name, extract_verified
from kernelhub.value_types import replace

from .package import is_zip_layout
from .violation import RULE_IMPORT_CHECK, RULE_OP_NAMESPACE, Violation

IMPORT_TIMEOUT_S = 300

_PROBE = textwrap.dedent(
    """
    import json, sys
    import torch
    import kernelhub
    from kernelhub import load_variant_dir

    try:
        deps = {}
        for dep in json.loads(sys.argv[2]):
            deps[dep["repo-id"]] = kernelhub.get_kernel(
                dep["repo-id"], dep.get("version"), revision=dep.get("revision"))
    except BaseException as e:
        print(json.dumps({"dependency-error": f"{type(e).__name__}: {e}"}))
        sys.exit(0)
    before = set(torch._C._dispatch_get_all_op_names())
    try:
        if deps:
            from kernelhub.deps import providing
            with providing(deps):
                module = load_variant_dir(sys.argv[1])
        else:
            module = load_variant_dir(sys.argv[1])
    except BaseException as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(0)
    after = set(torch._C._dispatch_get_all_op_names())
    try:
        from kernelhub.formats.symbols import symbols_of
    except ImportError:  # a loader older than symbols.json
        symbols = None
    else:
        symbols = symbols_of(module, module.__name__).dumps()
    print(json.dumps({"ops": sorted(after - before), "torch": torch.__version__,
                      "symbols": symbols}))
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
    symbols: str | None = None
    """symbols.json as the import described the kernel (None: no import, or a loader
    without :mod:`kernelhub.formats.symbols`)."""


def check_import(python: Path, variant_dir: Path, metadata: Metadata) -> ImportResult:
    """Import ``variant_dir`` with ``python`` (a torch env) and check its ops' namespace."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    depends = json.dumps(metadata.extra.get(KERNEL_DEPENDS) or [])
    with tempfile.TemporaryDirectory(prefix="kernelhub-import-") as tmp:
        target = (unpacked_copy(variant_dir, metadata, Path(tmp) / variant_dir.name)
                  if is_zip_layout(metadata) else variant_dir)
        try:
            done = subprocess.run([str(python), "-c", _PROBE, str(target), depends], env=env,
                                  capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            return _failed(f"the import did not finish within {IMPORT_TIMEOUT_S} s")
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = (done.stdout + done.stderr).strip()[-2000:]
        return _failed(f"the import crashed the interpreter (exit {done.returncode}):\n{tail}")
    if "dependency-error" in report:  # the variant itself was never imported
        return ImportResult(None, [], [Violation(
            RULE_IMPORT_CHECK, METADATA_FILE, KERNEL_DEPENDS,
            f"the import check loads the variant's {KERNEL_DEPENDS} first, and one did not "
            f"load, so the variant was not imported: {report['dependency-error']}")])
    if "error" in report:
        return _failed(report["error"])
    ops = list(report["ops"])
    violations = [
        Violation(RULE_OP_NAMESPACE, "(import)", op,
                  f"importing the variant registered {op} outside its namespace "
                  f"{metadata.id}; define ops only in TORCH_LIBRARY_EXPAND("
                  "TORCH_EXTENSION_NAME, …) and name Python ops with add_op_namespace_prefix")
        for op in ops if op.split("::", 1)[0] != metadata.id
    ]
    return ImportResult(report.get("torch"), ops, violations, report.get("symbols"))


def unpacked_copy(variant_dir: Path, metadata: Metadata, dest: Path) -> Path:
    """A files-layout copy of a zip-layout variant at ``dest``: the files beside the
    archive, the archive's members unpacked among them, metadata.json's digest and layout
    rewritten for what the copy holds (its id, and so its namespace, unchanged)."""
    archive = archive_name(metadata.id)
    dest.mkdir(parents=True)
    outside = set()
    for path in sorted(variant_dir.iterdir()):
        if path.is_file() and path.name not in (archive, METADATA_FILE):
            shutil.copy2(path, dest / path.name)
            outside.add(path.name)
    extract_verified((variant_dir / archive).read_bytes(), dest, frozenset(outside),
                     f"{variant_dir.name}/{archive}")
    extra = {k: v for k, v in metadata.extra.items() if k != BUILD_LAYOUT}
    write_metadata(dest, replace(metadata, digest_files=compute_digests(dest), extra=extra))
    return dest


def _failed(why: str) -> ImportResult:
    return ImportResult(None, [], [Violation(
        RULE_IMPORT_CHECK, "__init__.py", "import",
        f"the variant does not import without a GPU: {why}")])
