"""``kernelhub describe-api``: a kernel's functions and layers, read from its symbols.json.

Nothing of the kernel is imported: the variant this system would load is fetched (or
found locally) and its ``symbols.json``, checked against the variant's digest, is read.
The ``--json`` document is the file's content plus where it came from (``repo_id`` and
``revision``, or ``path``; ``variant``), as the ecosystem's ``kernels describe-api`` prints.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..formats.metadata import read_metadata
from ..formats.symbols import LAYER_ATTRIBUTES, read_variant_symbols
from ..printable import printable
from ..user_files import user_path
from .args import add_target_args


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    describe = sub.add_parser(
        "describe-api", help="a kernel's functions and layers, without importing it")
    describe.add_argument("kernel", help="org/name on the hub, or a local build directory")
    describe.add_argument("--json", action="store_true", help="the symbols as JSON")
    add_target_args(describe, trust=True)
    describe.set_defaults(func=_describe)


def _describe(args: argparse.Namespace) -> None:
    target = user_path(args.kernel, "the kernel")
    source: dict[str, Any]
    if target.exists():
        path = api.find_local_variant(target, backend=args.backend)
        source = {"path": str(target)}
    else:
        resolution = api.resolve_kernel(args.kernel, args.version, args.revision, hub=args.hub,
                                        backend=args.backend)
        # Fetched and checked as for a load (trust, the org's signing policy), not imported.
        path = api.locate_kernel(args.kernel, revision=resolution.commit, hub=resolution.hub,
                                 backend=args.backend, trust_remote_code=args.trust_remote_code)
        source = {"repo_id": args.kernel, "revision": resolution.ref,
                  "commit": resolution.commit}
    symbols = read_variant_symbols(path, read_metadata(path).digest_files)
    info = {**symbols.to_json(), **source, "variant": path.name}
    if args.json:
        print(json.dumps(info, indent=2))  # ASCII: a hub's names cannot drive the terminal
        return
    where = (f"{info['repo_id']} at {info['revision']} ({info['commit'][:12]})"
             if "repo_id" in info else info["path"])
    print(printable(f"{where}, variant {info['variant']}"))  # names and symbols: the hub's
    print("functions:")
    for function in symbols.functions:
        print(printable(f"  {function.name}{_signature_text(function.signature)}"))
    if not symbols.functions:
        print("  (none)")
    print("layers:")
    for layer in symbols.layers:
        flags = "  ".join(f"{name}={_flag(layer.attribute(name))}" for name in LAYER_ATTRIBUTES)
        print(printable(f"  {layer.name}  {flags}"))
    if not symbols.layers:
        print("  (none)")


def _flag(value: bool | None) -> str:
    return "unknown" if value is None else str(value)


def _signature_text(signature: dict[str, Any] | None) -> str:
    """``(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor`` from the recorded shape,
    written as Python writes signatures (``/`` and ``*`` markers included)."""
    if not signature or not isinstance(signature.get("parameters"), list):
        return ""
    parts: list[str] = []
    kinds: list[str] = []
    for p in signature["parameters"]:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            return ""
        kind = p["kind"] if isinstance(p.get("kind"), str) else "POSITIONAL_OR_KEYWORD"
        if kind != "POSITIONAL_ONLY" and "POSITIONAL_ONLY" in kinds[-1:]:
            parts.append("/")
        if kind == "KEYWORD_ONLY" and not {"KEYWORD_ONLY", "VAR_POSITIONAL"} & set(kinds):
            parts.append("*")
        text = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind, "") + p["name"]
        if isinstance(p.get("annotation"), str):
            text += f": {p['annotation']}"
        if isinstance(p.get("default"), str):
            text += f" = {p['default']}"
        parts.append(text)
        kinds.append(kind)
    if kinds[-1:] == ["POSITIONAL_ONLY"]:
        parts.append("/")
    returns = signature.get("return_annotation")
    return f"({', '.join(parts)})" + (f" -> {returns}" if isinstance(returns, str) else "")
