"""Flags and environment that make a build's bytes independent of where it ran.

The variant id hashes sources and settings, never paths, so two checkouts of one commit
get the same id; their files must then be the same bytes too, or ``builder publish``
from the second checkout is refused and a Nix binary cache would hold two different
outputs for one input. A compiler writes absolute paths into the binary wherever
``__FILE__`` is used (assertions, ``TORCH_CHECK`` in torch's inline headers) and into
debug info; prefix maps rewrite those paths to fixed names. Timestamps (``__DATE__``)
follow ``SOURCE_DATE_EPOCH``. The rest (object order, link order, file copy order) is
already fixed by the sorted manifest and the generated ninja file.
"""

from __future__ import annotations

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
            # is mapped by the same flags.
            unit = replace(unit, flags=(*unit.flags, *(f"-Xcompiler={f}" for f in flags)))
        result.append(unit)
    return tuple(result)


def build_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for compiler runs: the caller's, plus a fixed SOURCE_DATE_EPOCH."""
    env = dict(os.environ if base is None else base)
    env.setdefault("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
    return env
