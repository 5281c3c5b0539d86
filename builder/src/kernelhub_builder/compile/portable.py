"""Make a build's binaries independent of the host that built them.

Two jobs with one purpose — a variant built here must be usable everywhere its id says:

**Same bytes from any checkout.** The variant id hashes sources and settings, never
paths, so two checkouts of one commit get the same id; their files must then be the same
bytes too, or ``builder publish`` from the second checkout is refused and a Nix binary
cache would hold two different outputs for one input. A compiler writes absolute paths
into the binary wherever ``__FILE__`` is used (assertions, ``TORCH_CHECK`` in torch's
inline headers) and into debug info; prefix maps rewrite those paths to fixed names.
Timestamps (``__DATE__``) follow ``SOURCE_DATE_EPOCH``. The rest (object order, link
order, file copy order) is already fixed by the sorted manifest and the generated ninja
file.

nvcc is the exception to "flags suffice": it names anonymous namespaces after the
physical path of the translation unit (prefix maps do not apply, symlinks do not help),
so each ``.cu`` is compiled from a copy at a path made of its content digest
(:func:`stable_cuda_sources`), the same in every checkout and build dir.

**Loadable on any manylinux_2_28 system.** This host's gcc 12 / glibc 2.36 make every
kernel ask for two symbol versions newer than manylinux_2_28 allows (measured on all
kernels here): ``exp@GLIBC_2.29`` (also ``log``, ``pow``, ``exp2``, ``log2`` when used)
and ``__libc_single_threaded@GLIBC_2.32`` (read by libstdc++'s headers). A generated
header, forced into every host translation unit, binds the libm functions to their
previous versions and hides the libstdc++ read (see ``templates/glibc_compat.h.j2``).
Nothing else about the build changes: same compiler, same flags, same libstdc++ ABI at
the torch boundary, so it serves ATen (C++ ABI) and stable-ABI kernels alike. Symbols
that have no older version (a libstdc++ symbol newer than GLIBCXX 3.4.24,
``pthread_*@GLIBC_2.34``) cannot be pinned: ``builder check`` still names them, and such
a kernel needs ``--allow-host-abi`` or an older toolchain.

``KERNELHUB_HOST_GLIBC=1`` turns the pinning off (a binary for this machine's glibc only;
used to measure what pinning costs). The choice is part of the variant id.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from kernelhub.formats.variants import Variant

from ..plan.torch_env import TorchEnv
from .backends import CompileUnit

SOURCE_DATE_EPOCH = "1"
"""Used when the caller sets none: the same instant Nix gives every store file."""

#: Rules whose compiler is GCC/Clang-compatible and takes prefix maps directly.
_DIRECT_RULES = frozenset({"cxx", "hipcc"})
#: Rules that pass host-compiler flags through ``-Xcompiler``.
_NVCC_RULES = frozenset({"nvcc"})


def path_maps(kernel_name: str, kernel_root: Path, work_dir: Path, env: TorchEnv,
              cuda_include: Path | None = None) -> list[tuple[Path, str]]:
    """(absolute prefix, fixed name) pairs, most general first.

    GCC and Clang try the maps last-given-first, so the more specific prefix (the
    generated dir inside the work dir) comes later and wins.
    """
    maps: list[tuple[Path, str]] = [
        (kernel_root, f"/kernelhub/src/{kernel_name}"),
        (work_dir, "/kernelhub/work"),
        (work_dir / "generated", "/kernelhub/generated"),
        (env.root, f"/kernelhub/torch-{env.version}"),
        (env.python_include_dir, "/kernelhub/python-include"),
    ]
    # torch's headers live in its site-packages, which may sit outside the env (an
    # env adopted from elsewhere, a system install): map the torch package itself too.
    for include in env.include_dirs:
        if include.name == "include" and include.parent.name == "torch":
            maps.append((include.parent, f"/kernelhub/torch-{env.version}/torch"))
    if cuda_include is not None:
        maps.append((cuda_include, "/kernelhub/cuda-include"))
    return maps


def prefix_map_flags(maps: Iterable[tuple[Path, str]]) -> list[str]:
    """``-ffile-prefix-map`` (covers ``__FILE__``, debug info and coverage paths)."""
    flags = []
    for old, new in maps:
        flags.append(f"-ffile-prefix-map={old}={new}")
        resolved = Path(os.path.realpath(old))
        if resolved != old:  # compilers see symlinked dirs under either name
            flags.append(f"-ffile-prefix-map={resolved}={new}")
    return flags


def with_prefix_maps(units: Iterable[CompileUnit], maps: list[tuple[Path, str]]
                     ) -> tuple[CompileUnit, ...]:
    """Append the prefix maps to every compile step, in the syntax of its compiler."""
    flags = prefix_map_flags(maps)
    result = []
    for unit in units:
        if unit.rule in _DIRECT_RULES:
            unit = replace(unit, flags=(*unit.flags, *flags))
        elif unit.rule in _NVCC_RULES:
            # nvcc preprocesses through the host compiler, so __FILE__ in device code
            # is mapped by the same flags. Its own generated symbol names use a random
            # number unless seeded (one seed per output, as nvcc asks), and its
            # intermediate files get random /tmp names unless kept beside the object.
            seed = hashlib.sha256(unit.object.encode()).hexdigest()[:16]
            unit = replace(unit, flags=(*unit.flags, *(f"-Xcompiler={f}" for f in flags),
                                        f"-frandom-seed={seed}", "--objdir-as-tempdir"))
        result.append(unit)
    return tuple(result)


def build_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for compiler runs: the caller's, plus a fixed SOURCE_DATE_EPOCH."""
    env = dict(os.environ if base is None else base)
    env.setdefault("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
    return env


STABLE_CUDA_ROOT = Path("/tmp/kernelhub-nvcc")
"""Where ``.cu`` copies live: a fixed absolute path (not $TMPDIR, which differs between a
shell and a Nix build), one directory per content digest, so every builder on a machine
and every machine use the same path for the same file."""


def stable_cuda_sources(units: Iterable[CompileUnit]) -> tuple[CompileUnit, ...]:
    """Point every nvcc step at a copy of its source under :data:`STABLE_CUDA_ROOT`.

    The copy's directory name is the sha256 of the source's name and bytes; its own
    directory is added first to the include path, so its quoted includes resolve as
    before. Where the fixed root cannot be written (another user's /tmp), the step keeps
    its source: the build still works, only its bytes then depend on the checkout path.
    """
    result = []
    for unit in units:
        if unit.rule not in _NVCC_RULES or unit.inputs:
            result.append(unit)
            continue
        data = unit.source.read_bytes()
        digest = hashlib.sha256(unit.source.name.encode() + b"\0" + data).hexdigest()[:32]
        copy = STABLE_CUDA_ROOT / digest / unit.source.name
        try:
            if not copy.is_file() or copy.read_bytes() != data:
                if not STABLE_CUDA_ROOT.is_dir():
                    STABLE_CUDA_ROOT.mkdir(exist_ok=True)
                    STABLE_CUDA_ROOT.chmod(0o1777)  # shared by every user, like /tmp
                copy.parent.mkdir(exist_ok=True)
                tmp = copy.with_name(f".{copy.name}.{os.getpid()}")
                tmp.write_bytes(data)
                tmp.replace(copy)
        except OSError:
            result.append(unit)
            continue
        result.append(replace(unit, inputs=(str(copy),),
                              flags=(f"-I{unit.source.parent}", *unit.flags)))
    return tuple(result)


# --- manylinux_2_28 symbol pinning ---

HOST_GLIBC_ENV = "KERNELHUB_HOST_GLIBC"
HEADER_NAME = "kernelhub_glibc_compat.h"
PINNED_FUNCTIONS = ("exp", "exp2", "log", "log2", "pow")
"""libm functions whose GLIBC_2.29 version is newer than manylinux_2_28."""
BASE_VERSIONS = {"x86_64": "GLIBC_2.2.5", "aarch64": "GLIBC_2.17"}
"""The first glibc version of each architecture: where the previous versions live."""
_INCLUDE_RULES = frozenset({"cxx", "nvcc", "hipcc"})
"""Compile rules whose compiler preprocesses host code with a GCC-compatible -include."""


def pinning(variant: Variant) -> bool:
    """Whether this variant's build binds to manylinux_2_28 symbol versions."""
    return (variant.os == "linux" and variant.arch in BASE_VERSIONS
            and os.environ.get(HOST_GLIBC_ENV, "") not in ("1", "true", "yes"))


def header_context(variant: Variant) -> dict[str, object]:
    """The values of ``templates/glibc_compat.h.j2`` for ``variant`` (rendered by
    :func:`kernelhub_builder.compile.render.compat_header`)."""
    assert variant.arch is not None
    return {"variant": variant.name, "functions": PINNED_FUNCTIONS,
            "base_version": BASE_VERSIONS[variant.arch]}


def settings_token(variant: Variant, header: str) -> str:
    """What the variant id hashes about the target: a changed header is a new build."""
    if not pinning(variant):
        return "glibc=host"
    digest = hashlib.sha256(header.encode()).hexdigest()[:12]
    return f"glibc=manylinux_2_28:{digest}"


def with_compat_header(units: Iterable[CompileUnit], header: Path) -> tuple[CompileUnit, ...]:
    """Force ``header`` into every host compile step."""
    return tuple(replace(u, flags=(*u.flags, "-include", str(header)),
                         implicit=(*u.implicit, str(header)))
                 if u.rule in _INCLUDE_RULES else u for u in units)
