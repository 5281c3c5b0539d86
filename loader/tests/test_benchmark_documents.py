"""Published benchmark documents read back (``kernelhub serve`` draws its plots from them):
kernelhub's own document and the ecosystem's payload, checked value by value because
they come from a hub; and the plot drawn from several threads at once, as a server does."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from kernelhub.benchmark.results import (
    BenchmarkDocumentError,
    BenchmarkRun,
    Timing,
    WorkloadResult,
    machine_slug,
    machine_summary,
    parse_document,
)

MACHINE = {"gpu": "N/A", "backend": "cpu", "pytorchVersion": "2.13.0", "os": "Linux",
           "cpu": "AMD EPYC 9654"}


def ours() -> BenchmarkRun:
    timing = Timing.of([1.0, 1.2, 0.9, 1.1])
    return BenchmarkRun(
        (WorkloadResult("Act.tokens_512", timing, Timing.of([2.0, 2.2]), True),
         WorkloadResult("Act.tokens_32", timing, None, False, "largest difference 1"),
         WorkloadResult("Act.tokens_1", timing)),
        MACHINE, {"repoId": "acme/act", "revision": "v1", "commit": "c" * 40,
                  "variant": "torch-universal", "kernelCommitSha": "c" * 40},
        "f" * 64, ("benchmark.py",))


def ecosystem_payload() -> dict[str, object]:
    """``BenchmarkResult.to_payload`` of kernels 0.19.1, field for field."""
    return {"results": [{"workload": "Act.tokens_1", "timingResults": {
        "mean_ms": 0.5, "std_ms": 0.01, "min_ms": 0.4, "max_ms": 0.7, "q1_ms": 0.45,
        "q3_ms": 0.55, "iqr_ms": 0.1, "outliers": 2, "iterations": 100}, "verified": True}],
        "machineInfo": {**MACHINE, "gpuCores": 0}, "kernelCommitSha": "a" * 40,
        "benchmarkScriptPath": "benchmarks", "benchmarkScriptSha": "b" * 64}


def test_our_document_reads_back_as_written() -> None:
    run = ours()
    assert parse_document(run.dumps().encode(), "doc.json") == run


def test_the_ecosystems_payload_reads_without_reference_timings() -> None:
    run = parse_document(json.dumps(ecosystem_payload()).encode(), "payload.json")
    (result,) = run.results
    assert result.timing.outliers == 2 and result.reference is None and result.verified
    assert run.kernel == {"kernelCommitSha": "a" * 40} and run.script_sha == "b" * 64
    older = ecosystem_payload()  # releases before the quartiles: they default to 0
    del older["results"][0]["timingResults"]["q1_ms"]  # type: ignore[index]
    assert parse_document(json.dumps(older).encode(), "p").results[0].timing.q1_ms == 0


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(results={}), "no results list"),
    (lambda d: d.update(results=[]), "holds no results"),
    (lambda d: d.update(schema="kernelhub-benchmark/9"), "this kernelhub reads"),
    (lambda d: d.update(machineInfo=[1]), "machineInfo must be an object"),
    (lambda d: d["results"][0].update(workload=3), "must be an object with a workload"),
    (lambda d: d["results"][0].update(verified="yes"), "verified must be true or false"),
    (lambda d: d["results"][0]["timingResults"].update(mean_ms=float("nan")),
     "mean_ms must be a time"),
    (lambda d: d["results"][0]["timingResults"].update(mean_ms=True), "mean_ms must be a time"),
    (lambda d: d["results"][0]["timingResults"].pop("max_ms"), "max_ms must be a time"),
    (lambda d: d["results"][0]["timingResults"].update(iterations=-1), "iterations must be"),
    (lambda d: d["results"][0].update(refTimingResults="fast"), "reference: timings must"),
])
def test_a_document_in_neither_shape_is_refused_naming_what(change: object, message: str
                                                             ) -> None:
    doc = ecosystem_payload()
    change(doc)  # type: ignore[operator]
    with pytest.raises(BenchmarkDocumentError, match=message):
        parse_document(json.dumps(doc).encode(), "results/x.json")
    with pytest.raises(BenchmarkDocumentError, match="is not JSON"):
        parse_document(b"\xff{", "results/x.json")


def test_a_machine_without_a_gpu_is_named_by_its_cpu() -> None:
    assert machine_summary(MACHINE) == "AMD EPYC 9654 · cpu · torch 2.13.0"
    assert machine_slug(MACHINE).startswith("cpu-amd-epyc-9654-")
    gpu = {**MACHINE, "gpu": "NVIDIA H100", "backend": "cuda"}
    assert machine_summary(gpu) == "NVIDIA H100 · cuda · torch 2.13.0"


def test_plots_drawn_from_many_threads_at_once() -> None:
    pytest.importorskip("matplotlib")
    from kernelhub.benchmark.plots import render_plot

    run = ours()
    barrier = threading.Barrier(4)

    def draw() -> list[bytes]:
        barrier.wait()  # all four threads draw at the same moment, as a server's pool may
        return [render_plot(run, fmt) for fmt in ("svg", "png", "svg")]

    with ThreadPoolExecutor(4) as pool:
        drawn = [pool.submit(draw) for _ in range(4)]
    results = [plot for future in drawn for plot in future.result(timeout=120)]  # raises
    assert len(results) == 12 and all(isinstance(r, bytes) and r for r in results)
    svg = next(r for r in results if r.lstrip().startswith(b"<?xml"))
    text = svg.decode()
    assert "acme/act — torch-universal" in text and "Act.tokens_512" in text
    assert text.index("Act.tokens_1<") < text.index("Act.tokens_32") < text.index(
        "Act.tokens_512")  # natural order
    assert "output does not match" in text and "2.00x" in text


def test_the_legend_never_overlaps_the_title() -> None:
    pytest.importorskip("matplotlib")
    from kernelhub.benchmark.plots import draw_figure
    from matplotlib.text import Text

    run = ours()
    long_name = {**run.kernel, "repoId": "kernels-community/a-rather-long-kernel-name-indeed",
                 "variant": "torch213-cxx11-cu128-x86_64-linux"}
    for kernel in (run.kernel, long_name):
        fig = draw_figure(BenchmarkRun(run.results, run.machine, kernel, run.script_sha,
                                       run.scripts))
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        ax = fig.axes[0]
        title_text = ax.get_title(loc="left")
        title = next(t for t in fig.findobj(Text) if t.get_text() == title_text
                     ).get_window_extent(renderer)
        legend = ax.get_legend().get_window_extent(renderer)
        assert not title.overlaps(legend), kernel
        assert legend.y0 >= ax.get_window_extent(renderer).y1 - 1  # above the bars
