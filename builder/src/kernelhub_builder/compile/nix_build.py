"""The builder's entry points for the Nix flake: one variant per derivation.

``flake.nix`` gives each derivation only what that variant's id hashes (kernels.toml,
the kernel's build files, the builder's own source), read-only in the Nix store, and
runs ``python -m kernelhub_builder.compile.nix_build <command>``:

- ``build``: the same :func:`~.build.build_variant` as ``builder build``, in a scratch
  project, copied to ``$out`` — so ids and file digests equal ``builder build``'s.
- ``stamp``: a copy of a built variant whose ``provenance`` names the flake's commit.
  The store copy of a checkout has no ``.git``; the commit is passed in instead, in a
  separate step so that a new commit re-stamps (a copy) but recompiles nothing.
- ``check``: ``builder check`` and the kernel's tests against one built variant.
- ``adopt-env``: the hermetic toolchain's Python (torch from nixpkgs) becomes the
  builder's torch environment for one torch minor (no pip, no network).
- ``host-setup`` (run by ci/setup-nix, outside Nix): the machine's host toolchain for the
  host derivations (:mod:`.nix_host`).
- ``python-key``: the name of the builder Python that a checkout's host builds use.

Errors are one line on stderr and exit status 1, as in the ``builder`` CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import METADATA_FILE, verify_variant
from kernelhub.formats.provenance import kernel_git_status
from kernelhub.formats.variants import parse_variant

from ..check.kernel_tests import run_kernel_tests
from ..check.variant import AbiPolicy, check_variant, fatal_violations, format_violations
from ..errors import NixBuildError
from ..layout import built_variants, kernel_dir
from ..manifest import PROJECT_FILE, KernelManifest, Project, load_project
from ..plan.matrix import plan_variants
from ..plan.torch_env import adopt_python
from .build import build_variant
from .nix_host import python_key, set_up_host


def scratch_project(project_file: Path, entry: str, kernel_src: Path, where: Path) -> Project:
    """A project dir holding kernels.toml and only ``entry``'s tree (linked, not copied)."""
    root = where / "project"
    root.mkdir(parents=True)
    shutil.copyfile(project_file, root / PROJECT_FILE)
    link = root / entry if "/" in entry else root / "kernels-src" / entry
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(kernel_src, target_is_directory=True)
    return load_project(root / PROJECT_FILE, only=[entry])


def _kernel(project: Project) -> KernelManifest:
    from ..manifest import load_kernel

    (entry,) = project.kernels
    return load_kernel(project.kernel_dir(entry), project)


def _copy_variant(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def build(project_file: Path, entry: str, kernel_src: Path, variant_name: str, out: Path
          ) -> str:
    """Build one variant into ``out``; returns its id."""
    with tempfile.TemporaryDirectory(prefix="kernelhub-nix-") as tmp:
        project = scratch_project(project_file, entry, kernel_src, Path(tmp))
        kernel = _kernel(project)
        plan = {p.name: p for p in plan_variants(project, kernel)}
        if variant_name not in plan:
            raise NixBuildError(f"{kernel.name} has no variant {variant_name}; it has: "
                                f"{', '.join(plan) or 'none'}")
        planned = plan[variant_name]
        if not planned.buildable:
            raise NixBuildError(f"{kernel.name} {variant_name} cannot be built on this host: "
                                f"{planned.reason}")
        result = build_variant(project, kernel, parse_variant(variant_name), Path(tmp) / "build")
        _copy_variant(result.path, out)
        return result.variant_id


def stamp(src: Path, out: Path, commit: str | None, dirty: bool) -> None:
    """Copy a built variant, recording the source commit in its provenance.

    metadata.json is outside its own digest list, so the other files stay verified.
    """
    verify_variant(src)
    _copy_variant(src, out)
    out.chmod(0o755)
    path = out / METADATA_FILE
    data = json.loads(path.read_text())
    provenance = data.setdefault("provenance", {})
    kernel = kernel_git_status(commit, dirty)
    if kernel is None:
        provenance.pop("kernel", None)
    else:
        provenance["kernel"] = kernel
    path.chmod(0o644)
    path.write_text(json.dumps(data, indent=2) + "\n")


def check(project_file: Path, entry: str, kernel_src: Path, variant_name: str,
          variant_dir: Path, abi: AbiPolicy) -> list[str]:
    """``builder check`` then ``builder test`` on one built variant; the report lines."""
    with tempfile.TemporaryDirectory(prefix="kernelhub-nix-check-") as tmp:
        project = scratch_project(project_file, entry, kernel_src, Path(tmp))
        kernel = _kernel(project)
        out_dir = Path(tmp) / "build"
        builds = kernel_dir(out_dir, project, kernel)
        builds.mkdir(parents=True)
        (builds / variant_name).symlink_to(variant_dir)
        return _check_in(project, kernel, out_dir, abi)


def _check_in(project: Project, kernel: KernelManifest, out_dir: Path, abi: AbiPolicy
              ) -> list[str]:

    lines = []
    ((variant, path),) = built_variants(out_dir, project, kernel)
    report = check_variant(project, kernel, variant, path, import_check=True)
    fatal = fatal_violations(report.violations, abi)
    lines.append(f"{'FAIL' if fatal else 'PASS'}  check  {kernel.name}  {variant.name}")
    if report.violations:
        lines.append(format_violations(report.violations))
    if fatal:
        raise NixBuildError("\n".join(lines))
    runs, skipped = run_kernel_tests(project, kernel, out_dir)
    lines += [f"SKIP  test  {kernel.name}  {s.variant}: {s.reason}" for s in skipped]
    for run in runs:
        lines.append(f"{'PASS' if run.passed else 'FAIL'}  test  {kernel.name}  {run.variant}"
                     f"  (torch {run.torch})")
        if not run.passed:
            raise NixBuildError("\n".join([*lines, run.output]))
    return lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kernelhub_builder.compile.nix_build")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "check"):
        sub = commands.add_parser(name)
        sub.add_argument("--project-file", type=Path, required=True)
        sub.add_argument("--entry", required=True, help="the kernel's entry in kernels.toml")
        sub.add_argument("--kernel-src", type=Path, required=True)
        sub.add_argument("--variant", required=True)
    commands.choices["build"].add_argument("--out", type=Path, required=True)
    commands.choices["check"].add_argument("--variant-dir", type=Path, required=True)
    commands.choices["check"].add_argument("--abi", type=AbiPolicy, default=AbiPolicy.HOST)
    adopt = commands.add_parser("adopt-env")
    adopt.add_argument("--project-file", type=Path, required=True)
    adopt.add_argument("--minor", required=True)
    adopt.add_argument("--python", type=Path, required=True)
    host = commands.add_parser("host-setup")
    host.add_argument("--project-file", type=Path, required=True)
    host.add_argument("--env-file", type=Path, default=None,
                      help="default: where this user's Nix builds look (nix_host.host_env_file)")
    host.add_argument("--torch", action="append", default=[], metavar="MINOR",
                      help="make only this torch minor's env (repeatable; default: all)")
    key = commands.add_parser("python-key")
    key.add_argument("--builder-pyproject", type=Path, required=True)
    key.add_argument("--loader-pyproject", type=Path, required=True)
    stamp_cmd = commands.add_parser("stamp")
    stamp_cmd.add_argument("--src", type=Path, required=True)
    stamp_cmd.add_argument("--out", type=Path, required=True)
    stamp_cmd.add_argument("--commit", default="")
    stamp_cmd.add_argument("--dirty", choices=("0", "1"), required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            vid = build(args.project_file, args.entry, args.kernel_src, args.variant, args.out)
            print(f"built {args.variant} as {vid}")
        elif args.command == "adopt-env":
            pins = load_project(args.project_file, only=[]).torch_pins
            env = adopt_python(args.minor, pins.get(args.minor), args.python)
            print(f"torch {args.minor} environment: {env.python} (torch {env.torch_version})")
        elif args.command == "host-setup":
            print("\n".join(set_up_host(args.project_file, args.env_file, args.torch)))
        elif args.command == "python-key":
            print(python_key(args.builder_pyproject, args.loader_pyproject))
        elif args.command == "stamp":
            stamp(args.src, args.out, args.commit.removesuffix("-dirty") or None,
                  args.dirty == "1")
        else:
            print("\n".join(check(args.project_file, args.entry, args.kernel_src,
                                  args.variant, args.variant_dir, args.abi)))
    except KernelHubError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
