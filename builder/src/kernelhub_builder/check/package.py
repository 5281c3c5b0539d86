"""Static checks of a variant's package: files, imports and op names.

A variant is imported under its unique id (``_<name>_<backend>_<hash>``), never under
the kernel's own name, and several builds may be loaded in one process. That only works
when the package

- has every file a loader needs (``__init__.py``, ``_ops.py``, ``metadata.json`` and,
  for a compiled variant, ``<id>.abi3.so``; in the zip layout the package, with its
  ``__init__.py``, is ``<id>.zip``);
- imports itself relatively and otherwise only the standard library, torch and its
  declared ``python-depends`` (anything else is missing on the user's machine);
- names its torch ops through ``add_op_namespace_prefix`` — a literal ``"ns::op"`` would
  collide between two loaded builds — and its library registers ops only in its own
  namespace (checked here from the ``TORCH_LIBRARY*`` initialisers in ``.symtab``, and
  at run time by :func:`kernelhub_builder.check.imports.check_import`).
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from kernelhub.deps import KERNEL_DEPENDS
from kernelhub.formats.metadata import METADATA_FILE, Metadata
from kernelhub.formats.variants import Variant
from kernelhub.formats.zip_layout import BUILD_LAYOUT, archive_name, build_layout
from packaging.requirements import InvalidRequirement, Requirement

from .abi import ElfInfo
from .violation import (
    RULE_IMPORT,
    RULE_MISSING_FILE,
    RULE_OP_NAME,
    RULE_OP_NAMESPACE,
    Violation,
)

# torch.library entry points whose first argument is a qualified op name ("ns::op").
_OP_NAME_CALLS = frozenset({
    "custom_op", "triton_op", "register_fake", "impl_abstract", "register_kernel",
    "register_autograd", "register_vmap", "register_torch_dispatch", "impl", "define",
    "opcheck",
})
# Import names of distributions whose pip name differs from the module they install.
_IMPORT_NAMES = {"nvidia-cutlass-dsl": ("cutlass",), "pyyaml": ("yaml",),
                 "pytorch-triton": ("triton",), "pytorch-triton-rocm": ("triton",),
                 "pytorch-triton-xpu": ("triton",)}
_ALWAYS_ALLOWED = frozenset({"torch", "__future__", "triton"})
"""``triton`` comes with torch (pytorch-triton on GPU builds), so it needs no
python-depends entry — and the ecosystem's loader refuses one (its allowed list has no
``triton``), so :data:`TORCH_PROVIDED` entries are left out of metadata.json."""
TORCH_PROVIDED = frozenset({"triton", "pytorch-triton", "pytorch-triton-rocm",
                            "pytorch-triton-xpu"})
_REGISTRATION = re.compile(
    r"^(?:STABLE_)?TORCH_LIBRARY(?P<kind>_IMPL|_FRAGMENT)?_(?:static_)?init_(?P<rest>.+)$")


def is_zip_layout(metadata: Metadata) -> bool:
    """metadata.json's ``build-layout`` (edition 6): the package is ``<id>.zip``."""
    return build_layout(metadata.extra.get(BUILD_LAYOUT), METADATA_FILE) == "zip"


def required_files(variant: Variant, variant_id: str, zipped: bool = False) -> list[str]:
    files = [archive_name(variant_id) if zipped else "__init__.py", "_ops.py", METADATA_FILE]
    if variant.compiled:
        files.append(f"{variant_id}.abi3.so")
    return files


def check_files(variant_dir: Path, variant: Variant, metadata: Metadata) -> list[Violation]:
    zipped = is_zip_layout(metadata)
    missing = [
        Violation(RULE_MISSING_FILE, name, name,
                  f"a built {variant.kind.value} variant must contain {name}; rebuild it "
                  "with builder build")
        for name in required_files(variant, metadata.id, zipped)
        if not (variant_dir / name).is_file()
    ]
    if zipped and not missing and "__init__.py" not in _zip_names(variant_dir, metadata.id):
        missing.append(Violation(RULE_MISSING_FILE, archive_name(metadata.id), "__init__.py",
                                 "the zip layout's archive must hold the package's "
                                 "__init__.py at its top; rebuild it with builder build"))
    return missing


def _zip_names(variant_dir: Path, variant_id: str) -> list[str]:
    try:
        with zipfile.ZipFile(variant_dir / archive_name(variant_id)) as archive:
            return archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return []


def python_sources(variant_dir: Path, metadata: Metadata) -> Iterator[tuple[str, str]]:
    """(name for messages, text) of every .py file of the variant: the files and, in the
    zip layout, the archive's entries (named ``<id>.zip/<path>``)."""
    for path in sorted(variant_dir.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path.relative_to(variant_dir).as_posix(), path.read_text()
    if is_zip_layout(metadata):
        archive = archive_name(metadata.id)
        try:
            with zipfile.ZipFile(variant_dir / archive) as package:
                for name in sorted(package.namelist()):
                    if name.endswith(".py"):
                        yield f"{archive}/{name}", package.read(name).decode()
        except (OSError, zipfile.BadZipFile, UnicodeDecodeError):
            return  # check_files or the import check says what is wrong with it


def allowed_imports(python_depends: list[str], kernel_depends: bool = False) -> frozenset[str]:
    """Top-level modules a variant may import absolutely: with ``kernel_depends``, also
    ``kernels``, whose ``get_kernel_dep`` hands a kernel the ones it declared."""
    names = set(sys.stdlib_module_names) | _ALWAYS_ALLOWED
    if kernel_depends:
        names.add("kernels")
    for dep in python_depends:
        try:
            dist = Requirement(dep).name.lower()
        except InvalidRequirement:
            continue
        names.update(_IMPORT_NAMES.get(dist, (dist.replace("-", "_"),)))
    return frozenset(names)


def check_python(variant_dir: Path, metadata: Metadata) -> list[Violation]:
    """Imports and op names of every .py file of the variant."""
    allowed = allowed_imports(metadata.python_depends,
                              kernel_depends=bool(metadata.extra.get(KERNEL_DEPENDS)))
    found: list[Violation] = []
    for rel, text in python_sources(variant_dir, metadata):
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as e:
            found.append(Violation(RULE_IMPORT, rel, f"line {e.lineno}",
                                   f"is not valid Python ({e.msg})"))
            continue
        found += _check_imports(tree, rel, metadata.name, allowed)
        if rel != "_ops.py":  # generated: the one place the namespace is spelled out
            found += _check_op_names(tree, rel, metadata.name)
    return found


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


_TRY_NODES: tuple[type[ast.Try], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))
"""``try`` and, from Python 3.11, ``try``/``except*``."""


def _guards_import(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` clause catches a failed import."""
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _IMPORT_ERRORS for t in types)


def _eager_imports(tree: ast.AST) -> list[ast.AST]:
    """Imports that run unconditionally when the module is imported.

    Imports inside a function (run only when it is called) and inside a ``try`` whose
    ``except`` catches ImportError (optional dependencies) are the author's business:
    the ecosystem accepts them, and so do we.
    """
    found: list[ast.AST] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            elif isinstance(node, _TRY_NODES):
                if not any(_guards_import(h) for h in node.handlers):
                    visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
                for handler in node.handlers:
                    visit(handler.body)
            else:
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, None) or [])
                for case in getattr(node, "cases", None) or []:
                    visit(case.body)

    visit(getattr(tree, "body", []))
    return found


def _check_imports(tree: ast.AST, rel: str, kernel: str, allowed: frozenset[str]
                   ) -> list[Violation]:
    found = []
    for node in _in_source_order_of(_eager_imports(tree)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top == kernel:
                why = (f"imports itself absolutely ({module}); the variant is loaded under "
                       "its unique id, so use a relative import (from . import …)")
            elif top not in allowed:
                why = (f"imports {module}, which is neither the standard library, torch, "
                       "nor in python-depends; add it to [general] python-depends in "
                       "build.toml or vendor it into the package")
            else:
                continue
            found.append(Violation(RULE_IMPORT, rel, f"line {node.lineno}: import {module}",
                                   why))
    return found


def _in_source_order_of(nodes: list[ast.AST]) -> list[ast.AST]:
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def _in_source_order(tree: ast.AST) -> list[ast.AST]:
    """ast.walk is breadth-first; report in the order a reader meets the lines."""
    return sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0),
                                                 getattr(n, "col_offset", 0)))


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _check_op_names(tree: ast.AST, rel: str, kernel: str) -> list[Violation]:
    found = []
    for node in _in_source_order(tree):
        if isinstance(node, ast.Call) and _call_name(node.func) in _OP_NAME_CALLS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                    and "::" in first.value:
                found.append(Violation(
                    RULE_OP_NAME, rel, f"line {node.lineno}: {first.value!r}",
                    f"{_call_name(node.func)} names the op with a fixed namespace; write "
                    f"add_op_namespace_prefix({first.value.split('::', 1)[1]!r}) (from "
                    "._ops) so each build registers in its own namespace"))
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and node.value.attr == "ops" and isinstance(node.value.value, ast.Name)
              and node.value.value.id == "torch" and node.attr in (kernel, f"_{kernel}")):
            found.append(Violation(
                RULE_OP_NAME, rel, f"line {node.lineno}: torch.ops.{node.attr}",
                f"torch.ops.{node.attr} is not this build's namespace; use ops "
                "(from ._ops import ops)"))
    return found


def registered_namespaces(info: ElfInfo) -> list[tuple[str, str]]:
    """(registration kind, namespace-and-rest) of each TORCH_LIBRARY* initialiser found."""
    found = []
    for name in info.local_names:
        identifier = _demangle_local(name)
        match = _REGISTRATION.match(identifier)
        if match:
            found.append((match["kind"] or "", match["rest"]))
    return found


def _demangle_local(name: str) -> str:
    """``_ZL45TORCH_LIBRARY_init_ns…E`` → the 45-character identifier; else ``name``.

    Static initialisers are internal (``_ZL``); the stable ABI's IMPL function is not.
    """
    match = re.match(r"^_ZL?(\d+)", name)
    if not match:
        return name.split(".", 1)[0]
    return name[match.end():match.end() + int(match[1])]


def check_library_namespaces(info: ElfInfo, file: str, variant_id: str) -> list[Violation]:
    """TORCH_LIBRARY blocks in the .so that register outside the variant's namespace."""
    found = []
    seen = set()
    for kind, rest in registered_namespaces(info):
        own = rest == variant_id if not kind else rest.startswith(variant_id + "_")
        if own or (kind, rest) in seen:
            continue
        seen.add((kind, rest))
        macro = f"TORCH_LIBRARY{kind}"
        found.append(Violation(
            RULE_OP_NAMESPACE, file, f"{macro} {rest}",
            f"registers ops outside this build's namespace {variant_id}; use "
            f"{macro}_EXPAND(TORCH_EXTENSION_NAME, …) from registration.h"))
    return found
