"""The release flow of .github/workflows/release.yml, rehearsed for real on this machine.

Two shards are built in two different checkouts (two clones of one commit at different
paths, as two CI machines have), each shard's variants become artifacts laid out as
upload-artifact lays them (one directory per artifact, ``<kernel>/<variant>/`` inside),
``ci/publish-artifacts`` merges and publishes them, and the hub then holds one commit per
kernel with every variant, each with the digests of a build of everything on one machine.

Lean on purpose (CI has 2 cores): the CPU variant of one small compiled kernel (rmsnorm,
stable ABI) and the two pure-Python variants of triton-activation.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, run
from kernelhub.hub.local import LocalHub
from kernelhub.metadata import read_metadata
from kernelhub.variants import parse_variant
from kernelhub_builder.manifest import VariantNames
from kernelhub_builder.plan.toolchains import detect_host
from kernelhub_builder.ship.names import published_names

pytestmark = pytest.mark.slow

KERNELS = ("rmsnorm", "triton-activation")


def variants() -> list[str]:
    return [f"torch-stable-abi213-cpu-{detect_host().system}", "torch-cuda", "torch-xpu"]


def checkout(source: Path, dest: Path) -> Path:
    """A git clone of ``source`` at ``dest``: what actions/checkout gives a job."""
    run(["git", "clone", "-q", str(source), str(dest)])
    return dest


def make_origin(root: Path) -> Path:
    """A repository holding this checkout's kernels and CI scripts, committed once."""
    origin = root / "origin"
    origin.mkdir()
    for rel in ("kernels.toml", "kernels-src", "ci"):
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, origin / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, origin / rel)
    git = ["git", "-C", str(origin), "-c", "user.name=ci", "-c", "user.email=ci@localhost"]
    run([*git, "init", "-q", "-b", "main"])
    run([*git, "add", "-A"])
    run([*git, "commit", "-q", "-m", "release"])
    return origin


def builder(ws: Workspace, tree: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "builder"), "--out", str(out), *args], env=ws.env(), cwd=tree)


def build_shard(ws: Workspace, tree: Path, shard: str, artifacts: Path) -> list[str]:
    """One CI machine: build its shard, check it, stage each variant as one artifact."""
    out = tree / "build"
    selection = [a for v in variants() for a in ("--variant", v)]
    proc = builder(ws, tree, out, "build", *KERNELS, *selection, "--shard", shard)
    built = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] in KERNELS:
            kernel, variant = parts[0], parts[1]
            artifact = artifacts / f"variant--{kernel}--{variant}" / kernel
            artifact.mkdir(parents=True)
            shutil.copytree(out / kernel / variant, artifact / variant)
            built.append(variant)
    builder(ws, tree, out, "check", *{k for k in KERNELS if (out / k).is_dir()},
            "--no-import-check")
    return built


def test_two_shards_on_two_checkouts_publish_one_commit_per_kernel_with_one_machine_digests(
    tmp_path: Path,
) -> None:
    ws = Workspace(root=tmp_path, out=tmp_path / "unused", hub=tmp_path / "hub")
    origin = make_origin(tmp_path)
    machine_a = checkout(origin, tmp_path / "runner-a" / "work" / "kernelhub")
    machine_b = checkout(origin, tmp_path / "elsewhere" / "b")
    artifacts = tmp_path / "artifacts"

    shard_a = build_shard(ws, machine_a, "1/2", artifacts)
    shard_b = build_shard(ws, machine_b, "2/2", artifacts)
    assert shard_a and shard_b
    assert sorted(shard_a + shard_b) == sorted(variants())  # a partition, nothing twice

    proc = run(["bash", str(machine_a / "ci" / "publish-artifacts"), str(artifacts),
                str(ws.hub)], env={**ws.env(), "BUILDER": str(BIN / "builder")})
    assert proc.stdout.count("published ") == len(KERNELS)

    # One machine building everything, in a third checkout.
    single = checkout(origin, tmp_path / "single")
    selection = [a for v in variants() for a in ("--variant", v)]
    builder(ws, single, single / "build", "build", *KERNELS, *selection)

    hub = LocalHub(ws.hub)
    for kernel in KERNELS:
        repo_id = f"kernels-community/{kernel}"
        refs = hub.list_refs(repo_id)
        head = refs.branches["v1"]
        assert refs.tags["v1.0.0"] == head
        git_dir = hub.repo_path(repo_id)
        count = run(["git", "--git-dir", str(git_dir), "rev-list", "--count", "v1"]).stdout
        assert int(count) == 1, f"{kernel}: {count.strip()} commits on v1, expected one"
        expected = sorted(v for v in variants() if (single / "build" / kernel / v).is_dir())
        # Each build under both generations of names (the same bytes; builder publish).
        assert hub.list_variants(repo_id, head) == sorted(
            n for v in expected for n in published_names(parse_variant(v), VariantNames.BOTH))
        for variant in expected:
            fetched = tmp_path / "fetched" / kernel / variant
            hub.fetch_variant(repo_id, head, variant, fetched)
            published = read_metadata(fetched)
            one_machine = read_metadata(single / "build" / kernel / variant)
            assert published.id == one_machine.id
            assert published.digest_files == one_machine.digest_files, json.dumps(
                {"published": published.digest_files, "one machine": one_machine.digest_files},
                indent=1)
