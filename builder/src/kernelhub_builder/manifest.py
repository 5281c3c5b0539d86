"""Parse ``kernels.toml`` and ``build.toml`` into the typed models of :mod:`.manifest_model`.

Everything downstream takes those models, never raw TOML, so every check happens here
and every error names the file, the dotted key, what was wrong and what is allowed.

``kernels.toml`` (the project)::

    kernels = ["activation"]          # dirs under kernels-src/ (a name with '/' is a path
                                      # from the project root); default: every dir under
                                      # kernels-src/ that holds a build.toml
    build-dir = "build"               # optional; where built variants go
    [hub]
    org = "kernels-community"         # default org, and the trusted one
    target = "/path/to/hub"           # optional: a path (LocalHub there), "hf" or an
                                      # "http(s)://…" Hub-API endpoint (HfHub)
    [matrix]                          # the default build matrix; every key is optional
    torch = ["2.13", "2.14"]          # torch major.minor
    backends = ["cpu", "cuda", "rocm", "xpu", "metal"]
    systems = ["x86_64-linux", "aarch64-linux", "aarch64-darwin"]
    cuda = ["13.0"]
    rocm = ["7.0"]
    xpu = ["2025.2"]
    [toolchain.torch]                 # optional pip requirement per torch major.minor
    "2.13" = "torch==2.13.0"

TOML puts top-level keys before the first table, so ``kernels`` comes first.

``build.toml`` is the kernel ecosystem's schema (edition 5) plus ``general.release``; the
older forms (no ``general.backends``: backends inferred from the kernel parts; ``universal
= true``: one pure-Python build for every backend; parts without ``backend``: CUDA) are
read too, so existing trees build unchanged. ``[torch] stable-abi`` may be ``true`` (the
lowest torch of the matrix), ``"2.13"`` (that minimum for every backend) or, as in
edition 5, a table ``{cuda = "2.13", cpu = "2.13"}``.
"""

from __future__ import annotations

import difflib
import re
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelhub.errors import KernelHubError, VariantNameError, VersionSpecError
from kernelhub.variants import ARCHES, BACKENDS, OSES, Compute
from kernelhub.versions import parse_release
from packaging.requirements import InvalidRequirement, Requirement

from .manifest_model import KernelManifest, KernelPart, Matrix, Project, TorchExt

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

PROJECT_FILE = "kernels.toml"
KERNEL_FILE = "build.toml"

#: Backends of the ecosystem schema that kernelhub has no variant names for.
UNBUILDABLE_BACKENDS = ("neuron", "cann")
SYSTEMS = tuple(f"{arch}-{os}" for arch in ARCHES for os in OSES)

_KERNEL_NAME_RE = re.compile(r"[a-z](?:[a-z0-9_-]*[a-z0-9])?")
_PART_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ORG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAJOR_MINOR_RE = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")

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


class ManifestError(KernelHubError, ValueError):
    """kernels.toml or build.toml is malformed; the message names file, key and fix."""

    def __init__(self, file: Path, key: str | None, problem: str) -> None:
        self.file = file
        self.key = key
        super().__init__(f"{file}: {key}: {problem}" if key else f"{file}: {problem}")


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(file, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(file, None, f"cannot read: {e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        detail = str(e)
        if m := re.search(r"line (\d+)", detail):
            lines = text.splitlines()
            lineno = int(m[1])
            if 0 < lineno <= len(lines):
                detail += f": {lines[lineno - 1].strip()!r}"
        raise ManifestError(file, None, f"invalid TOML: {detail}") from None


class _Table:
    """One TOML table plus where it came from, so every complaint can name its key."""

    def __init__(self, data: dict[str, Any], file: Path, prefix: str = "") -> None:
        self.data = data
        self.file = file
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str | None, problem: str) -> ManifestError:
        return ManifestError(self.file, self.key(name) if name else self.prefix or None, problem)

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def check_keys(self, allowed: Iterable[str], hint: str = "") -> None:
        allowed = list(allowed)
        for name in self.data:
            if name in allowed:
                continue
            close = difflib.get_close_matches(name, allowed, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            where = f"[{self.prefix}]" if self.prefix else "the top level"
            raise self.error(
                name, f"unknown key; {guess}allowed in {where}: {', '.join(allowed)}{hint}"
            )

    def _get(self, name: str, kind: type | tuple[type, ...], what: str, required: bool) -> Any:
        if name not in self.data:
            if required:
                raise self.error(name, f"missing; it is required ({what})")
            return None
        value = self.data[name]
        if isinstance(value, bool) and kind is not bool:  # bool is an int subclass
            raise self.error(name, f"expected {what}, got a boolean ({value!r})")
        if not isinstance(value, kind):
            raise self.error(name, f"expected {what}, got {type(value).__name__} {value!r}")
        return value

    def get_str(self, name: str, required: bool = False) -> str | None:
        value = self._get(name, str, "a string", required)
        if value is not None and not value.strip():
            raise self.error(name, "must not be empty")
        return value

    def get_int(self, name: str, required: bool = False) -> int | None:
        value = self._get(name, int, "an integer", required)
        if value is not None and value < 0:
            raise self.error(name, f"must be 0 or more, got {value}")
        return value

    def get_bool(self, name: str) -> bool:
        return bool(self._get(name, bool, "true or false", False))

    def get_strs(self, name: str, required: bool = False) -> tuple[str, ...]:
        value = self._get(name, list, "a list of strings", required)
        if value is None:
            return ()
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise self.error(name, f"expected a list of non-empty strings, found {item!r}")
        return tuple(value)

    def get_table(self, name: str) -> _Table | None:
        value = self._get(name, dict, "a table", False)
        return None if value is None else _Table(value, self.file, self.key(name))


def _major_minor(table: _Table, name: str, value: str | None, what: str) -> str | None:
    """Normalise "2.13" / "2.13.0" to "2.13" so every comparison is on major.minor."""
    if value is None:
        return None
    if not (m := _MAJOR_MINOR_RE.fullmatch(value)):
        raise table.error(name, f"{value!r} is not a {what} version such as '2.13'")
    return f"{int(m[1])}.{int(m[2])}"


def version_key(version: str) -> tuple[int, int]:
    """Sort key of a normalised major.minor string."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


# --------------------------------------------------------------------------- kernels.toml


def load_project(path: Path) -> Project:
    """Read kernels.toml (or the directory holding it) into a :class:`Project`."""
    path = Path(path)
    file = path / PROJECT_FILE if path.is_dir() else path
    root = file.parent.resolve()
    top = _Table(_read_toml(file), file)
    top.check_keys(("kernels", "build-dir", "hub", "matrix", "toolchain"))

    hub = top.get_table("hub") or _Table({}, file, "hub")
    hub.check_keys(("org", "target"))
    org = hub.get_str("org") or "kernels-community"
    if not _ORG_RE.fullmatch(org):
        raise hub.error("org", f"{org!r} is not an org name (letters, digits, '.', '-', '_')")
    target = _hub_target(hub.get_str("target"), root)

    matrix = _load_matrix(top.get_table("matrix") or _Table({}, file, "matrix"))
    pins = _load_torch_pins(top.get_table("toolchain") or _Table({}, file, "toolchain"), matrix)

    kernels = top.get_strs("kernels") if "kernels" in top else _discover_kernels(root)
    seen: set[str] = set()
    for name in kernels:
        if name in seen:
            raise top.error("kernels", f"{name!r} is listed twice; list each kernel once")
        seen.add(name)
    build_dir = top.get_str("build-dir")
    project = Project(
        root=root,
        kernels=kernels,
        org=org,
        hub=target,
        matrix=matrix,
        torch_pins=pins,
        build_dir=(root / build_dir) if build_dir else None,
    )
    for name in kernels:
        if not (project.kernel_dir(name) / KERNEL_FILE).is_file():
            raise top.error(
                "kernels",
                f"{name!r} has no {KERNEL_FILE} at {project.kernel_dir(name)}; "
                "create the kernel there or remove it from the list",
            )
    return project


def _hub_target(target: str | None, root: Path) -> str | None:
    if target is None or target == "hf" or target.startswith(("http://", "https://")):
        return target  # the same forms kernelhub.hub.select.open_hub understands
    path = Path(target).expanduser()
    return str(path if path.is_absolute() else (root / path).resolve())


def _discover_kernels(root: Path) -> tuple[str, ...]:
    src = root / "kernels-src"
    if not src.is_dir():
        return ()
    return tuple(sorted(d.name for d in src.iterdir() if (d / KERNEL_FILE).is_file()))


def _load_matrix(table: _Table) -> Matrix:
    table.check_keys(("torch", "backends", "systems", "cuda", "rocm", "xpu"))
    default = Matrix()

    def values(name: str, check: Any) -> tuple[str, ...]:
        if name not in table:
            return getattr(default, name)
        items = table.get_strs(name)
        if len(set(items)) != len(items):
            raise table.error(name, f"has duplicates: {list(items)}")
        return tuple(check(item) for item in items)

    def one_of(name: str, allowed: tuple[str, ...]) -> Any:
        def check(item: str) -> str:
            if item not in allowed:
                raise table.error(name, f"unknown value {item!r}; allowed: {', '.join(allowed)}")
            return item

        return check

    def toolkit(name: str, backend: str) -> Any:
        def check(item: str) -> str:
            try:
                return Compute.from_version_string(backend, item).version_str
            except VariantNameError as e:
                raise table.error(name, str(e)) from None

        return check

    torch = values("torch", lambda v: _major_minor(table, "torch", v, "torch"))
    if not torch:
        raise table.error("torch", "is empty; list at least one torch version such as '2.13'")
    return Matrix(
        torch=torch,
        backends=values("backends", one_of("backends", BACKENDS)),
        systems=values("systems", one_of("systems", SYSTEMS)),
        cuda=values("cuda", toolkit("cuda", "cuda")),
        rocm=values("rocm", toolkit("rocm", "rocm")),
        xpu=values("xpu", toolkit("xpu", "xpu")),
    )


def _load_torch_pins(toolchain: _Table, matrix: Matrix) -> dict[str, str]:
    toolchain.check_keys(("torch",))
    table = toolchain.get_table("torch")
    if table is None:
        return {}
    pins: dict[str, str] = {}
    for version in table.data:
        mm = _major_minor(table, version, version, "torch")
        assert mm is not None
        requirement = table.get_str(version)
        assert requirement is not None
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as e:
            raise table.error(version, f"{requirement!r} is not a pip requirement: {e}") from None
        if parsed.name.lower() != "torch":
            raise table.error(version, f"{requirement!r} must pin torch, e.g. 'torch==2.13.0'")
        pins[mm] = requirement
    return pins


# --------------------------------------------------------------------------- build.toml


def load_kernel(kernel_dir: Path, project: Project | None = None) -> KernelManifest:
    """Read a kernel's build.toml (given the file or its directory).

    ``project`` supplies the matrix that ``stable-abi = true`` refers to (its lowest
    torch); without one the default matrix is used.
    """
    kernel_dir = Path(kernel_dir)
    file = kernel_dir if kernel_dir.name == KERNEL_FILE else kernel_dir / KERNEL_FILE
    root = file.parent.resolve()
    top = _Table(_read_toml(file), file)
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
    name, version, release = _identity(general)
    parts = _load_parts(top, root)
    torch, backends, skipped, universal = _framework(
        top, general, parts, root, project.matrix if project else Matrix()
    )

    hub = general.get_table("hub") or _Table({}, file, "general.hub")
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


def load_kernels(project: Project) -> list[KernelManifest]:
    """Every kernel of the project, refusing two directories that declare one name."""
    kernels: list[KernelManifest] = []
    by_name: dict[str, Path] = {}
    for entry in project.kernels:
        kernel = load_kernel(project.kernel_dir(entry), project)
        if kernel.name in by_name:
            raise ManifestError(
                kernel.root / KERNEL_FILE,
                "general.name",
                f"{kernel.name!r} is also the name of {by_name[kernel.name]}; "
                "kernel names must be unique in a project",
            )
        by_name[kernel.name] = kernel.root
        kernels.append(kernel)
    return kernels


def _identity(general: _Table) -> tuple[str, int, str]:
    """general.name, general.version (default 1) and general.release (default v.0.0)."""
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
    release = general.get_str("release") or f"{version}.0.0"
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
    top: _Table, general: _Table, parts: tuple[KernelPart, ...], root: Path, matrix: Matrix
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
    for backend in backends:
        if not any(p.backend == backend for p in parts):
            raise general.error(
                "backends",
                f"lists {backend!r} but no [kernel.<part>] has backend = "
                f"{backend!r}; add a part for it or drop it from the list",
            )
    return _load_torch(torch_table, root, matrix), backends, skipped, universal


def _load_backends(
    general: _Table, parts: tuple[KernelPart, ...], universal: bool, noarch: bool
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


def _load_torch(table: _Table, root: Path, matrix: Matrix) -> TorchExt:
    table.check_keys(
        ("src", "include", "pyext", "minver", "maxver", "stable-abi", "cxx-flags", "universal")
    )
    minver = _major_minor(table, "minver", table.get_str("minver"), "torch")
    maxver = _major_minor(table, "maxver", table.get_str("maxver"), "torch")
    if minver and maxver and version_key(minver) > version_key(maxver):
        raise table.error("maxver", f"{maxver} is below minver {minver}")
    stable_abi, by_backend = _stable_abi(table, matrix)
    return TorchExt(
        src=_existing_files(table, "src", root),
        include=_existing_dirs(table, "include", root),
        pyext=table.get_strs("pyext") or ("py", "pyi"),
        minver=minver,
        maxver=maxver,
        stable_abi=stable_abi,
        stable_abi_by_backend=by_backend,
        cxx_flags=table.get_strs("cxx-flags"),
    )


def _stable_abi(table: _Table, matrix: Matrix) -> tuple[str | None, dict[str, str]]:
    value = table.data.get("stable-abi")
    if value is None or value is False:
        return None, {}
    if value is True:
        return min(matrix.torch, key=version_key), {}
    if isinstance(value, str):
        return _major_minor(table, "stable-abi", value, "torch"), {}
    if isinstance(value, dict):
        sub = _Table(value, table.file, table.key("stable-abi"))
        sub.check_keys(BACKENDS)
        by_backend = {b: _major_minor(sub, b, sub.get_str(b), "torch") for b in value}
        return min(by_backend.values(), key=version_key), by_backend  # type: ignore[arg-type]
    raise table.error(
        "stable-abi",
        "expected true, a torch version such as '2.13', or a "
        f"table of backend = version; got {value!r}",
    )


def _load_noarch(table: _Table | None, top: _Table, parts: tuple[KernelPart, ...]) -> TorchExt:
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
        return TorchExt(noarch=True, pyext=pyext or ("py", "pyi"))
    table.check_keys(("pyext", "cuda-capabilities", "rocm-archs"))
    return TorchExt(
        noarch=True,
        pyext=table.get_strs("pyext") or ("py", "pyi"),
        cuda_capabilities=table.get_strs("cuda-capabilities"),
        rocm_archs=table.get_strs("rocm-archs"),
    )


def _load_parts(top: _Table, root: Path) -> tuple[KernelPart, ...]:
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


def _load_part(table: _Table, name: str, root: Path) -> list[KernelPart]:
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
    cuda_minver = _major_minor(table, "cuda-minver", table.get_str("cuda-minver"), "CUDA")
    cuda_maxver = _major_minor(table, "cuda-maxver", table.get_str("cuda-maxver"), "CUDA")
    part = KernelPart(
        name=name,
        backend=backend,
        src=_existing_files(table, "src", root, required=True),
        depends=table.get_strs("depends"),
        include=_existing_dirs(table, "include", root),
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


def _relative(table: _Table, key: str, root: Path, entry: str) -> Path:
    path = Path(entry)
    resolved = (root / path).resolve()
    if path.is_absolute() or not resolved.is_relative_to(root):
        raise table.error(key, f"{entry!r} must be a path inside the kernel directory {root}")
    return resolved


def _existing_files(table: _Table, key: str, root: Path, required: bool = False) -> tuple[str, ...]:
    entries = table.get_strs(key, required=required)
    for entry in entries:
        if not _relative(table, key, root, entry).is_file():
            raise table.error(key, f"source file {entry!r} does not exist (looked in {root})")
    return entries


def _existing_dirs(table: _Table, key: str, root: Path) -> tuple[str, ...]:
    entries = table.get_strs(key)
    for entry in entries:
        if not _relative(table, key, root, entry).is_dir():
            raise table.error(key, f"include directory {entry!r} does not exist (looked in {root})")
    return entries


def _cuda_bounds(general: _Table) -> tuple[str | None, str | None]:
    cuda = general.get_table("cuda") or _Table({}, general.file, "general.cuda")
    cuda.check_keys(("minver", "maxver", "python-depends"))
    bounds = []
    for key in ("minver", "maxver"):
        legacy = f"cuda-{key}"
        if key in cuda and legacy in general:
            raise general.error(legacy, f"set only general.cuda.{key} (this is its old name)")
        table, name = (cuda, key) if key in cuda else (general, legacy)
        bounds.append(_major_minor(table, name, table.get_str(name), "CUDA"))
    minver, maxver = bounds
    if minver and maxver and version_key(minver) > version_key(maxver):
        raise cuda.error("maxver", f"CUDA {maxver} is below minver {minver}")
    return minver, maxver


def _backend_python_depends(general: _Table) -> dict[str, tuple[str, ...]]:
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


def _upstream(general: _Table) -> tuple[str, ...]:
    value = general.data.get("upstream")
    if isinstance(value, list):
        return general.get_strs("upstream")
    upstream = general.get_str("upstream")
    return (upstream,) if upstream else ()
