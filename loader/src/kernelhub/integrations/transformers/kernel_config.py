"""``KernelConfig``: which kernel each layer or function of a model gets.

Everything that can be checked without a model (spec syntax, device names, version
metadata, fusion key shape) is checked in the constructor; the keys themselves are
checked against the model (:meth:`KernelConfig.check_keys`) before any kernel is
fetched, so a typo never costs a download and the error can list the valid names.

Values, per key:

* ``"org/repo:LayerName"`` or ``"org/repo@<version>:LayerName"`` (hub; ``<version>`` in
  the one grammar: ``2``, ``v2.1.0``, ``>=2.0,<3.0``, a branch or a sha) or ``"/abs/path:LayerName"`` (``use_local_kernel=True``);
* ``(spec, {"version": 2})`` / ``(spec, {"revision": "main"})`` — which build to load
  (``trust_remote_code`` may be given there too);
* ``{"cuda": …, "rocm": …, "xpu": …, "metal": …, "cpu": …}`` — one per device type; all
  are kept, the running device's entry is applied;
* ``None`` — disable this kernel: the layer keeps its PyTorch ``forward``.

A key is a layer or function name the model registers (``"RMSNorm"``,
``"rotary_pos_emb"``, ``"attention"``), or for module fusion a tuple of
``(class_name, path_pattern)`` pairs naming neighbouring modules of one parent.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ...errors import KernelHubError
from ...layer.autotune.renamed import autotune_flag
from ...lazy_names import deferred
from ...signing.trust import require_bool
from ...system import backend_of, torch_device_type
from ...value_types import Record, field, replace
from ...versions import select_spec
from .experts import experts_modules
from .table import (
    ATTENTION_KEY,
    DEVICE_TYPES,
    EXPERTS_KEY,
    function_targets,
    registered_names,
)
from .widen import WIDEN_NAME

if TYPE_CHECKING:
    import torch
    from torch import nn
else:
    torch = deferred("torch")
    nn = deferred("torch.nn")

_HUB_SPEC_RE = re.compile(r"([A-Za-z0-9][\w.-]*/[\w.-]+)(?:@([^:]+))?:([A-Za-z_]\w*)")
"""``org/repo:Name`` or ``org/repo@<version>:Name`` (the one version grammar after ``@``)."""
_LOCAL_SPEC_RE = re.compile(r"(/.+):([A-Za-z_]\w*)")
_METADATA_KEYS = ("version", "revision", "trust_remote_code")

ALLOW_ALL_ATTR = "_kernelhub_allow_all_kernels"
"""Set on a model built with ``from_pretrained(..., allow_all_kernels=True)``: the
entries of its KernelConfig are trusted like its attention kernel."""


class KernelConfigError(KernelHubError, ValueError):
    """A KernelConfig is malformed or does not fit the model it is applied to."""


class KernelSpec(Record, frozen=True):
    """One parsed value: where the kernel comes from and which of its layers to use."""

    source: str
    """``org/repo`` for the hub, an absolute directory for a local kernel."""
    name: str
    local: bool = False
    version: int | str | None = None
    revision: str | None = None
    trust_remote_code: bool = False

    def describe(self) -> str:
        pin = f" version={self.version!r}" if self.version is not None else ""
        pin += f" revision={self.revision!r}" if self.revision is not None else ""
        return f"{self.source}:{self.name}{pin}"


FusionKey = tuple[tuple[str, str], ...]


class KernelConfig(Record):
    """The user's kernel choices for one model (see the module docstring for values)."""

    kernel_mapping: dict[Any, Any] = field(default_factory=dict)
    inherit_mapping: bool = True
    use_local_kernel: bool = False
    autotune: bool = False
    """Keep PyTorch wherever a kernel is wrong or slower on the shapes the model runs
    (see :mod:`kernelhub.layer.autotune`)."""
    verify: bool | None = None
    """The former name of ``autotune`` (warns once)."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        for name in ("autotune", "verify"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "verify" and value is None):
                raise KernelConfigError(f"{name} must be True or False, not {value!r}")
        self.autotune = autotune_flag(self.autotune, self.verify, "KernelConfig")
        if not isinstance(self.kernel_mapping, dict):
            raise KernelConfigError(
                f"kernel_mapping must be a dict of name → spec, not {type(self.kernel_mapping).__name__}"
            )
        require_bool(self.inherit_mapping, "KernelConfig.inherit_mapping")
        require_bool(self.use_local_kernel, "KernelConfig.use_local_kernel")
        self.entries: dict[str, dict[str, KernelSpec | None]] = {}
        self.fusions: dict[FusionKey, dict[str, KernelSpec | None]] = {}
        for key, value in self.kernel_mapping.items():
            per_device = self._parse_value(key, value)
            if isinstance(key, str):
                self.entries[key] = per_device
            elif isinstance(key, tuple):
                self.fusions[_check_fusion_key(key)] = per_device
            else:
                raise KernelConfigError(
                    f"kernel_mapping key {key!r}: expected a layer or function name such as "
                    "'RMSNorm' or 'rotary_pos_emb', or a tuple of (class_name, path_pattern) "
                    "pairs for module fusion"
                )

    # -- parsing -------------------------------------------------------------------

    def _parse_value(self, key: object, value: object) -> dict[str, KernelSpec | None]:
        if isinstance(value, dict):
            if not value:
                raise KernelConfigError(f"kernel_mapping[{key!r}]: the per-device dict is empty")
            parsed: dict[str, KernelSpec | None] = {}
            for device, spec in value.items():
                name = backend_of(device)
                if name not in DEVICE_TYPES:
                    raise KernelConfigError(
                        f"kernel_mapping[{key!r}]: unknown device {device!r}; valid devices: "
                        f"{', '.join(DEVICE_TYPES)} (and 'mps' for metal)"
                    )
                parsed[name] = self._parse_spec(key, spec)
            return parsed
        spec = self._parse_spec(key, value)
        return dict.fromkeys(DEVICE_TYPES, spec)

    def _parse_spec(self, key: object, value: object) -> KernelSpec | None:
        if value is None:
            return None
        metadata: dict[str, Any] = {}
        if isinstance(value, tuple):
            if len(value) != 2 or not isinstance(value[1], dict):
                raise KernelConfigError(
                    f"kernel_mapping[{key!r}] = {value!r}: a tuple value must be "
                    "(spec, {'version': N}) or (spec, {'revision': 'ref'})"
                )
            value, metadata = value
            unknown = sorted(set(metadata) - set(_METADATA_KEYS))
            if unknown:
                raise KernelConfigError(
                    f"kernel_mapping[{key!r}]: unknown metadata {unknown}; valid keys: "
                    f"{', '.join(_METADATA_KEYS)}"
                )
        if not isinstance(value, str):
            raise KernelConfigError(
                f"kernel_mapping[{key!r}] = {value!r}: expected 'org/repo:LayerName', "
                "a (spec, metadata) tuple, a per-device dict or None"
            )
        version, revision = metadata.get("version"), metadata.get("revision")
        try:
            select_spec(version, revision)
        except KernelHubError as e:
            raise KernelConfigError(f"kernel_mapping[{key!r}]: {e}") from None
        trust = require_bool(
            metadata.get("trust_remote_code", False), f"kernel_mapping[{key!r}] trust_remote_code"
        )
        if self.use_local_kernel:
            m = _LOCAL_SPEC_RE.fullmatch(value)
            if m is None or not Path(m[1]).is_absolute():
                raise KernelConfigError(
                    f"kernel_mapping[{key!r}] = {value!r}: with use_local_kernel=True a value "
                    "must be '/absolute/path/to/kernel:LayerName'"
                )
            return KernelSpec(m[1], m[2], local=True, version=version, revision=revision)
        m = _HUB_SPEC_RE.fullmatch(value)
        if m is None:
            hint = (" (a local path: pass use_local_kernel=True)" if value.startswith("/") else "")
            raise KernelConfigError(
                f"kernel_mapping[{key!r}] = {value!r}: expected 'org/repo:LayerName' or "
                f"'org/repo@<version>:LayerName'{hint}"
            )
        repo_id, pinned = m[1], m[2]
        if pinned is not None:
            if version is not None or revision is not None:
                raise KernelConfigError(
                    f"kernel_mapping[{key!r}] = {value!r}: the version is given twice (after "
                    "'@' and in the metadata dict); give it once"
                )
            try:
                select_spec(pinned, None)
            except KernelHubError as e:
                raise KernelConfigError(f"kernel_mapping[{key!r}]: {e}") from None
            version = pinned
        return KernelSpec(repo_id, m[3], version=version, revision=revision,
                          trust_remote_code=trust)

    # -- applying ------------------------------------------------------------------

    def trusting_all(self) -> KernelConfig:
        """This config with every hub entry trusted (``allow_all_kernels=True``)."""
        trusted = copy.copy(self)

        def trust(per: dict[str, KernelSpec | None]) -> dict[str, KernelSpec | None]:
            return {d: replace(s, trust_remote_code=True) if s and not s.local else s
                    for d, s in per.items()}

        trusted.entries = {k: trust(v) for k, v in self.entries.items()}
        trusted.fusions = {k: trust(v) for k, v in self.fusions.items()}
        return trusted

    def for_device(self, device: str) -> dict[str, KernelSpec | None]:
        """Layer/function name → spec (or None: disabled) for this device type.

        Names whose per-device dict lacks ``device`` are absent: on this device they
        follow the inherited (default) mapping, or PyTorch when nothing is inherited.
        """
        return {k: v[device] for k, v in self.entries.items() if device in v}

    def fusions_for_device(self, device: str) -> dict[FusionKey, KernelSpec]:
        return {k: spec for k, v in self.fusions.items() if (spec := v.get(device)) is not None}

    def valid_keys(self, model: nn.Module) -> list[str]:
        """The names a mapping key may use for ``model``."""
        names = set(registered_names(model).values()) | set(function_targets(model))
        if any(type(m) is nn.Linear for m in model.modules()):
            names.add(WIDEN_NAME)  # the widened projections (.widen): marked only while applied
        if experts_modules(model):
            names.add(EXPERTS_KEY)  # served through the experts interface (.experts), not a name
        return sorted(names | {ATTENTION_KEY})

    def check_keys(self, model: nn.Module) -> None:
        """Reject keys the model does not register, and fusion patterns that match nothing."""
        valid = self.valid_keys(model)
        for name in self.entries:
            if name not in valid:
                raise KernelConfigError(
                    f"kernel_mapping key {name!r} is not a layer or function that "
                    f"{type(model).__name__} registers; valid keys: {', '.join(valid)}"
                )
        for key in self.fusions:
            fusion_parents(model, key)


def _check_fusion_key(key: tuple[object, ...]) -> FusionKey:
    if len(key) < 2 or not all(
        isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) and s for s in p)
        for p in key
    ):
        raise KernelConfigError(
            f"fusion key {key!r}: expected two or more (class_name, path_pattern) pairs, e.g. "
            "(('RMSNorm', 'model.layers.*.post_attention_layernorm'), ('MLP', 'model.layers.*.mlp'))"
        )
    pairs = cast("FusionKey", key)  # checked above
    parents = {pattern.rpartition(".")[0] for _, pattern in pairs}
    if len(parents) != 1 or "" in parents:
        raise KernelConfigError(
            f"fusion key {key!r}: fused modules must be children of one parent module, but "
            f"the patterns have parents {sorted(parents)}"
        )
    return pairs


def _pattern_re(pattern: str) -> re.Pattern[str]:
    """``*`` matches exactly one path segment."""
    return re.compile(r"\.".join(r"[^.]+" if s == "*" else re.escape(s) for s in pattern.split(".")))


def fusion_parents(model: nn.Module, key: FusionKey) -> list[tuple[str, nn.Module]]:
    """(name, module) of every parent the fusion applies to; errors when nothing fits.

    Each child must exist and its class name must end with the pair's class name
    (``"RMSNorm"`` matches ``Qwen3RMSNorm``, ``"MLP"`` matches ``LlamaMLP``).
    """
    parent_re = _pattern_re(key[0][1].rpartition(".")[0])
    found: list[tuple[str, nn.Module]] = []
    for name, module in model.named_modules():
        if not parent_re.fullmatch(name):
            continue
        for class_name, pattern in key:
            child_name = pattern.rpartition(".")[2]
            child = getattr(module, child_name, None)
            if child is None:
                raise KernelConfigError(
                    f"fusion {key!r}: {name or type(model).__name__} has no child {child_name!r}"
                )
            actual = type(child).__name__
            fused = key in getattr(module, "_kernelhub_fused", ())
            if not fused and not actual.endswith(class_name):
                raise KernelConfigError(
                    f"fusion {key!r}: {name}.{child_name} is a {actual}, not a {class_name}"
                )
        found.append((name, module))
    if not found:
        raise KernelConfigError(
            f"fusion {key!r}: no module of {type(model).__name__} matches the parent pattern "
            f"{key[0][1].rpartition('.')[0]!r}; give the full dotted path from the model root "
            "(e.g. 'model.layers.*.mlp')"
        )
    return found


def device_type_of(model: nn.Module, device_map: object = None) -> str:
    """The device type a model's kernels are chosen for; ROCm reports itself as cuda.

    A parameter offloaded by ``device_map`` sits on ``meta``; the layers then run where
    the map sends them (an int is a CUDA index, as in Transformers' device maps)."""
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    if device.type == "meta" and isinstance(device_map, dict):
        placed = [v for v in device_map.values() if v not in ("disk", "meta")]
        if placed:
            first = placed[0]
            device = torch.device("cuda", first) if isinstance(first, int) else torch.device(first)
    return backend_of(torch_device_type(device, torch))


def from_transformers(config: object) -> KernelConfig:
    """Accept Transformers' own ``KernelConfig`` too (same fields, same meaning)."""
    if isinstance(config, KernelConfig):
        return config
    mapping = getattr(config, "kernel_mapping", None)
    if not isinstance(mapping, dict):
        raise KernelConfigError(
            f"kernel_config must be a KernelConfig, not {type(config).__name__}; use "
            "kernelhub.integrations.transformers.KernelConfig(kernel_mapping={...})"
        )
    return KernelConfig(
        dict(mapping),
        inherit_mapping=getattr(config, "inherit_mapping", True),
        use_local_kernel=getattr(config, "use_local_kernel", False),
    )
