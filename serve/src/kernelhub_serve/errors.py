"""The errors the server answers with, in the Hub's shape.

huggingface_hub turns a Hub error into its typed exceptions by the ``X-Error-Code`` header
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``) and shows ``X-Error-Message``;
answering the same way makes a client's error on this server read like one on the Hub.
"""

from __future__ import annotations

from kernelhub.errors import KernelHubError


class ApiError(Exception):
    """One failed request: the HTTP status, one line for the user, the Hub's error code."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers: dict[str, str] = {}
        """Extra response headers (a missing file's ``X-Repo-Commit``)."""
        self.body: dict[str, object] = {}
        """Extra fields of the JSON answer (an existing repository's ``url``)."""


class ServeError(KernelHubError):
    """The server cannot start as configured (a bad tokens file, an unusable hub path)."""


def repo_not_found(repo_id: str) -> ApiError:
    return ApiError(404, f"Repository Not Found: {repo_id}", "RepoNotFound")


def revision_not_found(repo_id: str, rev: str) -> ApiError:
    return ApiError(404, f"Invalid rev id: {rev} (in {repo_id})", "RevisionNotFound")


def entry_not_found(repo_id: str, path: str) -> ApiError:
    return ApiError(404, f"Entry not found: {path} (in {repo_id})", "EntryNotFound")
