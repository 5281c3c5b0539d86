"""Refs a Hub-API server sent answer later loads for ``KERNELHUB_REFS_TTL`` seconds.

* A warm ``version=N`` load inside the TTL sends no request; with the TTL at 0 it asks for
  the refs again (and nothing else: the variants at a commit are cached for good).
* Inside the TTL a release published to the same branch is not seen yet (the documented
  stale window); a pinned load of it is exact, and a spec the cached refs cannot answer
  (a new major) is asked of the server, never failed.
* A bad ``KERNELHUB_REFS_TTL`` is one typed line.

The server is ``kernelhub serve`` (tests/hub_api_served.py); releases are published through
HfPublisher.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from kernelhub import api
from kernelhub.errors import KernelHubError
from kernelhub.load import pipeline
from kernelhub_builder.ship.hf import HfPublisher
from kh_doubles import make_variant

REPO_ID = "acme/ttl"
VARIANT = "torch-universal"
pytestmark = pytest.mark.usefixtures("hub_api_client")


def publish(server: ServedHub, staging: Path, branch: str, version: str,
            value: int) -> None:
    staged = staging / version / VARIANT
    make_variant(staged, name="ttl", init=f"VALUE = {value}\n", backend="universal")
    HfPublisher(server.url, token=WRITE_TOKEN).publish(
        REPO_ID, branch, {VARIANT: staged}, tag=f"v{version}", message=version)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedHub]:
    with hub_api_server(tmp_path / "server") as running:
        publish(running, tmp_path / "staged", "v1", "1.0.0", 1)
        monkeypatch.setenv("KERNELHUB_HUB", running.url)
        monkeypatch.delenv("KERNELHUB_REFS_TTL", raising=False)
        yield running


def load_value(version: int | None = None, revision: str | None = None) -> int:
    """A load as a fresh process makes it: nothing remembered but the cache."""
    pipeline._memo.clear()
    value = api.get_kernel(REPO_ID, version, revision).VALUE
    assert isinstance(value, int)
    return value


def loaded_commit(version: int) -> str:
    return api.locate_kernel(REPO_ID, version).parent.name


def requests_during(server: ServedHub, load: int | None = None) -> list[str]:
    seen = len(server.requests)
    load_value(load if load is not None else 1)
    return server.requests[seen:]


def test_a_warm_versioned_load_inside_the_ttl_asks_nothing(
    server: ServedHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = requests_during(server)
    assert any(r.endswith(f"/api/kernels/{REPO_ID}/refs") for r in cold), cold

    assert requests_during(server) == []

    monkeypatch.setenv("KERNELHUB_REFS_TTL", "0")
    assert requests_during(server) == [f"GET /api/kernels/{REPO_ID}/refs"]


def test_inside_the_ttl_a_new_release_of_the_branch_is_seen_only_when_asked_for(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_value(1) == 1
    old = loaded_commit(1)
    publish(server, tmp_path / "staged", "v1", "1.1.0", 11)
    publish(server, tmp_path / "staged", "v2", "2.0.0", 2)

    # Stale inside the TTL: the branch head seen at the first load.
    assert load_value(1) == 1
    assert loaded_commit(1) == old
    # A release the cached refs do not know is asked for, never refused.
    assert load_value(2) == 2
    # That answer refreshed the cached refs: v1's new head is seen now.
    assert load_value(1) == 11
    new = loaded_commit(1)
    assert new != old
    # A pinned load is exact whatever the refs say.
    assert load_value(revision=old) == 1

    monkeypatch.setenv("KERNELHUB_REFS_TTL", "0")
    assert load_value(1) == 11


def test_refs_older_than_the_ttl_are_asked_again(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_value(1) == 1
    publish(server, tmp_path / "staged", "v1", "1.1.0", 11)
    monkeypatch.setenv("KERNELHUB_REFS_TTL", "3600")
    assert load_value(1) == 1
    time.sleep(0.2)
    monkeypatch.setenv("KERNELHUB_REFS_TTL", "0.1")  # the refs seen are older than that now
    assert load_value(1) == 11


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_a_bad_ttl_is_one_typed_line(
    server: ServedHub, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KERNELHUB_REFS_TTL", value)
    with pytest.raises(KernelHubError, match=r"KERNELHUB_REFS_TTL=.* is not a number of "
                                             r"seconds; set it to 0") as error:
        load_value(1)
    assert "\n" not in str(error.value)
