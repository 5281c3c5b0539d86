"""The on-disk kernel cache: atomic, locked installs keyed by hub, repo, commit, variant.

Layout under the cache root::

    <hub.key>/<org>/<name>/.lock                       one lock per repository
    <hub.key>/<org>/<name>/refs.json                   last refs seen, and when (offline
                                                       mode, KERNELHUB_REFS_TTL)
    <hub.key>/<org>/<name>/<commit>/variants.json      variant list at that commit
    <hub.key>/<org>/<name>/<commit>/release-files.json the signed-release files at that commit
    <hub.key>/<org>/<name>/<commit>/<variant>/…        the verified variant files
    <hub.key>/<org>/<name>/<commit>/<variant>.hub-digest.json  digest matched at fetch
                                                       (a variant without one of its own)
    <hub.key>/<org>/<name>/<commit>/<variant>.hub-lfs.json     files the hub stores with LFS

A commit's content never changes, so everything under ``<commit>/`` is immutable once
written: a warm load of a pinned commit needs no hub at all. A variant directory exists
only once it is complete and verified (temp dir + rename), so readers never need a lock.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.formats.metadata", "kernelhub.versions"}  # PEP 810: imported when first used

import base64
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import settings
from ..errors import CacheError, HubError, IntegrityError, KernelHubError
from ..formats.metadata import hub_digest_path, parse_metadata, read_metadata_bytes, verify_variant
from ..lazy_names import deferred
from ..versions import Refs, is_commit_id, is_plain_name

if TYPE_CHECKING:
    import filelock

    from ..formats.release_manifest import ReleaseFiles
    from ..hub.base import Hub
else:  # a warm load takes no lock, reads no release and hashes nothing
    filelock = deferred("filelock")

_TMP_SUFFIX = ".partial"
VARIANTS_FILE = "variants.json"
RELEASE_FILES = "release-files.json"
REFS_FILE = "refs.json"
REFS_SEEN_KEY = "seen-at"
"""When the refs in refs.json were read from the hub: seconds since the epoch."""


def _segment(value: str, what: str) -> str:
    # Names become path components: refuse anything that could escape the cache.
    if not is_plain_name(value, first="_") or value in (".", ".."):
        raise KernelHubError(f"{what} {value!r} is not a safe name for a cache path")
    return value


def _write_json_atomic(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json_best_effort(path: Path, data: object) -> None:
    with contextlib.suppress(OSError):  # a convenience: the next online load writes it again
        _write_json_atomic(path, data)


def _read_json(path: Path) -> object | None:
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing cached there; a root that is a file is reported on write
    except (OSError, ValueError, RecursionError) as e:
        reason = e.strerror if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
        raise KernelHubError(
            f"{path}: corrupt cache file ({reason}); run `kernelhub cache clear`"
        ) from None


def _corrupt(path: Path) -> KernelHubError:
    return KernelHubError(f"{path}: corrupt cache file; run `kernelhub cache clear`")


def _str_map(value: object) -> dict[str, str] | None:
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    return None


def _unwritable(root: Path, doing: str, error: OSError) -> CacheError:
    return CacheError(
        f"cannot {doing} in the kernel cache at {root}: {error.strerror or error}"
        f"{f' ({error.filename})' if error.filename else ''}; free space or fix its "
        "permissions, or set KERNELHUB_CACHE to a writable directory"
    )


class KernelCache:
    """One cache root. ``root=None`` means the configured root at construction time."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else settings.cache_dir()

    def repo_dir(self, hub_key: str, repo_id: str) -> Path:
        org, sep, name = repo_id.partition("/")
        if not sep:
            raise KernelHubError(f"repository {repo_id!r} must be written 'org/name'")
        return (
            self.root
            / _segment(hub_key, "hub key")
            / _segment(org, "organisation")
            / _segment(name, "repository name")
        )

    def commit_dir(self, hub_key: str, repo_id: str, commit: str) -> Path:
        if not is_commit_id(commit):
            raise KernelHubError(f"commit {commit!r} is not a full commit id (40 or 64 hex)")
        return self.repo_dir(hub_key, repo_id) / commit

    def variant_dir(self, hub_key: str, repo_id: str, commit: str, variant: str) -> Path:
        return self.commit_dir(hub_key, repo_id, commit) / _segment(variant, "variant")

    def lock(self, hub_key: str, repo_id: str) -> filelock.FileLock:
        """The lock that serialises installs into one repository's cache."""
        repo_dir = self.repo_dir(hub_key, repo_id)
        _claim(self.root)
        repo_dir.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(repo_dir / ".lock")

    # -- variant lists and refs --------------------------------------------------

    def read_variants(self, hub_key: str, repo_id: str, commit: str) -> list[str] | None:
        path = self.commit_dir(hub_key, repo_id, commit) / VARIANTS_FILE
        data = _read_json(path)
        if data is None:
            return None
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise _corrupt(path)
        return data

    def write_variants(self, hub_key: str, repo_id: str, commit: str, names: list[str]) -> None:
        """Remember a commit's variant list, if the cache can be written (see write_refs)."""
        path = self.commit_dir(hub_key, repo_id, commit) / VARIANTS_FILE
        _claim(self.root)
        _write_json_best_effort(path, sorted(names))

    def read_release(self, hub_key: str, repo_id: str, commit: str) -> ReleaseFiles | None:
        """The release files seen at ``commit`` (None: never asked). Not trusted: they are
        verified on every load, like everything else read from the cache."""
        path = self.commit_dir(hub_key, repo_id, commit) / RELEASE_FILES
        data = _read_json(path)
        if data is None:
            return None
        from ..formats import release_manifest
        found: dict[str, bytes | None] = {}
        for key in ("manifest", "signature"):
            value = data.get(key) if isinstance(data, dict) else 0
            if value is not None and not isinstance(value, str):
                raise _corrupt(path)
            try:
                found[key] = None if value is None else base64.b64decode(value, validate=True)
            except ValueError:
                raise _corrupt(path) from None
        return release_manifest.ReleaseFiles(found["manifest"], found["signature"])

    def write_release(self, hub_key: str, repo_id: str, commit: str, files: ReleaseFiles) -> None:
        path = self.commit_dir(hub_key, repo_id, commit) / RELEASE_FILES
        _claim(self.root)
        _write_json_best_effort(path, {
            "manifest": None if files.manifest is None else base64.b64encode(files.manifest).decode(),
            "signature": None if files.signature is None else base64.b64encode(files.signature).decode(),
        })

    def read_refs(self, hub_key: str, repo_id: str, max_age: float | None = None) -> Refs | None:
        """The refs last seen; with ``max_age``, only if they were seen at most that many
        seconds ago (refs of an older cache, which kept no time, or of a clock that went
        back, are never that recent)."""
        path = self.repo_dir(hub_key, repo_id) / REFS_FILE
        data = _read_json(path)
        if data is None:
            return None
        if not isinstance(data, dict):
            raise _corrupt(path)
        branches, tags = _str_map(data.get("branches", {})), _str_map(data.get("tags", {}))
        if branches is None or tags is None:
            raise _corrupt(path)
        if max_age is not None:
            seen = data.get(REFS_SEEN_KEY)
            if not isinstance(seen, (int, float)) or not 0 <= time.time() - seen <= max_age:
                return None
        return Refs(branches=branches, tags=tags)

    def write_refs(self, hub_key: str, repo_id: str, refs: Refs) -> None:
        """Remember refs, and when they were seen (offline mode and the refs TTL), if the
        cache can be written.

        A read-only cache (a shared cluster cache) or a full disk must not fail an online
        load that needs nothing new from the cache: the write is skipped, atomically (a
        reader sees the old file or the new one, never part of one).
        """
        path = self.repo_dir(hub_key, repo_id) / REFS_FILE
        _claim(self.root)
        _write_json_best_effort(path, {"branches": refs.branches, "tags": refs.tags,
                                       REFS_SEEN_KEY: time.time()})

    # -- installs ----------------------------------------------------------------

    def installed(self, hub_key: str, repo_id: str, commit: str, variant: str) -> Path | None:
        path = self.variant_dir(hub_key, repo_id, commit, variant)
        return path if path.is_dir() else None

    def install(self, hub: Hub, repo_id: str, commit: str, variant: str) -> Path:
        """Fetch, verify and atomically place one variant; return its cache directory.

        Under the repository lock, a process that waited finds the variant installed by
        the one it waited for and fetches nothing. A failed fetch or verification removes
        its temp dir, so the cache never holds a partial or unverified variant.
        """
        dest = self.variant_dir(hub.key, repo_id, commit, variant)
        if dest.is_dir():
            return dest
        try:
            return self._install(hub, repo_id, commit, variant, dest)
        except OSError as e:
            raise _unwritable(self.root, f"install {variant} of {repo_id}", e) from None

    def _install(self, hub: Hub, repo_id: str, commit: str, variant: str, dest: Path) -> Path:
        from ..hub import hashes as hub_hashes
        from . import ecosystem as ecosystem_cache
        with self.lock(hub.key, repo_id):
            if dest.is_dir():
                return dest
            dest.parent.mkdir(parents=True, exist_ok=True)
            self._remove_stale_partials(dest.parent, variant)
            tmp = Path(tempfile.mkdtemp(prefix=f".{variant}.", suffix=_TMP_SUFFIX, dir=dest.parent))
            try:
                listed = hub_hashes.hub_hashes(hub, repo_id, commit, variant)
                if not ecosystem_cache.copy_variant(hub, repo_id, commit, variant, tmp, listed):
                    hub.fetch_variant(repo_id, commit, variant, tmp)
                if not any(tmp.iterdir()):
                    raise HubError(
                        f"{repo_id}@{commit[:12]}: the hub returned no files for {variant}"
                    )
                try:
                    metadata = parse_metadata(read_metadata_bytes(tmp), str(tmp))
                    if not metadata.digest_files:  # an ecosystem build: the hub vouches
                        metadata = hub_hashes.check_against_hub(hub, repo_id, commit, variant,
                                                                tmp, metadata, listed)
                        hub_hashes.write_record(hub_digest_path(dest), metadata)
                    verify_variant(tmp, metadata)
                    hub_hashes.write_lfs_record(dest, listed)
                except IntegrityError as e:
                    raise IntegrityError(
                        f"{variant} of {repo_id} at {commit[:12]}, as fetched from {hub.key}, "
                        f"is corrupt and was discarded: {e}"
                    ) from None
                os.rename(tmp, dest)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return dest

    @staticmethod
    def _remove_stale_partials(commit_dir: Path, variant: str) -> None:
        # Only reachable under the lock, so any partial dir is a crashed process's leftover.
        for leftover in commit_dir.glob(f".{variant}.*{_TMP_SUFFIX}"):
            shutil.rmtree(leftover, ignore_errors=True)

    def clear(self) -> list[Path]:
        """Delete what kernelhub put in the cache; return the top-level entries removed.
        A root that is not kernelhub's is refused whole (:mod:`kernelhub.cache.root`)."""
        from . import root as cache_root  # `kernelhub cache clear` only

        return cache_root.clear(self.root)


def _claim(root: Path) -> None:
    """Mark ``root`` as kernelhub's before the first write into it
    (:func:`kernelhub.cache.root.claim`); a warm load writes nothing, so it never imports
    the module."""
    from . import root as cache_root

    cache_root.claim(root)
