"""Fixtures of the layers API tests: the toy kernel on a real LocalHub, a clean mapping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub.layer import clear_layer_cache
from kernelhub.layer.mapping import _MAPPING
from kh_toy_layers import ToyHub, publish_toy_kernel


@pytest.fixture(scope="module")
def toy_hub(tmp_path_factory: pytest.TempPathFactory) -> ToyHub:
    return publish_toy_kernel(tmp_path_factory.mktemp("layer-hub"))


@pytest.fixture
def hub_env(toy_hub: ToyHub, monkeypatch: pytest.MonkeyPatch) -> ToyHub:
    """Make the toy hub the default hub, as KERNELHUB_HUB does for a user."""
    monkeypatch.setenv("KERNELHUB_HUB", str(toy_hub.root))
    return toy_hub


@pytest.fixture(autouse=True)
def fresh_mapping() -> Iterator[None]:
    """Each test starts with an empty mapping and no loaded layers, and leaves none."""
    token = _MAPPING.set({})
    clear_layer_cache()
    yield
    _MAPPING.reset(token)
    clear_layer_cache()


@pytest.fixture(scope="session")
def autotune_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The autotune tests' kernel (kh_autotune_toy), published once to a LocalHub."""
    from kh_autotune_toy import publish_autotune_toy

    return publish_autotune_toy(tmp_path_factory.mktemp("autotune-hub"))


@pytest.fixture
def autotune_env(autotune_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[Path]:
    """That hub, an empty cache (yielded), and no decision held by this process."""
    from kernelhub.layer.autotune import clear_decisions

    monkeypatch.setenv("KERNELHUB_HUB", str(autotune_hub))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    clear_decisions()
    yield tmp_path / "cache"
    clear_decisions()
