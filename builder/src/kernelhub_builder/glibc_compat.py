"""Build Linux binaries on a new glibc that load on manylinux_2_28 (glibc 2.28) systems.

This host's gcc 12 / glibc 2.36 make every kernel ask for two symbol versions newer than
manylinux_2_28 allows (measured on all kernels here): ``exp@GLIBC_2.29`` (also ``log``,
``pow``, ``exp2``, ``log2`` when used) and ``__libc_single_threaded@GLIBC_2.32`` (read by
libstdc++'s headers). A generated header, forced into every host translation unit,
binds the libm functions to their previous versions and hides the libstdc++ read (see
``templates/glibc_compat.h.j2``). Nothing else about the build changes: same compiler,
same flags, same libstdc++ ABI at the torch boundary, so it serves ATen (C++ ABI) and
stable-ABI kernels alike. Symbols that have no older version (a libstdc++ symbol newer
than GLIBCXX 3.4.24, ``pthread_*@GLIBC_2.34``) cannot be pinned: ``builder check`` still
names them, and such a kernel needs ``--allow-host-abi`` or an older toolchain.

``KERNELHUB_HOST_GLIBC=1`` turns the pinning off (a binary for this machine's glibc only;
used to measure what pinning costs). The choice is part of the variant id.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from kernelhub.variants import Variant

from .render_backends import CompileUnit

HOST_GLIBC_ENV = "KERNELHUB_HOST_GLIBC"
HEADER_NAME = "kernelhub_glibc_compat.h"
PINNED_FUNCTIONS = ("exp", "exp2", "log", "log2", "pow")
"""libm functions whose GLIBC_2.29 version is newer than manylinux_2_28."""
BASE_VERSIONS = {"x86_64": "GLIBC_2.2.5", "aarch64": "GLIBC_2.17"}
"""The first glibc version of each architecture: where the previous versions live."""
_RULES = frozenset({"cxx", "nvcc", "hipcc"})
"""Compile rules whose compiler preprocesses host code with a GCC-compatible -include."""


def pinning(variant: Variant) -> bool:
    """Whether this variant's build binds to manylinux_2_28 symbol versions."""
    return (variant.os == "linux" and variant.arch in BASE_VERSIONS
            and os.environ.get(HOST_GLIBC_ENV, "") not in ("1", "true", "yes"))


def header_context(variant: Variant) -> dict[str, object]:
    """The values of ``templates/glibc_compat.h.j2`` for ``variant`` (rendered by
    :func:`kernelhub_builder.render.compat_header`)."""
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
                 if u.rule in _RULES else u for u in units)
