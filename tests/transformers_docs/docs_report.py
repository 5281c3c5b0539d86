"""What a documentation example left behind, as one JSON line the test can check.

Run after the example, in the same process (the example itself has no kernelhub line).
"""

from __future__ import annotations

import json
from typing import Any


def report(namespace: dict[str, Any]) -> None:
    from kernelhub.integrations.transformers.kernel_config import from_transformers
    from kernelhub.layer import kernel_of

    out: dict[str, Any] = {}
    model = namespace.get("model")
    if model is not None:
        from kernelhub.integrations.transformers.rebind import overrides_of

        out["attn"] = model.config._attn_implementation
        out["kernels"] = {n: str(k) for n, m in model.named_modules()
                          if (k := kernel_of(m)) is not None}
        out["rotary_swapped"] = any("apply_rotary_pos_emb" in overrides_of(m)
                                    for m in model.modules())
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
