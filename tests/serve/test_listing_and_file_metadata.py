"""A team finds its kernels: ``list_models`` (author, search, limit), ``hf models ls``,
and ``model_info(files_metadata=True)`` with file sizes, against a live server with the
real huggingface_hub client — and a listing never shows a private repository to someone
who may not read it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from huggingface_hub import HfApi
from served import OTHER_TOKEN, READ_TOKEN, WRITE_TOKEN

DATA = bytes(range(256)) * 40


def _team_hub(server: str) -> None:
    """acme/demo (public, with files), acme/secret (private), kernels-community/rmsnorm."""
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/demo", repo_type="kernel")
    api.upload_file(path_or_fileobj=DATA, path_in_repo="build/torch-universal/data.bin",
                    repo_id="acme/demo", repo_type="kernel")
    api.upload_file(path_or_fileobj=b"# demo\n", path_in_repo="README.md",
                    repo_id="acme/demo", repo_type="kernel")
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    api.upload_file(path_or_fileobj=b"secret", path_in_repo="README.md",
                    repo_id="acme/secret", repo_type="kernel")
    api.create_repo("kernels-community/rmsnorm", repo_type="kernel")


def _ids(server: str, token: str | None = None, **query: object) -> list[str]:
    return [m.id for m in HfApi(endpoint=server, token=token).list_models(**query)]  # type: ignore[arg-type]


def test_list_models_shows_only_what_the_caller_may_read(server: str) -> None:
    _team_hub(server)
    assert _ids(server) == ["acme/demo", "kernels-community/rmsnorm"]
    assert _ids(server, author="acme") == ["acme/demo"]
    assert _ids(server, search="RMS") == ["kernels-community/rmsnorm"]
    assert _ids(server, limit=1) == ["acme/demo"]
    assert _ids(server, READ_TOKEN, author="acme") == ["acme/demo", "acme/secret"]
    assert _ids(server, WRITE_TOKEN, search="secret") == ["acme/secret"]
    assert _ids(server, OTHER_TOKEN, author="acme") == ["acme/demo"]  # writes elsewhere only

    listed = {m.id: m for m in HfApi(endpoint=server, token=READ_TOKEN).list_models()}
    assert listed["acme/secret"].private and not listed["acme/demo"].private
    demo = HfApi(endpoint=server).model_info("acme/demo")
    assert listed["acme/demo"].sha == demo.sha
    assert listed["acme/demo"].last_modified == demo.last_modified
    assert HfApi(endpoint=server, token=READ_TOKEN).model_info("acme/secret").private

    newest = list(HfApi(endpoint=server, token=READ_TOKEN).list_models(sort="last_modified"))
    assert {m.id for m in newest} == set(listed)
    dates = [m.last_modified for m in newest]
    assert None not in dates and dates == sorted(dates, reverse=True)
    with httpx.Client() as http:
        for query in ("limit=0", "limit=x", "sort=bogus"):
            answer = http.get(f"{server}/api/models?{query}")
            assert answer.status_code == 400, query
            assert "\n" not in answer.json()["error"]


def test_hf_models_ls_lists_the_team_s_repositories(server: str, tmp_path: Path) -> None:
    _team_hub(server)
    hf = Path(sys.executable).parent / "hf"
    env = {**os.environ, "HF_ENDPOINT": server, "HF_HOME": str(tmp_path / "hf-home")}
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE"):
        env.pop(var, None)
    run = subprocess.run([str(hf), "models", "ls", "--author", "acme", "--format", "json"],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert [m["id"] for m in json.loads(run.stdout)] == ["acme/demo"]
    env["HF_TOKEN"] = READ_TOKEN
    run = subprocess.run([str(hf), "models", "ls", "--search", "acme/", "--format", "json"],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert [m["id"] for m in json.loads(run.stdout)] == ["acme/demo", "acme/secret"]


def test_files_metadata_gives_each_file_s_size_and_blob_id(server: str) -> None:
    _team_hub(server)
    api = HfApi(endpoint=server)
    siblings = {s.rfilename: s for s in api.model_info("acme/demo", files_metadata=True).siblings}
    data = siblings["build/torch-universal/data.bin"]
    assert data.size == len(DATA)
    assert data.blob_id == hashlib.sha1(b"blob %d\0" % len(DATA) + DATA).hexdigest()
    assert data.lfs is None  # sent inline (no --lfs-threshold): a plain git file
    assert siblings["README.md"].size == len(b"# demo\n")
    plain = api.model_info("acme/demo").siblings
    assert plain is not None and all(s.size is None for s in plain)
