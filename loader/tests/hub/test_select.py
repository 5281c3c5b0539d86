"""open_hub: what each kind of target means; HfHub's endpoint and key."""

from __future__ import annotations

from pathlib import Path

from kernelhub.hub import HfHub, Hub, LocalHub, SearchPath, open_hub


def test_default_is_the_env_var_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELHUB_HUB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    default = open_hub()  # the default search path: the local hub, then hf
    assert isinstance(default, SearchPath)
    assert default.hubs[0].root == tmp_path / ".local/share/kernelhub/hub"

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


def test_hf_hub_reads_the_endpoint_when_made_and_keys_by_host(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080/")
    hub = HfHub()
    assert isinstance(hub, Hub)
    assert hub.endpoint == "http://mirror.example:8080"
    assert hub.key.startswith("hf-mirror.example-8080-")
    assert HfHub("https://huggingface.co").key.startswith("hf-huggingface.co-")
    assert hub.trusted_orgs() == frozenset()
