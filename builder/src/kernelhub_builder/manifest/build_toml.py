"""Parse a kernel's ``build.toml`` into a :class:`~.manifest_model.KernelManifest`.

The schema is the kernel ecosystem's (edition 5; ``general.release`` of older trees of ours
is still read, but releases now live in kernels.toml's ``[releases]``); the older
forms (no ``general.backends``: backends inferred from the kernel parts; ``universal =
true``: one pure-Python build for every backend; parts without ``backend``: CUDA) are read
too, so existing trees build unchanged. ``[torch] stable-abi`` may be ``true`` (the lowest
torch of the matrix), ``"2.13"`` (that minimum for every backend) or, as in edition 5, a
table ``{cuda = "2.13", cpu = "2.13"}``.
"""

from __future__ import annotations

import difflib
import re
import warnings
from pathlib import Path

from kernelhub.errors import VersionSpecError
from kernelhub.system import BACKENDS, UNBUILDABLE_BACKENDS
from kernelhub.versions import parse_release

from ..errors import ManifestError
from .model import (
    DEFAULT_PYEXT,
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
_PART_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # "_name" too, as the ecosystem allows

# fmt: off
_GENERAL_KEYS = (
    "name", "version", "edition", "license", "release", "backends", "hub", "cuda", "xpu",
    "neuron", "python-depends", "upstream", "source", "universal", "cuda-minver", "cuda-maxver",
)
# fmt: on
_PART_COMMON = ("backend", "depends", "src", "include", "cxx-flags", "language")
_PART_BY_BACKEND = {
    "cpu": (),
    "cuda": ("cuda-capabilities", "cuda-flags", "cuda-minver", "cuda-maxver"),
    "metal": (),
    "rocm": ("rocm-archs", "hip-flags"),
    "xpu": ("sycl-flags",),
}
_LEGACY_PART_KEYS = ("language", "depends", "src", "include", "cuda-capabilities", "rocm-archs")
_LEGACY_LANGUAGES = {"cuda": "cuda", "cuda-hipify": "cuda", "metal": "metal"}


def load_kernel(kernel_dir: Path, project: Project | None = None) -> KernelManifest:
    """Read a kernel's build.toml (given the file or its directory).

    ``project`` supplies the matrix that ``stable-abi = true`` refers to (its lowest
    torch); without one the default matrix is used.
    """
    kernel_dir = Path(kernel_dir)
    file = kernel_dir if kernel_dir.name == KERNEL_FILE else kernel_dir / KERNEL_FILE
    root = file.parent.resolve()
    top = Table(read_toml(file), file)
    if "tvm-ffi" in top:
        raise top.error(
            "tvm-ffi",
            "kernelhub builds torch extensions only; use [torch] "
            "(compiled) or [torch-noarch] (pure Python)",
        )
    top.check_keys(("general", "torch", "torch-noarch", "kernel"))
    general = top.get_table("general")
    if general is None:
        raise top.error("general", "missing; every build.toml starts with [general] name = …")
    general.check_keys(_GENERAL_KEYS)
    name, version, release = _identity(general, project.releases if project else {})
    parts = _load_parts(top, root)
    torch, backends, skipped, universal = _framework(
        top, general, parts, root, project.matrix if project else Matrix()
    )

    hub = general.get_table("hub") or Table({}, file, "general.hub")
    hub.check_keys(("repo-id", "branch"))
    repo_id = hub.get_str("repo-id")
    if repo_id is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", repo_id):
        raise hub.error("repo-id", f"{repo_id!r} is not of the form 'org/name'")
    cuda_minver, cuda_maxver = _cuda_bounds(general)
    manifest = KernelManifest(
        root=root,
        name=name,
        version=version,
        release=release,
        backends=backends,
        torch=torch,
        parts=parts,
        license=general.get_str("license"),
        repo_id=repo_id,
        python_depends=general.get_strs("python-depends"),
        universal=universal,
        edition=general.get_int("edition"),
        hub_branch=hub.get_str("branch"),
        upstream=_upstream(general),
        source=general.get_str("source"),
        cuda_minver=cuda_minver,
        cuda_maxver=cuda_maxver,
        backend_python_depends=_backend_python_depends(general),
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


def _identity(general: Table, releases: dict[str, str]) -> tuple[str, int, str]:
    """general.name, general.version (default 1) and the release: kernels.toml's
    ``[releases]`` entry, else ``general.release`` (older trees of ours; the ecosystem's
    edition-5 schema refuses the key), else ``<version>.0.0``."""
    name = general.get_str("name", required=True)
    assert name is not None
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
            close = difflib.get_close_matches(backend, BACKENDS, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise general.error(
                "backends", f"unknown backend {backend!r}; {guess}allowed: {', '.join(BACKENDS)}"
            )
    skipped = tuple(b for b in listed if b in UNBUILDABLE_BACKENDS)
    backends = tuple(b for b in listed if b in BACKENDS)
    if skipped:
        warnings.warn(
            f"{general.file}: general.backends: kernelhub cannot build {', '.join(skipped)}; "
            "building the other backends only",
            stacklevel=3,
        )
    if not backends:
        raise general.error("backends", f"no buildable backend; allowed: {', '.join(BACKENDS)}")
    return backends, skipped


def _load_torch(table: Table, root: Path, matrix: Matrix) -> TorchExt:
    table.check_keys(
        ("src", "include", "pyext", "minver", "maxver", "stable-abi", "cxx-flags", "universal")
    )
    minver = major_minor(table, "minver", table.get_str("minver"), "torch")
    maxver = major_minor(table, "maxver", table.get_str("maxver"), "torch")
    if minver and maxver and version_key(minver) > version_key(maxver):
        raise table.error("maxver", f"{maxver} is below minver {minver}")
    stable_abi, by_backend = _stable_abi(table, matrix)
    return TorchExt(
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
        return TorchExt(noarch=True, pyext=pyext or DEFAULT_PYEXT)
    table.check_keys(("pyext", "cuda-capabilities", "rocm-archs"))
    return TorchExt(
        noarch=True,
        pyext=table.get_strs("pyext") or DEFAULT_PYEXT,
        cuda_capabilities=table.get_strs("cuda-capabilities"),
        rocm_archs=table.get_strs("rocm-archs"),
    )


def _load_parts(top: Table, root: Path) -> tuple[KernelPart, ...]:
    kernel = top.get_table("kernel")
    if kernel is None:
        return ()
    parts: list[KernelPart] = []
    for part_name in kernel.data:
        if not _PART_NAME_RE.fullmatch(part_name):
            raise kernel.error(part_name, "a part name uses letters, digits, '_', '-' or '.'")
        table = kernel.get_table(part_name)
        assert table is not None
        parts.extend(_load_part(table, part_name, root))
    return tuple(parts)


def _load_part(table: Table, name: str, root: Path) -> list[KernelPart]:
    language = table.get_str("language")
    if language is not None and language not in _LEGACY_LANGUAGES:
        raise table.error(
            "language", f"unknown language {language!r}; allowed: {', '.join(_LEGACY_LANGUAGES)}"
        )
    backend = table.get_str("backend") or _LEGACY_LANGUAGES.get(language or "cuda", "cuda")
    if backend not in BACKENDS:
        close = difflib.get_close_matches(backend, BACKENDS, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise table.error(
            "backend", f"unknown backend {backend!r}; {guess}allowed: {', '.join(BACKENDS)}"
        )
    if "backend" not in table:  # the oldest schema: one CUDA part, maybe hipified
        table.check_keys(_LEGACY_PART_KEYS)
    else:
        for key in table.data:
            owner = next((b for b, keys in _PART_BY_BACKEND.items() if key in keys), backend)
            if owner != backend:
                raise table.error(
                    key, f"only applies to {owner} parts; this part's backend is {backend!r}"
                )
        table.check_keys(_PART_COMMON + _PART_BY_BACKEND[backend])
    cuda_minver = major_minor(table, "cuda-minver", table.get_str("cuda-minver"), "CUDA")
    cuda_maxver = major_minor(table, "cuda-maxver", table.get_str("cuda-maxver"), "CUDA")
    part = KernelPart(
        name=name,
        backend=backend,
        src=existing_files(table, "src", root, required=True),
        depends=table.get_strs("depends"),
        include=existing_dirs(table, "include", root),
        cxx_flags=table.get_strs("cxx-flags"),
        cuda_flags=table.get_strs("cuda-flags"),
        cuda_capabilities=table.get_strs("cuda-capabilities"),
        rocm_archs=table.get_strs("rocm-archs"),
        hip_flags=table.get_strs("hip-flags"),
        sycl_flags=table.get_strs("sycl-flags"),
        language=language,
        cuda_minver=cuda_minver,
        cuda_maxver=cuda_maxver,
    )
    if language != "cuda-hipify":
        return [part]
    # The oldest schema compiled one CUDA part for ROCm too by hipifying it.
    rocm = KernelPart(
        name=f"{name}_rocm",
        backend="rocm",
        src=part.src,
        depends=part.depends,
        include=part.include,
        rocm_archs=part.rocm_archs,
        language=language,
    )
    return [part, rocm]


def _cuda_bounds(general: Table) -> tuple[str | None, str | None]:
    cuda = general.get_table("cuda") or Table({}, general.file, "general.cuda")
    cuda.check_keys(("minver", "maxver", "python-depends"))
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
    for backend in ("cuda", "xpu", "neuron"):
        table = general.get_table(backend)
        if table is None:
            continue
        if backend != "cuda":
            table.check_keys(("python-depends",))
        if deps := table.get_strs("python-depends"):
            found[backend] = deps
    return found


def _upstream(general: Table) -> tuple[str, ...]:
    value = general.data.get("upstream")
    if isinstance(value, list):
        return general.get_strs("upstream")
    upstream = general.get_str("upstream")
    return (upstream,) if upstream else ()
