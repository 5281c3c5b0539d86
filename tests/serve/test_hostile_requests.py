"""Requests an attacker would send: each probe of issue 33's server part, answered with a
4xx and nothing read or stored outside what the caller may see."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
from served import WRITE_TOKEN

WRITER = {"Authorization": f"Bearer {WRITE_TOKEN}"}


def _upload_lfs_object(server: str, repo: str, data: bytes) -> str:
    """One real LFS upload through the batch API (the precondition of the file-read hole:
    the LFS store directory exists)."""
    oid = hashlib.sha256(data).hexdigest()
    with httpx.Client() as http:
        batch = http.post(f"{server}/kernels/{repo}.git/info/lfs/objects/batch", headers=WRITER,
                          json={"operation": "upload", "transfers": ["basic"],
                                "objects": [{"oid": oid, "size": len(data)}]})
        assert batch.status_code == 200, batch.text
        href = batch.json()["objects"][0]["actions"]["upload"]["href"]
        assert http.put(href, content=data).status_code == 200
    return oid


def test_lfs_urls_read_no_file_outside_the_object_store(server: str, tokens_file: Path) -> None:
    """Issue 33, high 1: a ``%2F`` inside the oid segment was decoded after the split and the
    oid never checked, so ``..%2F..%2Ftokens.toml`` served the tokens file to anyone."""
    with httpx.Client() as http:
        assert http.post(f"{server}/api/repos/create", headers=WRITER,
                         json={"name": "big", "organization": "acme", "type": "kernel"}
                         ).status_code == 200
    _upload_lfs_object(server, "acme/big", b"some large file" * 100)
    secret = tokens_file.read_bytes()
    probes = ["..%2F..%2Ftokens.toml", "%2Fetc%2Fpasswd", "..%2F..%2F..%2F..%2F..%2F..%2F..%2F"
              "..%2F..%2F..%2Fetc%2Fpasswd", "../../tokens.toml", "%2e%2e%2F%2e%2e%2Ftokens.toml",
              "0" * 63 + "%2F", "g" * 64]
    with httpx.Client() as http:
        for repo in ("acme/big", "no/such-repo"):
            for oid in probes:
                for suffix in ("", "/verify"):
                    url = f"{server}/-/lfs/{repo}/{oid}{suffix}"
                    for method in ("GET", "POST", "PUT"):
                        answer = http.request(method, url, headers=WRITER)
                        assert 400 <= answer.status_code < 500, (method, url, answer.status_code)
                        assert secret not in answer.content and b"root:" not in answer.content
