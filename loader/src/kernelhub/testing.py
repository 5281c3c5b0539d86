"""pytest plugin that lets a kernel's own tests import the build under test.

The builder runs ``python -m pytest -p kernelhub.testing <kernel>/tests`` with
``KERNELHUB_TEST_VARIANT=<variant dir>`` in the variant's torch environment. The variant
is verified and imported under its unique id, then also registered under the kernel's
plain name, so tests written for the source tree (``import activation``) exercise the
built artefact rather than the sources.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from .api import load_variant_dir
from .errors import KernelHubError
from .formats.metadata import read_metadata

ENV_VAR = "KERNELHUB_TEST_VARIANT"
_LOADED = pytest.StashKey[tuple[str, str]]()
"""(import name, variant dir) of the variant under test, for the report header."""


def module_name(kernel_name: str) -> str:
    """The import name tests use: the kernel name with ``-`` turned into ``_``."""
    return kernel_name.replace("-", "_")


def pytest_configure(config: pytest.Config) -> None:
    variant = os.environ.get(ENV_VAR)
    if not variant:
        return
    path = Path(variant)
    try:
        module = load_variant_dir(path)
        name = module_name(read_metadata(path).name)
    except KernelHubError as e:
        raise pytest.UsageError(f"{ENV_VAR}={variant}: {e}") from e
    sys.modules[name] = module
    config.stash[_LOADED] = (name, str(path.resolve()))


def pytest_report_header(config: pytest.Config) -> str | None:
    loaded = config.stash.get(_LOADED, None)
    if loaded is None:
        return None
    name, path = loaded
    return f"kernelhub: testing variant {path} as `import {name}`"
