"""A real pure-Python kernel with layers, for the layers API tests (loader/tests/layer).

Its layers do real math, differently from a model's PyTorch code, and record each call in
``layers.CALLS``, so a test can tell that the kernel — not PyTorch — ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

TRUSTED_REPO = "kernels-community/toy-activation"
UNTRUSTED_REPO = "someone-else/toy-activation"

LAYERS = '''
import torch
from torch import nn

CALLS = []


def _silu_mul(x):
    a, b = x.chunk(2, dim=-1)
    return a * torch.sigmoid(a) * b


class SiluAndMul(nn.Module):
    """Trains and compiles."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x):
        CALLS.append("SiluAndMul")
        return _silu_mul(x)


class InferenceSiluAndMul(nn.Module):
    has_backward = False
    can_torch_compile = True

    def forward(self, x):
        CALLS.append("InferenceSiluAndMul")
        return _silu_mul(x).detach()


class EagerSiluAndMul(nn.Module):
    def forward(self, x):
        CALLS.append("EagerSiluAndMul")
        return _silu_mul(x)


class RMSNorm(nn.Module):
    """Reads weight and eps from the model's own instance."""

    can_torch_compile = True

    def forward(self, hidden_states):
        CALLS.append("RMSNorm")
        x = hidden_states.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(hidden_states.dtype)


class WithInit(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x


class WithHelper(nn.Module):
    def helper(self, x):
        return x

    def forward(self, x):
        return self.helper(x)


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y
'''

INIT = '''
import torch
from . import layers

CALLS = layers.CALLS


def silu_and_mul(x):
    CALLS.append("silu_and_mul")
    a, b = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * b


def rotary(q, k, cos, sin, unsqueeze_dim=1):
    CALLS.append("rotary")
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rot(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin
'''



@dataclass(frozen=True)
class ToyHub:
    """The published toy kernel: hub root and a local copy of the same build."""

    root: Path
    variant_dir: Path


def publish_toy_kernel(root: Path) -> ToyHub:
    """Stage the toy kernel once and publish it under a trusted and an untrusted org."""
    staged = root / "staged" / "torch-universal"
    make_variant(staged, name="toy_activation", init=INIT, files={"layers.py": LAYERS},
                 backend="universal")
    hub = LocalPublisher(root / "hub")
    for repo in (TRUSTED_REPO, UNTRUSTED_REPO):
        hub.publish(repo, "v1", {"torch-universal": staged}, tag="v1.0.0", message="toy")
    return ToyHub(root / "hub", staged)
