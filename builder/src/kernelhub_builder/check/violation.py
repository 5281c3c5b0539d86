"""What a check reports: one :class:`Violation` per broken rule, per file, per symbol.

Kept apart from :mod:`.variant` so the individual checks (ABI, layout, import) can build
violations without importing the module that runs them all. :class:`CheckFailed` (a
:class:`~kernelhub_builder.errors.BuilderError`) carries them when a policy refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BuilderError

# Rule names, stable so scripts and docs can refer to them.
RULE_MANYLINUX = "manylinux_2_28"
RULE_LIMITED_API = "python-limited-api"
RULE_NEEDED = "dynamic-dependency"
RULE_STABLE_ABI = "torch-stable-abi"
RULE_MISSING_FILE = "layout-missing-file"
RULE_IMPORT = "layout-import"
RULE_OP_NAME = "op-namespace-prefix"
RULE_OP_NAMESPACE = "op-namespace"
RULE_IMPORT_CHECK = "import-check"


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, in which file, about which symbol or detail, and why."""

    rule: str
    file: str
    """The file, relative to the variant dir."""
    detail: str
    """The symbol, import, op or library the rule is about."""
    message: str
    """What is wrong and what to do about it."""

    def __str__(self) -> str:
        return f"[{self.rule}] {self.file}: {self.detail}: {self.message}"


class CheckFailed(BuilderError):
    """A variant broke a rule that its policy does not allow."""

    def __init__(self, message: str, violations: list[Violation]) -> None:
        super().__init__(message)
        self.violations = violations
