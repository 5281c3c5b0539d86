"""Render one variant's build: generated sources and a ninja file, from jinja2 templates.

Kernel trees of the ecosystem include a generated ``registration.h`` and expect a
generated ``_ops.py``; the compile itself is a ``build.ninja`` so that ninja does the
incremental work (objects are reused, headers tracked through depfiles). This module
only decides flags and writes files; :mod:`build` runs ninja.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
from kernelhub.formats.variants import Variant, VariantKind

from ..errors import RenderError
from ..manifest import KernelManifest, KernelPart
from ..plan.cuda_archs import supported_capabilities
from ..plan.torch_env import TorchEnv, minor_str
from .backends import (
    CXX_SUFFIXES,
    ROCM_DEFINES,
    CompileUnit,
    DeviceTools,
    cuda_units,
    metal_units,
    metallib_namespace,
    rocm_units,
    xpu_units,
)
from .portable import (
    HEADER_NAME,
    header_context,
    path_maps,
    pinning,
    settings_token,
    stable_cuda_sources,
    with_compat_header,
    with_prefix_maps,
)

BACKEND_DEFINES = {
    "cpu": "CPU_KERNEL",
    "cuda": "CUDA_KERNEL",
    "rocm": "ROCM_KERNEL",
    "metal": "METAL_KERNEL",
    "xpu": "XPU_KERNEL",
}
PY_LIMITED_API = "0x03090000"
"""The .so is tagged abi3, so only CPython's limited API (3.9+) may be used."""
CXX_STANDARD = "-std=c++20"
"""torch 2.13's headers need C++20 (its own cpp_extension passes -std=c++20)."""

GENERATED_DIR = "generated"


@dataclass(frozen=True)
class RenderedBuild:
    """What render wrote into the work dir."""

    work_dir: Path
    so_name: str | None
    """The shared library ninja builds (``_<id>.abi3.so``); None for pure-Python builds."""
    ops_py: Path
    units: tuple[CompileUnit, ...]


def so_name_for(vid: str) -> str:
    return f"{vid}.abi3.so"


def stable_abi_target(minimum: str) -> str:
    """``TORCH_TARGET_VERSION`` for a stable-ABI minimum such as '2.13'.

    torch/csrc/stable/version.h encodes major.minor in the top two bytes of a 64-bit
    value; targeting it keeps the build off stable APIs newer than the minimum.
    """
    major, minor = (int(p) for p in minimum.split(".")[:2])
    return f"0x{major:02x}{minor:02x}000000000000"


@dataclass(frozen=True)
class VariantFlags:
    """A variant's flags, worked out once per build: hashed into its id, then rendered."""

    parts: tuple[KernelPart, ...]
    """The parts this variant compiles."""
    defines: tuple[str, ...]
    """Optimisation, language standard and defines every translation unit gets."""
    link: tuple[str, ...]
    """The link line's flags."""
    settings: tuple[str, ...]
    """What shapes the build, without paths or the id: what the id hashes."""


def variant_flags(
    kernel: KernelManifest, variant: Variant, env: TorchEnv, tools: DeviceTools | None = None
) -> VariantFlags:
    """The flags of one variant's build (``tools`` only adds library paths to the link)."""
    parts = _parts(kernel, variant)
    defines = tuple(_define_flags(kernel, variant, env))
    link = tuple(_link_flags(kernel, variant, env, parts, tools))
    settings = [*defines, *kernel.torch.cxx_flags]
    for part in parts:
        settings += [f"[{part.name}]", *part.cxx_flags, *part.cuda_flags, *part.cuda_capabilities]
    settings += [f for f in link if not f.startswith("-L")]
    if variant.os == "linux":
        settings.append(settings_token(variant, compat_header(variant)))
    return VariantFlags(parts, defines, link, tuple(settings))


def _parts(kernel: KernelManifest, variant: Variant) -> tuple[KernelPart, ...]:
    """The parts this variant compiles: its backend's, minus parts outside their CUDA range."""
    assert variant.backend is not None and variant.compute is not None
    toolkit = variant.compute.version
    return tuple(
        p for p in kernel.parts_for(variant.backend)
        if not toolkit or _in_range(toolkit, p.cuda_minver, p.cuda_maxver)
    )


def _in_range(version: tuple[int, ...], low: str | None, high: str | None) -> bool:
    def key(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in text.split(".")[:2])

    return (low is None or version >= key(low)) and (high is None or version <= key(high))


def _define_flags(kernel: KernelManifest, variant: Variant, env: TorchEnv) -> list[str]:
    assert variant.backend is not None
    flags = [
        "-O3",
        CXX_STANDARD,
        "-fPIC",
        f"-D{BACKEND_DEFINES[variant.backend]}",
        f"-DPy_LIMITED_API={PY_LIMITED_API}",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(env.cxx11_abi)}",
    ]
    if variant.kind is VariantKind.STABLE_ABI:
        assert variant.torch is not None
        flags.append(f"-DTORCH_TARGET_VERSION={stable_abi_target(minor_str(variant.torch))}")
    return flags


def _uses_openmp(kernel: KernelManifest, parts: tuple[KernelPart, ...]) -> bool:
    flags = (*kernel.torch.cxx_flags, *(f for p in parts for f in p.cxx_flags))
    return any(f.startswith("-fopenmp") for f in flags)


_GPU_TORCH_LIBS = {
    "cuda": ("-lc10_cuda", "-ltorch_cuda"),
    "rocm": ("-lc10_hip", "-ltorch_hip"),
    "xpu": ("-lc10_xpu", "-ltorch_xpu"),
}
"""torch's per-backend libraries: ATen device code and the stream/device C shim."""


def _link_flags(
    kernel: KernelManifest, variant: Variant, env: TorchEnv, parts: tuple[KernelPart, ...],
    tools: DeviceTools | None = None,
) -> list[str]:
    tools = tools or DeviceTools()
    flags = [f"-L{env.library_dir}"]
    if variant.backend == "cuda" and tools.nvcc and (cuda_lib := cuda_library_dir(tools.nvcc)):
        # libcudart from the toolkit that compiled the kernel; at run time its soname
        # binds to the CUDA runtime torch already loaded.
        flags.append(f"-L{cuda_lib}")
    if variant.backend == "rocm" and tools.rocm_root:
        flags.append(f"-L{Path(tools.rocm_root) / 'lib'}")
    gpu_libs = _GPU_TORCH_LIBS.get(variant.backend or "", ())
    if variant.kind is VariantKind.STABLE_ABI:
        # Only torch's C shim (aoti_torch_*, in libtorch_cpu; the device-stream parts in
        # libtorch_<gpu>) may be referenced. It must still be a DT_NEEDED entry: torch
        # loads its libraries RTLD_LOCAL, so their symbols are not visible to a library
        # that does not name them. --as-needed drops what the kernel does not use. The
        # sonames carry no version, so the same .so binds to any later torch.
        flags += ["-Wl,--as-needed", "-lc10", "-ltorch_cpu", *gpu_libs[1:]]
    else:
        flags += ["-lc10", "-ltorch", "-ltorch_cpu", *gpu_libs]
    if variant.backend == "cuda":
        flags.append("-lcudart")
    elif variant.backend == "rocm":
        flags.append("-lamdhip64")
    elif variant.backend == "xpu":
        flags.append("-fsycl")
    elif variant.backend == "metal":
        # Python's symbols resolve at load time (abi3), frameworks give Metal/Foundation.
        flags += ["-Wl,-undefined,dynamic_lookup", "-framework", "Metal",
                  "-framework", "Foundation"]
    if _uses_openmp(kernel, parts):
        flags.append("-fopenmp")
    return flags


def cuda_library_dir(nvcc: str) -> Path | None:
    """The toolkit's lib64 holding libcudart. nvcc on PATH may be a wrapper script
    outside the toolkit, so $CUDA_HOME / $CUDA_PATH and the default install come first."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    candidates = [Path(h) for h in homes if h]
    candidates += [Path(nvcc).resolve().parent.parent, Path("/usr/local/cuda")]
    return next((c / "lib64" for c in candidates if (c / "lib64" / "libcudart.so").exists()),
                None)


def _include_flags(
    kernel: KernelManifest, dirs: Iterable[str], generated: Path, env: TorchEnv
) -> list[str]:
    flags = [f"-I{generated}"]
    flags += [f"-I{kernel.root / d}" for d in dict.fromkeys(dirs)]
    # torch's and Python's headers are not ours to warn about.
    for d in (*env.include_dirs, env.python_include_dir):
        flags += ["-isystem", str(d)]
    return flags


def _backend_flags(variant: Variant, tools: DeviceTools) -> list[str]:
    """Flags every translation unit of the variant needs for its backend's torch headers."""
    if variant.backend == "rocm":
        rocm_include = [f"-isystem{Path(tools.rocm_root) / 'include'}"] if tools.rocm_root else []
        return [*ROCM_DEFINES, *rocm_include]
    if variant.backend == "cuda" and tools.nvcc and (cuda_lib := cuda_library_dir(tools.nvcc)):
        # torch's CUDA headers (c10/cuda, ATen/cuda) include the toolkit's runtime headers.
        return ["-isystem", str(cuda_lib.parent / "include")]
    return []


def compile_units(
    kernel: KernelManifest, variant: Variant, vid: str, env: TorchEnv, generated: Path,
    tools: DeviceTools | None = None, flags: VariantFlags | None = None,
) -> tuple[CompileUnit, ...]:
    """The build steps of this variant, each with its complete command-line flags."""
    tools = tools or DeviceTools()
    flags = flags or variant_flags(kernel, variant, env, tools)
    base = [*flags.defines, f"-DTORCH_EXTENSION_NAME={vid}"]
    parts = flags.parts
    all_includes = (*kernel.torch.include, *(i for p in parts for i in p.include))
    units: list[CompileUnit] = []
    # The torch binding sees every part's headers: it declares the parts' functions.
    for src in kernel.torch.src:
        if Path(src).suffix in CXX_SUFFIXES:
            unit_flags = [*base, *_backend_flags(variant, tools), *kernel.torch.cxx_flags,
                          *_include_flags(kernel, all_includes, generated, env)]
            units.append(CompileUnit(kernel.root / src, f"obj/{Path(src).as_posix()}.o", "cxx",
                                     tuple(unit_flags)))
    for part in parts:
        includes = _include_flags(kernel, (*part.include, *kernel.torch.include), generated, env)
        if variant.backend == "cuda":
            units += cuda_units(kernel, part, base, includes, tools)
        elif variant.backend == "rocm":
            units += rocm_units(kernel, part, base, includes, tools)
        elif variant.backend == "xpu":
            units += xpu_units(kernel, part, base, includes)
        elif variant.backend == "metal":
            units += metal_units(kernel, part, base, includes, generated, vid)
        else:
            units += [CompileUnit(kernel.root / src, f"obj/{Path(src).as_posix()}.o", "cxx",
                                  (*base, *part.cxx_flags, *includes))
                      for src in part.src if Path(src).suffix in CXX_SUFFIXES]
    cuda_lib = cuda_library_dir(tools.nvcc) if variant.backend == "cuda" and tools.nvcc else None
    maps = path_maps(kernel.name, kernel.root, generated.parent, env,
                     cuda_lib.parent / "include" if cuda_lib else None)
    mapped = with_prefix_maps(units, maps)
    return with_compat_header(mapped, generated / HEADER_NAME) if pinning(variant) else mapped


def compat_header(variant: Variant) -> str:
    """The header that binds a Linux build to manylinux_2_28 symbol versions
    (:mod:`kernelhub_builder.compile.portable`)."""
    return template_environment().get_template("glibc_compat.h.j2").render(
        **header_context(variant))


def template_environment() -> jinja2.Environment:
    """The builder's jinja2 templates (``templates/``), strict about undefined names."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kernelhub_builder.compile", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ninja_path"] = _ninja_escape
    env.filters["shell_join"] = lambda flags: _ninja_escape_dollar(shlex.join(flags))
    return env


def _ninja_escape(path: object) -> str:
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_escape_dollar(text: str) -> str:
    return text.replace("$", "$$")


def render_ops_py(variant: Variant, vid: str, so_name: str | None) -> str:
    return template_environment().get_template("_ops.py.j2").render(
        variant=variant.name, ext_name=vid, so_name=so_name
    )


_RULE_TOOLS = {"nvcc": "nvcc", "hipcc": "hipcc", "hipify": "hipify", "metal": "xcrun",
               "metallib": "xcrun"}
_TOOL_HINTS = {
    "nvcc": "install the CUDA toolkit or set CUDA_HOME",
    "hipcc": "install ROCm or set ROCM_PATH",
    "hipify": "install hipify-perl (ROCm's hipify package)",
    "xcrun": "install Xcode (xcrun metal)",
    "icpx": "source oneAPI's setvars.sh",
}


def _complete_tools(variant: Variant, tools: DeviceTools | None) -> DeviceTools:
    """Fill in what the caller did not: nvcc's arch list."""
    tools = tools or DeviceTools()
    if variant.backend == "cuda" and tools.nvcc and not tools.cuda_capabilities:
        assert variant.compute is not None
        toolkit = (variant.compute.version[0], variant.compute.version[1])
        tools = replace(tools, cuda_capabilities=supported_capabilities(tools.nvcc, toolkit))
    return tools


def _check_tools(kernel: KernelManifest, variant: Variant, units: tuple[CompileUnit, ...],
                 tools: DeviceTools) -> None:
    needed = {_RULE_TOOLS[u.rule] for u in units if u.rule in _RULE_TOOLS}
    if variant.backend == "xpu":
        needed.add("icpx")
    for tool in sorted(needed):
        if not getattr(tools, tool):
            raise RenderError(
                f"{kernel.name}: variant {variant.name} needs {tool}, which was not found; "
                f"{_TOOL_HINTS[tool]}"
            )


def render_variant(
    kernel: KernelManifest,
    variant: Variant,
    vid: str,
    env: TorchEnv,
    *,
    cxx: str,
    work_dir: Path,
    tools: DeviceTools | None = None,
    flags: VariantFlags | None = None,
) -> RenderedBuild:
    """Write registration.h, _ops.py and build.ninja (and Metal's embedding) for a variant.

    ``tools`` names the device toolchain (none: a CPU build); ``flags`` are the ones the
    build's id was computed from (worked out here when the caller has none).
    """
    tools = _complete_tools(variant, tools)
    flags = flags or variant_flags(kernel, variant, env, tools)
    generated = work_dir / GENERATED_DIR
    generated.mkdir(parents=True, exist_ok=True)
    templates = template_environment()
    so_name = so_name_for(vid)
    units = stable_cuda_sources(compile_units(kernel, variant, vid, env, generated, tools, flags))
    if not units:
        raise RenderError(
            f"{kernel.name}: variant {variant.name} has no C++ sources to compile; list them "
            "under [torch] src or [kernel.<part>] src in build.toml"
        )
    _check_tools(kernel, variant, units, tools)
    _write_if_changed(
        generated / "registration.h",
        templates.get_template("registration.h.j2").render(
            variant=variant.name, ext_name=vid,
            stable_abi=variant.kind is VariantKind.STABLE_ABI,
        ),
    )
    if any(u.rule == "metallib" for u in units):
        metallib = next(u.object for u in units if u.rule == "metallib")
        for name in ("metallib.S", "metallib.h"):
            _write_if_changed(generated / name, templates.get_template(f"{name}.j2").render(
                variant=variant.name, ext_name=vid, metallib=work_dir / metallib,
                namespace=metallib_namespace(vid)))
    if pinning(variant):
        _write_if_changed(generated / HEADER_NAME, compat_header(variant))
    ops_py = generated / "_ops.py"
    _write_if_changed(ops_py, render_ops_py(variant, vid, so_name))
    # XPU compiles and links with icpx (SYCL needs its driver to link); ROCm links with
    # hipcc so the HIP runtime and device code are handled the way AMD intends.
    compiler = tools.icpx if variant.backend == "xpu" and tools.icpx else cxx
    linker = tools.hipcc if variant.backend == "rocm" and tools.hipcc else compiler
    rules = {u.rule for u in units}
    _write_if_changed(
        work_dir / "build.ninja",
        templates.get_template("build.ninja.j2").render(
            variant=variant.name, cxx=shlex.quote(compiler), linker=shlex.quote(linker),
            nvcc=_quoted(tools.nvcc, "nvcc" in rules),
            hipcc=_quoted(tools.hipcc, "hipcc" in rules),
            hipify=_quoted(tools.hipify, "hipify" in rules),
            xcrun=_quoted(tools.xcrun, bool(rules & {"metal", "metallib"})),
            units=units, so_name=so_name,
            ldflags=list(flags.link),
        ),
    )
    return RenderedBuild(work_dir, so_name, ops_py, units)


def _quoted(tool: str | None, used: bool) -> str | None:
    return shlex.quote(tool) if tool and used else None


def _write_if_changed(path: Path, text: str) -> None:
    """Keep the mtime of unchanged files, so ninja does not rebuild what they feed."""
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)
