"""How the builder's library code tells the user what it is doing: it reports, never prints.

Library modules call :func:`note` for a line of progress, :func:`warn` for something the
user should act on, and :func:`task` around long work (compiles, test runs, installing a
torch env), whose steps may carry a count. These go to the active :class:`Reporter`. The
default one hands them to :mod:`logging` under ``kernelhub_builder``, so a program that
uses the builder as a library hears nothing unless it configures logging. The ``builder``
command installs its own, which renders them with rich (:mod:`kernelhub_builder.cli_render`),
for the duration of one command.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Protocol

_LOG = logging.getLogger("kernelhub_builder")


class Task(Protocol):
    """One piece of long work in progress."""

    def step(self, text: str, done: int | None = None, total: int | None = None) -> None:
        """What the work is doing now; ``done`` of ``total`` when it is counted."""
        ...


class Reporter(Protocol):
    """Where library code's reports go."""

    def note(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...

    def task(self, description: str) -> AbstractContextManager[Task]: ...


class _LogTask:
    def __init__(self, description: str) -> None:
        self.description = description

    def step(self, text: str, done: int | None = None, total: int | None = None) -> None:
        count = f" [{done}/{total}]" if done is not None and total is not None else ""
        _LOG.debug("%s:%s %s", self.description, count, text)


class LogReporter:
    """The default: reports become log records of the ``kernelhub_builder`` logger."""

    def note(self, message: str) -> None:
        _LOG.info(message)

    def warn(self, message: str) -> None:
        _LOG.warning(message)

    @contextmanager
    def task(self, description: str) -> Iterator[Task]:
        _LOG.info(description)
        yield _LogTask(description)


_DEFAULT = LogReporter()
_ACTIVE: ContextVar[Reporter | None] = ContextVar("kernelhub_builder_reporter", default=None)


def _reporter() -> Reporter:
    return _ACTIVE.get() or _DEFAULT


def note(message: str) -> None:
    """One line of progress."""
    _reporter().note(message)


def warn(message: str) -> None:
    """Something the user should know and may want to act on."""
    _reporter().warn(message)


def task(description: str) -> AbstractContextManager[Task]:
    """Long work: ``with task("compiling x") as t: t.step("CXX a.o", 1, 3)``."""
    return _reporter().task(description)


@contextmanager
def reporting_to(reporter: Reporter) -> Iterator[Reporter]:
    """Send this context's reports to ``reporter`` (the CLI's), then back."""
    token = _ACTIVE.set(reporter)
    try:
        yield reporter
    finally:
        _ACTIVE.reset(token)
