"""A kernel's dependencies are judged by the caller's own trust, never by the parent's.

The reported hole (issue 33, high): ``trust_remote_code=["kernels-community/parent"]``
vouched for the parent only, but the allow-list was turned into ``True`` and handed to
every dependency, so ``evil-org/dep`` — declared by the parent in ``kernel-depends``,
neither listed nor trusted — was loaded and its code ran. Each dependency now meets the
same allow-list and the same trusted organisations as a direct load of it would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import ecosystem, get_kernel
from kernelhub.deps import DependencyError
from kernelhub.layer.repos import LayerRepository
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)
PARENT = "kernels-community/parent"
UNTRUSTED_PARENT = "acme/parent"
DEP = "evil-org/dep"


def _publish(hub: LocalPublisher, tmp: Path, repo: str, init: str,
             depends: list[dict[str, object]]) -> None:
    staging = tmp / "staging" / repo.replace("/", "--") / HOST
    make_variant(staging, name=repo.split("/")[1], init=init, kernel_depends=depends)
    hub.publish(repo, "v1", {HOST: staging}, tag="v1.0.0", message="r")


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """The file the dependency's code writes when it runs: its existence is the breach."""
    return tmp_path / "evil-dep-ran"


@pytest.fixture
def hub(tmp_path: Path, ran: Path) -> LocalPublisher:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, DEP, f"open({str(ran)!r}, 'w').close()\nVALUE = 'dep'\n", [])
    for parent in (PARENT, UNTRUSTED_PARENT):
        _publish(hub, tmp_path, parent, "VALUE = 'parent'\n",
                 [{"repo-id": DEP, "version": 1}])
    return hub


@pytest.mark.parametrize("parent", [PARENT, UNTRUSTED_PARENT])
def test_an_allow_list_naming_the_parent_does_not_trust_its_dependency(
        hub: LocalPublisher, ran: Path, parent: str) -> None:
    with pytest.raises(DependencyError,
                       match=f"-> {DEP}@v1: refusing to load {DEP}: .*'evil-org' is not trusted"):
        get_kernel(parent, 1, trust_remote_code=[parent], hub=hub)
    assert not ran.exists()


def test_the_ecosystem_loader_s_allow_list_is_judged_per_dependency(
        hub: LocalPublisher, ran: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHUB_HUB", str(hub.root))
    with pytest.raises(DependencyError, match=DEP):
        ecosystem.get_kernel(PARENT, version=1, trust_remote_code=[PARENT])
    assert not ran.exists()
    module = ecosystem.get_kernel(PARENT, version=1, trust_remote_code=[PARENT, DEP])
    assert module.VALUE == "parent"
    assert ran.exists()


def test_a_layer_repository_s_allow_list_is_judged_per_dependency(
        hub: LocalPublisher, ran: Path) -> None:
    repo = LayerRepository(UNTRUSTED_PARENT, layer_name="L", version=1,
                           trust_remote_code=[UNTRUSTED_PARENT], hub=hub)
    with pytest.raises(DependencyError, match=DEP):
        repo._kernel()
    assert not ran.exists()


def test_without_a_list_the_dependency_is_refused_as_before(hub: LocalPublisher,
                                                            ran: Path) -> None:
    with pytest.raises(DependencyError, match=DEP):
        get_kernel(PARENT, 1, hub=hub)
    assert not ran.exists()


def test_listing_the_dependency_too_or_trusting_all_loads_the_tree(hub: LocalPublisher,
                                                                  ran: Path) -> None:
    assert get_kernel(PARENT, 1, trust_remote_code=[PARENT, DEP], hub=hub).VALUE == "parent"
    assert ran.exists()
    ran.unlink()
    assert get_kernel(UNTRUSTED_PARENT, 1, trust_remote_code=True, hub=hub).VALUE == "parent"


def test_a_dependency_from_a_trusted_org_needs_no_listing(
        hub: LocalPublisher, ran: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "evil-org")
    assert get_kernel(UNTRUSTED_PARENT, 1, trust_remote_code=[UNTRUSTED_PARENT],
                      hub=hub).VALUE == "parent"
    assert ran.exists()
