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
import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .errors import ApiError
from .lfs import is_oid


@dataclass(frozen=True)
class AddFile:
    path: str
    data: bytes


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


def parse_commit(body: bytes) -> CommitRequest:
    """The commit a payload asks for; ApiError 400 naming the first bad line."""
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines:
        raise ApiError(400, "empty commit payload: expected NDJSON lines starting with a header")
    items = []
    for number, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
        except ValueError:
            raise ApiError(400, f"commit payload line {number} is not JSON") from None
        if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
            raise ApiError(400, f"commit payload line {number}: expected {{\"key\": …, "
                                "\"value\": {…}}")
        items.append(item)
    if items[0].get("key") != "header":
        raise ApiError(400, "commit payload must start with a header line")
    header = items[0]["value"]
    parent = header.get("parentCommit")
    request = CommitRequest(str(header.get("summary") or ""), str(header.get("description") or ""),
                            parent if isinstance(parent, str) and parent else None)
    if not request.summary.strip():
        raise ApiError(400, "the commit needs a summary (the commit message)")
    seen: set[str] = set()
    for number, item in enumerate(items[1:], 2):
        key, value = item.get("key"), item["value"]
        path = checked_path(value.get("path"), number)
        if key in ("file", "lfsFile"):
            if path in seen:
                raise ApiError(400, f"commit payload line {number}: {path} is added twice")
            seen.add(path)
        if key == "file":
            request.adds.append(AddFile(path, _content(value, number)))
        elif key == "lfsFile":
            oid, size = value.get("oid"), value.get("size")
            if value.get("algo", "sha256") != "sha256" or not is_oid(oid):
                raise ApiError(400, f"commit payload line {number}: an lfsFile needs "
                                    "algo sha256 and a 64-hex oid")
            if size is not None and not isinstance(size, int):
                raise ApiError(400, f"commit payload line {number}: lfsFile size must be an int")
            request.adds.append(AddLfsFile(path, str(oid), size))
        elif key in ("deletedFile", "deletedFolder"):
            request.deletes.append(Delete(path, key == "deletedFolder"))
        else:
            raise ApiError(400, f"commit payload line {number}: unsupported operation {key!r} "
                                "(this hub takes file, lfsFile, deletedFile, deletedFolder)")
    return request


def checked_path(path: object, number: int) -> str:
    """A repository path: relative, '/'-separated, no '.', '..' or '.git' segments."""
    if not isinstance(path, str) or not path.strip("/"):
        raise ApiError(400, f"commit payload line {number}: missing path")
    clean = path.strip("/")
    parts = PurePosixPath(clean).parts
    if (any(p in (".", "..", ".git") for p in parts) or "//" in clean or "\\" in clean
            or any(ord(c) < 32 for c in clean)):
        raise ApiError(400, f"commit payload line {number}: {path!r} is not a valid path in a "
                            "repository")
    return clean


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
        return content.encode()
    raise ApiError(400, f"commit payload line {number}: unknown encoding {encoding!r}")

