"""The CI build matrix: one job per (kernel, variant) of the manifests, with runner labels.

``builder ci-matrix`` prints what a GitHub Actions workflow reads with ``fromJSON``, so the
jobs come from ``kernels.toml`` and the ``build.toml`` files, never from a hand-written
list. The full matrix is used, not what this host can build: each job runs on a runner
that can build its variant, which is what the labels say.

Runner choice (documented in docs/shipping.md): GitHub-hosted runners build and test what
needs no accelerator (CPU variants on Linux x86_64/aarch64 and macOS, ``torch-universal``);
a variant that needs a device toolkit (CUDA, ROCm, oneAPI) goes to a self-hosted runner
labelled with the toolkit and the device, where it is built and tested on the hardware.
Metal builds on GitHub's macOS runners, whose virtual GPU cannot run compute kernels, so
its tests are left to a developer's Mac and the job says ``test: false``.

``--shard i/n`` (see :func:`shard_of`) splits the same list deterministically, so a pool of
identical machines can share the work; every checkout computes the same split.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kernelhub.variants import Variant, VariantKind

from ..errors import ShardError
from ..manifest import KernelManifest, Project
from ..plan.matrix import PlannedVariant, plan_variants

T = TypeVar("T")

_HOSTED = {
    ("x86_64", "linux"): "ubuntu-24.04",
    ("aarch64", "linux"): "ubuntu-24.04-arm",
    ("aarch64", "darwin"): "macos-15",
}
_SELF_HOSTED_ARCH = {"x86_64": "X64", "aarch64": "ARM64"}
_DEVICE_LABEL = {"cuda": "nvidia-gpu", "rocm": "amd-gpu", "xpu": "intel-gpu"}
_NOARCH_HOST = ("x86_64", "linux")
"""Pure-Python variants build anywhere; they are built (and tested) on Linux x86_64."""


@dataclass(frozen=True)
class CiJob:
    """One matrix entry: which variant, where it runs, and whether it can be tested there."""

    kernel: str
    variant: str
    runs_on: tuple[str, ...]
    os: str
    arch: str
    toolkit: str | None
    """The device toolkit the runner must carry (``cuda-13.0``), None for CPU/pure Python."""
    gpu: bool
    """Whether the runner has the variant's accelerator."""
    test: bool
    """Whether ``builder test`` can run there (the hardware the variant targets exists)."""

    def to_json(self) -> dict[str, Any]:
        """The matrix entry (keys are the workflow's API: keep them stable)."""
        return {
            "kernel": self.kernel,
            "variant": self.variant,
            "runs-on": list(self.runs_on),
            "os": self.os,
            "arch": self.arch,
            "toolkit": self.toolkit,
            "gpu": self.gpu,
            "test": self.test,
            "artifact": artifact_name(self.kernel, self.variant),
        }


def artifact_name(kernel: str, variant: str) -> str:
    """The CI artifact of one built variant (it holds ``<kernel>/<variant>/…``)."""
    return f"variant--{kernel}--{variant}"


def ci_jobs(project: Project, kernels: Iterable[KernelManifest]) -> list[CiJob]:
    """Every (kernel, variant) of the manifests' full matrix, once, sorted."""
    jobs = [
        job_for(kernel.name, planned.variant)
        for kernel in kernels
        for planned in plan_variants(project, kernel)
    ]
    return sorted(jobs, key=lambda j: (j.kernel, j.variant))


def job_for(kernel: str, variant: Variant) -> CiJob:
    """The runner a variant needs, in labels."""
    backend = variant.backend
    arch, os_name = (variant.arch, variant.os) if variant.arch else _NOARCH_HOST
    assert arch is not None and os_name is not None
    toolkit = None
    if backend in _DEVICE_LABEL:
        compute = variant.compute
        assert compute is not None
        # A pure-Python torch-<backend> variant needs the device to be tested, no toolkit.
        toolkit = f"{backend}-{compute.version_str}" if compute.version else None
        labels = ("self-hosted", os_name.capitalize(), _SELF_HOSTED_ARCH[arch],
                  _DEVICE_LABEL[backend], *((toolkit,) if toolkit else ()))
        return CiJob(kernel, variant.name, labels, os_name, arch, toolkit, gpu=True, test=True)
    hosted = _HOSTED[(arch, os_name)]
    if backend == "metal":
        return CiJob(kernel, variant.name, (hosted,), os_name, arch, "metal", gpu=False,
                     test=False)
    return CiJob(kernel, variant.name, (hosted,), os_name, arch, None, gpu=False,
                 test=backend in ("cpu", None) or variant.kind is VariantKind.UNIVERSAL)


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` → (2, 3)."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise ShardError(f"--shard {text!r}: expected i/n with 1 <= i <= n, such as 1/2")
    return i, n


def shard_of(items: Sequence[T], shard: tuple[int, int]) -> list[T]:
    """Shard ``i`` of ``n``: every n-th item starting at the i-th, so shards stay balanced
    and every item lands in exactly one shard. ``items`` must be in a fixed order."""
    i, n = shard
    return [item for k, item in enumerate(items) if k % n == i - 1]


def shard_plans(
    plans: dict[str, list[PlannedVariant]], shard: tuple[int, int]
) -> dict[str, list[PlannedVariant]]:
    """Keep the buildable (kernel, variant) pairs of one shard, pairs sorted by name."""
    pairs = sorted((kernel, p.name) for kernel, planned in plans.items()
                   for p in planned if p.buildable)
    mine = set(shard_of(pairs, shard))
    return {kernel: [p for p in planned if (kernel, p.name) in mine]
            for kernel, planned in plans.items()}
