"""Kernel dependencies (``kernel-depends``): the format as the ecosystem writes it, the tree
over a real LocalHub, cycles and unsatisfiable pins as one-line errors, ``kernelhub info
--dep-tree``, and ``get_kernel_dep`` while a kernel loads."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from kernelhub.api import (
    dependency_tree,
    load_locked_entry,
    load_locked_kernel,
    lock_project,
    resolve_kernel,
)
from kernelhub.cli import main
from kernelhub.deps import (
    DependencyError,
    KernelDependency,
    Located,
    get_kernel_dep,
    parse_kernel_depends,
    providing,
    resolve_tree,
)
from kernelhub.errors import LockFileError
from kernelhub.lock import HASHES_NAME, lock_entry
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)


def test_the_format_is_read_as_strictly_as_the_ecosystem_reads_it() -> None:
    deps = parse_kernel_depends([{"repo-id": "kernels-community/activation", "version": 1},
                                 {"repo-id": "acme/helpers", "revision": "v2.1.0"}], "m")
    assert deps == (KernelDependency("kernels-community/activation", 1),
                    KernelDependency("acme/helpers", revision="v2.1.0"))
    assert [str(d) for d in deps] == ["kernels-community/activation@v1", "acme/helpers@v2.1.0"]
    assert [d.to_json() for d in deps] == [
        {"repo-id": "kernels-community/activation", "version": 1},
        {"repo-id": "acme/helpers", "revision": "v2.1.0"}]
    assert parse_kernel_depends(None, "m") == ()


@pytest.mark.parametrize(("value", "why"), [
    ({"repo-id": "a/b", "version": 1}, "must be a list"),
    ([{"repo-id": "a/b"}], "exactly one of version and revision"),
    ([{"repo-id": "a/b", "version": 1, "revision": "main"}], "exactly one of version and revision"),
    ([{"repo-id": "a/b", "version": 1, "extra": 1}], "no other keys"),
    ([{"repo-id": "not a repo", "version": 1}], "is not 'org/name'"),
    ([{"repo-id": "a/b", "version": "1"}], "version must be a non-negative integer"),
    ([{"repo-id": "a/b", "version": True}], "version must be a non-negative integer"),
    ([{"repo-id": "a/b", "revision": ""}], "revision must be a branch, tag or commit"),
])
def test_malformed_dependencies(value: object, why: str) -> None:
    with pytest.raises(DependencyError, match=why):
        parse_kernel_depends(value, "metadata.json")


def _publish(hub: LocalPublisher, tmp: Path, repo: str, depends: list[dict[str, object]],
             major: int = 1, *, init: str = "VALUE = 42\n", tag: str | None = None) -> None:
    staging = tmp / "staging" / repo.replace("/", "--") / str(major)
    make_variant(staging / HOST, name=repo.split("/")[1], init=init, kernel_depends=depends)
    hub.publish(repo, f"v{major}", {HOST: staging / HOST}, tag=tag or f"v{major}.0.0",
                message="r")


@pytest.fixture
def hub(tmp_path: Path) -> LocalPublisher:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, "kernels-community/top", [
        {"repo-id": "kernels-community/mid", "version": 1},
        {"repo-id": "kernels-community/leaf", "revision": "v1.0.0"}])
    _publish(hub, tmp_path, "kernels-community/mid", [
        {"repo-id": "kernels-community/leaf", "version": 1}])
    _publish(hub, tmp_path, "kernels-community/leaf", [])
    return hub


def test_the_tree_resolves_every_dependency_to_a_commit_and_variant(hub: LocalPublisher) -> None:
    tree = dependency_tree("kernels-community/top", 1, hub=hub)
    assert tree.to_json() == {"kernels-community/mid": {"kernels-community/leaf": {}},
                              "kernels-community/leaf": {}}
    assert [n.location.name for n in tree.walk()] == [
        "kernels-community/leaf", "kernels-community/mid", "kernels-community/leaf",
        "kernels-community/top"]  # dependencies first: the load order
    assert all(len(n.location.commit or "") == 40 and n.location.variant == HOST
               for n in tree.walk())


def test_info_dep_tree(hub: LocalPublisher, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "kernels-community/top", "--hub", str(hub.root), "--dep-tree"]) == 0
    out = capsys.readouterr().out
    assert ("kernel-depends: kernels-community/mid@v1, kernels-community/leaf@v1.0.0"
            in " ".join(out.split()))
    tree = out.split("dependency tree:\n", 1)[1].splitlines()
    assert tree[0] == "  kernels-community/top"
    assert tree[1].startswith("  |-- kernels-community/mid (") and tree[1].endswith(f" {HOST})")
    assert tree[2].startswith("  |   `-- kernels-community/leaf (")
    assert tree[3].startswith("  `-- kernels-community/leaf (")


def test_a_cycle_is_one_line(hub: LocalPublisher, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    _publish(hub, tmp_path, "kernels-community/leaf",
             [{"repo-id": "kernels-community/top", "version": 1}], major=2)
    _publish(hub, tmp_path, "kernels-community/top",
             [{"repo-id": "kernels-community/leaf", "version": 2}], major=2)
    assert main(["info", "kernels-community/top", "--hub", str(hub.root), "--dep-tree"]) == 1
    err = capsys.readouterr().err
    assert err == ("kernelhub: error: kernel dependency cycle: kernels-community/top -> "
                   "kernels-community/leaf@v2 -> kernels-community/top@v1\n")


def test_an_unsatisfiable_pin_names_the_chain(hub: LocalPublisher, tmp_path: Path) -> None:
    _publish(hub, tmp_path, "kernels-community/mid",
             [{"repo-id": "kernels-community/leaf", "version": 7}], major=2)
    with pytest.raises(DependencyError) as error:
        dependency_tree("kernels-community/mid", 2, hub=hub)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("cannot satisfy kernels-community/mid -> "
                              "kernels-community/leaf@v7: ")
    assert "no version 7" in message or "v7" in message


def test_get_kernel_dep_serves_the_loading_kernel_s_dependencies() -> None:
    helper = ModuleType("helper")
    with pytest.raises(DependencyError, match="only works while a kernel is being loaded"):
        get_kernel_dep("acme/helper")
    with providing({"acme/helper": helper}):
        assert get_kernel_dep("acme/helper") is helper
        with pytest.raises(DependencyError, match=r"acme/other is not a dependency .* "
                                                  r"\(it has: acme/helper\)"):
            get_kernel_dep("acme/other")
    with pytest.raises(DependencyError):
        get_kernel_dep("acme/helper")


# -- locking the tree ---------------------------------------------------------------------

TOP_USES_ITS_DEPENDENCIES = (
    "from kernelhub.deps import get_kernel_dep\n"
    "VALUE = (get_kernel_dep('kernels-community/mid').VALUE,\n"
    "         get_kernel_dep('kernels-community/leaf').VALUE)\n")


def _project(tmp: Path, **majors: int) -> Path:
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    deps = "".join(f'"kernels-community/{name}" = {major}\n' for name, major in majors.items())
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\n[tool.kernels.dependencies]\n{deps}')
    return project


@pytest.fixture
def locked(hub: LocalPublisher, tmp_path: Path) -> Path:
    """``top`` (reads its dependencies while it loads) locked with its whole tree."""
    _publish(hub, tmp_path, "kernels-community/top", [
        {"repo-id": "kernels-community/mid", "version": 1},
        {"repo-id": "kernels-community/leaf", "revision": "v1.0.0"}],
        init=TOP_USES_ITS_DEPENDENCIES, tag="v1.0.1")
    project = _project(tmp_path, top=1)
    lock_project(project, hub=hub)
    return project / "kernels.lock"


def test_kernelhub_lock_pins_every_declared_dependency_as_declared(
        hub: LocalPublisher, locked: Path) -> None:
    commits = {r: resolve_kernel(f"kernels-community/{r}", 1, hub=hub).commit
               for r in ("top", "mid", "leaf")}
    pins = [(e["dependency"], e["lock"]["commit"]) for e in json.loads(locked.read_text())]
    assert pins == [  # the ecosystem's locked loads look each up by the dependency as declared
        ({"repo-id": "kernels-community/top", "version": 1}, commits["top"]),
        ({"repo-id": "kernels-community/mid", "version": 1}, commits["mid"]),
        ({"repo-id": "kernels-community/leaf", "version": 1}, commits["leaf"]),
        ({"repo-id": "kernels-community/leaf", "revision": "v1.0.0"}, commits["leaf"])]
    hashed = json.loads((locked.parent / HASHES_NAME).read_text())
    assert [(e["repo_id"], e["sha"], list(e["variants"])) for e in hashed] == [
        (f"kernels-community/{r}", commits[r], [HOST]) for r in ("leaf", "mid", "top")]


def test_a_locked_load_takes_the_dependencies_from_the_lock(hub: LocalPublisher, locked: Path,
                                                            tmp_path: Path) -> None:
    _publish(hub, tmp_path, "kernels-community/leaf", [], init="VALUE = 2\n", tag="v1.1.0")
    _publish(hub, tmp_path, "kernels-community/mid", [], init="VALUE = 3\n", tag="v1.1.0")
    # v1 of both moved on since the lock: a fresh resolution would load (3, 2)
    module = load_locked_kernel("kernels-community/top", lockfile=locked, hub=hub,
                                trust_remote_code=True)
    assert module.VALUE == (42, 42)


def test_a_dependency_the_lock_lacks_or_mishashes_is_refused(hub: LocalPublisher, locked: Path
                                                             ) -> None:
    pins = json.loads(locked.read_text())
    locked.write_text(json.dumps([p for p in pins
                                  if p["dependency"]["repo-id"] != "kernels-community/mid"]))
    with pytest.raises(DependencyError) as error:
        load_locked_kernel("kernels-community/top", lockfile=locked, hub=hub,
                           trust_remote_code=True)
    message = str(error.value)
    assert "\n" not in message and message.startswith(
        "cannot satisfy kernels-community/top -> kernels-community/mid@v1: lock file ")
    assert "has no entry for kernels-community/mid" in message and "`kernelhub lock`" in message

    locked.write_text(json.dumps(pins))
    hashes = locked.parent / HASHES_NAME
    tampered = json.loads(hashes.read_text())
    tampered[0]["kernelhub"]["metadata-sha256"][HOST] = "0" * 64  # leaf's, a dependency
    hashes.write_text(json.dumps(tampered))
    with pytest.raises(DependencyError, match=r"^cannot satisfy kernels-community/top -> "
                       r"kernels-community/mid@v1 -> kernels-community/leaf@v1: refusing to "
                       r"load .* of kernels-community/leaf .* the lock file records 0000"):
        load_locked_kernel("kernels-community/top", lockfile=locked, hub=hub,
                           trust_remote_code=True)


def test_an_entry_loaded_without_its_lock_loads_no_unlocked_dependency(
        hub: LocalPublisher, locked: Path) -> None:
    entry = lock_entry("kernels-community/top", locked)
    with pytest.raises(DependencyError, match=r"mid@v1: lock file given to load_locked_entry "
                                              r"alone \(pass pins=.* has no entry for "):
        load_locked_entry(entry, hub=hub, trust_remote_code=True)


def test_a_tree_needing_two_commits_of_one_repository_is_refused(
        hub: LocalPublisher, tmp_path: Path) -> None:
    _publish(hub, tmp_path, "kernels-community/leaf", [], major=2)
    _publish(hub, tmp_path, "kernels-community/side",
             [{"repo-id": "kernels-community/leaf", "version": 2}])
    project = _project(tmp_path, top=1, side=1)
    with pytest.raises(LockFileError) as error:
        lock_project(project, hub=hub)
    message = str(error.value)
    assert "\n" not in message and message.startswith(
        "cannot lock kernels-community/leaf at two commits (")
    assert " for kernels-community/side@v1 -> kernels-community/leaf@v2, " in message
    assert (" for kernels-community/top@v1 -> kernels-community/mid@v1 -> "
            "kernels-community/leaf@v1); ") in message
    assert message.endswith("make every kernel ask for one version of it")
    assert not (project / "kernels.lock").exists()


def test_a_lock_pinning_two_commits_of_one_repository_is_refused(
        hub: LocalPublisher, locked: Path) -> None:
    pins = json.loads(locked.read_text())
    pins[-1]["lock"]["commit"] = "e" * 40  # leaf@v1.0.0, as another tool might write it
    locked.write_text(json.dumps(pins))
    with pytest.raises(LockFileError) as error:
        load_locked_kernel("kernels-community/top", lockfile=locked, hub=hub,
                           trust_remote_code=True)
    message = str(error.value)
    assert "\n" not in message
    assert "pins kernels-community/leaf to two commits" in message
    assert "run `kernelhub lock` again" in message


def test_a_diamond_is_resolved_once_per_kernel() -> None:
    """30 levels of two kernels that each need both kernels below: 2**30 paths. Each
    dependency is resolved once; its subtree is shared."""
    depth = 30

    def located(level: int, side: str) -> Located:
        below = () if level == depth else tuple(
            KernelDependency(f"org/k{level + 1}{s}", 1) for s in "ab")
        return Located(f"org/k{level}{side}", "0" * 40, HOST, below)

    asked: list[str] = []

    def resolve(dep: KernelDependency) -> Located:
        asked.append(dep.repo_id)
        assert len(asked) <= 2 * depth, "a dependency was resolved again"
        return located(int(dep.repo_id[5:-1]), dep.repo_id[-1])

    tree = resolve_tree(located(0, "a"), resolve)
    assert len(asked) == len(set(asked)) == 2 * depth
    node = tree
    for level in range(1, depth + 1):
        assert [repo for repo, _ in node.deps] == [f"org/k{level}a", f"org/k{level}b"]
        assert node.deps[0][1].deps == node.deps[1][1].deps  # one subtree, shared
        node = node.deps[1][1]
    assert node.deps == ()


def test_a_shared_subtree_that_reaches_back_up_the_path_is_still_a_cycle() -> None:
    """x@v1 (needing r@v2) resolves cleanly under the root, but under r@v1 it needs r
    again: sharing x's subtree there must not hide the cycle."""
    graph = {"org/root": ("org/x@1", "org/r@1"), "org/x@1": ("org/r@2",),
             "org/r@1": ("org/x@1",), "org/r@2": ()}

    def located(key: str) -> Located:
        return Located(key.partition("@")[0], "0" * 40, HOST, tuple(
            KernelDependency(d.partition("@")[0], int(d.partition("@")[2]))
            for d in graph[key]))

    def resolve(dep: KernelDependency) -> Located:
        return located(f"{dep.repo_id}@{dep.version}")

    with pytest.raises(DependencyError, match=r"^kernel dependency cycle: org/root -> "
                                              r"org/r@v1 -> org/x@v1 -> org/r@v2$"):
        resolve_tree(located("org/root"), resolve)
