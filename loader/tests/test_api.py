"""get_kernel / has_kernel / get_local_kernel over a recording Hub double."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.errors import (
    IntegrityError,
    KernelHubError,
    NoCompatibleVariantError,
    TrustError,
    VersionSpecError,
)
from kernelhub.load import pipeline
from kernelhub.load.importer import loaded_variants
from kernelhub.system import detect_system
from kh_doubles import DirHub, make_variant

REPO = "kernels-community/kern"
HOST_COMPILED = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)


def _variant(tmp_path: Path, label: str, **kw: object) -> Path:
    path = tmp_path / "staging" / label
    make_variant(path, init=f"LABEL = {label!r}\n", **kw)  # type: ignore[arg-type]
    return path


def _names(hub: DirHub) -> list[str]:
    return [c[0] for c in hub.calls]


def test_default_loads_the_highest_major_and_the_best_variant(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "v1-universal")})
    dirhub.add(REPO, "v2", {
        "torch-universal": _variant(tmp_path, "v2-universal"),
        HOST_COMPILED: _variant(tmp_path, "v2-compiled"),
        "torch299-cxx11-cpu-x86_64-linux": _variant(tmp_path, "v2-future"),
    })
    module = api.get_kernel(REPO, hub=dirhub)
    assert module.LABEL == "v2-compiled"
    assert api.get_kernel(REPO, 1, hub=dirhub).LABEL == "v1-universal"


def test_version_forms(tmp_path: Path, dirhub: DirHub) -> None:
    c1 = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "r100")}, tag="v1.0.0")
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "r110")}, tag="v1.1.0")
    assert api.get_kernel(REPO, ">=1.0,<1.1", hub=dirhub).LABEL == "r100"
    assert api.get_kernel(REPO, "v1.1.0", hub=dirhub).LABEL == "r110"
    assert api.get_kernel(REPO, revision=c1, hub=dirhub).LABEL == "r100"
    assert api.get_kernel(REPO, version=1, hub=dirhub).LABEL == "r110"


def test_unknown_version_lists_what_exists(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "a")}, tag="v1.0.0")
    with pytest.raises(VersionSpecError, match=r"no version 3 \(branch v3\); branches: v1; release tags: v1.0.0"):
        api.get_kernel(REPO, 3, hub=dirhub)
    with pytest.raises(VersionSpecError, match="not both"):
        api.get_kernel(REPO, 1, revision="v1", hub=dirhub)


def test_no_compatible_variant_lists_every_rejection_and_the_system(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {
        "torch299-cxx11-cpu-x86_64-linux": _variant(tmp_path, "future"),
        "torch213-cxx11-cpu-aarch64-linux": _variant(tmp_path, "arm"),
    })
    with pytest.raises(NoCompatibleVariantError) as err:
        api.get_kernel(REPO, 1, hub=dirhub)
    message = str(err.value)
    assert "torch299-cxx11-cpu-x86_64-linux: built for torch 2.99" in message
    assert "torch213-cxx11-cpu-aarch64-linux: aarch64 build, this machine is x86_64" in message
    assert detect_system().describe() in message
    assert not api.has_kernel(REPO, 1, hub=dirhub)


def test_has_kernel(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "a")})
    assert api.has_kernel(REPO, 1, hub=dirhub)
    assert not api.has_kernel(REPO, 2, hub=dirhub)
    assert not api.has_kernel("kernels-community/missing", hub=dirhub)
    assert not [m for m in loaded_variants().values() if getattr(m.module, "LABEL", None) == "a"]
    with pytest.raises(VersionSpecError):
        api.has_kernel(REPO, ">=nonsense", hub=dirhub)


def test_trust_is_checked_on_every_load_including_warm_and_memoized(
    tmp_path: Path, dirhub: DirHub
) -> None:
    commit = dirhub.add("someone/kern", "v1", {"torch-universal": _variant(tmp_path, "a")})
    with pytest.raises(TrustError):
        api.get_kernel("someone/kern", 1, hub=dirhub)
    assert api.get_kernel("someone/kern", 1, hub=dirhub, trust_remote_code=True).LABEL == "a"
    with pytest.raises(TrustError):
        api.get_kernel("someone/kern", 1, hub=dirhub)
    with pytest.raises(TrustError):
        api.get_kernel("someone/kern", revision=commit, hub=dirhub)


def test_warm_pinned_load_makes_no_hub_call(tmp_path: Path, dirhub: DirHub) -> None:
    commit = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "pinned")})
    api.get_kernel(REPO, revision=commit, hub=dirhub)
    assert _names(dirhub) == ["list_variants", "fetch_variant"]
    dirhub.calls.clear()
    pipeline._memo.clear()  # a fresh process: only the disk cache is warm
    assert api.get_kernel(REPO, revision=commit, hub=dirhub).LABEL == "pinned"
    assert dirhub.calls == []


def test_memoized_calls_skip_resolution(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "a")})
    first = api.get_kernel(REPO, 1, hub=dirhub)
    dirhub.calls.clear()
    assert api.get_kernel(REPO, 1, hub=dirhub) is first
    assert dirhub.calls == []


def test_unpinned_warm_load_asks_only_for_refs(tmp_path: Path, dirhub: DirHub) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "a")})
    api.get_kernel(REPO, 1, hub=dirhub)
    pipeline._memo.clear()
    dirhub.calls.clear()
    api.get_kernel(REPO, 1, hub=dirhub)
    assert _names(dirhub) == ["list_refs"]


def test_offline_resolves_from_the_cache(
    tmp_path: Path, dirhub: DirHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "cached")}, tag="v1.0.0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(KernelHubError, match="offline mode: the list of versions of kernels-community/kern is not in the cache"):
        api.get_kernel(REPO, 1, hub=dirhub)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    api.get_kernel(REPO, 1, hub=dirhub)
    pipeline._memo.clear()
    dirhub.calls.clear()
    monkeypatch.setenv("KERNELHUB_OFFLINE", "1")
    assert api.get_kernel(REPO, "v1.0.0", hub=dirhub).LABEL == "cached"
    assert dirhub.calls == []
    newer = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "new")})
    with pytest.raises(KernelHubError, match=f"offline mode: {REPO} at {newer[:12]} is not in the cache"):
        api.get_kernel(REPO, revision=newer, hub=dirhub)


def test_tampered_cache_is_refused_on_a_warm_load(tmp_path: Path, dirhub: DirHub) -> None:
    commit = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "t", files={"x.py": "A = 1\n"})})
    path = api.locate_kernel(REPO, revision=commit, hub=dirhub)
    (path / "x.py").write_text("A = 2\n")
    with pytest.raises(IntegrityError, match=r"x\.py: sha256 does not match"):
        api.get_kernel(REPO, revision=commit, hub=dirhub)


def test_hub_given_as_a_path_string_uses_the_local_hub(tmp_path: Path) -> None:
    hub = api.open_hub_arg(str(tmp_path / "somewhere"))
    assert hub.root == tmp_path / "somewhere"  # type: ignore[attr-defined]  # a LocalHub's
    assert api.open_hub_arg(None).key == api.open_hub_arg(str(tmp_path / "default-hub")).key


# -- local builds -------------------------------------------------------------------


def _local_tree(tmp_path: Path) -> Path:
    """A project with kernels-src/kern (build.toml) and the builder's build/kern/<variant>."""
    root = tmp_path / "project"
    src = root / "kernels-src" / "kern-src-dir"
    src.mkdir(parents=True)
    (src / "build.toml").write_text('[general]\nname = "kern"\n')
    (root / "kernels.toml").write_text('kernels = ["kern"]\n')
    make_variant(root / "build" / "kern" / HOST_COMPILED, init="LABEL = 'compiled'\n")
    make_variant(root / "build" / "kern" / "torch-universal", init="LABEL = 'universal'\n")
    return root


def test_local_kernel_path_forms(tmp_path: Path) -> None:
    root = _local_tree(tmp_path)
    variant = root / "build" / "kern" / HOST_COMPILED
    assert api.find_local_variant(root / "kernels-src" / "kern-src-dir") == variant
    assert api.find_local_variant(root / "build" / "kern") == variant
    assert api.find_local_variant(root / "build" / "kern" / "torch-universal").name == "torch-universal"
    assert api.get_local_kernel(root / "kernels-src" / "kern-src-dir").LABEL == "compiled"

    # The ecosystem's layout: <kernel>/build/<variant>.
    eco = tmp_path / "eco" / "kern"
    shutil.copytree(root / "build" / "kern", eco / "build")
    assert api.find_local_variant(eco) == eco / "build" / HOST_COMPILED
    assert api.find_local_variant(eco / "build") == eco / "build" / HOST_COMPILED


def test_local_kernel_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(KernelHubError, match=r"no built variants found .*empty/build/empty; .*`builder build`"):
        api.get_local_kernel(tmp_path / "empty")
    make_variant(tmp_path / "b" / "torch299-cxx11-cpu-x86_64-linux")
    with pytest.raises(NoCompatibleVariantError, match=r"built for torch 2\.99"):
        api.get_local_kernel(tmp_path / "b")
    with pytest.raises(KernelHubError, match="does not exist"):
        api.get_local_kernel(tmp_path / "nope")


def test_variants_json_is_what_the_hub_listed(tmp_path: Path, dirhub: DirHub) -> None:
    commit = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, "a")})
    api.resolve_kernel(REPO, 1, hub=dirhub)
    cached = tmp_path / "cache" / dirhub.key / REPO / commit / "variants.json"
    assert json.loads(cached.read_text()) == ["torch-universal"]
