"""How the ``builder`` command shows what the library reports: rich, on stderr.

Only the CLI uses this module. stdout stays clean for machine-readable output
(``list-variants --json``); everything a person watches — progress, compiler steps,
summaries — goes to stderr. Long work shows a live spinner with its current step and a
bar when the step count is known; where stderr is not a terminal (CI logs) each counted
step is printed as a line instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from .report import Task


def make_console() -> Console:
    """The console of one command: stderr, no guessing of highlights, long lines kept."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


class _LiveTask:
    def __init__(self, progress: Progress, description: str) -> None:
        self.progress = progress
        self.description = description
        self.id = progress.add_task(description, total=None)

    def step(self, text: str, done: int | None = None, total: int | None = None) -> None:
        self.progress.update(self.id, description=f"{self.description}: {text}",
                             completed=done or 0, total=total)


class _LoggedTask:
    def __init__(self, console: Console) -> None:
        self.console = console

    def step(self, text: str, done: int | None = None, total: int | None = None) -> None:
        if done is not None and total is not None:
            self.console.print(f"  [{done}/{total}] {text}", markup=False)


class ConsoleReporter:
    """The CLI's :class:`kernelhub_builder.report.Reporter`."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def note(self, message: str) -> None:
        self.console.print(message, markup=False)

    def warn(self, message: str) -> None:
        self.console.print(message, markup=False, style="yellow")

    @contextmanager
    def task(self, description: str) -> Iterator[Task]:
        if not self.console.is_terminal:
            yield _LoggedTask(self.console)
            return
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   MofNCompleteColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            yield _LiveTask(progress, description)
