"""Where builds live on disk: the layout the builder writes and ``get_local_kernel`` reads.

::

    <repo>/build/<variant>/               a single-kernel repository (build.toml at its
                                          root) built in place: a hub repository's own
                                          layout, which the ecosystem's loaders read too
    <project>/build/<kernel>/<variant>/   a project (kernels.toml) of several kernels
    <project>/kernels-src/<dir>/          a kernel's sources inside a project

A kernel's name is ``general.name`` of its build.toml, else its directory's name. The
builder's output layout (``kernelhub_builder.layout``: staging, ``.work/``, locks) builds on
this module; the loader's :func:`local_build_dirs` reads it.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.formats", "kernelhub.formats.metadata"}  # PEP 810: imported when first used

from pathlib import Path

from .. import user_files
from . import BUILD_DIR as BUILD_DIR  # every repository's build/ (a hub reads it too)
from .metadata import METADATA_FILE

KERNEL_FILE = "build.toml"
PROJECT_FILE = "kernels.toml"
SOURCES_DIR = "kernels-src"
"""Where a project's kernel source dirs live by default."""


def default_build_dir(root: Path) -> Path:
    """``<root>/build``: where a repository or project built in place keeps its builds."""
    return Path(root) / BUILD_DIR


def kernel_builds_dir(build_dir: Path, kernel: str, *, single_kernel: bool) -> Path:
    """The directory holding one kernel's variant dirs: ``build_dir`` itself for a
    single-kernel repository, ``build_dir/<kernel>`` in a project of several."""
    return Path(build_dir) if single_kernel else Path(build_dir) / kernel


def kernel_name(source_dir: Path) -> str:
    """A kernel's name, from nothing but its source dir: ``general.name`` of its
    build.toml when that reads as one, else the directory's name.

    The builder validates build.toml in full and takes the name from its model; this is
    for readers that only have a path (an unreadable build.toml is not their error).
    """
    build_toml = Path(source_dir) / KERNEL_FILE
    if build_toml.is_file():
        from .. import tomlfile
        try:
            general = tomlfile.parse_toml(user_files.read_bounded(build_toml)).get("general", {})
            name = general.get("name") if isinstance(general, dict) else None
        except (OSError, tomlfile.TomlError):
            name = None
        if isinstance(name, str) and name:
            return name
    return Path(source_dir).name


def variant_dirs(builds_dir: Path) -> list[str]:
    """Names of the dirs under ``builds_dir`` that hold a variant (a metadata.json), sorted.

    Staging and scratch dirs (the builder's ``.staging-*``, ``.work``) hold none.
    """
    if not builds_dir.is_dir():
        return []
    return sorted(d.name for d in builds_dir.iterdir() if (d / METADATA_FILE).is_file())


def local_build_dirs(path: Path) -> list[Path]:
    """Where builds of the kernel at ``path`` may live, in the order they are tried.

    ``path`` itself (a dir of variant dirs), its ``build/`` (a single-kernel repository
    built in place), its ``build/<name>/`` (what builders before this layout wrote in
    place), and for a source dir directly under a project's ``kernels-src/`` (the project
    recognised by its kernels.toml) ``<project>/build/<name>/``. Only places the path
    itself determines: never a ``build/`` found by walking up, which would load whatever
    another user left in a shared parent such as /tmp.
    """
    path = Path(path)
    name = kernel_name(path)
    candidates = [path, default_build_dir(path), default_build_dir(path) / name]
    project = path.parent.parent
    if path.parent.name == SOURCES_DIR and (project / PROJECT_FILE).is_file():
        candidates.append(kernel_builds_dir(default_build_dir(project), name,
                                            single_kernel=False))
    return list(dict.fromkeys(candidates))
