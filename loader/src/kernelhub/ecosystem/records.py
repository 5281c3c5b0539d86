"""The ecosystem's value types over kernelhub's: what was loaded (``LoadedKernel``,
``RepoInfo``), a build's ``Metadata``, and per-variant decisions
(``get_kernel_variants`` → ``VariantAccepted`` / ``VariantRejected``).

They read kernelhub's own records (:mod:`kernelhub.load.importer`, :mod:`kernelhub.formats.metadata`,
:mod:`kernelhub.selection`) and present them with the ecosystem's field names, so code
that inspects them runs unchanged.
"""

from __future__ import annotations

import enum
from pathlib import Path
from types import ModuleType
from typing import Any

from ..formats import metadata as _metadata
from ..formats.variants import Variant, parse_variant
from ..value_types import Record


class RepoInfo(Record, frozen=True):
    """Where a loaded kernel came from: the hub repository and the commit."""

    repo_id: str
    revision: str


class BuildLayout(enum.Enum):
    """How a variant's files are laid out (``FILES``; ``ZIP`` for one archive)."""

    FILES = "files"
    ZIP = "zip"


class KernelName(str):
    """A kernel's name; ``python_name`` is the name of its Python package."""

    @property
    def python_name(self) -> str:
        return self.replace("-", "_")


class Backend(enum.Enum):
    """A build's backend, as the ecosystem's ``kernels.Backend`` names it (its members and
    values; ``str()`` is the lower-case name a variant uses)."""

    CANN = "CANN"
    CPU = "CPU"
    CUDA = "CUDA"
    Metal = "Metal"
    Neuron = "Neuron"
    ROCm = "ROCm"
    TPU = "TPU"
    XPU = "XPU"

    def __str__(self) -> str:
        return self.value.lower()

    @staticmethod
    def from_str(s: str) -> Backend:
        """The member named ``s`` (any case; ``npu`` is Ascend's CANN); ValueError else."""
        name = "cann" if s.lower() == "npu" else s.lower()
        for member in Backend:
            if member.value.lower() == name:
                return member
        raise ValueError(f"unknown backend {s!r}; known: "
                         f"{', '.join(str(m) for m in Backend)}")


class BackendInfo(Record, frozen=True):
    """The backend a build is for, and the GPU architectures it declares.

    ``backend_type`` is a :class:`Backend`, None for a backend-agnostic build
    (``universal``), as kernels 0.19.1 returns."""

    backend_type: Backend | None
    archs: list[str] | None


class Digest(Record, frozen=True):
    """A build's file digests: ``files`` maps a relative path to its base64 sha256."""

    algorithm: str
    files: dict[str, str]


class Metadata:
    """A variant's ``metadata.json`` with the ecosystem's property names."""

    def __init__(self, parsed: _metadata.Metadata) -> None:
        self._m = parsed

    @staticmethod
    def read_from_file(metadata_path: Path | str) -> Metadata:
        """Parse ``metadata.json`` at ``metadata_path`` (ValueError on any problem)."""
        path = Path(metadata_path)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
        return Metadata(_metadata.parse_metadata(raw, str(path)))

    @staticmethod
    def from_bytes(data: bytes) -> Metadata:
        """Parse ``metadata.json`` from its bytes (ValueError on any problem)."""
        return Metadata(_metadata.parse_metadata(bytes(data), "metadata.json"))

    @property
    def id(self) -> str:
        return self._m.id

    @property
    def name(self) -> KernelName:
        return KernelName(self._m.name)

    @property
    def version(self) -> int | None:
        return self._m.version

    @property
    def build_layout(self) -> BuildLayout:
        return BuildLayout(str(self._m.extra.get("build-layout", "files")).lower())

    @property
    def kernels_minver(self) -> str | None:
        value = self._m.extra.get("kernels-minver")
        return str(value) if value is not None else None

    @property
    def license(self) -> str | None:
        return self._m.license

    @property
    def upstream(self) -> str | None:
        return self._optional("upstream")

    @property
    def source(self) -> str | None:
        return self._optional("source")

    @property
    def python_depends(self) -> list[str]:
        return list(self._m.python_depends)

    @property
    def kernel_depends(self) -> list[Any]:
        deps = self._m.extra.get("kernel-depends")
        return list(deps) if isinstance(deps, list) else []

    @property
    def backend(self) -> BackendInfo:
        kind = self._m.backend.type
        return BackendInfo(None if kind == "universal" else Backend.from_str(kind),
                           list(self._m.backend.archs) or None)

    @property
    def digest(self) -> Digest | None:
        files = self._m.digest_files
        return Digest(_metadata.DIGEST_ALGORITHM, dict(files)) if files else None

    @property
    def provenance(self) -> dict[str, Any] | None:
        return dict(self._m.provenance) or None

    def _optional(self, key: str) -> str | None:
        value = self._m.extra.get(key)
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"Metadata(id={self.id!r}, name={self._m.name!r}, version={self.version!r})"


class LoadedKernel(Record, frozen=True):
    """A kernel imported into this process: its metadata, module, and (for a hub
    kernel) the repository and commit it came from."""

    metadata: Metadata
    module: ModuleType
    repo_info: RepoInfo | None


def _repo_info(path: Path) -> RepoInfo | None:
    """The repository and commit of a variant in the cache (its path says:
    ``<cache>/<hub>/<org>/<name>/<commit>/<variant>``); None for a local build."""
    from .. import settings
    try:
        parts = path.resolve().relative_to(settings.cache_dir().resolve()).parts
    except ValueError:
        return None
    if len(parts) != 5:
        return None
    _, org, name, commit, _ = parts
    return RepoInfo(f"{org}/{name}", commit)


def get_loaded_kernels() -> list[LoadedKernel]:
    """Every kernel variant directory this process has loaded (a new list each call):
    like kernels 0.19.1, one entry per path, so a local load of a build already loaded
    from the hub is listed too (both name the one module)."""
    from ..load import importer
    found = []
    for loaded in importer.loads():
        parsed = _metadata.read_metadata(loaded.path)
        found.append(LoadedKernel(Metadata(parsed), loaded.module, _repo_info(loaded.path)))
    return found


class KernelVariant(Record, frozen=True):
    """One build variant: ``variant_str`` is its name; the parsed fields (``backend``,
    ``torch``, ``arch``, ``os``) are kernelhub's :class:`~kernelhub.formats.variants.Variant`."""

    variant_str: str
    parsed: Variant | None

    def __getattr__(self, name: str) -> Any:
        if self.parsed is None:
            raise AttributeError(name)
        return getattr(self.parsed, name)


class VariantAccepted(Record, frozen=True):
    """A variant this system can load."""

    variant: KernelVariant


class VariantRejected(Record, frozen=True):
    """A variant this system cannot load, and why."""

    variant: KernelVariant
    reason: str


def _variant(name: str) -> KernelVariant:
    try:
        return KernelVariant(name, parse_variant(name))
    except ValueError:
        return KernelVariant(name, None)


def get_kernel_variants(repo_id: str, *, revision: str | None = None,
                        version: int | str | None = None,
                        backend: str | None = None) -> list[VariantAccepted | VariantRejected]:
    """Every build variant of ``repo_id`` at the resolved commit, judged for this
    system: accepted ones first, the one a load would choose leading."""
    from .. import api
    selection = api.resolve_kernel(repo_id, version, revision, backend=backend).selection
    decisions: list[VariantAccepted | VariantRejected] = [
        VariantAccepted(_variant(n)) for n in selection.ranked]
    decisions += [VariantRejected(_variant(n), why)
                  for n, why in sorted(selection.rejected.items())]
    return decisions
