"""The checks hold only their configuration: what one learns before the bytes travels in
the pipeline's values (Resolution → Fetched → Snapshot), so one set of checks serves any
number of loads, in any order, and the memo of loads keys on configuration alone."""

from __future__ import annotations

import pytest
from kernelhub.errors import SignatureError
from kernelhub.load import pipeline
from kernelhub.load.fetch import fetch
from kernelhub.load.request import kernel_request
from kernelhub.load.resolve import resolve_request
from kernelhub.load.validators import SignatureValidator, validators_for
from kernelhub.load.verify import verify, verify_fetched
from kernelhub.lock import LockEntry
from kernelhub.signing.trust import policy_for
from kernelhub.value_types import replace
from kernelhub_builder.ship import LocalPublisher
from test_signed_releases import REPO, allow, new_key, publish


@pytest.fixture
def hub(tmp_path) -> LocalPublisher:
    return LocalPublisher(tmp_path / "hub")


def test_one_signature_check_serves_interleaved_releases(tmp_path, monkeypatch, hub) -> None:
    """Two signed releases resolved one after the other, then verified in the opposite
    order, by one check: each snapshot is judged against its own release's signature (a
    check that remembered the last resolution would refuse the first)."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key, value=1)
    publish(hub, tmp_path, "v1.1.0", key, value=2)
    check = SignatureValidator(policy_for("acme"))
    first, second = (
        check.on_resolution(resolve_request(kernel_request(REPO, tag, hub=hub)))
        for tag in ("v1.0.0", "v1.1.0"))
    assert first.release is not None and second.release is not None
    assert first.release != second.release  # two metadata.json files, two signed digests
    later = pipeline.checked(verify_fetched(fetch(second)), [check])
    earlier = pipeline.checked(verify_fetched(fetch(first)), [check])
    later.discard()
    earlier.discard()

    # The verdict the snapshot carries is the one that decides: the first release's bytes
    # judged against the second release's signature are refused, and nothing is kept.
    fetched = fetch(first)
    crossed = verify(fetched.path, fetched.variant, cached=True, release=second.release)
    with pytest.raises(SignatureError, match="not the one the release signature covers"):
        pipeline.checked(crossed, [check])
    assert not crossed.verified.copy.exists()


def test_a_snapshot_no_release_check_saw_is_refused(tmp_path, monkeypatch, hub) -> None:
    """A snapshot that did not come through a resolution the signing check saw carries no
    verdict, and the signing check refuses it rather than admitting it unchecked."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    resolution = resolve_request(kernel_request(REPO, "v1.0.0", hub=hub))
    with pytest.raises(SignatureError, match="was not checked"):
        pipeline.checked(verify_fetched(fetch(resolution)), [SignatureValidator(policy_for("acme"))])


def test_a_load_leaves_every_check_as_it_was_configured(tmp_path, monkeypatch, hub) -> None:
    """Every check a signed, locked, arch-checked load gets is the same object after the
    load as before it: nothing learned is kept in a check."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    commit = publish(hub, tmp_path, "v1.0.0", key, value=7)
    request = kernel_request(REPO, revision=commit, hub=hub, lock=LockEntry(REPO, commit))
    checks = validators_for(request.repo_id, request)
    kinds = {type(check).__name__ for check in checks}
    assert {"TrustValidator", "SignatureValidator", "LockValidator", "ArchValidator"} <= kinds
    before = [dict(vars(check)) for check in checks]
    for check in checks:
        check.on_request(request)
    resolution = resolve_request(request)
    for check in checks:
        resolution = check.on_resolution(resolution)
    snapshot = pipeline.checked(verify_fetched(fetch(resolution)), checks)
    snapshot.discard()
    assert [dict(vars(check)) for check in checks] == before
    assert snapshot.release == resolution.release and snapshot.system == resolution.system


def test_checks_are_chosen_in_one_place_for_every_kind_of_load(tmp_path, monkeypatch,
                                                                hub) -> None:
    """A hub load, a cached variant named by its path and a local build get their checks
    from the same function: trust only where a caller asked a hub, the org's signing
    policy wherever the code came from a hub, the format checks everywhere."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    request = kernel_request(REPO, "v1.0.0", hub=hub)

    def kinds(checks: list) -> list[str]:
        return [type(check).__name__ for check in checks]

    format_checks = ["MinverValidator", "DirtyBuildValidator"]
    assert kinds(validators_for(REPO, request)) == [
        "TrustValidator", "SignatureValidator", "ArchValidator", *format_checks]
    assert kinds(validators_for(REPO, replace(request, check_arch=False))) == [
        "TrustValidator", "SignatureValidator", *format_checks]
    assert kinds(validators_for(REPO)) == ["SignatureValidator", *format_checks]
    assert kinds(validators_for(None)) == format_checks
