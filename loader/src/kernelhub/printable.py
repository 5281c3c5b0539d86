"""Text from a hub or a file, made safe to print: one line, no terminal escapes.

Ref names, file names and metadata strings come from whoever published them. Printed
raw, a newline in a ref name forges a line of ``kernelhub variants`` and an ESC starts a
terminal control sequence (clearing the screen, setting the title, hiding text). The
command lines print every such value through :func:`printable`; the library's error
messages quote such names (:func:`kernelhub.versions.shown_name`).
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character that is not printable — control and formatting
    characters, line and paragraph separators — written as its Python escape
    (``\\n``, ``\\x1b``, ``\\u202e``); printable text is returned unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
