"""The hub protocol: what the loader reads from a hub and what the builder publishes.

Two implementations: :class:`kernelhub.hub.local.LocalHub` (git repositories on disk)
and :class:`kernelhub.hub.hf.HfHub` (huggingface_hub against any Hub-API server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..versions import Refs

BUILD_DIR = "build"
"""Variants live under ``build/<variant>/`` in every hub repository."""


@dataclass(frozen=True)
class PublishResult:
    """What a publish did, for the builder to print."""

    repo_id: str
    branch: str
    commit: str | None
    """The new branch head, or the unchanged one when nothing changed."""
    previous: str | None
    tag: str | None
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    created_repo: bool = False
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced)


@runtime_checkable
class Hub(Protocol):
    """A place kernels are published to and loaded from."""

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

    def trusted_orgs(self) -> frozenset[str]:
        """Organisations the hub's operator declares trusted, beyond the user's own list."""
        ...

    def publish(
        self,
        repo_id: str,
        branch: str,
        variants: dict[str, Path],
        *,
        tag: str | None,
        message: str,
        dry_run: bool = False,
    ) -> PublishResult:
        """Commit ``variants`` (name → staged dir) to ``branch`` as one commit.

        Only the named variant dirs are replaced; others on the branch stay. The branch
        moves by compare-and-swap; a publish that changes nothing makes no commit.
        """
        ...
