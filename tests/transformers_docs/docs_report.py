"""What a documentation example left behind, as one JSON line the test can check.

Run after the example, in the same process (the example itself has no kernelhub line).
:data:`WATCH` runs before it instead, for the runs with kernelhub switched off: it imports
nothing of kernelhub and reports, even when the example fails, whether anything did.
"""

from __future__ import annotations

import json
from typing import Any

WATCH = """import atexit as _atexit, sys as _sys
_atexit.register(lambda: print("KERNELHUB", "kernelhub" in _sys.modules, any(
    type(f).__module__ == "_kernelhub_autoload" for f in _sys.meta_path), flush=True))
"""
"""Prelude for switched-off runs: at exit (after an error too) prints ``KERNELHUB <was
kernelhub imported> <was one of its import finders installed>``."""


def report(namespace: dict[str, Any]) -> None:
    from kernelhub.integrations.transformers.kernel_config import from_transformers
    from kernelhub.integrations.transformers.rebind import overrides_of
    from kernelhub.layer import get_kernelized_layers
    from kernelhub.load.importer import loaded_variants

    out: dict[str, Any] = {"loaded": sorted(loaded_variants())}
    model = namespace.get("model")
    if model is not None:
        from transformers import AttentionInterface

        attn = model.config._attn_implementation
        out["attn"] = attn
        function = AttentionInterface._global_mapping.get(attn)
        out["attn_module"] = getattr(function, "__module__", None)
        kernelized = get_kernelized_layers(model)
        out["kernels"] = {n: str(k.repo) for n, k in kernelized.layers.items()}
        out["funcs"] = {f"{m}.{f}": str(k.repo) for (m, f), k in kernelized.funcs.items()}
        out["funcs"].update({n: "rebound " + ", ".join(sorted(o)) for n, mod in
                             model.named_modules() if (o := overrides_of(mod))})
        out["mode"] = str(getattr(model, "_kernelhub_mode", None))
    if (config := namespace.get("kernel_config")) is not None:
        checked = from_transformers(config)
        out["entries"] = {name: {d: s.describe() if s else None for d, s in per.items()}
                          for name, per in checked.entries.items()}
    if (loss := namespace.get("loss")) is not None:
        out["loss"] = float(loss)
    if (output := namespace.get("output")) is not None:
        out["output_shape"] = list(output.shape)
    print("REPORT " + json.dumps(out))
