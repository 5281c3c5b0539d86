"""Benchmark results on the pages, as they reach a served hub: ``kernelhub benchmark
--publish`` into the LocalHub the server serves (the browser test covers the same command
publishing over the server's Hub API), the ecosystem's payload committed in the kernel
commit, and a document that is neither — each plot drawn by the server from the document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from kernelhub.benchmark.results import RESULTS_BRANCH
from kernelhub.cli import main
from kernelhub.hub.git import GitRepo
from served import READ_TOKEN, WRITE_TOKEN, serving
from showcase import BENCHMARK, REPO_ID, ecosystem_payload, publish_showcase

pytestmark = pytest.mark.usefixtures("hub_api_client")


def _plots(page: str) -> list[str]:
    section = page[page.index('id="benchmarks"'):]
    return re.findall(r'<img src="(/-/plot/[^"]+)"', section)


def test_published_runs_are_drawn_on_the_kernel_page(hub: Path, tokens_file: Path,
                                                    tmp_path: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    release = publish_showcase(hub, tmp_path)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "benchmark.py").write_text(BENCHMARK)
    assert main(["benchmark", REPO_ID, "--hub", str(hub), "--benchmarks", str(scripts),
                 "--iterations", "3", "--warmup", "1", "--publish",
                 "--plots", str(tmp_path / "out")]) == 0
    results = GitRepo(hub / "models" / REPO_ID)
    (published,) = [e.path for e in results.ls_tree(RESULTS_BRANCH, recursive=True)
                    if e.path.endswith(".json")]
    head = results.resolve_commit(f"refs/heads/{RESULTS_BRANCH}")

    with serving(hub, TokenTable.load(tokens_file)) as url:
        api = HfApi(endpoint=url, token=WRITE_TOKEN)
        for name, data in (("ecosystem.json", json.dumps(ecosystem_payload("AMD EPYC", 1.0))),
                           ("broken.json", '{"results": "fast"}')):
            api.upload_file(path_or_fileobj=data.encode(), repo_id=REPO_ID, repo_type="kernel",
                            path_in_repo=f"benchmarks/results/{name}", revision="v1",
                            commit_message=name)
        # v1 moved past the benchmarked release commit: its page offers the release's runs.
        page = httpx.get(f"{url}/kernels/{REPO_ID}").text
        assert "No published benchmark results for this commit" not in page
        assert f'href="?rev={release}"' in page  # "Results for other commits"
        v1 = results.resolve_commit("refs/heads/v1")
        assert _plots(page) == [f"/-/plot/{REPO_ID}/{v1}/benchmarks/results/ecosystem.json.svg"]
        assert "benchmarks/results/broken.json</code>: benchmarks/results/broken.json is not a " \
               "benchmark document (no results list)" in page

        at_release = httpx.get(f"{url}/kernels/{REPO_ID}", params={"rev": release}).text
        (ours,) = _plots(at_release)
        assert ours == f"/-/plot/{REPO_ID}/{head}/{published}.svg"
        svg = httpx.get(url + ours)
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
        assert "immutable" in svg.headers["cache-control"]
        assert "SiluAndMul.tokens_256" in svg.text and "acme/activation — torch" in svg.text
        document = httpx.get(f"{url}/kernels/{REPO_ID}/resolve/{head}/{published}")
        assert json.loads(document.content)["repoId"] == REPO_ID  # the caption's JSON link
        assert f"/kernels/{REPO_ID}/resolve/{head}/{published[:-5]}.png" in at_release

        refused = {
            f"/-/plot/{REPO_ID}/{RESULTS_BRANCH}/{published}.svg": "not a full commit id",
            f"/-/plot/{REPO_ID}/{head}/results/nothing.json.svg": "nothing.json",
            f"/-/plot/{REPO_ID}/{release}/build/torch-cuda/metadata.json.svg":
                "is not a published benchmark result",
        }
        refused[f"/-/plot/{REPO_ID}/{v1}/benchmarks/results/broken.json.svg"] = "no results list"
        for path, why in refused.items():
            answer = httpx.get(url + path)
            assert answer.status_code == 404 and why in answer.text, (path, answer.text)

    closed = TokenTable(TokenTable.load(tokens_file).grants, frozenset())
    with serving(hub, closed) as url:  # no anonymous reads: plots follow the same rule
        assert httpx.get(url + ours).status_code in (401, 404)
        readable = httpx.get(url + ours, headers={"authorization": f"Bearer {READ_TOKEN}"})
        assert readable.status_code == 200
