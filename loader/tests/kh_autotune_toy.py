"""A real pure-Python kernel for the autotune tests, and the models they kernelize.

Shared by the test module and the second process of the cross-process test, so both see
the same model classes under the same import name (the decision key names them).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F
from kernelhub import use_kernel_forward_from_hub
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant
from torch import nn

REPO = "kernels-community/autotune-toy"

LAYERS = '''
import time

import torch.nn.functional as F
from torch import nn

CALLS = []


def _silu_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


class Good(nn.Module):
    def forward(self, x):
        CALLS.append("Good")
        return _silu_mul(x)


class Wrong(nn.Module):
    def forward(self, x):
        CALLS.append("Wrong")
        return 2 * _silu_mul(x)


class Slow(nn.Module):
    def forward(self, x):
        CALLS.append("Slow")
        time.sleep(0.03)
        return _silu_mul(x)
'''


def publish_autotune_toy(root: Path) -> Path:
    """Publish the kernel to a LocalHub under ``root``; returns the hub root."""
    staged = root / "staged" / "torch-universal"
    make_variant(staged, name="autotune_toy", init="from . import layers\nCALLS = layers.CALLS\n",
                 files={"layers.py": LAYERS}, backend="universal")
    LocalPublisher(root / "hub").publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0",
                                   message="autotune toy")
    return root / "hub"


@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]


@use_kernel_forward_from_hub("SiluAndMul")
class SlowSiluAndMul(nn.Module):
    """A model whose own PyTorch code is slow: a correct kernel must win."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.03)
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]


def kernel_calls() -> list[str]:
    import kernelhub

    return kernelhub.get_kernel(REPO, version=1).CALLS
