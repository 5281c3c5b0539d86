"""HfHub: kernels on the Hugging Face Hub, or on any server that speaks its API.

Reads go through huggingface_hub: refs from ``list_repo_refs``; the variants at a commit
and every file of each, with its content hash, from one recursive
``list_repo_tree("build")``; a fetch then GETs the chosen variant's files at that commit,
all at once (:mod:`kernelhub.hub.hf_files`). A cold load is refs + 1 listing + one GET per
file; the loader caches refs for ``KERNELHUB_REFS_TTL`` seconds (``remote``), so a warm
``version=N`` load inside it asks nothing. The same code reads a LocalHub served by olah
(see :mod:`kernelhub.hub.local`), which the tests exercise.

Which repository type: the Hub's ``kernel`` type where the server has it (what the
ecosystem's loader asks for, ``/api/kernels/…``), else ``model`` (mirrors such as olah
serve only models). :meth:`HfHub.typed` is that one rule, used by reads and by the
publisher alike; the type found is remembered per endpoint and repository for the
process, so it costs a request only on a server without kernel repositories, and only
once per process (each ``get_kernel(hub=URL)`` makes a new HfHub).

Publishing to such a server lives in :mod:`kernelhub_builder.ship.hf`.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.variants", "kernelhub.hub.base",
    "kernelhub.hub.endpoints", "kernelhub.hub.hf_files", "kernelhub.redact",
    "kernelhub.versions",
}

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .. import settings
from ..errors import HubError, RepoNotFoundError, VersionSpecError
from ..formats import release_manifest
from ..formats.variants import check_variant_dir
from ..lazy_names import deferred
from ..redact import redact, redact_logs
from ..versions import Refs, is_commit_id
from .base import BUILD_DIR, check_relative
from .endpoints import check_endpoint, check_reachable, endpoint_key
from .hf_files import ListedFile, VariantFiles, by_variant, download, listed_file

if TYPE_CHECKING:
    import huggingface_hub
    from huggingface_hub import HfApi, hf_api
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import utils as hf_utils
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    from ..formats.release_manifest import ReleaseFiles
else:  # a warm load (pinned, locked or offline) needs only the hub's cache key
    huggingface_hub = deferred("huggingface_hub")
    hf_api = deferred("huggingface_hub.hf_api")
    hf_errors = deferred("huggingface_hub.errors")
    hf_utils = deferred("huggingface_hub.utils")

T = TypeVar("T")
_log = logging.getLogger(__name__)

REPO_TYPES = ("kernel", "model")
"""Where a repository is looked for, in this order: the Hub's kernel repositories, then
models (all that mirrors such as olah serve)."""

_found_types: dict[tuple[str, str], str] = {}
"""(endpoint, repo id) → the repository type :meth:`HfHub.typed` found there."""

DEFAULT_ENDPOINT = "https://huggingface.co"
"""huggingface_hub's default endpoint, where ``HF_ENDPOINT`` is unset."""


def _import_huggingface_hub() -> None:
    """Import huggingface_hub on the first call that talks to the server, and redact its
    loggers, which exist only once it is imported: it logs the URLs it retries,
    credentials and all. A warm load (pinned, locked or offline) needs only the hub's
    cache key, and importing huggingface_hub costs it more than everything else together."""
    hf_api.HfApi  # noqa: B018 - the first access imports the client, errors and loggers
    redact_logs("huggingface_hub")


def _not_found() -> tuple[type[Exception], ...]:
    """The errors by which servers say a repository, revision or path is missing (which
    one they send differs, so callers take any)."""
    return (hf_errors.RepositoryNotFoundError, hf_errors.RevisionNotFoundError,
            hf_errors.EntryNotFoundError)


class HfHub:
    """A hub reached through huggingface_hub at ``endpoint`` (default: ``HF_ENDPOINT``)."""

    remote = True
    """Across a network: the loader answers its refs from the cache for a while
    (:func:`kernelhub.load.resolve.resolve_ref`)."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None,
                 repo_type: str | None = None) -> None:
        # HF_ENDPOINT is read here, not through huggingface_hub.constants, which froze it at
        # import time (and which would import huggingface_hub for a warm load).
        chosen = endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
        what = "the hub" if endpoint else "HF_ENDPOINT"
        self.endpoint = check_endpoint(chosen, what).rstrip("/")
        self.token = token
        self.repo_type = repo_type
        """``kernel`` or ``model`` to read only that type; None (the default): each
        repository's type is found by :meth:`typed`."""
        self._api: HfApi | None = None
        self._listings: dict[tuple[str, str], dict[str, VariantFiles]] = {}
        """(repo id, commit id) → what :meth:`_build_listing` found there."""
        self._trusts: dict[str, bool] = {}
        """org → the server's publisher-trust answer, for this HfHub's life (one load)."""

    @property
    def api(self) -> HfApi:
        """The huggingface_hub client, made (and the library imported) on first use."""
        if self._api is None:
            check_reachable(self.endpoint)  # fail in seconds, not after the OS gives up
            _import_huggingface_hub()
            self._api = hf_api.HfApi(endpoint=self.endpoint, token=self.token)
        return self._api

    def __repr__(self) -> str:
        return f"HfHub({redact(self.endpoint)!r})"

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
            except hf_errors.HfHubHTTPError as exc:
                if not absent(exc):
                    raise
                _found_types.pop((self.endpoint, repo_id), None)  # gone from that type: ask again
        *preferred, last = REPO_TYPES
        for repo_type in preferred:
            try:
                result = read(repo_type)
            except hf_errors.HfHubHTTPError as exc:
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
        except (hf_errors.RepositoryNotFoundError, hf_errors.EntryNotFoundError):
            raise RepoNotFoundError(
                f"no repository {repo_id} on {self.endpoint}; check the name, and for a "
                "private repository set HF_TOKEN"
            ) from None
        except hf_errors.HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list the refs of {repo_id}: {exc}") from exc
        return Refs(
            branches={b.name: b.target_commit for b in refs.branches},
            tags={t.name: t.target_commit for t in refs.tags},
        )

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        return sorted(self._build_listing(repo_id, commit))

    def _build_listing(self, repo_id: str, commit: str) -> dict[str, VariantFiles]:
        """Every variant at ``commit`` with its files, from one recursive listing of
        ``build/``; kept for this HfHub's life when ``commit`` is a commit id (its
        content never changes), so the fetch that follows asks nothing more of it."""
        if (known := self._listings.get((repo_id, commit))) is not None:
            return known
        listing = by_variant(self._tree(repo_id, commit, BUILD_DIR))
        if is_commit_id(commit):
            self._listings[(repo_id, commit)] = listing
        return listing

    def _variant_files(self, repo_id: str, commit: str, variant: str) -> VariantFiles:
        """The files of one variant: from the listing of ``build/`` if this HfHub made
        it, else from a listing of ``build/<variant>`` alone (the variant list came from
        the cache). Empty: no such variant."""
        check_variant_dir(variant)
        if (known := self._listings.get((repo_id, commit))) is not None:
            return known.get(variant, {})
        return by_variant(self._tree(repo_id, commit, f"{BUILD_DIR}/{variant}")).get(variant, {})

    def _tree(self, repo_id: str, commit: str, path: str) -> list[RepoFile | RepoFolder]:
        """Everything under ``path`` at ``commit``, recursively; [] when there is no such
        path."""
        repo_type = self.type_of(repo_id)
        try:
            return list(self.api.list_repo_tree(repo_id, path_in_repo=path, revision=commit,
                                                repo_type=repo_type, recursive=True))
        except _not_found():
            # Servers differ in which of these they send for a missing repo, revision or
            # path (olah answers "repository not found" for a missing path); ask again
            # more precisely to tell them apart.
            self._check_revision(repo_id, commit)
            return []
        except hf_errors.HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list {path} of {repo_id}@{commit}: "
                           f"{exc}") from exc

    def _check_revision(self, repo_id: str, commit: str) -> None:
        """Raise RepoNotFoundError / VersionSpecError unless ``commit`` exists in the repo."""
        refs = self.list_refs(repo_id)
        try:
            # The listing is lazy: taking its first entry is what sends the request.
            next(iter(self.api.list_repo_tree(repo_id, revision=commit,
                                              repo_type=self.type_of(repo_id))), None)
        except _not_found():
            raise VersionSpecError(
                f"{repo_id} has no commit {commit!r} on {self.endpoint}; {refs.describe()}"
            ) from None

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise HubError(f"cannot fetch {variant} into {dest}: the directory is not empty")
        files = self._variant_files(repo_id, commit, variant)
        if not files:
            available = ", ".join(self.list_variants(repo_id, commit)) or "none"
            raise HubError(
                f"{repo_id} at {commit[:12]} has no variant {variant}; variants: {available}"
            )
        for rel in files:
            check_relative(rel)
        self._download(repo_id, commit, {dest / rel: f for rel, f in files.items()},
                       f"variant {variant}")

    def file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        """The Hub's own content hash of every file of a variant, from its tree listing:
        ``sha256:<hex>`` for files stored with Git LFS, ``git:<blob id>`` for the others."""
        return {rel: f.content_hash
                for rel, f in self._variant_files(repo_id, commit, variant).items()}

    def _download(self, repo_id: str, commit: str, files: dict[Path, ListedFile],
                  what: str) -> None:
        """GET each listed file at ``commit`` into its path, all at once."""
        _import_huggingface_hub()
        repo_type = self.type_of(repo_id)
        urls = {path: huggingface_hub.hf_hub_url(repo_id, f.path, repo_type=repo_type,
                                                 revision=commit, endpoint=self.endpoint)
                for path, f in files.items()}
        try:
            download(urls, hf_utils.build_hf_headers(token=self.token))
        except _not_found() as exc:
            self._check_revision(repo_id, commit)
            raise HubError(
                f"{self.endpoint} failed to send {what} of {repo_id}@{commit}: {exc}"
            ) from exc
        except hf_errors.HfHubHTTPError as exc:
            raise HubError(
                f"{self.endpoint} failed to send {what} of {repo_id}@{commit}: {exc}"
            ) from exc

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        """The release files at ``commit``: which exist, from one ``paths-info`` request
        (a GET of a missing file is an error page on some mirrors, not a 404), then
        those."""
        names = (release_manifest.RELEASE_FILE, release_manifest.SIGNATURE_FILE)
        repo_type = self.type_of(repo_id)
        try:
            present = [listed_file(e) for e in self.api.get_paths_info(
                repo_id, list(names), revision=commit, repo_type=repo_type)
                if isinstance(e, hf_api.RepoFile) and e.path in names]
        except hf_errors.HfHubHTTPError as exc:
            if isinstance(exc, _not_found()):
                self._check_revision(repo_id, commit)
            raise HubError(f"{self.endpoint} could not tell which release files {repo_id}@"
                           f"{commit} has: {exc}") from exc
        with tempfile.TemporaryDirectory(prefix="kernelhub-release-") as tmp:
            self._download(repo_id, commit, {Path(tmp) / f.path: f for f in present},
                           "the release files")
            found = {f.path: (Path(tmp) / f.path).read_bytes() for f in present}
        return release_manifest.ReleaseFiles(found.get(release_manifest.RELEASE_FILE),
                                             found.get(release_manifest.SIGNATURE_FILE))

    def trusted_orgs(self) -> frozenset[str]:
        """No list: the server is asked about one org at a time (:meth:`trusts`)."""
        return frozenset()

    def trusts(self, org: str) -> bool:
        """The server's own answer, the one the ecosystem's loader reads: whether its
        overview of ``org`` says ``trustedKernelPublisher`` (the Hugging Face Hub's
        publisher-trust flag; ``kernelhub serve`` answers it from its hub's config).

        Asked only for an org the user does not trust already. Offline, or on any
        failure, the answer is no (never trust what could not be asked; the refusal
        says how to trust it). One line is logged for a failure, so "not trusted" on a
        hub that could not be reached is explainable.
        """
        if settings.offline():
            return False
        if (known := self._trusts.get(org)) is not None:  # asked before and after resolving
            return known
        try:
            overview = self.api.get_organization_overview(org)
        except Exception as exc:  # any failure of the server or the client: not trusted
            _log.info("could not ask %s whether %r is a trusted publisher: %s",
                      redact(self.endpoint), org, " ".join(redact(str(exc)).split())[:200])
            return False
        self._trusts[org] = answer = getattr(overview, "trustedKernelPublisher", False) is True
        return answer


def absent(exc: hf_errors.HfHubHTTPError) -> bool:
    """Whether ``exc``, the answer to a request about a whole repository (its refs or its
    info), says the repository is not there *as the type asked for*: "repository not
    found", or a bare 400/404 from a server that has no such type (olah and other mirrors
    know no ``kernel`` type and answer 404 "entry not found" for its refs)."""
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return True
    return exc.response is not None and exc.response.status_code in (400, 404)
