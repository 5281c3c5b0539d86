"""What the command lines print when something is wrong: one line, no credentials, no
terminal escapes — for ``kernelhub``, ``builder`` and ``kernelhub serve`` alike.

An error's text is made of the user's words, a hub's answers and file contents; any of
them may hold a URL with credentials (:mod:`kernelhub.redact`) or characters that drive
the terminal (:mod:`kernelhub.printable`). :func:`error_line` is how every command line
prints an error, and :class:`ArgumentParser` prints argparse's usage errors the same way.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ..printable import printable
from ..redact import redact


def error_line(error: BaseException | str) -> str:
    """``error``'s text on one line (a multi-line message's lines joined), credentials
    redacted, control characters escaped."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = ""
    for line in lines:
        text += line if not text else (" " if text.endswith(":") else "; ") + line
    return printable(redact(text)) or type(error).__name__


class ArgumentParser(argparse.ArgumentParser):
    """argparse, whose usage errors (which quote the user's words) print as
    :func:`error_line`; subparsers are made of the same class."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {error_line(message)}\n")
