"""Build-variant names: the one parser and formatter both builder and loader use.

The kernel ecosystem has written two generations of names, and a hub repository can hold
both (its builder writes the current name and, for older loaders, the legacy one):

========================  =================================================================
legacy (kernels <= 0.18)  ``torch213-cxx11-cu130-x86_64-linux``, ``torch213-metal-aarch64-darwin``,
                          ``torch-stable-abi213-cpu-x86_64-linux``, ``tvm-ffi01-cu128-x86_64-linux``
current (kernels 0.19)    ``torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-linux``,
                          ``torch-stable-abi-2.13-cpu-cpython-3.10-abi3-x86_64-linux``,
                          ``tvm-ffi-0.1-cuda-12.8-cpython-3.12-abi3t-x86_64-linux``
both                      ``torch-<backend>`` (pure Python for one backend), ``torch-universal``
current only              ``mlx-metal`` (pure Python for MLX), ``sdk``, ``sdk-<backend>``,
                          ``sdk[-<compute>]-cpython-3.12-abi3-<arch>-<os>`` (SDKs)
========================  =================================================================

A current name spells versions with a dot and names the CPython ABI its compiled parts
need (``cpython-<minimum>-abi3``, or ``abi3t`` for free-threaded Python >= 3.15); a legacy
name packs versions (``torch213``, ``cu130``) and always means ``cpython-3.9-abi3``. A legacy
Linux torch name carries the C++ ABI tag (``-cxx11``; ``-cxx98`` for old pre-C++11 torch),
a current one leaves it out. ``torch-npu`` (legacy) and ``torch-cann`` (current) are the
pure-Python names for CANN.

:class:`Variant` is the parsed name; ``Variant.name`` writes it back, so every name that
parses round-trips. Parsing uses str methods only: a warm load parses every name at a
commit, and one regex compile costs more than all of them.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.system"}  # PEP 810: imported when first used

import re
from enum import Enum

from ..errors import VariantNameError
from ..system import (
    ALL_BACKENDS,
    ARCHES,
    TOOLKIT_BACKENDS,
    VARIANT_OSES,
    is_ascii_digits,
    platform_problem,
)
from ..value_types import Record


class VariantKind(str, Enum):
    """What a variant is built against; the order is the loader's tier order."""

    COMPILED = "compiled"
    """Compiled against one torch major.minor (``torch213-…``, ``torch-2.13-…``)."""
    STABLE_ABI = "stable-abi"
    """Compiled against torch's stable ABI: loads on that torch or newer."""
    TVM_FFI = "tvm-ffi"
    """Compiled against one apache-tvm-ffi major.minor, no torch."""
    NOARCH = "noarch"
    """Pure Python for one backend (``torch-cuda``)."""
    MLX = "mlx"
    """Pure Python for MLX (``mlx-metal``)."""
    UNIVERSAL = "universal"
    """Pure Python for any backend (``torch-universal``)."""
    SDK = "sdk"
    """A kernel SDK: no framework; compiled parts when it names a Python ABI and a system."""


class Naming(str, Enum):
    """Which generation of the ecosystem's names a variant is spelled in."""

    LEGACY = "legacy"
    """``torch213-cxx11-cu130-x86_64-linux``: what kernels <= 0.18 can read."""
    CURRENT = "current"
    """``torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-linux``: kernels 0.19's names."""


PYTHON_ABIS: tuple[str, ...] = ("abi3", "abi3t")
"""CPython ABIs of compiled parts: ``abi3`` (GIL builds), ``abi3t`` (free-threaded, PEP 803)."""
ABI3T_MIN_PYTHON: tuple[int, int] = (3, 15)
"""The first CPython whose free-threaded build has a stable ABI."""


class PythonTag(Record, frozen=True, order=True):
    """The CPython a variant's compiled parts need: a minimum version and an ABI."""

    version: tuple[int, int] = (3, 9)
    abi: str = "abi3"

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if self.abi not in PYTHON_ABIS:
            raise VariantNameError(
                f"unknown Python ABI {self.abi!r}; expected one of {', '.join(PYTHON_ABIS)}"
            )
        if self.abi == "abi3t" and self.version < ABI3T_MIN_PYTHON:
            raise VariantNameError(
                f"abi3t needs CPython {_dotted(ABI3T_MIN_PYTHON)} or newer, "
                f"not {_dotted(self.version)}"
            )

    @property
    def tag(self) -> str:
        """``cpython-3.12-abi3``: the part a current name carries."""
        return f"cpython-{_dotted(self.version)}-{self.abi}"

    def __str__(self) -> str:
        return self.tag


LEGACY_PYTHON = PythonTag()
"""What every legacy-named compiled variant means: CPython >= 3.9, abi3."""


class Compute(Record, frozen=True, order=True):
    """A compute backend with its toolkit version (CUDA 13.0, ROCm 7.0, XPU 2025.2, CANN 8.1)."""

    backend: str
    version: tuple[int, ...] = ()

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if self.backend not in ALL_BACKENDS:
            raise VariantNameError(
                f"unknown backend {self.backend!r}; expected one of {', '.join(ALL_BACKENDS)}"
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
        """The compute part of a legacy name: cpu, cu130, rocm70, xpu20252, cann81, metal."""
        if self.backend in TOOLKIT_BACKENDS and not self.version:
            raise VariantNameError(f"{self.backend} compute without a version has no tag")
        if not self.version:
            return self.backend
        major, minor = self.version
        return f"{_LEGACY_PREFIX[self.backend]}{major}{minor}"

    @property
    def current_tag(self) -> str:
        """The compute part of a current name: cpu, cuda-13.0, rocm-7.0, xpu-2025.2, metal."""
        if self.backend in TOOLKIT_BACKENDS and not self.version:
            raise VariantNameError(f"{self.backend} compute without a version has no tag")
        return f"{self.backend}-{self.version_str}" if self.version else self.backend

    @property
    def version_str(self) -> str:
        return ".".join(str(p) for p in self.version)

    @classmethod
    def parse_tag(cls, tag: str) -> Compute:
        """Parse a legacy compute tag (``cu130``, ``rocm70``, ``xpu20252``, ``cann81``)."""
        if tag in ALL_BACKENDS and tag not in TOOLKIT_BACKENDS:
            return cls(tag)
        # <prefix><digits>: the toolkit's major, then its minor: one digit for CUDA, ROCm
        # and CANN (ROCm 7.14 is the one exception the ecosystem spells rocm714), what
        # follows the four-digit year for XPU.
        for backend, prefix in _LEGACY_PREFIX.items():
            digits = tag[len(prefix):]
            if not (tag.startswith(prefix) and is_ascii_digits(digits) and len(digits) >= 2):
                continue
            if backend == "xpu":
                if len(digits) > 4:
                    return cls(backend, (int(digits[:4]), int(digits[4:])))
                continue
            if backend == "rocm" and digits == "714":
                return cls(backend, (7, 14))
            return cls(backend, (int(digits[:-1]), int(digits[-1:])))
        raise VariantNameError(
            f"unknown compute tag {tag!r}; expected cpu, metal, neuron, tpu, cu<MAJ><MIN> "
            "(cu130), rocm<MAJ><MIN> (rocm70), xpu<YYYY><N> (xpu20252) or cann<MAJ><MIN> (cann81)"
        )

    @classmethod
    def parse_current(cls, parts: list[str]) -> Compute:
        """Parse a current compute part, split at dashes: ``["cuda", "13.0"]``, ``["cpu"]``."""
        if len(parts) == 1 and parts[0] in ALL_BACKENDS and parts[0] not in TOOLKIT_BACKENDS:
            return cls(parts[0])
        if len(parts) == 2 and parts[0] in TOOLKIT_BACKENDS and (
                version := _dotted_pair(parts[1])) is not None:
            return cls(parts[0], version)
        raise VariantNameError(
            f"unknown compute {'-'.join(parts)!r}; expected cpu, metal, neuron, tpu, or "
            "cuda/rocm/xpu/cann with a <major>.<minor> version (cuda-13.0)"
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


_LEGACY_PREFIX = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
"""Legacy compute tags: prefix + major + minor (cu130)."""

_NOARCH_WORDS = {"npu": "cann"}
"""Pure-Python variant words that are not backend names: the legacy name for CANN."""

_AUTO = "auto"


class Variant(Record, frozen=True):
    """One build variant. ``name`` round-trips through :func:`parse_variant`.

    The first five fields are what the build is; ``python``, ``naming`` and ``cxx_abi``
    are how its name is spelled. They are normalised on construction: a legacy compiled
    name always means :data:`LEGACY_PYTHON`, a legacy Linux torch name carries
    ``cxx11`` unless told otherwise, pure-Python variants have no Python tag.
    """

    kind: VariantKind
    torch: tuple[int, int] | None = None
    """Exact torch for COMPILED, minimum torch for STABLE_ABI, the tvm-ffi major.minor for
    TVM_FFI, None otherwise."""
    compute: Compute | None = None
    """None for UNIVERSAL and backend-agnostic SDKs; NOARCH and MLX carry just the backend."""
    arch: str | None = None
    os: str | None = None
    python: PythonTag | None = None
    """The CPython a compiled variant needs (:data:`LEGACY_PYTHON` for legacy names)."""
    naming: Naming = Naming.LEGACY
    cxx_abi: str | None = _AUTO
    """COMPILED only: ``"cxx11"`` or ``"cxx98"`` as the name tags it, None when untagged.
    The default is the naming's own: ``cxx11`` on legacy Linux names, untagged otherwise."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        kind, naming = self.kind, self.naming
        if kind in _PURE_PYTHON:
            if self.torch is not None or self.arch or self.os or self.python is not None:
                raise VariantNameError(f"a {kind.value} variant has no torch, system or Python tag")
            # torch-<backend> reads the same in both generations except CANN's (torch-npu,
            # torch-cann): keep one spelling for everything else.
            if kind is not VariantKind.NOARCH or self.backend != "cann":
                naming = Naming.CURRENT if kind is VariantKind.MLX else Naming.LEGACY
            object.__setattr__(self, "naming", naming)
            object.__setattr__(self, "cxx_abi", None)
            self._check_noarch()
            return
        if kind is VariantKind.SDK:
            self._check_sdk()
            return
        if self.torch is None or self.compute is None or self.arch is None or self.os is None:
            raise VariantNameError(f"a {kind.value} variant needs a version, compute and system")
        python = self.python
        if naming is Naming.LEGACY:
            if python is None:
                python = LEGACY_PYTHON
            elif python != LEGACY_PYTHON:
                raise VariantNameError(
                    f"legacy names mean {LEGACY_PYTHON.tag}; {python.tag} needs a current name"
                )
        elif python is None:
            raise VariantNameError(f"a current {kind.value} name needs a cpython-<M>.<m>-<abi> tag")
        object.__setattr__(self, "python", python)
        cxx = self.cxx_abi
        if kind is not VariantKind.COMPILED:
            cxx = None if cxx == _AUTO else cxx
            if cxx is not None:
                raise VariantNameError(f"only torch-bound names carry a C++ ABI tag, not {kind.value}")
        elif cxx == _AUTO:
            cxx = "cxx11" if naming is Naming.LEGACY and self.os == "linux" else None
        if cxx not in (None, "cxx11", "cxx98"):
            raise VariantNameError(f"unknown C++ ABI tag {cxx!r}; expected cxx11 or cxx98")
        if cxx is not None and self.os == "darwin":
            raise VariantNameError("macOS names carry no C++ ABI tag")
        object.__setattr__(self, "cxx_abi", cxx)

    def _check_noarch(self) -> None:
        if self.kind is VariantKind.UNIVERSAL:
            if self.compute is not None:
                raise VariantNameError("torch-universal names no backend")
            return
        if self.compute is None or self.compute.version:
            raise VariantNameError(f"a {self.kind.value} variant names one backend, no version")
        if self.kind is VariantKind.MLX and self.compute.backend != "metal":
            raise VariantNameError("MLX variants exist only for metal (mlx-metal)")

    def _check_sdk(self) -> None:
        object.__setattr__(self, "naming", Naming.CURRENT)
        object.__setattr__(self, "cxx_abi", None)
        if self.torch is not None:
            raise VariantNameError("an SDK variant names no framework version")
        compiled = self.python is not None
        if compiled != (self.arch is not None) or (self.arch is None) != (self.os is None):
            raise VariantNameError("an SDK variant names its Python tag and its system together")
        if self.compute is not None and bool(self.compute.version) and not compiled:
            raise VariantNameError("an SDK variant with a toolkit version needs a Python tag and system")
        if (compiled and self.compute is not None and self.compute.backend in TOOLKIT_BACKENDS
                and not self.compute.version):
            raise VariantNameError(
                f"a compiled SDK variant for {self.compute.backend} needs its toolkit version"
            )

    @property
    def backend(self) -> str | None:
        return self.compute.backend if self.compute else None

    @property
    def compiled(self) -> bool:
        """Whether the variant holds a compiled library (as opposed to pure Python)."""
        if self.kind is VariantKind.SDK:
            return self.python is not None
        return self.kind in _COMPILED

    @property
    def torch_bound(self) -> bool:
        """Whether the variant is tied to a torch version (exact or stable ABI)."""
        return self.kind in (VariantKind.COMPILED, VariantKind.STABLE_ABI)

    @property
    def system(self) -> str | None:
        """The Nix-style system string, e.g. ``x86_64-linux``."""
        return f"{self.arch}-{self.os}" if self.arch else None

    @property
    def name(self) -> str:
        kind = self.kind
        if kind is VariantKind.UNIVERSAL:
            return "torch-universal"
        if kind is VariantKind.NOARCH:
            assert self.compute is not None
            if self.compute.backend == "cann" and self.naming is Naming.LEGACY:
                return "torch-npu"
            return f"torch-{self.compute.backend}"
        if kind is VariantKind.MLX:
            assert self.compute is not None
            return f"mlx-{self.compute.backend}"
        if kind is VariantKind.SDK:
            return self._sdk_name()
        assert self.torch is not None and self.compute is not None and self.python is not None
        if self.naming is Naming.LEGACY:
            mm = f"{self.torch[0]}{self.torch[1]}"
            framework = {VariantKind.COMPILED: f"torch{mm}",
                         VariantKind.STABLE_ABI: f"torch-stable-abi{mm}",
                         VariantKind.TVM_FFI: f"tvm-ffi{mm}"}[kind]
            parts = [framework, self.cxx_abi, self.compute.tag, self.arch, self.os]
        else:
            framework = {VariantKind.COMPILED: "torch",
                         VariantKind.STABLE_ABI: "torch-stable-abi",
                         VariantKind.TVM_FFI: "tvm-ffi"}[kind]
            parts = [f"{framework}-{_dotted(self.torch)}", self.cxx_abi,
                     self.compute.current_tag, self.python.tag, self.arch, self.os]
        return "-".join(p for p in parts if p)

    def _sdk_name(self) -> str:
        parts = ["sdk"]
        if self.compute is not None:
            parts.append(self.compute.current_tag if self.compute.version else self.compute.backend)
        if self.python is not None:
            parts += [self.python.tag, f"{self.arch}-{self.os}"]
        return "-".join(parts)

    def with_naming(self, naming: Naming, python: PythonTag | None = None) -> Variant:
        """The same build spelled in ``naming``: the builder writes a build under both
        generations' names. ``python`` is the tag a current name carries (default: the
        variant's own, which for a legacy name is ``cpython-3.9-abi3``)."""
        if self.kind in _PURE_PYTHON or self.kind is VariantKind.SDK:
            if self.kind is VariantKind.NOARCH and self.backend == "cann":
                return Variant(self.kind, compute=self.compute, naming=naming)
            return self
        if naming is Naming.LEGACY:
            python, cxx = None, (
                (self.cxx_abi or "cxx11") if self.kind is VariantKind.COMPILED and self.os == "linux"
                else None)
        else:
            python, cxx = python or self.python, (
                None if self.cxx_abi == "cxx11" or self.kind is not VariantKind.COMPILED
                else self.cxx_abi)
        return Variant(self.kind, self.torch, self.compute, self.arch, self.os, python, naming, cxx)

    def __str__(self) -> str:
        return self.name


_PURE_PYTHON = (VariantKind.NOARCH, VariantKind.MLX, VariantKind.UNIVERSAL)
_COMPILED = (VariantKind.COMPILED, VariantKind.STABLE_ABI, VariantKind.TVM_FFI)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def _dotted_pair(text: str) -> tuple[int, int] | None:
    """``"2.13"`` → (2, 13); None for anything else (no sign, no leading zeros checked here:
    the caller compares the re-formatted name with the original)."""
    major, dot, minor = text.partition(".")
    if dot and is_ascii_digits(major) and is_ascii_digits(minor):
        return int(major), int(minor)
    return None


def _packed_pair(digits: str) -> tuple[int, int] | None:
    """Legacy packed versions: one digit of major, the rest minor (``213`` → 2.13,
    ``01`` → 0.1)."""
    if is_ascii_digits(digits) and 2 <= len(digits) <= 3:
        return int(digits[0]), int(digits[1:])
    return None


def _split_system(parts: list[str], name: str) -> tuple[list[str], str, str]:
    if len(parts) < 2 or parts[-2] not in ARCHES or parts[-1] not in VARIANT_OSES:
        raise VariantNameError(
            f"variant {name!r} does not end in a system such as x86_64-linux or aarch64-darwin"
        )
    return parts[:-2], parts[-2], parts[-1]


def _split_python(parts: list[str], name: str) -> tuple[list[str], PythonTag | None]:
    """Split ``cpython-<M>.<m>-<abi>`` off the end of a current name's middle parts."""
    if "cpython" not in parts:
        return parts, None
    i = parts.index("cpython")
    tail = parts[i:]
    version = _dotted_pair(tail[1]) if len(tail) == 3 else None
    if version is None or tail[2] not in PYTHON_ABIS:
        raise VariantNameError(
            f"variant {name!r}: expected cpython-<major>.<minor>-<abi3|abi3t>, got {'-'.join(tail)!r}"
        )
    return parts[:i], PythonTag(version, tail[2])


def _framework_prefix(name: str) -> tuple[VariantKind, Naming, str, str] | None:
    """(kind, naming, version text, rest) of a compiled name; None for other shapes.
    A current name's framework is followed by ``-<digit>``, a legacy one's by a digit."""
    if name.startswith("torch-stable-abi"):
        kind, after = VariantKind.STABLE_ABI, name[16:]
    elif name.startswith("tvm-ffi"):
        kind, after = VariantKind.TVM_FFI, name[7:]
    elif name.startswith("torch"):
        kind, after = VariantKind.COMPILED, name[5:]
    else:
        return None
    if after[:1] == "-" and after[1:2].isdigit():
        naming, after = Naming.CURRENT, after[1:]
    elif after[:1].isdigit():
        naming = Naming.LEGACY
    else:
        return None
    version_part, _, rest = after.partition("-")
    return kind, naming, version_part, rest


def _framework_bound(name: str) -> Variant | None:
    """The variant a compiled name (either generation) spells; None for other shapes."""
    if (found := _framework_prefix(name)) is None:
        return None
    kind, naming, version_part, rest = found
    version = _dotted_pair(version_part) if naming is Naming.CURRENT else _packed_pair(
        version_part)
    if version is None:
        raise VariantNameError(f"variant {name!r}: bad version {version_part!r}")
    parts = rest.split("-") if rest else []
    cxx: str | None = None
    if kind is VariantKind.COMPILED and parts and parts[0] in ("cxx11", "cxx98"):
        cxx = parts.pop(0)
    parts, arch, os_name = _split_system(parts, name)
    python = None
    if naming is Naming.CURRENT:
        parts, python = _split_python(parts, name)
        if python is None:
            raise VariantNameError(
                f"variant {name!r} names no Python ABI; current names carry "
                "cpython-<major>.<minor>-<abi3|abi3t> before the system"
            )
        compute = Compute.parse_current(parts)
    elif len(parts) != 1:
        raise VariantNameError(f"variant {name!r}: expected one compute tag, got {'-'.join(parts)!r}")
    else:
        compute = Compute.parse_tag(parts[0])
    return Variant(kind, version, compute, arch, os_name, python, naming, cxx)


def _sdk(name: str) -> Variant:
    rest = name[len("sdk-"):].split("-") if name != "sdk" else []
    if "cpython" in rest:
        rest, arch, os_name = _split_system(rest, name)
        rest, python = _split_python(rest, name)
        compute = Compute.parse_current(rest) if rest else None
        return Variant(VariantKind.SDK, None, compute, arch, os_name, python)
    if len(rest) > 1:
        raise VariantNameError(f"variant {name!r}: expected sdk or sdk-<backend>")
    compute = Compute(rest[0]) if rest and rest[0] in ALL_BACKENDS else None
    if rest and compute is None:
        raise VariantNameError(f"variant {name!r}: unknown backend {rest[0]!r}")
    return Variant(VariantKind.SDK, compute=compute)


def _pure_python(name: str) -> Variant | None:
    framework, _, word = name.partition("-")
    if framework not in ("torch", "mlx") or not (word.isascii() and word.isalpha()
                                                 and word.islower()):
        return None
    if framework == "torch" and word == "universal":
        return Variant(VariantKind.UNIVERSAL)
    backend = _NOARCH_WORDS.get(word, word)
    if backend not in ALL_BACKENDS:
        raise VariantNameError(
            f"variant {name!r}: unknown backend {word!r}; expected torch-universal or "
            f"torch-<{'|'.join((*ALL_BACKENDS, 'npu'))}>"
        )
    if framework == "mlx":
        return Variant(VariantKind.MLX, compute=Compute(backend))
    naming = Naming.CURRENT if word == "cann" else Naming.LEGACY
    return Variant(VariantKind.NOARCH, compute=Compute(backend), naming=naming)


def parse_variant(name: str) -> Variant:
    """Parse a variant name of either generation; raises VariantNameError saying which
    part is wrong."""
    if name == "sdk" or name.startswith("sdk-"):
        variant = _sdk(name)
    elif (found := _framework_bound(name) or _pure_python(name)) is not None:
        variant = found
    else:
        raise VariantNameError(
            f"{name!r} is not a build-variant name; expected e.g. "
            "torch-2.13-cpu-cpython-3.12-abi3-x86_64-linux, torch213-cxx11-cpu-x86_64-linux, "
            "torch-stable-abi213-cpu-x86_64-linux, torch-cuda or torch-universal"
        )
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
