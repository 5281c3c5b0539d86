"""The publishing side of the hub protocol, and the one result every publisher returns.

Loading never imports this package: a runtime that only reads kernels does not carry the
code that writes them. The builder publishes through :class:`HubPublisher`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..release_manifest import Signer


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

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced)

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
    ) -> PublishResult:
        """Commit ``variants`` (name → staged dir) to ``branch`` as one commit.

        Only the named variant dirs are replaced; others on the branch stay. The branch
        moves by compare-and-swap; a publish that changes nothing makes no commit.
        With ``sign``, the commit carries a release manifest over every variant in the
        resulting tree and its signature (:mod:`kernelhub.release_manifest`; ``tag`` must
        then be ``v<release>``); without, release files left by an earlier signed publish
        are removed, since they no longer describe the tree.
        """
        ...
