"""Error types raised by kernelhub.

Every error says what was wrong and what to do about it. Callers (the CLI, the
Transformers integration, the builder) catch these by type rather than by message.
"""

from __future__ import annotations


class KernelHubError(Exception):
    """Base class of every error kernelhub raises on purpose."""


class VariantNameError(KernelHubError, ValueError):
    """A build-variant name does not follow the naming scheme."""


class MetadataError(KernelHubError, ValueError):
    """A variant's metadata.json is missing, malformed or inconsistent."""


class IntegrityError(KernelHubError):
    """A file of a variant does not match the digest recorded in its metadata."""


class VersionSpecError(KernelHubError, ValueError):
    """A version or revision spec is malformed, or nothing on the hub satisfies it."""


class RepoNotFoundError(KernelHubError, LookupError):
    """The hub has no repository of that name."""


class NoCompatibleVariantError(KernelHubError):
    """The repository has builds, but none that this runtime can load."""


class TrustError(KernelHubError, PermissionError):
    """Loading would run code from an organisation the user has not trusted."""


class KernelLoadError(KernelHubError, ImportError):
    """A verified variant failed to import, or would clash with an already-loaded build."""


class HubError(KernelHubError):
    """The hub could not complete an operation (git failure, concurrent update, I/O)."""


class PublishConflictError(HubError):
    """Publishing lost a race or would rewrite an existing release; nothing was changed."""


class FlagTypeError(KernelHubError, TypeError):
    """A trust or opt-in flag is not a bool: ``"false"`` must never read as yes."""


class SignatureError(TrustError):
    """A release is unsigned, signed by a key the org's policy does not allow, or its
    signature does not cover what was fetched; nothing of it runs."""


class SigningKeyError(KernelHubError, ValueError):
    """A signing or allowed key is unreadable, malformed, or not an Ed25519 key."""


class RepoIdError(KernelHubError, ValueError):
    """A repository id is not a string of the form ``org/name``."""


class MappingError(KernelHubError, TypeError, ValueError):
    """A kernel mapping, device, mode or repository is malformed (raised when it is made)."""


class LockFileError(KernelHubError, ValueError):
    """A lock file is unreadable, malformed, or pins something that is not a commit."""


class CacheError(KernelHubError):
    """The kernel cache cannot be written (read-only, full, not a directory, no permission)."""


class OfflineError(KernelHubError):
    """Offline mode is on and what a load needs is not in the cache."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"offline mode: {what} is not in the cache; load it once online (or pin a "
            "commit that is cached), or unset KERNELHUB_OFFLINE/HF_HUB_OFFLINE"
        )


class PathError(KernelHubError, ValueError):
    """A path the user gave cannot name a file: a NUL byte, an unknown ``~user``, a name
    longer than filesystems allow."""


class NotAModelError(KernelHubError, TypeError):
    """kernelize (or a model-level call) was given something that is not a torch model."""
