"""One Python environment per torch minor version, created on demand and cached.

A variant for torch 2.13 must be compiled against torch 2.13's headers and tested under
torch 2.13, whatever torch the builder itself runs with. So each torch minor gets its own
venv under ``$KERNELHUB_BUILDER_HOME/envs/torch-<minor>``, holding torch, numpy, pytest
and the kernelhub loader (which ``builder test`` needs to load variants).

An env is ready once its marker file exists; the marker also caches what we asked torch
about itself (headers, library dir, ABI), so later builds do not start Python at all. An
env made by hand (torch installed, no marker) is adopted: the missing pieces are
installed and the marker written, rather than throwing the env away.

The env is shared by every checkout and every standalone kernel build of the machine,
which ask for it with different requirements (the monorepo pins ``torch==2.13.0``, a
kernel repository without kernels.toml asks for any ``torch==2.13.*``). So an env is
ready for every requirement its installed torch satisfies: the requirement the marker
records is the one it was made for, never a condition on using it — else each kind of
build would rewrite it for itself, and a Nix build, which may only read envs, would
find none ready.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement

from ..errors import TorchEnvError
from ..report import note

MARKER_FILE = "kernelhub-builder-env.json"
_MARKER_FORMAT = 1

# Runs inside the torch env; prints everything the builder needs to compile against it.
_QUERY_SCRIPT = textwrap.dedent(
    """
    import json, sys, sysconfig
    import torch
    from torch.utils import cpp_extension
    print(json.dumps({
        "torch_version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "include_dirs": list(cpp_extension.include_paths()),
        "library_dir": cpp_extension.library_paths()[0],
        "python_include_dir": sysconfig.get_paths()["include"],
        "python_version": "%d.%d" % sys.version_info[:2],
    }))
    """
)


@dataclass(frozen=True)
class TorchEnv:
    """A ready torch environment and the facts a compile needs from it."""

    version: str
    """The torch minor this env serves, e.g. '2.13'."""
    python: Path
    torch_version: str
    """The exact installed torch, e.g. '2.13.0+cpu'."""
    cuda: str | None
    cxx11_abi: bool
    include_dirs: tuple[Path, ...]
    library_dir: Path
    python_include_dir: Path
    root: Path
    hip: str | None = None
    """torch.version.hip of a ROCm torch (None elsewhere, and for envs made before it
    was recorded)."""

    @property
    def torch_release(self) -> str:
        """The torch version without its local build tag ('2.13.0'), as metadata records it."""
        return self.torch_version.split("+", 1)[0]


def minor_str(torch: tuple[int, int]) -> str:
    """(2, 13) → '2.13', the key of envs and pins."""
    return f"{torch[0]}.{torch[1]}"


def builder_home() -> Path:
    """Where the builder keeps environments and other caches."""
    home = os.environ.get("KERNELHUB_BUILDER_HOME")
    return Path(home) if home else Path.home() / ".cache" / "kernelhub-builder"


def env_dir(minor: str) -> Path:
    return builder_home() / "envs" / f"torch-{minor}"


def torch_requirement(minor: str, pin: str | None) -> Requirement:
    """The pip requirement for this minor: the project's pin, else any release of it."""
    text = pin or f"torch=={minor}.*"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as e:
        raise TorchEnvError(
            f"torch pin {text!r} for torch {minor} is not a pip requirement "
            f"({str(e).splitlines()[0]}); "
            'fix [toolchain.torch] in kernels.toml, e.g. "2.13" = "torch==2.13.0"'
        ) from None
    if requirement.name != "torch":
        raise TorchEnvError(
            f"torch pin {text!r} for torch {minor} names {requirement.name!r}, not torch; "
            "fix [toolchain.torch] in kernels.toml"
        )
    return requirement


READ_ONLY_ENV = "KERNELHUB_BUILDER_ENVS_READ_ONLY"
"""Set (to 1) by the Nix flake's host builds: use ready envs as they are, never create,
complete or reinstall one (a Nix build writes nothing outside its output). The loader
an env holds then need not be this builder's: builds only compile against the env."""


def envs_read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV, "") not in ("", "0")


def ensure_torch_env(minor: str, pin: str | None = None) -> TorchEnv:
    """Return the env for torch ``minor``, creating or completing it first if needed."""
    root = env_dir(minor)
    requirement = torch_requirement(minor, pin)
    ready = _read_marker(root, requirement)
    if ready is not None:
        return ready
    if envs_read_only():
        raise TorchEnvError(
            f"no ready torch {minor} environment ({requirement}) at {root}, and this build "
            f"may not create one ({READ_ONLY_ENV} is set, as in a Nix build); create it "
            f"with: builder build --variant 'torch{minor.replace('.', '')}-*' (or ci/setup-nix)"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root.parent / f"torch-{minor}.lock")):
        ready = _read_marker(root, requirement)  # another builder may have finished it
        if ready is not None:
            return ready
        return _prepare(minor, root, requirement)


def peek_torch_env(minor: str, pin: str | None = None) -> TorchEnv | None:
    """The env for torch ``minor`` if it is already ready; never creates or installs.

    Planning (``builder list-variants``) uses this to tell, without minutes of pip, whether
    an existing env can build a variant (e.g. a CPU-only torch cannot build CUDA ones).
    """
    try:
        requirement = torch_requirement(minor, pin)
    except TorchEnvError:
        return None
    return _read_marker(env_dir(minor), requirement)


def _python(root: Path) -> Path:
    return root / "bin" / "python"


def _read_marker(root: Path, requirement: Requirement) -> TorchEnv | None:
    """The cached env, if its marker is current and its torch satisfies ``requirement``."""
    try:
        data = json.loads((root / MARKER_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != _MARKER_FORMAT:
        return None
    info = data.get("torch")
    if not isinstance(info, dict) or not _python(root).exists():
        return None
    if not requirement.specifier.contains(info.get("torch_version", ""), prereleases=True):
        return None
    if _loader_stamp(data) != _loader_stamp_now() and not envs_read_only():
        # another checkout's loader, or this one's with new dependencies: _prepare
        # installs this one (seconds)
        return None
    return _env_from_info(data["minor"], root, info)


def _env_from_info(minor: str, root: Path, info: dict) -> TorchEnv:
    return TorchEnv(
        version=minor,
        python=_python(root),
        torch_version=info["torch_version"],
        cuda=info.get("cuda"),
        cxx11_abi=bool(info["cxx11_abi"]),
        include_dirs=tuple(Path(p) for p in info["include_dirs"]),
        library_dir=Path(info["library_dir"]),
        python_include_dir=Path(info["python_include_dir"]),
        root=root,
        hip=info.get("hip"),
    )


def _prepare(minor: str, root: Path, requirement: Requirement) -> TorchEnv:
    python = _python(root)
    if not python.exists():
        note(f"creating torch {minor} environment at {root}")
        create_venv(root)
    installed = _installed_torch(python)
    if installed is None or not requirement.specifier.contains(installed, prereleases=True):
        note(f"installing {requirement}, numpy and pytest into {root} (this takes a while)")
        pip_install(python, [str(requirement), "numpy", "pytest"], constraints=False)
    target = loader_requirement()
    if not _can_import(python, "kernelhub") or _marker_loader(root) != _loader_stamp_now():
        # The env must run the loader of the checkout that builds and tests with it, not
        # whichever checkout created the env first.
        note(f"installing the kernelhub loader ({target[-1]}) into {root}")
        pip_install(python, target)
    info = _query(python)
    marker = {"format": _MARKER_FORMAT, "minor": minor, "requirement": str(requirement),
              "torch": info, "loader": target, "loader-deps": loader_dependencies_digest()}
    tmp = root / f".{MARKER_FILE}.tmp"
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(root / MARKER_FILE)
    note(f"torch {minor} environment ready: torch {info['torch_version']}")
    return _env_from_info(minor, root, info)


def adopt_python(minor: str, pin: str | None, python: Path) -> TorchEnv:
    """Make ``python`` (one that has torch, e.g. a Nix store Python) the env for ``minor``.

    The hermetic Nix build has no pip and no network: its torch comes with its Python.
    The env dir gets a ``bin/python`` that execs it (a wrapper, not a link: a venv's or
    a Nix env's Python finds its packages from its own location) and a marker from
    asking that torch about itself; the torch must satisfy the pin, as a created env's
    would.
    """
    root = env_dir(minor)
    requirement = torch_requirement(minor, pin)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    wrapper = _python(root)
    wrapper.unlink(missing_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} "$@"\n')
    wrapper.chmod(0o755)
    info = _query(wrapper)
    if not requirement.specifier.contains(info["torch_version"].split("+")[0], prereleases=True):
        raise TorchEnvError(f"{python} has torch {info['torch_version']}, which does not satisfy "
                            f"{requirement}; give it the torch the pin names")
    marker = {"format": _MARKER_FORMAT, "minor": minor, "requirement": str(requirement),
              "torch": info, "loader": None}
    (root / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    return _env_from_info(minor, root, info)


def _marker_loader(root: Path) -> tuple | None:
    try:
        return _loader_stamp(json.loads((root / MARKER_FILE).read_text()))
    except (OSError, json.JSONDecodeError):
        return None


def _loader_stamp(marker: dict) -> tuple:
    return marker.get("loader"), marker.get("loader-deps")


def _loader_stamp_now() -> tuple:
    return loader_requirement(), loader_dependencies_digest()


def loader_dependencies_digest() -> str | None:
    """A digest of the editable loader's pyproject.toml: an env made before the loader
    gained a dependency must be reinstalled, though its pip arguments are the same."""
    requirement = loader_requirement()
    if requirement[0] != "-e":
        return None  # a released kernelhub pins its own dependencies
    pyproject = Path(requirement[1]) / "pyproject.toml"
    return hashlib.sha256(pyproject.read_bytes()).hexdigest()[:16]


def loader_requirement() -> list[str]:
    """pip arguments that install the same kernelhub the builder is running with.

    From a source checkout (the development case) that is the checkout itself, installed
    editable so loader changes are seen by ``builder test`` without reinstalling.
    """
    import kernelhub

    package = Path(kernelhub.__file__).resolve().parent
    loader_root = package.parent.parent  # loader/src/kernelhub → loader/
    if package.parent.name == "src" and (loader_root / "pyproject.toml").is_file():
        return ["-e", str(loader_root)]
    from importlib.metadata import version

    return [f"kernelhub=={version('kernelhub')}"]


def _installed_torch(python: Path) -> str | None:
    probe = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def _can_import(python: Path, module: str) -> bool:
    probe = subprocess.run(
        [str(python), "-c", f"import {module}"], capture_output=True, check=False
    )
    return probe.returncode == 0


def _query(python: Path) -> dict:
    out = _run([str(python), "-c", _QUERY_SCRIPT], "ask torch for its build settings")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise TorchEnvError(f"{python} printed no build settings; got:\n{out}") from None


def create_venv(root: Path) -> None:
    """A venv at ``root`` on the Python the builder runs with (its base interpreter)."""
    _run([sys.executable, "-m", "venv", str(root)], f"create a venv at {root}")


def pip_install(python: Path, args: list[str], *, constraints: bool = True) -> None:
    """``constraints=False`` installs the project's torch pin whatever pip constraints the
    machine's pip configuration sets (a machine capped at an older torch, as ours are at
    2.14.1, would refuse the 2.15 env): the pin in kernels.toml is what the env is for.
    Indexes, find-links and certificates from that configuration still apply."""
    env = None if constraints else {**os.environ, "PIP_CONSTRAINT": os.devnull}
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", *args],
         f"pip install {' '.join(args)}", env=env)


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise TorchEnvError(
            f"could not {what} (exit {done.returncode}):\n{done.stdout}{done.stderr}\n"
            "Fix the cause above, or delete the env directory to start it afresh."
        )
    return done.stdout
