"""``GET /api/models`` and ``/api/kernels``: the repositories a caller may read, as
``HfApi.list_models`` and ``hf models ls`` ask for them.

A repository the caller may not read is left out, not reported as hidden: a listing must
not tell anyone that a private repository exists (the same rule the per-repository routes
keep by answering such a repository as missing). The whole answer is one page, without a
``Link`` header (huggingface_hub then stops); ``limit`` cuts it.
"""

from __future__ import annotations

from typing import cast

from starlette.responses import Response

from .context import Call, json_response
from .errors import ApiError
from .repos import hub_date
from .writer import is_private

SORT_KEYS = ("id", "lastModified", "createdAt", "downloads", "likes", "trendingScore")
"""The ``sort`` values huggingface_hub sends; likes and trending are all zero here, so
those two leave the order by id; downloads are the variants' counts
(:mod:`kernelhub_serve.downloads`), most first."""


def list_models(call: Call) -> Response:
    return _listing(call, "model")


def list_kernels(call: Call) -> Response:
    return _listing(call, "kernel")


def _listing(call: Call, repo_type: str) -> Response:
    query = call.request.query_params
    search = query.get("search", "").lower()
    author = query.get("author")
    limit = _limit(query.get("limit"))
    sort = query.get("sort", "id")
    if sort not in SORT_KEYS:
        raise ApiError(400, f"sort must be one of {', '.join(SORT_KEYS)}, not {sort[:40]!r}")
    items = [_item(call, repo_id, repo_type) for repo_id in readable(call, author)
             if search in repo_id.lower()]
    if sort in ("lastModified", "createdAt"):
        # Newest first, as the Hub sorts dates; a repository with no commit last.
        items.sort(key=lambda item: str(item.get("lastModified", "")), reverse=True)
    elif sort == "downloads":
        items.sort(key=lambda item: -cast(int, item["downloads"]))
    return json_response(items[:limit] if limit is not None else items)


def readable(call: Call, author: str | None = None) -> list[str]:
    """The repositories the caller may read (of ``author`` only, if given), by id: what a
    listing or the search page may show."""
    store, caller = call.ctx.store, call.caller
    return [repo_id for repo_id in store.repo_ids()
            if (author is None or repo_id.split("/")[0] == author)
            and caller.may_read(repo_id.split("/")[0], store.path_of(repo_id))]


def _item(call: Call, repo_id: str, repo_type: str) -> dict[str, object]:
    store = call.ctx.store
    repo = store.open(repo_id)
    item: dict[str, object] = {
        "id": repo_id, "_id": repo_id, "author": repo_id.split("/")[0],
        "private": is_private(store.path_of(repo_id)),
        "downloads": call.ctx.downloads.total(repo_id), "likes": 0, "tags": [],
    }
    if repo_type == "model":
        item["modelId"] = repo_id
    commit = repo.resolve_commit("refs/heads/main")
    if commit:  # created with one; a hub written by other tools may lack it
        item["sha"] = commit
        item["lastModified"] = hub_date(repo.out("show", "-s", "--format=%ct", commit))
    return item


def _limit(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ApiError(400, f"limit must be a positive whole number, not {raw[:40]!r}")
    return int(raw)
