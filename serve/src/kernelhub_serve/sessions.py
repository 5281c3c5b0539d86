"""Browser sessions: a person signs in with a token and gets a signed cookie that stands
for that token on reads.

The cookie is an itsdangerous signed, timestamped value under a per-hub secret
(:data:`SECRET_FILE`, made once, 0600, shared by every serve process of the hub). It
carries two things: ``key`` — an HMAC of the token's digest under that secret, never the
token or its digest, so a stolen cookie teaches nothing about the token — and ``csrf``, a
random value the session's forms must echo. The grant is looked up again on every
request from the tokens table the server runs with, so a token removed from the tokens
file stops its sessions at the next (re)start, like the token itself.

A cookie only ever authenticates safe requests (GET, HEAD): every request that changes
the hub still needs a Bearer token, so no other site can make a signed-in browser write.
The two forms that change the session (sign in, sign out) check the ``csrf`` value
against the session's and refuse a request another site sent (``Origin``,
``Sec-Fetch-Site``).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

from itsdangerous import BadData, URLSafeTimedSerializer

from .lfs import shared_secret
from .tokens import Grant, TokenTable

SECRET_FILE = ".kernelhub-serve/session-secret"
COOKIE = "kernelhub_session"
MAX_AGE = 7 * 24 * 3600
"""How long a session lasts (seconds); signing in again starts a new one."""
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Session:
    """One browser's session: who it signed in as (None: not signed in) and its form token."""

    csrf: str
    grant: Grant | None = None


current: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "kernelhub_session", default=None)
"""The session of the request being answered, for the pages' header (set per request, so
every template shows who is signed in without each handler passing it)."""


class SessionKeys:
    """Signs and reads session cookies with the hub's session secret."""

    def __init__(self, hub_root: Path) -> None:
        self._secret = shared_secret(hub_root / SECRET_FILE)
        self._serializer = URLSafeTimedSerializer(self._secret, salt="kernelhub-session")

    def new(self, grant_digest: str | None = None) -> tuple[str, Session]:
        """A fresh session (a new ``csrf`` each time, so signing in never keeps a value an
        attacker could have planted), as its cookie value and what it stands for."""
        csrf = secrets.token_urlsafe(24)
        key = self._key(grant_digest) if grant_digest is not None else None
        return self._serializer.dumps({"csrf": csrf, "key": key}), Session(csrf)

    def read(self, cookie: str | None, table: TokenTable) -> Session | None:
        """The session a cookie stands for; None for a missing, forged or expired cookie.
        A cookie whose token the tokens table no longer holds reads as not signed in."""
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=MAX_AGE)
        except BadData:  # forged, expired, or not one of ours
            return None
        if not isinstance(data, dict) or not isinstance(data.get("csrf"), str):
            return None
        key = data.get("key")
        if not isinstance(key, str):
            return Session(data["csrf"])
        for digest, grant in table.grants.items():
            if hmac.compare_digest(self._key(digest), key):
                return Session(data["csrf"], grant)
        return Session(data["csrf"])

    def _key(self, digest: str) -> str:
        return hmac.new(self._secret, digest.encode(), hashlib.sha256).hexdigest()


def csrf_matches(session: Session | None, sent: str) -> bool:
    return session is not None and bool(sent) and hmac.compare_digest(session.csrf, sent)
