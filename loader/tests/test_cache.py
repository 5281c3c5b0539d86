"""Cache installs: atomic, verified, locked; concurrent loaders fetch once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kernelhub.cache import KernelCache
from kernelhub.errors import HubError, IntegrityError, KernelHubError
from kernelhub.versions import Refs
from kh_doubles import DirHub, make_variant

VARIANT = "torch-universal"


def _publish(hub: DirHub, tmp_path: Path) -> str:
    make_variant(tmp_path / "src" / VARIANT)
    return hub.add("kernels-community/kern", "v1", {VARIANT: tmp_path / "src" / VARIANT})


def test_layout_and_install(tmp_path: Path, dirhub: DirHub) -> None:
    commit = _publish(dirhub, tmp_path)
    cache = KernelCache(tmp_path / "c")
    path = cache.install(dirhub, "kernels-community/kern", commit, VARIANT)
    assert path == tmp_path / "c" / dirhub.key / "kernels-community" / "kern" / commit / VARIANT
    assert (path / "metadata.json").is_file()
    assert cache.installed(dirhub.key, "kernels-community/kern", commit, VARIANT) == path
    # Installed already: no second fetch.
    cache.install(dirhub, "kernels-community/kern", commit, VARIANT)
    assert [c[0] for c in dirhub.calls] == ["fetch_variant"]
    assert [p.name for p in path.parent.iterdir()] == [VARIANT]  # no temp dirs left


def test_refs_and_variant_lists_round_trip(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    refs = Refs(branches={"v1": "a" * 40}, tags={"v1.0.0": "b" * 40})
    assert cache.read_refs("h", "o/n") is None
    cache.write_refs("h", "o/n", refs)
    assert cache.read_refs("h", "o/n") == refs
    cache.write_variants("h", "o/n", "a" * 40, ["torch-universal", "torch-cpu"])
    assert cache.read_variants("h", "o/n", "a" * 40) == ["torch-cpu", "torch-universal"]


def test_path_escapes_are_refused(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    for repo in ("../x", "o/..", "noslash"):
        with pytest.raises(KernelHubError):
            cache.repo_dir("h", repo)
    with pytest.raises(KernelHubError, match=r"not a full commit id \(40 or 64 hex\)"):
        cache.commit_dir("h", "o/n", "main")


class _FailingHub(DirHub):
    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        (dest / "__init__.py").write_text("half")
        raise HubError("connection dropped")


def test_failed_fetch_leaves_nothing_behind(tmp_path: Path) -> None:
    hub = _FailingHub(tmp_path / "hub")
    commit = _publish(hub, tmp_path)
    cache = KernelCache(tmp_path / "c")
    with pytest.raises(HubError, match="connection dropped"):
        cache.install(hub, "kernels-community/kern", commit, VARIANT)
    commit_dir = cache.commit_dir(hub.key, "kernels-community/kern", commit)
    assert list(commit_dir.iterdir()) == []


def test_corrupt_fetch_is_refused_and_not_cached(tmp_path: Path, dirhub: DirHub) -> None:
    commit = _publish(dirhub, tmp_path)
    published = dirhub.root / "kernels-community/kern" / commit / VARIANT / "__init__.py"
    data = bytearray(published.read_bytes())
    data[0] ^= 0x01
    published.write_bytes(bytes(data))
    cache = KernelCache(tmp_path / "c")
    with pytest.raises(IntegrityError, match=r"__init__\.py: sha256 does not match"):
        cache.install(dirhub, "kernels-community/kern", commit, VARIANT)
    assert list(cache.commit_dir(dirhub.key, "kernels-community/kern", commit).iterdir()) == []


def test_stale_partial_from_a_crashed_process_is_cleaned(tmp_path: Path, dirhub: DirHub) -> None:
    commit = _publish(dirhub, tmp_path)
    cache = KernelCache(tmp_path / "c")
    commit_dir = cache.commit_dir(dirhub.key, "kernels-community/kern", commit)
    (commit_dir / f".{VARIANT}.dead.partial").mkdir(parents=True)
    cache.install(dirhub, "kernels-community/kern", commit, VARIANT)
    assert sorted(p.name for p in commit_dir.iterdir()) == [VARIANT]


def test_two_processes_install_concurrently_and_fetch_once(tmp_path: Path) -> None:
    hub = DirHub(tmp_path / "hub")
    commit = _publish(hub, tmp_path)
    log = tmp_path / "fetches.log"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from kh_doubles import DirHub
        from kernelhub.cache import KernelCache
        hub = DirHub(Path({str(hub.root)!r}), log=Path({str(log)!r}), fetch_delay=0.5)
        path = KernelCache(Path({str(tmp_path / "c")!r})).install(
            hub, "kernels-community/kern", {commit!r}, {VARIANT!r})
        print(path)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0] == outputs[1] != ""
    assert log.read_text().splitlines() == [f"fetch_variant kernels-community/kern {commit} {VARIANT}"]


def test_clear_removes_everything(tmp_path: Path, dirhub: DirHub) -> None:
    commit = _publish(dirhub, tmp_path)
    cache = KernelCache(tmp_path / "c")
    cache.install(dirhub, "kernels-community/kern", commit, VARIANT)
    assert cache.clear() == [tmp_path / "c" / dirhub.key]
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["CACHEDIR.TAG"]  # kernelhub's mark
    assert KernelCache(tmp_path / "missing").clear() == []
