"""The reading side of the hub protocol: what loading a kernel needs from a hub.

Two implementations: :class:`kernelhub.hub.local.LocalHub` (git repositories on disk)
and :class:`kernelhub.hub.hf.HfHub` (huggingface_hub against any Hub-API server).
Publishing is a separate protocol, :class:`kernelhub_builder.ship.HubPublisher`, so nothing on
the load path carries the code that writes to a hub.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import HubError
from ..formats.build_layout import BUILD_DIR

if TYPE_CHECKING:  # the protocol names them; loading through it needs neither module
    from ..formats.release_manifest import ReleaseFiles
    from ..versions import Refs

__all__ = ["BUILD_DIR", "Hub", "check_relative"]


@runtime_checkable
class Hub(Protocol):
    """A place kernels are loaded from.

    Optional, read with ``getattr``: ``file_hashes(repo_id, commit, variant)`` (the hub's
    content hash of each file, see :mod:`kernelhub.hub.hashes`) and ``remote`` (True for a
    hub across a network, whose refs the loader may answer from the cache for
    ``KERNELHUB_REFS_TTL`` seconds; absent: False).
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


def check_relative(rel: str) -> None:
    """Refuse a path a hub lists inside a variant that would land outside its directory."""
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or any(p in ("..", ".") for p in parts):
        raise HubError(f"refusing to write {rel!r}: it would land outside the variant directory")
