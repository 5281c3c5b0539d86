"""Who is asking, and whether they may read or write a repository's organisation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ApiError, repo_not_found
from .tokens import Grant, TokenTable
from .writer import is_private


@dataclass(frozen=True)
class Caller:
    """The identity of one request: a token's grant, or anonymous (None)."""

    grant: Grant | None
    table: TokenTable

    @property
    def name(self) -> str:
        return self.grant.name if self.grant is not None else "anonymous"

    def may_read(self, org: str, repo_path: Path | None = None) -> bool:
        if repo_path is not None and is_private(repo_path):
            return self.grant is not None and self.grant.may_read(org)
        return self.table.may_read(self.grant, org)

    def check_read(self, repo_id: str, repo_path: Path) -> None:
        """Unreadable repositories are answered as missing, as on the Hub (401 without a
        token, so huggingface_hub says to authenticate; 404 with one)."""
        if not self.may_read(repo_id.split("/")[0], repo_path):
            error = repo_not_found(repo_id)
            if self.grant is None:
                error.status = 401
            raise error

    @property
    def may_write_somewhere(self) -> bool:
        return self.grant is not None and bool(self.grant.write)

    def check_writer(self) -> None:
        """A token that may write to some organisation: checked before a write request's
        body is read (which org it names is in the body)."""
        if self.grant is None:
            raise ApiError(401, "this request writes to the hub and needs a token with write "
                                "rights (HF_TOKEN, or token=…)")
        if not self.grant.write:
            raise ApiError(403, f"token {self.grant.name!r} may not write to this hub (see the "
                                "hub's tokens file)")

    def check_write(self, org: str) -> None:
        if self.grant is None:
            raise ApiError(401, f"writing to {org} needs a token: pass one with write rights "
                                "on it (HF_TOKEN, or token=…)")
        if not self.grant.may_write(org):
            raise ApiError(403, f"You don't have the rights to write to {org}: token "
                                f"{self.grant.name!r} may not write it (see the hub's tokens "
                                "file)")
