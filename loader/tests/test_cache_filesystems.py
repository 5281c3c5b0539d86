"""The cache on real filesystems that refuse writes: read-only and full.

Root ignores permission bits, so chmod cannot make a directory unwritable for these tests
(they run as root here). Instead each test runs a child Python in a new user and mount
namespace (``unshare -r -m``, no privileges needed) where the cache directory is
bind-mounted read-only, or replaced by a tiny tmpfs that fills up: the kernel itself
refuses the writes with EROFS / ENOSPC, exactly as on a shared cluster cache or a full
disk. Skipped where the system forbids unprivileged user namespaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub import api
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/kern"
TESTS = Path(__file__).resolve().parent


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-r", "-m", "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(),
                                reason="unprivileged user+mount namespaces are not available")

CHILD = """\
import json, os, sys
from pathlib import Path
from kernelhub import api
from kernelhub.errors import KernelHubError

cache = Path(os.environ["KERNELHUB_CACHE"])
probe = cache / ".write-probe"
try:
    probe.write_text("x")
    writable = True
    probe.unlink()
except OSError as e:
    writable = e.strerror
out = {"writable": writable}
try:
    module = api.get_kernel(sys.argv[1], 1, hub=sys.argv[2])
    out["value"] = module.VALUE
except KernelHubError as e:
    out["error"] = type(e).__name__
    out["message"] = str(e)
except BaseException as e:
    out["raw"] = f"{type(e).__name__}: {e}"
out["left"] = sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.is_dir() else []
print(json.dumps(out))
"""


def _in_namespace(mounts: str, env: dict[str, str], *args: str) -> dict:
    script = f'set -e\n{mounts}\nexec "$KH_PYTHON" -c "$KH_CHILD" "$@"'
    proc = subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", script, "sh", *args],
        env={**env, "KH_PYTHON": sys.executable, "KH_CHILD": CHILD,
             "PYTHONPATH": str(TESTS), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def published(tmp_path: Path) -> Path:
    """A real LocalHub holding one 2 MB variant; returns the hub root."""
    make_variant(tmp_path / "staging" / "v", init="VALUE = 7\n",
                 files={"blob.bin": "x" * (2 << 20)})
    hub = LocalPublisher(tmp_path / "hub")
    hub.publish(REPO, "v1", {"torch-universal": tmp_path / "staging" / "v"}, tag=None,
                message="one variant")
    return tmp_path / "hub"


def test_warm_cache_on_a_read_only_filesystem_loads_online(published: Path,
                                                           isolated_settings: Path) -> None:
    api.get_kernel(REPO, 1, hub=str(published))  # warm the cache (as the cluster admin did)
    cache = isolated_settings
    mounts = f'mount --bind "{cache}" "{cache}"\nmount -o remount,bind,ro "{cache}"'
    out = _in_namespace(mounts, dict(os.environ), REPO, str(published))
    assert out["writable"] == "Read-only file system"  # the test really is read-only
    assert out.get("value") == 7, out


def test_cold_variant_on_a_read_only_cache_is_one_cache_error(published: Path,
                                                              isolated_settings: Path) -> None:
    cache = isolated_settings
    cache.mkdir(parents=True)
    mounts = f'mount --bind "{cache}" "{cache}"\nmount -o remount,bind,ro "{cache}"'
    out = _in_namespace(mounts, dict(os.environ), REPO, str(published))
    assert out["writable"] == "Read-only file system"
    assert out.get("error") == "CacheError", out
    assert "\n" not in out["message"] and str(cache) in out["message"]
    assert "KERNELHUB_CACHE" in out["message"]


def test_full_disk_is_one_cache_error_and_leaves_nothing_half_written(
        published: Path, isolated_settings: Path) -> None:
    cache = isolated_settings
    cache.mkdir(parents=True)
    mounts = f'mount -t tmpfs -o size=1m tmpfs "{cache}"'
    out = _in_namespace(mounts, dict(os.environ), REPO, str(published))
    assert out["writable"] is True
    assert out.get("error") == "CacheError", out
    assert "No space left on device" in out["message"] and "\n" not in out["message"]
    assert not [p for p in out["left"] if p.endswith(".partial") or "torch-universal" in p], out
