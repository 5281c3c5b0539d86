"""End-to-end helpers: one build of the real kernels per test run, one hub, fresh
processes per torch version — the way a kernel author and a model user meet.

Builds are cached for the whole session (the builder's content hash makes a second
`builder build` of unchanged sources free), so every test below shares one compile.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TORCH_MINORS: tuple[str, ...] = tuple(
    sorted(tomllib.loads((REPO / "kernels.toml").read_text())["matrix"]["torch"],
           key=lambda v: tuple(int(p) for p in v.split("."))))
"""Every torch of the repository's matrix, oldest first (kernels.toml, not a second list)."""
RELEASES: dict[str, str] = tomllib.loads((REPO / "kernels.toml").read_text())["releases"]
"""Each kernel's semver release, as the repository declares it (the tags it publishes):
tests pin ``@v{RELEASES[name]}`` instead of a literal that the next release breaks."""
PUBLISHED = "KERNELHUB_E2E_PUBLISHED"
"""A workspace root (``build/``, ``hub/``) an earlier session built and published: a
session with it set uses it as it is (the seed tests on another Transformers release
reuse their parent session's hub instead of compiling everything again)."""


@dataclass(frozen=True)
class Workspace:
    """Where this session's builds, hub and caches live."""

    root: Path
    out: Path
    hub: Path

    def env(self, cache: str = "cache", **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            KERNELHUB_HUB=str(self.hub),
            KERNELHUB_CACHE=str(self.root / cache),
            KERNELHUB_CONFIG=str(self.root / "no-config.toml"),
            PYTHONUNBUFFERED="1",
            # This host's gcc/glibc are newer than manylinux_2_28: publishing its builds
            # to the test hub is deliberate (builder publish refuses them otherwise).
            KERNELHUB_ALLOW_HOST_ABI="1",
        )
        env.pop("KERNELHUB_TRUSTED_ORGS", None)
        env.update(extra)
        return env


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = REPO,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command as a user would; on an unexpected failure show everything it said."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
                    f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def builder(ws: Workspace, *args: str, project: Path = REPO, check: bool = True,
            cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "builder"), "--project", str(project), "--out", str(ws.out), *args],
               env=ws.env(), check=check, cwd=cwd)


FIXTURE_KERNEL = REPO / "builder/tests/fixtures/project/kernels-src/scale_stable"


def kernel_project(root: Path, kernel: str) -> Path:
    """A project at ``root`` holding only ``kernels-src/<kernel>`` of this repository, with
    the repository's kernels.toml (matrix, releases) narrowed to it."""
    shutil.copytree(REPO / "kernels-src" / kernel, root / "kernels-src" / kernel,
                    ignore=shutil.ignore_patterns("__pycache__"))
    text = (REPO / "kernels.toml").read_text()
    (root / "kernels.toml").write_text(
        re.sub(r"(?m)^kernels = \[.*\]$", f'kernels = ["{kernel}"]', text))
    return root


def make_project(root: Path, org: str) -> Path:
    """A one-kernel project (a stable-ABI kernel: ~1 s compiles) published under ``org``."""
    root.mkdir(parents=True)
    shutil.copytree(FIXTURE_KERNEL, root / "kernels-src/scale_stable")
    (root / "kernels.toml").write_text(
        'kernels = ["scale_stable"]\n'
        f'[hub]\norg = "{org}"\n'
        '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\nsystems = ["x86_64-linux"]\n'
        '[toolchain.torch]\n"2.13" = "torch==2.13.0"\n'
    )
    return root


def set_release(project: Path, version: int, release: str) -> None:
    """Edit build.toml as an author would: bump [general] version and release."""
    build_toml = project / "kernels-src/scale_stable/build.toml"
    lines = [line for line in build_toml.read_text().splitlines()
             if not line.startswith("release = ")]
    lines = [f'version = {version}\nrelease = "{release}"' if line.startswith("version = ")
             else line for line in lines]
    build_toml.write_text("\n".join(lines) + "\n")


def torch_python(minor: str) -> Path:
    """The builder's toolchain env for a torch minor: the interpreter a user of that torch has."""
    from kernelhub_builder.manifest import load_project
    from kernelhub_builder.plan.torch_env import ensure_torch_env

    project = load_project(REPO)
    return ensure_torch_env(minor, project.torch_pins.get(minor)).python


def run_python(python: Path, code: str, env: dict[str, str], check: bool = True
               ) -> subprocess.CompletedProcess[str]:
    return run([str(python), "-c", code], env=env, check=check)


def last_json(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])
