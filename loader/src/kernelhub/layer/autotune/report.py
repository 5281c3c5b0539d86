"""What autotuning chose for one model, and forgetting it so it is measured again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import store
from .call_site import (
    USED_ATTR,
    Seen,
    forget_model_names,
    function_sites,
    kernel_sites,
    site_of,
)

if TYPE_CHECKING:
    from torch import nn

Row = tuple[str, Seen]
"""(where: a layer's module path, or a function's name; the decision it used)."""


def _used_by(model: nn.Module) -> set[str]:
    """Disk keys of every decision a module of ``model`` used in this process."""
    used: set[str] = set()
    for _, module in kernel_sites(model):
        used |= module.__dict__.get(USED_ATTR, set())
    return used


def autotune_report(model: nn.Module) -> list[Row]:
    """(where, decision) for every autotuned call site ``model`` used in this process.

    Layers are named by their module path; swapped functions and attention by their
    registered name. Only decisions a module of ``model`` used are listed: a layer's
    call site serves every model with that layer class, and another model's shapes are
    not this one's.
    """
    rows: list[Row] = []
    for path, module in kernel_sites(model):
        site = site_of(getattr(module.__dict__.get("forward"), "__func__", None))
        if site is not None:
            used = module.__dict__.get(USED_ATTR, set())
            rows += [(path or type(module).__name__, seen) for seen in site.seen(used)]
    used, listed = _used_by(model), set()
    for site in function_sites():
        for digest, seen in site.seen_by_key(used):
            if digest not in listed:  # two call sites of one function share keys
                listed.add(digest)
                rows.append((site.name, seen))
    return rows


def format_report(rows: list[Row]) -> str:
    """One line per (call site, bucket): what runs and why."""
    lines = []
    for where, seen in rows:
        d = seen.decision
        times = (f" [kernel {d.kernel_s * 1e3:.3f} ms, pytorch {d.pytorch_s * 1e3:.3f} ms]"
                 if d.kernel_s is not None and d.pytorch_s is not None else "")
        lines.append(f"{where} ({seen.name}, {seen.build_id}) {seen.bucket}: "
                     f"{d.chosen} — {d.reason}{times}")
    return "\n".join(lines)


def clear_decisions() -> None:
    """Forget this process's decisions (tests; the disk records stay)."""
    store.forget_in_process()
    forget_model_names()


def forget_decisions(model: nn.Module | str | None = None, name: str | None = None) -> int:
    """Forget decisions, on disk and in this process, so their next call decides again
    (on a quiet machine, after a driver update, …): those ``model`` used (a model, or
    the name its stored decisions list, e.g. ``"meta-llama/Llama-3.2-1B"``), those of
    call sites called ``name`` (e.g. ``"RMSNorm"``), or with neither, all. Returns how
    many stored decisions were removed."""
    if model is None or isinstance(model, str):
        digests = None
        removed = store.remove_records(None, name, model)
    else:
        digests = _used_by(model)
        removed = store.remove_records(digests, name)
    forget = set(removed) | (digests or set())
    if digests is None and name is None and model is None:
        store.forget_in_process()
        forget_model_names()
    else:
        store.forget_in_process(forget)
        forget_model_names(forget)
    return len(removed)

