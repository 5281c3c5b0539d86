"""Parse ``kernels.toml`` and ``build.toml`` into the typed models of :mod:`.model`.

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
    variant-names = "both"            # publish builds under the current names, the
                                      # legacy ones, or both (default)
    [matrix]                          # the default build matrix; every key is optional
    torch = ["2.13", "2.14"]          # torch major.minor
    backends = ["cpu", "cuda", "rocm", "xpu", "metal"]
    systems = ["x86_64-linux", "aarch64-linux", "aarch64-darwin"]
    cuda = ["13.0"]
    rocm = ["7.0"]
    xpu = ["2025.2"]
    [toolchain]
    gpu-torch = "2.14"                # optional: the torch whose pin is a build for the
                                      # matrix's CUDA (GPU stable-ABI builds use its env);
                                      # default: the newest torch of the matrix
    [toolchain.torch]                 # optional pip requirement per torch major.minor
    "2.13" = "torch==2.13.0"
    [releases]                        # optional semver release per kernel name
    activation = "1.2.0"              # (major = general.version; default <version>.0.0)

TOML puts top-level keys before the first table, so ``kernels`` comes first.

Each ``build.toml`` is parsed by :mod:`.build_toml`; both share the table helpers and
the error type of :mod:`.toml_tables`, re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelhub.errors import PathError, VariantNameError, VersionSpecError
from kernelhub.formats.variants import Compute
from kernelhub.system import ARCHES, BACKENDS, OSES
from kernelhub.user_files import user_path
from kernelhub.versions import parse_release
from packaging.requirements import InvalidRequirement, Requirement

from ..errors import ManifestError
from .build_toml import KERNEL_FILE, load_kernel
from .model import KernelManifest, Matrix, Project, VariantNames
from .tables import Table, major_minor, read_toml, version_key

__all__ = [
    "KERNEL_FILE",
    "PROJECT_FILE",
    "SYSTEMS",
    "load_kernel",
    "load_kernels",
    "load_project",
    "version_key",
]

PROJECT_FILE = "kernels.toml"
STANDALONE = "."
"""The one entry of a standalone project: the kernel is the project root itself."""
SYSTEMS = tuple(f"{arch}-{os}" for arch in ARCHES for os in OSES)

_ORG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def load_project(path: Path, *, only: Sequence[str] | None = None) -> Project:
    """Read kernels.toml (or the directory holding it) into a :class:`Project`.

    ``only`` keeps just those entries of ``kernels`` (each must be listed): a Nix build
    of one kernel sees that kernel's tree and no other, so the rest cannot be checked.
    """
    path = Path(path)
    if path.name == KERNEL_FILE or (path.is_dir() and not (path / PROJECT_FILE).is_file()
                                    and (path / KERNEL_FILE).is_file()):
        return standalone_project(path.parent if path.name == KERNEL_FILE else path)
    file = path / PROJECT_FILE if path.is_dir() else path
    root = file.parent.resolve()
    top = Table(read_toml(file), file)
    top.check_tables(Project, None)

    hub = top.get_table("hub") or Table({}, file, "hub")
    org = hub.get_str("org") or "kernels-community"
    if not _ORG_RE.fullmatch(org):
        raise hub.error("org", f"{org!r} is not an org name (letters, digits, '.', '-', '_')")
    try:
        target = _hub_target(hub.get_str("target"), root)
    except PathError as e:
        raise hub.error("target", str(e)) from None
    names = hub.get_str("variant-names") or VariantNames.BOTH.value
    if names not in {n.value for n in VariantNames}:
        raise hub.error("variant-names", f"{names!r}: allowed are "
                                         f"{', '.join(n.value for n in VariantNames)} (both: "
                                         "the names kernels 0.19 prefers and 0.17/0.18 find)")

    matrix = _load_matrix(top.get_table("matrix") or Table({}, file, "matrix"))
    toolchain = top.get_table("toolchain") or Table({}, file, "toolchain")
    pins = _load_torch_pins(toolchain, matrix)
    gpu_torch = major_minor(toolchain, "gpu-torch", toolchain.get_str("gpu-torch"), "torch")
    if gpu_torch is not None and gpu_torch not in matrix.torch:
        raise toolchain.error("gpu-torch", f"{gpu_torch!r} is not in [matrix] torch "
                                           f"({', '.join(matrix.torch)}); name one of those")

    kernels = top.get_strs("kernels") if "kernels" in top else _discover_kernels(root)
    seen: set[str] = set()
    for name in kernels:
        if name in seen:
            raise top.error("kernels", f"{name!r} is listed twice; list each kernel once")
        seen.add(name)
    if only is not None:
        unknown = [name for name in only if name not in kernels]
        if unknown:
            raise top.error("kernels", f"{unknown[0]!r} is not listed; listed: "
                                       f"{', '.join(kernels) or 'none'}")
        kernels = tuple(name for name in kernels if name in only)
    build_dir = top.get_str("build-dir")
    releases = _load_releases(top.get_table("releases") or Table({}, file, "releases"))
    project = Project(root=root, kernels=kernels, org=org, hub=target, matrix=matrix,
                      torch_pins=pins, gpu_torch=gpu_torch, build_dir=(root / build_dir) if build_dir else None,
                      releases=releases, variant_names=VariantNames(names))
    for name in kernels:
        if not (project.kernel_dir(name) / KERNEL_FILE).is_file():
            raise top.error(
                "kernels",
                f"{name!r} has no {KERNEL_FILE} at {project.kernel_dir(name)}; "
                "create the kernel there or remove it from the list",
            )
    return project


def standalone_project(root: Path) -> Project:
    """A kernel author's own repository: one build.toml at its root, no kernels.toml.

    It builds in place with the default matrix; builds go to ``<root>/build/<name>/``.
    """
    return Project(root=Path(root).resolve(), kernels=(STANDALONE,))


def _load_releases(table: Table) -> dict[str, str]:
    """``[releases]``: kernel name → semver release (the ecosystem's build.toml has no key
    for it, so it lives here, beside the project's other publishing settings)."""
    releases = {}
    for name in table.data:
        release = table.get_str(name, required=True)
        assert release is not None
        try:
            parse_release(release)
        except VersionSpecError as e:
            raise table.error(name, str(e)) from None
        releases[name] = release
    return releases


def _hub_target(target: str | None, root: Path) -> str | None:
    if target is None or target == "hf" or target[:8].lower().startswith(("http://", "https://")):
        return target  # the same forms kernelhub.hub.select.hub_address understands
    path = user_path(target, "[hub] target")
    return str(path if path.is_absolute() else (root / path).resolve())


def _discover_kernels(root: Path) -> tuple[str, ...]:
    src = root / "kernels-src"
    if not src.is_dir():
        return ()
    return tuple(sorted(d.name for d in src.iterdir() if (d / KERNEL_FILE).is_file()))


def _load_matrix(table: Table) -> Matrix:
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

    torch = values("torch", lambda v: major_minor(table, "torch", v, "torch"))
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


def _load_torch_pins(toolchain: Table, matrix: Matrix) -> dict[str, str]:
    table = toolchain.get_table("torch")
    if table is None:
        return {}
    pins: dict[str, str] = {}
    for version in table.data:
        mm = major_minor(table, version, version, "torch")
        assert mm is not None
        requirement = table.get_str(version)
        assert requirement is not None
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as e:
            raise table.error(version, f"{requirement!r} is not a pip requirement "
                                      f"({str(e).splitlines()[0]}), e.g. 'torch==2.13.0'") from None
        if parsed.name.lower() != "torch":
            raise table.error(version, f"{requirement!r} must pin torch, e.g. 'torch==2.13.0'")
        pins[mm] = requirement
    return pins


# --------------------------------------------------------------------------- build.toml


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
