"""``kernelhub``: inspect hub repositories, local builds and the cache.

One module per subcommand (or pair of related ones), imported only when its command is
chosen: :data:`COMMANDS` names it, so ``kernelhub env`` never imports the loading code
and ``kernelhub info`` never imports the benchmark runner; each module imports what it
runs plainly at its top and is a thin shell over :mod:`kernelhub.api`. Errors kernelhub
raises on purpose are printed as one line and exit 1, without a traceback
(:func:`kernelhub.cli.text.error_line`). Text a hub or a file supplied — ref and variant
names, metadata, verdicts that quote them — is printed through
:func:`kernelhub.printable.printable`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import optional_commands
from ..errors import KernelHubError
from .text import ArgumentParser, error_line

COMMANDS: dict[str, str] = {
    "variants": "variants",
    "versions": "info",
    "info": "info",
    "cache": "cache",
    "describe-api": "describe",
    "verify-signature": "signature",
    "benchmark": "benchmark",
    "env": "env",
    "check": "check",
    "lock": "lock",
    "download": "lock",
    "autotune-report": "autotune",
    "verify-report": "autotune",
}
"""Each subcommand → the module of this package that adds its arguments (``add_parsers``)
and runs it; in the order ``kernelhub --help`` lists them."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or with ``command`` of that one only: adding a
    subcommand's arguments imports its module, which a run of another command never needs."""
    parser: argparse.ArgumentParser = ArgumentParser(
        prog="kernelhub", description="Inspect kernel repositories, local builds and the cache."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = dict.fromkeys(COMMANDS.values()) if command is None else [COMMANDS[command]]
    for module in chosen:  # a module named at run time: the chosen subcommand's
        importlib.import_module(f"{__name__}.{module}").add_parsers(sub)
    parser.set_defaults(commands=frozenset(COMMANDS))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        command = argv[0] if argv and not argv[0].startswith("-") else None
        if command is not None and command not in COMMANDS:
            # None: no such command anywhere, and argparse names the choices
            if (found := optional_commands.load(command)) is not None:
                return found(argv[1:])
            command = None
        parser = build_parser(command)
        if not argv or argv[0] in ("-h", "--help"):
            _describe_optional_commands(parser)
        args = parser.parse_args(argv)
        args.func(args)
    except KernelHubError as e:
        print(f"kernelhub: error: {error_line(e)}", file=sys.stderr)
        return 1
    return 0


def _describe_optional_commands(parser: argparse.ArgumentParser) -> None:
    """List the commands other distributions add (:mod:`.optional_commands`) in the help."""
    lines = optional_commands.help_lines()
    width = max(len(name) for name, _ in lines)
    parser.epilog = "commands from other distributions:\n" + "\n".join(
        f"  {name:<{width}}  {text}" for name, text in lines)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter

