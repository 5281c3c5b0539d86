"""Run ninja on a rendered work dir; turn a failed compile into a CompileError.

ninja is the ``ninja`` pip package (a dependency) so every machine has the same one; a
ninja on PATH is the fallback for source trees used without installing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from kernelhub.errors import KernelHubError

from .progress import console
from .reproducible import build_environment

_PROGRESS_RE = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")


class CompileError(KernelHubError):
    """The compiler or linker failed; ``output`` is what it printed."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(f"{message}\n{output.rstrip()}" if output.strip() else message)
        self.output = output


def ninja_program() -> str:
    try:
        import ninja

        bundled = shutil.which("ninja", path=ninja.BIN_DIR)
    except (ImportError, AttributeError):
        bundled = None
    found = bundled or shutil.which("ninja")
    if not found:
        raise CompileError("ninja was not found; install it with: pip install ninja", "")
    return found


def run_ninja(work_dir: Path, what: str) -> bool:
    """Build ``work_dir``; return whether ninja ran any command (False: all up to date).

    Progress lines (``[2/3] CXX …``) are shown as they come; the full output is kept and
    attached to the CompileError when a step fails.
    """
    cmd = [ninja_program(), "-C", str(work_dir)]
    lines: list[str] = []
    ran_something = False
    with console.status(f"compiling {what}") as status, subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=build_environment(),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if m := _PROGRESS_RE.match(line):
                ran_something = True
                status.update(f"compiling {what}: [{m[1]}/{m[2]}] {m[3]}")
                if not console.is_terminal:  # CI logs get no spinner: print each step
                    console.print(f"  [{m[1]}/{m[2]}] {m[3]}", markup=False)
        returncode = proc.wait()
    output = "".join(lines)
    if returncode != 0:
        raise CompileError(f"compiling {what} failed (ninja exit {returncode}):",
                           _compiler_message(output))
    return ran_something


def _compiler_message(output: str) -> str:
    """Drop ninja's own bookkeeping lines; keep what the compiler said."""
    keep = [
        line for line in output.splitlines()
        if not line.startswith(("ninja: Entering directory", "ninja: build stopped"))
    ]
    return "\n".join(keep)
