"""Verified kernels: use a kernel only where it is right and faster than the PyTorch it replaces.

Blind swapping can make a model slower (a kernel tuned for another CPU, a dtype whose
path lacks the matrix units) or, for a broken build, wrong. With verification on
(``kernelize(model, verify=True)``, ``KernelConfig(verify=True)``, ``KERNELHUB_VERIFY=1``)
each swapped call site gets a :class:`Verifier`. The first call with a new *shape
bucket* runs the kernel and the PyTorch code it replaces on copies of the real inputs,
compares every output tensor against a per-dtype tolerance (:data:`TOLERANCES`), times
both interleaved, and decides: the kernel where it is within tolerance and not slower,
PyTorch otherwise. Every later call of that bucket dispatches on the decision (a dict
lookup).

A decision is stored on disk under ``<cache>/verify/`` keyed by everything it depends
on — device, CPU features, torch version and thread count, the kernel build's unique
id, the reference function, dtypes and the shape bucket — so the next process with the
same setup pays nothing. ``verification_report(model)`` and ``kernelhub verify-report``
say per layer what was chosen and why.

Shapes are bucketed by rounding every dimension but the last up to a power of two:
the last is the model's hidden/head size (fixed), the others are batch, sequence and
head counts, whose speed changes smoothly, so one measurement serves a bucket.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..system import cpu_features
from .validate import forward_of

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
"""dtype name → (rtol, atol): ``|kernel - pytorch| <= atol + rtol * |pytorch|`` everywhere.

Loose enough for reordered float32 accumulation and for one extra rounding step in
16-bit formats (one bf16 ulp is 2**-8 relative); a kernel that is wrong is far outside.
"""

TIME_BUDGET_S = 0.05
"""Per implementation and decision: timing repeats until this much was spent (≥ 3 runs)."""

_MIN_RUNS = 3
_MAX_RUNS = 25

_decisions: dict[str, Decision] = {}
"""Disk key → decision, for this process (the disk is read once per key)."""

_function_verifiers: weakref.WeakSet[Verifier] = weakref.WeakSet()
"""Verifiers of swapped functions and attention (process-wide, not owned by a module)."""


@dataclass(frozen=True)
class Decision:
    """What one call site runs for one shape bucket, and why."""

    use_kernel: bool
    reason: str
    kernel_s: float | None = None
    pytorch_s: float | None = None
    max_error: float | None = None

    @property
    def chosen(self) -> str:
        return "kernel" if self.use_kernel else "pytorch"


@dataclass(frozen=True)
class Seen:
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


def _tensors(value: Any, torch: Any) -> list[Any] | None:
    """The output tensors in order (None entries kept), or None for an unknown structure."""
    if value is None or isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        found: list[Any] = []
        for item in value:
            part = _tensors(item, torch)
            if part is None:
                return None
            found.extend(part)
        return found
    return None


def _clone(value: Any, torch: Any) -> Any:
    """Fresh copies of the tensors in ``value``: kernels that update inputs in place
    (a fused residual add) must not change the model's real tensors while being judged."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_clone(v, torch) for v in value)
    if isinstance(value, list):
        return [_clone(v, torch) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v, torch) for k, v in value.items()}
    return value


def compare(kernel_out: Any, pytorch_out: Any) -> tuple[bool, float, str]:
    """(within tolerance, max |difference|, why not) for two outputs of one call."""
    import torch

    ours, theirs = _tensors(kernel_out, torch), _tensors(pytorch_out, torch)
    if ours is None or theirs is None or len(ours) != len(theirs):
        return False, float("inf"), "outputs differ in structure"
    worst = 0.0
    for a, b in zip(ours, theirs, strict=True):
        if a is None or b is None:
            if a is not b:
                return False, float("inf"), "one output is None where the other is a tensor"
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("inf"), (f"output {tuple(a.shape)} {a.dtype} where PyTorch gives "
                                         f"{tuple(b.shape)} {b.dtype}")
        if a.numel() == 0:
            continue
        rtol, atol = TOLERANCES.get(str(b.dtype).removeprefix("torch."), (1e-4, 1e-4))
        x, y = a.detach().float(), b.detach().float()
        both_nan = x.isnan() & y.isnan()
        diff = (x - y).abs().masked_fill(both_nan, 0.0)
        diff = diff.nan_to_num(nan=float("inf"))
        worst = max(worst, float(diff.max()))
        if not bool((diff <= atol + rtol * y.abs().nan_to_num(0.0)).all()):
            return False, worst, f"max |kernel - pytorch| {worst:.3g} exceeds rtol {rtol:g}, atol {atol:g}"
    return True, worst, ""


def _sync(device: Any) -> None:
    import torch

    if device is not None and device.type not in ("cpu", "meta"):
        torch.accelerator.synchronize(device)


def _first_device(args: tuple[Any, ...], kwargs: dict[str, Any], torch: Any) -> Any:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def judge(kernel: Callable[..., Any], pytorch: Callable[..., Any], args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Decision:
    """Run both on copies of the inputs, compare, time interleaved, decide."""
    import torch

    device = _first_device(args, kwargs, torch)
    with torch.no_grad():
        # The reference must work; if it raises, the caller sees its own error.
        expected = pytorch(*_clone(args, torch), **_clone(kwargs, torch))
        try:
            got = kernel(*_clone(args, torch), **_clone(kwargs, torch))
        except Exception as e:
            return Decision(False, f"kernel raised {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        ok, max_error, why = compare(got, expected)
        if not ok:
            return Decision(False, f"wrong: {why}", max_error=max_error)
        del got, expected
        best = {"kernel": float("inf"), "pytorch": float("inf")}
        spent = {"kernel": 0.0, "pytorch": 0.0}
        runs = 0
        while runs < _MAX_RUNS and (runs < _MIN_RUNS or min(spent.values()) < TIME_BUDGET_S):
            for label, fn in (("kernel", kernel), ("pytorch", pytorch)):
                a, k = _clone(args, torch), _clone(kwargs, torch)
                _sync(device)
                start = time.perf_counter()
                fn(*a, **k)
                _sync(device)
                elapsed = time.perf_counter() - start
                best[label] = min(best[label], elapsed)
                spent[label] += elapsed
            runs += 1
    ratio = best["pytorch"] / best["kernel"] if best["kernel"] > 0 else float("inf")
    if best["kernel"] <= best["pytorch"]:
        return Decision(True, f"correct (max error {max_error:.2g}) and {ratio:.2f}x PyTorch's speed",
                        best["kernel"], best["pytorch"], max_error)
    return Decision(False, f"correct (max error {max_error:.2g}) but slower: {ratio:.2f}x PyTorch's "
                    "speed", best["kernel"], best["pytorch"], max_error)


def _verify_dir() -> Path:
    return settings.cache_dir() / "verify"


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


def _read(path: Path) -> Decision | None:
    try:
        data = json.loads(path.read_text())
        return Decision(**data["decision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: decide again and overwrite


def _write(path: Path, record: dict[str, Any]) -> None:
    """Atomically (temp file + rename): concurrent processes never see half a record."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the next process a re-measurement


class Verifier:
    """One swapped call site: ``kernel`` in place of ``pytorch`` where verification allows.

    ``name`` is what the report calls it (the layer or function name); ``build_id`` the
    kernel build's unique id (its import name), so a rebuilt kernel is judged again.
    """

    def __init__(self, name: str, build_id: str, kernel: Callable[..., Any],
                 pytorch: Callable[..., Any]) -> None:
        self.name = name
        self.build_id = build_id
        self.kernel = kernel
        self.pytorch = pytorch
        self._keys: dict[tuple[str, ...], tuple[str, str]] = {}
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
        path = _verify_dir() / digest[:2] / f"{digest}.json"
        decision = _read(path)
        if decision is None:
            decision = judge(self.kernel, self.pytorch, args, kwargs)
            _write(path, {"key": fields, "decision": asdict(decision)})
        _decisions[digest] = decision
        return digest, decision

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        if torch.compiler.is_compiling():
            # No disk or timing inside a trace: a decision made eagerly still applies.
            cached = self._keys.get(self.bucket(args, kwargs))
            decision = _decisions.get(cached[0]) if cached else None
            fn = self.pytorch if decision is not None and not decision.use_kernel else self.kernel
            return fn(*args, **kwargs)
        digest, decision = self.decide(args, kwargs)
        owner = args[0] if args and isinstance(args[0], torch.nn.Module) else None
        if owner is not None:
            owner.__dict__.setdefault("_kernelhub_verified", set()).add(digest)
        return (self.kernel if decision.use_kernel else self.pytorch)(*args, **kwargs)

    def seen(self, digests: set[str] | None = None) -> list[Seen]:
        """The decisions this call site used in this process (optionally only ``digests``)."""
        found = []
        for bucket, (digest, _) in self._keys.items():
            if (digests is None or digest in digests) and digest in _decisions:
                found.append(Seen(self.name, self.build_id, " ".join(bucket), _decisions[digest]))
        return found


def build_id_of(obj: Any) -> str:
    """The unique import name of the kernel build ``obj`` comes from (its top package)."""
    module = getattr(obj, "__module__", None) or ""
    return module.partition(".")[0] or repr(obj)


def verified_function(name: str, kernel: Callable[..., Any], pytorch: Callable[..., Any]
                      ) -> Callable[..., Any]:
    """A function with ``kernel``'s signature and attributes that verifies it against ``pytorch``."""
    verifier = Verifier(name, build_id_of(kernel), kernel, pytorch)

    @functools.wraps(kernel)
    def verified(*args: Any, **kwargs: Any) -> Any:
        return verifier(*args, **kwargs)

    verified._kernelhub_verifier = verifier  # type: ignore[attr-defined]
    _function_verifiers.add(verifier)
    return verified


@functools.cache
def verified_forward(layer: type, cls: type, name: str) -> Callable[..., Any]:
    """``layer.forward`` verified against ``cls.forward`` (one function per pair, so
    kernelize can recognise and restore it)."""
    verifier = Verifier(name, build_id_of(layer), forward_of(layer), forward_of(cls))

    @functools.wraps(forward_of(layer))
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return verifier(self, *args, **kwargs)

    forward._kernelhub_verifier = verifier  # type: ignore[attr-defined]
    return forward


def verification_report(model: Any) -> list[tuple[str, Seen]]:
    """(where, decision) for every verified call site ``model`` used in this process.

    Layers are named by their module path; swapped functions and attention (shared by
    every model of the process) by their registered name.
    """
    rows: list[tuple[str, Seen]] = []
    for path, module in model.named_modules():
        forward = getattr(module.__dict__.get("forward"), "__func__", None)
        verifier = getattr(forward, "_kernelhub_verifier", None)
        if isinstance(verifier, Verifier):
            used = module.__dict__.get("_kernelhub_verified", set())
            rows += [(path or type(module).__name__, s) for s in verifier.seen(used)]
    for verifier in list(_function_verifiers):
        rows += [(verifier.name, s) for s in verifier.seen()]
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


def stored_decisions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every decision on disk, as stored (``key`` fields and ``decision``), oldest first."""
    base = root or _verify_dir()
    records = []
    for path in sorted(base.glob("*/*.json"), key=lambda p: p.stat().st_mtime):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "key" in data and "decision" in data:
            records.append(data)
    return records
