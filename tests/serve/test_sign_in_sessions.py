"""Signing in with a token, over plain HTTP as a hostile client would try it: the cookie
is signed, HttpOnly and SameSite; it reads what its token reads and writes nothing; a
forged, foreign or revoked cookie reads as nobody; every form that changes the session
needs the session's csrf value and this site as its origin."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served import READ_TOKEN, WRITE_TOKEN, serving
from team_hub import PUBLIC, SECRET, publish_team_kernels

HTML = {"accept": "text/html"}


@pytest.fixture
def team(hub: Path, tokens_file: Path, tmp_path: Path) -> Iterator[str]:
    from kernelhub_serve.tokens import TokenTable

    with serving(hub, TokenTable.load(tokens_file)) as url:
        publish_team_kernels(hub, tmp_path, url)
        yield url


def cookie_of(answer: httpx.Response) -> str:
    header = answer.headers["set-cookie"]
    match = re.match(r"kernelhub_session=([^;]*);", header)
    assert match, header
    return match.group(1)


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match, page
    return match.group(1)


def get(url: str, path: str, cookie: str | None = None) -> httpx.Response:
    headers = dict(HTML)
    if cookie is not None:
        headers["cookie"] = f"kernelhub_session={cookie}"
    return httpx.get(url + path, headers=headers)


def post(url: str, path: str, cookie: str | None, form: dict[str, str],
         **headers: str) -> httpx.Response:
    sent = {**HTML, **{k.replace("_", "-"): v for k, v in headers.items()}}
    if cookie is not None:
        sent["cookie"] = f"kernelhub_session={cookie}"
    return httpx.post(url + path, data=form, headers=sent)


def sign_in(url: str, token: str, next_path: str = "/") -> str:
    form_page = get(url, "/-/sign-in")
    anonymous = cookie_of(form_page)
    answer = post(url, "/-/sign-in", anonymous,
                  {"csrf": csrf_of(form_page.text), "token": token, "next": next_path},
                  origin=url)
    assert answer.status_code == 303, answer.text
    return cookie_of(answer)


def test_a_session_reads_what_its_token_reads_and_nothing_more(team: str) -> None:
    url = team
    assert SECRET not in get(url, "/").text
    hidden = get(url, f"/kernels/{SECRET}")
    assert hidden.status_code == 404 and "sign in" in hidden.text  # as missing, like the API

    form_page = get(url, "/-/sign-in")
    header = form_page.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=lax" in header and "path=/" in header
    assert "secure" not in header  # plain http on loopback; https adds it
    anonymous = cookie_of(form_page)
    csrf = csrf_of(form_page.text)
    assert SECRET not in get(url, "/", anonymous).text  # a session not signed in is nobody

    wrong = post(url, "/-/sign-in", anonymous, {"csrf": csrf, "token": "hf_not_a_token"},
                 origin=url)
    assert wrong.status_code == 401 and "does not know that token" in wrong.text
    assert "set-cookie" not in wrong.headers

    answer = post(url, "/-/sign-in", anonymous,
                  {"csrf": csrf, "token": READ_TOKEN, "next": f"/kernels/{SECRET}"}, origin=url)
    assert answer.status_code == 303 and answer.headers["location"] == f"/kernels/{SECRET}"
    session = cookie_of(answer)
    assert session != anonymous and READ_TOKEN not in session
    assert csrf_of(get(url, "/", session).text) != csrf  # signing in starts a new csrf value

    index = get(url, "/", session).text
    assert SECRET in index and 'class="badge private"' in index and "reader" in index
    page = get(url, f"/kernels/{SECRET}", session)
    assert page.status_code == 200 and '<span class="badge private">private</span>' in page.text
    assert 'class="badge private"' not in get(url, f"/kernels/{PUBLIC}", session).text
    cookie = {"cookie": f"kernelhub_session={session}"}
    info = httpx.get(f"{url}/api/models/{SECRET}", headers=cookie)
    assert info.status_code == 200 and info.json()["private"] is True
    metadata = httpx.get(f"{url}/kernels/{SECRET}/resolve/v1/build/torch-universal/"
                         "metadata.json", headers=cookie)
    assert metadata.status_code == 200 and metadata.json()["name"] == "secret"
    assert [m["id"] for m in httpx.get(f"{url}/api/models", headers=cookie).json()] == \
        [PUBLIC, SECRET]


def test_a_session_never_writes(team: str) -> None:
    session = sign_in(team, WRITE_TOKEN)
    cookie = {"cookie": f"kernelhub_session={session}"}
    created = httpx.post(f"{team}/api/repos/create", json={"name": "x", "organization": "acme"},
                         headers=cookie)
    assert created.status_code == 401  # writes need the Bearer token itself
    deleted = httpx.request("DELETE", f"{team}/api/repos/delete",
                            json={"name": "public", "organization": "acme"}, headers=cookie)
    assert deleted.status_code == 401
    assert get(team, f"/kernels/{PUBLIC}").status_code == 200


def test_forged_and_foreign_cookies_read_as_nobody(team: str, tmp_path: Path) -> None:
    from kernelhub_serve.sessions import SessionKeys
    from kernelhub_serve.tokens import token_digest

    session = sign_in(team, READ_TOKEN)
    assert get(team, f"/kernels/{SECRET}", session).status_code == 200
    payload, _, signature = session.rpartition(".")
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    other_hub = tmp_path / "other-hub"
    foreign, _ = SessionKeys(other_hub).new(token_digest(READ_TOKEN))  # right token, other hub
    for forged in (f"{payload}.{flipped}", foreign, "e30.AAAA.AAAA", "not-a-cookie", "",
                   session + "x"):
        answer = get(team, f"/kernels/{SECRET}", forged)
        assert answer.status_code == 404, forged
        assert SECRET not in get(team, "/", forged).text


def test_a_revoked_token_s_session_stops_working(hub: Path, tokens_file: Path,
                                                 tmp_path: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    table = TokenTable.load(tokens_file)
    with serving(hub, table) as url:
        publish_team_kernels(hub, tmp_path, url)
        session = sign_in(url, READ_TOKEN)
        assert get(url, f"/kernels/{SECRET}", session).status_code == 200
    revoked = TokenTable({d: g for d, g in table.grants.items() if g.name != "reader"},
                         table.anonymous_read)
    with serving(hub, revoked) as url:  # the tokens file without "reader", server restarted
        page = get(url, f"/kernels/{SECRET}", session)
        assert page.status_code == 404
        assert "Sign in" in get(url, "/", session).text
        assert httpx.get(f"{url}/api/models/{SECRET}",
                         headers={"cookie": f"kernelhub_session={session}"}).status_code == 401


def test_forms_need_the_session_s_csrf_value_and_this_site(team: str) -> None:
    url = team
    form_page = get(url, "/-/sign-in")
    anonymous, csrf = cookie_of(form_page), csrf_of(form_page.text)
    other_page = get(url, "/-/sign-in")
    other_csrf = csrf_of(other_page.text)
    good = {"csrf": csrf, "token": READ_TOKEN}
    refused = [
        post(url, "/-/sign-in", anonymous, {"token": READ_TOKEN}),  # no csrf value
        post(url, "/-/sign-in", anonymous, {**good, "csrf": ""}),
        post(url, "/-/sign-in", anonymous, {**good, "csrf": other_csrf}),  # another session's
        post(url, "/-/sign-in", None, good),  # the value without its cookie
        post(url, "/-/sign-in", anonymous, good, origin="http://evil.example"),
        post(url, "/-/sign-in", anonymous, good, origin="null"),
        post(url, "/-/sign-in", anonymous, good, sec_fetch_site="cross-site"),
        post(url, "/-/sign-in", anonymous, good, sec_fetch_site="same-site"),
    ]
    for answer in refused:
        assert answer.status_code == 403, answer.text
        assert "set-cookie" not in answer.headers
    json_client = httpx.post(f"{url}/-/sign-in", data={"token": READ_TOKEN})
    assert json_client.status_code == 403 and "\n" not in json_client.json()["error"]

    escaped = post(url, "/-/sign-in", anonymous, {**good, "next": "//evil.example/x"},
                   origin=url, sec_fetch_site="same-origin")
    assert escaped.status_code == 303 and escaped.headers["location"] == "/"
    session = cookie_of(escaped)

    signed_in_csrf = csrf_of(get(url, "/", session).text)
    for form, headers in (({"csrf": csrf}, {}), ({}, {}),
                          ({"csrf": signed_in_csrf}, {"origin": "http://evil.example"})):
        answer = post(url, "/-/sign-out", session, form, **headers)
        assert answer.status_code == 403
    assert get(url, f"/kernels/{SECRET}", session).status_code == 200  # still signed in
    out = post(url, "/-/sign-out", session, {"csrf": signed_in_csrf}, origin=url)
    assert out.status_code == 303 and out.headers["location"] == "/"
    assert re.match(r'kernelhub_session="?"?;', out.headers["set-cookie"])
    assert "max-age=0" in out.headers["set-cookie"].lower()


def test_https_sessions_are_secure_cookies(hub: Path, tokens_file: Path) -> None:
    from kernelhub_serve.tokens import TokenTable

    with serving(hub, TokenTable.load(tokens_file),
                 public_url="https://kernels.example.internal") as url:
        form_page = get(url, "/-/sign-in")
        assert "secure" in form_page.headers["set-cookie"].lower()
        answer = post(url, "/-/sign-in", cookie_of(form_page),
                      {"csrf": csrf_of(form_page.text), "token": READ_TOKEN},
                      origin="https://kernels.example.internal")
        assert answer.status_code == 303 and "secure" in answer.headers["set-cookie"].lower()
