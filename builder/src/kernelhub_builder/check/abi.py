"""ELF checks of a compiled variant's shared library: will it load on other machines?

A variant is downloaded onto machines we never saw, so its ``.so`` may only ask for what
every supported Linux has. Read with pyelftools (no toolchain needed, so ``builder
publish`` can re-check a build it did not make):

- **manylinux_2_28** — the symbol versions the binary *needs* (``.gnu.version_r`` bound to
  its undefined dynamic symbols) stay within GLIBC 2.28, GLIBCXX 3.4.24, CXXABI 1.3.11 and
  GCC 7.0: the runtime of a RHEL 8 / manylinux_2_28 system.
- **Python limited API** — every undefined ``Py*``/``_Py*`` symbol is in CPython's stable ABI
  as of 3.9 (``abi3_symbols.txt``), so one ``.abi3.so`` serves every Python >= 3.9.
- **Dynamic dependencies** — ``DT_NEEDED`` names only torch's own libraries, the CUDA/ROCm/
  SYCL runtimes torch installs, the GPU driver, and the manylinux system libraries.
- **Torch stable ABI** — a stable-ABI variant binds no C++ symbol of torch (``at::``,
  ``c10::``, ``torch::``, ``caffe2::``): only the C shims (``aoti_torch_*``, ``torch_*``),
  which is what lets one build load under every later torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatch
from functools import cache
from importlib import resources
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from ..errors import NotAnElfError
from .violation import (
    RULE_LIMITED_API,
    RULE_MANYLINUX,
    RULE_NEEDED,
    RULE_STABLE_ABI,
    Violation,
)

# The newest symbol version manylinux_2_28 (glibc 2.28, gcc 8's libstdc++) provides.
MANYLINUX_2_28_LIMITS: dict[str, tuple[int, ...]] = {
    "GLIBC": (2, 28),
    "GLIBCXX": (3, 4, 24),
    "CXXABI": (1, 3, 11),
    "GCC": (7, 0, 0),
}
ABI3_MIN_PYTHON = "3.9"

# DT_NEEDED names a variant may carry (fnmatch patterns), grouped by who provides them.
ALLOWED_NEEDED: dict[str, tuple[str, ...]] = {
    "torch": ("libc10.so", "libc10_*.so", "libtorch.so", "libtorch_*.so", "libshm.so",
              "libcaffe2_nvrtc.so",
              # torch wheels carry their own OpenMP runtime in torch/lib
              "libgomp.so.1"),
    "CUDA libraries torch installs": (
        "libcudart.so.*", "libcublas.so.*", "libcublasLt.so.*", "libcufft.so.*",
        "libcurand.so.*", "libcusolver.so.*", "libcusparse.so.*", "libcusparseLt.so.*",
        "libnvJitLink.so.*", "libnvrtc.so.*", "libcudnn*.so.*", "libnccl.so.*",
        "libnvshmem*.so*", "libcupti.so.*", "libnvToolsExt.so.*", "libcufile.so.*"),
    "the GPU driver": ("libcuda.so.1",),
    "ROCm libraries torch installs": (
        "libamdhip64.so*", "libhiprtc.so*", "libhipblas.so*", "libhipblaslt.so*",
        "librocblas.so*", "libMIOpen.so*", "librccl.so*", "libhipsparse.so*",
        "libhipfft.so*", "libhiprand.so*", "librocrand.so*", "libroctx64.so*",
        "libhipsolver.so*", "librocsolver.so*"),
    "the SYCL runtime torch installs": ("libsycl.so.*",),
    "the manylinux system libraries": (
        "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
        "libstdc++.so.6", "libgcc_s.so.1", "libutil.so.1", "libresolv.so.2",
        "libnsl.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"),
}

# Outermost C++ namespaces of torch: a mangled symbol bound in one of them is unstable ABI.
TORCH_NAMESPACES = frozenset({"at", "c10", "torch", "caffe2"})
_NEEDED = "needed"
"""pyelftools sets ``DynamicTag.needed`` at run time; its type hints do not declare it."""
_VERSION_RE = re.compile(r"^(?P<lib>[A-Z]+)_(?P<num>\d+(?:\.\d+)*)$")


@dataclass(frozen=True)
class NeededSymbol:
    """An undefined dynamic symbol: resolved at load time from some other library."""

    name: str
    version: str | None
    """The symbol version it binds to (``GLIBC_2.32``), or None when unversioned."""


@dataclass
class ElfInfo:
    """What the checks need from one shared library."""

    needed: list[str] = field(default_factory=list)
    undefined: list[NeededSymbol] = field(default_factory=list)
    required_versions: dict[str, str] = field(default_factory=dict)
    """Every version the binary needs → the library that must provide it."""
    local_names: list[str] = field(default_factory=list)
    """Names in .symtab (absent from stripped binaries)."""


def read_elf(path: Path) -> ElfInfo:
    """Read DT_NEEDED, undefined dynamic symbols with their versions, and .symtab names."""
    info = ElfInfo()
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            versions: dict[int, str] = {}
            versym: GNUVerSymSection | None = None
            dynsym: SymbolTableSection | None = None
            for section in elf.iter_sections():
                if isinstance(section, DynamicSection):
                    info.needed += [str(getattr(t, _NEEDED)) for t in section.iter_tags()
                                    if t.entry.d_tag == "DT_NEEDED"]
                elif isinstance(section, GNUVerNeedSection):
                    for verneed, aux in section.iter_versions():
                        for vernaux in aux:
                            versions[vernaux["vna_other"]] = str(vernaux.name)
                            info.required_versions[str(vernaux.name)] = str(verneed.name)
                elif isinstance(section, GNUVerSymSection):
                    versym = section
                elif isinstance(section, SymbolTableSection):
                    if section.name == ".dynsym":
                        dynsym = section
                    elif section.name == ".symtab":
                        info.local_names = [s.name for s in section.iter_symbols() if s.name]
            if dynsym is not None:
                for index, sym in enumerate(dynsym.iter_symbols()):
                    if not sym.name or sym["st_shndx"] != "SHN_UNDEF":
                        continue
                    version = None
                    if versym is not None:
                        ndx = versym.get_symbol(index)["ndx"]
                        if isinstance(ndx, int):
                            version = versions.get(ndx & 0x7FFF)
                    info.undefined.append(NeededSymbol(sym.name, version))
    except ELFError as e:
        raise NotAnElfError(f"{path} is not a readable ELF file ({e})") from None
    return info


def parse_symbol_version(version: str) -> tuple[str, tuple[int, ...]] | None:
    """``GLIBCXX_3.4.30`` → ('GLIBCXX', (3, 4, 30)); None for names like ``GLIBC_PRIVATE``."""
    match = _VERSION_RE.match(version)
    if not match:
        return None
    return match["lib"], tuple(int(p) for p in match["num"].split("."))


def _too_new(version: str) -> str | None:
    """Why manylinux_2_28 cannot satisfy ``version``; None when it can."""
    if version == "GLIBC_PRIVATE":
        return "glibc's private symbols change between glibc releases"
    parsed = parse_symbol_version(version)
    if parsed is None or parsed[0] not in MANYLINUX_2_28_LIMITS:
        return None
    lib, number = parsed
    limit = MANYLINUX_2_28_LIMITS[lib]
    if number > limit:
        return f"manylinux_2_28 provides {lib} up to {'.'.join(map(str, limit))}"
    return None


def check_symbol_versions(info: ElfInfo, file: str) -> list[Violation]:
    """One violation per undefined symbol whose version manylinux_2_28 lacks."""
    found = []
    flagged_versions = set()
    for sym in info.undefined:
        if sym.version is None:
            continue
        why = _too_new(sym.version)
        if why:
            flagged_versions.add(sym.version)
            found.append(Violation(
                RULE_MANYLINUX, file, f"{sym.name}@{sym.version}",
                f"needs {sym.version} ({why})"))
    # A version required without any symbol bound to it still fails the loader.
    for version in sorted(set(info.required_versions) - flagged_versions):
        why = _too_new(version)
        if why:
            found.append(Violation(RULE_MANYLINUX, file, version,
                                   f"needs {version} ({why})"))
    return found


@cache
def abi3_symbols() -> frozenset[str]:
    """CPython's stable-ABI symbol names up to 3.9, from the data file shipped with us."""
    text = resources.files(__package__).joinpath("abi3_symbols.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))


def check_limited_api(info: ElfInfo, file: str) -> list[Violation]:
    """Undefined Python C-API symbols outside the 3.9 stable ABI."""
    allowed = abi3_symbols()
    return [
        Violation(RULE_LIMITED_API, file, sym.name,
                  f"{sym.name} is not in Python's limited API (abi3, Python <= "
                  f"{ABI3_MIN_PYTHON}), so this .abi3.so would break on other Python "
                  "versions; use a limited-API function instead, or leave the Python "
                  "binding to torch (torch.ops)")
        for sym in info.undefined
        if sym.name.startswith(("Py", "_Py")) and sym.name not in allowed
    ]


def allowed_needed(name: str) -> str | None:
    """Who provides the library ``name`` (a key of ALLOWED_NEEDED), or None."""
    for provider, patterns in ALLOWED_NEEDED.items():
        if any(fnmatch(name, p) for p in patterns):
            return provider
    return None


def check_needed(info: ElfInfo, file: str) -> list[Violation]:
    """DT_NEEDED entries that no supported machine is sure to have."""
    return [
        Violation(RULE_NEEDED, file, name,
                  f"links {name}, which neither torch, the CUDA/ROCm libraries torch "
                  "installs, nor a manylinux_2_28 system provides; link it statically, "
                  "load it at run time, or drop the dependency")
        for name in info.needed if allowed_needed(name) is None
    ]


def mangled_namespace(symbol: str) -> str | None:
    """The outermost namespace of an Itanium-mangled nested name, e.g. 'c10'.

    Handles the forms a linker sees for torch's classes and functions: ``_ZN…`` with
    cv/ref qualifiers, and vtables/typeinfo/guards (``_ZTVN…``, ``_ZTIN…``, ``_ZGVN…``).
    """
    match = re.match(r"^_Z(?:T[VIS]|GV|TH|TW)?N[rVKRO]*(\d+)", symbol)
    if not match:
        return None
    length = int(match[1])
    start = match.end()
    return symbol[start:start + length]


def check_stable_abi(info: ElfInfo, file: str) -> list[Violation]:
    """Torch C++ symbols a stable-ABI variant binds to (they change between releases)."""
    found = []
    for sym in info.undefined:
        namespace = mangled_namespace(sym.name)
        if namespace in TORCH_NAMESPACES or sym.name.startswith("THP"):
            found.append(Violation(
                RULE_STABLE_ABI, file, sym.name,
                f"a stable-ABI variant uses torch's unstable C++ API ({namespace or 'THP'}"
                "::…); use only the stable API (torch/csrc/stable, torch/headeronly: "
                "aoti_torch_*/torch_* shims) or build a per-torch variant instead"))
    return found
