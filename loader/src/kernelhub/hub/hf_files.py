"""The files of a Hub-API repository: what one tree listing says of them, and downloading
several of them at once.

Why not ``snapshot_download``: for ``build/<variant>/*`` it lists the whole repository,
then sends a HEAD and a GET per file — 2 n + 2 requests, and olah, the mirror teams run,
answers each of them in turn (it reads git synchronously). A tree listing already names
every file with its content hash (:class:`ListedFile`), so the loader lists once
and sends one GET per file, all at once: n + 1 requests, as parallel as the server allows.
What comes back is checked against the listing's content hashes and ``metadata.json``
by the cache before anything of it is kept.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.hub.base"}  # PEP 810: imported when first used

from collections.abc import Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..lazy_names import deferred
from ..value_types import Record
from .base import BUILD_DIR

if TYPE_CHECKING:
    from huggingface_hub import file_download, hf_api
    from huggingface_hub.hf_api import RepoFile, RepoFolder
else:  # read by a Hub-API hub only, which has imported huggingface_hub by then
    file_download = deferred("huggingface_hub.file_download")
    hf_api = deferred("huggingface_hub.hf_api")

MAX_PARALLEL_DOWNLOADS = 8
"""As many files at once as ``snapshot_download`` fetches (its ``max_workers``)."""


class ListedFile(Record, frozen=True):
    """One file of a tree listing."""

    path: str
    """Its path in the repository."""
    content_hash: str
    """``sha256:<hex>`` for a file stored with Git LFS, else ``git:<blob id>`` (see
    :mod:`kernelhub.hub.hashes`)."""


VariantFiles = dict[str, ListedFile]
"""Path inside the variant dir → the file."""


def listed_file(entry: RepoFile) -> ListedFile:
    lfs = entry.lfs
    if lfs is not None:
        return ListedFile(entry.path, f"sha256:{lfs.sha256}")
    return ListedFile(entry.path, f"git:{entry.blob_id}")


def by_variant(entries: Iterable[RepoFile | RepoFolder]) -> dict[str, VariantFiles]:
    """A recursive listing under ``build/`` grouped by variant: every directory directly
    under ``build/`` is a variant, with the files below it (a file directly under
    ``build/`` belongs to none)."""
    variants: dict[str, VariantFiles] = {}
    for entry in entries:
        parts = PurePosixPath(entry.path).parts
        if len(parts) < 2 or parts[0] != BUILD_DIR:
            continue
        if not isinstance(entry, hf_api.RepoFile):
            variants.setdefault(parts[1], {})
        elif len(parts) > 2:
            variants.setdefault(parts[1], {})["/".join(parts[2:])] = listed_file(entry)
    return variants


def download(files: dict[Path, str], headers: dict[str, str]) -> None:
    """GET each ``url`` into its ``path`` (``{path: url}``), up to
    :data:`MAX_PARALLEL_DOWNLOADS` at once; the first failure is raised once the others
    have stopped. huggingface_hub's ``http_get`` does each: its session, proxies and
    retries (resuming a cut transfer), redirects (LFS and Xet storage)."""
    http_get = file_download.http_get  # imported here, not by the first of the threads

    def get(path: Path, url: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            http_get(url, out, headers=headers, displayed_filename=path.name)

    if len(files) <= 1:  # no thread for a lone file
        for path, url in files.items():
            get(path, url)
        return
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_DOWNLOADS, len(files)),
                            thread_name_prefix="kernelhub-download") as pool:
        futures = [pool.submit(get, path, url) for path, url in files.items()]
        for future in wait(futures, return_when=FIRST_EXCEPTION).not_done:
            future.cancel()  # those not started; the running ones finish before the pool closes
    for future in futures:
        if not future.cancelled() and (error := future.exception()) is not None:
            raise error
