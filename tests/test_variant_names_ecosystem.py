"""Our variant-name parser against the ecosystem's own: kernels 0.19.1 and 0.17.2.

Each reference loader is pip-installed into a directory of its own and asked, in one
subprocess, to parse a corpus of names: the ecosystem's examples of both generations and
a few hundred names our formatter writes. Every name must mean the same build to both
parsers (framework and its version, C++ ABI tag, backend and toolkit, Python minimum and
ABI, system), and 0.19.1 must write it back unchanged. 0.17.2 reads only legacy names:
it must read our legacy names the same way, and never take a current name for a build it
could load.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub.errors import VariantNameError
from kernelhub.formats.variants import (
    Compute,
    Naming,
    PythonTag,
    Variant,
    VariantKind,
    parse_variant,
)
from kernelhub.system import ARCHES
from reference_loader import install_reference_loader

PARSE = r"""
import json, sys
from kernels import __version__
try:
    from kernels._internals import variants as V, backends as B
except ImportError:  # 0.17/0.18 layout
    from kernels import variants as V, backends as B

def version(v):
    return [v.major, v.minor]

def backend(b):
    if b is None:
        return None
    if isinstance(b, V.Noarch):
        return [b.backend_name, None]
    return [b.name, version(b.version) if hasattr(b, "version") else None]

def describe(v):
    if isinstance(v, V.NoarchVariant):
        fw = "mlx" if type(v.framework).__name__ == "MlxNoarch" else "torch"
        word = getattr(v, "backend", None) or getattr(v, "arch")
        return {"kind": "noarch-" + fw, "backend": word.backend_name}
    if type(v).__name__ == "SdkVariant":
        py = v.python
        return {"kind": "sdk", "backend": backend(v.backend),
                "python": None if py is None else [version(py.version), py.abi],
                "system": None if v.system is None else [v.system.platform, v.system.os]}
    fw = v.framework
    kind = {"Torch": "compiled", "TorchStableAbi": "stable-abi", "TvmFfi": "tvm-ffi"}[
        type(fw).__name__]
    arch = getattr(v, "arch", None)  # 0.17: backend and system live in .arch
    b = v.backend if arch is None else arch.backend
    system = [v.system.platform, v.system.os] if arch is None else [arch.platform, arch.os]
    py = getattr(v, "python", None)
    return {"kind": kind, "version": version(fw.version),
            "cxx11": getattr(fw, "cxx11_abi", None), "backend": backend(b),
            "python": [[3, 9], "abi3"] if py is None else [version(py.version), py.abi],
            "system": system}

out = {}
for name in json.loads(sys.stdin.read()):
    try:
        v = V.parse_variant(name)
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"}
        continue
    out[name] = {"str": v.variant_str, **describe(v)}
print(json.dumps({"version": __version__, "parsed": out}))
"""

ECOSYSTEM_EXAMPLES = [
    "torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
    "torch-stable-abi-2.13-cpu-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux",
    "torch-2.13-metal-cpython-3.12-abi3-aarch64-darwin",
    "torch-2.13-rocm-7.14-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cxx11-cpu-cpython-3.10-abi3-x86_64-linux",
    "tvm-ffi-0.1-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
    "torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-windows",
    "torch213-cxx11-cu130-x86_64-linux", "torch213-cxx11-rocm714-x86_64-linux",
    "torch213-cxx11-xpu20252-x86_64-linux", "torch213-cxx11-cann81-aarch64-linux",
    "torch213-metal-aarch64-darwin", "torch29-cxx98-cu126-x86_64-linux",
    "torch213-cpu-x86_64-linux", "torch-stable-abi213-cpu-x86_64-linux",
    "tvm-ffi01-cu128-x86_64-linux",
    "torch-universal", "torch-cpu", "torch-cuda", "torch-npu", "torch-cann", "mlx-metal",
    "sdk", "sdk-cuda", "sdk-cpython-3.12-abi3-x86_64-linux",
    "sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
]

_KIND_WORD = {VariantKind.COMPILED: "compiled", VariantKind.STABLE_ABI: "stable-abi",
              VariantKind.TVM_FFI: "tvm-ffi"}


def _generated(count: int) -> list[str]:
    """Names our formatter writes for builds across the whole vocabulary (seeded)."""
    rng = random.Random(21)
    names = set()
    while len(names) < count:
        kind = rng.choice(list(_KIND_WORD))
        backend = rng.choice(["cpu", "cuda", "rocm", "xpu", "cann", "neuron", "tpu"])
        version = ((rng.randint(2024, 2030) if backend == "xpu" else rng.randint(1, 19),
                    rng.randint(0, 9)) if backend in ("cuda", "rocm", "xpu", "cann") else ())
        naming = rng.choice(list(Naming))
        python = (PythonTag((3, rng.randint(15, 17)), rng.choice(["abi3", "abi3t"]))
                  if rng.random() < 0.3 else PythonTag((3, rng.randint(9, 14))))
        v = Variant(kind, (rng.randint(0, 9), rng.randint(0, 20)), Compute(backend, version),
                    rng.choice(ARCHES), "linux",
                    python if naming is Naming.CURRENT else None, naming)
        names.add(v.name)
    return sorted(names)


def _ours(name: str) -> dict[str, object] | None:
    """Our parse in the shape PARSE reports, or None where we refuse the name."""
    try:
        v = parse_variant(name)
    except VariantNameError:
        return None
    backend = None if v.compute is None else [v.compute.backend, list(v.compute.version) or None]
    python = None if v.python is None else [list(v.python.version), v.python.abi]
    system = None if v.arch is None else [v.arch, v.os]
    if v.kind in (VariantKind.NOARCH, VariantKind.UNIVERSAL, VariantKind.MLX):
        word = "universal" if v.kind is VariantKind.UNIVERSAL else v.name.split("-", 1)[1]
        return {"kind": "noarch-mlx" if v.kind is VariantKind.MLX else "noarch-torch",
                "backend": word}
    if v.kind is VariantKind.SDK:
        if backend is not None and not v.compiled:
            backend = [backend[0], None]
        return {"kind": "sdk", "backend": backend, "python": python, "system": system}
    assert v.torch is not None
    cxx = {"cxx11": True, "cxx98": False, None: None}[v.cxx_abi]
    return {"kind": _KIND_WORD[v.kind], "version": list(v.torch), "cxx11": cxx,
            "backend": backend, "python": python, "system": system}


def _parse_with(target: Path, names: list[str]) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run([sys.executable, "-c", PARSE], input=json.dumps(names), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["parsed"]


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return sorted({*ECOSYSTEM_EXAMPLES, *_generated(300)})


def test_kernels_0_19_reads_every_name_as_we_do(corpus: list[str],
                                                tmp_path_factory: pytest.TempPathFactory
                                                ) -> None:
    target = install_reference_loader(tmp_path_factory.mktemp("kernels-0.19.1"), "0.19.1")
    theirs = _parse_with(target, corpus)
    for name in corpus:
        ours, seen = _ours(name), theirs[name]
        assert ours is not None, f"we refuse {name!r}, kernels 0.19.1 reads {seen}"
        assert "error" not in seen, f"kernels 0.19.1 refuses {name!r}: {seen['error']}"
        assert seen.pop("str") == name
        assert seen == ours, name


def test_kernels_0_17_reads_our_legacy_names_and_no_current_one(
        corpus: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    target = install_reference_loader(tmp_path_factory.mktemp("kernels-0.17.2"), "0.17.2")
    theirs = _parse_with(target, corpus)
    loadable_words = {"cpu", "cuda", "rocm", "xpu", "metal", "npu", "neuron", "tpu",
                      "universal"}
    for name in corpus:
        v, seen = parse_variant(name), theirs[name]
        legacy = v.naming is Naming.LEGACY and v.kind not in (VariantKind.SDK, VariantKind.MLX)
        if legacy:
            assert "error" not in seen, f"kernels 0.17.2 refuses {name!r}: {seen['error']}"
            assert seen.pop("str") == name
            ours = _ours(name)
            if v.compute == Compute("rocm", (7, 14)):
                # 0.17 reads rocm714 as ROCm 71.4; 0.19 made 7.14 the one exception to
                # "the last digit is the minor", and so do we.
                assert ours is not None and seen["backend"] == ["rocm", [71, 4]]
                seen["backend"] = ours["backend"]
            assert seen == ours, name
        else:
            # Refused, or a pure-Python variant of a backend no machine has: never loaded.
            assert "error" in seen or (seen["kind"] == "noarch-torch"
                                       and (seen["backend"] not in loadable_words
                                            or name == "torch-cann")), (name, seen)
