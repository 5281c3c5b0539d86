"""CUDA architectures: which ones to compile, and which ones a binary really contains.

``metadata.json`` must list the architectures a variant was *compiled* for, not the
ones the manifest asked for: a flag typo, a part skipped by its CUDA range or an nvcc
that silently drops an arch would otherwise ship a build that claims more than it has.
So after the link we read them back from the shared library itself.

nvcc embeds device code in the ``.nv_fatbin`` ELF section as one or more *fatbin
containers* (one per compiled object; the linker concatenates them, 8-byte aligned).
Each container is a 16-byte header followed by entries, each with its own header that
names the payload kind (SASS cubin or PTX), the SM number and flags. We only read those
headers (with pyelftools for the ELF part), never the payloads, so compressed fatbins
(``-Xfatbin -compress-all``, the default for large builds) read the same. No CUDA tool
is needed: ``cuobjdump`` is not part of every toolkit install (it is absent here) and
may not match the toolkit that built the binary.

Header layout (little endian), as nvcc 12/13 write it::

    container: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size
    entry:     u16 kind (1 PTX, 2 ELF), u16 version, u32 header size, u64 payload size,
               u32, u32, u16 minor, u16 major, u32 sm (e.g. 90), u32, u32, u64 flags, ...

Flag bit 0x100000 marks an arch-specific build (``sm_90a``), 0x200000 a family-specific
one (``sm_100f``); both were checked against nvcc 13.0 output.
"""

from __future__ import annotations

import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import CudaArchError

FATBIN_SECTION = ".nv_fatbin"
FATBIN_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQ")
_KIND_PTX = 1
_KIND_ELF = 2
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY_SPECIFIC = 0x200000

CUDA_13_CAPABILITIES: tuple[str, ...] = (
    "7.5", "8.0", "8.6", "8.7", "8.8", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1",
)
"""What ``nvcc --list-gpu-code`` of CUDA 13.0 lists; used when nvcc cannot be asked
(planning on a machine without the toolkit). Volta (7.0/7.2) left CUDA in 13.0."""

_KNOWN_CAPABILITIES: dict[tuple[int, int], tuple[str, ...]] = {(13, 0): CUDA_13_CAPABILITIES}


@dataclass(frozen=True, order=True)
class CudaArch:
    """One compiled architecture: SM number (90 = capability 9.0), suffix and kind."""

    sm: int
    suffix: str = ""
    """'' for portable SASS, 'a' arch-specific, 'f' family-specific."""
    ptx: bool = False
    """True for PTX (JIT-compiled by the driver on any device of this capability or newer)."""

    @property
    def capability(self) -> str:
        """'9.0', '10.0a', the way build.toml and torch write capabilities."""
        return f"{self.sm // 10}.{self.sm % 10}{self.suffix}"


def parse_capability(text: str) -> tuple[int, str, bool]:
    """'9.0' → (90, '', False); '9.0a' → (90, 'a', False); '12.0+PTX' → (120, '', True)."""
    m = re.fullmatch(r"(\d+)\.(\d)([af]?)(\+PTX)?", text.strip())
    if not m:
        raise CudaArchError(
            f"CUDA capability {text!r} is not of the form MAJOR.MINOR with an optional "
            "a/f suffix and +PTX (e.g. 8.0, 9.0a, 12.0+PTX)"
        )
    return int(m[1]) * 10 + int(m[2]), m[3], bool(m[4])


def supported_capabilities(nvcc: str | None, toolkit: tuple[int, int] | None) -> tuple[str, ...]:
    """The capabilities this nvcc can generate SASS for, oldest first.

    Asks ``nvcc --list-gpu-code`` (authoritative for the installed toolkit); without a
    working nvcc, falls back to the known list of the toolkit release.
    """
    if nvcc:
        try:
            done = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0:
            sms = sorted({int(m) for m in re.findall(r"\bsm_(\d+)\b", done.stdout)})
            if sms:
                return tuple(f"{sm // 10}.{sm % 10}" for sm in sms)
    if toolkit in _KNOWN_CAPABILITIES:
        return _KNOWN_CAPABILITIES[toolkit]
    raise CudaArchError(
        f"cannot tell which GPU architectures CUDA {toolkit} supports: nvcc "
        f"{nvcc or '(none)'} did not answer --list-gpu-code; list them explicitly with "
        "cuda-capabilities in build.toml"
    )


def gencode_flags(requested: tuple[str, ...], supported: tuple[str, ...]) -> list[str]:
    """nvcc ``-gencode`` flags for a part.

    ``requested`` is the part's ``cuda-capabilities`` (empty: every supported one, with
    PTX of the newest so future GPUs can JIT it). Requested capabilities the toolkit
    cannot build are left out (the ecosystem's trees list Volta, which CUDA 13 dropped);
    if none is left that is an error, since the variant would carry no device code.
    """
    supported_sms = {parse_capability(c)[0] for c in supported}
    if not requested:
        newest = max(supported_sms)
        requested = (*(c for c in supported if parse_capability(c)[0] != newest),
                     f"{newest // 10}.{newest % 10}+PTX")
    flags: list[str] = []
    for cap in requested:
        sm, suffix, ptx = parse_capability(cap)
        if sm not in supported_sms:
            continue
        arch = f"{sm}{suffix}"
        code = f"[sm_{arch},compute_{arch}]" if ptx else f"sm_{arch}"
        flags.append(f"-gencode=arch=compute_{arch},code={code}")
    if not flags:
        raise CudaArchError(
            f"none of the requested CUDA capabilities {', '.join(requested)} is supported by "
            f"this toolkit (it supports {', '.join(supported)}); widen cuda-capabilities "
            "in build.toml or build with an older CUDA"
        )
    return flags


def read_compiled_archs(binary: Path) -> tuple[CudaArch, ...]:
    """Every (SM, suffix, SASS/PTX) present in ``binary``'s fatbins, sorted, no duplicates.

    A binary without a ``.nv_fatbin`` section (a CPU-only library) has none.
    """
    try:
        with open(binary, "rb") as stream:
            section = ELFFile(stream).get_section_by_name(FATBIN_SECTION)
            data = section.data() if section is not None else b""
    except (OSError, ELFError) as e:
        raise CudaArchError(f"cannot read {binary} as an ELF shared library: {e}") from None
    return tuple(sorted(set(_parse_fatbin(data, binary))))


def _parse_fatbin(data: bytes, binary: Path) -> list[CudaArch]:
    archs: list[CudaArch] = []
    offset = 0
    while offset + _CONTAINER.size <= len(data):
        magic, _version, header_size, payload = _CONTAINER.unpack_from(data, offset)
        if magic != FATBIN_MAGIC:
            offset += 8  # alignment padding between containers
            continue
        entry, end = offset + header_size, offset + header_size + payload
        if end > len(data):
            raise CudaArchError(f"{binary}: fatbin container at {offset} runs past the section")
        while entry + _ENTRY.size <= end:
            kind, _v, entry_header, size, _c, _u, _mi, _ma, sm, _o, _ol, flags = (
                _ENTRY.unpack_from(data, entry))
            if entry_header < _ENTRY.size:
                raise CudaArchError(f"{binary}: malformed fatbin entry at {entry}")
            if kind in (_KIND_PTX, _KIND_ELF):
                suffix = ("a" if flags & _FLAG_ARCH_SPECIFIC
                          else "f" if flags & _FLAG_FAMILY_SPECIFIC else "")
                archs.append(CudaArch(sm, suffix, ptx=kind == _KIND_PTX))
            entry += entry_header + size
        offset = end
    return archs


def metadata_archs(archs: tuple[CudaArch, ...]) -> list[str]:
    """The ``backend.archs`` list of metadata.json, in torch's TORCH_CUDA_ARCH_LIST terms.

    One item per capability, oldest first: ``'8.0'`` for SASS only, ``'12.0+PTX'`` where
    PTX is embedded too (the driver can JIT it for newer GPUs), ``'9.0a'`` for
    arch-specific SASS. The loader reads exactly these forms.
    """
    by_cap: dict[tuple[int, str], bool] = {}
    for arch in archs:
        key = (arch.sm, arch.suffix)
        by_cap[key] = by_cap.get(key, False) or arch.ptx
    return [f"{sm // 10}.{sm % 10}{suffix}{'+PTX' if ptx else ''}"
            for (sm, suffix), ptx in sorted(by_cap.items())]
