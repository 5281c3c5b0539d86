"""Lock files both ways, with the ecosystem's real loaders (``kernels`` 0.17.2 and 0.19.1,
each installed in a directory of its own) over ``kernelhub serve`` (tests/hub_api_served.py):

* the ``kernels.lock`` that ``kernelhub lock`` writes parses with their strict parser
  (``KernelLocks.from_json``, which refuses any key it does not know) and loads with
  their ``get_locked_kernel`` and, from the cache that filled, their ``load_kernel``; the
  same lock loads with kernelhub, checked by the hashes in ``kernelhub.lock`` beside it;
* the lock their own serializer writes (``KernelLocks.to_json``, what ``kernels lock``
  writes) loads with kernelhub's loader and its ecosystem API, and with theirs exactly as
  ours does;
* a kernel with a kernel dependency (edition 6's ``kernel-depends``: ``relu`` on
  ``scale``), locked by ``kernelhub lock``, loads with 0.19.1's ``get_locked_kernel`` and
  ``load_kernel`` and with kernelhub, the dependency at the commit the lock pins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_api_served import WRITE_TOKEN, ServedHub, hub_api_server
from huggingface_hub import HfApi
from kh_doubles import make_variant
from reference_loader import ecosystem_loaders, reference_env

REPO_ID = "acme/locked"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"  # what every loader picks in this venv

# What the ecosystem's user runs: their strict parser, then both locked loads.
THEIR_LOADS = """
import json, sys
from pathlib import Path
from kernels import get_locked_kernel, load_kernel
from kernels._rust import KernelLocks
lock = Path(sys.argv[1])
locks = KernelLocks.from_json(lock.read_text())
online = get_locked_kernel(sys.argv[2], lockfile=lock, trust_remote_code=True)
try:
    cached = load_kernel(sys.argv[2], lockfile=lock).VALUE
except Exception as e:
    cached = repr(e)[:300]
print(json.dumps({"pins": [[d.repo_id, str(locks[d].commit)] for d in locks],
                  "online": online.VALUE, "cached": cached}))
"""

# What ``kernels lock`` writes: their own serializer, given the pin it resolved.
THEIR_LOCK = """
import sys
from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion
dep = KernelDependency(repo_id=sys.argv[1], version=KernelVersion.Version(1))
print(KernelLocks({dep: KernelLock(sys.argv[2])}).to_json())
"""

OURS = """
import json, sys
import kernelhub
from kernelhub import ecosystem
a = kernelhub.load_locked_kernel(sys.argv[2], lockfile=sys.argv[1], trust_remote_code=True)
b = ecosystem.get_locked_kernel(sys.argv[2], lockfile=sys.argv[1], trust_remote_code=True)
print(json.dumps({"values": [a.VALUE, b.VALUE]}))
"""


@pytest.fixture(scope="module")
def loaders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return ecosystem_loaders(tmp_path_factory)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServedHub]:
    from kernelhub_builder.ship.hf import HfPublisher

    with hub_api_server(tmp_path / "server") as running:
        staged = tmp_path / "staged" / VARIANT
        make_variant(staged, name="locked", init="VALUE = 7\n")
        HfPublisher(running.url, token=WRITE_TOKEN).publish(
            REPO_ID, "v1", {VARIANT: staged}, tag="v1.0.0", message="1.0.0")
        yield running


def base_env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELHUB_"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", KERNELHUB_HUB=url, HF_ENDPOINT=url,
               KERNELHUB_CACHE=str(tmp_path / "kernelhub-cache"),
               KERNELHUB_CONFIG=str(tmp_path / "no-config.toml"))
    return env


def python(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=300)


def last_json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def commit_of(server: ServedHub) -> str:
    refs = HfApi(endpoint=server.url, token=False).list_repo_refs(REPO_ID, repo_type="kernel")
    return next(b.target_commit for b in refs.branches if b.name == "v1")


def their_loads(lock: Path, commit: str, loaders: dict[str, Path], env: dict[str, str],
                url: str, hf_cache: Path) -> None:
    """Both ecosystem loaders parse ``lock`` and load what it pins."""
    theirs = {version: last_json(python(THEIR_LOADS, str(lock), REPO_ID, env=reference_env(
        env, target, url, hf_cache / version))) for version, target in loaders.items()}
    for version, loaded in theirs.items():
        assert loaded["pins"] == [[REPO_ID, commit]] and loaded["online"] == 7, (version, loaded)
    assert theirs["0.19.1"]["cached"] == 7
    # 0.17.2's load_kernel asks huggingface_hub 2.x for a complete snapshot offline, which
    # its own download never makes (.gitattributes): it fails so with any lock, its own
    # serializer's included; the pin it names shows the lock was read.
    assert f"Cannot find a local snapshot for {REPO_ID} (revision: {commit})" in str(
        theirs["0.17.2"]["cached"])


def test_the_lock_kernelhub_writes_loads_with_both_ecosystem_loaders_and_ours(
        server: ServedHub, loaders: dict[str, Path], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\n[tool.kernels.dependencies]\n"{REPO_ID}" = 1\n')
    env = base_env(tmp_path, server.url)
    proc = subprocess.run([str(Path(sys.executable).parent / "kernelhub"), "lock", str(project)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lock, hashes = project / "kernels.lock", project / "kernelhub.lock"
    assert f"wrote {lock} and {hashes}" in proc.stdout
    commit = commit_of(server)

    their_loads(lock, commit, loaders, env, server.url, tmp_path / "hf-cache")
    assert last_json(python(OURS, str(lock), REPO_ID, env=env)) == {"values": [7, 7]}
    tampered = json.loads(hashes.read_text())
    tampered[0]["kernelhub"]["metadata-sha256"][VARIANT] = "0" * 64
    hashes.write_text(json.dumps(tampered))  # kernelhub checks the hashes beside the pins
    refused = python(OURS, str(lock), REPO_ID, env=env)
    assert refused.returncode != 0 and "IntegrityError" in refused.stderr, refused.stderr
    assert "refusing to load" in refused.stderr and "lock file records" in refused.stderr


def test_the_lock_the_ecosystem_writes_loads_with_kernelhub(
        server: ServedHub, loaders: dict[str, Path], tmp_path: Path) -> None:
    env = base_env(tmp_path, server.url)
    commit = commit_of(server)
    for version, target in loaders.items():
        written = python(THEIR_LOCK, REPO_ID, commit, env=reference_env(
            env, target, server.url, tmp_path / "unused-hf-cache"))
        assert written.returncode == 0, written.stderr
        lock = tmp_path / version / "kernels.lock"
        lock.parent.mkdir()
        lock.write_text(written.stdout)
        assert json.loads(written.stdout)[0]["lock"] == {"commit": commit}
        assert last_json(python(OURS, str(lock), REPO_ID, env=env)) == {"values": [7, 7]}
    # The ecosystem's loaders on their own lock, as on ours above: the same results.
    their_loads(lock, commit, loaders, env, server.url, tmp_path / "hf-cache")


def test_a_distribution_ships_its_hashes_beside_its_lock(server: ServedHub,
                                                         tmp_path: Path) -> None:
    """An installed library whose metadata carries ``kernels.lock`` (as the ecosystem's
    build hook puts it there) and ``kernelhub.lock``: a kernelhub load from its code reads
    both, so the hashes travel with the wheel."""
    from kernelhub.lock import HASHES_NAME, LockEntry, write_lock

    commit = commit_of(server)
    site = tmp_path / "site"
    (site / "lockuser").mkdir(parents=True)
    (site / "lockuser" / "__init__.py").write_text(
        "from kernelhub import ecosystem\n"
        f"def load():\n    return ecosystem.get_locked_kernel({REPO_ID!r}, "
        "trust_remote_code=True)\n")
    info = site / "lockuser-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lockuser\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("lockuser\n")
    wrong = LockEntry(REPO_ID, commit, {}, {VARIANT: "0" * 64})
    write_lock(info / "kernels.lock", [wrong], versions={REPO_ID: 1})
    env = {**base_env(tmp_path, server.url), "PYTHONPATH": str(site)}
    code = "import json, lockuser\nprint(json.dumps({'value': lockuser.load().VALUE}))"
    refused = python(code, env=env)
    assert refused.returncode != 0 and "lock file records" in refused.stderr, refused.stderr
    assert "IntegrityError: refusing to load" in refused.stderr
    assert "its metadata sha256 is" in refused.stderr and "lock file records 0000" in refused.stderr
    (info / HASHES_NAME).unlink()  # pins alone: loads, checked by nothing but the commit
    assert last_json(python(code, env=env)) == {"value": 7}


# -- a kernel with a kernel dependency -------------------------------------------------

RELU, SCALE = "acme/relu", "acme/scale"

# relu takes scale as edition-6 kernels do: kernels.get_kernel_dep, while it loads
# (kernels is the ecosystem's package under their loader, kernelhub's compatibility
# module under ours).
RELU_INIT = "from kernels import get_kernel_dep\nVALUE = ['relu', get_kernel_dep('acme/scale').VALUE]\n"

THEIR_TREE_LOADS = """
import json, sys
from pathlib import Path
from kernels import get_locked_kernel, load_kernel
from kernels._rust import KernelLocks
lock = Path(sys.argv[1])
locks = KernelLocks.from_json(lock.read_text())
pins = sorted({(d.repo_id, str(locks[d].commit)) for d in locks})
try:
    online = get_locked_kernel(sys.argv[2], lockfile=lock, trust_remote_code=True).VALUE
    cached = load_kernel(sys.argv[2], lockfile=lock).VALUE
except Exception as e:
    online = cached = repr(e)[:300]
print(json.dumps({"pins": pins, "online": online, "cached": cached}))
"""


def _publish(running: ServedHub, staging: Path, repo_id: str, init: str,
             depends: list[dict[str, object]], tag: str) -> str:
    """Publish a one-variant kernel on branch v1; return the branch's new commit."""
    from kernelhub_builder.ship.hf import HfPublisher

    staged = staging / repo_id.replace("/", "--") / tag / VARIANT
    make_variant(staged, name=repo_id.split("/")[1], init=init, kernel_depends=depends)
    HfPublisher(running.url, token=WRITE_TOKEN).publish(repo_id, "v1", {VARIANT: staged}, tag=tag,
                                                  message=tag)
    refs = HfApi(endpoint=running.url, token=False).list_repo_refs(repo_id, repo_type="kernel")
    return next(b.target_commit for b in refs.branches if b.name == "v1")


def test_a_kernel_with_a_dependency_loads_from_kernelhubs_lock_with_their_loader_and_ours(
        loaders: dict[str, Path], tmp_path: Path) -> None:
    with hub_api_server(tmp_path / "server") as running:
        staging = tmp_path / "staged"
        scale = _publish(running, staging, SCALE, "VALUE = 5\n", [], "v1.0.0")
        relu = _publish(running, staging, RELU, RELU_INIT,
                        [{"repo-id": SCALE, "version": 1}], "v1.0.0")
        project = tmp_path / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "p"\nversion = "0"\n[tool.kernels.dependencies]\n"{RELU}" = 1\n')
        env = base_env(tmp_path, running.url)
        proc = subprocess.run([str(Path(sys.executable).parent / "kernelhub"), "lock",
                               str(project)], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"{SCALE}: {scale}" in proc.stdout and f"{RELU}: {relu}" in proc.stdout
        lock = project / "kernels.lock"
        assert json.loads(lock.read_text()) == [
            {"dependency": {"repo-id": RELU, "version": 1}, "lock": {"commit": relu}},
            {"dependency": {"repo-id": SCALE, "version": 1}, "lock": {"commit": scale}}]
        # scale's v1 moves on after the lock: every locked load still takes the pinned one
        _publish(running, staging, SCALE, "VALUE = 6\n", [], "v1.1.0")

        theirs = reference_env(env, loaders["0.19.1"], running.url, tmp_path / "hf-cache")
        loaded = last_json(python(THEIR_TREE_LOADS, str(lock), RELU, env=theirs))
        assert loaded == {"pins": [[RELU, relu], [SCALE, scale]], "online": ["relu", 5],
                          "cached": ["relu", 5]}
        assert last_json(python(OURS, str(lock), RELU, env=env)) == {
            "values": [["relu", 5], ["relu", 5]]}

        # The lock of direct dependencies alone (what `kernelhub lock` wrote before): their
        # locked load finds no pin for relu's dependency, and neither does ours.
        lock.write_text(json.dumps(json.loads(lock.read_text())[:1]))
        (project / "kernelhub.lock").unlink()
        direct = last_json(python(THEIR_TREE_LOADS, str(lock), RELU, env=reference_env(
            env, loaders["0.19.1"], running.url, tmp_path / "hf-cache-2")))
        assert f"Kernel `{SCALE}` is not locked" in str(direct["online"]), direct
        refused = python(OURS, str(lock), RELU, env=env)
        assert refused.returncode != 0, refused.stdout
        assert f"DependencyError: cannot satisfy {RELU} -> {SCALE}@v1: lock file" in refused.stderr
        assert f"has no entry for {SCALE}" in refused.stderr
