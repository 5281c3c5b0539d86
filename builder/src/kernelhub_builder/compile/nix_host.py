"""The host toolchain of the flake's host derivations: one per machine, not per checkout.

A Nix build sees neither the caller's environment nor the checkout it came from (the
flake is a copy in the store), so what it runs with is found from the machine alone.
Recording "this checkout's .venv" in one per-user file made the last checkout to run
the set-up win: a build from one checkout ran with another's venv (its dependencies,
and the builder version it had installed, which the id hashes), and failed once that
checkout was deleted. So nothing here names a checkout:

- the builder's Python: a venv holding only the builder's and the loader's third-party
  dependencies, at ``$KERNELHUB_BUILDER_HOME/nix-python/<key>``, where the key is a
  digest of those two dependency lists. ``nix/host.nix`` computes the same key from the
  pyproject.toml files in the store, so every checkout finds the venv that matches its
  own dependencies, whichever checkout made it. The builder's and loader's code come
  from the store (``PYTHONPATH``), never from this venv.
- the torch environments of every torch minor of the matrix: Nix builds only use them
  read-only, so they must exist before ``nix build .#kernels``.
- ``nix-host.env``: machine facts only (where the envs are, ``CUDA_HOME``), written
  where a build can find it (:func:`host_env_file`): a Nix build sees no ``HOME``, so
  it looks in the home directory the user database gives the user it runs as, then in
  ``/etc/kernelhub``. Set-up writes there whatever ``HOME`` says (CI systems, containers
  and test harnesses set ``HOME`` elsewhere; a file under that ``HOME`` was never found).

  It is one file per user, and two checkouts may set up with different builder homes or
  ``CUDA_HOME``: so a set-up adds to it and never takes away. ``KERNELHUB_BUILDER_HOMES``
  lists every builder home a set-up recorded that still exists (the latest first), and a
  build takes the first that holds the builder Python for its own dependencies (the
  ``<key>`` above); a ``CUDA_HOME`` stays until a set-up names another.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
from collections.abc import Mapping, Sequence
from pathlib import Path

from filelock import FileLock
from packaging.requirements import Requirement

from ..errors import NixBuildError
from ..manifest import load_project, read_toml
from ..plan.torch_env import builder_home, create_venv, ensure_torch_env, pip_install

PYTHON_DIR = "nix-python"
ENV_FILE_IN_HOME = Path(".config") / "kernelhub" / "nix-host.env"
SYSTEM_ENV_FILE = Path("/etc/kernelhub/nix-host.env")
"""The two places nix/host-build.sh reads, in its order (a test compares the two)."""
MARKER_FILE = "kernelhub-nix-python.json"
LOCAL_DISTRIBUTIONS = frozenset({"kernelhub", "kernelhub-builder"})
"""This repository's own packages: the store has their code; never installed here."""


def dependencies(pyproject: Path) -> list[str]:
    """``[project].dependencies`` of one of this repository's pyproject.toml files."""
    deps = read_toml(pyproject).get("project", {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise NixBuildError(f"{pyproject}: project.dependencies is not a list of strings")
    return deps


def python_key(builder_pyproject: Path, loader_pyproject: Path) -> str:
    """The venv's name: the builder's then the loader's dependency strings, one a line.

    nix/host.nix computes the same from the same files (a test compares the two).
    """
    text = "".join(d + "\n" for d in dependencies(builder_pyproject)
                   + dependencies(loader_pyproject))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def python_dir(key: str) -> Path:
    return builder_home() / PYTHON_DIR / key


def ensure_host_python(builder_pyproject: Path, loader_pyproject: Path) -> Path:
    """The venv for these dependency lists, made once (file-locked) and then reused."""
    key = python_key(builder_pyproject, loader_pyproject)
    root = python_dir(key)
    python = root / "bin" / "python"
    if (root / MARKER_FILE).is_file() and python.exists():
        return python
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root.parent / f"{key}.lock")):
        if (root / MARKER_FILE).is_file() and python.exists():
            return python  # another checkout made it meanwhile
        wanted = [d for d in dependencies(builder_pyproject) + dependencies(loader_pyproject)
                  if Requirement(d).name not in LOCAL_DISTRIBUTIONS]
        if not python.exists():
            create_venv(root)
        pip_install(python, wanted)
        marker = root / MARKER_FILE
        tmp = marker.with_name(f".{MARKER_FILE}.tmp")
        tmp.write_text(json.dumps({"key": key, "dependencies": wanted}, indent=2) + "\n")
        tmp.replace(marker)
    return python


HOMES = "KERNELHUB_BUILDER_HOMES"
"""Every builder home recorded, ``:``-separated, the latest first (nix/host-build.sh)."""


def read_host_env(path: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of an existing ``nix-host.env`` (none if there is none)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.isidentifier():
            found[name] = value
    return found


def host_env_text(previous: Mapping[str, str] | None = None) -> str:
    """What ``nix-host.env`` says after this set-up: its facts added to ``previous`` (what
    the file said), so another checkout's set-up is never undone."""
    previous = previous or {}
    home = str(builder_home())
    earlier = previous.get(HOMES, previous.get("KERNELHUB_BUILDER_HOME", "")).split(":")
    homes = [home, *(h for h in dict.fromkeys(earlier) if h and h != home and Path(h).is_dir())]
    lines = [f"KERNELHUB_BUILDER_HOME={home}", f"{HOMES}={':'.join(homes)}"]
    if cuda := os.environ.get("CUDA_HOME") or previous.get("CUDA_HOME"):
        lines.append(f"CUDA_HOME={cuda}")
    return "".join(line + "\n" for line in lines)


def database_home(uid: int | None = None) -> Path | None:
    """The home directory the user database gives ``uid``: what a Nix build, which sees
    no ``HOME``, can find (``getent passwd`` in host-build.sh). None without an entry."""
    try:
        home = pwd.getpwuid(os.getuid() if uid is None else uid).pw_dir
    except KeyError:
        return None
    return Path(home) if home else None


def host_env_file() -> Path:
    """Where set-up writes ``nix-host.env`` so that this user's Nix builds find it."""
    home = database_home()
    if home is not None:
        return home / ENV_FILE_IN_HOME
    if os.getuid() == 0:
        return SYSTEM_ENV_FILE
    raise NixBuildError(
        f"uid {os.getuid()} has no entry in the user database, so a Nix build (which sees "
        f"no HOME) cannot find a host toolchain file of its own; as root, run "
        f"`python -m kernelhub_builder.compile.nix_build host-setup --env-file {SYSTEM_ENV_FILE} "
        "--project-file kernels.toml` in a checkout (every user's builds read that file)")


def write_host_env(path: Path) -> None:
    """Add this set-up's facts to ``path`` (locked: two set-ups at once keep both)."""
    if ":" in str(builder_home()):
        raise NixBuildError(f"KERNELHUB_BUILDER_HOME={builder_home()} holds ':', which "
                            f"separates the homes {path} lists; choose a path without one")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(f".{path.name}.lock"))):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(host_env_text(read_host_env(path)))
        tmp.replace(path)


def set_up_host(project_file: Path, env_file: Path | None = None,
                torch: Sequence[str] = ()) -> list[str]:
    """Everything the host derivations need on this machine; what was found or made.

    ``env_file`` defaults to :func:`host_env_file`, the one the builds read. ``torch``
    limits the torch envs made to those minors (a CI job building one variant needs
    one, not every torch of the matrix); by default, all of them."""
    env_file = env_file or host_env_file()
    root = project_file.resolve().parent
    python = ensure_host_python(root / "builder" / "pyproject.toml",
                                root / "loader" / "pyproject.toml")
    lines = [f"builder Python for Nix builds: {python}"]
    project = load_project(project_file, only=[])
    unknown = set(torch) - set(project.matrix.torch)
    if unknown:
        raise NixBuildError(f"torch {', '.join(sorted(unknown))} is not in the matrix of "
                            f"{project_file} ({', '.join(project.matrix.torch)})")
    for minor in [m for m in project.matrix.torch if not torch or m in torch]:
        env = ensure_torch_env(minor, project.torch_pins.get(minor))
        lines.append(f"torch {minor} environment: {env.root} (torch {env.torch_version})")
    write_host_env(env_file)
    lines.append(f"host toolchain recorded in {env_file}")
    home = os.environ.get("HOME")
    if home and env_file == host_env_file() and not env_file.is_relative_to(home):
        lines.append(f"(not under HOME={home}: Nix builds see no HOME and read the user "
                     "database's home directory)")
    return lines
