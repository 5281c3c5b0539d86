"""What a value type costs to define at import: ``Record`` against ``@dataclass``.

The loader declares its value types one way (:mod:`kernelhub.value_types`); this is the
measurement behind that choice. Each candidate module defines N frozen classes of five
fields (two with defaults); every module is imported in a fresh process (bytecode cached,
as a user's would be), and the CPU time of the import alone is taken, minus the same
module with no classes (the import of ``kernelhub.value_types`` / ``dataclasses`` itself).

    .venv/bin/python benchmarks/value_types.py [--classes 20] [--rounds 21]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

KINDS = {
    "Record": ("from kernelhub.value_types import Record\n",
               "class C{i}(Record, frozen=True):\n"),
    "dataclass(frozen=True)": ("from dataclasses import dataclass\n",
                               "@dataclass(frozen=True)\nclass C{i}:\n"),
    "dataclass(frozen=True, slots=True)": ("from dataclasses import dataclass\n",
                                           "@dataclass(frozen=True, slots=True)\nclass C{i}:\n"),
}
FIELDS = "    a: int\n    b: str\n    c: list[int]\n    d: int = 0\n    e: str | None = None\n"

TIMED = """
import sys, time
sys.path.insert(0, sys.argv[1])
import kernelhub.errors, typing, enum, inspect  # what any caller has imported already
start = time.process_time()
__import__(sys.argv[2])
print(time.process_time() - start)
"""


def module(kind: str, count: int) -> str:
    head, cls = KINDS[kind]
    return ("from __future__ import annotations\n" + head
            + "".join(cls.format(i=i) + FIELDS for i in range(count)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names = {}
        for n, kind in enumerate(KINDS):
            for count in (0, args.classes):
                name = f"vt_{n}_{count}"
                (Path(tmp) / f"{name}.py").write_text(module(kind, count))
                names[kind, count] = name
        times: dict[tuple[str, int], list[float]] = {key: [] for key in names}
        for round_ in range(args.rounds + 1):  # round 0 writes the bytecode caches
            for key, name in names.items():
                out = subprocess.run([sys.executable, "-c", TIMED, tmp, name], check=True,
                                     capture_output=True, text=True).stdout
                if round_:
                    times[key].append(float(out) * 1000)
    print(f"{args.classes} frozen classes of 5 fields, median CPU ms of {args.rounds} "
          "fresh-process imports")
    for kind in KINDS:
        base = statistics.median(times[kind, 0])
        total = statistics.median(times[kind, args.classes])
        per = (total - base) / args.classes * 1000
        print(f"  {kind:36s} {total - base:6.2f} ms  ({per:4.0f} us per class)")


if __name__ == "__main__":
    main()
