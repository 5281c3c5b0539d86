"""Fixtures of the layers API tests: the toy kernel on a real LocalHub, a clean mapping."""

from __future__ import annotations

from collections.abc import Iterator

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
