"""ELF rules on tiny shared libraries compiled here, one per rule, each made to break it.

Every library is real (g++/gcc on this host); the checks read them with pyelftools just
as they read a kernel's ``.abi3.so``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kernelhub_builder.check.abi import (
    abi3_symbols,
    allowed_needed,
    check_limited_api,
    check_needed,
    check_stable_abi,
    check_symbol_versions,
    mangled_namespace,
    parse_symbol_version,
    read_elf,
)
from kernelhub_builder.check.package import check_library_namespaces
from kernelhub_builder.check.violation import (
    RULE_LIMITED_API,
    RULE_MANYLINUX,
    RULE_NEEDED,
    RULE_OP_NAMESPACE,
    RULE_STABLE_ABI,
)

CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler to make test ELFs")

SOURCES = {
    # GLIBCXX_3.4.29 (gcc 11's libstdc++) and GLIBC_2.32: both newer than manylinux_2_28.
    "new_runtime": """
        #include <bits/functexcept.h>
        extern "C" char __libc_single_threaded;
        void fail() { std::__throw_bad_array_new_length(); }
        int single() { return __libc_single_threaded; }
    """,
    # PyModule_Create2 is abi3; PyUnicode_AsUTF8AndSize only joined the limited API in 3.10.
    "python_api": """
        extern "C" void* PyModule_Create2(void*, int);
        extern "C" const char* PyUnicode_AsUTF8AndSize(void*, long*);
        void* make() { return PyModule_Create2(nullptr, 3); }
        const char* text(void* o) { return PyUnicode_AsUTF8AndSize(o, nullptr); }
    """,
    # One C++ function of c10 (unstable) next to a C shim of the stable ABI.
    "torch_symbols": """
        namespace c10 { struct Device { void set_index(int); }; }
        extern "C" int aoti_torch_get_numel(void*, long*);
        void use(c10::Device& d, void* t, long* n) { d.set_index(0); aoti_torch_get_numel(t, n); }
    """,
    # What TORCH_LIBRARY_IMPL(aten, CPU, m) leaves in .symtab: a registration into aten.
    "foreign_registration": """
        static void TORCH_LIBRARY_IMPL_init_aten_CPU_0(int& m) { m = 1; }
        static void TORCH_LIBRARY_init__mine_cpu_0123456789(int& m) { m = 2; }
        void (*keep[])(int&) = {&TORCH_LIBRARY_IMPL_init_aten_CPU_0,
                                &TORCH_LIBRARY_init__mine_cpu_0123456789};
    """,
}


@pytest.fixture(scope="module")
def elfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each source compiled to lib<name>.so; 'bad_needed' links a library no one ships."""
    root = tmp_path_factory.mktemp("elfs")
    built = {}
    for name, source in SOURCES.items():
        src = root / f"{name}.cpp"
        src.write_text(source)
        built[name] = root / f"lib{name}.so"
        subprocess.run([CXX, "-shared", "-fPIC", "-O0", str(src), "-o", str(built[name])],
                       check=True)
    (root / "helper.cpp").write_text("int helper() { return 1; }\n")
    subprocess.run([CXX, "-shared", "-fPIC", str(root / "helper.cpp"), "-o",
                    str(root / "libhelper.so")], check=True)
    (root / "bad_needed.cpp").write_text("int helper(); int f() { return helper(); }\n")
    built["bad_needed"] = root / "libbad_needed.so"
    subprocess.run([CXX, "-shared", "-fPIC", str(root / "bad_needed.cpp"), f"-L{root}",
                    "-lhelper", "-Wl,--no-as-needed", "-o", str(built["bad_needed"])],
                   check=True)
    return built


def test_symbol_versions_beyond_manylinux_2_28_are_named_with_the_symbol(
    elfs: dict[str, Path],
) -> None:
    found = check_symbol_versions(read_elf(elfs["new_runtime"]), "libnew_runtime.so")
    details = {v.detail for v in found}
    assert "_ZSt28__throw_bad_array_new_lengthv@GLIBCXX_3.4.29" in details
    assert "__libc_single_threaded@GLIBC_2.32" in details
    assert all(v.rule == RULE_MANYLINUX and v.file == "libnew_runtime.so" for v in found)
    glibcxx = next(v for v in found if "GLIBCXX" in v.detail)
    assert "GLIBCXX up to 3.4.24" in glibcxx.message


def test_old_enough_symbol_versions_pass(elfs: dict[str, Path]) -> None:
    # helper.cpp needs nothing newer than the oldest glibc symbols.
    info = read_elf(elfs["bad_needed"].with_name("libhelper.so"))
    assert check_symbol_versions(info, "libhelper.so") == []


def test_python_symbols_outside_the_3_9_limited_api_are_violations(
    elfs: dict[str, Path],
) -> None:
    found = check_limited_api(read_elf(elfs["python_api"]), "libpython_api.so")
    assert [(v.rule, v.detail) for v in found] == [
        (RULE_LIMITED_API, "PyUnicode_AsUTF8AndSize")
    ]
    assert "limited API" in found[0].message


def test_a_dependency_nobody_ships_is_named(elfs: dict[str, Path]) -> None:
    info = read_elf(elfs["bad_needed"])
    assert "libhelper.so" in info.needed
    found = check_needed(info, "libbad_needed.so")
    assert [(v.rule, v.detail) for v in found] == [(RULE_NEEDED, "libhelper.so")]


def test_stable_abi_rejects_torch_cpp_symbols_but_not_c_shims(elfs: dict[str, Path]) -> None:
    found = check_stable_abi(read_elf(elfs["torch_symbols"]), "libtorch_symbols.so")
    assert [(v.rule, v.detail) for v in found] == [
        (RULE_STABLE_ABI, "_ZN3c106Device9set_indexEi")
    ]


def test_registrations_outside_the_variant_namespace_are_found(elfs: dict[str, Path]) -> None:
    info = read_elf(elfs["foreign_registration"])
    found = check_library_namespaces(info, "lib.so", "_mine_cpu_0123456789")
    assert [(v.rule, v.detail) for v in found] == [
        (RULE_OP_NAMESPACE, "TORCH_LIBRARY_IMPL aten_CPU_0")
    ]


def test_version_and_name_parsing() -> None:
    assert parse_symbol_version("GLIBCXX_3.4.30") == ("GLIBCXX", (3, 4, 30))
    assert parse_symbol_version("GLIBC_PRIVATE") is None
    assert mangled_namespace("_ZNK2at10TensorBase8data_ptrIfEEPT_v") == "at"
    assert mangled_namespace("_ZTVN5torch8autograd8FunctionE") == "torch"
    assert mangled_namespace("_ZNSt6vectorIiSaIiEE9push_backEv") is None
    assert allowed_needed("libcudart.so.13") == "CUDA libraries torch installs"
    assert allowed_needed("libgomp.so.1") == "torch"
    assert allowed_needed("libz.so.1") is None


def test_abi3_list_holds_3_9_names_and_not_later_ones() -> None:
    names = abi3_symbols()
    assert {"PyModule_Create2", "_Py_Dealloc", "PyObject_GC_IsTracked"} <= names
    assert not {"PyUnicode_AsUTF8AndSize", "PyType_GetModule", "Py_NewRef"} & names
