"""kernelhub-builder: build, test and publish PyTorch compute kernels for every variant.

The data path, one module per arrow: manifest → matrix → toolchains / torch_env →
source_hash → render → compile → assemble (orchestrated by build) → kernel_tests →
publish. ``cli`` is a thin shell over these.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

try:
    __version__ = _dist_version("kernelhub-builder")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

BUILDER_VERSION = __version__
"""Recorded in every variant's provenance and hashed into its id."""
