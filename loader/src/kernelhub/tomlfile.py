"""The one TOML reader of both packages: tomllib from Python 3.11 on, tomli before.

tomli is a dependency of both distributions on Python 3.10 (it is what became tomllib),
so every TOML file reads the same way on every supported Python. Callers use the chosen
module itself (``from kernelhub.tomlfile import tomllib``): this module only chooses.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
