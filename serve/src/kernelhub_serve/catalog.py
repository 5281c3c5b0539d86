"""One line about each repository, as the index and the search page show it: its default
ref, variants (with the backends and torch versions they serve), latest release, a
description (the README's first paragraph) and whether it is private.

Read at the repository's default ref (what a loader reads by default); variant names go
through the loader's one parser, so what the search matches is what loaders pick.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelhub.errors import KernelHubError
from kernelhub.formats.variants import VariantKind, parse_variant

from .hubview import RefView, default_ref, list_refs
from .repos import RepoStore
from .writer import is_private

README = "README.md"
MAX_README = 256 * 1024
"""A README larger than this is not read for its description."""
_FRONT_MATTER = re.compile(r"\A---\r?\n.*?\r?\n---\r?\n", re.S)


@dataclass
class KernelSummary:
    id: str
    ref: RefView | None
    variants: list[str]
    release: RefView | None
    branches: int
    private: bool
    description: str = ""
    backends: set[str] = field(default_factory=set)
    """The backends its variants serve (``cpu``, ``cuda``, ``rocm``, ``xpu``, ``metal``;
    ``any`` for a universal variant)."""
    torch: set[str] = field(default_factory=set)
    """The torch versions its compiled variants are built for (``2.13``); a stable-ABI
    variant adds ``≥2.13``, a pure-Python one ``any``."""

    def serves_torch(self, wanted: str) -> bool:
        """Whether some variant loads under torch ``wanted`` (``2.13``)."""
        if wanted in self.torch or "any" in self.torch:
            return True
        try:
            version = tuple(int(p) for p in wanted.split("."))
        except ValueError:
            return False
        return any(t.startswith("≥") and tuple(int(p) for p in t[1:].split(".")) <= version
                   for t in self.torch)

    def text(self) -> str:
        """Everything a search term may match, lower case."""
        return " ".join([self.id, self.description, *self.variants, *self.backends,
                         *sorted(self.torch)]).lower()


def summarize(store: RepoStore, repo_id: str) -> KernelSummary:
    repo = store.open(repo_id)
    refs = list_refs(store, repo)
    ref = default_ref(refs)
    variants = sorted(e.path.split("/")[1] for e in store.entries(repo, ref.commit, "build/")
                      if e.kind == "directory") if ref else []
    releases = [r for r in refs if r.kind == "release"]
    summary = KernelSummary(repo_id, ref, variants, releases[0] if releases else None,
                            sum(r.kind == "branch" for r in refs),
                            is_private(store.path_of(repo_id)))
    for name in variants:
        _add_variant(summary, name)
    if ref is not None:
        found = [e for e in store.entries(repo, ref.commit, README)
                 if e.kind == "file" and e.path == README and e.size <= MAX_README]
        if found:
            (data,) = repo.read_blobs([found[0].oid])
            summary.description = describe(data.decode("utf-8", errors="replace"))
    return summary


def describe(readme: str, limit: int = 240) -> str:
    """The README's first paragraph of prose (no front matter, heading, badge or code)."""
    text = _FRONT_MATTER.sub("", readme, count=1)
    fenced = False
    paragraph: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or stripped.startswith(("#", "![", "<", "[![", "|")):
            if paragraph:
                break
            continue
        if not stripped:
            if paragraph:
                break
            continue
        paragraph.append(stripped)
    joined = " ".join(paragraph)
    return joined if len(joined) <= limit else joined[:limit - 1].rstrip() + "…"


def _add_variant(summary: KernelSummary, name: str) -> None:
    try:
        v = parse_variant(name)
    except KernelHubError:
        return
    summary.backends.add(v.backend or "any")
    if v.kind is VariantKind.COMPILED and v.torch is not None:
        summary.torch.add(f"{v.torch[0]}.{v.torch[1]}")
    elif v.kind is VariantKind.STABLE_ABI and v.torch is not None:
        summary.torch.add(f"≥{v.torch[0]}.{v.torch[1]}")
    elif v.kind in (VariantKind.NOARCH, VariantKind.UNIVERSAL):
        summary.torch.add("any")
