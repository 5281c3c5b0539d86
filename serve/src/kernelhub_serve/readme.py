"""A repository's README as safe HTML: Markdown rendered by markdown-it-py (CommonMark plus
tables), then cleaned by nh3 (the ammonia sanitiser).

Why both, in that order: a README is written by whoever may push to the repository, and a
page that shows it is read by everyone who may read it, so whatever the Markdown says —
raw HTML included, which CommonMark passes through — must reach the browser inert. The
Markdown library is allowed raw HTML so a README's harmless tags (``<details>``, ``<sub>``)
still work; nh3's allow-list then drops scripts, event handlers, styles, frames and every
URL scheme but http(s) and mailto. Relative links and images are rewritten here to this
hub's file view and download URLs at the commit shown, as the Hub does, so a README's
``docs/usage.md`` link lands on that file instead of a dead path.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote, unquote, urlsplit

import nh3
from kernelhub.hub.git import GitRepo
from markdown_it import MarkdownIt

from .repos import RepoStore

README_NAMES = ("README.md", "readme.md", "Readme.md", "README.markdown", "README")
MAX_README = 1024**2
"""The largest README rendered (bytes); a larger one is linked, not shown."""
_SCHEMES = {"http", "https", "mailto"}
_KEEP = "/%:@!$&'()*+,;=-._~"
"""Left as they are in a relative link: markdown-it has already percent-encoded it."""
_TAGS = nh3.ALLOWED_TAGS | {"details", "summary"}
_ATTRIBUTES = {**nh3.ALLOWED_ATTRIBUTES, "details": {"open"}, "a": {"href", "title"}, "img": {"src", "alt", "title",
                                                                    "width", "height"},
               "th": {"align"}, "td": {"align"}}
_markdown = MarkdownIt("commonmark", {"html": True}).enable("table")


def readme_at(store: RepoStore, repo: GitRepo, repo_id: str, commit: str) -> str | None:
    """The README at the top of ``commit`` as safe HTML; None when there is none."""
    found = {e.path: e for e in store.paths_info(repo, commit, list(README_NAMES))
             if e.kind == "file"}
    entry = next((found[n] for n in README_NAMES if n in found), None)
    if entry is None:
        return None
    if entry.size > MAX_README:
        return (f"<p>{escape(entry.path)} is {entry.size} bytes, more than this page renders; "
                "see it under Files.</p>")
    text = store.read(repo, entry.oid).decode(errors="replace")
    return render_readme(text, repo_id, commit)


def render_readme(text: str, repo_id: str, commit: str) -> str:
    """The README's Markdown (its YAML front matter, the Hub's model-card header, left out)
    as sanitised HTML; relative ``href``/``src`` point at this hub's pages for ``commit``."""
    html = _markdown.render(strip_front_matter(text))
    blob = f"/kernels/{repo_id}/blob/{commit}/"
    raw = f"/kernels/{repo_id}/resolve/{commit}/"

    def rewrite(tag: str, attribute: str, value: str) -> str | None:
        if attribute not in ("href", "src"):
            return value
        return _relative_to(value, raw if tag == "img" else blob)

    return nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes=_SCHEMES,
                     attribute_filter=rewrite, link_rel="noopener noreferrer nofollow",
                     strip_comments=True)


def strip_front_matter(text: str) -> str:
    """The text after a leading ``---`` … ``---`` block (YAML metadata, not prose)."""
    if not text.startswith("---\n"):
        return text
    end = text.find("\n---", 4)
    if end < 0:
        return text
    rest = text[end + 4:]
    return rest.split("\n", 1)[1] if "\n" in rest else ""


def _relative_to(value: str, base: str) -> str | None:
    """``value`` when it names its own place (a scheme, ``//host``, ``/path``, ``#anchor``);
    a path inside the repository joined onto ``base``; None (the attribute dropped) for a
    path that climbs out of it."""
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith(("/", "#", "?")) or not value:
        return value
    path = parts.path.removeprefix("./")
    if any(unquote(s) in ("", ".", "..") for s in path.split("/")):
        return None  # a browser reads %2e%2e as .. too
    fragment = f"#{quote(parts.fragment, safe=_KEEP)}" if parts.fragment else ""
    return base + quote(path, safe=_KEEP) + fragment
