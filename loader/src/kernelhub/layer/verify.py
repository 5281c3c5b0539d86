"""Verified kernels: use a kernel only where it is right and faster than the PyTorch it replaces.

Blind swapping can make a model slower (a kernel tuned for another CPU, a dtype whose
path lacks the matrix units) or, for a broken build, wrong. With verification on
(``kernelize(model, verify=True)``, ``KernelConfig(verify=True)``, ``KERNELHUB_VERIFY=1``)
each swapped call site gets a :class:`Verifier`. The first call with a new *shape
bucket* runs the kernel and the PyTorch code it replaces on copies of the real inputs,
compares every output tensor against a per-dtype tolerance
(:data:`~kernelhub.layer.verify_compare.TOLERANCES`), times
both interleaved, and decides: the kernel where it is within tolerance and not slower,
PyTorch otherwise. Every later call of that bucket dispatches on the decision (a dict
lookup). How the timing is done, and when a decision is measured again because its
measurement could not tell the two apart (a close call, or load on the machine), is
:mod:`kernelhub.layer.verify_timing`'s job.

A decision is stored on disk under ``<cache>/verify/`` keyed by everything it depends
on — device, CPU features, torch version and thread count, the kernel build's unique
id, the reference function, dtypes and the shape bucket — so the next process with the
same setup pays nothing (a provisional decision: a bounded number of re-measurements).
``verification_report(model)`` and ``kernelhub verify-report`` say per layer what was
chosen and why; :func:`forget_decisions` and ``kernelhub verify-report --forget`` make
the next run decide again.

Shapes are bucketed by rounding every dimension but the last up to a power of two:
the last is the model's hidden/head size (fixed), the others are batch, sequence and
head counts, whose speed changes smoothly, so one measurement serves a bucket.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..records import Record
from ..system import cpu_features
from . import verify_timing
from .verify_compare import TOLERANCES as TOLERANCES
from .verify_compare import clone, compare
from .verify_store import Decision as Decision
from .verify_store import (
    read_decision,
    record_path,
    remove_decisions,
    update_decision,
    write_decision,
)
from .verify_store import stored_decisions as stored_decisions

_decisions: dict[str, Decision] = {}
"""Disk key → decision, for this process (the disk is read once per key)."""

_function_verifiers: weakref.WeakSet[Verifier] = weakref.WeakSet()
"""Verifiers of swapped functions and attention (process-wide, not owned by a module)."""

_USED_ATTR = "_kernelhub_verified"
"""Module attribute: disk keys of the decisions calls for that module used."""


class Seen(Record, frozen=True):
    """One decision a call site used: its name, the bucket it applies to, the outcome."""

    name: str
    build_id: str
    bucket: str
    decision: Decision


def verify_from_env() -> bool:
    """``KERNELHUB_VERIFY=1``: verification for ``use_kernels=True`` without a KernelConfig."""
    return os.environ.get("KERNELHUB_VERIFY", "").strip().lower() in {"1", "true", "yes", "on"}


def _bucket_dim(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else n


_FLAGS = (bool, str, type(None))


def _signature(values: Any, tensor_type: Any) -> tuple[Any, ...]:
    """What of ``values`` the bucket depends on, exactly and cheaply: tensors by dtype and
    shape, flags by value, nested sequences alike, anything else as a placeholder."""
    found: list[Any] = []
    for value in values:
        kind = type(value)
        if kind in _FLAGS:
            found.append(value)
        elif kind is tuple or kind is list:
            found.append(_signature(value, tensor_type))
        elif isinstance(value, tensor_type):
            found.append((value.dtype, value.shape))
        elif isinstance(value, (list, tuple)):
            found.append(_signature(value, tensor_type))
        else:
            found.append(...)
    return tuple(found)


def _describe(value: Any, torch: Any) -> Iterator[str]:
    """Key parts of one argument: tensors by dtype and bucketed shape; flags by value."""
    if isinstance(value, torch.Tensor):
        shape = [*map(_bucket_dim, value.shape[:-1]), *value.shape[-1:]]
        yield f"{str(value.dtype).removeprefix('torch.')}{shape}"
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _describe(item, torch)
    elif isinstance(value, (bool, str)) or value is None:
        yield repr(value)


def _first_device(args: tuple[Any, ...], kwargs: dict[str, Any], torch: Any) -> Any:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def judge(kernel: Callable[..., Any], pytorch: Callable[..., Any], args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Decision:
    """Run both on copies of the inputs, compare, time interleaved, decide."""
    import torch

    with torch.no_grad():
        # The reference must work; if it raises, the caller sees its own error.
        expected = pytorch(*clone(args, torch), **clone(kwargs, torch))
        try:
            got = kernel(*clone(args, torch), **clone(kwargs, torch))
        except Exception as e:
            return Decision(False, f"kernel raised {type(e).__name__}: {str(e).splitlines()[0][:200]}",
                            settled=True)
        ok, max_error, why = compare(got, expected)
        if not ok:
            return Decision(False, f"wrong: {why}", max_error=max_error, settled=True)
        del got, expected
        return timed_decision(*_time(kernel, pytorch, args, kwargs), max_error)


def _time(kernel: Callable[..., Any], pytorch: Callable[..., Any], args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> tuple[verify_timing.Timing, float]:
    """Time both on their own copies of the inputs (a kernel that updates an input in
    place keeps updating its copy: same shapes, same work)."""
    import torch

    k_args, k_kwargs = clone(args, torch), clone(kwargs, torch)
    p_args, p_kwargs = clone(args, torch), clone(kwargs, torch)
    with torch.no_grad():
        return verify_timing.robust_timing(lambda: kernel(*k_args, **k_kwargs),
                                           lambda: pytorch(*p_args, **p_kwargs))


def timed_decision(timing: verify_timing.Timing, spread: float, max_error: float,
                   previous: Decision | None = None) -> Decision:
    """The decision for a correct kernel from ``timing`` (merged with ``previous``
    measurements of the same key: each side keeps its best time over all of them)."""
    kernel_s, pytorch_s = timing.best("kernel"), timing.best("pytorch")
    rounds, measurements = timing.rounds, 1
    if previous is not None and previous.kernel_s is not None and previous.pytorch_s is not None:
        kernel_s, pytorch_s = min(kernel_s, previous.kernel_s), min(pytorch_s, previous.pytorch_s)
        rounds += previous.rounds
        measurements += previous.measurements
    ratio = pytorch_s / kernel_s if kernel_s > 0 else float("inf")
    settled = verify_timing.is_settled(ratio, spread, measurements)
    doubt = " and ".join(what for what, yes in (("a close call", verify_timing.is_close(ratio)),
                                                ("noisy", verify_timing.is_noisy(spread))) if yes)
    quality = (f"best of {rounds} interleaved rounds in {measurements} measurement"
               f"{'s' if measurements > 1 else ''}, spread {spread:.0%}"
               + ("" if settled else f"; {doubt}, measured again by the next process"))
    correct = f"correct (max error {max_error:.2g})"
    if kernel_s <= pytorch_s:
        reason = f"{correct} and {ratio:.2f}x PyTorch's speed ({quality})"
    else:
        reason = f"{correct} but slower: {ratio:.2f}x PyTorch's speed ({quality})"
    return Decision(kernel_s <= pytorch_s, reason, kernel_s, pytorch_s, max_error, rounds,
                    spread, measurements, settled)


def _environment(device: Any) -> dict[str, Any]:
    import torch

    if device is None or device.type == "cpu":
        where = f"cpu: {cpu_features()}"
    else:
        try:
            where = f"{device.type}: {torch.accelerator.current_accelerator()} " + (
                torch.cuda.get_device_name(device) if device.type == "cuda" else "")
        except Exception:  # an exotic backend without a name query
            where = device.type
    return {"device": where, "torch": torch.__version__, "threads": torch.get_num_threads()}


class Verifier:
    """One swapped call site: ``kernel`` in place of ``pytorch`` where verification allows.

    ``name`` is what the report calls it (the layer or function name); ``build_id`` the
    kernel build's unique id (its import name), so a rebuilt kernel is judged again.
    Each decision a call uses is recorded on the module it was made for (the call's
    first argument where that is a module, else ``owner``), which is how
    :func:`verification_report` tells one model's decisions from another's.
    """

    def __init__(self, name: str, build_id: str, kernel: Callable[..., Any],
                 pytorch: Callable[..., Any], owner: Any = None) -> None:
        self.name = name
        self.build_id = build_id
        self.kernel = kernel
        self.pytorch = pytorch
        self._owner = weakref.ref(owner) if owner is not None else None
        self._keys: dict[tuple[str, ...], tuple[str, str]] = {}
        self._signatures: dict[tuple[Any, ...], str] = {}
        """Exact argument signature → disk key (finer than the bucket, so it implies it)."""
        self.reference_id = f"{getattr(pytorch, '__module__', '?')}.{getattr(pytorch, '__qualname__', repr(pytorch))}"

    def bucket(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
        import torch

        parts = [p for a in args for p in _describe(a, torch)]
        parts += [f"{k}={p}" for k, v in sorted(kwargs.items()) for p in _describe(v, torch)]
        return tuple(parts)

    def _disk_key(self, bucket: tuple[str, ...], device: Any) -> tuple[str, dict[str, Any]]:
        if (cached := self._keys.get(bucket)) is not None:
            return cached[0], json.loads(cached[1])
        fields = {**_environment(device), "kernel": self.build_id, "name": self.name,
                  "pytorch": self.reference_id, "bucket": " ".join(bucket)}
        text = json.dumps(fields, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        self._keys[bucket] = (digest, text)
        return digest, fields

    def decide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Decision]:
        """(disk key, decision) for this call's bucket: memory, then disk, then measured."""
        import torch

        bucket = self.bucket(args, kwargs)
        cached = self._keys.get(bucket)
        if cached is not None and (decision := _decisions.get(cached[0])) is not None:
            return cached[0], decision
        device = _first_device(args, kwargs, torch)
        digest, fields = self._disk_key(bucket, device)
        path = record_path(digest)
        decision = read_decision(path)
        if decision is None:
            decision = judge(self.kernel, self.pytorch, args, kwargs)
            write_decision(path, fields, decision)
        elif decision.needs_retiming:
            decision = self._retime(path, fields, decision, args, kwargs)
        _decisions[digest] = decision
        return digest, decision

    def _retime(self, path: Path, fields: dict[str, Any], current: Decision,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> Decision:
        """Measure a provisional decision again and merge the measurement into its record."""
        timing, spread = _time(self.kernel, self.pytorch, args, kwargs)

        def merge(stored: Decision) -> Decision | None:
            if not stored.needs_retiming:
                return None  # another process settled it meanwhile
            return timed_decision(timing, spread, stored.max_error or 0.0, stored)

        return update_decision(path, fields, current, merge)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        if torch.compiler.is_compiling():
            # No disk or timing inside a trace: a decision made eagerly still applies.
            cached = self._keys.get(self.bucket(args, kwargs))
            decision = _decisions.get(cached[0]) if cached else None
            fn = self.pytorch if decision is not None and not decision.use_kernel else self.kernel
            return fn(*args, **kwargs)
        # The dispatch runs on every call of the model: exact shapes map to the disk key
        # without building the bucket's text (~1 µs instead of ~35 µs for attention).
        signature = (_signature(args, torch.Tensor), tuple(kwargs),
                     _signature(kwargs.values(), torch.Tensor))
        digest = self._signatures.get(signature)
        decision = _decisions.get(digest) if digest is not None else None
        if digest is None or decision is None:
            digest, decision = self.decide(args, kwargs)
            self._signatures[signature] = digest
        owner = args[0] if args and isinstance(args[0], torch.nn.Module) else None
        if owner is None and self._owner is not None:
            owner = self._owner()
        if owner is not None:
            owner.__dict__.setdefault(_USED_ATTR, set()).add(digest)
        return (self.kernel if decision.use_kernel else self.pytorch)(*args, **kwargs)

    def seen(self, digests: set[str] | None = None) -> list[Seen]:
        """The decisions this call site used in this process (optionally only ``digests``)."""
        return [seen for _, seen in self._seen(digests)]

    def _seen(self, digests: set[str] | None) -> Iterator[tuple[str, Seen]]:
        for bucket, (digest, _) in self._keys.items():
            if (digests is None or digest in digests) and digest in _decisions:
                yield digest, Seen(self.name, self.build_id, " ".join(bucket), _decisions[digest])


def build_id_of(obj: Any) -> str:
    """The unique import name of the kernel build ``obj`` comes from (its top package)."""
    module = getattr(obj, "__module__", None) or ""
    return module.partition(".")[0] or repr(obj)


def verified_function(name: str, kernel: Callable[..., Any], pytorch: Callable[..., Any],
                      owner: Any = None) -> Callable[..., Any]:
    """A function with ``kernel``'s signature and attributes that verifies it against
    ``pytorch``; ``owner``: the model whose report lists its decisions when the calls
    do not pass a module of that model first (attention functions do)."""
    verifier = Verifier(name, build_id_of(kernel), kernel, pytorch, owner)

    @functools.wraps(kernel)
    def verified(*args: Any, **kwargs: Any) -> Any:
        return verifier(*args, **kwargs)

    verified._kernelhub_verifier = verifier  # type: ignore[attr-defined]
    _function_verifiers.add(verifier)
    return verified


@functools.cache
def verified_forward(layer: type, kernel: Callable[..., Any], pytorch: Callable[..., Any],
                     name: str) -> Callable[..., Any]:
    """``kernel`` (the forward of hub ``layer``) verified against ``pytorch`` (the model
    class's forward); one function per pair, so kernelize can recognise and restore it."""
    verifier = Verifier(name, build_id_of(layer), kernel, pytorch)

    @functools.wraps(kernel)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return verifier(self, *args, **kwargs)

    forward._kernelhub_verifier = verifier  # type: ignore[attr-defined]
    return forward


def _used_by(model: Any) -> set[str]:
    """Disk keys of every decision a module of ``model`` used in this process."""
    used: set[str] = set()
    for module in model.modules():
        used |= module.__dict__.get(_USED_ATTR, set())
    return used


def verification_report(model: Any) -> list[tuple[str, Seen]]:
    """(where, decision) for every verified call site ``model`` used in this process.

    Layers are named by their module path; swapped functions and attention by their
    registered name. Only decisions a module of ``model`` used are listed: function
    verifiers serve several models, and another model's shapes are not this one's.
    """
    from .kernelized import kernel_sites

    rows: list[tuple[str, Seen]] = []
    for path, module in kernel_sites(model):
        forward = getattr(module.__dict__.get("forward"), "__func__", None)
        verifier = getattr(forward, "_kernelhub_verifier", None)
        if isinstance(verifier, Verifier):
            used = module.__dict__.get(_USED_ATTR, set())
            rows += [(path or type(module).__name__, s) for s in verifier.seen(used)]
    used, listed = _used_by(model), set()
    for verifier in list(_function_verifiers):
        for digest, seen in verifier._seen(used):
            if digest not in listed:  # two verifiers of one function share keys
                listed.add(digest)
                rows.append((verifier.name, seen))
    return rows


def format_report(rows: list[tuple[str, Seen]]) -> str:
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
    _decisions.clear()


def forget_decisions(model: Any = None, name: str | None = None) -> int:
    """Forget decisions, on disk and in this process, so their next call decides again
    (measured on a quiet machine, after a kernel or driver update, …): those ``model``
    used, those of call sites called ``name`` (e.g. ``"RMSNorm"``), or with neither,
    all. Returns how many stored decisions were removed."""
    digests = _used_by(model) if model is not None else None
    removed = remove_decisions(digests, name)
    for digest in (*removed, *(digests or ())):
        _decisions.pop(digest, None)
    if digests is None and name is None:
        _decisions.clear()
    return len(removed)
