"""Pages for people: the hub's kernels, and per kernel its refs, variant matrix,
signature, metadata, exported symbols and benchmark plots. Server-side HTML from jinja2
templates, one stylesheet, no script; the same read rules as the API (a page lists only
what the caller may read).
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from kernelhub.errors import KernelHubError
from kernelhub.versions import is_commit_id
from starlette.responses import HTMLResponse, Response

from . import names
from .bench_compare import compare_releases
from .bench_results import read_run
from .catalog import summarize
from .context import Call, HubContext
from .errors import ApiError
from .hubview import kernel_view
from .listing import readable
from .plots import plot_svg
from .readme import readme_at
from .sessions import current as current_session
from .urls import FILTERS
from .writer import is_private

TEMPLATES = Path(__file__).parent / "templates"
_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters.update(FILTERS)
_env.globals["session"] = current_session.get  # the header's "signed in as" and sign-out form


def index(call: Call) -> Response:
    summaries = [summarize(call.ctx.store, repo_id) for repo_id in readable(call)]
    kernels = [s for s in summaries if s.variants]
    others = [s for s in summaries if not s.variants]
    return _html("index.html", kernels=kernels, others=others, hub=str(call.ctx.settings.hub))


def kernel(call: Call) -> Response:
    """A kernel's page at ``?rev=`` (a branch, tag or commit; by default the ref a loader
    reads), with its README (a commit's own page is :func:`.pages_repo.commit`)."""
    ctx, repo_id = call.ctx, call.repo_id
    rev = call.params.get("rev") or call.request.query_params.get("rev")
    repo = ctx.store.open(repo_id)
    view = kernel_view(ctx.store, repo, repo_id, names.revision(rev) if rev else None)
    rows, cols, cells = view.matrix()
    base = ctx.base_url(call.request)
    readme = readme_at(ctx.store, repo, repo_id, view.selected.commit) if view.selected else None
    return _html("kernel.html", k=view, rows=rows, cols=cols, cells=cells,
                 endpoint=base, org=call.org, readme=readme, private=is_private(ctx.store.path_of(repo_id)),
                 downloads=ctx.downloads.counts(repo_id),
                 comparison=compare_releases(ctx.store, repo),
                 load_line=_load_line(ctx, repo_id, view.selected, base))


def _load_line(ctx: HubContext, repo_id: str, selected: object, base: str) -> str:
    """The command the page shows: the ecosystem's loader at this server, for the ref
    shown, trusting the org only where this server's publisher-trust answer will not,
    with ``HF_TOKEN`` where the repository is private — so it works as shown."""
    name = str(getattr(selected, "name", "") or "")
    spec = f"version={name[1:]}" if name[1:].isdigit() and name[:1] == "v" else (
        f"revision={name!r}" if name else "version=1")
    try:
        trusted = repo_id.split("/")[0] in ctx.trusted_publishers()
    except KernelHubError:
        trusted = False
    token = "HF_TOKEN=<your token> " if is_private(ctx.store.path_of(repo_id)) else ""
    flag = "" if trusted else ", trust_remote_code=True"
    return (f"{token}HF_ENDPOINT={base} python -c \"import kernels; "
            f"kernels.get_kernel('{repo_id}', {spec}{flag})\"")


def plot(call: Call) -> Response:
    """The plot of the document at ``commit:path`` (a full commit id: the URL names bytes
    that never change, so it may be cached for good)."""
    ctx, repo_id, commit = call.ctx, call.repo_id, call.params["commit"]
    path = call.params["path"]
    if not is_commit_id(commit) or not path.endswith(".svg"):
        raise ApiError(404, f"{commit!r:.80} is not a full commit id, or not a plot URL")
    path = names.file_path(path.removesuffix(".svg"))
    repo = ctx.store.open(repo_id)
    full = ctx.store.commit_of(repo, repo_id, commit)
    svg = plot_svg(repo_id, full, path, lambda: read_run(ctx.store, repo, repo_id, full, path))
    return Response(svg, media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=86400, immutable"})


def error_page(error: ApiError) -> HTMLResponse:
    html = _env.get_template("error.html").render(status=error.status, message=error.message)
    return HTMLResponse(html, status_code=error.status, headers=error.headers)


def _html(template: str, **values: object) -> HTMLResponse:
    return render(template, 200, **values)


def render(template: str, status: int = 200, /, **values: object) -> HTMLResponse:
    """A page from its template (the pages' modules share this one environment)."""
    return HTMLResponse(_env.get_template(template).render(**values), status_code=status)
