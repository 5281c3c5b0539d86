"""Typed manifests: everything downstream of parsing takes these, never raw TOML.

``kernels.toml`` (the project: which kernels, the default matrix, the hub) becomes a
:class:`Project`; each ``kernels-src/<k>/build.toml`` (edition-5 schema plus our
``general.release``) becomes a :class:`KernelManifest`. Parsing and validation live
in :mod:`kernelhub_builder.manifest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Matrix:
    """The default build matrix from kernels.toml; build.toml narrows it per kernel."""

    torch: tuple[str, ...] = ("2.13", "2.14")
    """torch major.minor versions."""
    backends: tuple[str, ...] = ("cpu", "cuda", "rocm", "xpu", "metal")
    systems: tuple[str, ...] = ("x86_64-linux", "aarch64-linux", "aarch64-darwin")
    cuda: tuple[str, ...] = ("13.0",)
    rocm: tuple[str, ...] = ("7.0",)
    xpu: tuple[str, ...] = ("2025.2",)


@dataclass(frozen=True)
class Project:
    """kernels.toml."""

    root: Path
    kernels: tuple[str, ...]
    """Kernel directory names under kernels-src/ (or paths relative to root)."""
    org: str = "kernels-community"
    hub: str | None = None
    """Hub target: None → default LocalHub; a path → LocalHub there; "hf" or an http(s):// endpoint → HfHub."""
    matrix: Matrix = field(default_factory=Matrix)
    torch_pins: dict[str, str] = field(default_factory=dict)
    """torch major.minor → pip requirement used for its toolchain env (e.g. 'torch==2.14.1')."""
    build_dir: Path | None = None
    """Where built variants go; default <root>/build."""
    releases: dict[str, str] = field(default_factory=dict)
    """Kernel name → semver release (kernels.toml ``[releases]``)."""

    def kernel_dir(self, name: str) -> Path:
        """A bare name lives under kernels-src/; an entry with a slash is a path from root;
        ``"."`` is the root itself (a standalone kernel repository)."""
        if name == ".":
            return self.root
        if "/" in name:
            return self.root / name
        return self.root / "kernels-src" / name


DEFAULT_PYEXT: tuple[str, ...] = ("py", "pyi")
"""What ``[torch] pyext`` is when build.toml does not say: the package's Python files."""


@dataclass(frozen=True)
class TorchExt:
    """[torch] (compiled) or [torch-noarch] (pure Python)."""

    noarch: bool = False
    src: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    pyext: tuple[str, ...] = DEFAULT_PYEXT
    minver: str | None = None
    maxver: str | None = None
    stable_abi: str | None = None
    """None for the regular ABI; otherwise the minimum torch major.minor the build targets
    (with a per-backend table: the lowest of its values)."""
    cxx_flags: tuple[str, ...] = ()
    stable_abi_by_backend: dict[str, str] = field(default_factory=dict)
    """Edition-5 ``[torch.stable-abi]`` table: backend → minimum torch. Backends missing
    from a non-empty table build against the regular (per-torch) ABI."""
    cuda_capabilities: tuple[str, ...] = ()
    """[torch-noarch] only: capabilities the pure-Python kernel supports (metadata)."""
    rocm_archs: tuple[str, ...] = ()
    """[torch-noarch] only: ROCm architectures the pure-Python kernel supports (metadata)."""

    def stable_abi_for(self, backend: str) -> str | None:
        """The stable-ABI minimum torch for one backend, or None for the regular ABI."""
        if self.stable_abi_by_backend:
            return self.stable_abi_by_backend.get(backend)
        return self.stable_abi


@dataclass(frozen=True)
class KernelPart:
    """One [kernel.<part>] table: sources compiled for one backend."""

    name: str
    backend: str
    src: tuple[str, ...]
    depends: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] = ()
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()
    language: str | None = None
    cuda_minver: str | None = None
    """Skip this part when building against an older CUDA toolkit."""
    cuda_maxver: str | None = None
    """Skip this part when building against a newer CUDA toolkit."""


@dataclass(frozen=True)
class KernelManifest:
    """One kernel's build.toml."""

    root: Path
    """The kernel's source directory (where build.toml lives)."""
    name: str
    version: int
    """The major version: the hub branch is v<version>."""
    release: str
    """Semver release; defaults to '<version>.0.0'."""
    backends: tuple[str, ...]
    torch: TorchExt
    parts: tuple[KernelPart, ...] = ()
    license: str | None = None
    repo_id: str | None = None
    """general.hub.repo-id; None → '<project org>/<name>'."""
    python_depends: tuple[str, ...] = ()
    universal: bool = False
    """Legacy edition flag: a pure-Python kernel for any backend (torch-universal)."""
    edition: int | None = None
    """general.edition (5 for current trees); None for legacy trees that predate it."""
    hub_branch: str | None = None
    upstream: tuple[str, ...] = ()
    """general.upstream: where the kernel's code comes from (one URL or a list)."""
    source: str | None = None
    cuda_minver: str | None = None
    """general.cuda.minver: CUDA toolkits older than this are left out of the matrix."""
    cuda_maxver: str | None = None
    """general.cuda.maxver: CUDA toolkits newer than this are left out of the matrix."""
    backend_python_depends: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """general.<backend>.python-depends: extra Python dependencies of one backend."""
    skipped_backends: tuple[str, ...] = ()
    """Backends of the ecosystem schema kernelhub cannot build (neuron, cann), dropped
    from ``backends`` with a warning so the rest of the tree still builds."""

    @property
    def package_dir(self) -> Path:
        """torch-ext/<name>/: the Python package copied into every variant."""
        return self.root / "torch-ext" / self.name.replace("-", "_")

    def parts_for(self, backend: str) -> tuple[KernelPart, ...]:
        return tuple(p for p in self.parts if p.backend == backend)
