"""Property-based fuzzing of the manifests a kernel author writes: build.toml, kernels.toml.

Whatever the files say, reading them raises only kernelhub's own errors (the builder's
ManifestError is one), each with a one-line message. Documents are generated two ways:
structured (the schema's own tables and keys, with values of every TOML type, so the
parser gets past its first check) and by cutting and splicing the repository's real
manifests (so near-valid text with one thing broken is covered too).

Bounded and derandomized like the loader's fuzz module (``KERNELHUB_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kernelhub.errors import KernelHubError
from kernelhub_builder.manifest import KernelManifest, Project, load_kernel, load_project
from kernelhub_builder.manifest.keys import EDITIONS, table_keys
from kernelhub_builder.manifest.migrate import migrate_kernel
from kernelhub_builder.manifest.model import PART_KINDS, KernelPart

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = int(os.environ.get("KERNELHUB_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=5),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

REAL_BUILD_TOMLS = sorted((REPO_ROOT / "kernels-src").glob("*/build.toml"))
REAL_KERNELS_TOML = (REPO_ROOT / "kernels.toml").read_text()


def toml_value(value: Any) -> str:
    """TOML for a generated value (strings as JSON strings, which TOML reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(tables: dict[str, dict[str, Any]]) -> str:
    lines = []
    for name, table in tables.items():
        lines.append("[" + ".".join(json.dumps(part) for part in name.split("\0")) + "]")
        lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


plausible = st.sampled_from([
    "activation", "act-x", "Bad Name", "", "1", "1.0.0", "2.13", "2.99", "v1", "cpu", "cuda",
    "rocm", "metal", "xpu", "torch", "8.0", "9.0a", "12.0+PTX", "gfx942", "MIT", "Apache-2.0",
    "org/name", "not a repo", "torch-ext/torch_binding.cpp", "../escape.cpp", "/abs.cpp",
    "torch-ext", "-O3", "x86_64-linux", "aarch64-darwin", "numpy>=1", "main", "\n",
    "cpp-cpu", "cpp-cuda", "rust-cutile", "cuda-hipify", "zip", "files", "Cargo.toml"])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
scalars = st.one_of(plausible, text, st.booleans(), st.integers(-2**64, 2**64),
                    st.floats(allow_nan=True))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(plausible, text), inner, max_size=3)), max_leaves=8)


def table(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.one_of(st.sampled_from(keys), text), values, max_size=6)


def every_key(model: type, table: str, kinds: frozenset[str | None] = frozenset({None})) -> list[str]:
    """The keys any edition allows in ``table``: the schema the model declares."""
    return sorted({k for e in EDITIONS for kind in kinds for k in table_keys(model, table, e, kind)})


GENERAL = every_key(KernelManifest, "general")
PART = every_key(KernelPart, "", frozenset(PART_KINDS))
depends_entry = st.fixed_dictionaries(
    {}, optional={k: values for k in ("repo-id", "version", "revision", "repo")})

build_tomls = st.fixed_dictionaries(
    {"general": table(GENERAL)},
    optional={"torch": table(every_key(KernelManifest, "torch")),
              "torch-noarch": table(every_key(KernelManifest, "torch-noarch")),
              "general\0hub": table(every_key(KernelManifest, "general.hub")),
              "general\0cuda": st.dictionaries(
                  st.sampled_from(every_key(KernelManifest, "general.cuda")),
                  st.one_of(values, st.lists(depends_entry, max_size=3)), max_size=4),
              "kernel\0part_a": table(PART), "kernel\0part_b": table(PART),
              "x-unknown": table(["a"])},
)


def _splice(texts: list[str]) -> st.SearchStrategy[str]:
    """A real manifest with one slice cut out and another real slice pasted in."""
    return st.builds(
        lambda source, cut, length, donor, at, size: (
            source[:cut] + donor[at:at + size] + source[cut + length:]),
        st.sampled_from(texts), st.integers(0, 2000), st.integers(0, 40),
        st.sampled_from(texts), st.integers(0, 2000), st.integers(0, 40))


def _kernel_dir(root: Path, document: str) -> Path:
    kernel = root / "kernel"
    (kernel / "torch-ext" / "activation").mkdir(parents=True)
    (kernel / "torch-ext" / "activation" / "__init__.py").write_text("")
    (kernel / "torch-ext" / "torch_binding.cpp").write_text("")
    (kernel / "build.toml").write_text(document)
    return kernel


def _only_kernelhub_errors(call: Any) -> Any:
    try:
        result = call()
    except KernelHubError as e:
        assert str(e) and "\n" not in str(e).strip(), f"not one line: {e}"
        event(f"refused: {type(e).__name__}")
        return None
    event("read")  # --hypothesis-show-statistics shows how many documents got through
    return result


real_kernel_edits = st.builds(
    lambda path, cut, length, donor, at, size: (path.parent, _edit(
        path.read_text(), cut, length, donor.read_text()[at:at + size])),
    st.sampled_from(REAL_BUILD_TOMLS), st.integers(0, 2000), st.integers(0, 40),
    st.sampled_from(REAL_BUILD_TOMLS), st.integers(0, 2000), st.integers(0, 40))


def _edit(text: str, cut: int, length: int, pasted: str) -> str:
    return text[:cut] + pasted + text[cut + length:]


def _beside(source: Path, root: Path, document: str) -> Path:
    """A real kernel's tree (linked, not copied) with an edited build.toml."""
    kernel = root / source.name
    kernel.mkdir()
    for entry in source.iterdir():
        if entry.name != "build.toml":
            (kernel / entry.name).symlink_to(entry)
    (kernel / "build.toml").write_text(document)
    return kernel


@FUZZ
@given(document=build_tomls.map(toml_document))
def test_build_toml(document: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _only_kernelhub_errors(lambda: load_kernel(_kernel_dir(Path(tmp), document)))


@FUZZ
@given(edit=real_kernel_edits)
def test_migrate_keeps_the_kernel_or_refuses_in_one_line(edit: tuple[Path, str]) -> None:
    """An edited real build.toml that reads migrates to a file that reads as the same
    kernel (migrate checks that itself and calls a difference a bug), or is refused with
    one line."""
    source, document = edit
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _beside(source, Path(tmp), document)
        if _only_kernelhub_errors(lambda: load_kernel(kernel)) is None:
            return
        try:
            migrate_kernel(kernel)
        except KernelHubError as e:
            assert "\n" not in str(e).strip() and "kernelhub bug" not in str(e), str(e)
            event("migrate refused")
            return
        event("migrated")
        load_kernel(kernel)


@FUZZ
@given(edit=real_kernel_edits)
def test_edited_real_build_toml(edit: tuple[Path, str]) -> None:
    source, document = edit
    with tempfile.TemporaryDirectory() as tmp:
        _only_kernelhub_errors(lambda: load_kernel(_beside(source, Path(tmp), document)))


MATRIX = every_key(Project, "matrix")
kernels_tomls = st.builds(
    lambda top, hub, matrix, toolchain: toml_document(
        {"": top, "hub": hub, "matrix": matrix, "toolchain\0torch": toolchain}
    ).replace('[""]\n', "", 1),
    table(every_key(Project, "")), table(every_key(Project, "hub")), table(MATRIX),
    st.dictionaries(st.one_of(plausible, text), st.one_of(plausible, values), max_size=3),
)


@FUZZ
@given(document=st.one_of(kernels_tomls, _splice([REAL_KERNELS_TOML])))
def test_kernels_toml(document: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _kernel_dir(root / "kernels-src", 'general = 5\n')  # kernels-src/kernel/build.toml
        (root / "kernels.toml").write_text(document)
        _only_kernelhub_errors(lambda: load_project(root))
