"""One autotuned call site: the kernel or the PyTorch it replaces, per shape bucket.

The first call with a new shape bucket (:mod:`~kernelhub.layer.autotune.buckets`) runs
both on copies of the real inputs, compares the outputs
(:mod:`~kernelhub.layer.autotune.compare`), times both
(:mod:`~kernelhub.layer.autotune.timing`) and decides
(:mod:`~kernelhub.layer.autotune.decision`). Every later call of that bucket dispatches on
the decision: exact shapes map to it through a dict, without building the bucket's text.

A decision is keyed by everything it depends on — the device (CPU model and vector/matrix
extensions, or the GPU), torch's version and thread count, the kernel build's unique id,
the PyTorch code it replaces and that code's version (its distribution's, e.g.
Transformers 5.24.0, else a digest of the function's code), the call site's name and the
bucket — and stored (:mod:`~kernelhub.layer.autotune.store`), so the next process with the
same setup pays nothing, and a change of any of them is measured anew.

Each decision a call uses is recorded on the module it was made for (the call's first
argument where that is a module, else the call site's ``owner``), which is how
:func:`~kernelhub.layer.autotune.report.autotune_report` tells one model's decisions from
another's; the first use by a model also adds the model's name to the stored record.
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...lazy_names import deferred
from ...system import cpu_features
from ...value_types import Record, replace
from ..decorators import KERNEL_FUNCS_ATTR
from . import store, timing
from .buckets import Signature, bucket, first_device, signature
from .compare import clone, compare
from .decision import Decision, noisy, timed_decision
from .store import Key, StoredDecision

if TYPE_CHECKING:
    from importlib import metadata as importlib_metadata

    import torch
    from torch import nn
else:
    torch = deferred("torch")
    nn = deferred("torch.nn")
    importlib_metadata = deferred("importlib.metadata")  # read when a first decision is keyed

Kernel = Callable[..., Any]
"""A kernel or the PyTorch code it replaces: whatever the call site's callers pass and get."""

USED_ATTR = "_kernelhub_autotuned"
"""Module attribute: disk keys of the decisions calls for that module used."""

MODEL_ATTR = "_kernelhub_autotune_model"
"""Module attribute: the name of the model the module belongs to (:func:`adopt`)."""

_function_sites: weakref.WeakSet[Autotuner] = weakref.WeakSet()
"""Call sites of swapped functions and attention (they are not a module's forward)."""

_models: dict[str, set[str]] = {}
"""Disk key → the model names its stored record lists (as far as this process knows)."""


class Seen(Record, frozen=True):
    """One decision a call site used: its name, the bucket it applies to, the outcome."""

    name: str
    build_id: str
    bucket: str
    decision: Decision


def model_name(model: nn.Module) -> str:
    """What reports call ``model``: a Transformers model's ``name_or_path``, else its class."""
    name = getattr(model, "name_or_path", None)
    return name if isinstance(name, str) and name else type(model).__name__


def kernel_sites(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(name, module) of every module kernelize may give a kernel: ``model``'s modules,
    and the function modules they attach (``_kernel_funcs``, not submodules), named
    ``<owner>.<function>``."""
    for name, module in model.named_modules():
        yield name, module
        funcs = getattr(module, KERNEL_FUNCS_ATTR, None)
        if isinstance(funcs, dict):
            for func_name, func_module in funcs.items():
                yield f"{name}.{func_name}" if name else func_name, func_module


def adopt(model: nn.Module) -> None:
    """Mark every module of ``model`` (attached function modules too) as part of it, so
    the stored decisions its layers use name it (``kernelhub autotune-report --model``)."""
    name = model_name(model)
    for _, module in kernel_sites(model):
        module.__dict__[MODEL_ATTR] = name


def judge(kernel: Kernel, pytorch: Kernel, args: tuple[object, ...],
          kwargs: dict[str, object]) -> Decision:
    """Run both on copies of the inputs, compare, time interleaved, decide."""
    with torch.no_grad():
        # The reference must work; if it raises, the caller sees its own error.
        expected = pytorch(*clone(args), **clone(kwargs))
        try:
            got = kernel(*clone(args), **clone(kwargs))
        except Exception as e:
            return Decision(False, f"kernel raised {type(e).__name__}: {str(e).splitlines()[0][:200]}",
                            settled=True)
        ok, max_error, why = compare(got, expected)
        if not ok:
            return Decision(False, f"wrong: {why}", max_error=max_error, settled=True)
        del got, expected
        return timed_decision(*_time(kernel, pytorch, args, kwargs), max_error)


def _time(kernel: Kernel, pytorch: Kernel, args: tuple[object, ...],
          kwargs: dict[str, object]) -> tuple[timing.Timing, timing.Timing]:
    """Time both on their own copies of the inputs (a kernel that updates an input in
    place keeps updating its copy: same shapes, same work)."""
    k_args, k_kwargs = clone(args), clone(kwargs)
    p_args, p_kwargs = clone(args), clone(kwargs)
    with torch.no_grad():
        return timing.robust_timing(lambda: kernel(*k_args, **k_kwargs),
                                    lambda: pytorch(*p_args, **p_kwargs), noisy)


def _environment(device: torch.device | None) -> Key:
    if device is None or device.type == "cpu":
        where = f"cpu: {cpu_features()}"
    else:
        try:
            accelerator = torch.accelerator.current_accelerator()
            where = f"{device.type}: {accelerator} " + (
                torch.cuda.get_device_name(device) if device.type == "cuda" else "")
        except Exception:  # an exotic backend without a name query
            where = device.type
    return {"device": where, "torch": torch.__version__, "threads": torch.get_num_threads()}


@functools.cache
def _distribution_version(top_level: str) -> str | None:
    try:
        return importlib_metadata.version(top_level)
    except (importlib_metadata.PackageNotFoundError, ValueError):
        return None


def code_version(fn: Kernel) -> str:
    """The version of the code ``fn`` runs: its distribution's (``transformers 5.24.0``),
    else a digest of its bytecode (a model defined in the user's own files)."""
    top_level = (getattr(fn, "__module__", None) or "").partition(".")[0]
    if top_level and (version := _distribution_version(top_level)) is not None:
        return f"{top_level} {version}"
    code = getattr(fn, "__code__", None)
    if code is None:
        return "unknown"
    return "code " + hashlib.sha256(marshal.dumps(code)).hexdigest()[:16]


class Autotuner:
    """One swapped call site: ``kernel`` in place of ``pytorch`` where measurement allows.

    ``name`` is what the report calls it (the layer or function name); ``build_id`` the
    kernel build's unique id (its import name), so a rebuilt kernel is judged again;
    ``owner`` the model whose report lists the decisions of calls that do not pass one of
    its modules first.
    """

    def __init__(self, name: str, build_id: str, kernel: Kernel, pytorch: Kernel,
                 owner: nn.Module | None = None) -> None:
        self.name = name
        self.build_id = build_id
        self.kernel = kernel
        self.pytorch = pytorch
        self._owner = weakref.ref(owner) if owner is not None else None
        if owner is not None:
            owner.__dict__.setdefault(MODEL_ATTR, model_name(owner))
        self._keys: dict[tuple[str, ...], tuple[str, Key]] = {}
        """Bucket → (disk key, its fields)."""
        self._signatures: dict[Signature, str] = {}
        """Exact argument signature → disk key (finer than the bucket, so it implies it)."""
        self.reference_id = (f"{getattr(pytorch, '__module__', '?')}."
                             f"{getattr(pytorch, '__qualname__', repr(pytorch))}")

    def _key(self, bucket: tuple[str, ...], device: torch.device | None) -> tuple[str, Key]:
        if (cached := self._keys.get(bucket)) is not None:
            return cached
        fields: Key = {**_environment(device), "kernel": self.build_id, "name": self.name,
                       "reference": self.reference_id,
                       "reference_version": code_version(self.pytorch),
                       "bucket": " ".join(bucket)}
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        self._keys[bucket] = (digest, fields)
        return digest, fields

    def decide(self, args: tuple[object, ...], kwargs: dict[str, object],
               owner: nn.Module | None = None) -> tuple[str, Decision]:
        """(disk key, decision) for this call's bucket: memory, then disk, then measured
        (a new record names the model ``owner`` belongs to)."""
        digest, fields = self._key(bucket(args, kwargs), first_device(args, kwargs))
        if (decision := store.remembered(digest)) is not None:
            return digest, decision
        record = store.read_record(digest)
        if record is None:
            name = owner.__dict__.get(MODEL_ATTR) if owner is not None else None
            record = StoredDecision(digest, fields,
                                    judge(self.kernel, self.pytorch, args, kwargs),
                                    (name,) if isinstance(name, str) else ())
            store.write_record(record)
        elif record.decision.needs_retiming():
            record = self._retime(record, args, kwargs)
        store.remember(digest, record.decision)
        _models[digest] = set(record.models)
        return digest, record.decision

    def _retime(self, current: StoredDecision, args: tuple[object, ...],
                kwargs: dict[str, object]) -> StoredDecision:
        """Measure a decision again and merge the measurement into its record."""
        total, last = _time(self.kernel, self.pytorch, args, kwargs)

        def merge(stored: StoredDecision) -> StoredDecision | None:
            if not stored.decision.needs_retiming():
                return None  # another process measured it meanwhile
            return replace(stored, decision=timed_decision(
                total, last, stored.decision.max_error or 0.0, stored.decision))

        return store.update_record(current, merge)

    def __call__(self, *args: object, **kwargs: object) -> object:
        if torch.compiler.is_compiling():
            # No disk or timing inside a trace: a decision made eagerly still applies.
            cached = self._keys.get(bucket(args, kwargs))
            decision = store.remembered(cached[0]) if cached else None
            fn = self.pytorch if decision is not None and not decision.use_kernel else self.kernel
            return fn(*args, **kwargs)
        # The dispatch runs on every call of the model: exact shapes map to the disk key
        # without building the bucket's text (~1 µs instead of ~35 µs for attention).
        exact = (signature(args, torch.Tensor), tuple(kwargs),
                 signature(kwargs.values(), torch.Tensor))
        owner = args[0] if args and isinstance(args[0], torch.nn.Module) else None
        if owner is None and self._owner is not None:
            owner = self._owner()
        digest = self._signatures.get(exact)
        decision = store.remembered(digest) if digest is not None else None
        if digest is None or decision is None:
            digest, decision = self.decide(args, kwargs, owner)
            self._signatures[exact] = digest
        if owner is not None:
            used = owner.__dict__.setdefault(USED_ATTR, set())
            if digest not in used:
                used.add(digest)
                _name_model(digest, owner)
        return (self.kernel if decision.use_kernel else self.pytorch)(*args, **kwargs)

    def seen(self, digests: set[str] | None = None) -> list[Seen]:
        """The decisions this call site used in this process (optionally only ``digests``)."""
        return [seen for _, seen in self.seen_by_key(digests)]

    def seen_by_key(self, digests: set[str] | None) -> Iterator[tuple[str, Seen]]:
        for bucket_parts, (digest, _) in self._keys.items():
            decision = store.remembered(digest)
            if (digests is None or digest in digests) and decision is not None:
                yield digest, Seen(self.name, self.build_id, " ".join(bucket_parts), decision)


def _name_model(digest: str, module: nn.Module) -> None:
    """Add the name of the model ``module`` belongs to (:func:`adopt`) to ``digest``'s
    stored record, once per process."""
    name = module.__dict__.get(MODEL_ATTR)
    if not isinstance(name, str) or name in (known := _models.setdefault(digest, set())):
        return
    known.add(name)
    current = store.read_record(digest)
    if current is None:
        return  # a cache that could not be written

    def add(stored: StoredDecision) -> StoredDecision | None:
        return None if name in stored.models else replace(stored, models=(*stored.models, name))

    store.update_record(current, add)


def build_id_of(obj: object) -> str:
    """The unique import name of the kernel build ``obj`` comes from (its top package)."""
    module = getattr(obj, "__module__", None) or ""
    return module.partition(".")[0] or repr(obj)


def autotuned_function(name: str, kernel: Kernel, pytorch: Kernel,
                       owner: nn.Module | None = None) -> Kernel:
    """A function with ``kernel``'s signature and attributes that autotunes it against
    ``pytorch``; ``owner``: the model whose report lists its decisions when the calls
    do not pass a module of that model first (attention functions do)."""
    site = Autotuner(name, build_id_of(kernel), kernel, pytorch, owner)

    @functools.wraps(kernel)
    def autotuned(*args: object, **kwargs: object) -> object:
        return site(*args, **kwargs)

    autotuned.__dict__[SITE_ATTR] = site
    _function_sites.add(site)
    return autotuned


SITE_ATTR = "_kernelhub_autotuner"
"""On an autotuned function or forward: its :class:`Autotuner`."""


@functools.cache
def autotuned_forward(layer: type, kernel: Kernel, pytorch: Kernel, name: str) -> Kernel:
    """``kernel`` (the forward of hub ``layer``) autotuned against ``pytorch`` (the model
    class's forward); one function per pair, so kernelize can recognise and restore it."""
    site = Autotuner(name, build_id_of(layer), kernel, pytorch)

    @functools.wraps(kernel)
    def forward(self: nn.Module, *args: object, **kwargs: object) -> object:
        return site(self, *args, **kwargs)

    forward.__dict__[SITE_ATTR] = site
    return forward


def site_of(fn: object) -> Autotuner | None:
    """The call site behind an autotuned function or forward (None: not autotuned)."""
    site = getattr(fn, SITE_ATTR, None)
    return site if isinstance(site, Autotuner) else None


def function_sites() -> list[Autotuner]:
    return list(_function_sites)


def forget_model_names(digests: set[str] | None = None) -> None:
    """Drop what this process knows of the models ``digests``' records list (None: all)."""
    if digests is None:
        _models.clear()
    for digest in digests or ():
        _models.pop(digest, None)
