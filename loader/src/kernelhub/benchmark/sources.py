"""Where a benchmark run's scripts come from.

In order: a directory the user names; the ``benchmarks/`` of a local kernel directory;
the ``benchmarks/`` at the loaded commit of the hub repository (the ecosystem publishes
them there, next to ``build/``); for this project's own kernels, which publish only their
builds, ``kernels-src/<name>/benchmarks`` of the project in the working directory
(recognised by its ``kernels.toml``). The run says which it used.
"""

from __future__ import annotations

from pathlib import Path

from ..hub import calls as hub_calls
from ..hub import hf as hub_hf
from ..hub import local as hub_local
from ..hub.base import Hub
from .runner import BENCHMARKS_DIR


def hub_benchmarks(hub: Hub, repo_id: str, commit: str, dest: Path) -> Path | None:
    """Write ``benchmarks/*.py`` at ``commit`` into ``dest``; None when there are none."""
    if isinstance(hub, hub_calls.GuardedHub):
        with hub_calls.hub_call(hub.inner, f"reading benchmarks/ of {repo_id} at {commit[:12]}"):
            return hub_benchmarks(hub.inner, repo_id, commit, dest)
    files: dict[str, bytes] = {}
    if isinstance(hub, hub_local.LocalHub):
        repo = hub.open_repo(repo_id)
        entries = [e for e in repo.ls_tree(commit, f"{BENCHMARKS_DIR}/")
                   if e.kind == "blob" and e.path.endswith(".py")]
        files = dict(zip([e.path for e in entries], repo.read_blobs([e.oid for e in entries]),
                         strict=True))
    elif isinstance(hub, hub_hf.HfHub):
        local = Path(hub.api.snapshot_download(
            repo_id, revision=commit, repo_type=hub.type_of(repo_id),
            allow_patterns=[f"{BENCHMARKS_DIR}/*.py"], local_dir=dest / ".download"))
        files = {p.relative_to(local).as_posix(): p.read_bytes()
                 for p in sorted((local / BENCHMARKS_DIR).glob("*.py"))}
    if not files:
        return None
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest / BENCHMARKS_DIR


def project_benchmarks(repo_id: str, project: Path | None = None) -> Path | None:
    """``kernels-src/<name>/benchmarks`` of the project in ``project`` (default: the working
    directory), when it has a ``kernels.toml`` and that kernel."""
    root = project or Path.cwd()
    candidate = root / "kernels-src" / repo_id.partition("/")[2] / BENCHMARKS_DIR
    return candidate if (root / "kernels.toml").is_file() and candidate.is_dir() else None
