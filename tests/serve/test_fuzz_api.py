"""The HTTP API fuzzed against a live server on loopback (issue 33, item 3).

Hypothesis draws methods, paths (the protocol's own words, hostile segments, random
text), encodings (plain, percent-encoded, double-encoded), headers (no token, each
token of the test table, an unknown one; ranges, content types) and bodies (nothing,
random bytes, JSON of any shape, NDJSON commits with hostile paths). Every answer must be:
not a 5xx; free of any byte outside the hub (a canary file beside it, the tokens file,
``/etc/passwd``); free of the private repository's bytes unless the caller may read it.
The server's memory must stay bounded over the run. Requests go through ``http.client``,
which sends the path exactly as written (``..`` included), unlike higher-level clients.

``KERNELHUB_FUZZ_EXAMPLES`` (default 150: about 60 s on a loaded 2-core machine) sets the
number of requests.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from huggingface_hub import HfApi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served import OTHER_TOKEN, READ_TOKEN, WRITE_TOKEN, serving

EXAMPLES = int(os.environ.get("KERNELHUB_FUZZ_EXAMPLES", "150"))
PRIVATE = b"PRIVATE-" + secrets.token_hex(8).encode()
OUTSIDE = b"OUTSIDE-" + secrets.token_hex(8).encode()
MEMORY_GROWTH = 256 * 1024**2

WORDS = ["api", "models", "kernels", "datasets", "acme", "pub", "secret", "elsewhere", "resolve",
         "tree", "refs", "commit", "commits", "revision", "main", "v1", "-", "lfs", "verify",
         "info", "objects", "batch", "paths-info", "preupload", "branch", "tag", "auth-check",
         "write", "organizations", "overview", "whoami-v2", "repos", "create", "delete",
         "validate-yaml", "plot", "pub.git", "secret.git", "data.bin", "build", "static"]
HOSTILE = ["..", ".", "", "%2e%2e", "..%2F..%2Foutside.txt", "..%2F..%2F..%2Ftokens.toml",
           "%2Fetc%2Fpasswd", "%00", "%0A", "main%0A", "%0D%0AX-Injected:%201", "%ff%fe",
           "a" * 300, "0" * 64, "g" * 64, "0" * 40, ".git", ".GIT", "-n", "--help", "~",
           "HEAD", "refs%2Fheads%2Fmain", "main..v1", "@{1}", "%E2%80%AE", "x.svg", "\u00e9"]


def _segment() -> st.SearchStrategy[str]:
    text = st.text(st.characters(codec="utf-8"), max_size=12)
    return st.one_of(st.sampled_from(WORDS), st.sampled_from(HOSTILE),
                     text.map(lambda s: quote(s, safe="")),
                     text.map(lambda s: quote(quote(s, safe=""), safe="")))


SHAPES = [  # the protocol's routes, "*" a drawn segment: most draws reach a handler
    "-/lfs/acme/*/*", "-/lfs/*/*/*/verify", "acme/*/resolve/*/*", "kernels/acme/*/resolve/*/*/*",
    "api/kernels/acme/*", "api/models/acme/*/revision/*", "api/*/acme/*/tree/*/*",
    "api/kernels/acme/*/paths-info/*", "api/kernels/*/*/commit/*", "api/kernels/acme/*/refs",
    "api/models/acme/*/preupload/*", "api/kernels/acme/*/branch/*", "api/kernels/acme/*/tag/*",
    "acme/*.git/info/lfs/objects/batch", "api/organizations/*/overview", "-/plot/acme/*/*/*",
    "kernels/acme/*", "acme/*/commit/*", "api/repos/*", "*",
    "kernels/acme/*/tree/*/*", "acme/*/blob/*/*", "kernels/acme/*/commits/*", "acme/*/compare"]


def _path() -> st.SearchStrategy[list[str]]:
    def fill(shape: str) -> st.SearchStrategy[list[str]]:
        parts = shape.split("/")
        return st.tuples(*(_segment() if p == "*" else st.just(p) for p in parts)).map(list)

    return st.one_of(st.sampled_from(SHAPES).flatmap(fill),
                     st.lists(_segment(), min_size=0, max_size=8))


def _json_value() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.sampled_from(WORDS + HOSTILE), st.text(max_size=20))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
            ["name", "organization", "type", "private", "files", "path", "size", "oid",
             "operation", "objects", "transfers", "tag", "message", "startingPoint",
             "content", "summary", "parentCommit", "key", "value", "encoding", "algo"]),
            inner, max_size=5)), max_leaves=12)


def _ndjson_commit() -> st.SearchStrategy[bytes]:
    op = st.fixed_dictionaries({
        "key": st.sampled_from(["file", "lfsFile", "deletedFile", "deletedFolder", "copy", 5]),
        "value": st.fixed_dictionaries({"path": st.one_of(st.sampled_from(HOSTILE + WORDS),
                                                          st.text(max_size=20)),
                                        "content": st.sampled_from(["eA==", "!!", "x", 5]),
                                        "encoding": st.sampled_from(["base64", "utf-8", "rot13"]),
                                        "oid": st.sampled_from(["0" * 64, "g" * 64, "x"])})})
    header = st.fixed_dictionaries({"key": st.just("header"), "value": st.fixed_dictionaries(
        {"summary": st.one_of(st.text(max_size=10), st.integers()),
         "parentCommit": st.one_of(st.none(), st.sampled_from(["0", "0" * 40, "zz"]))})})
    return st.lists(op, max_size=4).flatmap(lambda ops: header.map(
        lambda h: "\n".join(json.dumps(x) for x in [h, *ops]).encode()))


BODIES = st.one_of(st.just(b""), st.binary(max_size=2048),
                   _json_value().map(lambda v: json.dumps(v).encode()), _ndjson_commit(),
                   st.sampled_from([b"paths=..%2F..%2Foutside.txt", b"paths=%00&paths=x",
                                    b"{" * 3000, b"[" * 3000]))
TOKENS = {"none": None, "writer": WRITE_TOKEN, "reader": READ_TOKEN, "other": OTHER_TOKEN,
          "unknown": "hf_not_known_here"}
MAY_READ_PRIVATE = {"writer", "reader"}


@pytest.fixture
def fuzzed_hub(hub: Path, tokens_file: Path) -> Iterator[tuple[str, bytes]]:
    from kernelhub_serve.tokens import TokenTable

    (hub.parent / "outside.txt").write_bytes(OUTSIDE)
    with serving(hub, TokenTable.load(tokens_file), lfs_threshold=1024) as url:
        api = HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo("acme/pub", repo_type="kernel")
        api.upload_file(path_or_fileobj=b"public bytes", path_in_repo="build/x/data.bin",
                        repo_id="acme/pub", repo_type="kernel")
        api.create_repo("acme/secret", repo_type="kernel", private=True)
        api.upload_file(path_or_fileobj=PRIVATE, path_in_repo="build/x/data.bin",
                        repo_id="acme/secret", repo_type="kernel")
        yield url, tokens_file.read_bytes()


def test_no_request_gets_a_500_a_file_outside_the_hub_or_private_bytes(
        fuzzed_hub: tuple[str, bytes]) -> None:
    url, tokens_text = fuzzed_hub
    address = urlsplit(url)
    start_peak = _peak_rss()

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
           segments=_path(),
           query=st.sampled_from(["", "?recursive=1", "?rev=..%2F..", "?size=3&ticket=1.x",
                                  "?create_pr=1", "?size=99999999999999999999999"]),
           who=st.sampled_from(sorted(TOKENS)),
           content_type=st.sampled_from([None, "application/json", "application/x-ndjson",
                                         "application/x-www-form-urlencoded", "text/html"]),
           range_header=st.sampled_from([None, "bytes=0-3", "bytes=-5", "bytes=9-1",
                                         "bytes=99999999999999999999-", "lines=1-2"]),
           accept=st.sampled_from([None, "text/html", "*/*"]),
           body=BODIES)
    def probe(method: str, segments: list[str], query: str, who: str, content_type: str | None,
              range_header: str | None, accept: str | None, body: bytes) -> None:
        headers = {"Connection": "close"}
        if TOKENS[who]:
            headers["Authorization"] = f"Bearer {TOKENS[who]}"
        for name, value in (("Content-Type", content_type), ("Range", range_header),
                            ("Accept", accept)):
            if value:
                headers[name] = value
        target = "/" + "/".join(segments) + query
        try:
            target.encode("ascii")
        except UnicodeEncodeError:
            target = quote(target, safe="/%?&=")
        conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=120)
        try:
            conn.request(method, target, body=body if method not in ("GET", "HEAD") else None,
                         headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        finally:
            conn.close()
        where = f"{method} {target} as {who}"
        assert answer.status < 500, f"{where}: {answer.status} {data[:300]!r}"
        assert OUTSIDE not in data and b"root:x:0:0" not in data, where
        assert tokens_text not in data and READ_TOKEN.encode() not in data, where
        if who not in MAY_READ_PRIVATE:
            assert PRIVATE not in data, f"{where}: private bytes to an unauthorised caller"

    probe()
    growth = _peak_rss() - start_peak
    assert growth < MEMORY_GROWTH, f"the server's peak grew by {growth >> 20} MiB in the run"


def _peak_rss() -> int:
    """This process's peak resident memory (the server runs in it), in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
