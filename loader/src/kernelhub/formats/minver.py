"""``kernels-minver``: the oldest ecosystem loader (``kernels``) a variant needs.

The ecosystem's builder (0.19) writes it into ``metadata.json`` as ``X.Y.Z`` when a build
uses a format older loaders cannot read (the ZIP layout, for one), and its loader refuses
a variant that needs a newer ``kernels`` than itself. kernelhub reads the ecosystem's
formats up to :data:`SUPPORTED_KERNELS`; a variant asking for more is refused before
import with one line saying to upgrade kernelhub, and one asking for less loads.

The builder writes :data:`ZIP_LAYOUT_KERNELS` for a ZIP-layout build and no key
otherwise, so variants that need no 0.19 feature keep loading under kernels 0.17 and 0.18.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.formats.metadata"}  # PEP 810: imported when first used

from ..errors import KernelHubError, MetadataError
from .metadata import KERNELS_MINVER as KERNELS_MINVER  # a key of metadata.json

SUPPORTED_KERNELS: tuple[int, int, int] = (0, 19, 1)
"""The newest ``kernels`` release whose formats this kernelhub reads."""
ZIP_LAYOUT_KERNELS = "0.19.0"
"""The first ``kernels`` release that loads the ZIP build layout."""


class KernelsVersionError(KernelHubError):
    """A variant needs a newer ecosystem format than this kernelhub reads."""


def parse_kernels_version(value: object, where: str) -> tuple[int, int, int]:
    """``"0.19.0"`` → (0, 19, 0); exactly three numeric parts, as the ecosystem requires."""
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        raise MetadataError(f"{where}: {KERNELS_MINVER} must be a version X.Y.Z, got {value!r}")
    major, minor, patch = (int(p) for p in parts)
    return major, minor, patch


def check_kernels_minver(value: object, variant: str) -> None:
    """Refuse a variant whose ``kernels-minver`` is newer than :data:`SUPPORTED_KERNELS`
    (absent: no requirement)."""
    if value is None:
        return
    needed = parse_kernels_version(value, f"{variant}: metadata.json")
    if needed > SUPPORTED_KERNELS:
        supported = ".".join(map(str, SUPPORTED_KERNELS))
        raise KernelsVersionError(
            f"{variant} needs kernels>={value}, a format newer than this kernelhub reads "
            f"(up to kernels {supported}); upgrade kernelhub (pip install --upgrade kernelhub)")
