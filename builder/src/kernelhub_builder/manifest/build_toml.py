"""Parse a kernel's ``build.toml`` into a :class:`~.model.KernelManifest`.

The schema is the kernel ecosystem's, in either of its current editions:

* **6** — parts name their kind with ``language`` (``cpp-cpu``, ``cpp-cuda``,
  ``cpp-metal``, ``cpp-rocm``, ``cpp-xpu``; the ``rust-*`` kinds build tvm-ffi
  extensions, which kernelhub does not build); ``general.build-layout`` (``files`` or
  ``zip``); ``[torch-noarch]`` spells ``cuda_capabilities`` and ``rocm_archs`` with an
  underscore; ``[mlx-noarch]`` exists (refused: MLX, not torch).
* **5** — parts name their backend (``backend = "cuda"``); the ecosystem's 0.19 tools
  still read it and upgrade it in memory, with a warning (``builder migrate`` rewrites a
  tree to 6).
* **unversioned** — the schema before ``general.edition``: no ``general.backends``
  (backends inferred from the parts), ``universal = true`` (one pure-Python build for
  every backend), parts without ``backend`` (CUDA, or hipified for ROCm too),
  ``general.cuda-minver``. Existing trees build unchanged.

Which keys each table allows in each edition is derived from the model (:mod:`.keys`).
``[torch] stable-abi`` may be ``true`` (the lowest torch of the matrix), ``"2.13"`` (that
minimum for every backend) or a table ``{cuda = "2.13", cpu = "2.13"}``. The release
comes from kernels.toml's ``[releases]`` (``general.release`` of older trees of ours is
still read before edition 6).
"""

from __future__ import annotations

import difflib
import re
import warnings
from pathlib import Path
from typing import Any

from kernelhub.deps import DependencyError, KernelDependency, parse_kernel_depends
from kernelhub.errors import VersionSpecError
from kernelhub.system import BACKENDS, MLX_REASON, UNBUILDABLE_BACKENDS
from kernelhub.versions import parse_release

from ..errors import ManifestError
from .keys import CURRENT_EDITION, EDITIONS, Edition, table_keys
from .model import (
    BUILD_LAYOUTS,
    CPP_KINDS,
    DEFAULT_PYEXT,
    OLDEST_KIND,
    RUST_KINDS,
    KernelManifest,
    KernelPart,
    Matrix,
    Project,
    TorchExt,
)
from .tables import (
    Table,
    existing_dirs,
    existing_files,
    major_minor,
    read_toml,
    version_key,
)

KERNEL_FILE = "build.toml"

_KERNEL_NAME_RE = re.compile(r"[a-z](?:[a-z0-9_-]*[a-z0-9])?")
EDITION_NAME_RE = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")  # the ecosystem's KernelName
_PART_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # "_name" too, as the ecosystem allows
_REPO_ID_RE = re.compile(r"[^/\s]+/[^/\s]+")
_LEGACY_LANGUAGES = {"cuda": "cuda", "cuda-hipify": "cuda", "metal": "metal"}
_BACKEND_TABLES = ("cuda", "xpu", "neuron", "tpu")
"""The per-backend tables of [general] (python-depends, kernel-depends)."""


def load_kernel(kernel_dir: Path, project: Project | None = None) -> KernelManifest:
    """Read a kernel's build.toml (given the file or its directory).

    ``project`` supplies the matrix that ``stable-abi = true`` refers to (its lowest
    torch); without one the default matrix is used.
    """
    kernel_dir = Path(kernel_dir)
    file = kernel_dir if kernel_dir.name == KERNEL_FILE else kernel_dir / KERNEL_FILE
    return read_kernel(read_toml(file), file, project)


def read_kernel(data: dict[str, Any], file: Path, project: Project | None = None) -> KernelManifest:
    """The manifest of ``data``, the parsed TOML of ``file`` (which names the kernel's
    directory and every error; :mod:`.migrate` checks a rewrite before writing it)."""
    root = file.parent.resolve()
    top = Table(data, file)
    edition = read_edition(top)
    top.check_tables(KernelManifest, edition)
    _refuse_other_frameworks(top)
    general = top.get_table("general")
    assert general is not None  # read_edition requires it
    name, version, release = _identity(general, edition, project.releases if project else {})
    parts = _load_parts(top, root, edition)
    torch, backends, skipped, universal = _framework(
        top, general, parts, root, project.matrix if project else Matrix()
    )
    hub = general.get_table("hub") or Table({}, file, "general.hub")
    repo_id = hub.get_str("repo-id")
    if repo_id is not None and not _REPO_ID_RE.fullmatch(repo_id):
        raise hub.error("repo-id", f"{repo_id!r} is not of the form 'org/name'")
    cuda_minver, cuda_maxver = _cuda_bounds(general)
    general_depends, backend_depends = _kernel_depends(general, repo_id)
    manifest = KernelManifest(
        root=root,
        name=name,
        version=version,
        release=release,
        backends=backends,
        torch=torch,
        parts=parts,
        license=_license(general, edition),
        repo_id=repo_id,
        python_depends=general.get_strs("python-depends"),
        universal=universal,
        edition=edition,
        hub_branch=hub.get_str("branch"),
        upstream=_upstream(general),
        source=general.get_str("source"),
        cuda_minver=cuda_minver,
        cuda_maxver=cuda_maxver,
        backend_python_depends=_backend_python_depends(general),
        build_layout=_build_layout(general),
        kernel_depends=general_depends,
        backend_kernel_depends=backend_depends,
        skipped_backends=skipped,
    )
    if not manifest.package_dir.is_dir():
        raise ManifestError(
            file,
            None,
            f"missing the kernel's Python package {manifest.package_dir} "
            "(torch-ext/<name with '-' as '_'>/ with an __init__.py)",
        )
    return manifest


def read_edition(top: Table) -> Edition:
    """general.edition: 5, 6, or None for the unversioned schema before it."""
    general = top.get_table("general")
    if general is None:
        raise top.error("general", "missing; every build.toml starts with [general] name = …")
    edition = general.get_int("edition")
    if edition not in EDITIONS:
        raise general.error(
            "edition",
            f"unsupported edition {edition}; kernelhub reads editions 5 and "
            f"{CURRENT_EDITION} (and the unversioned schema before them)",
        )
    return edition


def _refuse_other_frameworks(top: Table) -> None:
    if "tvm-ffi" in top:
        raise top.error("tvm-ffi", "a tvm-ffi kernel; kernelhub builds torch extensions only: "
                                   "use [torch] (compiled) or [torch-noarch] (pure Python)")
    if "mlx-noarch" in top:
        raise top.error("mlx-noarch", f"cannot build: {MLX_REASON}")


def _identity(general: Table, edition: Edition,
              releases: dict[str, str]) -> tuple[str, int, str]:
    """general.name, general.version (default 1) and the release: kernels.toml's
    ``[releases]`` entry, else ``general.release`` (older trees of ours; the ecosystem's
    schema refuses the key), else ``<version>.0.0``.

    An edition's name is the ecosystem's (no '_': its build.toml reader and its 0.19
    loader's metadata.json reader refuse one); our unversioned schema still allows '_'."""
    name = general.get_str("name", required=True)
    assert name is not None
    ecosystem_name = EDITION_NAME_RE.fullmatch(name)
    if edition is not None and _KERNEL_NAME_RE.fullmatch(name) and not ecosystem_name:
        raise general.error(
            "name",
            f"{name!r} is not a kernel name in edition {edition}: use at least two lowercase "
            f"letters, digits and '-' (the ecosystem's tools refuse '_'), e.g. "
            f"{name.replace('_', '-')!r}; the package stays torch-ext/{name.replace('-', '_')}",
        )
    if not _KERNEL_NAME_RE.fullmatch(name):
        raise general.error(
            "name",
            f"{name!r} is not a kernel name: use lowercase letters, digits, '-' or '_', "
            "starting with a letter (e.g. 'activation', 'flash-attn2')",
        )
    version = general.get_int("version")
    version = 1 if version is None else version
    release = releases.get(name) or general.get_str("release") or f"{version}.0.0"
    try:
        release_major = parse_release(release).major
    except VersionSpecError as e:
        raise general.error("release", str(e)) from None
    if release_major != version:
        raise general.error(
            "release",
            f"{release!r} has major {release_major} but general.version is "
            f"{version}; a release lives on branch v<version>, so make the majors agree",
        )
    return name, version, release


def _framework(
    top: Table, general: Table, parts: tuple[KernelPart, ...], root: Path, matrix: Matrix
) -> tuple[TorchExt, tuple[str, ...], tuple[str, ...], bool]:
    """[torch] or [torch-noarch] (or the legacy universal flag) and the backends.

    Returns (torch extension, buildable backends, skipped backends, universal).
    """
    noarch_table = top.get_table("torch-noarch")
    torch_table = top.get_table("torch")
    if noarch_table is not None and torch_table is not None:
        raise top.error(
            "torch-noarch",
            "use either [torch] (compiled) or [torch-noarch] (pure Python), not both",
        )
    universal = general.get_bool("universal") or bool(
        torch_table and torch_table.get_bool("universal")
    )
    if torch_table is None and noarch_table is None and parts:
        raise top.error(
            "torch",
            "missing; compiled [kernel.*] parts need a [torch] table "
            'listing the binding sources (src = ["torch-ext/torch_binding.cpp"])',
        )
    noarch = noarch_table is not None or torch_table is None or universal
    backends, skipped = _load_backends(general, parts, universal, noarch)
    if noarch:
        return _load_noarch(noarch_table, top, parts), backends, skipped, universal
    assert torch_table is not None
    # A listed backend without a [kernel.*] part of its own is accepted, as the ecosystem
    # accepts it: its variants are built from the [torch] binding sources alone.
    return _load_torch(torch_table, root, matrix), backends, skipped, universal


def _load_backends(
    general: Table, parts: tuple[KernelPart, ...], universal: bool, noarch: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """general.backends (legacy trees: inferred from the parts) minus unbuildable ones."""
    if "backends" not in general:
        if universal:
            return BACKENDS, ()
        if noarch:
            raise general.error(
                "backends",
                "missing; list the backends this kernel supports, "
                f'e.g. backends = ["cuda"] (allowed: {", ".join(BACKENDS)})',
            )
        inferred = {p.backend for p in parts}
        return tuple(b for b in BACKENDS if b in inferred), ()
    listed = general.get_strs("backends")
    if len(set(listed)) != len(listed):
        raise general.error("backends", f"has duplicates: {list(listed)}")
    for backend in listed:
        if backend not in BACKENDS and backend not in UNBUILDABLE_BACKENDS:
            raise general.error("backends", _unknown_backend(backend))
    skipped = tuple(b for b in listed if b in UNBUILDABLE_BACKENDS)
    backends = tuple(b for b in listed if b in BACKENDS)
    if skipped:  # a valid tree still (a neuron-only one is): it gets no variants here
        others = "building the other backends only" if backends else "nothing to build here"
        warnings.warn(
            f"{general.file}: general.backends: kernelhub cannot build {', '.join(skipped)}; "
            f"{others}",
            stacklevel=3,
        )
    if not listed:
        raise general.error("backends", f"is empty; list the backends this kernel supports "
                                        f"(allowed: {', '.join(BACKENDS)})")
    return backends, skipped


def _unknown_backend(backend: str) -> str:
    close = difflib.get_close_matches(backend, BACKENDS, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown backend {backend!r}; {guess}allowed: {', '.join(BACKENDS)}"


def _load_torch(table: Table, root: Path, matrix: Matrix) -> TorchExt:
    minver = major_minor(table, "minver", table.get_str("minver"), "torch")
    maxver = major_minor(table, "maxver", table.get_str("maxver"), "torch")
    if minver and maxver and version_key(minver) > version_key(maxver):
        raise table.error("maxver", f"{maxver} is below minver {minver}")
    stable_abi, by_backend = _stable_abi(table, matrix)
    return TorchExt(
        framework="torch",
        src=existing_files(table, "src", root),
        include=existing_dirs(table, "include", root),
        pyext=table.get_strs("pyext") or DEFAULT_PYEXT,
        minver=minver,
        maxver=maxver,
        stable_abi=stable_abi,
        stable_abi_by_backend=by_backend,
        cxx_flags=table.get_strs("cxx-flags"),
    )


def _stable_abi(table: Table, matrix: Matrix) -> tuple[str | None, dict[str, str]]:
    value = table.data.get("stable-abi")
    if value is None or value is False:
        return None, {}
    if value is True:
        return min(matrix.torch, key=version_key), {}
    if isinstance(value, str):
        return major_minor(table, "stable-abi", value, "torch"), {}
    if isinstance(value, dict):
        sub = Table(value, table.file, table.key("stable-abi"))
        sub.check_keys(BACKENDS)
        by_backend: dict[str, str] = {}
        for backend in value:
            minimum = major_minor(sub, backend, sub.get_str(backend), "torch")
            if minimum is not None:
                by_backend[backend] = minimum
        return min(by_backend.values(), key=version_key), by_backend
    raise table.error(
        "stable-abi",
        "expected true, a torch version such as '2.13', or a "
        f"table of backend = version; got {value!r}",
    )


def _load_noarch(table: Table | None, top: Table, parts: tuple[KernelPart, ...]) -> TorchExt:
    if parts:
        raise top.error(
            "kernel",
            "a pure-Python kernel ([torch-noarch] or universal) has no "
            "compiled parts; remove the [kernel.*] tables or use [torch]",
        )
    if table is None:  # legacy universal [torch], or no framework table at all
        torch = top.get_table("torch")
        if torch is not None:
            torch.check_keys(("src", "include", "pyext", "universal"))
            if torch.get_strs("src"):
                raise torch.error(
                    "src",
                    "a universal (pure-Python) kernel compiles nothing; "
                    "drop src or set universal = false",
                )
        pyext = torch.get_strs("pyext") if torch else ()
        return TorchExt(framework="torch-noarch", pyext=pyext or DEFAULT_PYEXT)

    def either(key: str) -> tuple[str, ...]:  # the ecosystem's underscore, or kernelhub's dash
        return table.get_strs(key) or table.get_strs(key.replace("_", "-"))

    return TorchExt(
        framework="torch-noarch",
        pyext=table.get_strs("pyext") or DEFAULT_PYEXT,
        cuda_capabilities=either("cuda_capabilities"),
        rocm_archs=either("rocm_archs"),
    )


def _load_parts(top: Table, root: Path, edition: Edition) -> tuple[KernelPart, ...]:
    kernel = top.get_table("kernel")
    if kernel is None:
        return ()
    parts: list[KernelPart] = []
    for part_name in kernel.data:
        if not _PART_NAME_RE.fullmatch(part_name):
            raise kernel.error(part_name, "a part name uses letters, digits, '_', '-' or '.'")
        table = kernel.get_table(part_name)
        assert table is not None
        parts.extend(_load_part(table, part_name, root, edition))
    return tuple(parts)


def part_kind(table: Table, edition: Edition) -> str:
    """The part's kind: edition 6's ``language``, or ``cpp-<backend>`` before it (the
    oldest parts, without ``backend``, are :data:`~.model.OLDEST_KIND`)."""
    if edition == CURRENT_EDITION:
        if "backend" in table and "language" not in table:
            backend = table.get_str("backend")
            raise table.error("backend", f"edition {CURRENT_EDITION} names a part's kind "
                                         f'instead: language = "cpp-{backend}" (builder '
                                         "migrate rewrites it)")
        language = table.get_str("language", required=True)
        assert language is not None
        if language not in CPP_KINDS | RUST_KINDS:
            kinds = sorted(CPP_KINDS | RUST_KINDS)
            close = difflib.get_close_matches(language, kinds, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            hint = (f'edition {CURRENT_EDITION} names kinds, e.g. "cpp-{language}"; '
                    if language in BACKENDS else "")
            raise table.error("language", f"unknown part kind {language!r}; {hint}{guess}"
                                          f"allowed: {', '.join(kinds)}")
        return language
    backend = table.get_str("backend")
    if backend is None and table.data.get("language") in CPP_KINDS | RUST_KINDS:
        raise table.error("language", f"an edition-{CURRENT_EDITION} key; set general.edition "
                                      f"= {CURRENT_EDITION} (builder migrate rewrites the file "
                                      "for it)")
    if backend is None:
        if edition is not None:
            raise table.error("backend", f'missing; edition-{edition} parts name their '
                                         f'backend (e.g. backend = "cuda")')
        return OLDEST_KIND
    if backend not in BACKENDS:
        raise table.error("backend", _unknown_backend(backend))
    return f"cpp-{backend}"


def _load_part(table: Table, name: str, root: Path, edition: Edition) -> list[KernelPart]:
    kind = part_kind(table, edition)
    for key in table.data:  # a key of another kind: say which kind has it
        owners = sorted(k for k in CPP_KINDS | RUST_KINDS
                        if key in _part_keys(edition, k) and key not in _part_keys(edition, kind))
        if owners and kind != OLDEST_KIND:
            if edition == CURRENT_EDITION:
                raise table.error(key, f"only applies to {' or '.join(owners)} parts; "
                                       f"this part is {kind}")
            backends = [k.removeprefix("cpp-") for k in owners if k in CPP_KINDS]
            raise table.error(key, f"only applies to {' or '.join(backends)} parts; "
                                   f"this part's backend is {kind.removeprefix('cpp-')!r}")
    table.check_model_keys(KernelPart, edition, kind, path="")
    if kind in RUST_KINDS:
        raise table.error(
            "language",
            f"{kind} parts build tvm-ffi extensions, which kernelhub does not build; "
            "kernelhub builds torch extensions (cpp-* parts)",
        )
    language = table.get_str("language") if kind == OLDEST_KIND else kind
    if kind == OLDEST_KIND and language not in (None, *_LEGACY_LANGUAGES):
        raise table.error(
            "language", f"unknown language {language!r}; allowed: {', '.join(_LEGACY_LANGUAGES)}"
        )
    backend = (_LEGACY_LANGUAGES[language or "cuda"] if kind == OLDEST_KIND
               else kind.removeprefix("cpp-"))
    rocm_archs = table.get_strs("rocm-archs")  # a CUDA part's are its hipified copy's
    part = KernelPart(
        name=name,
        backend=backend,
        language=f"cpp-{backend}",
        src=existing_files(table, "src", root, required=True),
        depends=table.get_strs("depends"),
        include=existing_dirs(table, "include", root),
        cxx_flags=table.get_strs("cxx-flags"),
        cuda_flags=table.get_strs("cuda-flags"),
        cuda_capabilities=table.get_strs("cuda-capabilities"),
        rocm_archs=rocm_archs if backend == "rocm" else (),
        hip_flags=table.get_strs("hip-flags"),
        sycl_flags=table.get_strs("sycl-flags"),
        cuda_minver=major_minor(table, "cuda-minver", table.get_str("cuda-minver"), "CUDA"),
        cuda_maxver=major_minor(table, "cuda-maxver", table.get_str("cuda-maxver"), "CUDA"),
    )
    if language != "cuda-hipify":
        return [part]
    # The oldest schema compiled one CUDA part for ROCm too by hipifying it.
    rocm = KernelPart(
        name=f"{name}_rocm",
        backend="rocm",
        language="cpp-rocm",
        src=part.src,
        depends=part.depends,
        include=part.include,
        rocm_archs=rocm_archs,
    )
    return [part, rocm]


def _part_keys(edition: Edition, kind: str) -> tuple[str, ...]:
    return table_keys(KernelPart, "", edition, kind)


def _cuda_bounds(general: Table) -> tuple[str | None, str | None]:
    cuda = general.get_table("cuda") or Table({}, general.file, "general.cuda")
    bounds = []
    for key in ("minver", "maxver"):
        legacy = f"cuda-{key}"
        if key in cuda and legacy in general:
            raise general.error(legacy, f"set only general.cuda.{key} (this is its old name)")
        table, name = (cuda, key) if key in cuda else (general, legacy)
        bounds.append(major_minor(table, name, table.get_str(name), "CUDA"))
    minver, maxver = bounds
    if minver and maxver and version_key(minver) > version_key(maxver):
        raise cuda.error("maxver", f"CUDA {maxver} is below minver {minver}")
    return minver, maxver


def _backend_python_depends(general: Table) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for backend in _BACKEND_TABLES:
        table = general.get_table(backend)
        if table is not None and (deps := table.get_strs("python-depends")):
            found[backend] = deps
    return found


def _license(general: Table, edition: Edition) -> str | None:
    """general.license: required by editions 5 and 6 (the ecosystem's 0.19 loader refuses a
    variant whose metadata.json has none); the unversioned schema could leave it out."""
    if edition is not None and "license" not in general:
        raise general.error("license", f'missing; edition {edition} requires one, e.g. '
                                       'license = "apache-2.0"')
    return general.get_str("license")


def _build_layout(general: Table) -> str:
    layout = general.get_str("build-layout") or "files"
    if layout not in BUILD_LAYOUTS:
        raise general.error("build-layout", f"unknown layout {layout!r}; allowed: "
                                            f"{', '.join(BUILD_LAYOUTS)}")
    return layout


def _kernel_depends(
    general: Table, repo_id: str | None
) -> tuple[tuple[KernelDependency, ...], dict[str, tuple[KernelDependency, ...]]]:
    """general.kernel-depends and general.<backend>.kernel-depends."""
    general_depends = _depends_list(general, repo_id)
    by_backend: dict[str, tuple[KernelDependency, ...]] = {}
    for backend in _BACKEND_TABLES:
        table = general.get_table(backend)
        if table is not None and (depends := _depends_list(table, repo_id)):
            by_backend[backend] = depends
    return general_depends, by_backend


def _depends_list(table: Table, own_repo: str | None) -> tuple[KernelDependency, ...]:
    """One ``kernel-depends`` list: ``{repo-id = "org/name", version = 1}`` or
    ``{repo-id = …, revision = "…"}`` entries (read by the loader's one definition of the
    format, as metadata.json carries it), each repository once and never this kernel."""
    try:
        depends = parse_kernel_depends(table.data.get("kernel-depends"), table.prefix)
    except DependencyError as e:
        raise ManifestError(table.file, None, str(e)) from None
    seen: set[str] = set()
    for i, dep in enumerate(depends):
        where = f"{table.key('kernel-depends')}[{i}].repo-id"
        if dep.repo_id == own_repo:
            raise ManifestError(table.file, where, f"{dep.repo_id!r} is this kernel's own "
                                                   "repository; a kernel cannot depend on itself")
        if dep.repo_id in seen:
            raise ManifestError(table.file, where, f"{dep.repo_id!r} is listed twice; list each "
                                                   "kernel once")
        seen.add(dep.repo_id)
    return depends


def _upstream(general: Table) -> tuple[str, ...]:
    value = general.data.get("upstream")
    if isinstance(value, list):
        return general.get_strs("upstream")
    upstream = general.get_str("upstream")
    return (upstream,) if upstream else ()
