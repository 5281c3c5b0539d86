"""Large files through the Git LFS batch API (``basic`` transfer), as huggingface_hub
uploads them when the preupload answer says ``lfs`` and hf_xet is not in use.

An upload goes: batch request (which objects to send, and where) → ``PUT`` of the bytes
to the ``href`` handed out → ``verify`` → the commit names the object by sha256
(``lfsFile``). The ``PUT`` carries no Authorization header (huggingface_hub sends none:
on the Hub that URL is a pre-signed storage URL), so the href carries a ticket instead:
an HMAC over (repo, oid, size, expiry) under the hub's secret, good for that one
object for an hour. The secret is a file in the hub (:data:`SECRET_FILE`, made once, 0600),
not per process: behind a proxy over several serve processes, the batch request and the
``PUT`` it hands out may reach different processes. Query strings are never logged, so neither is a ticket.

Objects wait content-addressed under ``<hub>/.kernelhub-serve/lfs/<org>/<name>/``, one
store per repository: an object is readable through, and committable into, only the
repository it was uploaded to, so a private repository's file cannot be read through
another repository's URL, nor committed by another org's writer who knows its sha256. A
received object whose sha256 or size differs from what was announced is discarded. A
commit writes the object's bytes into git as a plain blob, records it as an LFS object
(:mod:`kernelhub_serve.lfs_index`) and then drops the waiting copy, so no file is stored
twice. A commit reads the waiting copy through a hard link of its own
(:meth:`LfsStore.pinned`), so a concurrent commit of the same object dropping it cannot
pull the bytes away mid-read; one that finds it already dropped takes the blob the other
commit recorded.
A ``.part`` file untouched for :data:`STALE_PART_SECONDS` is an upload whose server died;
it is removed when a server starts, as is a pin left by a server that died mid-commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from .errors import ApiError, ServeError

TICKET_SECONDS = 3600
STALE_PART_SECONDS = 600
"""A ``.part`` not written for this long belongs to no live upload (uvicorn's and
clients' own timeouts are far shorter), so a starting server removes it."""
_HEX = frozenset("0123456789abcdef")
STORE_DIR = ".kernelhub-serve/lfs"
SECRET_FILE = ".kernelhub-serve/lfs-ticket-secret"


class LfsStore:
    """Content-addressed large-file objects waiting to be (or already) committed."""

    def __init__(self, hub_root: Path) -> None:
        self.root = hub_root / STORE_DIR
        self._secret = shared_secret(hub_root / SECRET_FILE)

    def path(self, repo_id: str, oid: str) -> Path:
        """Where ``repo_id``'s object ``oid`` lives; only a sha256 (64 lowercase hex) names
        one, so no oid a client sends can name a path outside the store (the repository id
        was checked by :mod:`kernelhub_serve.names` before it got here)."""
        if not is_oid(oid):
            raise ApiError(400, f"{oid[:80]!r} is not an LFS object id (64 lowercase hex "
                                "digits, its sha256)")
        return self.root / repo_id / oid[:2] / oid

    def has(self, repo_id: str, oid: str, size: int | None) -> bool:
        if not is_oid(oid):
            return False
        p = self.path(repo_id, oid)
        return p.is_file() and (size is None or p.stat().st_size == size)

    # -- tickets -----------------------------------------------------------------------

    def ticket(self, repo_id: str, oid: str, size: int) -> str:
        expires = int(time.time()) + TICKET_SECONDS
        return f"{expires}.{self._sign(repo_id, oid, size, expires)}"

    def check_ticket(self, repo_id: str, oid: str, size: int, ticket: str) -> None:
        expires_text, _, signature = ticket.partition(".")
        try:
            expires = int(expires_text)
        except ValueError:
            raise ApiError(403, "invalid LFS upload ticket") from None
        if expires < time.time():
            raise ApiError(403, "LFS upload ticket expired: ask the batch API again")
        if not hmac.compare_digest(signature, self._sign(repo_id, oid, size, expires)):
            raise ApiError(403, "invalid LFS upload ticket")

    def _sign(self, repo_id: str, oid: str, size: int, expires: int) -> str:
        message = f"{repo_id}\0{oid}\0{size}\0{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    # -- receiving ---------------------------------------------------------------------

    def forget(self, repo_id: str, oids: list[str]) -> None:
        """Drop waiting objects a commit has written into git."""
        for oid in oids:
            self.path(repo_id, oid).unlink(missing_ok=True)

    @contextlib.contextmanager
    def pinned(self, repo_id: str, oids: list[str]) -> Iterator[dict[str, Path]]:
        """Hard links (same bytes, no copy) to those of ``oids`` still waiting, made for
        the length of one commit: :meth:`forget` by a concurrent commit of the same object
        removes the waiting name, never these."""
        pins = self.root / repo_id / f".{secrets.token_hex(8)}.pins"
        pins.mkdir(parents=True)
        found: dict[str, Path] = {}
        try:
            for oid in dict.fromkeys(oids):  # one object may be added at several paths
                with contextlib.suppress(FileNotFoundError):  # committed and dropped meanwhile
                    os.link(self.path(repo_id, oid), pins / oid)
                    found[oid] = pins / oid
            yield found
        finally:
            shutil.rmtree(pins, ignore_errors=True)

    def drop(self, repo_id: str) -> None:
        """Drop every object waiting in a repository's store (it was moved or deleted)."""
        shutil.rmtree(self.root / repo_id, ignore_errors=True)

    def clean_stale_parts(self) -> list[Path]:
        """Remove ``.part`` files of uploads that died with their server; the removed."""
        removed = []
        cutoff = time.time() - STALE_PART_SECONDS
        for part in self.root.glob("**/.*.part") if self.root.is_dir() else []:
            try:
                if part.is_file() and part.stat().st_mtime < cutoff:
                    part.unlink()
                    removed.append(part)
            except OSError:
                continue  # another server removed or finished it
        for pins in self.root.glob("*/*/.*.pins") if self.root.is_dir() else []:
            with contextlib.suppress(OSError):
                if pins.stat().st_mtime < cutoff:
                    shutil.rmtree(pins)
                    removed.append(pins)
        return removed

    async def receive(self, repo_id: str, oid: str, size: int, chunks: AsyncIterator[bytes]
                      ) -> None:
        """Store an uploaded object if its bytes hash to ``oid`` and number ``size``."""
        target = self.path(repo_id, oid)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, received = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{oid[:12]}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > size:
                        raise ApiError(400, f"LFS object {oid[:12]}: more than the {size} bytes "
                                            "announced")
                    digest.update(chunk)
                    out.write(chunk)
            if received != size or digest.hexdigest() != oid:
                raise ApiError(400, f"LFS object {oid[:12]}: received {received} bytes hashing to "
                                    f"{digest.hexdigest()[:12]}, not the announced {size} bytes "
                                    f"of {oid[:12]}; nothing was stored")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def shared_secret(path: Path) -> bytes:
    """The secret every serve process over this hub signs with: read if there, else made.

    Written whole into a private temporary file and hard-linked into place, so a process
    racing to make it either wins or reads the winner's complete secret, never a partial
    one."""
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_bytes(32))
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
        secret = path.read_bytes()
    if len(secret) < 32:
        raise ServeError(f"{path} holds {len(secret)} bytes, not a 32-byte secret; remove "
                            "it and restart every serve process of this hub")
    return secret


def is_oid(value: object) -> bool:
    """A sha256 as git LFS names objects: 64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX
