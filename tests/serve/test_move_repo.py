"""``HfApi.move_repo`` renames a repository on a live server: history, refs and privacy go
with it; it needs write rights on both organisations, never overwrites a repository, and a
refused move changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from served import OTHER_TOKEN, READ_TOKEN, WRITE_TOKEN


def test_move_repo_renames_with_history_refs_and_privacy(server: str, tmp_path: Path) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/old", repo_type="kernel", private=True)
    commit = api.upload_file(path_or_fileobj=b"v1", path_in_repo="README.md",
                             repo_id="acme/old", repo_type="kernel").oid
    api.create_tag("acme/old", tag="v1", repo_type="kernel")

    api.move_repo("acme/old", "kernels-community/new", repo_type="kernel")

    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("acme/old", repo_type="kernel")
    info = api.repo_info("kernels-community/new", repo_type="kernel")
    assert info.sha == commit and info.private
    assert [t.name for t in api.list_repo_refs("kernels-community/new", repo_type="kernel").tags] \
        == ["v1"]
    with pytest.raises(RepositoryNotFoundError):  # still private: anonymous cannot read it
        HfApi(endpoint=server).repo_info("kernels-community/new", repo_type="kernel")
    path = hf_hub_download("kernels-community/new", "README.md", repo_type="kernel",
                           revision="v1", endpoint=server, token=READ_TOKEN,
                           cache_dir=tmp_path / "cache")
    assert Path(path).read_bytes() == b"v1"


def test_a_refused_move_changes_nothing(server: str) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/a", repo_type="kernel")
    api.create_repo("acme/b", repo_type="kernel")
    before = {r: api.repo_info(r, repo_type="kernel").sha for r in ("acme/a", "acme/b")}

    with pytest.raises(HfHubHTTPError) as exists:
        api.move_repo("acme/a", "acme/b", repo_type="kernel")
    assert exists.value.response.status_code == 409
    with pytest.raises(HfHubHTTPError) as no_rights:  # writes acme, not elsewhere
        api.move_repo("acme/a", "elsewhere/a", repo_type="kernel")
    assert no_rights.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as not_source:  # writes elsewhere, not acme
        HfApi(endpoint=server, token=OTHER_TOKEN).move_repo("acme/a", "elsewhere/a",
                                                             repo_type="kernel")
    assert not_source.value.response.status_code == 403
    with pytest.raises(RepositoryNotFoundError):
        api.move_repo("acme/missing", "acme/c", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as anonymous:
        HfApi(endpoint=server).move_repo("acme/a", "acme/c", repo_type="kernel")
    assert anonymous.value.response.status_code == 401

    assert {r: api.repo_info(r, repo_type="kernel").sha for r in ("acme/a", "acme/b")} == before
    assert not any(m.id in ("acme/c", "elsewhere/a") for m in api.list_models())
