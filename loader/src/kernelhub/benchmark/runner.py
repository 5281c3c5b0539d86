"""Run a repository's ``benchmarks/benchmark*.py`` classes against one loaded kernel.

A script's benchmark classes are the classes it defines that derive from a class named
``Benchmark`` (:class:`kernelhub.benchmark.Benchmark`, or the ecosystem's own, so its
scripts run unchanged) and have ``benchmark_<workload>`` methods. Per workload, on a fresh
instance: seed, ``setup_<workload>`` (else ``setup``), run the workload once and compare
``out`` with ``verify_<workload>()`` (the ecosystem's rule: ``torch.allclose``, atol 1e-2),
then time the workload and the reference alike (warm-up calls, then ``iterations`` timed
calls each, the device synchronised after every call), so the speedup compares two
timings from the same run. A script that defines no benchmark class (a standalone script
that happens to match the name) is skipped and named.

Running a script runs the repository's code: the caller decides trust (a hub repository
must be trusted like any load; a local path is trusted by naming it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import KernelHubError
from ..lazy_names import deferred
from ..system import SystemInfo, backend_of, cpu_features, cpu_summary, device_type
from .results import Timing, WorkloadResult

if TYPE_CHECKING:
    import torch
else:
    torch = deferred("torch")

BENCHMARKS_DIR = "benchmarks"
SCRIPT_GLOB = "benchmark*.py"


class BenchmarkError(KernelHubError):
    """A benchmark script or class could not be loaded or run."""


def find_scripts(benchmarks_dir: Path) -> list[Path]:
    scripts = sorted(benchmarks_dir.glob(SCRIPT_GLOB)) if benchmarks_dir.is_dir() else []
    if not scripts:
        raise BenchmarkError(f"no {BENCHMARKS_DIR}/{SCRIPT_GLOB} scripts in {benchmarks_dir.parent}")
    return scripts


def scripts_sha(scripts: list[Path]) -> str:
    h = hashlib.sha256()
    for script in scripts:
        h.update(script.read_bytes())
    return h.hexdigest()


@contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def load_classes(script: Path, cwd: Path) -> list[type]:
    """The benchmark classes ``script`` defines (run with ``cwd`` as working directory, as
    the ecosystem's runner does)."""
    name = f"_kernelhub_benchmark_{hashlib.sha256(str(script).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        raise BenchmarkError(f"cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _working_dir(cwd):
            spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise BenchmarkError(f"{script} failed to import: {type(e).__name__}: {e}") from None
    return [obj for obj in vars(module).values() if _is_benchmark_class(obj, module)]


def _is_benchmark_class(obj: object, module: ModuleType) -> bool:
    return (isinstance(obj, type) and obj.__module__ == module.__name__
            and any(base.__name__ == "Benchmark" for base in obj.__mro__[1:])
            and bool(workloads(obj)))


def workloads(cls: type) -> list[str]:
    return sorted(name[len("benchmark_"):] for name in dir(cls)
                  if name.startswith("benchmark_") and callable(getattr(cls, name)))


def torch_device(system: SystemInfo) -> str:
    """The torch device a backend's kernels run on (ROCm torch calls its GPUs ``cuda``)."""
    kind = device_type(backend_of(system.backend)) if system.backend != "cpu" else "cpu"
    return {"rocm": "cuda", "cann": "npu"}.get(kind, kind)


def _synchronize(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "xpu":
        torch.xpu.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _time(call: Callable[[], Any], torch: Any, device: str, warmup: int,
          iterations: int) -> Timing:
    for _ in range(warmup):
        call()
        _synchronize(torch, device)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        _synchronize(torch, device)
        times.append((time.perf_counter() - start) * 1000)
    return Timing.of(times)


def _compare(torch: Any, out: Any, expected: Any) -> str | None:
    """None when ``out`` matches ``expected`` by the ecosystem's rule, else why not."""
    if not isinstance(out, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return (f"out is {type(out).__name__} and the reference {type(expected).__name__}; "
                "both must be tensors")
    if out.shape != expected.shape:
        return f"out has shape {tuple(out.shape)}, the reference {tuple(expected.shape)}"
    if torch.allclose(out, expected.to(out.dtype), atol=1e-2):
        return None
    diff = (out.float() - expected.float()).abs().max().item()
    return f"largest difference {diff:.4g} (allowed: atol 1e-2, rtol 1e-5)"


def run_class(cls: type, kernel: ModuleType, device: str, warmup: int,
              iterations: int) -> list[WorkloadResult]:
    results = []
    for workload in workloads(cls):
        instance = cls()
        instance.kernel, instance.device = kernel, device
        seed = getattr(instance, "seed", None)
        if seed is not None:
            torch.manual_seed(seed)
            random.seed(seed)
        name = f"{cls.__name__}.{workload}"
        try:
            getattr(instance, f"setup_{workload}", instance.setup)()
            run = getattr(instance, f"benchmark_{workload}")
            verify = getattr(instance, f"verify_{workload}", None)
            verified, mismatch, reference = None, None, None
            if verify is not None:
                run()
                _synchronize(torch, device)
                mismatch = _compare(torch, instance.out, verify())
                verified = mismatch is None
                reference = _time(verify, torch, device, warmup, iterations)
            timing = _time(run, torch, device, warmup, iterations)
        except Exception as e:
            raise BenchmarkError(f"{name}: {type(e).__name__}: {e}") from None
        results.append(WorkloadResult(name, timing, reference, verified, mismatch))
    return results


def machine_info(system: SystemInfo) -> dict[str, Any]:
    """What the machine is, in the ecosystem's ``machineInfo`` keys plus kernelhub's."""
    gpu = "N/A"
    if system.backend in ("cuda", "rocm") and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
    elif system.backend == "xpu":
        gpu = torch.xpu.get_device_name(0)
    return {"gpu": gpu, "backend": system.backend, "pytorchVersion": torch.__version__,
            "os": f"{platform.system()} {platform.release()}", "cpu": cpu_features(),
            "cpuFeatures": cpu_summary(), "system": system.describe(),
            "python": platform.python_version(), "threads": torch.get_num_threads()}
