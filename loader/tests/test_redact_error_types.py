"""A redacted error keeps its type, whatever builtin exception it also is.

The reported crash (issue 33): ``builder publish`` to a server without a token ended in a
raw ``TypeError: BaseException.__new__(HubAuthError) is not safe``: the server's 401 text
held ``token=?``, so the error was redacted, and the copy was made with
``BaseException.__new__``, which an ``OSError`` subclass (``PermissionError``) refuses.
"""

from __future__ import annotations

import pytest
from kernelhub.errors import HubError, KernelHubError, TrustError
from kernelhub.hub.calls import hub_call
from kernelhub.redact import redacted_error
from kernelhub_builder.ship.hf import HubAuthError

SAID = ("http://127.0.0.1:8080 rejected the token to acme/demo (401: missing credentials, "
        "token=?); token from nowhere. Set HF_TOKEN")


class _ValueLike(HubError, ValueError):
    """An error that is also a ValueError."""


class _Fussy(HubError):
    """An error whose constructor takes more than a message."""

    def __new__(cls, message: str, status: int) -> _Fussy:
        self = super().__new__(cls, message)
        self.status = status
        return self


@pytest.mark.parametrize("kind", [HubAuthError, TrustError, _ValueLike, HubError])
def test_the_copy_keeps_the_type_and_says_no_credential(kind: type[KernelHubError]) -> None:
    error = kind(SAID)
    error.detail = "kept"  # type: ignore[attr-defined]
    clean = redacted_error(error)
    assert type(clean) is kind
    assert str(clean) == SAID.replace("token=?", "token=***")
    assert clean.detail == "kept"  # type: ignore[attr-defined]


def test_a_type_that_cannot_be_copied_is_said_as_a_kernelhub_error() -> None:
    clean = redacted_error(_Fussy(SAID, 401))
    assert isinstance(clean, KernelHubError)
    assert "token=?" not in str(clean) and "rejected the token" in str(clean)


def test_a_hub_call_that_fails_with_an_auth_error_raises_it_redacted() -> None:
    with pytest.raises(HubAuthError) as raised, hub_call("http://127.0.0.1:8080", "publish"):
        raise HubAuthError(SAID)
    assert "token=***" in str(raised.value) and "\n" not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
