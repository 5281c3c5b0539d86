"""Signed releases through a real LocalPublisher: the org's policy decides what loads.

Keys are real OpenSSH Ed25519 keys; forgeries are made the way an attacker with write
access to the hub or the cache would make them — with git plumbing and file edits.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.errors import SignatureError
from kernelhub.formats.metadata import compute_digests, read_metadata, write_metadata
from kernelhub.formats.release_manifest import NAMESPACE, RELEASE_FILE, SIGNATURE_FILE
from kernelhub.hub.git import GitRepo, IndexEntry
from kernelhub.load import pipeline
from kernelhub.signing import policy as release_policy
from kernelhub.signing import sshsig
from kernelhub.signing.sshsig import SigningKey
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant, new_signing_key

REPO = "acme/scale"


new_key = new_signing_key


def signer(key: SigningKey):
    return lambda data: key.sign(data, NAMESPACE)


def allow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *keys: SigningKey,
          principal: str = "acme") -> Path:
    """Allow ``keys`` for ``principal`` through an allowed_signers file in the environment."""
    path = tmp_path / "allowed_signers"
    path.write_text("".join(f"{principal} {k.public.openssh()}\n" for k in keys))
    monkeypatch.setenv("KERNELHUB_ALLOWED_SIGNERS", str(path))
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme,other")
    return path


def publish(hub: LocalPublisher, tmp_path: Path, tag: str, key: SigningKey | None,
            repo: str = REPO, value: int = 1, variant: str = "torch-universal") -> str:
    staged = tmp_path / "staging" / repo / tag / variant
    make_variant(staged, name="scale", init=f"VALUE = {value}\n")
    result = hub.publish(repo, "v1", {variant: staged}, tag=tag, message=tag,
                         sign=signer(key) if key else None)
    assert result.commit is not None
    return result.commit


def fresh_process() -> None:
    """Forget everything a new process would not have: memoized modules and checks."""
    pipeline._memo.clear()
    release_policy._verified.clear()


@pytest.fixture
def hub(tmp_path: Path) -> LocalPublisher:
    return LocalPublisher(tmp_path / "hub")


def test_signed_release_loads_cold_and_warm(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key, value=11)
    assert api.get_kernel(REPO, 1, hub=hub).VALUE == 11
    fresh_process()
    assert api.get_kernel(REPO, "v1.0.0", hub=hub).VALUE == 11


def test_unsigned_release_is_refused_under_a_policy(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", None)
    with pytest.raises(SignatureError) as e:
        api.get_kernel(REPO, 1, hub=hub)
    message = str(e.value)
    assert "\n" not in message
    assert "unsigned" in message and "builder publish --sign" in message
    assert "KERNELHUB_ALLOW_UNSIGNED" in message
    # Refused before anything of the variant was fetched.
    assert not list((tmp_path / "cache").rglob("__init__.py"))


def test_require_without_keys_says_how_to_add_one(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    publish(hub, tmp_path, "v1.0.0", key)
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme")
    monkeypatch.setenv("KERNELHUB_REQUIRE_SIGNED", "*")
    with pytest.raises(SignatureError, match=r"allows no key.*KERNELHUB_ALLOWED_SIGNERS"):
        api.get_kernel(REPO, 1, hub=hub)


def test_wrong_key_is_refused_naming_both_fingerprints(tmp_path, monkeypatch, hub) -> None:
    good, bad = new_key(tmp_path / "good"), new_key(tmp_path / "bad")
    allow(tmp_path, monkeypatch, good)
    publish(hub, tmp_path, "v1.0.0", bad)
    with pytest.raises(SignatureError) as e:
        api.get_kernel(REPO, 1, hub=hub)
    message = str(e.value)
    assert bad.public.fingerprint in message and good.public.fingerprint in message
    assert "KERNELHUB_ALLOWED_SIGNERS" in message and "[signing.keys] acme" in message


def test_two_keys_during_rotation(tmp_path, monkeypatch, hub) -> None:
    old, new = new_key(tmp_path / "old"), new_key(tmp_path / "new")
    publish(hub, tmp_path, "v1.0.0", old, value=1)
    publish(hub, tmp_path, "v1.1.0", new, value=2)
    allow(tmp_path, monkeypatch, old, new)
    assert api.get_kernel(REPO, "v1.0.0", hub=hub).VALUE == 1
    assert api.get_kernel(REPO, "v1.1.0", hub=hub).VALUE == 2
    # The old key retired: what it signed no longer loads, warm cache or not.
    allow(tmp_path, monkeypatch, new)
    with pytest.raises(SignatureError, match=re.escape(old.public.fingerprint)):
        api.get_kernel(REPO, "v1.0.0", hub=hub)
    assert api.get_kernel(REPO, "v1.1.0", hub=hub).VALUE == 2


def test_keys_from_the_config_file(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    publish(hub, tmp_path, "v1.0.0", key, value=5)
    (tmp_path / "config.toml").write_text(
        '[trust]\norgs = ["acme"]\n'
        f'[signing.keys]\nacme = ["{key.public.openssh()}"]\n')
    assert api.get_kernel(REPO, 1, hub=hub).VALUE == 5


def test_tampered_metadata_in_the_cache_is_refused(tmp_path, monkeypatch, hub) -> None:
    """An attacker rewrites a cached variant *and* its metadata.json so the digests agree."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key, value=1)
    path = api.locate_kernel(REPO, 1, hub=hub)
    (path / "__init__.py").write_text("VALUE = 666\n")
    metadata = read_metadata(path)
    metadata.digest_files = compute_digests(path)
    write_metadata(path, metadata)
    fresh_process()
    with pytest.raises(SignatureError, match=r"metadata\.json .* not the one the release signature covers"):
        api.get_kernel(REPO, 1, hub=hub)


def git_forge(hub: LocalPublisher, repo_id: str, ref: str, files: dict[str, bytes]) -> str:
    """Commit ``files`` (path → bytes) on top of ``ref`` and move it, as a hub attacker would."""
    repo = GitRepo(hub.repo_path(repo_id))
    head = repo.resolve_commit(ref)
    assert head is not None
    entries = [IndexEntry("100644", repo.hash_blob(data), p) for p, data in files.items()]
    commit = repo.commit_tree(repo.write_tree(head, [], entries), head, "forged")
    repo.run("update-ref", f"refs/heads/{ref}" if not ref.startswith("v1.") else f"refs/tags/{ref}",
             commit)
    return commit


def show(hub: LocalPublisher, repo_id: str, rev: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(hub.repo_path(repo_id)), "show", f"{rev}:{path}"],
                          capture_output=True, check=True).stdout


def test_tampered_metadata_on_the_hub_is_refused(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    meta_path = "build/torch-universal/metadata.json"
    metadata = json.loads(show(hub, REPO, "v1", meta_path))
    metadata["python-depends"] = ["evil-package"]
    git_forge(hub, REPO, "v1", {meta_path: json.dumps(metadata).encode()})
    with pytest.raises(SignatureError, match="not the one the release signature covers"):
        api.get_kernel(REPO, 1, hub=hub)


def test_edited_manifest_does_not_verify(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    manifest = show(hub, REPO, "v1", RELEASE_FILE).replace(b'"1.0.0"', b'"1.0.1"')
    git_forge(hub, REPO, "v1", {RELEASE_FILE: manifest})
    with pytest.raises(SignatureError, match=r"does not match release\.json"):
        api.get_kernel(REPO, 1, hub=hub)


def test_signature_of_another_repo_is_refused(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key, repo="acme/other")
    publish(hub, tmp_path, "v1.0.0", None)
    copied = {name: show(hub, "acme/other", "v1", name) for name in (RELEASE_FILE, SIGNATURE_FILE)}
    git_forge(hub, REPO, "v1", copied)
    with pytest.raises(SignatureError, match="for repository acme/other, not acme/scale"):
        api.get_kernel(REPO, 1, hub=hub)


def test_signature_of_another_release_is_refused(tmp_path, monkeypatch, hub) -> None:
    """An old, genuinely signed release re-tagged as a newer one (a disguised rollback)."""
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    old = publish(hub, tmp_path, "v1.0.0", key, value=1)
    GitRepo(hub.repo_path(REPO)).run("update-ref", "refs/tags/v1.1.0", old)
    assert api.get_kernel(REPO, "v1.0.0", hub=hub).VALUE == 1
    with pytest.raises(SignatureError, match=r"for release 1\.0\.0, not release 1\.1\.0"):
        api.get_kernel(REPO, "v1.1.0", hub=hub)
    with pytest.raises(SignatureError, match=r"for release 1\.0\.0, not a 2\.x release"):
        GitRepo(hub.repo_path(REPO)).run("update-ref", "refs/heads/v2", old)
        api.get_kernel(REPO, 2, hub=hub)


def test_unsigned_repos_load_where_the_policy_allows(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", None, repo="other/scale", value=3)
    publish(hub, tmp_path, "v1.0.0", None, value=4)
    # No policy names org "other": loads as before, and the hub is not asked for signatures.
    assert api.get_kernel("other/scale", 1, hub=hub).VALUE == 3
    assert not list((tmp_path / "cache").rglob("release-files.json"))
    # acme has a key, so its unsigned release is refused — unless explicitly allowed.
    with pytest.raises(SignatureError):
        api.get_kernel(REPO, 1, hub=hub)
    monkeypatch.setenv("KERNELHUB_ALLOW_UNSIGNED", "acme")
    assert api.get_kernel(REPO, 1, hub=hub).VALUE == 4


def test_verification_is_cached_by_content_not_by_path(tmp_path, monkeypatch, hub) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    api.get_kernel(REPO, 1, hub=hub)
    assert len(release_policy._verified) == 1
    # Same content, new process: the check is a cache hit (no new entry, no crypto).
    pipeline._memo.clear()
    api.get_kernel(REPO, 1, hub=hub)
    assert len(release_policy._verified) == 1
    # The cached release files edited in place (same path): checked afresh, and refused.
    cached = next((tmp_path / "cache").rglob("release-files.json"))
    data = json.loads(cached.read_text())
    forged = new_key(tmp_path / "forger").sign(b"x", NAMESPACE).encode()
    data["signature"] = base64.b64encode(forged).decode()
    cached.write_text(json.dumps(data))
    pipeline._memo.clear()
    with pytest.raises(SignatureError, match="not allowed to sign"):
        api.get_kernel(REPO, 1, hub=hub)


def test_signed_publish_covers_every_variant_and_unsigned_publish_drops_it(
    tmp_path, monkeypatch, hub
) -> None:
    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", None, variant="torch-cpu", value=1)
    staged = tmp_path / "staging" / "univ"
    make_variant(staged, name="scale", init="VALUE = 2\n")
    result = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m",
                         sign=signer(key))
    assert result.signed == ["torch-cpu", "torch-universal"]
    manifest = json.loads(show(hub, REPO, "v1", RELEASE_FILE))
    assert sorted(manifest["variants"]) == ["torch-cpu", "torch-universal"]
    assert api.get_kernel(REPO, 1, hub=hub, backend="cpu").VALUE in (1, 2)
    # Re-publishing the same content with the same key changes nothing (signatures are
    # deterministic), so no empty commit appears.
    again = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m",
                        sign=signer(key))
    assert again.commit == result.commit and not again.changed
    # An unsigned publish must not leave a manifest that no longer matches the tree.
    publish(hub, tmp_path, "v1.0.1", None, variant="torch-cpu", value=3)
    files = GitRepo(hub.repo_path(REPO)).ls_tree("v1", RELEASE_FILE, SIGNATURE_FILE)
    assert files == []


def test_a_dry_run_that_would_only_sign_reports_the_commit_it_would_make(
    tmp_path, monkeypatch, hub
) -> None:
    # Signing a release already published unsigned changes no variant, but it does commit
    # the release files: the dry run must say so, not "no change".
    key = new_key(tmp_path / "key")
    staged = tmp_path / "staging" / "same"
    make_variant(staged, name="scale", init="VALUE = 1\n")
    first = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m")
    plan = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m",
                       sign=signer(key), dry_run=True)
    assert plan.unchanged == ["torch-universal"] and plan.signed == ["torch-universal"]
    assert plan.commit_needed and plan.changed
    assert GitRepo(hub.repo_path(REPO)).resolve_commit("v1") == first.commit
    unsigned = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0",
                           message="m", dry_run=True)
    assert not unsigned.commit_needed and not unsigned.changed


LAYERS = "import torch\n\n\nclass Scale(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_layer_and_locked_repositories_are_checked_too(tmp_path, monkeypatch, hub) -> None:
    from kernelhub.layer import LayerRepository, LockedLayerRepository

    key, stranger = new_key(tmp_path / "key"), new_key(tmp_path / "stranger")
    staged = tmp_path / "staging" / "layered"
    make_variant(staged, name="scale", init="from . import layers\n",
                 files={"layers/__init__.py": LAYERS})
    commit = hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m",
                         sign=signer(key)).commit
    lockfile = tmp_path / "kernels.lock"
    lockfile.write_text(json.dumps([{"repo_id": REPO, "sha": commit}]))
    repos = [LayerRepository(REPO, layer_name="Scale", version=1, hub=hub),
             LockedLayerRepository(REPO, layer_name="Scale", lockfile=lockfile, hub=hub)]
    allow(tmp_path, monkeypatch, key)
    for repo in repos:
        assert repo.load().__name__ == "Scale"
    # Warm (everything cached and imported), but the policy now allows another key only.
    allow(tmp_path, monkeypatch, stranger)
    for repo in repos:
        with pytest.raises(SignatureError, match=re.escape(key.public.fingerprint)):
            repo.load()


def test_a_new_process_reuses_its_own_verification_without_crypto(
    tmp_path, monkeypatch, hub
) -> None:
    from kernelhub.signing import verified_marks

    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key, value=8)
    assert api.get_kernel(REPO, 1, hub=hub).VALUE == 8
    secret = tmp_path / verified_marks.SECRET_FILE
    assert secret.stat().st_mode & 0o777 == 0o600

    def no_crypto(*args):
        raise AssertionError("the signature was verified again")

    monkeypatch.setattr(sshsig, "signature_valid", no_crypto)  # what release_policy calls
    fresh_process()
    assert api.get_kernel(REPO, 1, hub=hub).VALUE == 8
    # A record readable by others could have been copied: it is not used.
    secret.chmod(0o644)
    fresh_process()
    with pytest.raises(AssertionError, match="verified again"):
        api.get_kernel(REPO, 1, hub=hub)


def test_a_forged_verification_record_is_ignored(tmp_path, monkeypatch, hub) -> None:
    """Whoever can write the cache swaps in their own signature and records it as checked."""
    from kernelhub.signing import verified_marks

    key, forger = new_key(tmp_path / "key"), new_key(tmp_path / "forger")
    allow(tmp_path, monkeypatch, key)
    publish(hub, tmp_path, "v1.0.0", key)
    api.get_kernel(REPO, 1, hub=hub)
    cached = next((tmp_path / "cache").rglob("release-files.json"))
    data = json.loads(cached.read_text())
    manifest = base64.b64decode(data["manifest"])
    forged_sig = forger.sign(manifest, NAMESPACE).encode()
    data["signature"] = base64.b64encode(forged_sig).decode()
    cached.write_text(json.dumps(data))
    from kernelhub.formats.release_manifest import ReleaseFiles
    from kernelhub.signing.trust import policy_for

    policy = policy_for("acme")
    content_key = release_policy._content_key(ReleaseFiles(manifest, forged_sig), policy)
    mark = tmp_path / "cache" / verified_marks.MARKS_DIR / content_key.hex()
    mark.write_text(f"{key.public.fingerprint}\n{'0' * 64}\n")
    fresh_process()
    with pytest.raises(SignatureError, match="not allowed to sign"):
        api.get_kernel(REPO, 1, hub=hub)


def test_kernelhub_versions_says_who_signed_and_what_the_policy_says(
    tmp_path, monkeypatch, hub, capsys
) -> None:
    from kernelhub.cli import main

    key, stranger = new_key(tmp_path / "key"), new_key(tmp_path / "stranger")
    publish(hub, tmp_path, "v1.0.0", key)

    def release_line() -> str:
        assert main(["versions", REPO, "--hub", str(hub.root)]) == 0
        return next(line for line in capsys.readouterr().out.splitlines()
                    if line.startswith("release:"))

    assert f"signed by {key.public.fingerprint}; no signing policy" in release_line()
    allow(tmp_path, monkeypatch, key)
    assert "accepted by your policy for 'acme'" in release_line()
    allow(tmp_path, monkeypatch, stranger)
    line = release_line()
    assert "REFUSED by your policy" in line and stranger.public.fingerprint in line


def test_variants_without_file_digests_are_never_covered_by_a_signature(
    tmp_path, monkeypatch, hub
) -> None:
    """An ecosystem build's metadata.json lists no digests: signing its metadata would not
    sign its files, so the publisher refuses to and the loader refuses such a 'signature'."""
    from kernelhub.errors import HubError
    from kernelhub.formats.release_manifest import ReleaseManifest, metadata_sha256, release_files

    key = new_key(tmp_path / "key")
    allow(tmp_path, monkeypatch, key)
    staged = tmp_path / "staging" / "foreign"
    make_variant(staged, name="scale", init="VALUE = 9\n")
    metadata = json.loads((staged / "metadata.json").read_text())
    del metadata["digest"]
    (staged / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(HubError, match="lists no file digests"):
        hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m",
                    sign=signer(key))
    # Published unsigned, then given a manifest signed by hand over that metadata.
    hub.publish(REPO, "v1", {"torch-universal": staged}, tag="v1.0.0", message="m")
    raw = (staged / "metadata.json").read_bytes()
    files = release_files(ReleaseManifest(REPO, "1.0.0", {"torch-universal": metadata_sha256(raw)}),
                          signer(key))
    git_forge(hub, REPO, "v1", files)
    with pytest.raises(SignatureError, match="lists no file digests"):
        api.get_kernel(REPO, 1, hub=hub)
