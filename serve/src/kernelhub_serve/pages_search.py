"""The search page: the kernels a caller may read, matched on name, description, backend
and torch version.

The candidates are the listing's (:func:`kernelhub_serve.listing.readable`, with the
same ``author`` filter as ``list_models``), so the page never shows what the API would
hide. ``q`` matches like ``list_models``' ``search`` (a case-insensitive substring), but
over the description, variant names, backends and torch versions too, every word of it
somewhere; ``backend`` and ``torch`` keep the kernels with a variant that loads there.
"""

from __future__ import annotations

from starlette.responses import Response

from .catalog import KernelSummary, summarize
from .context import Call
from .errors import ApiError
from .listing import readable
from .pages import render

BACKENDS = ("cpu", "cuda", "rocm", "xpu", "metal")
MAX_QUERY = 200


def search(call: Call) -> Response:
    query = call.request.query_params
    for name in ("q", "author", "backend", "torch"):
        value = query.get(name, "")
        if len(value) > MAX_QUERY or any(ord(c) < 32 or c == "\x7f" for c in value):
            raise ApiError(400, f"{name} must be at most {MAX_QUERY} printable characters")
    q = query.get("q", "").strip()
    author = query.get("author", "").strip() or None
    backend = query.get("backend", "").strip().lower()
    torch = query.get("torch", "").strip()
    if backend and backend not in BACKENDS:
        raise ApiError(400, f"backend must be one of {', '.join(BACKENDS)}, not {backend[:40]!r}")
    found = [s for s in (summarize(call.ctx.store, r) for r in readable(call, author))
             if s.variants and _matches(s, q, backend, torch)]
    downloads = {s.id: call.ctx.downloads.total(s.id) for s in found}
    return render("search.html", found=found, q=q, author=author or "", backend=backend,
                  torch=torch, backends=BACKENDS, downloads=downloads,
                  asked=bool(q or author or backend or torch))


def _matches(summary: KernelSummary, q: str, backend: str, torch: str) -> bool:
    text = summary.text()
    if any(word not in text for word in q.lower().split()):
        return False
    if backend and backend not in summary.backends and "any" not in summary.backends:
        return False
    return not torch or summary.serves_torch(torch)
