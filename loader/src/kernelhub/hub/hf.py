"""HfHub: kernels on the Hugging Face Hub, or on any server that speaks its API.

Reads go through huggingface_hub: refs from ``list_repo_refs``, variants from
``list_repo_tree("build")``, and a fetch downloads only ``build/<variant>/*`` with
``snapshot_download``. The same code reads a LocalHub served by olah (see
:mod:`kernelhub.hub.local`), which the tests exercise.

Which repository type: the Hub's ``kernel`` type where the server has it (what the
ecosystem's loader asks for, ``/api/kernels/…``), else ``model`` (mirrors such as olah
serve only models). :meth:`HfHub.typed` is that one rule, used by reads and by the
publisher alike; the type found is remembered per endpoint and repository for the
process, so it costs a request only on a server without kernel repositories, and only
once per process (each ``get_kernel(hub=URL)`` makes a new HfHub).

Publishing to such a server lives in :mod:`kernelhub_builder.ship.hf`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import HubError, RepoNotFoundError, VersionSpecError
from ..variants import check_variant_dir
from ..versions import Refs
from .base import BUILD_DIR
from .keys import endpoint_key

if TYPE_CHECKING:  # bound at run time by _import_huggingface_hub
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.hf_api import RepoFile

    from ..release_manifest import ReleaseFiles  # imported where a release is fetched

T = TypeVar("T")

REPO_TYPES = ("kernel", "model")
"""Where a repository is looked for, in this order: the Hub's kernel repositories, then
models (all that mirrors such as olah serve)."""

_found_types: dict[tuple[str, str], str] = {}
"""(endpoint, repo id) → the repository type :meth:`HfHub.typed` found there."""

DEFAULT_ENDPOINT = "https://huggingface.co"
"""huggingface_hub's default endpoint, where ``HF_ENDPOINT`` is unset."""


def _import_huggingface_hub() -> None:
    """Bind the huggingface_hub names this module uses, on the first call that talks to
    the server. A warm load (pinned, locked or offline) needs only the hub's cache key,
    and importing huggingface_hub costs it more than everything else together."""
    global EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError
    global RevisionNotFoundError, RepoFile, snapshot_download
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.hf_api import RepoFile


class HfHub:
    """A hub reached through huggingface_hub at ``endpoint`` (default: ``HF_ENDPOINT``)."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None,
                 repo_type: str | None = None) -> None:
        # HF_ENDPOINT is read here, not through huggingface_hub.constants, which froze it at
        # import time (and which would import huggingface_hub for a warm load).
        chosen = endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = chosen.rstrip("/")
        self.token = token
        self.repo_type = repo_type
        """``kernel`` or ``model`` to read only that type; None (the default): each
        repository's type is found by :meth:`typed`."""
        self._api: HfApi | None = None

    @property
    def api(self) -> HfApi:
        """The huggingface_hub client, made (and the library imported) on first use."""
        if self._api is None:
            _import_huggingface_hub()
            from huggingface_hub import HfApi

            self._api = HfApi(endpoint=self.endpoint, token=self.token)
        return self._api

    def __repr__(self) -> str:
        return f"HfHub({self.endpoint!r})"

    @property
    def key(self) -> str:
        return endpoint_key(self.endpoint)

    # -- the repository type -----------------------------------------------------------

    def typed(self, repo_id: str, read: Callable[[str], T]) -> T:
        """``read(repo_type)`` for the type that holds ``repo_id``: each of
        :data:`REPO_TYPES` in turn until one is not :func:`absent`, then remembered.
        ``read`` asks about the repository as a whole (its refs or info), so that "not
        found" means the repository, not a revision or file in it.

        huggingface_hub's errors pass through unchanged (callers turn them into their own
        messages); the last type's "not found" is the one raised.
        """
        if self.repo_type is not None:
            return read(self.repo_type)
        _import_huggingface_hub()
        if (known := _found_types.get((self.endpoint, repo_id))) is not None:
            try:
                return read(known)
            except HfHubHTTPError as exc:
                if not absent(exc):
                    raise
                _found_types.pop((self.endpoint, repo_id), None)  # gone from that type: ask again
        *preferred, last = REPO_TYPES
        for repo_type in preferred:
            try:
                result = read(repo_type)
            except HfHubHTTPError as exc:
                if not absent(exc):
                    raise
                continue
            _found_types[(self.endpoint, repo_id)] = repo_type
            return result
        result = read(last)
        _found_types[(self.endpoint, repo_id)] = last
        return result

    def type_of(self, repo_id: str) -> str:
        """The repository type ``repo_id`` has on this server (found with its refs)."""
        if (known := self.repo_type or _found_types.get((self.endpoint, repo_id))) is not None:
            return known
        self.list_refs(repo_id)
        return _found_types[(self.endpoint, repo_id)]

    # -- reading -----------------------------------------------------------------------

    def list_refs(self, repo_id: str) -> Refs:
        try:
            refs = self.typed(repo_id, lambda repo_type: self.api.list_repo_refs(
                repo_id, repo_type=repo_type))
        except (RepositoryNotFoundError, EntryNotFoundError):
            raise RepoNotFoundError(
                f"no repository {repo_id} on {self.endpoint}; check the name, and for a "
                "private repository set HF_TOKEN"
            ) from None
        except HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list the refs of {repo_id}: {exc}") from exc
        return Refs(
            branches={b.name: b.target_commit for b in refs.branches},
            tags={t.name: t.target_commit for t in refs.tags},
        )

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        repo_type = self.type_of(repo_id)
        try:
            entries = list(
                self.api.list_repo_tree(
                    repo_id, path_in_repo=BUILD_DIR, revision=commit, repo_type=repo_type
                )
            )
        except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError):
            # Servers differ in which of these they send for a missing repo, revision or
            # build/ dir (olah answers "repository not found" for a missing path); ask
            # again more precisely to tell them apart.
            self._check_revision(repo_id, commit)
            return []
        except HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list {repo_id}@{commit}: {exc}") from exc
        return sorted(e.path.rsplit("/", 1)[-1] for e in entries if not isinstance(e, RepoFile))

    def _check_revision(self, repo_id: str, commit: str) -> None:
        """Raise RepoNotFoundError / VersionSpecError unless ``commit`` exists in the repo."""
        refs = self.list_refs(repo_id)
        try:
            # The listing is lazy: taking its first entry is what sends the request.
            next(iter(self.api.list_repo_tree(repo_id, revision=commit,
                                              repo_type=self.type_of(repo_id))), None)
        except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError):
            raise VersionSpecError(
                f"{repo_id} has no commit {commit!r} on {self.endpoint}; {refs.describe()}"
            ) from None

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        check_variant_dir(variant)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise HubError(f"cannot fetch {variant} into {dest}: the directory is not empty")
        # Download next to dest so the final moves are renames on one filesystem, and
        # keep huggingface_hub's .cache/ bookkeeping out of dest.
        with tempfile.TemporaryDirectory(prefix=".kernelhub-download-", dir=dest.parent) as tmp:
            self._download(repo_id, commit, [f"{BUILD_DIR}/{variant}/*"], tmp, f"variant {variant}")
            source = Path(tmp) / BUILD_DIR / variant
            if not source.is_dir() or not any(source.iterdir()):
                available = ", ".join(self.list_variants(repo_id, commit)) or "none"
                raise HubError(
                    f"{repo_id} at {commit[:12]} has no variant {variant}; variants: {available}"
                )
            for item in source.iterdir():
                shutil.move(str(item), dest / item.name)

    def file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        """The Hub's own content hash of every file of a variant, from its tree listing:
        ``sha256:<hex>`` for files stored with Git LFS, ``git:<blob id>`` for the others."""
        check_variant_dir(variant)
        prefix = f"{BUILD_DIR}/{variant}/"
        repo_type = self.type_of(repo_id)
        try:
            entries = list(self.api.list_repo_tree(repo_id, path_in_repo=prefix.rstrip("/"),
                                                   revision=commit, repo_type=repo_type,
                                                   recursive=True))
        except HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} failed to list {variant} of {repo_id}@{commit}: "
                           f"{exc}") from exc
        hashes = {}
        for entry in entries:
            if not isinstance(entry, RepoFile):
                continue
            lfs = getattr(entry, "lfs", None)
            sha256 = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, dict)
                                                      else None)
            hashes[entry.path[len(prefix):]] = (f"sha256:{sha256}" if sha256
                                                else f"git:{entry.blob_id}")
        return hashes

    def _download(
        self, repo_id: str, commit: str, patterns: list[str], local_dir: str, what: str
    ) -> None:
        """snapshot_download the files matching ``patterns`` at ``commit`` into ``local_dir``."""
        _import_huggingface_hub()
        repo_type = self.type_of(repo_id)
        try:
            snapshot_download(
                repo_id,
                repo_type=repo_type,
                revision=commit,
                allow_patterns=patterns,
                local_dir=local_dir,
                endpoint=self.endpoint,
                token=self.token,
            )
        except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
            self._check_revision(repo_id, commit)
            raise HubError(
                f"{self.endpoint} failed to send {what} of {repo_id}@{commit}: {exc}"
            ) from exc
        except HfHubHTTPError as exc:
            raise HubError(
                f"{self.endpoint} failed to send {what} of {repo_id}@{commit}: {exc}"
            ) from exc

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        from ..release_manifest import RELEASE_FILE, SIGNATURE_FILE, ReleaseFiles

        names = (RELEASE_FILE, SIGNATURE_FILE)
        with tempfile.TemporaryDirectory(prefix="kernelhub-release-") as tmp:
            self._download(repo_id, commit, list(names), tmp, "the release files")
            found = {n: (Path(tmp) / n).read_bytes() for n in names if (Path(tmp) / n).is_file()}
        return ReleaseFiles(found.get(RELEASE_FILE), found.get(SIGNATURE_FILE))

    def trusted_orgs(self) -> frozenset[str]:
        """A remote hub declares no trust of its own; the user's configuration decides."""
        return frozenset()


def absent(exc: HfHubHTTPError) -> bool:
    """Whether ``exc``, the answer to a request about a whole repository (its refs or its
    info), says the repository is not there *as the type asked for*: "repository not
    found", or a bare 400/404 from a server that has no such type (olah and other mirrors
    know no ``kernel`` type and answer 404 "entry not found" for its refs)."""
    if isinstance(exc, RepositoryNotFoundError):
        return True
    return exc.response is not None and exc.response.status_code in (400, 404)
