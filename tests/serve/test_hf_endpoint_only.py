"""A user with only ``HF_ENDPOINT`` set (a team server, standing in for the Hugging Face
Hub): kernelhub's default search path reaches it, kernelhub and its compatibility module
load from it, trust is the server's answer, and the "Load it" line of its page runs as
shown with the ecosystem's own loader."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub.hub import hf
from kernelhub.load import pipeline
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant
from served import serving

REPO = "kernels-community/scale"
TEAM_REPO = "team/scale"

INIT = "import torch\nVALUE = {value}\n\ndef scale(x: torch.Tensor) -> torch.Tensor:\n    return x * VALUE\n"


def _publish(hub: Path, tmp_path: Path, repo_id: str, value: int) -> None:
    staged = tmp_path / "staging" / repo_id / "torch-universal"
    make_variant(staged, name="scale", init=INIT.format(value=value))
    LocalPublisher(hub).publish(repo_id, "v1", {"torch-universal": staged}, tag="v1.0.0",
                                message="release")


@pytest.fixture
def only_hf_endpoint(hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A served hub holding two kernels, and a user whose only setting is HF_ENDPOINT:
    no KERNELHUB_HUB, an empty home (so the default local hub is empty)."""
    _publish(hub, tmp_path, REPO, 3)
    _publish(hub, tmp_path, TEAM_REPO, 5)
    with serving(hub) as url:
        for var in ("KERNELHUB_HUB", "HF_TOKEN", "HF_HUB_OFFLINE", "KERNELHUB_OFFLINE",
                    "KERNELHUB_TRUSTED_ORGS", "LOCAL_KERNELS"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "config.toml"))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setattr(pipeline, "_memo", {})
        monkeypatch.setattr(hf, "_found_types", {})
        yield url


def test_kernelhub_and_its_compatibility_module_load_from_hf_endpoint(
        only_hf_endpoint: str) -> None:
    import kernelhub
    from kernelhub import ecosystem
    from kernelhub.hub.calls import hub_name

    assert kernelhub.get_kernel(REPO, 1).VALUE == 3
    assert hub_name(kernelhub.resolve_kernel(REPO, 1).hub) == only_hf_endpoint
    assert ecosystem.get_kernel(REPO, version=1).VALUE == 3
    assert ecosystem.has_kernel(REPO, version=1)


def test_trust_is_the_servers_answer(only_hf_endpoint: str, hub: Path) -> None:
    """The loader asks the server what the ecosystem's loader asks it, so both agree: an
    org the hub's config trusts loads without trust_remote_code, another does not."""
    import kernelhub
    from kernelhub.errors import TrustError

    with pytest.raises(TrustError, match="team"):
        kernelhub.get_kernel(TEAM_REPO, 1)
    (hub / "kernelhub.toml").write_text('[trust]\norgs = ["team"]\n')
    assert kernelhub.get_kernel(TEAM_REPO, 1).VALUE == 5


def _load_line(url: str, repo_id: str) -> str:
    with urllib.request.urlopen(f"{url}/{repo_id}") as page:
        text = page.read().decode()
    found = re.search(r"<h2>Load it</h2>\s*<pre><code>(.*?)</code></pre>", text, re.S)
    assert found, text[:2000]
    return html.unescape(found.group(1))


@pytest.mark.parametrize(("repo_id", "trust_flag"), [(REPO, False), (TEAM_REPO, True)])
def test_the_pages_load_line_runs_as_shown_with_the_ecosystems_loader(
        only_hf_endpoint: str, tmp_path: Path, repo_id: str, trust_flag: bool) -> None:
    line = _load_line(only_hf_endpoint, repo_id)
    assert line.startswith(f"HF_ENDPOINT={only_hf_endpoint} python -c ")
    assert ("trust_remote_code=True" in line) is trust_flag
    assert "version=1" in line
    env = {**os.environ, "KERNELHUB_TRANSFORMERS": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", line + " && echo LOADED"], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "LOADED" in proc.stdout, proc.stderr[-3000:]


def test_a_variant_the_ecosystem_already_downloaded_is_not_downloaded_again(
        only_hf_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the ecosystem's loader fetched it (into HF_HOME's cache), kernelhub takes the
    variant from there, each file checked against the hub's listed hash; a file that was
    altered there makes it download instead."""
    import kernelhub

    line = _load_line(only_hf_endpoint, REPO)
    env = {**os.environ, "KERNELHUB_TRANSFORMERS": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    snapshots = list((tmp_path / "hf-home" / "hub").glob("*--kernels-community--scale/snapshots/*"))
    assert snapshots, "the ecosystem's loader cached nothing"

    downloads: list[object] = []
    real = hf.download
    monkeypatch.setattr(hf, "download", lambda files, headers: (
        downloads.append(files), real(files, headers))[1])
    assert kernelhub.get_kernel(REPO, 1).VALUE == 3
    assert downloads == []

    init = next(snapshots[0].glob("build/torch-universal/__init__.py"))
    altered = init.read_text().replace("VALUE = 3", "VALUE = 666")
    init.unlink()  # a link into huggingface_hub's blobs: replace it, not the blob
    init.write_text(altered)
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache-2"))
    monkeypatch.setattr(pipeline, "_memo", {})
    assert kernelhub.get_kernel(REPO, 1).VALUE == 3
    assert downloads, "an altered file in the ecosystem's cache must not be used"
