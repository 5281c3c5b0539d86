"""Benchmark comparison across releases and machines: runs published for two releases,
from a CPU and a GPU machine, drawn as one figure (workloads by releases, a line per
machine) on the kernel page; a wrong answer is left out, a release without runs is not a
column, and the figure follows the page's read rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
from chromium import SIZES, needs_chromium
from kernelhub.hub.git import GitRepo
from served import READ_TOKEN, WRITE_TOKEN, serving
from showcase import ecosystem_payload

REPO = "acme/activation"
HTML = {"accept": "text/html"}


def _get(url: str, **kwargs: object) -> httpx.Response:
    """A GET with room for the first figure's matplotlib import on a busy machine."""
    return httpx.get(url, timeout=120, **kwargs)  # type: ignore[arg-type]


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
    from kernelhub_serve.bench_compare import compare_releases
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
        page = _get(f"{url}/kernels/{REPO}", headers=HTML).text
        assert f'<img src="/-/compare/{REPO}.svg"' in page
        assert f"Releases v1.0.0, v1.1.0 · 2 machines: {epyc}; {h100}" in page
        svg = _get(f"{url}/-/compare/{REPO}.svg")
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
        for text in ("SiluAndMul.tokens_2048", "v1.0.0", "v1.1.0", epyc, h100, REPO):
            assert text in svg.text, text
        assert "v1.2.0" not in svg.text
        again = _get(f"{url}/-/compare/{REPO}.svg",
                          headers={"if-none-match": svg.headers["etag"]})
        assert again.status_code == 304

        api = __import__("huggingface_hub").HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo("acme/hidden", repo_type="kernel", private=True)
        api.upload_file(path_or_fileobj=b"x", path_in_repo="README.md", repo_id="acme/hidden",
                        repo_type="kernel")
        assert _get(f"{url}/-/compare/acme/hidden.svg").status_code == 404  # anonymous
        empty = _get(f"{url}/-/compare/acme/hidden.svg",
                          headers={"authorization": f"Bearer {READ_TOKEN}"})
        assert empty.status_code == 404 and "no release of acme/hidden" in empty.text
        assert 'id="compare"' not in _get(
            f"{url}/kernels/acme/hidden", headers={**HTML,
                                                    "authorization": f"Bearer {READ_TOKEN}"}).text

        # a new run changes what the figure is drawn from, and so its ETag
        publish_results(LocalPublisher(hub), REPO, {f"results/{old}/torch-cuda/h100.json":
                                                    json.dumps(_gpu_run(0.3)).encode()}, "more")
        assert GitRepo(hub / "models" / REPO).resolve_commit("refs/heads/benchmarks")
        moved = _get(f"{url}/-/compare/{REPO}.svg",
                          headers={"if-none-match": svg.headers["etag"]})
        assert moved.status_code == 200 and moved.headers["etag"] != svg.headers["etag"]


@needs_chromium
def test_the_comparison_in_a_real_browser(hub: Path, tokens_file: Path, tmp_path: Path,
                                          browser: object) -> None:
    import os

    from kernelhub_builder.ship import LocalPublisher
    from kernelhub_builder.ship.benchmark_results import publish_results
    from kernelhub_serve.tokens import TokenTable
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    shots = Path(os.environ.get("KERNELHUB_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    commits = [_release(hub, tmp_path, f"v1.{i}.0", str(i)) for i in range(3)]
    runs = {f"results/{c}/torch-universal/epyc.json":
            ecosystem_payload("AMD EPYC 9654", 2 - i / 2) for i, c in enumerate(commits)}
    runs[f"results/{commits[2]}/torch-cuda/h100.json"] = _gpu_run(0.25)
    publish_results(LocalPublisher(hub), REPO,
                    {path: json.dumps(run).encode() for path, run in runs.items()}, "runs")
    with serving(hub, TokenTable.load(tokens_file)) as url:
        for size, (width, height) in SIZES.items():
            browser.set_window_size(width, height)
            browser.get(f"{url}/kernels/{REPO}")
            img = browser.find_element(By.CSS_SELECTOR,
                                       "#benchmarks figure.plot img[src^='/-/compare/']")
            browser.execute_script("arguments[0].scrollIntoView()", img)
            WebDriverWait(browser, 60).until(lambda _, img=img: browser.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth > 100", img))
            width_px = browser.execute_script("return document.documentElement.scrollWidth")
            assert width_px <= width + 1, f"the page scrolls sideways on a {size} screen"
            browser.save_screenshot(str(shots / f"compare-{size}.png"))
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
