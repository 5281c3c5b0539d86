"""The one TOML reader of both packages: tomllib from Python 3.11 on, tomli before.

tomli is a dependency of both distributions on Python 3.10 (it is what became tomllib),
so every TOML file reads the same way on every supported Python.
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    """Parse TOML text; raises :data:`TOMLDecodeError` saying where it is malformed."""
    return tomllib.loads(text)
