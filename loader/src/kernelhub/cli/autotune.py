"""``kernelhub autotune-report`` (formerly ``verify-report``): what autotuning chose per
layer and shape, and why, from the cache."""

from __future__ import annotations

import argparse
import sys

from ..layer.autotune import report as autotune_report
from ..layer.autotune import store as autotune_store
from ..printable import printable
from .text import error_line


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text in (
        ("autotune-report", "what autotuning (kernelize(autotune=True)) chose per layer and "
                            "shape, and why (from the cache)"),
        ("verify-report", "the former name of autotune-report"),
    ):
        report = sub.add_parser(name, help=help_text)
        report.add_argument("--model", help="only decisions this model used (its name or "
                                            "path, as from_pretrained was given it)")
        report.add_argument("--name", help="only this layer or function name (e.g. RMSNorm)")
        report.add_argument("--forget", action="store_true",
                            help="remove these decisions, so the next run measures them again")
        report.set_defaults(func=_autotune_report)


def _autotune_report(args: argparse.Namespace) -> None:
    if args.command == "verify-report":
        print("kernelhub verify-report is deprecated: use kernelhub autotune-report",
              file=sys.stderr)
    records = autotune_store.stored_records(args.name, args.model)
    if not records:
        print("no autotuning decisions cached" + (f" for {error_line(args.model)}"
                                                   if args.model else "")
              + " (run a model with kernelize(..., autotune=True))")
        return
    if args.forget:
        removed = autotune_report.forget_decisions(args.model, args.name)
        print(f"forgot {removed} autotuning decision{'s' if removed != 1 else ''}; the next "
              "run with autotune=True measures again")
        return
    for record in records:
        key, d = record.key, record.decision
        times = ""
        if d.kernel_s is not None and d.pytorch_s is not None:
            times = f" [kernel {d.kernel_s * 1e3:.3f} ms, pytorch {d.pytorch_s * 1e3:.3f} ms]"
        print(printable(f"{key.get('name')} ({key.get('kernel')}) {key.get('bucket')}: "
                        f"{d.chosen} — {d.reason}{times}"))  # records on disk: anyone's words
        print(printable(f"    on {key.get('device')}, torch {key.get('torch')}, "
                        f"{key.get('threads')} threads; reference {key.get('reference')} "
                        f"({key.get('reference_version')})"
                        + (f"; used by {', '.join(record.models)}" if record.models else "")))
