"""Build-variant names: the one parser and formatter both builder and loader use.

Names follow the scheme the kernel ecosystem already uses so that builds
interoperate::

    torch213-cxx11-cpu-x86_64-linux        compiled against one torch, Linux
    torch213-metal-aarch64-darwin          compiled against one torch, macOS
    torch-stable-abi213-cpu-x86_64-linux   torch stable ABI, loads on torch >= 2.13
    torch-cuda                             pure Python for one backend
    torch-universal                        pure Python for any backend
"""

from __future__ import annotations

import re
from enum import Enum

from .errors import VariantNameError
from .records import Record
from .system import BACKENDS, TOOLKIT_BACKENDS, is_ascii_digits, platform_problem


class VariantKind(str, Enum):
    """How a variant is tied to torch; also the order of runtime preference."""

    COMPILED = "compiled"
    STABLE_ABI = "stable-abi"
    NOARCH = "noarch"
    UNIVERSAL = "universal"


class Compute(Record, frozen=True, order=True):
    """A compute backend with its toolkit version (CUDA 13.0, ROCm 7.0, XPU 2025.2)."""

    backend: str
    version: tuple[int, ...] = ()

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if self.backend not in BACKENDS:
            raise VariantNameError(
                f"unknown backend {self.backend!r}; expected one of {', '.join(BACKENDS)}"
            )
        # A versioned toolkit takes a two-part version; none means "any version", which is
        # what pure-Python (torch-<backend>) variants carry.
        if self.backend in TOOLKIT_BACKENDS:
            if self.version and len(self.version) != 2:
                raise VariantNameError(
                    f"backend {self.backend!r} needs a two-part version such as 13.0, "
                    f"got {self.version!r}"
                )
        elif self.version:
            raise VariantNameError(f"backend {self.backend!r} takes no version")

    @property
    def tag(self) -> str:
        """The compute part of a variant name: cpu, cu130, rocm70, xpu20252, metal."""
        if self.backend in TOOLKIT_BACKENDS and not self.version:
            raise VariantNameError(f"{self.backend} compute without a version has no tag")
        major, minor = self.version or (None, None)
        if self.backend == "cuda":
            return f"cu{major}{minor}"
        if self.backend == "rocm":
            return f"rocm{major}{minor}"
        if self.backend == "xpu":
            return f"xpu{major}{minor}"
        return self.backend

    @property
    def version_str(self) -> str:
        return ".".join(str(p) for p in self.version)

    @classmethod
    def parse_tag(cls, tag: str) -> Compute:
        if tag in ("cpu", "metal"):
            return cls(tag)
        # <prefix><digits>: the toolkit's major, then its minor (one digit for CUDA and
        # ROCm, what follows the four-digit year for XPU). Parsed with str methods: a warm
        # load parses every variant name of the commit, and a regex compile per process
        # costs more than all of them.
        for prefix, backend, split in (("cu", "cuda", -1), ("rocm", "rocm", -1), ("xpu", "xpu", 4)):
            digits = tag[len(prefix):]
            if (tag.startswith(prefix) and is_ascii_digits(digits) and len(digits) >= 2
                    and (split == -1 or len(digits) > split)):
                return cls(backend, (int(digits[:split]), int(digits[split:])))
        raise VariantNameError(
            f"unknown compute tag {tag!r}; expected cpu, metal, cu<MAJ><MIN> (cu130), "
            "rocm<MAJ><MIN> (rocm70) or xpu<YYYY><N> (xpu20252)"
        )

    @classmethod
    def from_version_string(cls, backend: str, version: str | None) -> Compute:
        """Build from a manifest-style version such as "13.0" or "2025.2"."""
        if not version:
            return cls(backend)
        try:
            parts = tuple(int(p) for p in version.split(".")[:2])
        except ValueError as e:
            raise VariantNameError(f"bad {backend} version {version!r}: {e}") from None
        return cls(backend, parts)


class Variant(Record, frozen=True):
    """One build variant. ``name`` round-trips through :func:`parse_variant`."""

    kind: VariantKind
    torch: tuple[int, int] | None = None
    """Exact torch for COMPILED, minimum torch for STABLE_ABI, None otherwise."""
    compute: Compute | None = None
    """None only for UNIVERSAL; NOARCH carries just the backend."""
    arch: str | None = None
    os: str | None = None

    @property
    def backend(self) -> str | None:
        return self.compute.backend if self.compute else None

    @property
    def compiled(self) -> bool:
        """Whether the variant holds a compiled library (as opposed to pure Python)."""
        return self.kind in (VariantKind.COMPILED, VariantKind.STABLE_ABI)

    @property
    def system(self) -> str | None:
        """The Nix-style system string, e.g. ``x86_64-linux``."""
        return f"{self.arch}-{self.os}" if self.arch else None

    @property
    def name(self) -> str:
        if self.kind is VariantKind.UNIVERSAL:
            return "torch-universal"
        assert self.compute is not None
        if self.kind is VariantKind.NOARCH:
            return f"torch-{self.compute.backend}"
        assert self.torch is not None
        mm = f"{self.torch[0]}{self.torch[1]}"
        if self.kind is VariantKind.STABLE_ABI:
            return f"torch-stable-abi{mm}-{self.compute.tag}-{self.arch}-{self.os}"
        if self.os == "linux":
            return f"torch{mm}-cxx11-{self.compute.tag}-{self.arch}-{self.os}"
        return f"torch{mm}-{self.compute.tag}-{self.arch}-{self.os}"

    def __str__(self) -> str:
        return self.name


def _torch_mm(digits: str) -> tuple[int, int]:
    # "213" -> (2, 13), "29" -> (2, 9): torch's major is one digit.
    return int(digits[0]), int(digits[1:])


def _torch_bound(name: str) -> Variant | None:
    """The variant a compiled (``torch<mm>[-cxx11]-<compute>-<arch>-<os>``) or stable-ABI
    (``torch-stable-abi<mm>-<compute>-<arch>-<os>``) name spells; None for any other shape.
    Split with str methods, not a regex (see :meth:`Compute.parse_tag`)."""
    cxx = False
    if name.startswith("torch-stable-abi"):
        kind, parts = VariantKind.STABLE_ABI, name[len("torch-stable-abi"):].split("-")
    elif name.startswith("torch"):
        kind, parts = VariantKind.COMPILED, name[len("torch"):].split("-")
        if len(parts) == 5 and parts[1] == "cxx11":
            del parts[1]
            cxx = True
    else:
        return None
    if len(parts) != 4:
        return None
    mm, compute, arch, os_name = parts
    if not (is_ascii_digits(mm) and 2 <= len(mm) <= 3) or arch not in ("x86_64", "aarch64"):
        return None
    if not (compute.isascii() and compute.isalnum() and compute == compute.lower()):
        return None
    if os_name not in ("linux", "darwin"):
        return None
    if kind is VariantKind.COMPILED and (os_name == "linux") != cxx:
        raise VariantNameError(
            f"variant {name!r}: Linux names carry -cxx11 after the torch version, "
            "macOS names do not"
        )
    return Variant(kind, _torch_mm(mm), Compute.parse_tag(compute), arch, os_name)


def parse_variant(name: str) -> Variant:
    """Parse a variant name; raises VariantNameError saying which part is wrong."""
    if name == "torch-universal":
        return Variant(VariantKind.UNIVERSAL)
    variant = _torch_bound(name)
    if variant is None:
        backend = name[len("torch-"):]
        if not (name.startswith("torch-") and backend.isascii() and backend.isalpha()
                and backend.islower()):
            raise VariantNameError(
                f"{name!r} is not a build-variant name; expected e.g. "
                "torch213-cxx11-cpu-x86_64-linux, torch-stable-abi213-cpu-x86_64-linux, "
                "torch-cuda or torch-universal"
            )
        if backend not in BACKENDS:
            raise VariantNameError(
                f"variant {name!r}: unknown backend {backend!r}; "
                f"expected torch-universal or torch-<{'|'.join(BACKENDS)}>"
            )
        return Variant(VariantKind.NOARCH, compute=Compute(backend, ()))
    if variant.name != name:
        raise VariantNameError(f"variant {name!r} is not in canonical form ({variant.name!r})")
    _check_platform(variant)
    return variant


def _check_platform(variant: Variant) -> None:
    if variant.backend is not None and (problem := platform_problem(variant.backend, variant.os)):
        raise VariantNameError(f"variant {variant.name!r}: {problem}")


def is_variant_name(name: str) -> bool:
    try:
        parse_variant(name)
    except VariantNameError:
        return False
    return True


def variant_id(kernel_name: str, backend: str, digest_hex: str) -> str:
    """The unique module and op namespace of one build: ``_<name>_<backend>_<hash10>``."""
    safe = re.sub(r"\W", "_", kernel_name)
    return f"_{safe}_{backend}_{digest_hex[:10]}"


_VARIANT_DIR = r"[A-Za-z0-9][A-Za-z0-9._-]*"
"""Compiled where first used (re caches it): no warm load checks a variant dir name."""


def check_variant_dir(name: str) -> None:
    """A variant name becomes a directory on every machine that fetches it: no paths."""
    if not re.fullmatch(_VARIANT_DIR, name):
        raise VariantNameError(
            f"{name!r} is not a valid variant directory name (letters, digits, '.', '_', '-')"
        )
