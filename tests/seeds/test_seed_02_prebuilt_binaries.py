"""SEEDS 2 — prebuilt binaries from a hub, chosen at run time, fetched only when needed."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelhub import detect_system, select_variant
from kernelhub.api import resolve_kernel
from seeds.seedkit import kernels_in, pytorch


def _variants_in_cache(cache: Path) -> set[str]:
    return {p.parent.name for p in cache.rglob("metadata.json")}


def test_only_this_platforms_build_is_fetched_on_first_use(hub_env, model_dirs, monkeypatch, tmp_path):
    # A copy of the hub is a hub this process has never loaded from: nothing is memoized.
    shutil.copytree(hub_env.hub, tmp_path / "hub")
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "hub"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    model = pytorch(model_dirs["qwen3"])  # use_kernels=False: nothing may be fetched
    assert not _variants_in_cache(tmp_path / "cache")

    model.set_use_kernels(True)
    assert any("activation" in repo for repo in kernels_in(model).values())
    resolution = resolve_kernel("kernels-community/activation", 1)
    expected = select_variant(resolution.variants, detect_system()).chosen
    assert expected is not None
    assert expected in _variants_in_cache(tmp_path / "cache")
    assert len(_variants_in_cache(tmp_path / "cache") & set(resolution.variants)) == 1
