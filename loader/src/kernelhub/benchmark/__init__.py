"""The ``Benchmark`` base class kernel repositories write their benchmarks with.

The shape is the kernel ecosystem's (``kernels.benchmark.Benchmark``), so a repository's
``benchmarks/benchmark*.py`` runs under ``kernelhub benchmark`` and the ecosystem's
``kernels benchmark`` alike::

    class SiluAndMul(Benchmark):
        seed = 42

        def setup_small(self):                  # or setup() for every workload
            self.x = torch.randn(8, 1024, 2048, device=self.device)
            self.out = torch.empty(8, 1024, 1024, device=self.device)

        def benchmark_small(self):              # timed; writes self.out
            self.kernel.silu_and_mul(self.out, self.x)

        def verify_small(self):                 # the reference self.out must match,
            d = self.x.shape[-1] // 2           # timed too (the baseline)
            return F.silu(self.x[..., :d]) * self.x[..., d:]

The runner (:mod:`kernelhub.benchmark.runner`) sets ``kernel`` (the loaded variant's
module) and ``device``, seeds torch and ``random`` with ``seed``, and makes a fresh
instance per workload. A class that derives from the ecosystem's own ``Benchmark``
instead of this one runs the same way.
"""

from __future__ import annotations

from typing import Any


class Benchmark:
    """Base class of a kernel benchmark: ``setup[_<w>]``, ``benchmark_<w>``, ``verify_<w>``."""

    seed: int | None = None
    """Seed for torch and ``random`` before each workload's setup; None: not seeded."""
    device: str = "cpu"
    """The torch device the workloads run on (set by the runner)."""

    def __init__(self) -> None:
        self.kernel: Any = None
        self.out: Any = None

    def setup(self) -> None:
        """Make the workload's tensors (instance attributes); used where there is no
        ``setup_<workload>``."""
