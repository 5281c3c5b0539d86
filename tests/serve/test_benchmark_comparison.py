"""Benchmark comparison across releases and machines: runs published for two releases,
from a CPU and a GPU machine, drawn as one figure (workloads by releases, a line per
machine) on the kernel page; a wrong answer is left out, a release without runs is not a
column, and the figure follows the page's read rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
from kernelhub.hub.git import GitRepo
from served import READ_TOKEN, WRITE_TOKEN, serving
from showcase import ecosystem_payload

REPO = "acme/activation"
HTML = {"accept": "text/html"}


def _release(hub: Path, work: Path, tag: str, text: str) -> str:
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import make_variant

    variant = work / tag / "torch-universal"
    make_variant(variant, name="activation", init=f"VALUE = {text!r}\n")
    result = LocalPublisher(hub).publish(REPO, "v1", {"torch-universal": variant}, tag=tag,
                                         message=f"release {tag}")
    return str(result.commit)


def _gpu_run(scale: float) -> dict[str, object]:
    run = copy.deepcopy(ecosystem_payload("AMD EPYC 9654", scale))
    run["machineInfo"] = {"gpu": "NVIDIA H100", "backend": "cuda", "pytorchVersion": "2.14.0",
                          "os": "Linux", "cpu": "Intel Xeon"}
    results = run["results"]
    assert isinstance(results, list)
    results[0]["verified"] = False  # tokens_1 gave a wrong answer on this machine
    return run


def test_releases_by_machine_in_one_figure(hub: Path, tokens_file: Path, tmp_path: Path) -> None:
    from kernelhub_builder.ship import LocalPublisher
    from kernelhub_builder.ship.benchmark_results import publish_results
    from kernelhub_serve.compare import compare_releases
    from kernelhub_serve.repos import RepoStore
    from kernelhub_serve.tokens import TokenTable

    old = _release(hub, tmp_path, "v1.0.0", "old")
    new = _release(hub, tmp_path, "v1.1.0", "new")
    _release(hub, tmp_path, "v1.2.0", "no runs yet")
    runs = {f"results/{old}/torch-universal/epyc.json": ecosystem_payload("AMD EPYC 9654", 2.0),
            f"results/{new}/torch-universal/epyc.json": ecosystem_payload("AMD EPYC 9654", 1.0),
            f"results/{new}/torch-cuda/h100.json": _gpu_run(0.25),
            f"results/{new}/torch-cuda/h100-older.json": _gpu_run(0.5)}  # slower: not shown
    publish_results(LocalPublisher(hub), REPO,
                    {path: json.dumps(run).encode() for path, run in runs.items()}, "runs")

    store = RepoStore(hub)
    comparison = compare_releases(store, store.open(REPO))
    assert comparison.releases == ("v1.0.0", "v1.1.0")  # v1.2.0 has no runs
    epyc, h100 = "AMD EPYC 9654 · cpu", "NVIDIA H100 · cuda"
    assert sorted(comparison.points) == [epyc, h100]
    assert comparison.points[epyc]["SiluAndMul.tokens_512"] == {"v1.0.0": 2.0 * 512 / 64,
                                                                "v1.1.0": 1.0 * 512 / 64}
    assert comparison.points[h100]["SiluAndMul.tokens_512"] == {"v1.1.0": 0.25 * 512 / 64}
    assert "SiluAndMul.tokens_1" not in comparison.points[h100]  # not verified: left out

    with serving(hub, TokenTable.load(tokens_file)) as url:
        page = httpx.get(f"{url}/kernels/{REPO}", headers=HTML).text
        assert f'<img src="/-/compare/{REPO}.svg"' in page
        assert f"Releases v1.0.0, v1.1.0 · 2 machines: {epyc}; {h100}" in page
        svg = httpx.get(f"{url}/-/compare/{REPO}.svg")
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
        for text in ("SiluAndMul.tokens_2048", "v1.0.0", "v1.1.0", epyc, h100, REPO):
            assert text in svg.text, text
        assert "v1.2.0" not in svg.text
        again = httpx.get(f"{url}/-/compare/{REPO}.svg",
                          headers={"if-none-match": svg.headers["etag"]})
        assert again.status_code == 304

        api = __import__("huggingface_hub").HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo("acme/hidden", repo_type="kernel", private=True)
        api.upload_file(path_or_fileobj=b"x", path_in_repo="README.md", repo_id="acme/hidden",
                        repo_type="kernel")
        assert httpx.get(f"{url}/-/compare/acme/hidden.svg").status_code == 404  # anonymous
        empty = httpx.get(f"{url}/-/compare/acme/hidden.svg",
                          headers={"authorization": f"Bearer {READ_TOKEN}"})
        assert empty.status_code == 404 and "no release of acme/hidden" in empty.text
        assert 'id="compare"' not in httpx.get(
            f"{url}/kernels/acme/hidden", headers={**HTML,
                                                    "authorization": f"Bearer {READ_TOKEN}"}).text

        # a new run changes what the figure is drawn from, and so its ETag
        publish_results(LocalPublisher(hub), REPO, {f"results/{old}/torch-cuda/h100.json":
                                                    json.dumps(_gpu_run(0.3)).encode()}, "more")
        assert GitRepo(hub / "models" / REPO).resolve_commit("refs/heads/benchmarks")
        moved = httpx.get(f"{url}/-/compare/{REPO}.svg",
                          headers={"if-none-match": svg.headers["etag"]})
        assert moved.status_code == 200 and moved.headers["etag"] != svg.headers["etag"]
