"""Run ninja on a rendered work dir; turn a failed compile into a CompileError.

ninja is the ``ninja`` pip package (a dependency) so every machine has the same one; a
ninja on PATH is the fallback for source trees used without installing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .errors import CompileError
from .report import task
from .reproducible import build_environment

_PROGRESS_RE = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")


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
    with task(f"compiling {what}") as progress, subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=build_environment(),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if m := _PROGRESS_RE.match(line):
                ran_something = True
                progress.step(m[3], int(m[1]), int(m[2]))
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
