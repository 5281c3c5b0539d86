"""Download counts per variant: a cold load of a variant through the real clients counts
once, a warm one not at all; the count shows on the kernel page and in ``model_info``'s
``downloads``; several processes counting and reading at once lose and double nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import httpx
from huggingface_hub import HfApi, snapshot_download
from served import READ_TOKEN, serving
from team_hub import PUBLIC, SECRET, publish_team_kernels

VARIANT = "torch-universal"


def _cold_load(url: str, repo_id: str, cache: Path) -> None:
    snapshot_download(repo_id, repo_type="model", revision="v1", endpoint=url,
                      allow_patterns=[f"build/{VARIANT}/*"], cache_dir=cache, token=READ_TOKEN)


def test_cold_loads_count_once_each(hub: Path, tokens_file: Path, tmp_path: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    with serving(hub, TokenTable.load(tokens_file)) as url:
        publish_team_kernels(hub, tmp_path, url)
        reader = HfApi(endpoint=url, token=READ_TOKEN)
        assert HfApi(endpoint=url).model_info(PUBLIC, revision="v1").downloads == 0
        _cold_load(url, PUBLIC, tmp_path / "machine-1")
        _cold_load(url, PUBLIC, tmp_path / "machine-2")
        _cold_load(url, PUBLIC, tmp_path / "machine-2")  # warm: nothing fetched
        _cold_load(url, SECRET, tmp_path / "machine-3")
        files = f"{url}/kernels/{PUBLIC}/resolve/v1/build/{VARIANT}"
        assert httpx.head(f"{files}/metadata.json").status_code == 200  # not a download
        assert httpx.get(f"{files}/metadata.json",
                         headers={"range": "bytes=10-"}).status_code == 206  # a resumption
        assert httpx.get(f"{files}/__init__.py").status_code == 200  # the same load's files

        assert HfApi(endpoint=url).model_info(PUBLIC, revision="v1").downloads == 2
        assert reader.model_info(SECRET, revision="v1").downloads == 1
        page = httpx.get(f"{url}/kernels/{PUBLIC}").text
        assert '<span id="downloads">2 downloads</span>' in page
        assert '<span class="downloads">2 downloads</span>' in page
        ranked = [m.id for m in reader.list_models(sort="downloads")]
        assert ranked == [PUBLIC, SECRET]
        _cold_load(url, SECRET, tmp_path / "machine-4")
        _cold_load(url, SECRET, tmp_path / "machine-5")
        assert [m.id for m in reader.list_models(sort="downloads")] == [SECRET, PUBLIC]
        assert [m.downloads for m in reader.list_models()] == [2, 3]
        assert [m.id for m in HfApi(endpoint=url).list_models()] == [PUBLIC]


def _record(hub: str, n: int, variant: str) -> None:
    from kernelhub_serve.downloads import DownloadCounts

    counts = DownloadCounts(Path(hub), fold_at=256)
    for _ in range(n):
        counts.record(PUBLIC, f"build/{variant}/metadata.json")


def test_processes_counting_and_folding_at_once_lose_nothing(hub: Path) -> None:
    from kernelhub_serve.downloads import DownloadCounts

    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_record, args=(str(hub), 250, f"v{i % 2}"))
               for i in range(4)]
    for worker in workers:
        worker.start()
    reader = DownloadCounts(hub, fold_at=256)  # folds the log into the totals as it reads
    seen = []
    while any(w.is_alive() for w in workers):
        seen.append(sum(reader.counts(PUBLIC).values()))
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert reader.counts(PUBLIC) == {"v0": 500, "v1": 500}
    assert seen == sorted(seen)  # a count never goes back
    assert (hub / ".kernelhub-serve/downloads/acme/public.json").is_file()  # it folded


def test_unreadable_counts_never_fail_a_download(hub: Path, caplog: object) -> None:
    from kernelhub_serve.downloads import DownloadCounts

    counts = DownloadCounts(hub)
    counts.record(PUBLIC, "build/torch-universal/metadata.json")
    counts.record(PUBLIC, "build/torch-universal/__init__.py")  # not the counted file
    counts.record(PUBLIC, "README.md")
    assert counts.counts(PUBLIC) == {"torch-universal": 1}
    totals = hub / ".kernelhub-serve/downloads/acme/public.json"
    totals.write_text("{not json")
    assert counts.counts(PUBLIC) == {"torch-universal": 1}  # the log still counts
    (hub / ".kernelhub-serve/downloads/acme/public.log").write_text("../../etc\n\x00\nok\n")
    assert counts.counts(PUBLIC) == {"ok": 1}  # lines that name no variant are not counted
    blocked = DownloadCounts(hub / "file")
    (hub / "file").write_text("")  # its state directory cannot be made
    blocked.record(PUBLIC, "build/torch-universal/metadata.json")
    assert blocked.counts(PUBLIC) == {}


def test_two_serve_processes_count_into_one_total(hub: Path, tokens_file: Path,
                                                  tmp_path: Path) -> None:
    """Two ``kernelhub-serve`` processes over one hub, loads through both at once: the
    total either one reports is every load."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelhub_serve.tokens import TokenTable
    from served import serving_process

    with serving(hub, TokenTable.load(tokens_file)) as url:
        publish_team_kernels(hub, tmp_path, url)
    with serving_process(hub, tokens_file, tmp_path / "one.log") as one, \
            serving_process(hub, tokens_file, tmp_path / "two.log") as two:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda i: _cold_load((one, two)[i % 2], PUBLIC,
                                               tmp_path / f"machine-{i}"), range(6)))
        for endpoint in (one, two):
            assert HfApi(endpoint=endpoint).model_info(PUBLIC, revision="v1").downloads == 6
