"""The ecosystem's lock and install API over a Hub-API server, as its users call it.

* A lock file the ecosystem's CLI writes for a Hub repository whose binaries are stored
  with Git LFS hashes those files by their LFS sha256, not their blob id; it must load,
  and ``kernelhub lock`` must write the same hash.
* ``get_locked_kernel`` finds the lock where the ecosystem's loader does: in the calling
  code's installed distribution, else ``./kernels.lock``; it takes ``lockfile=``.
* ``install_kernel(..., local_files_only=…)`` from two threads at once: both succeed, the
  cache holds one verified copy, and offline mode never leaks to the other thread.

The server is ``kernelhub serve`` (tests/hub_api_served.py) asking for LFS uploads at
:data:`LFS_THRESHOLD` bytes, so a variant's large ``__init__.py`` is committed through Git
LFS and listed as the Hub lists a variant's ``.so``, while its small metadata.json stays a
plain file: the hash recomputed here from the listing — the ecosystem's way — differs
from the all-blob-id hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from huggingface_hub import HfApi, constants
from huggingface_hub.hf_api import RepoFile
from kernelhub import api, ecosystem
from kernelhub.api import lock_project
from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import read_metadata, verify_variant
from kernelhub.hub.hashes import variant_dir_hash
from kernelhub.load import pipeline
from kernelhub_builder.ship.hf import HfPublisher
from kh_doubles import make_variant

REPO_ID = "acme/lfs"
VARIANT = "torch-universal"
LFS_THRESHOLD = 4096
"""Files this large go through LFS (``--lfs-threshold``); a metadata.json is smaller."""
PADDING = "# large enough to be stored with Git LFS\n" * 120
pytestmark = pytest.mark.usefixtures("hub_api_client")


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedHub]:
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # LFS, as serve speaks it
    with hub_api_server(tmp_path / "server", lfs_threshold=LFS_THRESHOLD) as running:
        staged = tmp_path / "staged" / VARIANT
        make_variant(staged, name="lfs", init="VALUE = 11\n" + PADDING, backend="universal")
        HfPublisher(running.url, token=WRITE_TOKEN).publish(
            REPO_ID, "v1", {VARIANT: staged}, tag="v1.0.0", message="1.0.0")
        monkeypatch.setenv("KERNELHUB_HUB", running.url)
        yield running


def commit_of(server: ServedHub) -> str:
    refs = HfApi(endpoint=server.url, token=False).list_repo_refs(REPO_ID, repo_type="kernel")
    return next(b.target_commit for b in refs.branches if b.name == "v1")


def ecosystem_hash(server: ServedHub, commit: str) -> str:
    """The ecosystem's git_lfs_concat, computed its way from the Hub's tree listing."""
    prefix = f"build/{VARIANT}/"
    entries = [e for e in HfApi(endpoint=server.url, token=False).list_repo_tree(
        REPO_ID, path_in_repo=prefix.rstrip("/"), revision=commit, repo_type="kernel",
        recursive=True) if isinstance(e, RepoFile)]
    assert {e.path: e.lfs is not None for e in entries} == {  # serve reports the LFS file
        f"{prefix}__init__.py": True, f"{prefix}metadata.json": False}
    m = hashlib.sha256()
    for name, digest in sorted(
            (e.path[len(prefix):].encode(),
             bytes.fromhex(e.lfs.sha256 if e.lfs is not None else e.blob_id)) for e in entries):
        m.update(name)
        m.update(digest)
    return f"sha256-{m.hexdigest()}"


def ecosystem_lock(path: Path, commit: str, variant_hash: str) -> Path:
    path.write_text(json.dumps([{"repo_id": REPO_ID, "sha": commit, "variants": {
        VARIANT: {"hash": variant_hash, "hash_type": "git_lfs_concat"}}}]))
    return path


def test_an_ecosystem_lock_of_a_repository_with_lfs_files_loads_and_then_offline(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = commit_of(server)
    lock = ecosystem_lock(tmp_path / "kernels.lock", commit, ecosystem_hash(server, commit))

    assert ecosystem.load_kernel(REPO_ID, lockfile=lock).VALUE == 11

    variant_dir = api.locate_kernel(REPO_ID, revision=commit)
    assert variant_dir_hash(variant_dir) != ecosystem_hash(server, commit)  # blob ids differ
    monkeypatch.setattr(pipeline, "_memo", {})
    monkeypatch.setenv("KERNELHUB_OFFLINE", "1")
    seen = len(server.requests)
    assert ecosystem.load_kernel(REPO_ID, lockfile=lock).VALUE == 11
    assert server.requests[seen:] == []  # checked from the cache, no hub


def test_kernelhub_lock_writes_the_hash_the_ecosystem_computes(
    server: ServedHub, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\n[tool.kernels.dependencies]\n"{REPO_ID}" = 1\n')

    _, (entry,) = lock_project(project)

    assert entry.variant_hashes == {VARIANT: ecosystem_hash(server, entry.sha)}


def test_get_locked_kernel_reads_the_callers_distribution_lock_then_the_project_lock(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = commit_of(server)
    good = ecosystem_hash(server, commit)
    # An installed library "lockuser" that ships its lock in its metadata, as the
    # ecosystem's build hook makes it, and calls get_locked_kernel without lockfile=.
    site = tmp_path / "site"
    (site / "lockuser").mkdir(parents=True)
    (site / "lockuser" / "__init__.py").write_text(
        "from kernelhub import ecosystem\n"
        f"def load():\n    return ecosystem.get_locked_kernel({REPO_ID!r})\n")
    info = site / "lockuser-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lockuser\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("lockuser\n")
    ecosystem_lock(info / "kernels.lock", commit, good)
    monkeypatch.syspath_prepend(str(site))
    # The working directory holds a project lock whose hash is wrong for this variant:
    # whoever reads it refuses the load.
    work = tmp_path / "work"
    work.mkdir()
    ecosystem_lock(work / "kernels.lock", commit, "sha256-" + "0" * 64)
    monkeypatch.chdir(work)

    import lockuser

    assert lockuser.load().VALUE == 11  # the distribution's lock, not ./kernels.lock
    monkeypatch.setattr(pipeline, "_memo", {})
    with pytest.raises(KernelHubError, match="the lock file records sha256-0000"):
        ecosystem.get_locked_kernel(REPO_ID)  # a caller without a distribution: ./kernels.lock
    right = ecosystem_lock(tmp_path / "right.lock", commit, good)
    assert ecosystem.get_locked_kernel(REPO_ID, lockfile=right).VALUE == 11
    ecosystem_lock(work / "kernels.lock", commit, good)
    monkeypatch.setattr(pipeline, "_memo", {})
    assert ecosystem.get_locked_kernel(REPO_ID, local_files_only=True).VALUE == 11


def race_online_and_cache_only(commit: str) -> dict[str, Path | BaseException]:
    """One online install_kernel and cache-only ones in another thread, started together.

    The cache-only installs fail until the online one has landed; none of them may switch
    the online one offline meanwhile. Returns what each side ended with.
    """
    barrier = threading.Barrier(2)
    online_done = threading.Event()
    results: dict[str, Path | BaseException] = {}

    def online() -> None:
        barrier.wait()
        try:
            results["online"] = ecosystem.install_kernel(REPO_ID, commit)
        except BaseException as e:
            results["online"] = e
        finally:
            online_done.set()

    def cache_only() -> None:
        barrier.wait()
        while True:
            landed = online_done.is_set()
            try:
                results["cache-only"] = ecosystem.install_kernel(
                    REPO_ID, commit, local_files_only=True)
                return
            except KernelHubError as e:
                if landed:
                    results["cache-only"] = e
                    return

    threads = [threading.Thread(target=online), threading.Thread(target=cache_only)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_install_kernel_from_two_threads_with_and_without_local_files_only(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = commit_of(server)
    for attempt in range(5):  # each round on a cold cache
        monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / f"cache-{attempt}"))

        results = race_online_and_cache_only(commit)

        assert isinstance(results["online"], Path), results["online"]
        assert results["cache-only"] == results["online"]
        assert "KERNELHUB_OFFLINE" not in os.environ
        variant_dir = results["online"]
        verify_variant(variant_dir, read_metadata(variant_dir))  # one complete, verified copy
        assert [p.name for p in variant_dir.parent.iterdir() if p.name.startswith(".")] == []


def test_install_kernel_from_many_threads_at_once_fetches_one_verified_copy(
    server: ServedHub, tmp_path: Path
) -> None:
    commit = commit_of(server)
    barrier = threading.Barrier(4)
    results: list[Path | BaseException] = []

    def install() -> None:
        barrier.wait()
        try:
            results.append(ecosystem.install_kernel(REPO_ID, version=1))
        except BaseException as e:
            results.append(e)

    threads = [threading.Thread(target=install) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert len(results) == 4 and all(r == results[0] for r in results), results
    variant_dir = results[0]
    assert isinstance(variant_dir, Path) and variant_dir.parent.name == commit
    verify_variant(variant_dir, read_metadata(variant_dir))
    downloads = [r for r in server.requests
                 if r.startswith("GET ") and r.endswith(f"/{VARIANT}/__init__.py")]
    assert len(downloads) == 1, downloads  # the others waited for the first and reused it


def test_an_ecosystem_build_whose_files_are_lfs_objects_is_verified_by_their_sha256(
    server: ServedHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = tmp_path / "ecosystem-build"
    build.mkdir()
    (build / "__init__.py").write_text("VALUE = 5\n" + PADDING)
    (build / "metadata.json").write_text(json.dumps({  # as the ecosystem's builder writes it
        "name": "foreign", "id": "_foreign_universal_0123456789", "version": 1,
        "license": "Apache-2.0", "python-depends": [], "backend": {"type": "universal"},
        "provenance": {"kernel-builder": {"version": "0.17.0"}}}))
    HfPublisher(server.url, token=WRITE_TOKEN).publish(
        "acme/foreign", "v1", {VARIANT: build}, tag="v1.0.0", message="1.0.0")

    from kernelhub import get_kernel

    assert get_kernel("acme/foreign", version=1).VALUE == 5
    variant_dir = api.locate_kernel("acme/foreign", version=1)
    assert json.loads((variant_dir.parent / f"{VARIANT}.hub-lfs.json").read_text()) == [
        "__init__.py"]

    # The hub's storage now holds other bytes (as many) than its listing's sha256 names.
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cold-cache"))
    monkeypatch.setattr(pipeline, "_memo", {})
    overwrite_blob(server, "acme/foreign", f"build/{VARIANT}/__init__.py",
                   ("VALUE = 6\n" + PADDING).encode())
    with pytest.raises(KernelHubError, match=r"__init__.py does not match the hub's sha256"):
        get_kernel("acme/foreign", version=1)


def overwrite_blob(server: ServedHub, repo_id: str, path: str, data: bytes) -> None:
    """Replace the bytes git stores under ``path``'s blob id (a loose object; git reads it
    back without rehashing), as a corrupted or tampered hub store would hold them."""
    repo = server.git(repo_id)
    oid = repo.ls_tree("v1", path)[0].oid
    loose = repo.path / "objects" / oid[:2] / oid[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(data) + data))
