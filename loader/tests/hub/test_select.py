"""open_hub and open_publisher: what each kind of target means."""

from __future__ import annotations

from pathlib import Path

from kernelhub.hub import HfHub, Hub, LocalHub, open_hub
from kernelhub_builder.ship import HubPublisher, LocalPublisher, open_publisher
from kernelhub_builder.ship.hf import HfPublisher


def test_default_is_the_env_var_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELHUB_HUB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    default = open_hub()
    assert isinstance(default, LocalHub)
    assert default.root == tmp_path / ".local/share/kernelhub/hub"

    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "team-hub"))
    assert open_hub().root == tmp_path / "team-hub"
    monkeypatch.setenv("KERNELHUB_HUB", "http://127.0.0.1:9999")
    assert open_hub().endpoint == "http://127.0.0.1:9999"


def test_strings_urls_paths_and_instances(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert isinstance(open_hub("hf"), HfHub) and open_hub("hf").endpoint == "https://hub.example"
    assert open_hub("https://other.example").endpoint == "https://other.example"
    assert open_hub("~/hub").root == tmp_path / "hub"
    assert open_hub(Path("/srv/hub")).root == Path("/srv/hub")
    hub = LocalHub(tmp_path)
    assert open_hub(hub) is hub


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
