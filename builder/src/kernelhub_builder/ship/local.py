"""Publishing to a LocalHub: one git commit per publish, branch and tag moved atomically.

A publish writes one commit through a throwaway index on the bare repository (see
:mod:`kernelhub.hub.local` for the layout) and moves the branch and the release tag
together in one compare-and-swap transaction, so readers never see half a publish and
concurrent publishers of different variants never lose each other's work.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelhub.errors import HubError, KernelHubError, PublishConflictError
from kernelhub.formats.metadata import METADATA_FILE, parse_metadata
from kernelhub.formats.release_manifest import Signer
from kernelhub.formats.variants import check_variant_dir
from kernelhub.hub.base import BUILD_DIR
from kernelhub.hub.git import ZERO_OID, GitRepo, IndexEntry, RefUpdate, RefValue
from kernelhub.hub.local import LocalHub, variant_trees

from .base import PublishResult
from .release import check_release, tag_needs_update
from .signed_tree import release_of_tag, with_release_files
from .staged import stage_variants

_REF_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_MAX_ATTEMPTS = 12


@dataclass
class _Plan:
    """What one publish attempt would do, computed against one observed branch head."""

    old: str | None
    tree: str
    commit_needed: bool
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    tag_old: str | None = None
    """The tag's current oid when the tag must be created (ZERO_OID) or moved; else None."""
    signed: list[str] = field(default_factory=list)
    """The variants the new tree's release signature covers."""


class LocalPublisher(LocalHub):
    """A LocalHub that can also be published to (reading stays :class:`LocalHub`'s)."""

    def __repr__(self) -> str:
        return f"LocalPublisher({str(self.root)!r})"

    def publish(
        self, repo_id: str, branch: str, variants: dict[str, Path], *,
        tag: str | None, message: str, dry_run: bool = False, sign: Signer | None = None,
        remove: Sequence[str] = (), private: bool = False, create_pr: bool = False,
    ) -> PublishResult:
        if create_pr:
            raise HubError(f"{self.root} is a LocalHub, which has no pull requests: publish to a "
                           "branch of your own (--branch NAME) and merge it with git")
        _check_ref_name(branch, "branch")
        if tag is not None:
            _check_ref_name(tag, "tag")
        release = release_of_tag(repo_id, tag) if sign is not None else None
        staged = stage_variants(repo_id, variants)
        for name in remove:
            check_variant_dir(name)
        dropped = sorted(set(remove) - set(staged))
        notes = ([f"{self.root} is a LocalHub: it has no private repositories (who reads it "
                  "is the directory's permissions); --private changed nothing"]
                 if private else [])
        path = self.repo_path(repo_id)
        repo = GitRepo(path)

        if not repo.is_repo() and dry_run:
            return replace(PublishResult.dry_run_new_repo(repo_id, branch, tag, list(staged)),
                           notes=notes)
        created = GitRepo.init_bare(path, initial_branch=branch)

        files = [f for name in staged for f in staged[name]]
        oids = repo.hash_files([f.source for f in files])
        entries = [
            IndexEntry(f.git_mode, oid, f.path_in_repo) for f, oid in zip(files, oids, strict=True)
        ]

        race = ""
        for attempt in range(_MAX_ATTEMPTS):
            plan = self._plan(repo, repo_id, branch, tag, sorted(staged), entries, (release, sign),
                              dropped)
            result = PublishResult(
                repo_id,
                branch,
                commit=plan.old,
                previous=plan.old,
                tag=tag,
                added=plan.added,
                replaced=plan.replaced,
                unchanged=plan.unchanged,
                created_repo=created,
                dry_run=dry_run,
                signed=plan.signed,
                removed=plan.removed,
                commit_needed=plan.commit_needed,
                notes=notes,
            )
            if dry_run:
                return result
            head = plan.old
            updates: list[RefUpdate] = []
            if plan.commit_needed:
                head = repo.commit_tree(plan.tree, plan.old, message)
                updates.append(RefUpdate(f"refs/heads/{branch}", head, plan.old or ZERO_OID))
            if tag is not None and plan.tag_old is not None:
                assert head is not None
                updates.append(RefUpdate(f"refs/tags/{tag}", head, plan.tag_old))
            lost = repo.update_refs(updates)
            if lost is None:
                return replace(result, commit=head)
            race = lost
            # Someone else moved the branch or tag: back off a little, then rebuild the
            # tree on top of their commit so both publishes survive.
            time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
        raise PublishConflictError(
            f"could not publish to {repo_id} branch {branch}: it kept moving under "
            f"{_MAX_ATTEMPTS} attempts ({race}). Nothing was changed; try again"
        )

    def branch_releases(self, repo_id: str, branch: str) -> dict[str, str | None]:
        repo = GitRepo(self.repo_path(repo_id))
        if not repo.is_repo():
            return {}
        head = repo.resolve_commit(f"refs/heads/{branch}")
        if head is None:
            return {}
        releases: dict[str, str | None] = {}
        for name in variant_trees(repo, head):
            found = repo.ls_tree(head, f"{BUILD_DIR}/{name}/{METADATA_FILE}")
            releases[name] = None
            if found and found[0].kind == "blob":
                try:
                    raw = next(repo.read_blobs([found[0].oid]))
                    releases[name] = parse_metadata(raw, f"{repo_id}@{head[:12]}:{name}").release
                except KernelHubError:
                    pass
        return releases

    def _plan(
        self,
        repo: GitRepo,
        repo_id: str,
        branch: str,
        tag: str | None,
        names: list[str],
        entries: list[IndexEntry],
        signing: tuple[str | None, Signer | None],
        dropped: list[str],
    ) -> _Plan:
        """Build the new tree on the current branch head and check the release tag."""
        patterns = [f"refs/heads/{branch}"] + ([f"refs/tags/{tag}"] if tag else [])
        refs = repo.refs(*patterns)
        head_ref = refs.get(f"refs/heads/{branch}")
        old = head_ref.commit if head_ref else None
        before = variant_trees(repo, old) if old else {}
        remove: list[str] = []
        if old:
            dirs = [f"{BUILD_DIR}/{name}/" for name in [*names, *dropped] if name in before]
            if dirs:
                remove = [e.path for e in repo.ls_tree(old, *dirs, recursive=True)]
        tree = repo.write_tree(old, remove, entries)
        after = variant_trees(repo, tree)
        tree, signed = with_release_files(repo, repo_id, tree, after, *signing)

        plan = _Plan(old=old, tree=tree, commit_needed=old is None or tree != repo.tree_of(old),
                     removed=[name for name in dropped if name in before])
        plan.signed = signed
        for name in names:
            if name not in before:
                plan.added.append(name)
            elif before[name] != after[name]:
                plan.replaced.append(name)
            else:
                plan.unchanged.append(name)

        if tag is not None:
            tag_ref = refs.get(f"refs/tags/{tag}")
            tagged = tag_ref.commit if tag_ref else None
            if tag_needs_update(tagged, old, plan.commit_needed):
                plan.tag_old = _release_cas(repo, repo_id, branch, tag, tag_ref, old, after)
        return plan


def _release_cas(
    repo: GitRepo,
    repo_id: str,
    branch: str,
    tag: str,
    tag_ref: RefValue | None,
    old: str | None,
    after: dict[str, str],
) -> str:
    """The tag's expected old oid for the CAS, after checking the release rule."""
    if tag_ref is None:
        return ZERO_OID
    tagged_trees = variant_trees(repo, tag_ref.commit)
    check_release(
        repo_id,
        branch,
        tag,
        tag_ref.commit,
        on_branch=old is not None and repo.is_ancestor(tag_ref.commit, old),
        tagged_variants=tagged_trees,
        keeps_content=lambda name: after.get(name) == tagged_trees[name],
    )
    return tag_ref.oid


def _check_ref_name(name: str, what: str) -> None:
    if (
        not _REF_NAME_RE.fullmatch(name)
        or ".." in name
        or "//" in name
        or name.endswith((".lock", "/", "."))
    ):
        raise HubError(f"{name!r} is not a valid git {what} name (e.g. 'v1' or 'v1.2.0')")
