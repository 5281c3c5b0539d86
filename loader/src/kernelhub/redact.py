"""Credentials out of text: what a message, a log line or an exception may say about a hub.

Hubs are named by URLs, and URLs carry credentials — ``https://user:password@host``,
``?token=…`` — while a server's error may echo a request's ``Authorization`` header or a
signed download URL. Every boundary that names a hub passes its text through
:func:`redact`: the translation of hub failures (:mod:`kernelhub.hub.calls`), the names
and reprs of hubs, the command lines' error lines, and the log records of
huggingface_hub, which logs the URLs it retries (:func:`redact_logs`). A credential is
then never shown, whatever a message was built from; the URL itself stays readable
(``http://***@host:8080/…``), so the user still sees which hub is meant.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator

from . import errors

MASK = "***"

_SECRET_NAME = r"[\w.-]*(?:token|key|secret|passw|pwd|auth|sig|credential|session|ticket)[\w.-]*"
"""Query and form parameters whose values are credentials: access_token, api_key,
X-Amz-Signature, X-Amz-Credential, upload tickets, …"""


@functools.cache
def _patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Compiled on the first message: a load that says nothing compiles nothing."""
    return (
        # URL userinfo (also in a URL a Path has folded to one slash): everything up to
        # the last "@" of the authority
        (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*:/{1,3})[^\s/?#'\"<>\\]*@"), rf"\1{MASK}@"),
        # secret-looking parameters, in a query or wherever a "name=value" stands
        (re.compile(rf"(?i)(?<![\w.-])({_SECRET_NAME})=[^&\s#'\"<>;,)]*"), rf"\1={MASK}"),
        # Authorization headers, as header lines, dict reprs or JSON
        (re.compile(r"(?i)\b((?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)"
                    r"(?:(?:bearer|basic|token|digest)\s+)?[^\s,'\"}]+"), rf"\1{MASK}"),
        (re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]{8,}"), rf"\1 {MASK}"),
        # Hugging Face access tokens, wherever they turn up
        (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), f"hf_{MASK}"),
    )


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***``."""
    if not text:
        return text
    for pattern, replacement in _patterns():
        text = pattern.sub(replacement, text)
    return text


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def names_credentials(error: BaseException) -> bool:
    """Whether the text of ``error`` or of any exception it chains holds a credential."""
    for each in _chain(error):
        text = str(each)
        if redact(text) != text:
            return True
    return False


def redacted_error(error: BaseException, message: str | None = None) -> BaseException:
    """A copy of ``error`` (same type, same attributes) saying ``message`` (default: its
    own text) with credentials removed.

    Raise it ``from None`` when :func:`names_credentials`: the chained exceptions'
    texts are what named the credential, and a traceback would print them.
    """
    text = redact(str(error) if message is None else message)
    kind = type(error)
    try:  # the type's own __new__: an OSError subclass (PermissionError …) needs OSError's
        clone = kind.__new__(kind, text)
        clone.__dict__.update(error.__dict__)
        clone.args = (text,)
        shown = str(clone)
    except Exception:  # a type that cannot be made so: say it untyped
        return errors.KernelHubError(text)
    if redact(shown) != shown:  # a type that builds its text from attributes
        return errors.KernelHubError(text)
    return clone


class _Redacting(logging.Filter):
    """Rewrites a record's message (and its formatted traceback) without credentials."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = _Redacting()
_covered: dict[str, int] = {}
"""prefix → how many loggers existed when it was last covered (new ones: cover again)."""


def redact_logs(prefix: str) -> None:
    """Redact every record of the loggers named ``prefix`` or ``prefix.*`` that exist now.

    For libraries kernelhub hands a hub URL to (huggingface_hub logs the URL of a request
    it retries); call it once they are imported. Records are rewritten where they are
    made, so every handler — the library's own, the user's, pytest's — sees the same
    redacted text.
    """
    known = logging.root.manager.loggerDict
    if _covered.get(prefix) == len(known):
        return
    _covered[prefix] = len(known)
    names = [name for name in list(known)
             if name == prefix or name.startswith(prefix + ".")]
    for name in [prefix, *names]:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
