"""The release-tag rule every publisher enforces: a release never changes once made.

A tag ``v<semver>`` may only follow its branch forward to gain variants; every variant
it already marks must keep exactly the same content. Each publisher supplies the facts
from its own storage (git trees, Hub file listings); the rule and its messages live here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kernelhub.errors import PublishConflictError


def tag_needs_update(tagged: str | None, head: str | None, changed: bool) -> bool:
    """Whether the release tag must be created or moved (and so checked) by this publish."""
    return tagged is None or changed or tagged != head


def check_release(
    repo_id: str,
    branch: str,
    tag: str,
    tagged: str,
    *,
    on_branch: bool,
    tagged_variants: Iterable[str],
    keeps_content: Callable[[str], bool],
) -> None:
    """Refuse a publish that would rewrite release ``tag``, which marks commit ``tagged``.

    ``on_branch``: whether ``tagged`` is the branch head or one of its ancestors.
    ``keeps_content(name)``: whether variant ``name`` has the same content after this
    publish as at the tag.
    """
    if not on_branch:
        raise PublishConflictError(
            f"release {tag} of {repo_id} already exists at {tagged[:12]}, which is not on "
            f"branch {branch}; bump general.release. Nothing was published"
        )
    for name in sorted(tagged_variants):
        if not keeps_content(name):
            raise PublishConflictError(
                f"release {tag} of {repo_id} already has variant {name} with different "
                "content; bump general.release. Nothing was published"
            )
