"""Every error the builder raises on purpose, under one base type.

:class:`BuilderError` is a :class:`kernelhub.errors.KernelHubError`, so one ``except``
catches both the builder's errors and the formats' (bad variant name, tampered metadata,
hub refusal) that it passes on. The CLI turns any of them into one line and exit status 1.
"""

from __future__ import annotations

from pathlib import Path

from kernelhub.errors import KernelHubError


class BuilderError(KernelHubError):
    """Base class of every error the builder raises on purpose."""


class UsageError(BuilderError):
    """The command line names something the project does not have."""


class OutputDirError(BuilderError):
    """Where a variant would go holds something that is not a built variant; it is kept."""


class ManifestError(BuilderError, ValueError):
    """kernels.toml or build.toml is malformed; the message names file, key and fix."""

    def __init__(self, file: Path, key: str | None, problem: str) -> None:
        self.file = file
        self.key = key
        super().__init__(f"{file}: {key}: {problem}" if key else f"{file}: {problem}")


class VariantSelectionError(BuilderError, ValueError):
    """A ``--variant`` pattern matched none of the kernel's variants."""


class TorchEnvError(BuilderError):
    """A torch environment could not be created or queried."""


class ToolchainMismatchError(BuilderError):
    """The variant's torch env was built for another toolkit (or none): it cannot build it."""


class CudaArchError(BuilderError):
    """A capability list cannot be compiled, or a binary's device code cannot be read."""


class RenderError(BuilderError):
    """The manifest asks for a build this host or this variant cannot express."""


class CompileError(BuilderError):
    """The compiler or linker failed; ``output`` is what it printed."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(f"{message}\n{output.rstrip()}" if output.strip() else message)
        self.output = output


class NotAnElfError(BuilderError, ValueError):
    """The file is not an ELF shared library."""


class NixBuildError(BuilderError):
    """A flake derivation was asked for something this source tree cannot give."""


class ArtifactMergeError(BuilderError):
    """An artifact is malformed, fails its digests, or conflicts with another one."""


class ShardError(BuilderError, ValueError):
    """``--shard`` is not ``i/n`` with 1 <= i <= n."""
