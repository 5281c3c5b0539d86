"""The one version grammar: get_kernel, repositories, KernelConfig, ``org/repo@…``
strings, lock files and the CLI all parse through here.

* ``1`` (int)            → head of branch ``v1``
* ``"v1.2.0"``, ``"main"`` → that tag or branch
* ``">=1.0,<2.0"``       → the highest ``v<semver>`` tag satisfying it
* a commit id            → that commit (40 hex: SHA-1; 64 hex: a SHA-256 repository)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import RepoIdError, VersionSpecError
from .lazy_names import deferred
from .value_types import Record, field

if TYPE_CHECKING:  # packaging is imported where a release or specifier is first parsed
    from packaging import specifiers as packaging_specifiers
    from packaging import version as packaging_version
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
else:
    packaging_specifiers = deferred("packaging.specifiers")
    packaging_version = deferred("packaging.version")

_SPEC_START = ("<", ">", "=", "!", "~")
# Patterns are compiled (through re's cache) where first used, not at import: a warm
# load uses none of them, and compiling one costs 0.05-0.2 ms of every process's start.
_RELEASE_TAG = r"v(\d+\.\d+\.\d+\S*)"
_MAJOR_BRANCH = r"v(\d+)"
_HEX = "0123456789abcdef"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def is_plain_name(text: str, more: str = "._-", first: str = "") -> bool:
    """Whether ``text`` is an ASCII letter or digit (or a character of ``first``) followed
    by letters, digits and characters of ``more``: the names that become paths and URLs.

    Checked with str methods rather than a regex, because these checks run on every load
    and compiling a pattern costs more than all of them.
    """
    return bool(text) and text[0] in _ALNUM + first and not text.strip(_ALNUM + more)


def tag_release(ref: str) -> str | None:
    """``"v1.2.0"`` → ``"1.2.0"``: the release a ``v<semver>`` tag name marks, else None."""
    m = re.fullmatch(_RELEASE_TAG, ref)
    return m[1] if m else None


def branch_major(ref: str) -> int | None:
    """``"v2"`` → 2: the major version a ``v<N>`` branch name holds, else None."""
    m = re.fullmatch(_MAJOR_BRANCH, ref)
    return int(m[1]) if m else None


def shown_name(name: str) -> str:
    """A name from a hub or a file, safe to put in a one-line message: plain names as
    they are, anything else quoted (so it cannot add lines or fake text)."""
    return name if is_plain_name(name, "._/+-") else repr(name)


class Refs(Record, frozen=True):
    """Branches and tags of one repository, each mapped to its commit sha."""

    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def releases(self) -> dict[Version, str]:
        """``v<semver>`` tags as versions → the tag name."""
        found: dict[Version, str] = {}
        for tag in self.tags:
            if (release := tag_release(tag)) is not None:
                try:
                    found[packaging_version.Version(release)] = tag
                except packaging_version.InvalidVersion:
                    continue
        return found

    def describe(self) -> str:
        """What exists, for error messages (names a hub sent are quoted unless plain, so
        a ref name cannot add lines or fake text to the message)."""
        branches = ", ".join(shown_name(b) for b in sorted(self.branches)) or "none"
        tags = ", ".join(shown_name(t) for _, t in sorted(self.releases().items())) or "none"
        return f"branches: {branches}; release tags: {tags}"


class VersionSpec(Record, frozen=True):
    """A parsed version or revision. Exactly one field is set."""

    major: int | None = None
    ref: str | None = None
    specifier: SpecifierSet | None = None
    commit: str | None = None

    def __str__(self) -> str:
        if self.major is not None:
            return str(self.major)
        if self.specifier is not None:
            return str(self.specifier)
        return self.commit or self.ref or ""


def parse_version(version: int | str) -> VersionSpec:
    """Parse a ``version=`` value: an int major, a tag/branch name, a specifier or a sha."""
    if isinstance(version, bool):
        raise VersionSpecError(f"version must be an int or a string, not {version!r}")
    if isinstance(version, int):
        if version < 0:
            raise VersionSpecError(f"version {version} is negative; majors start at 0")
        return VersionSpec(major=version)
    if not isinstance(version, str) or not version.strip():
        raise VersionSpecError(
            f"version {version!r} is not understood; use an int major (1), a tag or branch "
            "('v1.2.0'), a specifier ('>=1.0,<2.0') or a commit sha"
        )
    text = version.strip()
    if text.isdigit():
        return VersionSpec(major=int(text))
    if is_commit_id(text):
        return VersionSpec(commit=text)
    if text.startswith(_SPEC_START) or "," in text:
        try:
            return VersionSpec(specifier=packaging_specifiers.SpecifierSet(text))
        except packaging_specifiers.InvalidSpecifier:
            raise VersionSpecError(
                f"version specifier {text!r} is malformed; write e.g. '>=1.0,<2.0' or '~=1.2'"
            ) from None
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", text):
        raise VersionSpecError(f"{text!r} is not a valid tag or branch name")
    return VersionSpec(ref=text)


def parse_revision(revision: str) -> VersionSpec:
    """``revision=`` names a branch, tag or commit; never a specifier or a major."""
    if not isinstance(revision, str) or not revision.strip():
        raise VersionSpecError(f"revision {revision!r} must be a branch, tag or commit sha")
    text = revision.strip()
    if is_commit_id(text):
        return VersionSpec(commit=text)
    return VersionSpec(ref=text)


def select_spec(version: int | str | None, revision: str | None) -> VersionSpec | None:
    """Apply the exactly-one-of rule shared by every entry point."""
    if version is not None and revision is not None:
        raise VersionSpecError("give either version= or revision=, not both")
    if version is not None:
        return parse_version(version)
    if revision is not None:
        return parse_revision(revision)
    return None


def resolve(spec: VersionSpec, refs: Refs, repo_id: str) -> tuple[str, str]:
    """Resolve a spec to ``(ref_name, commit)``; errors list what exists."""
    if spec.commit is not None:
        return spec.commit, spec.commit
    if spec.major is not None:
        branch = f"v{spec.major}"
        if branch in refs.branches:
            return branch, refs.branches[branch]
        raise VersionSpecError(
            f"{repo_id} has no version {spec.major} (branch {branch}); {refs.describe()}"
        )
    if spec.ref is not None:
        if spec.ref in refs.tags:
            return spec.ref, refs.tags[spec.ref]
        if spec.ref in refs.branches:
            return spec.ref, refs.branches[spec.ref]
        raise VersionSpecError(f"{repo_id} has no tag or branch {spec.ref!r}; {refs.describe()}")
    assert spec.specifier is not None
    releases = refs.releases()
    matching = list(spec.specifier.filter(releases))
    if not matching:
        raise VersionSpecError(
            f"no release of {repo_id} satisfies {str(spec.specifier)!r}; {refs.describe()}"
        )
    tag = releases[max(matching)]
    return tag, refs.tags[tag]


COMMIT_ID_LENGTHS = (40, 64)
"""Full commit ids: SHA-1 (40 hex) and, in repositories using git's SHA-256 object
format, 64 hex. Abbreviations are never ids: they stop being unique."""


def is_commit_id(value: object) -> bool:
    """Whether ``value`` is a full (lowercase) commit id, SHA-1 or SHA-256."""
    return isinstance(value, str) and len(value) in COMMIT_ID_LENGTHS and not value.strip(_HEX)


def check_repo_id(repo_id: object) -> str:
    """``repo_id`` if it is a string ``org/name`` (letters, digits, ``.``, ``_``, ``-``).

    Checked at every entry point before a hub, the cache or the trust list sees it: the
    id becomes a URL path, a directory name and an org lookup.
    """
    if not isinstance(repo_id, str):
        raise RepoIdError(
            f"repository id must be a string 'org/name', not {type(repo_id).__name__} "
            f"{repo_id!r}"
        )
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(
        is_plain_name(p) and p not in (".", "..") and ".." not in p for p in parts
    ):
        raise RepoIdError(
            f"{repo_id!r} is not a repository id; write 'org/name' using letters, digits, "
            "'.', '_' and '-' (e.g. 'kernels-community/activation')"
        )
    return repo_id


def split_repo_string(text: str) -> tuple[str, str | None]:
    """Split ``org/repo@spec`` (as used by attn_implementation strings) into its parts."""
    repo_id, _, spec = text.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise VersionSpecError(f"{text!r}: expected 'org/repo' optionally followed by '@version'")
    return repo_id, (spec or None)


def parse_release(release: str) -> Version:
    """A release number as written in build.toml (``general.release``): plain semver."""
    if not re.fullmatch(r"\d+\.\d+\.\d+(?:[-.]?(?:a|b|rc|alpha|beta|dev)\.?\d*)?", release):
        raise VersionSpecError(f"release {release!r} is not semver (expected e.g. '1.2.0')")
    return packaging_version.Version(release)
