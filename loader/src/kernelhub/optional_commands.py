"""Subcommands other distributions add to the ``kernelhub`` command.

A distribution registers a command in the entry-point group ``kernelhub.commands``::

    [project.entry-points."kernelhub.commands"]
    serve = "kernelhub_serve.cli:main"

The object named is called with the arguments after the command's name and returns the
exit status (``main(argv: Sequence[str]) -> int``); it parses them itself, as
``kernelhub <name>``. kernelhub never imports the builder or the server: it finds them
through their installed metadata, and only when a command that is not its own is asked
for or the help is printed (reading every distribution's entry points costs a scan of
site-packages). A command kernelhub knows of but that is not installed says in one line
what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points

from .errors import KernelHubError
from .value_types import Record

GROUP = "kernelhub.commands"


class Known(Record, frozen=True):
    """A command of a kernelhub distribution, listed in the help even when not installed."""

    distribution: str
    help: str


KNOWN: dict[str, Known] = {
    "init": Known("kernelhub-builder", "create a new kernel repository that builds and tests as it is"),
    "serve": Known("kernelhub-serve", "serve a team kernel hub over the Hub HTTP API, with pages"),
    "publish-benchmark": Known("kernelhub-builder", "commit benchmark results to the hub"),
}
"""The optional commands of kernelhub's own distributions, by name."""

Command = Callable[[Sequence[str]], int]


def installed() -> dict[str, EntryPoint]:
    """Every command registered in ``kernelhub.commands``, by name (the first one wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def _distribution(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else ep.value.split(":")[0].split(".")[0]


def load(name: str) -> Command | None:
    """The command ``name``, or None when it is no optional command at all.

    Raises KernelHubError, in one line, when ``name`` is a known command that is not
    installed, or an installed one whose code fails to import.
    """
    ep = installed().get(name)
    if ep is None:
        known = KNOWN.get(name)
        if known is None:
            return None
        raise KernelHubError(f"`kernelhub {name}` comes with {known.distribution}, which is "
                             f"not installed: pip install {known.distribution}")
    try:
        command = ep.load()
    except Exception as e:  # a broken install must not crash the CLI with a traceback
        dist = _distribution(ep)
        raise KernelHubError(
            f"`kernelhub {name}` ({ep.value}, from {dist}) failed to import: "
            f"{type(e).__name__}: {e}; reinstall it: pip install --force-reinstall {dist}"
        ) from None
    if not callable(command):
        raise KernelHubError(f"`kernelhub {name}`: {ep.value} (from {_distribution(ep)}) is "
                             "not callable; the entry point must name a main(argv) function")
    return command


def help_lines() -> list[tuple[str, str]]:
    """(name, help) of every optional command, installed or known; for the help text."""
    lines = {name: f"{known.help} (pip install {known.distribution})"
             for name, known in KNOWN.items()}
    for name, ep in installed().items():
        known = KNOWN.get(name)
        lines[name] = known.help if known else f"from {_distribution(ep)}"
    return sorted(lines.items())
