"""The one TOML reader of both packages: tomllib from Python 3.11 on, tomli before.

tomli is a dependency of both distributions on Python 3.10 (it is what became tomllib),
so every TOML file reads the same way on every supported Python. :func:`parse_toml` is
how every file is parsed: besides malformed TOML it catches what tomllib lets escape —
a document nested a few thousand levels deep exhausts its recursion — so each caller
has one exception to turn into its own one-line error.
"""

from __future__ import annotations

import sys
from typing import Any

from .errors import KernelHubError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["TomlError", "parse_toml", "tomllib"]


class TomlError(KernelHubError, ValueError):
    """Bytes that are not a TOML document kernelhub can read; the message says why."""


def parse_toml(data: bytes | str) -> dict[str, Any]:
    """The document in ``data`` (UTF-8 when bytes), or :class:`TomlError`."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return tomllib.loads(text)
    except UnicodeDecodeError as e:
        raise TomlError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise TomlError(f"invalid TOML: {e}") from None
    except RecursionError:
        raise TomlError("nested too deeply to be a kernelhub file") from None
