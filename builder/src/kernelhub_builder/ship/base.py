"""The publishing side of the hub protocol, and the one result every publisher returns.

Loading never imports this package: a runtime that only reads kernels does not carry the
code that writes them. The builder publishes through :class:`HubPublisher`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from kernelhub.formats.release_manifest import Signer


@dataclass(frozen=True)
class PublishResult:
    """What a publish did (or, for a dry run, would do), for the builder to report."""

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
    signed: list[str] = field(default_factory=list)
    """Every variant the commit's release signature covers (empty: unsigned)."""
    removed: list[str] = field(default_factory=list)
    """Variant dirs this publish deleted from the branch (``remove=``)."""
    operations: list[str] = field(default_factory=list)
    """The hub operations, in order, that were made (or, for a dry run, would be)."""
    notes: list[str] = field(default_factory=list)
    """Things the user should know, e.g. a repository type fallback."""
    commit_needed: bool = False
    """Whether the publish made (or, for a dry run, would make) a commit. A publish that
    only adds, replaces or drops the release signature changes no variant, yet commits."""
    pull_request: str | None = None
    """The pull request a ``create_pr`` publish opened against ``branch`` (its URL); the
    branch itself did not move."""

    @property
    def changed(self) -> bool:
        """Whether the branch moved (or, for a dry run, its variants would change): a
        publish that only adds or removes the release signature changes it too."""
        moved = not self.dry_run and self.commit != self.previous
        return bool(self.added or self.replaced or self.removed) or moved or self.commit_needed

    @classmethod
    def dry_run_new_repo(
        cls, repo_id: str, branch: str, tag: str | None, variants: list[str]
    ) -> PublishResult:
        """A dry run against a repository that does not exist yet: everything is added."""
        return cls(
            repo_id,
            branch,
            commit=None,
            previous=None,
            tag=tag,
            added=sorted(variants),
            created_repo=True,
            dry_run=True,
        )


@runtime_checkable
class HubPublisher(Protocol):
    """A hub kernels are published to."""

    def publish(
        self, repo_id: str, branch: str, variants: dict[str, Path], *,
        tag: str | None, message: str, dry_run: bool = False, sign: Signer | None = None,
        remove: Sequence[str] = (), private: bool = False, create_pr: bool = False,
    ) -> PublishResult:
        """Commit ``variants`` (name → staged dir) to ``branch`` as one commit.

        Only the named variant dirs are replaced, and the ``remove`` ones deleted, in the
        same commit; others on the branch stay. The branch moves by compare-and-swap; a
        publish that changes nothing makes no commit. ``private``: a repository this
        publish creates is private. ``create_pr``: the commit opens a pull request
        against ``branch`` instead of moving it (no tag; where the hub has no pull
        requests, an error).
        With ``sign``, the commit carries a release manifest over every variant in the
        resulting tree and its signature (:mod:`kernelhub.formats.release_manifest`; ``tag`` must
        then be ``v<release>``); without, release files left by an earlier signed publish
        are removed, since they no longer describe the tree.
        """
        ...

    def branch_releases(self, repo_id: str, branch: str) -> dict[str, str | None]:
        """Each variant at the head of ``branch`` → the release its metadata.json records
        (None when unreadable); empty when the repository or branch does not exist."""
        ...
