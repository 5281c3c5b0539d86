"""Per-backend compile steps: which tool compiles which source of a GPU part, with what.

:mod:`render` owns the variant-wide decisions (defines, includes, link line, templates);
this module owns what differs per device toolchain:

- **CUDA** (nvcc): ``.cu`` → object, one ``-gencode`` per capability (the part's
  ``cuda-capabilities`` narrowed to what this nvcc supports; by default all of them,
  with PTX of the newest so future GPUs can JIT it).
- **ROCm** (hipcc): ``.cu`` sources are hipified first when ``hipify-perl`` is present
  (ninja step ``hip/<src>.hip``), otherwise hipcc compiles them as HIP directly
  (``-x hip``: trees written for both platforms, with ``#ifdef USE_ROCM``). ``.hip`` and
  the part's ``.cpp`` go through hipcc too, one ``--offload-arch`` per ``rocm-archs``.
- **XPU** (icpx): part sources with ``-fsycl`` (plus ``sycl-flags``); icpx is also the
  C++ compiler and linker of the variant, as torch's own XPU build does.
- **Metal** (xcrun metal, clang++): ``.metal`` → ``.air`` → one ``.metallib``, embedded
  into the shared library by a generated assembly file (``.incbin``) so a variant stays
  one ``.so``; ``.mm`` compiled as Objective-C++ with ARC.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..manifest import KernelManifest, KernelPart
from ..plan.cuda_archs import gencode_flags
from ..plan.toolchains import Toolchain, Toolchains

CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx"})
CUDA_SUFFIXES = frozenset({".cu"})
HIP_SUFFIXES = frozenset({".hip"})
METAL_SUFFIXES = frozenset({".metal"})
OBJCXX_SUFFIXES = frozenset({".mm"})

ROCM_DEFAULT_ARCHS: tuple[str, ...] = (
    "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201",
)
"""Used when a ROCm part names no ``rocm-archs``: Instinct MI200/MI300/MI350 and
RDNA3/RDNA4, the GPUs ROCm 7 supports for compute."""
ROCM_DEFINES: tuple[str, ...] = ("-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1")
"""What torch's ROCm headers expect from every translation unit that includes them."""
SYCL_DEFAULT_FLAGS: tuple[str, ...] = ("-fsycl", "-fsycl-targets=spir64")
"""Portable SPIR-V, JIT-compiled by the driver for any Intel GPU; AOT targets
(``-fsycl-targets=spir64_gen -Xs '-device …'``) go in the part's ``sycl-flags``."""
METALLIB_NAME = "kernels.metallib"
METAL_STD = "-std=metal3.1"
"""The Metal language of macOS 14: the loader's METAL_MIN_MACOS follows from it."""


@dataclass(frozen=True)
class DeviceTools:
    """The device toolchain a variant's build runs (paths as strings; None = absent)."""

    nvcc: str | None = None
    cuda_capabilities: tuple[str, ...] = ()
    """What this nvcc can compile (``nvcc --list-gpu-code``), oldest first."""
    hipcc: str | None = None
    hipify: str | None = None
    """hipify-perl, when installed; None compiles .cu sources as HIP directly."""
    rocm_root: str | None = None
    icpx: str | None = None
    xcrun: str | None = None


def device_tools(found: Toolchains, backend: str | None) -> DeviceTools:
    """The DeviceTools of one backend from what toolchain detection found on this host."""
    def path(tool: Toolchain | None) -> str | None:
        return str(tool.path) if tool is not None else None

    if backend == "cuda":
        return DeviceTools(nvcc=path(found.nvcc))
    if backend == "rocm":
        root = str(found.hipcc.path.resolve().parent.parent) if found.hipcc else None
        return DeviceTools(hipcc=path(found.hipcc), hipify=path(found.hipify), rocm_root=root)
    if backend == "xpu":
        return DeviceTools(icpx=path(found.icpx))
    if backend == "metal":
        # Metal is found through xcrun, which the build runs (from PATH) for each step.
        return DeviceTools(xcrun="xcrun" if found.metal else None)
    return DeviceTools()


@dataclass(frozen=True)
class CompileUnit:
    """One ninja build edge: inputs → output with a rule and flags."""

    source: Path
    """The kernel-tree source this step starts from (or a generated file)."""
    object: str
    """Output, relative to the work dir."""
    rule: str
    flags: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    """Explicit inputs when they are not ``source`` (work-dir relative or absolute)."""
    implicit: tuple[str, ...] = ()
    """Files whose change must redo this step although they are not on its command line."""
    link: bool = True
    """Whether the output goes on the link line (False for intermediate steps)."""

    @property
    def input_paths(self) -> tuple[str, ...]:
        return self.inputs or (str(self.source),)


def _unit(kernel: KernelManifest, src: str, rule: str, flags: list[str],
          suffix: str = ".o") -> CompileUnit:
    return CompileUnit(kernel.root / src, f"obj/{Path(src).as_posix()}{suffix}", rule,
                       tuple(flags))


def cuda_units(kernel: KernelManifest, part: KernelPart, base: list[str],
               includes: list[str], tools: DeviceTools) -> list[CompileUnit]:
    """nvcc for .cu, the host compiler for the part's C++ files."""
    units = []
    for src in part.src:
        suffix = Path(src).suffix
        if suffix in CXX_SUFFIXES:
            units.append(_unit(kernel, src, "cxx", [*base, *part.cxx_flags, *includes]))
        elif suffix in CUDA_SUFFIXES:
            # nvcc passes host-only flags through -Xcompiler; the rest of base it understands.
            flags = [f for f in base if f != "-fPIC"]
            flags += ["-Xcompiler", "-fPIC", "--expt-relaxed-constexpr"]
            flags += gencode_flags(part.cuda_capabilities, tools.cuda_capabilities)
            units.append(_unit(kernel, src, "nvcc", [*flags, *part.cuda_flags, *includes]))
    return units


def rocm_units(kernel: KernelManifest, part: KernelPart, base: list[str],
               includes: list[str], tools: DeviceTools) -> list[CompileUnit]:
    """hipcc for every source of a ROCm part; .cu hipified first when hipify-perl exists."""
    offload = [f"--offload-arch={arch}" for arch in (part.rocm_archs or ROCM_DEFAULT_ARCHS)]
    flags = [*base, *ROCM_DEFINES, *offload, *part.hip_flags, *includes]
    units = []
    for src in part.src:
        suffix = Path(src).suffix
        if suffix in CUDA_SUFFIXES and tools.hipify:
            hipified = f"hip/{Path(src).as_posix()}.hip"
            units.append(CompileUnit(kernel.root / src, hipified, "hipify", (), link=False))
            # The hipified copy lives in the work dir: its relative includes still
            # resolve against the original source directory.
            origin = f"-I{(kernel.root / src).parent}"
            units.append(CompileUnit(kernel.root / src, f"obj/{Path(src).as_posix()}.o",
                                     "hipcc", (*flags, origin), inputs=(hipified,)))
        elif suffix in CUDA_SUFFIXES:
            units.append(_unit(kernel, src, "hipcc", ["-x", "hip", *flags]))
        elif suffix in HIP_SUFFIXES or suffix in CXX_SUFFIXES:
            units.append(_unit(kernel, src, "hipcc", [*flags, *part.cxx_flags]))
    return units


def xpu_units(kernel: KernelManifest, part: KernelPart, base: list[str],
              includes: list[str]) -> list[CompileUnit]:
    """icpx -fsycl for the part's C++ sources (SYCL kernels are plain C++ files)."""
    sycl = [*SYCL_DEFAULT_FLAGS, *part.sycl_flags]
    flags = [*base, *sycl, *part.cxx_flags, *includes]
    return [_unit(kernel, src, "cxx", flags) for src in part.src
            if Path(src).suffix in CXX_SUFFIXES]


def metallib_namespace(vid: str) -> str:
    """The C++ namespace of the embedded metallib (``EMBEDDED_METALLIB_NAMESPACE``)."""
    return f"{vid}_metallib_embed"


def metal_units(kernel: KernelManifest, part: KernelPart, base: list[str],
                includes: list[str], generated: Path, vid: str) -> list[CompileUnit]:
    """.metal → .air (metal), all .air → one metallib, embedded; .mm as Objective-C++.

    Host sources get the ecosystem's two defines for the embedded library:
    ``EMBEDDED_METALLIB_HEADER`` (the generated header to include) and
    ``EMBEDDED_METALLIB_NAMESPACE`` (where ``metallib_data``/``metallib_data_len`` live).
    """
    base = [*base, f'-DEMBEDDED_METALLIB_HEADER="{generated / "metallib.h"}"',
            f"-DEMBEDDED_METALLIB_NAMESPACE={metallib_namespace(vid)}"]
    units: list[CompileUnit] = []
    for src in part.src:
        suffix = Path(src).suffix
        if suffix in METAL_SUFFIXES:
            metal_flags = (METAL_STD, *_metal_includes(includes))
            units.append(CompileUnit(kernel.root / src, f"obj/{Path(src).as_posix()}.air",
                                     "metal", metal_flags, link=False))
        elif suffix in OBJCXX_SUFFIXES:
            objcxx_flags = ["-x", "objective-c++", "-fobjc-arc", *base, *part.cxx_flags, *includes]
            units.append(_unit(kernel, src, "cxx", objcxx_flags))
        elif suffix in CXX_SUFFIXES:
            units.append(_unit(kernel, src, "cxx", [*base, *part.cxx_flags, *includes]))
    airs = [u.object for u in units if u.rule == "metal"]
    return [*units, *metallib_units(airs, generated)]


def _metal_includes(includes: list[str]) -> list[str]:
    # The Metal compiler gets the kernel's own include dirs only: torch's headers are C++.
    return [f for f in includes if f.startswith("-I")]


def metallib_units(airs: list[str], generated: Path) -> list[CompileUnit]:
    """Link the .air files into one metallib and embed it through generated/metallib.S."""
    if not airs:
        return []
    metallib = f"obj/{METALLIB_NAME}"
    embed = generated / "metallib.S"
    return [
        CompileUnit(embed, metallib, "metallib", (), inputs=tuple(airs), link=False),
        CompileUnit(embed, "obj/metallib.S.o", "cxx", (), implicit=(metallib,)),
    ]
