"""One rule for "a policy applies": every path that yields loadable code enforces trust,
the org's signing policy and the lock's digest on the bytes that are imported.

Two holes an outside review found (issue 23), each a test that failed before:

* the signing policy was skipped by the paths that hand out a variant's directory
  (``locate_kernel``, the compatibility module's ``install_kernel``), and
  ``get_local_kernel`` then imported that directory;
* a locked load checked the lock's hash on one read of the cache and imported from a
  second read, so a swap between the two ran code the lock does not pin.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from kernelhub import api, ecosystem
from kernelhub.errors import IntegrityError, SignatureError
from kernelhub.formats.metadata import compute_digests, read_metadata, write_metadata
from kernelhub.formats.release_manifest import NAMESPACE
from kernelhub.lock import LockEntry
from kernelhub.value_types import replace
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant, new_signing_key

REPO = "acme/scale"
VARIANT = "torch-universal"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalPublisher:
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "hub"))
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme")
    return LocalPublisher(tmp_path / "hub")


def _publish(hub: LocalPublisher, tmp_path: Path, value: int, sign: object = None) -> str:
    staged = tmp_path / "staging" / str(value) / VARIANT
    make_variant(staged, name="scale", init=f"VALUE = {value}\n")
    result = hub.publish(REPO, "v1", {VARIANT: staged}, tag=f"v1.0.{value}",
                         message=str(value), sign=sign)  # type: ignore[arg-type]
    assert result.commit is not None
    return result.commit


def _require_signatures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_signing_key(tmp_path / "key")
    (tmp_path / "allowed_signers").write_text(f"acme {key.public.openssh()}\n")
    monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(tmp_path / "allowed_signers"))


def test_paths_that_hand_out_a_variant_apply_the_signing_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: LocalPublisher
) -> None:
    _publish(hub, tmp_path, 1)  # unsigned
    cached = api.locate_kernel(REPO, 1)  # no policy yet: an unsigned release is fine
    _require_signatures(tmp_path, monkeypatch)
    with pytest.raises(SignatureError, match="unsigned"):
        api.locate_kernel(REPO, 1)
    with pytest.raises(SignatureError, match="unsigned"):
        ecosystem.install_kernel(REPO, version=1, trust_remote_code=True)
    with pytest.raises(SignatureError, match="unsigned"):
        ecosystem.install_kernel(REPO, version=1, local_files_only=True)
    with pytest.raises(SignatureError):  # the directory itself, handed over by name
        api.get_local_kernel(cached)
    with pytest.raises(SignatureError):
        ecosystem.get_local_kernel(cached)


def test_a_signed_variant_in_the_cache_still_loads_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: LocalPublisher
) -> None:
    key = new_signing_key(tmp_path / "key")
    (tmp_path / "allowed_signers").write_text(f"acme {key.public.openssh()}\n")
    monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(tmp_path / "allowed_signers"))
    _publish(hub, tmp_path, 2, sign=lambda data: key.sign(data, NAMESPACE))
    cached = api.locate_kernel(REPO, 1)
    assert api.get_local_kernel(cached).VALUE == 2


def _swap_on_snapshot(monkeypatch: pytest.MonkeyPatch, cached: Path, other: Path) -> list[Path]:
    """Replace the cached variant with ``other`` the moment the loader starts reading it
    for import (its walk of the directory), as a racing writer of the cache would."""
    walk = os.fwalk
    swapped: list[Path] = []

    def swapping_walk(top: os.PathLike[str] | str = ".", *args: object, **kwargs: object):
        if Path(top).resolve() == cached.resolve() and not swapped:
            shutil.rmtree(cached)
            shutil.copytree(other, cached)
            swapped.append(cached)
        return walk(top, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fwalk", swapping_walk)
    return swapped


def test_a_locked_load_imports_only_the_bytes_it_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: LocalPublisher
) -> None:
    commit = _publish(hub, tmp_path, 3)
    cached = api.locate_kernel(REPO, revision=commit)
    pinned = hashlib.sha256((cached / "metadata.json").read_bytes()).hexdigest()
    entry = LockEntry(REPO, commit, {}, {VARIANT: pinned})
    # The same build with other code: consistent digests, but not what the lock pins.
    other = tmp_path / "other"
    shutil.copytree(cached, other)
    (other / "__init__.py").write_text("VALUE = 666\n")
    write_metadata(other, replace(read_metadata(other), digest_files=compute_digests(other)))
    swapped = _swap_on_snapshot(monkeypatch, cached, other)
    with pytest.raises(IntegrityError, match="metadata sha256"):
        api.load_locked_entry(entry, trust_remote_code=True)
    assert swapped, "the loader read the variant without walking it"
