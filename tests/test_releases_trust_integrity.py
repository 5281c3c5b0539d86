"""Releases, trust and integrity as a user meets them: several releases published over
time resolve by the version grammar; code from an untrusted org does not run without
consent; a tampered cache is refused before anything of it is imported."""

from __future__ import annotations

import json
from pathlib import Path

import kernelhub
import pytest
from e2e import REPO, Workspace, builder, make_project, run_python, set_release
from kernelhub.errors import TrustError, VersionSpecError


def release_of(module) -> str:
    return json.loads((Path(module.__file__).parent / "metadata.json").read_text())["release"]


@pytest.fixture(scope="module")
def releases(workspace: Workspace) -> tuple[Workspace, Path]:
    """1.0.0 then 1.1.0 on v1, 2.0.0 on v2 — published one after another."""
    ws = Workspace(root=workspace.root / "releases", out=workspace.root / "releases/build",
                   hub=workspace.root / "releases/hub")
    project = make_project(ws.root / "project", "kernels-community")
    for version, release in ((1, "1.0.0"), (1, "1.1.0"), (2, "2.0.0")):
        set_release(project, version, release)
        builder(ws, "build", project=project)
        builder(ws, "publish", "--hub", str(ws.hub), project=project)
    return ws, project


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("KERNELHUB_TRUSTED_ORGS", raising=False)
    return tmp_path / "cache"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(1, "1.1.0"), (">=1.0,<1.1", "1.0.0"), ("v2.0.0", "2.0.0"), (2, "2.0.0"), ("~=1.0", "1.1.0")],
)
def test_version_spec_picks_the_release(releases, isolated_cache, spec, expected) -> None:
    ws, _ = releases
    module = kernelhub.get_kernel("kernels-community/scale_stable", version=spec, hub=ws.hub)
    assert release_of(module) == expected


def test_releases_load_side_by_side_in_one_process(releases, isolated_cache) -> None:
    import torch

    ws, _ = releases
    old = kernelhub.get_kernel("kernels-community/scale_stable", version="v1.0.0", hub=ws.hub)
    new = kernelhub.get_kernel("kernels-community/scale_stable", version=2, hub=ws.hub)
    assert old.__name__ != new.__name__
    x = torch.arange(4.0)
    assert torch.equal(old.scale(x, 2.0), new.scale(x, 2.0))


@pytest.mark.parametrize("spec", [3, "v9.9.9", ">=5"])
def test_unknown_version_lists_what_exists(releases, isolated_cache, spec) -> None:
    ws, _ = releases
    with pytest.raises(VersionSpecError) as e:
        kernelhub.get_kernel("kernels-community/scale_stable", version=spec, hub=ws.hub)
    message = str(e.value)
    for existing in ("v1", "v2", "v1.0.0", "v1.1.0", "v2.0.0"):
        assert existing in message, message


def test_untrusted_org_is_refused_without_trust_remote_code(workspace: Workspace,
                                                            isolated_cache) -> None:
    ws = Workspace(root=workspace.root / "untrusted", out=workspace.root / "untrusted/build",
                   hub=workspace.root / "untrusted/hub")
    project = make_project(ws.root / "project", "someone-else")
    builder(ws, "build", project=project)
    builder(ws, "publish", "--hub", str(ws.hub), project=project)

    with pytest.raises(TrustError) as e:
        kernelhub.get_kernel("someone-else/scale_stable", version=2, hub=ws.hub)
    assert "trust_remote_code" in str(e.value)
    assert not isolated_cache.exists() or not any(isolated_cache.rglob("*.so")), \
        "nothing of an untrusted kernel may be fetched"
    module = kernelhub.get_kernel("someone-else/scale_stable", version=2, hub=ws.hub,
                                  trust_remote_code=True)
    assert module.scale is not None


LOAD = ("import kernelhub; kernelhub.get_kernel('kernels-community/activation', version=1);"
        "print(kernelhub.locate_kernel('kernels-community/activation', version=1))")
"""Loads the kernel, then prints its variant dir in the cache (what runs is a private,
verified copy of it: the module's own file is elsewhere)."""


def test_tampered_byte_in_cache_is_refused_on_next_load(published: Workspace) -> None:
    env = published.env(cache="cache-tamper")
    python = REPO / ".venv/bin/python"
    first = run_python(python, LOAD, env)
    variant_dir = Path(first.stdout.strip().splitlines()[-1])
    target = variant_dir / "layers.py"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))

    second = run_python(python, LOAD, env, check=False)
    assert second.returncode != 0
    assert "IntegrityError" in second.stderr
    assert str(target) in second.stderr, second.stderr
