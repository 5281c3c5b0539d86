"""Check: whether a built variant may be shipped, and whether its own tests pass.

:mod:`.variant` runs every rule — the package's files, imports and op names
(:mod:`.package`), the shared library's ABI (:mod:`.abi`), the import in its torch
environment — and reports a :class:`.violation.Violation` per broken rule;
:mod:`.kernel_tests` runs the kernel's tests against each variant this host can run.
"""
