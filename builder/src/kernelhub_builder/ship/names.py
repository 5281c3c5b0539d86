"""The names a build is published under: the ecosystem's two generations of variant names.

kernels 0.19 names a build ``torch-2.13-cuda-13.0-cpython-3.9-abi3-x86_64-linux``; kernels
0.17 and 0.18 read only ``torch213-cxx11-cu130-x86_64-linux``. A hub repository can hold
one build under both (the ecosystem's 0.19 builder writes both): the newest loaders —
0.19 and kernelhub — prefer the current name, older ones find the legacy one, and the
files are the same bytes, which git and the Hub store once. Builds stay under their
legacy names on disk (the names the build matrix, the Nix flake and ``builder test``
use); the setting decides what reaches the hub:

* ``both`` (the default): every build under both names;
* ``current``: only the current names (kernels 0.17/0.18 find nothing);
* ``legacy``: only the legacy names (what kernelhub published before).

``[hub] variant-names`` in kernels.toml sets it for a project, ``builder publish
--variant-names`` for one run. A name both generations spell alike (``torch-cpu``,
``torch-universal``) is published once.
"""

from __future__ import annotations

from kernelhub.formats.variants import Naming, PythonTag, Variant

from ..compile.render import PY_LIMITED_API
from ..manifest import VariantNames

BUILD_PYTHON = PythonTag((int(PY_LIMITED_API[2:4], 16), int(PY_LIMITED_API[4:6], 16)))
"""The CPython our compiled variants need (Py_LIMITED_API, abi3): what a current name says."""


def published_names(variant: Variant, names: VariantNames) -> list[str]:
    """The names ``variant`` (as built) is published under, current first."""
    wanted = {VariantNames.BOTH: (Naming.CURRENT, Naming.LEGACY),
              VariantNames.CURRENT: (Naming.CURRENT,),
              VariantNames.LEGACY: (Naming.LEGACY,)}[names]
    spelled = [variant.with_naming(naming, BUILD_PYTHON).name for naming in wanted]
    return list(dict.fromkeys(spelled))
