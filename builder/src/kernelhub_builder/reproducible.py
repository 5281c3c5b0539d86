"""Flags and environment that make a build's bytes independent of where it ran.

The variant id hashes sources and settings, never paths, so two checkouts of one commit
get the same id; their files must then be the same bytes too, or ``builder publish``
from the second checkout is refused and a Nix binary cache would hold two different
outputs for one input. A compiler writes absolute paths into the binary wherever
``__FILE__`` is used (assertions, ``TORCH_CHECK`` in torch's inline headers) and into
debug info; prefix maps rewrite those paths to fixed names. Timestamps (``__DATE__``)
follow ``SOURCE_DATE_EPOCH``. The rest (object order, link order, file copy order) is
already fixed by the sorted manifest and the generated ninja file.

nvcc is the exception to "flags suffice": it names anonymous namespaces after the
physical path of the translation unit (prefix maps do not apply, symlinks do not help),
so each ``.cu`` is compiled from a copy at a path made of its content digest
(:func:`stable_cuda_sources`), the same in every checkout and build dir.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from .render_backends import CompileUnit
from .torch_env import TorchEnv

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
