"""Where the CPU time of a warm pinned load goes, phase by phase (issue 32 item 4).

``load_time.py`` says how long import + warm load take; this says why. Each fresh process
imports torch, then times with ``time.process_time`` (CPU time: on a shared machine wall
time is only ever inflated by waiting for a core):

  import kernelhub     the package (its name table only)
  import load path     every module a hub load needs (``kernelhub.api`` and what it imports)
  pipeline             request → resolve → fetch → verify → checks, up to the import
  kernel import        the kernel's own modules executed from the verified snapshot
    of which compile   compiling its verified sources (none once this user's verified code
                       records hold them: ``kernelhub.load.verified_import.compiled``)
    of which fakes     ``torch.library.register_fake`` calls (torch's ``inspect`` walk of
                       ``sys.modules`` pays a ``realpath`` per module imported since torch)

and counts the kernelhub modules the load imported. ``--baseline-src DIR`` runs the same
processes against another loader source tree (``git archive <rev> loader/src | tar -x``),
interleaved with ours, and prints same-run ratios::

    .venv/bin/python benchmarks/load_phases.py --hub HUB --runs 15 --baseline-src /tmp/base/loader/src

HUB is a LocalHub holding kernels-community/activation v1 with a torch 2.13 CPU build
(``load_time.py`` makes one; ``--hub`` there reuses it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ID = "kernels-community/activation"

PHASES = r"""
import json, sys, time
import torch, torch.library
pt = time.process_time
spent = {"compile": 0.0, "fakes": 0.0}

def timed(name, function):
    def wrapper(*args, **kwargs):
        t = pt()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += pt() - t
    return wrapper

register_fake = torch.library.register_fake
def counted_fake(*args, _stacklevel=1, **kwargs):  # torch reads the caller's frame
    t = pt()
    try:
        return register_fake(*args, _stacklevel=_stacklevel + 1, **kwargs)
    finally:
        spent["fakes"] += pt() - t
torch.library.register_fake = counted_fake

c0 = pt()
import kernelhub
c1 = pt()
kernelhub.get_kernel  # as a user reaches it: the package imports the load path
from kernelhub import api
try:
    from kernelhub.load import verified_import
except ImportError:  # a baseline tree from before the import step moved into load/
    from kernelhub import verified_import
from kernelhub.load import pipeline
c2 = pt()
verified_import.compile = timed("compile", compile)
marks = {}
# The pipeline's import step (load_with_dependencies in trees before the deps/ package).
step = ("_import_with_dependencies" if hasattr(pipeline, "_import_with_dependencies")
        else "load_with_dependencies")
import_tree = getattr(pipeline, step)
def import_step(*args, **kwargs):
    marks["pipeline"] = pt()
    return import_tree(*args, **kwargs)
setattr(pipeline, step, import_step)
module = api.get_kernel(REPO_ID, revision=sys.argv[1])
c3 = pt()
print(json.dumps({
    "import kernelhub": c1 - c0, "import load path": c2 - c1,
    "pipeline": marks["pipeline"] - c2, "kernel import": c3 - marks["pipeline"],
    "of which compile": spent["compile"], "of which fakes": spent["fakes"],
    "import + load": c3 - c0,
    "kernelhub modules": sum(1 for name in sys.modules if name.startswith("kernelhub")),
}))
""".replace("REPO_ID", repr(REPO_ID))


def run_once(env: dict[str, str], commit: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", PHASES, commit], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", type=Path, required=True, help="a LocalHub root holding "
                        f"{REPO_ID} v1 with a torch 2.13 CPU build")
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per tree")
    parser.add_argument("--baseline-src", type=Path,
                        help="another loader source tree (its loader/src) to compare with")
    args = parser.parse_args(argv)
    hub = args.hub.resolve()
    commit = subprocess.run(["git", "-C", str(hub / "models" / REPO_ID), "rev-parse",
                             "refs/heads/v1"], check=True, capture_output=True,
                            text=True).stdout.strip()
    trees = {"ours": None}
    if args.baseline_src is not None:
        trees = {"baseline": str(args.baseline_src.resolve()), **trees}
    with tempfile.TemporaryDirectory(prefix="kernelhub-load-phases-") as tmp:
        base = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONDONTWRITEBYTECODE", "KERNELHUB_TRUSTED_ORGS",
                             "KERNELHUB_OFFLINE", "HF_HUB_OFFLINE", "PYTHONPATH")}
        base.update(KERNELHUB_HUB=str(hub), KERNELHUB_CACHE=str(Path(tmp) / "cache"),
                    KERNELHUB_CONFIG=str(Path(tmp) / "no-config.toml"))
        envs = {name: {**base, **({"PYTHONPATH": src} if src else {})}
                for name, src in trees.items()}
        for env in envs.values():  # the warm cache, and each tree's bytecode caches
            run_once(env, commit)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in envs}
        for _ in range(args.runs):  # interleaved: both trees see the same machine
            for name, env in envs.items():
                results[name].append(run_once(env, commit))
    from kernelhub.system import cpu_summary

    print(cpu_summary())
    print(f"CPU ms of a warm pinned load of {REPO_ID} after import torch; min (median) of "
          f"{args.runs} fresh processes per tree, interleaved\n")
    keys = list(results["ours"][0])
    names = list(results)
    print(f"{'phase':22}" + "".join(f"{name:>20}" for name in names)
          + ("   ours/baseline (min)" if len(names) == 2 else ""))
    for key in keys:
        scale = 1 if key == "kernelhub modules" else 1000  # a count; seconds → ms
        cells, mins = [], []
        for name in names:
            values = [r[key] * scale for r in results[name]]
            mins.append(min(values))
            cells.append(f"{min(values):9.2f} ({statistics.median(values):7.2f})")
        ratio = f"   {mins[1] / mins[0]:5.2f}x" if len(names) == 2 and mins[0] else ""
        print(f"{key:22}" + "".join(f"{c:>20}" for c in cells) + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
