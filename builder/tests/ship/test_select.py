"""open_publisher: the same target words as open_hub, and hubs stay read-only."""

from __future__ import annotations

from kernelhub.hub import Hub, open_hub
from kernelhub_builder.ship import HubPublisher, LocalPublisher, open_publisher
from kernelhub_builder.ship.hf import HfPublisher


def test_publishers_take_the_same_words_and_hubs_stay_read_only(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example")
    monkeypatch.setenv("HOME", str(tmp_path))
    local = open_publisher("~/hub")
    assert isinstance(local, LocalPublisher) and local.root == tmp_path / "hub"
    remote = open_publisher("hf")
    assert isinstance(remote, HfPublisher) and remote.endpoint == "https://hub.example"
    assert open_publisher(local) is local
    # What the loader opens has no way to write: reading and publishing are two protocols.
    assert not isinstance(open_hub("~/hub"), HubPublisher)
    assert not isinstance(open_hub("hf"), HubPublisher)
    assert isinstance(local, Hub) and isinstance(remote, Hub)
