"""``builder check`` and the checks inside ``builder build`` / ``builder publish``, on real
builds of the fixture project: a stable-ABI kernel (``scale_stable``, one small compile)
and a pure-Python kernel (``relu_py``, no compiler), imported in real torch envs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernelhub.formats.metadata import read_metadata
from kernelhub_builder.check.variant import AbiPolicy, check_kernel
from kernelhub_builder.check.violation import (
    RULE_IMPORT,
    RULE_IMPORT_CHECK,
    RULE_MANYLINUX,
    RULE_OP_NAMESPACE,
    CheckFailed,
)
from kernelhub_builder.cli import main
from kernelhub_builder.compile.build import build_kernel
from kernelhub_builder.manifest import KernelManifest, Project, load_kernel, load_project
from kernelhub_builder.plan.matrix import filter_variants, plan_variants
from kernelhub_builder.ship import LocalPublisher
from kernelhub_builder.ship.publish import publish_kernel

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "project"
STABLE_213 = "torch-stable-abi213-cpu-x86_64-linux"
STABLE_213_CURRENT = "torch-stable-abi-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
"""The same build under its current name: publish writes both generations by default."""


@dataclass
class Built:
    project: Project
    out: Path

    def kernel(self, name: str) -> KernelManifest:
        return load_kernel(self.project.kernel_dir(name), self.project)

    def build(self, name: str, *patterns: str, abi: AbiPolicy = AbiPolicy.HOST) -> None:
        kernel = self.kernel(name)
        planned = filter_variants(plan_variants(self.project, kernel), list(patterns))
        build_kernel(self.project, kernel, planned, self.out, abi=abi)


def _copy(root: Path) -> Built:
    shutil.copytree(FIXTURE, root / "project", ignore=shutil.ignore_patterns("__pycache__"))
    return Built(load_project(root / "project"), root / "out")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """scale_stable (ABI 2.13) and relu_py, built — and so checked — once."""
    result = _copy(tmp_path_factory.mktemp("checked"))
    result.build("scale_stable", STABLE_213)
    result.build("relu_py")
    return result


def _host_abi_violations(built: Built) -> list[str]:
    """The too-new symbol versions of the stable build: none with a manylinux toolchain."""
    abi = read_metadata(built.out / "scale_stable" / STABLE_213).extra["abi"]
    return abi["too-new-versions"]


def test_built_variants_pass_and_import_registering_only_their_namespace(built: Built) -> None:
    reports = {r.variant: r for k in ("scale_stable", "relu_py")
               for r in check_kernel(built.project, built.kernel(k), built.out)}
    stable = reports[STABLE_213]
    vid = read_metadata(stable.path).id
    assert stable.ops == [f"{vid}::scale"]
    assert stable.skipped == []
    # Only the host toolchain's symbol versions may be reported, and only under host policy.
    assert {v.rule for v in stable.violations} <= {RULE_MANYLINUX}
    assert stable.fatal(AbiPolicy.HOST) == []
    assert reports["torch-cpu"].violations == [] and reports["torch-cpu"].ops == []


def test_build_records_the_abi_in_metadata(built: Built) -> None:
    abi = read_metadata(built.out / "scale_stable" / STABLE_213).extra["abi"]
    assert abi["policy"] == "host"
    assert abi["manylinux_2_28"] is (abi["too-new-versions"] == [])
    assert all(v.startswith(("GLIBC_", "GLIBCXX_", "CXXABI_", "GCC_"))
               for v in abi["too-new-versions"])


def test_strict_policy_fails_a_host_build_and_says_how_to_comply(built: Built) -> None:
    too_new = _host_abi_violations(built)
    if not too_new:  # built by a manylinux_2_28 toolchain: strict policy has nothing to say
        built.build("scale_stable", STABLE_213, abi=AbiPolicy.MANYLINUX_2_28)
        return
    with pytest.raises(CheckFailed) as failure:
        built.build("scale_stable", STABLE_213, abi=AbiPolicy.MANYLINUX_2_28)
    message = str(failure.value)
    assert all(version in message for version in too_new)
    assert "manylinux_2_28 toolchain" in message and "--allow-host-abi" in message
    assert (built.out / "scale_stable" / STABLE_213).is_dir(), "the build is still there"


def test_publish_refuses_a_host_build_unless_allowed(built: Built, tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    kernel = built.kernel("scale_stable")
    if _host_abi_violations(built):
        with pytest.raises(CheckFailed, match="--allow-host-abi"):
            publish_kernel(built.project, kernel, built.out, hub)
        assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").rglob("HEAD"))
    result = publish_kernel(built.project, kernel, built.out, hub, allow_host_abi=True)
    assert sorted(result.added) == sorted([STABLE_213, STABLE_213_CURRENT])


def test_check_command_reports_each_variant(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--project", str(built.project.root), "--out", str(built.out)]
    assert main([*base, "check", "--no-import-check"]) == 0
    out = capsys.readouterr().out
    assert f"scale_stable  {STABLE_213}" in out and "PASS  relu_py  torch-cpu" in out
    strict = main([*base, "check", "scale_stable", "--abi", "manylinux_2_28",
                   "--no-import-check"])
    captured = capsys.readouterr()
    if _host_abi_violations(built):
        assert strict == 1
        assert f"FAIL  scale_stable  {STABLE_213}" in captured.out
        assert "[manylinux_2_28]" in captured.out and "@GLIBC" in captured.out
    else:
        assert strict == 0


def _contents(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in directory.rglob("*") if p.is_file()}


BROKEN_PACKAGES = {
    "undeclared import": ("import numpy\n", RULE_IMPORT, "line {line}: import numpy"),
    "op in another namespace": (
        "ns = 'relu' + '_elsewhere'\n"
        "@torch.library.custom_op(ns + '::twice', mutates_args=())\n"
        "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n",
        RULE_OP_NAMESPACE, "relu_elsewhere::twice"),
    "import fails": ("raise RuntimeError('no device found')\n", RULE_IMPORT_CHECK, "import"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_PACKAGES))
def test_a_violation_fails_the_build_and_keeps_the_previous_one(
    case: str, tmp_path: Path
) -> None:
    work = _copy(tmp_path)
    work.build("relu_py")
    dest = work.out / "relu_py" / "torch-cpu"
    before = _contents(dest)
    init = work.kernel("relu_py").package_dir / "__init__.py"
    code, rule, detail = BROKEN_PACKAGES[case]
    lines = init.read_text().splitlines(keepends=True)
    init.write_text("".join(lines) + code)
    detail = detail.format(line=len(lines) + 1)

    with pytest.raises(CheckFailed) as failure:
        work.build("relu_py")
    assert [(v.rule, v.detail) for v in failure.value.violations] == [(rule, detail)]
    assert detail in str(failure.value)
    assert _contents(dest) == before
    assert sorted(p.name for p in (work.out / "relu_py").iterdir()) == ["torch-cpu"]
