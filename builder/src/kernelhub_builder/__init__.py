"""kernelhub-builder: build, test and publish PyTorch compute kernels for every variant.

The data path, one subpackage per stage: the manifest (``build_toml``, ``manifest``) →
``plan`` (matrix, toolchains, torch environments) → ``compile`` (source hash, render,
ninja, assemble) → ``check`` (rules, the kernel's own tests) → ``ship`` (publish). ``layout``
says where builds live, ``report`` how the library tells what it does, ``errors`` what
goes wrong; ``cli`` is a thin shell over these.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path

from kernelhub.tomlfile import tomllib

_DIST = "kernelhub-builder"


def _own_version() -> str:
    """The version of the code running now, not of whatever a venv installed.

    Run from a source tree (an editable install, or the flake's copy in the Nix store,
    which has no installed metadata and runs with a Python shared by every checkout),
    the tree's own pyproject.toml says it; the id hashes it, so reading it from another
    checkout's install would give another id. Installed from a wheel: its metadata.
    """
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        project = {}
    if project.get("name") == _DIST and isinstance(project.get("version"), str):
        return project["version"]
    try:
        return _dist_version(_DIST)
    except PackageNotFoundError:  # a source tree without a pyproject.toml, never installed
        return "0.0.0+unknown"


__version__ = _own_version()

BUILDER_VERSION = __version__
"""Recorded in every variant's provenance and hashed into its id."""
