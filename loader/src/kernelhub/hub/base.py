"""The reading side of the hub protocol: what loading a kernel needs from a hub.

Two implementations: :class:`kernelhub.hub.local.LocalHub` (git repositories on disk)
and :class:`kernelhub.hub.hf.HfHub` (huggingface_hub against any Hub-API server).
Publishing is a separate protocol, :class:`kernelhub_builder.ship.HubPublisher`, so nothing on
the load path carries the code that writes to a hub.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.formats"}  # PEP 810: imported when first used

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import HubError
from ..formats import BUILD_DIR

if TYPE_CHECKING:  # the protocol names them; loading through it needs neither module
    from ..formats.release_manifest import ReleaseFiles
    from ..versions import Refs

__all__ = [
    "BUILD_DIR",
    "HashListingHub",
    "Hub",
    "RemoteHub",
    "TrustAskingHub",
    "TypedReposHub",
    "check_relative",
]


@runtime_checkable
class Hub(Protocol):
    """A place kernels are loaded from.

    What only some hubs can do is a protocol of its own below (:class:`HashListingHub`,
    :class:`RemoteHub`, :class:`TrustAskingHub`, :class:`TypedReposHub`), checked with
    ``isinstance``: a hub lacking one is still a Hub, and mypy sees the member where it is
    used.
    """

    @property
    def key(self) -> str:
        """A filesystem-safe identity for cache keys (two hubs never share a key)."""
        ...

    def list_refs(self, repo_id: str) -> Refs:
        """Branches and tags; raises RepoNotFoundError for an unknown repository."""
        ...

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        """Names of the directories under ``build/`` at a commit, sorted."""
        ...

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        """Write the files of ``build/<variant>/`` at ``commit`` into the empty dir ``dest``."""
        ...

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        """The signed-release files at the repository root at ``commit`` (see
        :mod:`kernelhub.formats.release_manifest`); absent files are None: an unsigned release."""
        ...

    def trusted_orgs(self) -> frozenset[str]:
        """Organisations the hub's operator declares trusted, beyond the user's own list."""
        ...


@runtime_checkable
class HashListingHub(Protocol):
    """A hub that lists the content hash of each file of a variant
    (:mod:`kernelhub.hub.hashes`), so a variant is checked against the hub as it lands."""

    def file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        """Path inside the variant → ``git:<sha1>`` or ``sha256:<hex>``."""
        ...


@runtime_checkable
class RemoteHub(Protocol):
    """A hub that says whether it is across a network: a remote one's refs may be answered
    from the cache for ``KERNELHUB_REFS_TTL`` seconds (a hub that does not say is local)."""

    remote: bool


@runtime_checkable
class TrustAskingHub(Protocol):
    """A Hub-API server, asked per organisation whether it is a trusted publisher
    (instead of listing :meth:`Hub.trusted_orgs`)."""

    def trusts(self, org: str) -> bool:
        ...


@runtime_checkable
class TypedReposHub(Protocol):
    """A Hub-API server whose repositories have a type (``model``, ``kernel``): it names
    where the ecosystem's cache keeps a repository's files."""

    def type_of(self, repo_id: str) -> str:
        ...


def check_relative(rel: str) -> None:
    """Refuse a path a hub lists inside a variant that would land outside its directory."""
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or any(p in ("..", ".") for p in parts):
        raise HubError(f"refusing to write {rel!r}: it would land outside the variant directory")
