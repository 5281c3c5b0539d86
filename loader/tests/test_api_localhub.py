"""The user's story against the real LocalHub: publish with git, load, load again warm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from kernelhub import api
from kernelhub.errors import HubError
from kernelhub.load import pipeline
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/scale"

# Real torch ops under the variant's unique namespace, as a compiled build registers them.
INIT = """\
import torch
_lib = torch.library.Library(__name__, "DEF")
_lib.define("scale(Tensor x) -> Tensor")
_lib.impl("scale", lambda x: x * FACTOR, "CompositeExplicitAutograd")
ops = getattr(torch.ops, __name__)
FACTOR = {factor}
"""


def _publish(hub: LocalPublisher, tmp_path: Path, factor: int, tag: str) -> str:
    staged = tmp_path / "staging" / tag / "torch-universal"
    make_variant(staged, name="scale", init=INIT.format(factor=factor))
    result = hub.publish(REPO, "v1", {"torch-universal": staged}, tag=tag, message=f"release {tag}")
    assert result.commit is not None
    return result.commit


def _no_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was spawned: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_publish_then_load_two_releases_side_by_side(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, 2, "v1.0.0")
    _publish(hub, tmp_path, 3, "v1.1.0")
    old = api.get_kernel(REPO, "v1.0.0", hub=hub)
    new = api.get_kernel(REPO, 1, hub=hub)
    x = torch.arange(3.0)
    assert torch.equal(old.ops.scale(x), x * 2)
    assert torch.equal(new.ops.scale(x), x * 3)
    assert old.__name__ != new.__name__


def test_warm_pinned_load_runs_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    commit = _publish(hub, tmp_path, 5, "v1.0.0")
    first = api.get_kernel(REPO, revision=commit, hub=hub)
    pipeline._memo.clear()  # as in a new process: only the disk cache is warm
    _no_subprocesses(monkeypatch)
    assert api.get_kernel(REPO, revision=commit, hub=hub) is first
    assert api.get_kernel(REPO, commit, hub=str(tmp_path / "hub")) is first
    # Unpinned: must ask git for the refs (the sentinel's failure arrives as a HubError).
    with pytest.raises(HubError, match="a process was spawned"):
        api.get_kernel(REPO, 1, hub=hub)


def test_offline_after_one_online_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, 7, "v1.0.0")
    module = api.get_kernel(REPO, ">=1.0", hub=hub)
    pipeline._memo.clear()
    monkeypatch.setenv("KERNELHUB_OFFLINE", "1")
    _no_subprocesses(monkeypatch)
    assert api.get_kernel(REPO, ">=1.0", hub=hub) is module
    assert api.get_kernel(REPO, hub=hub) is module  # default resolution from refs.json


WARM_LOAD = """
import sys, kernelhub
spec = {"revision": sys.argv[2]} if sys.argv[3] == "pinned" else {"version": 1}
print(kernelhub.get_kernel(sys.argv[1], hub=sys.argv[4], **spec).FACTOR)
print(" ".join(sorted(sys.modules)))
"""

NOT_ON_THE_WARM_PATH = ("huggingface_hub", "tomllib", "tomli", "kernelhub.signing.sshsig",
                        "kernelhub.lock", "filelock",
                        "packaging", "kernelhub.layer", "kernelhub.hub.git",
                        "kernelhub.signing.policy", "kernelhub.formats.release_manifest",
                        "kernelhub.hub.hashes", "kernelhub.signing.sigstore",
                        "kernelhub.hub.endpoints", "kernelhub.deps.loading",
                        "kernelhub.cache.root", "kernelhub.printable",
                        "kernelhub.redact", "kernelhub.formats.build_layout",
                        "kernelhub.formats.minver", "kernelhub.formats.provenance")
"""What a warm load with no signing policy, no config file and no lock never uses: each
costs start-up time in every process that loads a kernel. (``kernelhub.signing.verified_marks`` is
used: the code compiled from a verified source is recalled under its HMAC, which saves more
than the module's standard-library imports cost.)"""


@pytest.mark.parametrize("how", ["pinned", "offline"])
def test_a_warm_load_in_a_new_process_imports_only_what_it_uses(
    tmp_path: Path, how: str
) -> None:
    import os
    import sys

    hub = LocalPublisher(tmp_path / "hub")
    commit = _publish(hub, tmp_path, 4, "v1.0.0")
    api.get_kernel(REPO, revision=commit, hub=hub)  # fills the cache this process shares
    api.get_kernel(REPO, 1, hub=hub)  # and the refs an offline load resolves from
    env = {**os.environ, "KERNELHUB_TRUSTED_ORGS": "kernels-community"}
    if how == "offline":
        env["KERNELHUB_OFFLINE"] = "1"
    done = subprocess.run([sys.executable, "-c", WARM_LOAD, REPO, commit, how,
                           str(tmp_path / "hub")], env=env, capture_output=True, text=True,
                          check=True)
    factor, modules = done.stdout.splitlines()[-2:]
    assert factor == "4"
    imported = set(modules.split())
    assert not {m for m in imported if m.split(".")[0] in NOT_ON_THE_WARM_PATH
                or m in NOT_ON_THE_WARM_PATH}
