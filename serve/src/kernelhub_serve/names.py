"""The one check of every name a request carries — repository ids, revisions, file paths,
LFS oids, commit ids — made before anything touches the filesystem or git.

Each route in :mod:`kernelhub_serve.routes` names its parameters; the parameter's name
chooses its check here, so no handler sees a name that could leave the hub directory,
start a git option, split a log line or mean two different paths. A bad name is a 400
(or the 404 the Hub answers for a repository that cannot exist), never a 500.
"""

from __future__ import annotations

from kernelhub.versions import is_commit_id, is_plain_name

from .errors import ApiError, repo_not_found
from .lfs import is_oid

MAX_NAME = 255
"""The longest path component, revision or repository name part (filesystems' limit)."""
MAX_PATH = 4096


def repo_part(value: str, which: str) -> str:
    """An organisation or repository name: letters, digits, ``.``, ``_``, ``-``, as the
    LocalHub names its directories (so never ``..`` or a hidden directory)."""
    if len(value) > MAX_NAME or not is_plain_name(value):
        raise repo_not_found(f"{value[:80]!r} (not a valid {which} name: letters, digits, "
                             "'.', '_' and '-', starting with a letter or digit)")
    return value


def revision(value: str) -> str:
    """A branch, tag, ``refs/…`` name or commit id: what git's ref rules allow, and never
    something git could read as an option or a range."""
    bad = (not value or len(value) > MAX_NAME or value.startswith(("-", "/")) or ".." in value
           or value.endswith(("/", ".", ".lock")) or "//" in value or "@{" in value
           or any(ord(c) < 32 or c in " ~^:?*[\\\x7f" for c in value))
    if bad:
        raise ApiError(400, f"{value[:80]!r} is not a valid revision (a branch, tag or commit id)")
    return value


def file_path(value: str, where: str = "") -> str:
    """A path inside a repository: relative, '/'-separated, each part a real name (no
    ``.``, ``..``, empty part or ``.git`` in any case), no control characters."""
    parts = value.split("/")
    bad = (not value or len(value) > MAX_PATH or "\\" in value
           or any(p in ("", ".", "..") or p.lower() == ".git" or len(p) > MAX_NAME
                  for p in parts)
           or any(ord(c) < 32 or c == "\x7f" for c in value))
    if bad:
        raise ApiError(400, f"{where}{value[:200]!r} is not a valid path in a repository "
                            "(relative, '/'-separated, no '.', '..', '.git' or empty parts)")
    return value


def oid(value: str) -> str:
    if not is_oid(value):
        raise ApiError(400, f"{value[:80]!r} is not an LFS object id (64 lowercase hex digits)")
    return value


def commit_id(value: str) -> str:
    """A full commit id (40 or 64 lowercase hex), as the Hub's ``parentCommit`` is."""
    if not is_commit_id(value):
        raise ApiError(400, f"{value[:80]!r} is not a full commit id (40 or 64 lowercase hex "
                            "digits)")
    return value


def segment(value: str) -> str:
    """Any other path segment: printable text only (a NUL or newline is refused here, so
    none reaches git, a file name or a log line)."""
    if any(ord(c) < 32 or c == "\x7f" for c in value) or len(value) > MAX_PATH:
        raise ApiError(400, f"{value[:80]!r}: control characters are not allowed in a URL path")
    return value
