"""The manylinux_2_28 pinning header: a real g++ build on this host with and without it,
read back by the same ELF check ``builder check`` runs."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest
from kernelhub.formats.variants import parse_variant
from kernelhub_builder.check.abi import check_symbol_versions, read_elf
from kernelhub_builder.compile.backends import CompileUnit
from kernelhub_builder.compile.portable import (
    HOST_GLIBC_ENV,
    pinning,
    settings_token,
    with_compat_header,
)
from kernelhub_builder.compile.render import compat_header

VARIANT = parse_variant("torch213-cxx11-cpu-x86_64-linux")
SOURCE = r"""
#include <cmath>
#include <memory>
// What kernels do: libm calls and shared_ptr refcounts (libstdc++'s single-thread check).
extern "C" double kernel(double x) {
  auto p = std::make_shared<double>(std::exp(x) + std::log(x + 2) + std::pow(x, 1.5));
  auto q = p;
  return *q;
}
"""


def compile_so(tmp_path: Path, name: str, header: Path | None) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "k.cpp"
    src.write_text(SOURCE)
    out = tmp_path / f"{name}.so"
    extra = ["-include", str(header)] if header else []
    subprocess.run([cxx, "-O2", "-fPIC", "-shared", *extra, str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def too_new(so: Path) -> list[str]:
    return sorted({v.message for v in check_symbol_versions(read_elf(so),
                                                                             so.name)})


def test_pinned_build_needs_nothing_newer_than_manylinux_2_28(tmp_path: Path) -> None:
    if not pinning(VARIANT) or platform.machine() != "x86_64":
        pytest.skip("pinning applies to x86_64 Linux here")
    header = tmp_path / "compat.h"
    header.write_text(compat_header(VARIANT))
    host = compile_so(tmp_path, "host", None)
    pinned = compile_so(tmp_path, "pinned", header)
    assert too_new(pinned) == []
    # The check can fail: on a glibc >= 2.29 host the unpinned build is too new.
    libc, version = platform.libc_ver()
    if libc == "glibc" and tuple(int(p) for p in version.split(".")[:2]) >= (2, 29):
        assert any("GLIBC_2.29" in v for v in too_new(host)), too_new(host)


def test_the_header_reaches_every_host_compile_step_and_the_id() -> None:
    units = (CompileUnit(Path("a.cpp"), "obj/a.o", "cxx", ("-O3",)),
             CompileUnit(Path("b.cu"), "obj/b.o", "nvcc", ()),
             CompileUnit(Path("k.metal"), "obj/k.air", "metal", ()))
    out = with_compat_header(units, Path("/g/h.h"))
    assert [u.flags[-2:] for u in out[:2]] == [("-include", "/g/h.h")] * 2
    assert out[2] == units[2]
    assert settings_token(VARIANT, compat_header(VARIANT)).startswith("glibc=manylinux_2_28:")
    assert not pinning(parse_variant("torch213-metal-aarch64-darwin"))


def test_host_glibc_opt_out_changes_the_id(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = settings_token(VARIANT, compat_header(VARIANT))
    monkeypatch.setenv(HOST_GLIBC_ENV, "1")
    assert not pinning(VARIANT)
    assert settings_token(VARIANT, compat_header(VARIANT)) == "glibc=host" != pinned
