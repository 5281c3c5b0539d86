"""Helpers shared by the SEEDS.md end-to-end tests (fixtures are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=64)
"""A two-layer model: big enough to have every layer kind, small enough for CPU CI."""


def require_kernel(repo_id: str) -> None:
    """Skip, naming the kernel, when this session's hub has no loadable build of it."""
    from kernelhub import has_kernel

    if not has_kernel(repo_id):
        pytest.skip(f"{repo_id} is not published to the test hub (not in kernels.toml yet, "
                    "or no build for this system)")


def load(path: Path, **kwargs):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, **kwargs)


def pytorch(path: Path, **kwargs):
    """The model as Transformers' own code runs it: ``use_kernels=False`` (from
    Transformers 5.25 ``from_pretrained`` kernelizes unless told not to)."""
    return load(path, use_kernels=False, **kwargs)


def kernels_in(model) -> dict[str, str]:
    """Qualified module name → the repository whose kernel runs its forward."""
    from kernelhub.layer import kernel_of

    return {n: str(k) for n, m in model.named_modules() if (k := kernel_of(m)) is not None}


def functions_in(model) -> dict[str, str]:
    """Where ``model`` runs a function kernel → what runs: the function modules it
    attaches (Transformers attaches them when its ``kernels`` package is usable), else
    the module globals its forwards see replaced (kernelhub's rebind)."""
    from kernelhub.integrations.transformers.rebind import overrides_of
    from kernelhub.layer import get_kernelized_layers

    found = {f"{m}.{f}": str(k.repo)
             for (m, f), k in get_kernelized_layers(model).funcs.items()}
    for name, module in model.named_modules():
        for attr, fn in overrides_of(module).items():
            found[f"{name}.{attr}"] = getattr(fn, "__name__", str(fn))
    return found


def ids(batch: int = 2, length: int = 12) -> torch.Tensor:
    return torch.randint(0, TINY["vocab_size"], (batch, length),
                         generator=torch.Generator().manual_seed(1))
