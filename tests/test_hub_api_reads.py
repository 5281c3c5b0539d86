"""Our loader reads a Hub-API server's kernel repositories (``/api/kernels/…``), the type
the Hub grew for kernels and the ecosystem's loader asks for, and still reads servers that
have only models (olah, in loader/tests/hub/test_hf_olah.py; here ``kernelhub serve``
answering as a server without the kernel type).

The server is ``kernelhub serve`` (tests/hub_api_served.py); what it holds is published
through HfPublisher, so reads and writes meet over the real API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kernelhub
import pytest
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from kernelhub.errors import RepoNotFoundError
from kernelhub.hub.hf import HfHub
from kernelhub_builder.ship.hf import HfPublisher
from kh_doubles import make_variant

REPO_ID = "acme/typed"
pytestmark = pytest.mark.usefixtures("hub_api_client")
VARIANT = "torch-universal"


def serve(tmp_path: Path, *, kernel_type: bool) -> Iterator[ServedHub]:
    with hub_api_server(tmp_path / "server", kernel_type=kernel_type) as server:
        staged = tmp_path / "staged" / VARIANT
        make_variant(staged, name="typed", init="VALUE = 7\n", backend="universal")
        HfPublisher(server.url, token=WRITE_TOKEN, allow_model_repo=not kernel_type).publish(
            REPO_ID, "v1", {VARIANT: staged}, tag="v1.0.0", message="1.0.0")
        yield server


@pytest.fixture
def kernel_server(tmp_path: Path) -> Iterator[ServedHub]:
    yield from serve(tmp_path, kernel_type=True)


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[ServedHub]:
    yield from serve(tmp_path, kernel_type=False)


def test_a_kernel_repository_loads_through_the_kernel_api(
    kernel_server: ServedHub,
) -> None:
    assert kernel_server.repo_path(REPO_ID).is_dir()
    seen = len(kernel_server.requests)

    module = kernelhub.get_kernel(REPO_ID, version=1, hub=kernel_server.url)

    assert module.VALUE == 7
    reads = kernel_server.requests[seen:]
    # Refs, the variant list and the download all went to the kernel type's endpoints.
    assert any(r.endswith(f"/api/kernels/{REPO_ID}/refs") for r in reads), reads
    assert any(f"/kernels/{REPO_ID}/resolve/" in r for r in reads), reads
    assert not [r for r in reads if "/api/models/" in r or r.startswith(f"GET /{REPO_ID}/")]


def test_the_hub_reports_the_kernel_repositorys_content_hashes(
    kernel_server: ServedHub,
) -> None:
    hub = HfHub(kernel_server.url, token=False)
    commit = hub.list_refs(REPO_ID).branches["v1"]
    assert hub.list_variants(REPO_ID, commit) == [VARIANT]
    hashes = hub.file_hashes(REPO_ID, commit, VARIANT)
    assert set(hashes) == {"__init__.py", "metadata.json"}
    assert all(h.startswith("git:") for h in hashes.values())


def test_a_model_only_server_is_read_as_models_and_probed_once(
    model_server: ServedHub,
) -> None:
    assert model_server.repo_path(REPO_ID).is_dir()
    seen = len(model_server.requests)
    hub = HfHub(model_server.url, token=False)

    commit = hub.list_refs(REPO_ID).branches["v1"]
    assert hub.list_variants(REPO_ID, commit) == [VARIANT]
    hub.list_refs(REPO_ID)
    module = kernelhub.get_kernel(REPO_ID, version=1, hub=model_server.url)

    assert module.VALUE == 7
    kernel_asks = [r for r in model_server.requests[seen:] if "kernels/" in r]
    # One probe in the process (this HfHub and the one get_kernel made share what it
    # found), then only models.
    assert kernel_asks == [f"GET /api/kernels/{REPO_ID}/refs"]


def test_a_repository_of_neither_type_is_not_found(kernel_server: ServedHub) -> None:
    with pytest.raises(RepoNotFoundError, match="no repository acme/missing"):
        HfHub(kernel_server.url, token=False).list_refs("acme/missing")


def test_a_remembered_type_that_no_longer_holds_the_repository_is_found_again(
    model_server: ServedHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelhub.hub import hf

    # E.g. a server that answered at this address before had the kernel type.
    monkeypatch.setitem(hf._found_types, (model_server.url, REPO_ID), "kernel")
    assert "v1" in HfHub(model_server.url, token=False).list_refs(REPO_ID).branches
    assert hf._found_types[(model_server.url, REPO_ID)] == "model"
