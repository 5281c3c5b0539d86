"""Rewrite a ``build.toml`` in the newest edition (6), keeping its comments and layout.

The ecosystem's 0.19 tools read edition 5 only by upgrading it in memory, with a warning
on every run, and its Nix builder requires edition 6. ``builder migrate`` persists the
upgrade. It edits the document in place (tomlkit), so comments, order and formatting
survive — the ecosystem's ``update-build`` writes the file anew and drops them.

What changes, from edition 5:

* ``general.edition = 6``;
* a part's ``backend = "cuda"`` becomes ``language = "cpp-cuda"``, where it stood, and a
  part without ``depends`` gets ``depends = []`` (edition 6 requires the key);
* the keys edition 6 renamed move to their new spelling — the model declares the old
  spellings (:func:`.keys.renames`): ``general.cuda-minver`` → ``[general.cuda] minver``,
  ``[torch-noarch] cuda-capabilities`` → ``cuda_capabilities``.

From the unversioned schema, also: ``version`` (default 1) and ``backends`` (inferred from
the parts) written out; a part without ``backend`` becomes ``cpp-cuda`` or ``cpp-metal``,
and a hipified one gets a ``cpp-rocm`` twin; ``universal = true`` becomes
``[torch-noarch]`` for every backend (one ``torch-<backend>`` variant each instead of
``torch-universal``, the one change in what builds, said in a note).

Refused, with what to do: a missing ``license`` (edition 6 requires one),
``general.release`` (kernelhub's older key: the release goes to kernels.toml's
``[releases]``), a part's ``cuda-maxver`` (kernelhub's own key, which edition 6 lacks).

The rewrite is read back before it replaces the file, and must describe the same kernel
(the same manifest but for the edition); a file is replaced atomically or not at all.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from kernelhub.system import BACKENDS
from kernelhub.tomlfile import tomllib
from tomlkit.container import Container
from tomlkit.items import InlineTable, Table

from ..errors import ManifestError
from .build_toml import KERNEL_FILE, load_kernel, read_kernel
from .keys import CURRENT_EDITION, Edition, renames
from .model import KernelManifest, Project
from .project import PROJECT_FILE


@dataclass(frozen=True)
class Migration:
    """What migrating one build.toml did (or, checking, would do)."""

    file: Path
    before: Edition
    """The edition the file was in (None: the unversioned schema)."""
    text: str
    """The file in edition 6 (its own text when it already was)."""
    notes: tuple[str, ...] = ()
    """Changes in what builds, said to the user once."""

    @property
    def changed(self) -> bool:
        return self.before != CURRENT_EDITION

    def describe(self) -> str:
        if not self.changed:
            return f"{self.file}: already edition {CURRENT_EDITION}"
        was = "the unversioned schema" if self.before is None else f"edition {self.before}"
        return f"{self.file}: {was} → edition {CURRENT_EDITION}"


def migrate_kernel(path: Path, project: Project | None = None, *, write: bool = True) -> Migration:
    """Migrate the build.toml at ``path`` (the file or its kernel directory).

    With ``write=False`` nothing on disk changes: the result says what would.
    """
    path = Path(path)
    file = path if path.name == KERNEL_FILE else path / KERNEL_FILE
    kernel = load_kernel(file, project)
    text = file.read_text(encoding="utf-8")
    if kernel.edition == CURRENT_EDITION:
        return Migration(file, kernel.edition, text)
    if "_" in kernel.name and project is not None and kernel.name in project.releases:
        dashed = kernel.name.replace("_", "-")
        raise ManifestError(project.root / PROJECT_FILE, f"releases.{kernel.name}",
                            f"edition 6 renames the kernel {dashed!r} (no '_' in its names); "
                            f"rename this [releases] entry to {dashed!r} too, then migrate")
    migration = Migration(file, kernel.edition, *rewrite(text, file, kernel))
    _check_same_kernel(kernel, migration, project)
    if write:
        _replace(file, migration.text)
    return migration


def rewrite(text: str, file: Path, kernel: KernelManifest) -> tuple[str, tuple[str, ...]]:
    """``text`` (the build.toml of ``kernel``) in edition 6, and the notes to say."""
    doc = tomlkit.parse(text)
    notes: list[str] = []
    _refuse_what_has_no_edition_6(doc, file)
    if kernel.edition is None:
        _write_out_defaults(doc, kernel, file)
    for old, new in renames(KernelManifest):
        _move(doc, old, new)
    _drop_universal(doc, kernel, notes)
    if "_" in kernel.name:
        dashed = kernel.name.replace("_", "-")
        _general(doc)["name"] = dashed
        notes.append(f"{kernel.name}: renamed {dashed!r}: an edition's general.name allows only "
                     "a-z, 0-9 and '-' (the ecosystem's build.toml and metadata.json readers "
                     "refuse '_'); the Python package name stays the same")
    _migrate_parts(doc)
    general = _general(doc)
    if "edition" in general:
        general["edition"] = CURRENT_EDITION
    else:
        _insert_after(general, "version", "edition", CURRENT_EDITION)
    return tomlkit.dumps(doc), tuple(notes)


def _general(doc: tomlkit.TOMLDocument) -> Table:
    general = doc["general"]
    assert isinstance(general, Table)  # load_kernel read the file
    return general


def _refuse_what_has_no_edition_6(doc: tomlkit.TOMLDocument, file: Path) -> None:
    if "release" in _general(doc):
        raise ManifestError(file, "general.release", "edition 6 has no release key; move it "
                                                     "to kernels.toml [releases] (kernel name = "
                                                     '"1.2.0"), then run builder migrate again')
    for name, part in _parts(doc):
        if "cuda-maxver" in part:
            raise ManifestError(file, f"kernel.{name}.cuda-maxver",
                                "edition 6 has no per-part CUDA maximum; use "
                                "[general.cuda] maxver or drop it, then run builder migrate again")
    twins = [f"{name}_rocm" for name, part in _parts(doc)
             if "backend" not in part and part.get("language") == "cuda-hipify"]
    for twin in twins:
        if twin in doc["kernel"]:
            raise ManifestError(file, f"kernel.{twin}", "the hipified part's cpp-rocm twin "
                                                        "would take this name; rename this "
                                                        "part, then run builder migrate again")


def _write_out_defaults(doc: tomlkit.TOMLDocument, kernel: KernelManifest, file: Path) -> None:
    """What the unversioned schema let a file leave out and edition 6 requires."""
    general = _general(doc)
    if "license" not in general:
        raise ManifestError(file, "general.license", 'missing; edition 6 requires a license '
                                                     '(e.g. license = "apache-2.0"): add it, '
                                                     "then run builder migrate again")
    if "version" not in general:
        _insert_after(general, "name", "version", kernel.version)
    if "backends" not in general and not kernel.universal:
        _insert_after(general, "license", "backends", list(kernel.backends))


def _drop_universal(doc: tomlkit.TOMLDocument, kernel: KernelManifest, notes: list[str]) -> None:
    """``universal`` has no edition-6 form: a universal kernel is [torch-noarch] for every
    backend; ``universal = false`` just goes."""
    general = _general(doc)
    if "universal" in general:
        general.remove("universal")
    torch = doc.get("torch")
    if isinstance(torch, Table) and "universal" in torch:
        torch.remove("universal")
    if not kernel.universal:
        return
    if "backends" in general:
        general["backends"] = list(BACKENDS)
    else:
        _insert_after(general, "license", "backends", list(BACKENDS))
    notes.append(f"{kernel.name}: universal = true has no edition-{CURRENT_EDITION} form; it is "
                 f"now [torch-noarch] for {', '.join(BACKENDS)}: one torch-<backend> variant "
                 "per backend instead of torch-universal")
    noarch = tomlkit.table()  # a universal kernel's src is empty: only pyext stays
    if isinstance(torch, Table):
        if "pyext" in torch:
            noarch.add("pyext", torch["pyext"])
        _rename(doc, "torch", "torch-noarch", noarch)
    else:
        doc.add("torch-noarch", noarch)


def _migrate_parts(doc: tomlkit.TOMLDocument) -> None:
    """A part's kind moves to ``language`` (``cpp-<backend>``), where ``backend`` stood."""
    kernel = doc.get("kernel")
    twins: dict[str, Table] = {}
    for name, part in list(_parts(doc)):
        backend = part.get("backend")
        if backend is not None:
            _rename(part, "backend", "language", f"cpp-{backend}")
        else:  # the oldest schema: cuda, cuda-hipify or metal, cuda when unsaid
            legacy = part.get("language")
            language = "cpp-metal" if legacy == "metal" else "cpp-cuda"
            if legacy is None:
                _insert_first(part, "language", language)
            else:
                part["language"] = language
            if legacy == "cuda-hipify":
                twins[f"{name}_rocm"] = _rocm_twin(part)
                if "rocm-archs" in part:
                    part.remove("rocm-archs")
        if "depends" not in part:
            _insert_after(part, "language", "depends", [])
    for name, twin in twins.items():  # right after the part it was hipified from
        assert isinstance(kernel, Table)
        _insert_after(kernel, name.removesuffix("_rocm"), name, twin)


def _rocm_twin(part: Table | InlineTable) -> Table:
    """The cpp-rocm part the oldest schema's ``language = "cuda-hipify"`` implied."""
    twin = tomlkit.table()
    twin.add("language", "cpp-rocm")
    twin.add("depends", part.get("depends", []))
    for key in ("src", "include", "rocm-archs"):
        if key in part:
            twin.add(key, part[key])
    twin.add(tomlkit.nl())
    return twin


def _parts(doc: tomlkit.TOMLDocument) -> Iterator[tuple[str, Table | InlineTable]]:
    kernel = doc.get("kernel")
    if isinstance(kernel, Table):
        for name, part in kernel.items():
            if isinstance(part, Table | InlineTable):
                yield name, part


def _move(doc: tomlkit.TOMLDocument, old: str, new: str) -> None:
    """Move the value at dotted path ``old`` to ``new`` (same table: renamed in place)."""
    old_table, _, old_key = old.rpartition(".")
    new_table, _, new_key = new.rpartition(".")
    source = _table_at(doc, old_table)
    if source is None or old_key not in source:
        return
    if old_table == new_table:
        _rename(source, old_key, new_key)
        return
    value = source[old_key]
    source.remove(old_key)
    node: Any = doc
    created = False
    for name in new_table.split("."):
        if name not in node:
            node.add(name, tomlkit.table())
            created = True
        node = node[name]
    node.add(new_key, value)
    if created:  # a blank line before whatever table follows, as around the others
        node.add(tomlkit.nl())


def _table_at(doc: tomlkit.TOMLDocument, path: str) -> Any:
    node: Any = doc
    for name in path.split("."):
        if not isinstance(node, Table | InlineTable | tomlkit.TOMLDocument) or name not in node:
            return None
        node = node[name]
    return node


# tomlkit's public API renames or inserts a key by removing and appending, which moves it
# to the end of its table (and, before a table's trailing comment, adds a blank line). Its
# container keeps a key's place with _replace and _insert_at, used through these three.


def _container(table: Table | InlineTable | tomlkit.TOMLDocument) -> Container:
    return table if isinstance(table, Container) else table.value


def _rename(table: Any, old: str, new: str, value: Any = None) -> None:
    """Rename ``old`` to ``new`` where it stands; its comment stays, and so does its value
    unless ``value`` replaces it."""
    container = _container(table)
    container._replace(old, new, tomlkit.item(container[old] if value is None else value))


def _insert_after(table: Any, anchor: str, key: str, value: Any) -> None:
    """Insert ``key = value`` after ``anchor`` (at the end when nothing follows it)."""
    container = _container(table)
    body = container.body
    at = next((i for i, (k, _) in enumerate(body) if k is not None and k.key == anchor), None)
    if at is None or at + 1 >= len(body):
        container.add(key, value)
    else:
        container._insert_at(at + 1, key, value)


def _insert_first(table: Any, key: str, value: Any) -> None:
    container = _container(table)
    if container.body:
        container._insert_at(0, key, value)
    else:
        container.add(key, value)


def _check_same_kernel(before: KernelManifest, migration: Migration, project: Project | None) -> None:
    """The rewrite must describe the same kernel: a difference is a bug here, and the file
    is left as it was."""
    with warnings.catch_warnings():  # the original's read already said them
        warnings.simplefilter("ignore")
        after = read_kernel(tomllib.loads(migration.text), migration.file, project)
    expected = dataclasses.replace(before, edition=CURRENT_EDITION, universal=False,
                                   name=before.name.replace("_", "-"))
    if after != expected:
        changed = [f.name for f in dataclasses.fields(KernelManifest)
                   if getattr(after, f.name) != getattr(expected, f.name)]
        raise ManifestError(migration.file, None,
                            f"migrating would change {', '.join(changed)}; the file is left "
                            "as it was (a kernelhub bug: please report it with this file)")


def _replace(file: Path, text: str) -> None:
    """Write ``text`` to ``file`` atomically: a temp file beside it, then a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, file.stat().st_mode & 0o777)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
