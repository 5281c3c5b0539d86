"""A spooled NDJSON commit body, read line by line in bounded memory.

A ``file`` operation carries its bytes base64 inside its JSON line, so one line can be as
large as the file. Lines up to :data:`SMALL` are parsed whole; in a larger one, the one
large string (the file's content) is found by scanning, replaced by :data:`LARGE` before
the rest of the line is parsed, and its characters are decoded from the spool straight
to a file. So a commit of any size holds about :data:`CHUNK` bytes of it in memory.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import IO

from .errors import ApiError

CHUNK = 1024**2
"""Bytes read at a time (a multiple of 4, so base64 decodes chunk by chunk)."""
SMALL = 1024**2
"""The longest line parsed whole, and the most of a large line outside its content."""
LARGE = "\0kernelhub-large-content"
"""What a large content string reads as in the parsed line (no client sends a NUL)."""
_QUOTE_OR_ESCAPE = re.compile(rb'["\\]')


def lines(body: IO[bytes]) -> Iterator[tuple[int, object, tuple[int, int] | None]]:
    """``(number, parsed JSON, span of the large content or None)`` per non-empty line."""
    for number, (start, end) in enumerate(_line_spans(body), 1):
        if end - start <= SMALL:
            body.seek(start)
            data = body.read(end - start)
            if data.strip():
                yield number, _loads(data, number), None
            continue
        large = [s for s in _string_spans(body, start, end) if s[1] - s[0] > SMALL]
        if len(large) != 1 or (large[0][0] - start) + (end - large[0][1]) > SMALL:
            raise _too_large(number)
        first, last = large[0]
        body.seek(start)
        head = body.read(first - start)
        body.seek(last)
        tail = body.read(end - last)
        yield number, _loads(head + json.dumps(LARGE)[1:-1].encode() + tail, number), large[0]


def decode_base64(body: IO[bytes], span: tuple[int, int], out: IO[bytes], number: int) -> None:
    """Decode the base64 characters at ``span`` of the body into ``out``."""
    position, end = span
    while position < end:
        body.seek(position)
        chunk = body.read(min(CHUNK, end - position))
        try:
            out.write(base64.b64decode(chunk, validate=True))
        except (binascii.Error, ValueError):
            raise ApiError(400, f"commit payload line {number}: content is not base64") from None
        position += len(chunk)


def _line_spans(body: IO[bytes]) -> Iterator[tuple[int, int]]:
    start = position = 0
    while True:
        body.seek(position)  # the caller reads the body between lines
        chunk = body.read(CHUNK)
        if not chunk:
            break
        at = chunk.find(b"\n")
        while at != -1:
            yield start, position + at
            start = position + at + 1
            at = chunk.find(b"\n", at + 1)
        position += len(chunk)
    if position > start:
        yield start, position


def _string_spans(body: IO[bytes], start: int, end: int) -> Iterator[tuple[int, int]]:
    """The spans between the quotes of each JSON string in ``[start, end)``."""
    position, inside, skip, opened = start, False, False, 0
    while position < end:
        body.seek(position)
        chunk = body.read(min(CHUNK, end - position))
        at, skip = (1 if skip else 0), False
        while (found := _QUOTE_OR_ESCAPE.search(chunk, at)) is not None:
            at = found.start()
            if chunk[at] == ord("\\"):
                if at + 1 >= len(chunk):
                    skip = True  # the escaped character is the next chunk's first
                    break
                at += 2
                continue
            if inside:
                yield opened, position + at
            else:
                opened = position + at + 1
            inside = not inside
            at += 1
        position += len(chunk)


def _loads(data: bytes, number: int) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise ApiError(400, f"commit payload line {number} is not JSON") from None


def _too_large(number: int) -> ApiError:
    return ApiError(400, f"commit payload line {number} is over {SMALL} bytes outside one "
                         "file's base64 content")
