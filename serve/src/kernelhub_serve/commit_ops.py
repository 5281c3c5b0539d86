"""The Hub's NDJSON commit payload, parsed and checked once.

``POST /api/<type>s/<id>/commit/<branch>`` carries one JSON object per line: a ``header``
(``summary``, ``description``, optional ``parentCommit``) and then operations — ``file``
(content inline, base64), ``lfsFile`` (a sha256 uploaded beforehand through the LFS batch
API), ``deletedFile`` and ``deletedFolder``. That is what huggingface_hub's
``create_commit`` sends (``_prepare_commit_payload``); copies arrive as ``file`` or
``lfsFile`` lines, so there is no copy operation to parse.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from . import names
from .commit_body import LARGE, decode_base64, lines
from .errors import ApiError
from .lfs import is_oid


@dataclass(frozen=True)
class AddFile:
    path: str
    source: Path
    """The file's bytes, decoded into a scratch file (never held in memory)."""


@dataclass(frozen=True)
class AddLfsFile:
    path: str
    sha256: str
    size: int | None


@dataclass(frozen=True)
class Delete:
    path: str
    folder: bool


@dataclass
class CommitRequest:
    summary: str
    description: str
    parent: str | None
    adds: list[AddFile | AddLfsFile] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)

    @property
    def message(self) -> str:
        return f"{self.summary}\n\n{self.description}" if self.description else self.summary


def parse_commit(body: IO[bytes], scratch: Path) -> CommitRequest:
    """The commit a spooled payload asks for; ApiError 400 naming the first bad line.
    Lines are read one at a time (:mod:`kernelhub_serve.commit_body`) and each added
    file's bytes go to a file under ``scratch``, so memory stays bounded."""
    items = lines(body)
    request = _header(next(items, None))
    seen: set[str] = set()
    for number, item, large in items:
        key, value = _item(item, number)
        path = checked_path(value.get("path"), number)
        if large is not None and key != "file":
            raise ApiError(400, f"commit payload line {number}: only a file's content may be "
                                "large")
        if key in ("file", "lfsFile"):
            if path in seen:
                raise ApiError(400, f"commit payload line {number}: {path} is added twice")
            seen.add(path)
        if key == "file":
            source = scratch / str(len(request.adds))
            _write_content(body, value, large, number, source)
            request.adds.append(AddFile(path, source))
        elif key == "lfsFile":
            request.adds.append(_lfs_file(path, value, number))
        elif key in ("deletedFile", "deletedFolder"):
            request.deletes.append(Delete(path, key == "deletedFolder"))
        else:
            raise ApiError(400, f"commit payload line {number}: unsupported operation "
                                f"{str(key)[:40]!r} (this hub takes file, lfsFile, deletedFile, "
                                "deletedFolder)")
    _check_no_file_is_a_folder(seen)
    return request


def _header(first: tuple[int, object, tuple[int, int] | None] | None) -> CommitRequest:
    """The request the payload's first line (its ``header``) opens."""
    if first is None:
        raise ApiError(400, "empty commit payload: expected NDJSON lines starting with a header")
    key, value = _item(first[1], 1)
    if key != "header" or first[2] is not None:
        raise ApiError(400, "commit payload must start with a header line")
    summary, description, parent = (value.get(k) for k in ("summary", "description",
                                                            "parentCommit"))
    if not isinstance(summary, str) or not summary.strip() or len(summary) > 64 * 1024:
        raise ApiError(400, "the commit needs a summary (the commit message)")
    if not isinstance(description, str | None) or not isinstance(parent, str | None):
        raise ApiError(400, "commit header: description and parentCommit must be strings")
    return CommitRequest(summary, description or "",
                         names.commit_id(parent) if parent else None)


def _write_content(body: IO[bytes], value: dict[str, object], large: tuple[int, int] | None,
                   number: int, source: Path) -> None:
    """A ``file`` line's bytes into ``source``: inline, or (``large``) decoded from the
    spool where the line's one base64 string lies."""
    with source.open("wb") as out:
        if large is None:
            out.write(_content(value, number))
        elif value.get("content") != LARGE or value.get("encoding") != "base64":
            raise ApiError(400, f"commit payload line {number}: a large file's content must "
                                "be base64")
        else:
            decode_base64(body, large, out, number)


def _lfs_file(path: str, value: dict[str, object], number: int) -> AddLfsFile:
    oid, size = value.get("oid"), value.get("size")
    if value.get("algo", "sha256") != "sha256" or not is_oid(oid):
        raise ApiError(400, f"commit payload line {number}: an lfsFile needs algo sha256 and "
                            "a 64-hex oid")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
        raise ApiError(400, f"commit payload line {number}: lfsFile size must be an int")
    return AddLfsFile(path, str(oid), size)


def checked_path(path: object, number: int) -> str:
    """A repository path (the one rule of :func:`kernelhub_serve.names.file_path`); a
    leading or trailing '/' is dropped, as the Hub does."""
    if not isinstance(path, str) or not path.strip("/"):
        raise ApiError(400, f"commit payload line {number}: missing path")
    return names.file_path(path.strip("/"), f"commit payload line {number}: ")


def _item(item: object, number: int) -> tuple[object, dict[str, object]]:
    if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
        raise ApiError(400, f"commit payload line {number}: expected {{\"key\": …, "
                            "\"value\": {…}}")
    return item.get("key"), item["value"]


def _check_no_file_is_a_folder(paths: set[str]) -> None:
    """``conf`` and ``conf/sub`` cannot both be files: git would keep one of them."""
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in paths:
                raise ApiError(400, f"the commit adds {'/'.join(parts[:i])!r} as a file and "
                                    f"{path!r} inside it as a folder; a path is one or the "
                                    "other")


def _content(value: dict[str, object], number: int) -> bytes:
    content, encoding = value.get("content"), value.get("encoding", "utf-8")
    if not isinstance(content, str):
        raise ApiError(400, f"commit payload line {number}: a file needs content")
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, f"commit payload line {number}: content is not base64") from None
    if encoding in ("utf-8", "utf8", None):
        try:
            return content.encode()
        except UnicodeEncodeError:
            raise ApiError(400, f"commit payload line {number}: content is not valid text "
                                "(send bytes as base64)") from None
    raise ApiError(400, f"commit payload line {number}: unknown encoding {str(encoding)[:40]!r}")

