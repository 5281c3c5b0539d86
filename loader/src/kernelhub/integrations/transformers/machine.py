"""Table entries a machine declines before kernelize, from its CPU features and the model.

``use_kernels=True`` must never make a model slower (issue 32). Autotuning cannot promise
that: users rarely turn it on, and it times each op alone, not in the model around it,
where a kernel that wins alone can still lose (another thread pool handing over, a layout
the next GEMM reorders). So where a table kernel was measured slower than PyTorch's own
path, in the model, on CPUs of a kind (their features), for a dtype and a shape of model,
that entry is dropped for such a machine before kernelize runs, and the model keeps
PyTorch there. Each rule names the measurement it stands on, and what it declines is said
once per process (logger ``kernelhub.transformers``).

A rule never overrides the user: a name given explicitly in a ``KernelConfig`` keeps its
kernel. Rules live here rather than in the kernels because they are about the kernel *and*
what it replaces (Transformers' PyTorch path for that layer), which only the table knows;
a kernel's own per-shape choice between its loops and torch's (flash-attn2's dispatch, the
experts op's few-rows loop or ATen's GEMMs) stays inside the kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from ...system import cpu_flags
from ...value_types import Record, field

logger = logging.getLogger("kernelhub.transformers")

ShapeTest = Callable[[Any], bool]
"""A condition on a model's config (its sizes): True where the rule applies."""


class Decline(Record, frozen=True):
    """Keep PyTorch for ``names`` on the CPU where the model's dtype is one of ``dtypes``
    (all when empty), every flag of ``with_flags`` is present, none of ``without_flags``
    is, and ``shape`` (when given) holds for the model's config. ``why`` is the one line
    a user reads: what lost, where, by how much, measured how."""

    names: tuple[str, ...]
    why: str
    dtypes: tuple[str, ...] = ()
    with_flags: tuple[str, ...] = ()
    without_flags: tuple[str, ...] = ()
    shape: ShapeTest | None = field(default=None, compare=False)

    def applies(self, flags: frozenset[str], dtype: str, config: Any) -> bool:
        return ((not self.dtypes or dtype in self.dtypes)
                and all(f in flags for f in self.with_flags)
                and not any(f in flags for f in self.without_flags)
                and (self.shape is None or self.shape(config)))


AMX_FUSED_MLP = Decline(
    ("DecoderLayer", "MLP"),
    "on CPUs with AMX the fused decoder kernels, whose decode MLP is the kernel's own "
    "matrix-vector loop in place of oneDNN's AMX/AVX-512 products, measured slower in the "
    "model: Llama bf16 prefill 0.86x, decode 0.91-0.96x; Qwen3 fp32 decode 0.86-0.92x "
    "(issue 32, Xeon with AMX-BF16, 2 threads)",
    with_flags=("amx_bf16",),
)
"""Issue 32's measurement on an AMX Xeon (``benchmarks/model.py``, two runs): with
``use_kernels`` Llama and Qwen3 lost up to 14%, where the same benchmark gave decode
1.19-1.73x on the AMD machine without AMX. The fused MLP is the table's one CPU kernel that replaces matrix
products (its decode op streams the weights through its own AVX loop); the element-wise
kernels (norms, activation, rotary) won 1.15-5.9x there in isolation, and attention
chooses torch's sdpa per shape inside its op. Not measured here (no AMX on this machine):
confirm or lift with ``benchmarks/model.py`` on one."""

DECLINES: tuple[Decline, ...] = (AMX_FUSED_MLP,)
"""The rules, most specific first (the first that applies to a name gives its reason)."""


def declined_names(rules: Iterable[Decline], flags: frozenset[str], dtype: str,
                   config: Any) -> dict[str, str]:
    """Name → why, for every name a rule declines on this CPU for this model."""
    found: dict[str, str] = {}
    for rule in rules:
        if rule.applies(flags, dtype, config):
            for name in rule.names:
                found.setdefault(name, rule.why)
    return found


def _dtype_name(model: Any) -> str:
    dtype = getattr(model, "dtype", None)
    return str(dtype).removeprefix("torch.")


_told: set[tuple[str, str]] = set()


def drop_declined(entries: MutableMapping[str, Any], explicit: set[str], model: Any,
                  device: str, rules: Iterable[Decline] | None = None) -> dict[str, str]:
    """Remove from ``entries`` the names this machine declines for ``model`` (the user's
    explicit names excepted) and say each (name, reason) once; returns what was removed."""
    if device != "cpu":
        return {}
    declined = declined_names(DECLINES if rules is None else rules, cpu_flags(),
                              _dtype_name(model), getattr(model, "config", None))
    removed = {name: why for name, why in declined.items()
               if name in entries and name not in explicit}
    for name, why in removed.items():
        del entries[name]
        if (name, why) not in _told:
            _told.add((name, why))
            logger.info("%s: keeping PyTorch on this CPU (%s)", name, why)
    return removed
