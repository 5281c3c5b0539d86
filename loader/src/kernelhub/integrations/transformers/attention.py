"""Hub attention kernels for Transformers' ``attn_implementation``.

Accepted strings:

* ``"org/repo"``, ``"org/repo@v1.2.0"`` (tag or branch), ``"org/repo@>=1.0,<2.0"``
  (semantic-version constraint), optionally ``":function"`` at the end;
* ``"flash_attention_2"`` (``_3``, ``_4``) when the compiled flash-attn package cannot
  serve it (not installed, or not on CUDA): our hub kernel instead, with a one-line
  notice. ``flash-attn`` itself is used where Transformers can use it.

An unpinned repository loads the major the installed Transformers pins for it
(``FLASH_ATTN_KERNEL_VERSIONS``: ``flash-attn2`` → 4, ``flash-attn3`` → 2, … on 5.25),
else the newest major on the hub (Transformers would ask for 1, which a repository that
started at a later major does not have).

The kernel's function has the signature of Transformers' attention interface
(``fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw)``);
it is registered with ``AttentionInterface`` and a mask function with
``AttentionMaskInterface`` under the string itself, which then names the model's
attention implementation. Loading runs the kernel's code, so repositories outside the
trusted organisations are refused unless ``allow_all_kernels=True``.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, cast

from ...errors import KernelHubError, TrustError
from ...lazy_names import deferred
from ...system import torch_is_rocm
from ...value_types import Record
from ...versions import split_repo_string
from .table import FLASH_ATTN2, FLASH_ATTN2_VERSION

if TYPE_CHECKING:
    import torch
    import transformers
    from transformers import masking_utils
    from transformers import modeling_flash_attention_utils as flash_utils
else:
    torch = deferred("torch")
    transformers = deferred("transformers")
    masking_utils = deferred("transformers.masking_utils")
    flash_utils = deferred("transformers.modeling_flash_attention_utils")

logger = logging.getLogger("kernelhub.transformers")

_FLASH_RE = re.compile(r"flash_attention_([234])")
_HUB_RE = re.compile(r"[^/:@\s]+/[^/:@\s]+(?:@[^:]+)?(?::\w+)?")
FLASH_FALLBACK = {
    "2": FLASH_ATTN2,
    "3": "kernels-community/flash-attn3",
    "4": "kernels-community/flash-attn4",
}
DEFAULT_FUNCTION = "attention_forward"
ATTENTION_NAME = "attention"
"""What autotuning reports call the attention call site."""


class AttentionKernelError(KernelHubError, ValueError):
    """An attention implementation string could not be turned into a working kernel."""


class AttentionRequest(Record, frozen=True):
    """A parsed ``attn_implementation`` that kernelhub serves."""

    repo_id: str
    version: int | str | None = None
    """The version the string pins (part of its name), or the one the table chose."""
    function: str | None = None
    replaces: str | None = None
    """``"flash_attention_2"`` etc. when this is the FlashAttention fallback."""
    default_version: int | None = None
    """What an unpinned string loads (Transformers' pin for the repository)."""

    @property
    def name(self) -> str:
        """The name the kernel is registered under (what the model's config will say)."""
        text = self.repo_id + (f"@{self.version}" if self.version else "")
        return text + (f":{self.function}" if self.function else "")


def _flash_attn_usable() -> bool:
    """Whether Transformers can run flash_attention_N itself (package + CUDA device)."""
    if importlib.util.find_spec("flash_attn") is None:
        return False
    return torch.cuda.is_available() and not torch_is_rocm(torch)


def pinned_major(repo_id: str) -> int | None:
    """The major the installed Transformers loads for an unpinned ``repo_id``."""
    try:
        pinned = flash_utils.FLASH_ATTN_KERNEL_VERSIONS
    except (ImportError, AttributeError):  # a Transformers without the table, or none
        return FLASH_ATTN2_VERSION if repo_id == FLASH_ATTN2 else None
    found = pinned.get(repo_id)
    return found if isinstance(found, int) and found > 0 else None


def parse(attn_implementation: object) -> AttentionRequest | None:
    """The request kernelhub serves, or None when Transformers handles the string itself."""
    from ... import api
    if not isinstance(attn_implementation, str):
        return None
    text = attn_implementation.strip()
    if m := _FLASH_RE.fullmatch(text):
        if _flash_attn_usable():
            return None
        repo = FLASH_FALLBACK[m[1]]
        if repo != FLASH_ATTN2 and not api.has_kernel(repo, pinned_major(repo)):
            repo = FLASH_ATTN2
        return AttentionRequest(repo, replaces=text, default_version=pinned_major(repo))
    if not _HUB_RE.fullmatch(text):
        return None
    rest, _, function = text.partition(":")
    try:
        repo_id, version = split_repo_string(rest)
    except KernelHubError as e:
        raise AttentionKernelError(f"attn_implementation={text!r}: {e}") from None
    return AttentionRequest(repo_id, version, function or None,
                            default_version=None if version else pinned_major(repo_id))


def _mask_function(kernel: ModuleType) -> Callable[..., object]:
    """The mask builder the kernel wants: it says so in ``attention_mask_interface``."""
    wanted = getattr(kernel, "attention_mask_interface", "sdpa")
    functions = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS
    try:
        return cast("Callable[..., object]", functions[wanted])
    except KeyError:
        raise AttentionKernelError(
            f"{kernel.__name__} asks for mask interface {wanted!r}, which this Transformers "
            f"lacks; valid: {', '.join(functions.valid_keys())}"
        ) from None


def load(request: AttentionRequest, *, allow_all_kernels: bool = False
         ) -> tuple[ModuleType, Callable[..., object]]:
    """The kernel's attention function; trust and version errors say what to do."""
    from ... import api
    try:
        version = request.version if request.version is not None else request.default_version
        kernel = api.get_kernel(request.repo_id, version, trust_remote_code=allow_all_kernels)
    except TrustError:
        org = request.repo_id.partition("/")[0]
        raise AttentionKernelError(
            f"attn_implementation={request.name!r}: refusing to load a kernel from {org!r}, "
            "which is not a trusted organisation (loading a kernel runs its code). Pass "
            "allow_all_kernels=True to from_pretrained if you trust it, or add the org to "
            "KERNELHUB_TRUSTED_ORGS."
        ) from None
    except KernelHubError as e:
        raise AttentionKernelError(
            f"attn_implementation={request.name!r}: could not load the attention kernel: {e}"
        ) from None
    name = request.function or DEFAULT_FUNCTION
    fn = getattr(kernel, name, None)
    if not callable(fn):
        raise AttentionKernelError(
            f"{request.repo_id} has no attention function {name!r}; name one with "
            f"'{request.repo_id}:<function>' (it must take Transformers' attention-interface "
            "arguments: module, query, key, value, attention_mask, …)"
        )
    return kernel, fn


def register(request: AttentionRequest, *, allow_all_kernels: bool = False) -> str:
    """Load the kernel, register it with Transformers, return the implementation name.

    The registry is the process's: every model naming this implementation runs what is
    registered here, the kernel as it is (autotuning binds per model, see
    :func:`~kernelhub.integrations.transformers.rebind.bind_attention`).
    """
    kernel, fn = load(request, allow_all_kernels=allow_all_kernels)
    transformers.AttentionInterface.register(request.name, fn)
    masking_utils.AttentionMaskInterface.register(request.name, _mask_function(kernel))
    if request.replaces:
        logger.warning(
            "%s: the flash-attn package is not usable here, so attention runs kernelhub's "
            "%s (variant for this device) instead", request.replaces, request.repo_id,
        )
    return request.name


def reference_of(request: AttentionRequest, *, allow_all_kernels: bool = False
                 ) -> tuple[str, Callable[..., object] | None]:
    """(name, function) of Transformers' own implementation of the mask interface the
    kernel asks for (``sdpa`` by default): it takes the same inputs, so autotuning
    compares the kernel with it. The function is None where Transformers has none."""
    kernel, _ = load(request, allow_all_kernels=allow_all_kernels)
    wanted = str(getattr(kernel, "attention_mask_interface", "sdpa"))
    return wanted, cast("Callable[..., object] | None",
                        transformers.AttentionInterface._global_mapping.get(wanted))


def attention_function(name: str) -> Callable[..., object]:
    """The function :func:`register` registered under ``name`` (for mode checks such as
    ``has_backward``)."""
    return cast("Callable[..., object]", transformers.AttentionInterface._global_mapping[name])
