"""Loading what the ecosystem's 0.19 builder writes, through the load pipeline: the ZIP
build layout, kernel dependencies (a tree, loaded bottom-up, get_kernel_dep), the
kernels-minver and dirty-build checks, and the org's sigstore policy on the bytes that
are imported."""

from __future__ import annotations

import io
import json
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
from kernelhub.api import get_kernel, get_local_kernel
from kernelhub.deps import DependencyError
from kernelhub.errors import IntegrityError, SignatureError
from kernelhub.formats.metadata import (
    BackendInfo,
    Metadata,
    compute_digests,
    read_metadata_bytes,
    write_metadata,
)
from kernelhub.formats.minver import KernelsVersionError
from kernelhub.signing.sigstore import BUNDLE_FILE
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant, unique_id
from sigstore_test_instance import GITHUB, SigstoreTestInstance

HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)


def _zip(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()


def _zip_variant(dest: Path, members: dict[str, str], outside: dict[str, str] | None = None,
                 **extra: object) -> str:
    """A ZIP-layout variant as the 0.19 builder lays it out: the package in <id>.zip, the
    rest beside it; returns the id."""
    dest.mkdir(parents=True)
    module_id = unique_id("zipped")
    (dest / f"{module_id}.zip").write_bytes(_zip(members))
    for rel, text in (outside or {}).items():
        (dest / rel).write_text(text)
    metadata = Metadata(name="zipped", id=module_id, version=1, release="1.0.0",
                        backend=BackendInfo("cpu", []), digest_files=compute_digests(dest),
                        license="Apache-2.0", extra={"build-layout": "zip",
                                                     "kernels-minver": "0.19.0", **extra})
    write_metadata(dest, metadata)
    return module_id


def test_a_zip_layout_variant_loads_from_the_verified_archive(tmp_path: Path) -> None:
    variant = tmp_path / "torch-cpu"
    _zip_variant(variant, {"__init__.py": "from .helpers import twice\nVALUE = twice(21)\n",
                           "helpers.py": "def twice(x):\n    return 2 * x\n",
                           "layers/__init__.py": "NAME = 'layers'\n"})
    module = get_local_kernel(variant)
    assert module.VALUE == 42
    assert module.helpers.twice(2) == 4
    import importlib

    assert importlib.import_module(f"{module.__name__}.layers").NAME == "layers"
    assert not str(module.__file__).startswith(str(variant))  # the private verified copy
    assert not list(variant.rglob("__pycache__"))


def test_a_zip_archive_is_checked_before_anything_runs(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "torch-cpu"
    _zip_variant(shadow, {"__init__.py": "raise SystemExit('ran')\n", "extra.py": ""},
                 outside={"extra.py": "X = 1\n"})
    with pytest.raises(IntegrityError, match=r"member 'extra\.py' shadows the variant's file"):
        get_local_kernel(shadow)
    missing = tmp_path / "missing" / "torch-cpu"
    module_id = _zip_variant(missing, {"__init__.py": ""}, outside={"_ops.py": ""})
    (missing / f"{module_id}.zip").unlink()
    meta = json.loads((missing / "metadata.json").read_text())
    meta["digest"]["files"].pop(f"{module_id}.zip")
    (missing / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match=f"there is no {module_id}.zip"):
        get_local_kernel(missing)
    changed = tmp_path / "changed" / "torch-cpu"
    module_id = _zip_variant(changed, {"__init__.py": "VALUE = 1\n"})
    (changed / f"{module_id}.zip").write_bytes(_zip({"__init__.py": "VALUE = 2\n"}))
    with pytest.raises(IntegrityError, match="sha256 does not match"):
        get_local_kernel(changed)


def test_kernels_minver_and_dirty_builds_at_load(tmp_path: Path) -> None:
    newer = tmp_path / "newer" / "torch-cpu"
    make_variant(newer, name="newer")
    meta = json.loads((newer / "metadata.json").read_text())
    (newer / "metadata.json").write_text(json.dumps({**meta, "kernels-minver": "0.20.0"}))
    with pytest.raises(KernelsVersionError, match=r"needs kernels>=0\.20\.0"):
        get_local_kernel(newer)
    dirty = tmp_path / "dirty" / "torch-cpu"
    make_variant(dirty, name="dirty")
    meta = json.loads((dirty / "metadata.json").read_text())
    meta["provenance"] = {"kernel-builder": {"version": "0.19.1"},
                          "kernel": {"commit": "a" * 40, "dirty": True}}
    (dirty / "metadata.json").write_text(json.dumps(meta))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert get_local_kernel(dirty).VALUE == 42
    assert any("built from a dirty git tree (kernel source" in str(w.message) for w in seen)


# -- kernel dependencies -------------------------------------------------------------


def _publish(hub: LocalPublisher, tmp: Path, repo: str, init: str,
             depends: list[dict[str, object]], major: int = 1) -> None:
    staging = tmp / "staging" / repo.replace("/", "--") / str(major)
    make_variant(staging / HOST, name=repo.split("/")[1].replace("-", "_"), init=init)
    meta = json.loads((staging / HOST / "metadata.json").read_text())
    (staging / HOST / "metadata.json").write_text(json.dumps({**meta, "kernel-depends": depends}))
    hub.publish(repo, f"v{major}", {HOST: staging / HOST}, tag=f"v{major}.0.0", message="r")


USES_DEP = ("from kernelhub.deps import get_kernel_dep\n"
            "_leaf = get_kernel_dep('kernels-community/leaf')\n"
            "VALUE = _leaf.VALUE + 1\n")


def test_dependencies_load_first_and_serve_get_kernel_dep(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, "kernels-community/leaf", "VALUE = 40\n", [])
    _publish(hub, tmp_path, "kernels-community/mid", USES_DEP,
             [{"repo-id": "kernels-community/leaf", "version": 1}])
    _publish(hub, tmp_path, "kernels-community/top",  # the ecosystem's spelling
             "from kernels import get_kernel_dep\n"
             "VALUE = get_kernel_dep('kernels-community/mid').VALUE + 1\n",
             [{"repo-id": "kernels-community/mid", "revision": "v1.0.0"}])
    assert get_kernel("kernels-community/top", 1, hub=hub).VALUE == 42


def test_a_cycle_imports_nothing(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, "kernels-community/a", "raise SystemExit('a ran')\n",
             [{"repo-id": "kernels-community/b", "version": 1}])
    _publish(hub, tmp_path, "kernels-community/b", "raise SystemExit('b ran')\n",
             [{"repo-id": "kernels-community/a", "version": 1}])
    before = set(sys.modules)
    with pytest.raises(DependencyError, match=r"^kernel dependency cycle: kernels-community/a -> "
                                              r"kernels-community/b@v1 -> kernels-community/a@v1$"):
        get_kernel("kernels-community/a", 1, hub=hub)
    assert not {m for m in set(sys.modules) - before if m.startswith("_")}


def test_an_unsatisfiable_pin_is_one_line(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, "kernels-community/leaf", "VALUE = 40\n", [])
    _publish(hub, tmp_path, "kernels-community/mid", USES_DEP,
             [{"repo-id": "kernels-community/leaf", "version": 7}])
    with pytest.raises(DependencyError) as error:
        get_kernel("kernels-community/mid", 1, hub=hub)
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("cannot satisfy kernels-community/mid -> "
                                       "kernels-community/leaf@v7: ")


def test_a_dependency_from_an_untrusted_org_needs_trust(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, "someone/leaf", "VALUE = 40\n", [])
    _publish(hub, tmp_path, "kernels-community/mid",
             "from kernelhub.deps import get_kernel_dep\n"
             "VALUE = get_kernel_dep('someone/leaf').VALUE + 2\n",
             [{"repo-id": "someone/leaf", "version": 1}])
    with pytest.raises(DependencyError, match="organisation 'someone' is not trusted"):
        get_kernel("kernels-community/mid", 1, hub=hub)
    assert get_kernel("kernels-community/mid", 1, hub=hub, trust_remote_code=True).VALUE == 42


# -- sigstore at load -----------------------------------------------------------------


WORKFLOW = "https://github.com/acme/kernels/.github/workflows/build.yaml@refs/heads/main"


@pytest.fixture
def sigstore_config(isolated_settings: Path) -> SigstoreTestInstance:
    instance = SigstoreTestInstance()
    config = isolated_settings.parent / "config.toml"
    (config.parent / "trusted_root.json").write_bytes(instance.trusted_root())
    config.write_text(
        '[trust]\norgs = ["acme"]\n[signing.sigstore]\ntrusted-root = "trusted_root.json"\n'
        f'[signing.sigstore.orgs.acme]\nsigners = [{{issuer = "{GITHUB}", repository = '
        f'"acme/kernels", workflows = ["{WORKFLOW}"]}}]\n')
    return instance


def _signed(hub: LocalPublisher, tmp: Path, repo: str, instance: SigstoreTestInstance | None,
            identity: str = WORKFLOW) -> None:
    staging = tmp / "staging" / repo.replace("/", "--")
    make_variant(staging / HOST, name=repo.split("/")[1])
    if instance is not None:
        bundle = instance.sign(read_metadata_bytes(staging / HOST), identity=identity,
                               repository="acme/kernels")
        (staging / HOST / BUNDLE_FILE).write_bytes(bundle)
    hub.publish(repo, "v1", {HOST: staging / HOST}, tag="v1.0.0", message="r")


def test_the_sigstore_policy_decides_at_load(tmp_path: Path,
                                             sigstore_config: SigstoreTestInstance) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    _signed(hub, tmp_path, "acme/good", sigstore_config)
    _signed(hub, tmp_path, "acme/stranger", SigstoreTestInstance())
    _signed(hub, tmp_path, "acme/wrong-workflow", sigstore_config,
            WORKFLOW.replace("build.yaml", "nightly.yaml"))
    _signed(hub, tmp_path, "acme/unsigned", None)
    assert get_kernel("acme/good", 1, hub=hub).VALUE == 42
    for repo in ("acme/stranger", "acme/wrong-workflow"):
        with pytest.raises(SignatureError, match="sigstore signature does not verify"):
            get_kernel(repo, 1, hub=hub)
    with pytest.raises(SignatureError, match="has no sigstore signature"):
        get_kernel("acme/unsigned", 1, hub=hub)


def test_a_cached_variant_named_by_its_path_gets_the_sigstore_policy_too(
        tmp_path: Path, sigstore_config: SigstoreTestInstance, isolated_settings: Path) -> None:
    from kernelhub.api import locate_kernel

    hub = LocalPublisher(tmp_path / "hub")
    _signed(hub, tmp_path, "acme/stranger", SigstoreTestInstance())
    config = isolated_settings.parent / "config.toml"
    text = config.read_text()
    # Fetched while no policy named acme's signers, then loaded by path under one that does.
    config.write_text(text.replace("[signing.sigstore.orgs.acme]", "[signing.sigstore.orgs.x]"))
    path = locate_kernel("acme/stranger", 1, hub=hub)
    config.write_text(text)
    with pytest.raises(SignatureError, match="sigstore signature does not verify"):
        get_local_kernel(path)


# -- hostile archives and trees (issue 33) -------------------------------------------


@pytest.mark.parametrize(("members", "why"), [
    ({"__init__.py": "", "x": "file", "x/y.py": "Y = 1\n"}, "both a file and a folder"),
    ({"__init__.py": "", "x/y.py": "Y = 1\n", "x": "file"}, "both a file and a folder"),
    ({"__init__.py": "", "a/b.py": "B = 1\n", "a//b.py": "B = 2\n"}, "appears twice"),
    ({"__init__.py": "", "a/b.py": "B = 1\n", "./a/b.py": "B = 2\n"}, "appears twice"),
    ({"__init__.py": "", "_ops.py/x.py": ""}, "both a file and a folder"),
])
def test_a_zip_whose_members_collide_is_refused_before_anything_runs(
        tmp_path: Path, members: dict[str, str], why: str) -> None:
    variant = tmp_path / "torch-cpu"
    members = {**members, "__init__.py": "raise SystemExit('ran')\n"}
    _zip_variant(variant, members, outside={"_ops.py": ""})
    with pytest.raises(IntegrityError, match=why) as error:
        get_local_kernel(variant)
    assert "\n" not in str(error.value)


def test_a_diamond_of_dependencies_is_resolved_once_per_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each level's two kernels both need both of the next level's: 2**depth paths, and
    2 * depth kernels. Every kernel is read and imported once."""
    from kernelhub.load import pipeline

    depth = 6
    hub = LocalPublisher(tmp_path / "hub")
    _publish(hub, tmp_path, f"kernels-community/k{depth}-a", "VALUE = 1\n", [])
    _publish(hub, tmp_path, f"kernels-community/k{depth}-b", "VALUE = 1\n", [])
    for level in range(depth - 1, -1, -1):
        below = [{"repo-id": f"kernels-community/k{level + 1}-{s}", "version": 1} for s in "ab"]
        sides = "a" if level == 0 else "ab"
        for side in sides:
            _publish(hub, tmp_path, f"kernels-community/k{level}-{side}",
                     "from kernelhub.deps import get_kernel_dep\n"
                     f"VALUE = sum(get_kernel_dep(d['repo-id']).VALUE for d in {below!r})\n",
                     below)
    taken: list[str] = []
    real = pipeline.checked_snapshot

    def counted(request):  # type: ignore[no-untyped-def]
        taken.append(request.repo_id)
        assert len(taken) <= 2 * depth, f"{request.repo_id} read again: {sorted(taken)}"
        return real(request)

    monkeypatch.setattr(pipeline, "checked_snapshot", counted)
    top = get_kernel("kernels-community/k0-a", 1, hub=hub)
    assert top.VALUE == 64  # one per path: 2 ** depth
    assert sorted(taken) == sorted(f"kernels-community/k{level}-{s}"
                                   for level in range(1, depth + 1) for s in "ab")
