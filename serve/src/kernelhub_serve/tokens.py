"""Bearer tokens and what they may do: read or write per organisation.

The tokens file is TOML, one table per token. A token is stored as its SHA-256 (so the
file itself grants nothing to whoever reads it) or, for throwaway set-ups, in clear::

    anonymous-read = ["*"]          # orgs anyone may read without a token; [] = none

    [[token]]
    name = "ci"                     # what logs and whoami show; never the token
    sha256 = "9f86d08…"             # sha256 of the token's text (or: token = "hf_…")
    read = ["*"]                    # orgs it may read ("*": all)
    write = ["my-team"]             # orgs it may write (create repos, commit, tag, delete)

Writing implies reading. Without a tokens file the hub is read-only and anyone may read.
Tokens are compared by digest with :func:`hmac.compare_digest`; neither a token nor its
digest is ever logged (the token's ``name`` is).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelhub.tomlfile import TomlError, parse_toml
from kernelhub.user_files import read_bounded

from .errors import ApiError, ServeError

ANY_ORG = "*"


@dataclass(frozen=True)
class Grant:
    """One token's rights."""

    name: str
    read: frozenset[str]
    write: frozenset[str]

    def may_read(self, org: str) -> bool:
        return self.may_write(org) or ANY_ORG in self.read or org in self.read

    def may_write(self, org: str) -> bool:
        return ANY_ORG in self.write or org in self.write


ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class TokenTable:
    """Token digests → grants, and what a request without a token may read."""

    grants: dict[str, Grant] = field(default_factory=dict)
    anonymous_read: frozenset[str] = frozenset({ANY_ORG})

    @classmethod
    def read_only(cls, anonymous_reads: bool = True) -> TokenTable:
        """No tokens: nobody writes; everyone (or no one) reads."""
        return cls({}, frozenset({ANY_ORG}) if anonymous_reads else frozenset())

    @classmethod
    def load(cls, path: Path) -> TokenTable:
        """Read a tokens file; ServeError names the file and the entry that is wrong."""
        try:
            data = parse_toml(read_bounded(path))
        except OSError as exc:
            raise ServeError(f"cannot read the tokens file {path}: {exc.strerror or exc}"
                             ) from None
        except TomlError as exc:
            raise ServeError(f"cannot read the tokens file {path}: {exc}") from None
        anonymous = _orgs(data.get("anonymous-read", [ANY_ORG]), path, "anonymous-read")
        grants: dict[str, Grant] = {}
        entries = data.get("token", [])
        if not isinstance(entries, list):
            raise ServeError(f"{path}: write each token as a [[token]] table")
        for i, entry in enumerate(entries):
            where = f"{path}: token #{i + 1}"
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ServeError(f'{where} needs a name = "…" (what logs show instead of it)')
            unknown = set(entry) - {"name", "sha256", "token", "read", "write"}
            if unknown:
                raise ServeError(f"{where} ({entry['name']}): unknown keys {sorted(unknown)}; "
                                 "allowed: name, sha256 or token, read, write")
            digest = _digest_of(entry, f"{where} ({entry['name']})")
            if digest in grants:
                raise ServeError(f"{where} ({entry['name']}) repeats the token of "
                                 f"{grants[digest].name}")
            grants[digest] = Grant(entry["name"],
                                   _orgs(entry.get("read", []), path, f"{entry['name']}.read"),
                                   _orgs(entry.get("write", []), path, f"{entry['name']}.write"))
        return cls(grants, anonymous)

    def identify(self, authorization: str | None) -> Grant | None:
        """The grant of a request's ``Authorization`` header; None without one.

        An unknown token is refused (401) rather than treated as anonymous, so a typo in
        a CI secret fails loudly instead of silently reading as nobody.
        """
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "Invalid credentials in Authorization header: expected "
                                "'Bearer <token>'")
        digest = token_digest(token.strip())
        for known, grant in self.grants.items():
            if hmac.compare_digest(known, digest):
                return grant
        raise ApiError(401, "Invalid credentials in Authorization header: this hub does not "
                            "know that token")

    def may_read(self, grant: Grant | None, org: str) -> bool:
        if grant is not None and grant.may_read(org):
            return True
        return ANY_ORG in self.anonymous_read or org in self.anonymous_read

    @property
    def writable(self) -> bool:
        return any(g.write for g in self.grants.values())


def token_digest(token: str) -> str:
    """What the tokens file stores for ``token``: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def _digest_of(entry: dict[str, object], where: str) -> str:
    sha, clear = entry.get("sha256"), entry.get("token")
    if (sha is None) == (clear is None):
        raise ServeError(f"{where}: give exactly one of sha256 = \"…\" (recommended) or "
                         "token = \"…\"")
    if clear is not None:
        if not isinstance(clear, str) or not clear:
            raise ServeError(f"{where}: token must be a non-empty string")
        return token_digest(clear)
    if not isinstance(sha, str) or len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
        raise ServeError(f"{where}: sha256 must be 64 lowercase hex digits "
                         "(python -c 'import hashlib,sys;print(hashlib.sha256(sys.argv[1]"
                         ".encode()).hexdigest())' TOKEN)")
    return sha


def _orgs(value: object, path: Path, key: str) -> frozenset[str]:
    if not isinstance(value, Sequence) or isinstance(value, str) or not all(
            isinstance(v, str) for v in value):
        raise ServeError(f'{path}: {key} must be a list of organisation names, e.g. ["my-team"]'
                         ' or ["*"]')
    return frozenset(value)
