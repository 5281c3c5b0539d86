"""A search path of hubs: first hub that has the repository serves it, caches and messages
name that hub, a failing hub stops the search, offline mode names every hub searched."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.errors import HubError, KernelHubError, OfflineError, RepoNotFoundError, TrustError
from kernelhub.hub import HfHub, LocalHub, SearchPath, open_hub
from kernelhub.hub.calls import hub_name
from kernelhub.hub.select import hub_address
from kernelhub.load import pipeline
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/scale"


def _publish(root: Path, tmp_path: Path, value: int, repo_id: str = REPO) -> str:
    staged = tmp_path / "staging" / f"{root.name}-{value}" / "torch-universal"
    make_variant(staged, name="scale", init=f"VALUE = {value}\n")
    result = LocalPublisher(root).publish(repo_id, "v1", {"torch-universal": staged},
                                          tag="v1.0.0", message="release")
    assert result.commit is not None
    return result.commit


def _closed_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_words_make_a_path_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELHUB_HUB", f"{tmp_path / 'a'}, hf ,{tmp_path / 'b'}")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    path = open_hub()
    assert isinstance(path, SearchPath)
    kinds = [type(h.inner).__name__ for h in path.hubs]  # type: ignore[attr-defined]
    assert kinds == ["LocalHub", "HfHub", "LocalHub"]
    assert hub_name(path.hubs[1]) == "http://127.0.0.1:1"
    assert isinstance(open_hub(str(tmp_path / "a")), LocalHub)  # one word: that hub


def test_default_path_is_the_local_hub_then_hf(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.delenv("KERNELHUB_HUB", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = open_hub()
    assert isinstance(path, SearchPath)
    local, remote = (h.inner for h in path.hubs)  # type: ignore[attr-defined]
    assert isinstance(local, LocalHub) and local.root == tmp_path / ".local/share/kernelhub/hub"
    assert isinstance(remote, HfHub) and remote.endpoint == "https://huggingface.co"
    # Publishing and serving need one hub: the embedded one, never the public Hub unasked.
    assert hub_address(None).root == tmp_path / ".local/share/kernelhub/hub"


def test_config_file_path_and_env_replaces_it(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("KERNELHUB_HUB", raising=False)
    (tmp_path / "config.toml").write_text(f'[hub]\npath = ["{tmp_path / "x"}", "hf"]\n')
    assert isinstance(open_hub(), SearchPath)
    with pytest.raises(HubError, match="names several hubs"):
        hub_address(None)
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "y"))
    assert open_hub().root == tmp_path / "y"  # type: ignore[attr-defined]


def test_the_first_hub_that_has_it_serves_it_and_is_named(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _publish(second, tmp_path, 2)
    path = f"{first},{second}"
    assert api.get_kernel(REPO, 1, hub=path).VALUE == 2
    assert hub_name(api.resolve_kernel(REPO, 1, hub=path).hub) == str(second)

    # The same id published to the earlier hub shadows the later one, whatever versions.
    pipeline._memo.clear()
    _publish(first, tmp_path, 1)
    assert api.get_kernel(REPO, 1, hub=path).VALUE == 1
    # Caches are keyed by the serving hub: a load through the path is that hub's entry.
    assert api.locate_kernel(REPO, 1, hub=path) == api.locate_kernel(REPO, 1, hub=str(first))


def test_missing_everywhere_names_every_hub_tried(tmp_path: Path) -> None:
    path = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    with pytest.raises(RepoNotFoundError) as err:
        api.get_kernel(REPO, 1, hub=path)
    message = str(err.value)
    assert "\n" not in message
    assert str(tmp_path / "a") in message and str(tmp_path / "b") in message
    assert not api.has_kernel(REPO, 1, hub=path)


def test_a_failing_hub_stops_the_search(tmp_path: Path) -> None:
    """An unreachable hub is not passed over: the next hub's same-named repository may be
    someone else's code. The error says where the search stopped and what came before."""
    later = tmp_path / "later"
    _publish(later, tmp_path, 3)
    endpoint = _closed_endpoint()
    with pytest.raises(HubError) as err:
        api.get_kernel(REPO, 1, hub=f"{tmp_path / 'empty'},{endpoint},{later}")
    message = str(err.value)
    assert endpoint in message and "stopped there" in message and str(tmp_path / "empty") in message
    assert "\n" not in message


def test_offline_uses_the_cache_of_the_hub_that_served(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    later = tmp_path / "later"
    _publish(later, tmp_path, 4)
    path = f"{_closed_endpoint()},{later}"
    assert api.get_kernel(REPO, 1, hub=str(later)).VALUE == 4
    pipeline._memo.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert api.get_kernel(REPO, 1, hub=path).VALUE == 4  # the unreachable hub is never asked
    with pytest.raises(OfflineError) as err:
        api.get_kernel("kernels-community/other", 1, hub=path)
    message = str(err.value)
    assert "\n" not in message and "http://127.0.0.1:" in message and str(later) in message


def test_a_hubs_declared_trust_covers_only_what_it_serves(tmp_path: Path) -> None:
    vouching, plain = tmp_path / "vouching", tmp_path / "plain"
    vouching.mkdir()
    (vouching / "kernelhub.toml").write_text('[trust]\norgs = ["team"]\n')
    _publish(plain, tmp_path, 5, "team/scale")
    with pytest.raises(TrustError):
        api.get_kernel("team/scale", 1, hub=f"{vouching},{plain}")
    _publish(vouching, tmp_path, 6, "team/scale")
    assert api.get_kernel("team/scale", 1, hub=f"{vouching},{plain}").VALUE == 6


def test_nothing_set_and_offline_is_one_line_naming_the_hubs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import kernelhub
    from kernelhub import ecosystem

    for var in ("KERNELHUB_HUB", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for load in (lambda: kernelhub.get_kernel(REPO, 1),
                 lambda: ecosystem.get_kernel(REPO, version=1)):
        with pytest.raises(OfflineError) as err:
            load()
        message = str(err.value)
        assert "\n" not in message
        assert str(tmp_path / ".local/share/kernelhub/hub") in message
        assert "https://huggingface.co" in message and "HF_HUB_OFFLINE" in message


def test_info_and_variants_say_which_hub_served(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kernelhub.cli import main

    first, second = tmp_path / "first", tmp_path / "second"
    _publish(second, tmp_path, 2)
    path = f"{first},{second}"
    assert main(["info", REPO, "--hub", path]) == 0
    assert f"hub:            {second}" in capsys.readouterr().out
    assert main(["variants", REPO, "--hub", path]) == 0
    assert f"hub:     {second}" in capsys.readouterr().out


def test_a_lock_records_its_hub_and_a_locked_load_reads_the_pin_there(tmp_path: Path) -> None:
    """Locked when only the second hub had the repository; the first one has a repository
    of that name now. The pin is read from the hub it was locked from, not the first."""
    from kernelhub.lock import LockEntry, parse_lock

    first, second = tmp_path / "first", tmp_path / "second"
    commit = _publish(second, tmp_path, 2)
    _publish(first, tmp_path, 1)
    entry = LockEntry(REPO, commit, hub=str(second))
    assert parse_lock(json.dumps([entry.to_json()]).encode(), "kernels.lock")[REPO].hub == str(second)
    assert api.load_locked_entry(entry, hub=f"{first},{second}").VALUE == 2
    # A hub that is not on the path is never added to it.
    with pytest.raises(KernelHubError):
        api.load_locked_entry(LockEntry(REPO, commit, hub=str(tmp_path / "elsewhere")),
                              hub=f"{first},{tmp_path / 'empty'}")
