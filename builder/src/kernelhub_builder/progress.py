"""Where the builder talks to the user: one rich console on stderr.

stdout stays clean for machine-readable output (``list-variants --json``); everything a
person watches — progress, compiler chatter, summaries — goes to stderr.
"""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)


def say(message: str) -> None:
    """One line of progress."""
    console.print(message, markup=False)
