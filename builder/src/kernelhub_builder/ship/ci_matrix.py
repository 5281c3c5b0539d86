"""The CI build matrix: one job per (kernel, variant) of the manifests, with runner labels.

``builder ci-matrix`` prints what a GitHub Actions workflow reads with ``fromJSON``, so the
jobs come from ``kernels.toml`` and the ``build.toml`` files, never from a hand-written
list. The full matrix is used, not what this host can build: each job runs on a runner
that can build its variant, which is what the labels say.

Runner choice (documented in docs/shipping.md): every variant *builds* on a GitHub-hosted
runner of its OS and arch (``ubuntu-24.04``, ``ubuntu-24.04-arm``, ``macos-15``), device
toolkits included: compiling needs the toolkit (from packages, ``ci/install-toolkit``)
and a torch built for it (from PyTorch's index for that toolkit, ``torch-index``), never
the device. A build job runs the kernel's tests where the runner has the hardware the
variant targets (CPU and ``torch-universal``). A variant that needs a device to be tested
(CUDA, ROCm, XPU) also gets a *device-test* job, on a self-hosted runner labelled with the
device, only for the devices the caller says exist (``devices``): a job for a label no
runner carries would wait in the queue for a day. Device tests are optional: a release
does not wait for a device nobody has. Metal builds on ``macos-15``, whose virtual GPU
cannot run compute kernels, so neither job tests it.

``missing`` (a hub and what it holds) narrows the plan to the variants each kernel's
release tag does not have yet: how a later run adds what an earlier release lacked.

``--shard i/n`` (see :func:`shard_of`) splits the same list deterministically, so a pool of
identical machines can share the work; every checkout computes the same split.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kernelhub.errors import RepoNotFoundError
from kernelhub.formats.variants import Variant, VariantKind, parse_variant
from kernelhub.hub import Hub

from ..errors import BuilderError, ShardError
from ..manifest import KernelManifest, Project
from ..plan.matrix import PlannedVariant, build_env_minor, kernel_torch_versions, plan_variants
from .names import published_names

T = TypeVar("T")

_HOSTED = {
    ("x86_64", "linux"): "ubuntu-24.04",
    ("aarch64", "linux"): "ubuntu-24.04-arm",
    ("aarch64", "darwin"): "macos-15",
}
_SELF_HOSTED_ARCH = {"x86_64": "X64", "aarch64": "ARM64"}
DEVICE_LABELS = {"cuda": "nvidia-gpu", "rocm": "amd-gpu", "xpu": "intel-gpu"}
"""The self-hosted runner label of each device a variant may need for its tests."""
TORCH_INDEX = "https://download.pytorch.org/whl/"
"""PyTorch's package index; ``<it><tag>`` holds the torch builds for one toolkit."""
_NOARCH_HOST = ("x86_64", "linux")
"""Pure-Python variants build anywhere; they are built (and tested) on Linux x86_64."""


@dataclass(frozen=True)
class CiJob:
    """One matrix entry: which variant, where it builds, and where it can be tested."""

    kernel: str
    variant: str
    runs_on: tuple[str, ...]
    os: str
    arch: str
    toolkit: str | None
    """The device toolkit the build installs (``cuda-13.0``), None for CPU/pure Python."""
    test: bool
    """Whether the build runner can run the kernel's tests (no device needed)."""
    device: str | None
    """The self-hosted runner label of the device the tests need (``nvidia-gpu``), if any."""
    torch: str | None
    """The torch minor whose environment builds the variant (None: pure Python)."""
    torch_index: str | None
    """Where that environment's torch comes from (None: PyPI's default build)."""

    def to_json(self) -> dict[str, Any]:
        """The matrix entry (keys are the workflow's API: keep them stable)."""
        return {
            "kernel": self.kernel,
            "variant": self.variant,
            "runs-on": list(self.runs_on),
            "os": self.os,
            "arch": self.arch,
            "toolkit": self.toolkit,
            "test": self.test,
            "device": self.device,
            "torch": self.torch,
            "torch-index": self.torch_index,
            "artifact": artifact_name(self.kernel, self.variant),
        }

    def device_test(self) -> dict[str, Any]:
        """The device-test entry: the same variant's artifact, tested on a self-hosted
        runner that has the device."""
        assert self.device is not None
        return {
            "kernel": self.kernel,
            "variant": self.variant,
            "runs-on": ["self-hosted", "Linux", _SELF_HOSTED_ARCH[self.arch], self.device],
            "device": self.device,
            "artifact": artifact_name(self.kernel, self.variant),
            "result": device_result_name(self.kernel, self.variant),
        }


def artifact_name(kernel: str, variant: str) -> str:
    """The CI artifact of one built variant (it holds ``<kernel>/<variant>/…``)."""
    return f"variant--{kernel}--{variant}"


def device_result_name(kernel: str, variant: str) -> str:
    """The CI artifact of one device test's result (``<kernel>--<variant>.json``)."""
    return f"device-test--{kernel}--{variant}"


def ci_jobs(project: Project, kernels: Iterable[KernelManifest]) -> list[CiJob]:
    """Every (kernel, variant) of the manifests' full matrix, once, sorted."""
    jobs = [
        job_for(project, kernel, planned.variant)
        for kernel in kernels
        for planned in plan_variants(project, kernel)
    ]
    return sorted(jobs, key=lambda j: (j.kernel, j.variant))


def job_for(project: Project, kernel: KernelManifest, variant: Variant) -> CiJob:
    """The hosted runner that builds a variant, the toolkit and torch it needs, and the
    device (if any) its tests need."""
    backend = variant.backend
    arch, os_name = (variant.arch, variant.os) if variant.arch else _NOARCH_HOST
    assert arch is not None and os_name is not None
    compute = variant.compute
    toolkit = (f"{backend}-{compute.version_str}"
               if backend in DEVICE_LABELS and compute is not None and compute.version else None)
    if variant.torch is not None:
        torch: str | None = build_env_minor(project, variant)
    else:  # pure Python: import-checked under the newest torch of its range
        torch = kernel_torch_versions(project, kernel)[-1]
    return CiJob(
        kernel.name, variant.name, (_HOSTED[(arch, os_name)],), os_name, arch, toolkit,
        test=backend in ("cpu", None) or variant.kind is VariantKind.UNIVERSAL,
        device=DEVICE_LABELS.get(backend or ""),
        torch=torch, torch_index=_torch_index(os_name, toolkit),
    )


def _torch_index(os_name: str, toolkit: str | None) -> str | None:
    """PyTorch's index for the toolkit's torch builds; CPU builds on Linux (PyPI's
    default Linux torch carries CUDA: gigabytes a CPU job never uses); PyPI on macOS."""
    if os_name != "linux":
        return None
    if toolkit is None:
        return TORCH_INDEX + "cpu"
    backend, version = toolkit.split("-", 1)
    tag = {"cuda": f"cu{version.replace('.', '')}", "rocm": f"rocm{version}", "xpu": "xpu"}
    return TORCH_INDEX + tag[backend]


def device_tests(jobs: Iterable[CiJob], devices: Iterable[str]) -> list[dict[str, Any]]:
    """The device-test entries for the devices that have runners."""
    present = set(devices)
    unknown = present - set(DEVICE_LABELS.values())
    if unknown:
        raise BuilderError(f"unknown device label(s) {sorted(unknown)}; known: "
                           f"{', '.join(sorted(DEVICE_LABELS.values()))}")
    return [job.device_test() for job in jobs if job.device in present]


def release_variants(hub: Hub, repo_id: str, tag: str) -> set[str]:
    """The variants ``repo_id``'s release tag holds on ``hub`` (none when not published)."""
    try:
        commit = hub.list_refs(repo_id).tags.get(tag)
    except RepoNotFoundError:
        return set()
    return set(hub.list_variants(repo_id, commit)) if commit else set()


def missing_jobs(jobs: Iterable[CiJob], project: Project,
                 kernels: Sequence[KernelManifest], hub: Hub) -> list[CiJob]:
    """The jobs whose variant the kernel's release tag on ``hub`` does not hold yet under
    every name the project publishes it under (``[hub] variant-names``)."""
    from .publish import repo_id_for

    held = {k.name: release_variants(hub, repo_id_for(project, k), f"v{k.release}")
            for k in kernels}
    return [job for job in jobs
            if not set(published_names(parse_variant(job.variant), project.variant_names))
            <= held.get(job.kernel, set())]


def github_outputs(jobs: Sequence[CiJob], devices: Iterable[str]) -> dict[str, Any]:
    """What the plan job hands the others: the build matrix, the device-test matrix, and
    their sizes (an empty matrix is an error to Actions, so jobs check the count first)."""
    tests = device_tests(jobs, devices)
    return {"matrix": {"include": [job.to_json() for job in jobs]}, "count": len(jobs),
            "device-matrix": {"include": tests}, "device-count": len(tests)}


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
