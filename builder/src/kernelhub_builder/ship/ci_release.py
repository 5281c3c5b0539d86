"""What a release run publishes and what it leaves missing: the publish job's record.

A release publishes what was built. A build job that failed, a runner that never came, or
a device test that failed leaves a planned variant out; the run still publishes the rest
(each kernel in one commit) and records each missing variant with the reason, in the job
summary and as an artifact. A later run (``ci/matrix --missing-on HUB``) plans exactly the
variants the release tag still lacks, and its publish adds them to the same tag (the
release rule lets a tag gain variants, never change one it holds).

Device tests are optional (docs/shipping.md): one that failed keeps its variant out of the
release; one that never ran (no runner with that device) leaves the variant published as
compiled and checked but not run on its device, which the record says too.

Run by ``ci/publish-artifacts`` as ``python -m kernelhub_builder.ship.ci_release``:

- ``exclude --merged DIR --results DIR``: delete from the merged build dir every variant
  whose device test failed; prints what it removed.
- ``report --plan FILE --artifacts DIR --merged DIR --results DIR --out DIR``:
  ``release-report.json`` and
  ``release-report.md`` (what was published, what is missing and why, what was not
  tested on a device); prints the Markdown (and, with ``--annotations``, one GitHub
  Actions warning per missing variant).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelhub.errors import KernelHubError

from ..errors import BuilderError

Pair = tuple[str, str]
"""(kernel, variant)"""

REPORT_JSON = "release-report.json"
REPORT_MD = "release-report.md"


@dataclass(frozen=True)
class ReleaseRecord:
    published: list[Pair]
    missing: dict[Pair, str]
    """Planned but not published → why."""
    untested: list[Pair]
    """Published, needing a device to be tested, and no device test ran."""

    def to_json(self) -> dict[str, Any]:
        return {
            "published": [{"kernel": k, "variant": v} for k, v in self.published],
            "missing": [{"kernel": k, "variant": v, "why": why}
                        for (k, v), why in sorted(self.missing.items())],
            "untested-on-device": [{"kernel": k, "variant": v} for k, v in self.untested],
        }

    def markdown(self) -> str:
        lines = [f"## Release: {len(self.published)} variant(s) published, "
                 f"{len(self.missing)} missing"]
        if self.missing:
            lines += ["", "Missing (a later run with `only-missing` adds them):", ""]
            lines += [f"- `{k}` `{v}`: {why}" for (k, v), why in sorted(self.missing.items())]
        if self.untested:
            lines += ["", "Published without a device test (no runner had the device):", ""]
            lines += [f"- `{k}` `{v}`" for k, v in self.untested]
        if self.published:
            lines += ["", "Published:", ""]
            lines += [f"- `{k}` `{v}`" for k, v in self.published]
        return "\n".join(lines) + "\n"


def read_plan(path: Path) -> list[dict[str, Any]]:
    """The build matrix the plan job printed (``{"include": [...]}``)."""
    try:
        jobs = json.loads(path.read_text())["include"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BuilderError(f"{path}: not a build matrix from `builder ci-matrix` ({e})") from None
    return [job for job in jobs if isinstance(job, dict)]


def device_results(dirs: Iterable[Path]) -> dict[Pair, bool]:
    """Every device-test result under ``dirs`` (``*.json`` files ci/test-variant wrote)."""
    results: dict[Pair, bool] = {}
    for root in dirs:
        for path in sorted(root.rglob("*.json")) if root.is_dir() else ():
            try:
                data = json.loads(path.read_text())
                pair = (str(data["kernel"]), str(data["variant"]))
                passed = data["passed"] is True
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise BuilderError(f"{path}: not a device-test result ({e})") from None
            results[pair] = results.get(pair, True) and passed
    return results


def merged_variants(merged: Path) -> list[Pair]:
    """The (kernel, variant) dirs of a merged build dir."""
    if not merged.is_dir():
        return []
    return sorted((k.name, v.name) for k in merged.iterdir()
                  if k.is_dir() and not k.name.startswith(".")
                  for v in k.iterdir() if v.is_dir() and not v.name.startswith("."))


def artifact_variants(artifacts: Path) -> list[Pair]:
    """The (kernel, variant) dirs of downloaded artifacts (one build dir per artifact)."""
    if not artifacts.is_dir():
        return []
    return sorted({pair for artifact in artifacts.iterdir() if artifact.is_dir()
                   for pair in merged_variants(artifact)})


def exclude_failed(merged: Path, results: dict[Pair, bool]) -> list[Pair]:
    """Remove the variants whose device test failed from the merged dir; what was removed."""
    removed = []
    for kernel, variant in merged_variants(merged):
        if results.get((kernel, variant)) is False:
            shutil.rmtree(merged / kernel / variant)
            removed.append((kernel, variant))
    for kernel_dir in merged.iterdir() if merged.is_dir() else ():
        if kernel_dir.is_dir() and not any(kernel_dir.iterdir()):
            kernel_dir.rmdir()
    return removed


def release_record(plan: Sequence[dict[str, Any]], built: Iterable[Pair],
                   published: Iterable[Pair], results: dict[Pair, bool]) -> ReleaseRecord:
    """Planned against built and published, with the device-test results."""
    made, done = set(built), set(published)
    missing: dict[Pair, str] = {}
    untested = []
    for job in plan:
        pair = (job["kernel"], job["variant"])
        if pair not in made:
            missing[pair] = "no build: the build job failed or did not run"
        elif pair not in done:
            missing[pair] = ("its device test failed" if results.get(pair) is False
                             else "built, but not published")
        elif job.get("device") and pair not in results:
            untested.append(pair)
    return ReleaseRecord(sorted(done), missing, sorted(untested))


def _parser() -> argparse.ArgumentParser:
    merged = argparse.ArgumentParser(add_help=False)
    merged.add_argument("--merged", type=Path, required=True, help="the merged build dir")
    merged.add_argument("--results", type=Path, action="append", default=[],
                        help="a directory of device-test results (repeatable)")
    parser = argparse.ArgumentParser(prog="python -m kernelhub_builder.ship.ci_release")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("exclude", parents=[merged])
    report = commands.add_parser("report", parents=[merged])
    report.add_argument("--plan", type=Path, required=True)
    report.add_argument("--artifacts", type=Path, required=True)
    report.add_argument("--annotations", action="store_true",
                        help="also print a GitHub Actions ::warning:: line per missing variant")
    report.add_argument("--out", type=Path, required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        results = device_results(args.results)
        if args.command == "exclude":
            for kernel, variant in exclude_failed(args.merged, results):
                print(f"not published: {kernel} {variant} (its device test failed)")
            return 0
        record = release_record(read_plan(args.plan), artifact_variants(args.artifacts),
                                merged_variants(args.merged), results)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / REPORT_JSON).write_text(json.dumps(record.to_json(), indent=2) + "\n")
        (args.out / REPORT_MD).write_text(record.markdown())
        print(record.markdown(), end="")
        if args.annotations:
            for (kernel, variant), why in sorted(record.missing.items()):
                print(f"::warning title=missing from the release::{kernel} {variant}: {why}")
    except (KernelHubError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
