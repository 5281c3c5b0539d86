"""The optional Hub members, declared as protocols of their own (kernelhub.hub.base): every
hub class still counts as a Hub, each has the capabilities it implements and no other, and
the guard every load wraps a hub in has exactly its hub's — read the way Python 3.12's
``isinstance`` on a protocol reads them (statically, never through ``__getattr__``)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from kernelhub.errors import HubError
from kernelhub.hub.base import HashListingHub, Hub, RemoteHub, TrustAskingHub, TypedReposHub
from kernelhub.hub.calls import guard
from kernelhub.hub.hashes import hub_hashes
from kernelhub.hub.hf import HfHub
from kernelhub.hub.local import LocalHub
from kernelhub.hub.search import SearchPath
from kernelhub.load.resolve import recent_refs
from kernelhub.signing.trust import is_trusted
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import DirHub

CAPABILITIES = {HashListingHub: "file_hashes", RemoteHub: "remote",
                TrustAskingHub: "trusts", TypedReposHub: "type_of"}


def _hubs(tmp_path: Path) -> dict[str, tuple[object, set[type]]]:
    """Each hub class the loader, the builder, serve's clients and the tests use, with the
    capabilities it implements."""
    local = LocalHub(tmp_path / "local")
    return {
        "LocalHub": (local, {HashListingHub}),
        "LocalPublisher": (LocalPublisher(tmp_path / "published"), {HashListingHub}),
        "HfHub": (HfHub("http://127.0.0.1:9", token=False),
                  {HashListingHub, RemoteHub, TrustAskingHub, TypedReposHub}),
        "SearchPath": (SearchPath([local]), {RemoteHub}),
        "DirHub": (DirHub(tmp_path / "dir"), set()),
    }


@pytest.mark.parametrize("name", ["LocalHub", "LocalPublisher", "HfHub", "SearchPath",
                                  "DirHub"])
def test_every_hub_class_is_a_hub_with_its_own_capabilities(tmp_path: Path, name: str) -> None:
    hub, expected = _hubs(tmp_path)[name]
    for each in (hub, guard(hub)):  # type: ignore[arg-type]
        assert isinstance(each, Hub)
        assert {cap for cap in CAPABILITIES if isinstance(each, cap)} == expected
        static = {cap for cap, member in CAPABILITIES.items()
                  if inspect.getattr_static(each, member, None) is not None}
        assert static == expected, f"guard({name}) hides or invents a capability"


class _FailingHashes(DirHub):
    """A hub whose content-hash listing fails the way a broken server's client does."""

    def file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        raise RuntimeError("unexpected response shape")


def test_the_guard_reports_a_failed_hash_listing_as_one_line(tmp_path: Path) -> None:
    with pytest.raises(HubError) as error:
        hub_hashes(guard(_FailingHashes(tmp_path)), "org/k", "0" * 40, "torch-cpu")
    assert "\n" not in str(error.value)
    assert "listing the content hashes of torch-cpu of org/k" in str(error.value)


def test_a_hub_without_the_capability_is_answered_without_it(tmp_path: Path) -> None:
    hub = guard(DirHub(tmp_path))
    assert hub_hashes(hub, "org/k", "0" * 40, "torch-cpu") is None
    assert recent_refs("org/k", hub, None) is None  # type: ignore[arg-type]  # never read
    assert is_trusted("stranger/k", hub) is False
