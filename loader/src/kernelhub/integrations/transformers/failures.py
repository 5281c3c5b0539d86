"""What to tell a user whose explicitly configured kernel failed to load.

Shared by the layer, function and fusion parts of :mod:`.apply`: the message suggests a
newer major version of the kernel when the hub has one, since newer builds cover more
hardware, drivers and torch versions.
"""

from __future__ import annotations

from ...api import list_refs
from ...errors import KernelHubError
from .kernel_config import KernelConfigError, KernelSpec


def _major_versions(spec: KernelSpec) -> list[int]:
    """The major versions (``v<N>`` branches) the hub has for ``spec`` (best effort)."""
    if spec.local:
        return []
    try:
        refs = list_refs(spec.source)
    except KernelHubError:
        return []
    return sorted(int(b[1:]) for b in refs.branches if b[:1] == "v" and b[1:].isdigit())


def load_failure(spec: KernelSpec, key: object, device: str, error: Exception) -> KernelConfigError:
    """The error for an explicit entry that failed to load: try a newer version first.

    The suggestion names only versions the hub has; with none newer it says so and
    points at the hardware, driver and torch causes instead.
    """
    majors = _major_versions(spec)
    asked = spec.version if isinstance(spec.version, int) else None
    newer = [m for m in majors if asked is None or m > asked]
    if newer:
        hint = (f"Try a newer version of the kernel first (it has "
                f"{', '.join(f'version {m}' for m in newer)}), e.g. "
                f"('{spec.source}:{spec.name}', {{'version': {newer[-1]}}}) — builds for more "
                "hardware, drivers and torch versions arrive in later versions — before "
                "concluding that this device is unsupported.")
    else:
        has = ", ".join(f"version {m}" for m in majors) or "no major versions"
        hint = (f"{spec.source} has no version newer than {asked if asked is not None else 'this'} "
                f"(it has: {has}); check that this device, its driver and this torch are among "
                "the builds it provides (`kernelhub variants REPO` lists each build and why it "
                "does or does not fit).")
    return KernelConfigError(
        f"kernel_mapping[{key!r}] = {spec.describe()} could not be loaded on {device}: {error}\n"
        + hint
    )
