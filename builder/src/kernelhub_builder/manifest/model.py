"""Typed manifests: everything downstream of parsing takes these, never raw TOML.

``kernels.toml`` (the project: which kernels, the default matrix, the hub) becomes a
:class:`Project`; each ``build.toml`` becomes a :class:`KernelManifest`, whichever edition
it is written in (the ecosystem's 5 and 6, or the unversioned schema before them).

Each field read from TOML declares its key with :func:`~.keys.toml`; the keys a table
allows are derived from those declarations (:mod:`.keys`), and parsing with its checks
lives in :mod:`.build_toml` and :mod:`.project`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kernelhub.deps import KernelDependency
from kernelhub.formats.zip_layout import LAYOUTS

from .keys import BEFORE_6, toml

# --------------------------------------------------------------------------- kernels.toml


class VariantNames(str, Enum):
    """``[hub] variant-names``: the generations of the ecosystem's variant names a build is
    published under."""

    BOTH = "both"
    """The current and the legacy name: kernels 0.19 loads the first, 0.17/0.18 the second."""
    CURRENT = "current"
    LEGACY = "legacy"


@dataclass(frozen=True)
class Matrix:
    """The default build matrix from kernels.toml; build.toml narrows it per kernel."""

    torch: tuple[str, ...] = toml("matrix.torch", default=("2.13", "2.14"))
    """torch major.minor versions."""
    backends: tuple[str, ...] = toml("matrix.backends",
                                     default=("cpu", "cuda", "rocm", "xpu", "metal"))
    systems: tuple[str, ...] = toml("matrix.systems",
                                    default=("x86_64-linux", "aarch64-linux", "aarch64-darwin"))
    cuda: tuple[str, ...] = toml("matrix.cuda", default=("13.0",))
    rocm: tuple[str, ...] = toml("matrix.rocm", default=("7.0",))
    xpu: tuple[str, ...] = toml("matrix.xpu", default=("2025.2",))


@dataclass(frozen=True)
class Project:
    """kernels.toml."""

    root: Path
    kernels: tuple[str, ...] = toml("kernels")
    """Kernel directory names under kernels-src/ (or paths relative to root)."""
    org: str = toml("hub.org", default="kernels-community")
    hub: str | None = toml("hub.target", default=None)
    """Hub target: None → default LocalHub; a path → LocalHub there; "hf" or an http(s):// endpoint → HfHub."""
    variant_names: VariantNames = toml("hub.variant-names", default=VariantNames.BOTH)
    """Which generations of variant names a build is published under
    (:mod:`kernelhub_builder.ship.names`)."""
    matrix: Matrix = toml(nested=Matrix, default_factory=Matrix)
    torch_pins: dict[str, str] = toml("toolchain.torch", default_factory=dict)
    """torch major.minor → pip requirement used for its toolchain env (e.g. 'torch==2.14.1')."""
    gpu_torch: str | None = toml("toolchain.gpu-torch", default=None)
    """The torch minor whose pin is a build for the matrix's CUDA release: GPU stable-ABI
    variants compile in its env, and the Nix flake's default set builds its CUDA variants.
    None: the newest torch of the matrix. Needed once the newest pin is a torch whose CUDA
    no nvcc here matches (PyPI's torch 2.15.0 is a CUDA 13.2 build; the matrix is 13.0)."""
    build_dir: Path | None = toml("build-dir", default=None)
    """Where built variants go; default <root>/build."""
    releases: dict[str, str] = toml("releases", default_factory=dict)
    """Kernel name → semver release (kernels.toml ``[releases]``)."""

    def kernel_dir(self, name: str) -> Path:
        """A bare name lives under kernels-src/; an entry with a slash is a path from root;
        ``"."`` is the root itself (a standalone kernel repository)."""
        if name == ".":
            return self.root
        if "/" in name:
            return self.root / name
        return self.root / "kernels-src" / name


# --------------------------------------------------------------------------- build.toml

DEFAULT_PYEXT: tuple[str, ...] = ("py", "pyi")
"""What ``[torch] pyext`` is when build.toml does not say: the package's Python files."""

BUILD_LAYOUTS = LAYOUTS
"""``general.build-layout``: the package as files, or zipped into ``<id>.zip``."""

CPP_KINDS = frozenset({"cpp-cpu", "cpp-cuda", "cpp-metal", "cpp-rocm", "cpp-xpu"})
RUST_KINDS = frozenset({"rust-cpu", "rust-cuda-oxide", "rust-cutile"})
OLDEST_KIND = "v1"
"""The part shape of the oldest schema: no ``backend``, a ``language`` of cuda,
cuda-hipify or metal (read as a CUDA or Metal part)."""
PART_KINDS = CPP_KINDS | RUST_KINDS | {OLDEST_KIND}
"""What a ``[kernel.<part>]`` can be: edition 6's ``language`` values (an edition-5 part
with ``backend = "cuda"`` is a ``cpp-cuda`` part), plus the oldest shape."""

_CUDA_PARTS = frozenset({"cpp-cuda", "rust-cuda-oxide", OLDEST_KIND})
_ONLY_6 = frozenset({6})


@dataclass(frozen=True)
class TorchExt:
    """The framework table: ``[torch]`` (compiled) or ``[torch-noarch]`` (pure Python).

    ``[tvm-ffi]`` and ``[mlx-noarch]`` are declared so their keys are known, and refused
    when read: kernelhub builds torch extensions.
    """

    framework: str = "torch"
    """Which table: torch, torch-noarch (or, refused, tvm-ffi and mlx-noarch)."""
    src: tuple[str, ...] = toml("torch.src", "tvm-ffi.src", default=())
    include: tuple[str, ...] = toml("torch.include", "tvm-ffi.include", default=())
    pyext: tuple[str, ...] = toml("torch.pyext", "torch-noarch.pyext", "tvm-ffi.pyext",
                                  new=("mlx-noarch.pyext",), default=DEFAULT_PYEXT)
    minver: str | None = toml("torch.minver", default=None)
    maxver: str | None = toml("torch.maxver", default=None)
    stable_abi: str | None = toml("torch.stable-abi", default=None)
    """None for the regular ABI; otherwise the minimum torch major.minor the build targets
    (with a per-backend table: the lowest of its values)."""
    cxx_flags: tuple[str, ...] = toml("torch.cxx-flags", "tvm-ffi.cxx-flags", default=())
    stable_abi_by_backend: dict[str, str] = field(default_factory=dict)
    """Edition-5 ``[torch.stable-abi]`` table: backend → minimum torch. Backends missing
    from a non-empty table build against the regular (per-torch) ABI."""
    cuda_capabilities: tuple[str, ...] = toml(
        "torch-noarch.cuda_capabilities", old=("torch-noarch.cuda-capabilities",), default=())
    """[torch-noarch] only: capabilities the pure-Python kernel supports (metadata). The
    ecosystem spells the key with an underscore; kernelhub read it with a dash before."""
    rocm_archs: tuple[str, ...] = toml(
        "torch-noarch.rocm_archs", old=("torch-noarch.rocm-archs",), default=())
    """[torch-noarch] only: ROCm architectures the pure-Python kernel supports (metadata)."""

    @property
    def noarch(self) -> bool:
        """A pure-Python kernel: nothing is compiled."""
        return self.framework != "torch"

    def stable_abi_for(self, backend: str) -> str | None:
        """The stable-ABI minimum torch for one backend, or None for the regular ABI."""
        if self.stable_abi_by_backend:
            return self.stable_abi_by_backend.get(backend)
        return self.stable_abi


@dataclass(frozen=True)
class KernelPart:
    """One ``[kernel.<part>]`` table: sources compiled for one backend.

    Edition 6 names a part's kind with ``language`` (``cpp-cuda``); edition 5 with
    ``backend`` (``cuda``, read as ``cpp-cuda``). Paths below are relative to the part.
    """

    name: str
    backend: str = toml("backend", editions=BEFORE_6)
    src: tuple[str, ...] = toml("src", default=())
    language: str = toml("language", editions=frozenset({None, 6}), default="cpp-cuda")
    """The part's kind (edition 6's ``language``); the oldest schema's language (cuda,
    cuda-hipify, metal) is read into it too."""
    depends: tuple[str, ...] = toml("depends", kinds=CPP_KINDS | {OLDEST_KIND}, default=())
    include: tuple[str, ...] = toml("include", kinds=CPP_KINDS | {OLDEST_KIND}, default=())
    cxx_flags: tuple[str, ...] = toml("cxx-flags", kinds=CPP_KINDS, default=())
    cuda_flags: tuple[str, ...] = toml("cuda-flags", kinds=frozenset({"cpp-cuda"}), default=())
    cuda_capabilities: tuple[str, ...] = toml("cuda-capabilities", kinds=_CUDA_PARTS, default=())
    cuda_minver: str | None = toml("cuda-minver", kinds=frozenset({"cpp-cuda"}), default=None)
    """Skip this part when building against an older CUDA toolkit."""
    cuda_maxver: str | None = toml("cuda-maxver", kinds=frozenset({"cpp-cuda"}),
                                   editions=BEFORE_6, default=None)
    """Skip this part when building against a newer CUDA toolkit (kernelhub's own key,
    which edition 6 does not have)."""
    rocm_archs: tuple[str, ...] = toml(
        "rocm-archs", kinds=frozenset({"cpp-rocm", OLDEST_KIND}), default=())
    hip_flags: tuple[str, ...] = toml("hip-flags", kinds=frozenset({"cpp-rocm"}), default=())
    sycl_flags: tuple[str, ...] = toml("sycl-flags", kinds=frozenset({"cpp-xpu"}), default=())
    cargo_manifest: str | None = toml("cargo-manifest", kinds=RUST_KINDS, editions=_ONLY_6,
                                      default=None)
    tileiras_minver: str | None = toml("tileiras-minver", kinds=frozenset({"rust-cutile"}),
                                       editions=_ONLY_6, default=None)


@dataclass(frozen=True)
class KernelManifest:
    """One kernel's build.toml."""

    root: Path
    """The kernel's source directory (where build.toml lives)."""
    name: str = toml("general.name")
    version: int = toml("general.version")
    """The major version: the hub branch is v<version>."""
    release: str = toml("general.release", editions=BEFORE_6)
    """Semver release (kernels.toml ``[releases]``, else kernelhub's older
    ``general.release``, else '<version>.0.0')."""
    backends: tuple[str, ...] = toml("general.backends")
    torch: TorchExt = toml(nested=TorchExt, default_factory=TorchExt)
    parts: tuple[KernelPart, ...] = toml("kernel", default=())
    license: str | None = toml("general.license", default=None)
    repo_id: str | None = toml("general.hub.repo-id", default=None)
    """general.hub.repo-id; None → '<project org>/<name>'."""
    python_depends: tuple[str, ...] = toml("general.python-depends", default=())
    universal: bool = toml("general.universal", "torch.universal", editions=BEFORE_6,
                           default=False)
    """Legacy flag: a pure-Python kernel for any backend (torch-universal)."""
    edition: int | None = toml("general.edition", default=None)
    """general.edition (5 or 6); None for trees that predate it."""
    hub_branch: str | None = toml("general.hub.branch", default=None)
    upstream: tuple[str, ...] = toml("general.upstream", default=())
    """general.upstream: where the kernel's code comes from (one URL or a list)."""
    source: str | None = toml("general.source", default=None)
    cuda_minver: str | None = toml("general.cuda.minver", old=("general.cuda-minver",),
                                   default=None)
    """general.cuda.minver: CUDA toolkits older than this are left out of the matrix."""
    cuda_maxver: str | None = toml("general.cuda.maxver", old=("general.cuda-maxver",),
                                   default=None)
    """general.cuda.maxver: CUDA toolkits newer than this are left out of the matrix."""
    backend_python_depends: dict[str, tuple[str, ...]] = toml(
        "general.cuda.python-depends", "general.xpu.python-depends",
        "general.neuron.python-depends", "general.tpu.python-depends", default_factory=dict)
    """general.<backend>.python-depends: extra Python dependencies of one backend."""
    build_layout: str = toml("general.build-layout", editions=_ONLY_6, default="files")
    """How a variant holds the package: ``files``, or ``zip`` (``<id>.zip``, imported
    from the archive; loaders before the ecosystem's 0.19 cannot read it)."""
    kernel_depends: tuple[KernelDependency, ...] = toml(
        "general.kernel-depends", editions=frozenset({5, 6}), default=())
    """Kernels this one loads at run time, for every backend."""
    backend_kernel_depends: dict[str, tuple[KernelDependency, ...]] = toml(
        "general.cuda.kernel-depends", "general.xpu.kernel-depends",
        "general.neuron.kernel-depends", editions=frozenset({5, 6}), default_factory=dict)
    """general.<backend>.kernel-depends: kernels one backend's variants load too."""
    skipped_backends: tuple[str, ...] = ()
    """Backends of the ecosystem schema kernelhub cannot build (neuron, cann), dropped
    from ``backends`` with a warning so the rest of the tree still builds."""

    @property
    def package_dir(self) -> Path:
        """torch-ext/<name>/: the Python package copied into every variant."""
        return self.root / "torch-ext" / self.name.replace("-", "_")

    def parts_for(self, backend: str) -> tuple[KernelPart, ...]:
        return tuple(p for p in self.parts if p.backend == backend)

    def kernel_depends_for(self, backend: str | None) -> tuple[KernelDependency, ...]:
        """general.kernel-depends plus the backend's own, each repository once."""
        extra = self.backend_kernel_depends.get(backend or "", ())
        return tuple({d.repo_id: d for d in (*self.kernel_depends, *extra)}.values())
