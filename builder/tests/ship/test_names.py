"""One build, published under the ecosystem's two generations of variant names.

The stable-ABI fixture kernel ``scale_stable`` (one CPU build, a second to compile) is
built once; each test publishes it to a LocalHub of its own with a naming setting.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernelhub.formats.metadata import verify_variant
from kernelhub.formats.variants import parse_variant
from kernelhub_builder.compile.build import build_kernel
from kernelhub_builder.errors import ManifestError
from kernelhub_builder.manifest import (
    KernelManifest,
    Project,
    VariantNames,
    load_kernel,
    load_project,
)
from kernelhub_builder.plan.matrix import filter_variants, plan_variants
from kernelhub_builder.ship import LocalPublisher
from kernelhub_builder.ship.names import published_names
from kernelhub_builder.ship.publish import publish_kernel

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "project"
LEGACY = "torch-stable-abi213-cpu-x86_64-linux"
CURRENT = "torch-stable-abi-2.13-cpu-cpython-3.9-abi3-x86_64-linux"


@dataclass
class Built:
    project: Project
    kernel: KernelManifest
    out: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("names")
    shutil.copytree(FIXTURE, root / "project")
    project = load_project(root / "project")
    kernel = load_kernel(project.kernel_dir("scale_stable"), project)
    planned = filter_variants(plan_variants(project, kernel), [LEGACY])
    build_kernel(project, kernel, planned, root / "out")
    return Built(project, kernel, root / "out")


@pytest.mark.parametrize(("names", "expected"), [
    (VariantNames.BOTH, [CURRENT, LEGACY]),
    (VariantNames.CURRENT, [CURRENT]),
    (VariantNames.LEGACY, [LEGACY]),
])
def test_names_of_one_build(names: VariantNames, expected: list[str]) -> None:
    assert published_names(parse_variant(LEGACY), names) == expected
    assert parse_variant(expected[0]).name == expected[0]  # the loader's parser reads it back


def test_a_name_both_generations_spell_alike_is_published_once() -> None:
    assert published_names(parse_variant("torch-cpu"), VariantNames.BOTH) == ["torch-cpu"]
    assert published_names(parse_variant("torch213-cxx11-cu130-x86_64-linux"),
                           VariantNames.BOTH) == [
        "torch-2.13-cuda-13.0-cpython-3.9-abi3-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux"]


def test_by_default_the_hub_gets_both_names_of_the_same_bytes(built: Built,
                                                              tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    result = publish_kernel(built.project, built.kernel, built.out, hub, allow_host_abi=True)
    assert result.added == [CURRENT, LEGACY]
    repo = "kernelhub-tests/scale_stable"
    assert hub.list_variants(repo, result.commit) == sorted([CURRENT, LEGACY])
    fetched = {}
    for name in (CURRENT, LEGACY):
        (tmp_path / name).mkdir()
        hub.fetch_variant(repo, result.commit, name, tmp_path / name)
        fetched[name] = verify_variant(tmp_path / name)
    assert fetched[CURRENT] == fetched[LEGACY]  # one build, two names
    assert (built.out / "scale_stable" / LEGACY).is_dir()  # the build dir keeps its name
    assert not (built.out / "scale_stable" / CURRENT).exists()


def test_the_setting_and_the_option(built: Built, tmp_path: Path) -> None:
    legacy_only = LocalPublisher(tmp_path / "legacy")
    result = publish_kernel(built.project, built.kernel, built.out, legacy_only,
                            allow_host_abi=True, names=VariantNames.LEGACY)
    assert result.added == [LEGACY]
    toml = built.project.root / "kernels.toml"
    toml.write_text(toml.read_text().replace('[hub]\n', '[hub]\nvariant-names = "current"\n'))
    try:
        project = load_project(built.project.root)
        assert project.variant_names is VariantNames.CURRENT
        current_only = LocalPublisher(tmp_path / "current")
        result = publish_kernel(project, built.kernel, built.out, current_only,
                                allow_host_abi=True)
        assert result.added == [CURRENT]
    finally:
        toml.write_text(toml.read_text().replace('variant-names = "current"\n', ""))


def test_an_unknown_setting_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kernels.toml").write_text('kernels = []\n[hub]\nvariant-names = "newest"\n')
    with pytest.raises(ManifestError) as info:
        load_project(tmp_path)
    assert info.value.key == "hub.variant-names"
    assert "'newest': allowed are both, current, legacy" in str(info.value)
