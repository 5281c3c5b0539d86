"""Sign in and sign out: the forms that turn a token into a session cookie and back.

Both forms change state, so both are checked the same way before anything else: the
request must come from this site (``Sec-Fetch-Site`` and ``Origin``, where the browser
sends them) and carry the ``csrf`` value of the session cookie it came with. The sign-in
page starts a session that is not signed in yet, so its form has a value to echo; signing
in replaces it with a new one (nothing an attacker planted survives). The cookie is
HttpOnly, SameSite=Lax, and Secure whenever the hub is reached over https.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.responses import RedirectResponse, Response

from .context import Call
from .errors import ApiError
from .pages import render
from .sessions import COOKIE, MAX_AGE, Session, csrf_matches, current
from .tokens import token_digest


def sign_in_form(call: Call) -> Response:
    """The form; a browser without a session gets one (not signed in) for its csrf value."""
    session = current.get()
    cookie = None
    if session is None:
        cookie, session = call.ctx.sessions.new()
        current.set(session)
    page = render("sign_in.html", csrf=session.csrf, next=_next(call), problem=None)
    if cookie is not None:
        _set_cookie(call, page, cookie)
    return page


def sign_in(call: Call) -> Response:
    session = _checked_form(call)
    token = _field(call, "token").strip()
    problem = None
    if not token:
        problem = "Paste a token from this hub's tokens file."
    else:
        try:
            grant = call.ctx.settings.tokens.identify(f"Bearer {token}")
        except ApiError:
            grant = None
        if grant is None:
            problem = "This hub does not know that token: check it, or ask whoever runs the hub."
    if problem is not None:
        return render("sign_in.html", 401, csrf=session.csrf, next=_next(call),
                      problem=problem)
    cookie, _ = call.ctx.sessions.new(token_digest(token))
    answer = RedirectResponse(_next(call), status_code=303)
    _set_cookie(call, answer, cookie)
    return answer


def sign_out(call: Call) -> Response:
    _checked_form(call)
    answer = RedirectResponse("/", status_code=303)
    answer.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax",
                         secure=_https(call))
    return answer


def _checked_form(call: Call) -> Session:
    """The session a state-changing form came with, once it is known to come from this
    site with that session's csrf value; 403 otherwise."""
    if not _same_site(call):
        raise ApiError(403, "this form was sent from another site; open this hub's own "
                            "sign-in page and send it from there")
    session = current.get()
    if not csrf_matches(session, _field(call, "csrf")):
        raise ApiError(403, "this form has expired or did not come from this hub's page "
                            "(cookies off?): reload the page and send it again")
    assert session is not None
    return session


def _same_site(call: Call) -> bool:
    request = call.request
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True  # an older browser or a plain client: the csrf value decides
    ours = {_origin(str(request.base_url))}
    if call.ctx.settings.public_url:
        ours.add(_origin(call.ctx.settings.public_url))
    return origin in ours


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _field(call: Call, name: str) -> str:
    values = call.form.get(name) or [""]
    return values[0]


def _next(call: Call) -> str:
    """Where to go after signing in: a path on this hub only (never another site)."""
    target = _field(call, "next") or call.request.query_params.get("next", "")
    if not target.startswith("/") or target.startswith("//") or "\\" in target \
            or any(ord(c) < 32 for c in target):
        return "/"
    return target


def _https(call: Call) -> bool:
    public = call.ctx.settings.public_url or ""
    return call.request.url.scheme == "https" or public.startswith("https://")


def _set_cookie(call: Call, response: Response, value: str) -> None:
    response.set_cookie(COOKIE, value, max_age=MAX_AGE, path="/", httponly=True,
                        samesite="lax", secure=_https(call))
