"""``/-/compare/<org>/<name>.svg``: the kernel's benchmark comparison across releases and
machines (:mod:`kernelhub_serve.compare`), drawn on the server like the per-run plots.
Not cacheable for good (a new release or run changes it): ``no-cache`` with an ETag over
what it is drawn from, so a browser revalidates cheaply."""

from __future__ import annotations

import hashlib

from starlette.responses import Response

from .bench_compare import compare_releases, comparison_svg
from .context import Call
from .errors import ApiError


def compare_plot(call: Call) -> Response:
    ctx, repo_id = call.ctx, call.repo_id
    comparison = compare_releases(ctx.store, ctx.store.open(repo_id))
    if comparison.empty:
        raise ApiError(404, f"no release of {repo_id} has published benchmark results to "
                            "compare (kernelhub benchmark REPO --publish)")
    etag = '"' + hashlib.sha256(repr(comparison.key).encode()).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if call.request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(comparison_svg(repo_id, comparison), media_type="image/svg+xml",
                    headers=headers)
