"""Reading a repository over HTTP, as a browser asks: the README rendered and made inert,
the file browser with sizes and digests, file views escaped, history in pages, one commit,
two releases compared — and HTML errors for a person, JSON for an API client."""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from hypothesis import given, settings
from hypothesis import strategies as st
from repo_story import BINARY, CPU, CUDA, HOSTILE_TEXT, REPO_ID, UNIVERSAL, publish_story
from served import WRITE_TOKEN

HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
K = f"/kernels/{REPO_ID}"


@pytest.fixture
def story(server: str, hub: Path, tmp_path: Path) -> dict[str, str]:
    return publish_story(hub, tmp_path, server)


def page(server: str, path: str) -> str:
    answer = httpx.get(f"{server}{path}", headers=HTML)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


def section(html: str, ident: str) -> str:
    found = re.search(rf'<(section|table|dl|ol|pre|p)[^>]* id="{ident}".*?</\1>', html, re.S)
    assert found, f"no #{ident}"
    return found.group(0)


def test_the_readme_is_rendered_on_the_kernel_page(server: str, story: dict[str, str]) -> None:
    html = section(page(server, K), "readme")
    assert "<h1>Demo kernel</h1>" in html and "<em>activations</em>" in html
    assert "<table>" in html and "<td>2.1x</td>" in html and "<details>" in html
    assert "license: apache-2.0" not in html  # the front matter is metadata, not prose
    commit = story["v1.1.0"]
    assert f'href="{K}/blob/{commit}/docs/usage.md"' in html
    assert 'href="#usage"' in html
    at_first = page(server, f"{K}?rev=v1.0.0")
    assert 'id="readme"' not in at_first  # v1.0.0 had no README


HOSTILE_README = """# Title
<script>window.pwned = 1</script>
<img src="missing.png" onerror="window.pwned = 2">
[click](javascript:window.pwned=3) [data](data:text/html,<script>x</script>)
<a href="JaVaScRiPt:alert(1)">raw</a> <a href="vbscript:x">vb</a>
<iframe src="https://example.com"></iframe><object data="x.swf"></object>
<div style="position:fixed;inset:0" onclick="x()">styled</div>
<svg><script>alert(1)</script><a xlink:href="javascript:alert(2)">s</a></svg>
<form action="https://evil.example/"><input name="q"><button formaction="javascript:x">go</button></form>
<meta http-equiv="refresh" content="0;url=https://evil.example/">
<base href="https://evil.example/"><link rel="stylesheet" href="https://evil.example/x.css">
<style>body { display: none }</style>
[climb](../../../../etc/passwd) <!-- a comment -->
"""


def test_a_hostile_readme_comes_out_inert(server: str, story: dict[str, str]) -> None:
    HfApi(endpoint=server, token=WRITE_TOKEN).upload_file(
        path_or_fileobj=HOSTILE_README.encode(), path_in_repo="README.md", repo_id=REPO_ID,
        repo_type="kernel", revision="v1")
    html = section(page(server, K), "readme")
    tags = Markup.parse(html)
    names = {t for t, _ in tags}
    assert not names & {"script", "iframe", "object", "style", "form", "input", "button",
                        "meta", "base", "link", "svg"}, names
    for tag, attrs in tags:
        for key, value in attrs:
            assert not key.startswith("on") and key not in ("style", "formaction"), (tag, key)
            if key in ("href", "src", "action", "xlink:href"):
                assert value and value.startswith(("/kernels/", "#", "http://", "https://")), \
                    (tag, key, value)
    assert "etc/passwd" not in str([a for _, a in tags])  # the link that climbs is dropped
    assert "<!--" not in html
    assert "<h1>Title</h1>" in html and ">styled</div>" in html  # the prose survives


class Markup(HTMLParser):
    """Every start tag of an HTML fragment with its attributes (as a browser parses it)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, [(k.lower(), (v or "").strip().lower()) for k, v in attrs]))

    @classmethod
    def parse(cls, html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
        parser = cls()
        parser.feed(html)
        return parser.tags


def test_render_readme_keeps_markdown_and_drops_markup_that_runs() -> None:
    from kernelhub_serve.readme import render_readme, strip_front_matter

    html = render_readme("![x](<img/a b.png>) [y](sub/page.md#part) <a href='//cdn/x'>z</a>"
                         " [up](a/%2e%2e/%2E%2E/x) <a href='./c d.md'>c</a>", "acme/demo", "c" * 40)
    assert f'src="/kernels/acme/demo/resolve/{"c" * 40}/img/a%20b.png"' in html
    assert f'href="/kernels/acme/demo/blob/{"c" * 40}/c%20d.md"' in html
    assert '<a rel="noopener noreferrer nofollow">up</a>' in html  # climbs: no href at all
    assert f'href="/kernels/acme/demo/blob/{"c" * 40}/sub/page.md#part"' in html
    assert 'href="//cdn/x"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert render_readme("<p onmouseover=alert(1)>hi</p>", "a/b", "c" * 40) == "<p>hi</p>"
    assert strip_front_matter("---\na: 1\n---\nbody\n") == "body\n"
    assert strip_front_matter("---\nno end\n") == "---\nno end\n"


def test_the_file_browser_lists_sizes_blob_ids_and_declared_digests(
        server: str, story: dict[str, str]) -> None:
    root = section(page(server, f"{K}/tree/v1"), "files")
    for name in ("build/", "docs/", "data/", "README.md", "release.json"):
        assert f">{name}<" in root or name == "release.json", name
    build = section(page(server, f"{K}/tree/v1/build"), "files")
    assert f">{CPU}/<" in build and f">{CUDA}/<" in build and UNIVERSAL not in build
    cpu_files = [e for e in HfApi(endpoint=server).list_repo_tree(
        REPO_ID, path_in_repo=f"build/{CPU}", repo_type="kernel", revision="v1")]
    cpu_size = sum(getattr(e, "size", 0) for e in cpu_files)
    row = re.search(rf'<tr class="directory">.*?>{CPU}/<.*?</tr>', build, re.S)
    assert row and f"{cpu_size} Bytes" in row.group(0) and "2 files" in row.group(0), build
    old_build = section(page(server, f"{K}/tree/v1.0.0/build"), "files")
    assert f">{UNIVERSAL}/<" in old_build and CUDA not in old_build  # per ref

    variant = page(server, f"{K}/tree/v1/build/{CPU}")
    listing = section(variant, "files")
    expected = hashlib.sha256(b"VALUE = 2\n").hexdigest()
    row = re.search(r'<tr class="file">.*?>__init__\.py<.*?</tr>', listing, re.S)
    assert row and "10 Bytes" in row.group(0) and expected in row.group(0), listing
    blob_id = httpx.get(f"{server}{K}/resolve/v1/build/{CPU}/__init__.py").headers["etag"]
    assert blob_id.strip('"')[:12] in row.group(0)
    commit = section(page(server, f"{K}/tree/{story['v1.0.0']}/build/{CPU}"), "files")
    assert hashlib.sha256(b"VALUE = 1\n").hexdigest() in commit  # a commit id is a ref too


def test_a_file_view_escapes_the_text_and_links_the_download(
        server: str, story: dict[str, str]) -> None:
    html = page(server, f"{K}/blob/v1/docs/page.html")
    source = section(html, "source")
    assert "<script>" not in source and "&lt;script&gt;window.pwned" in source
    assert "&amp; &lt;b&gt;not bold&lt;/b&gt;" in source
    facts = section(html, "file")
    digest = hashlib.sha256(HOSTILE_TEXT.encode()).hexdigest()
    assert digest in facts and f"{len(HOSTILE_TEXT)} bytes" in facts
    href = re.search(r'href="([^"]*/resolve/[^"]*)"', facts)
    assert href and story["v1.1.0"] in href.group(1)
    assert httpx.get(f"{server}{href.group(1)}").content == HOSTILE_TEXT.encode()

    binary = page(server, f"{K}/blob/v1/data/table.bin")
    assert "A binary file" in binary and hashlib.sha256(BINARY).hexdigest() in binary
    init = page(server, f"{K}/blob/v1/build/{CPU}/__init__.py")
    assert "matches metadata.json" in init and "VALUE = 2" in init


def test_a_tampered_variant_file_shows_its_digest_mismatch(server: str,
                                                          story: dict[str, str]) -> None:
    HfApi(endpoint=server, token=WRITE_TOKEN).upload_file(
        path_or_fileobj=b"VALUE = 666\n", path_in_repo=f"build/{CPU}/__init__.py",
        repo_id=REPO_ID, repo_type="kernel", revision="v1")
    html = page(server, f"{K}/blob/v1/build/{CPU}/__init__.py")
    assert "matches metadata.json" not in html
    assert "metadata.json declares " + hashlib.sha256(b"VALUE = 2\n").hexdigest() in html


def test_history_pages_and_the_commit_page(server: str, story: dict[str, str]) -> None:
    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    for i in range(30):  # 33 commits: two pages of 30
        api.create_commit(REPO_ID, repo_type="kernel", revision="v1",
                          commit_message=f"note {i}",
                          operations=[CommitOperationAdd(f"notes/{i}.txt", str(i).encode())])
    first = page(server, f"{K}/commits/v1")
    assert "33 commits · page 1 of 2" in first
    items = re.findall(r'<li><a href="[^"]*/commit/([0-9a-f]{40})">([^<]*)</a>', first)
    assert len(items) == 30 and items[0][1] == "note 29" and 'rel="next" href="?p=2"' in first
    second = page(server, f"{K}/commits/v1?p=2")
    titles = re.findall(r'/commit/[0-9a-f]{40}">([^<]*)</a>', second)
    assert titles == ["release 1.1.0", "Docs and odd files", "release 1.0.0"]
    assert 'rel="prev"' in second and 'rel="next"' not in second

    docs = page(server, f"{K}/commit/{story['docs']}")
    facts = section(docs, "commit")
    assert story["docs"] in facts and f"/commit/{story['v1.0.0']}" in facts  # the parent
    assert "A README, usage notes" in docs and "Docs and odd files" in docs
    changes = section(docs, "changes")
    assert changes.count("<td>added</td>") == 4 and "docs/page.html" in changes
    root = page(server, f"{K}/commit/{story['v1.0.0']}")
    assert "none (the first commit)" in root and "v1.0.0" in section(root, "commit")
    release = section(page(server, f"{K}/commit/v1.1.0"), "changes")
    assert f"build/{UNIVERSAL}/__init__.py" in release and "<td>removed</td>" in release


def test_two_releases_compared(server: str, story: dict[str, str]) -> None:
    html = page(server, f"{K}/compare?base=v1.0.0&head=v1.1.0")
    variants = section(html, "variant-changes")
    assert re.search(rf"<code>{CPU}</code></td><td>changed</td>", variants)
    assert re.search(rf"<code>{UNIVERSAL}</code></td><td>removed</td>", variants)
    assert re.search(rf"<code>{CUDA}</code></td><td>added</td>", variants)
    assert re.search(r'<tr class="differs"><th scope="row">release</th><td>1.0.0</td>'
                     r"<td>1.1.0</td>", variants)
    kernel = section(html, "kernel-fields")
    assert re.search(r'<tr class="differs"><th scope="row">backends</th><td>cpu, universal</td>'
                     r"<td>cpu, cuda</td>", kernel)
    assert re.search(r'<tr><th scope="row">variants</th><td>2</td><td>2</td>', kernel)
    files = section(html, "file-changes")
    assert "README.md" in files and f"build/{CUDA}/metadata.json" in files
    default = page(server, f"{K}/compare")  # the two newest releases, newest last
    assert 'name="base" value="v1.0.0"' in default and 'name="head" value="v1.1.0"' in default
    same = page(server, f"{K}/compare?base=v1&head={story['v1.1.0']}")
    assert "no file changed" in same and "0 files changed" in same


@pytest.mark.parametrize("path", [
    f"{K}/tree/nope", f"{K}/tree/v1/no/such/folder", f"{K}/tree/v1/README.md",
    f"{K}/blob/v1/missing.txt", f"{K}/blob/v1/docs", f"{K}/commits/nope",
    f"{K}/commits/v1?p=9", f"{K}/commit/{'0' * 40}", f"{K}/compare?base=v1&head=v9.9.9",
    "/kernels/acme/nothing/tree/v1", "/acme/nothing/commits/v1", f"/{REPO_ID}/blob/v1/x",
    f"{K}/tree/v1/a/../b", f"{K}/commits/v1?p=0", f"{K}/compare?base=..&head=v1",
    f"{K}?rev=nope", "/kernels/acme/nothing", f"/-/plot/{REPO_ID}/{'0' * 40}/x.json.svg",
])
def test_a_missing_page_answers_html_to_a_browser_and_json_to_a_client(
        server: str, story: dict[str, str], path: str) -> None:
    person = httpx.get(f"{server}{path}", headers=HTML)
    assert person.status_code in (400, 404), (path, person.status_code)
    assert person.headers["content-type"].startswith("text/html")
    assert f"<h1>{person.status_code}</h1>" in person.text
    client = httpx.get(f"{server}{path}")
    assert client.status_code == person.status_code
    assert client.headers["content-type"] == "application/json" and client.json()["error"]


def test_the_plain_spelling_serves_the_same_pages(server: str, story: dict[str, str]) -> None:
    for tail in ("tree/v1/docs", "blob/v1/docs/usage.md", "commits/v1", "compare",
                 f"commit/{story['docs']}"):
        assert page(server, f"{K}/{tail}") == page(server, f"/{REPO_ID}/{tail}"), tail


def test_a_private_repository_is_read_only_by_who_may(server: str) -> None:
    from served import READ_TOKEN

    api = HfApi(endpoint=server, token=WRITE_TOKEN)
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    info = api.upload_file(path_or_fileobj=b"# Secret\n", path_in_repo="README.md",
                           repo_id="acme/secret", repo_type="kernel")
    for tail in ("tree/main", "blob/main/README.md", "commits/main", "compare",
                 f"commit/{info.oid}"):
        path = f"/kernels/acme/secret/{tail}"
        outsider = httpx.get(f"{server}{path}", headers=HTML)
        # A browser is not told the repository exists: 404, with the sign-in offered.
        assert outsider.status_code == 404 and "<h1>404</h1>" in outsider.text, path
        assert "sign-in" in outsider.text, path
        assert "Secret" not in outsider.text
        reader = httpx.get(f"{server}{path}",
                           headers={**HTML, "Authorization": f"Bearer {READ_TOKEN}"})
        assert reader.status_code == 200, (path, reader.text[:200])


FRAGMENTS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<a href='javascript:x'>",
             "[l](javascript:alert(1))", "<svg onload=alert(1)>", "<iframe srcdoc='<script>'>",
             "<div style='x' onmouseover=y>", "<scr<script>ipt>", "<a href=\"java\tscript:x\">",
             "![i](data:image/svg+xml;base64,PHN2Zz4=)", "<math><mi xlink:href=javascript:x>",
             "<!--", "-->", "`code`", "\n\n", "# h\n", "| a |\n|---|\n| b |\n", "<details>",
             "<a href='../../x'>", "&lt;", "<", ">", "\"", "'", "<object data=x>", "<p/onclick=x>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=12))
def test_no_readme_renders_anything_that_runs(parts: list[str]) -> None:
    from kernelhub_serve.readme import render_readme

    html = render_readme("".join(parts), "acme/demo", "c" * 40)
    for tag, attrs in Markup.parse(html):
        assert tag not in ("script", "iframe", "svg", "math", "object", "style", "form"), html
        for key, value in attrs:
            assert not key.startswith("on") and key != "style", html
            if key in ("href", "src"):
                assert value and value.startswith(("/kernels/acme/demo/", "#", "http://",
                                                   "https://", "mailto:")), html
