"""The loading API: spec → ref → commit → variant → cache → verify → import.

Each step is its own module; this one only strings them together and decides when the
hub is asked at all. A pinned commit whose variant list is cached needs no hub: commits
are immutable, so nothing the hub could say would change the answer.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from . import settings
from .build_layout import local_build_dirs, variant_dirs
from .cache import KernelCache
from .errors import (
    HubError,
    IntegrityError,
    KernelHubError,
    LockFileError,
    NoCompatibleVariantError,
    RepoNotFoundError,
    VersionSpecError,
)
from .hub.base import Hub
from .hub.select import hub_call, open_hub
from .importer import load_variant_dir
from .metadata import METADATA_FILE, read_metadata
from .records import Record
from .selection import Selection, check_archs, select_variant
from .system import SystemInfo, detect_system
from .trust import OrgPolicy, check_trusted, policy_for
from .versions import Refs, VersionSpec, branch_major, check_repo_id, resolve, select_spec

if TYPE_CHECKING:  # read when a lock file is used (load_locked_kernel) or a release signed
    from .lockfile import LockEntry
    from .release_manifest import ReleaseFiles

T = TypeVar("T")
P = ParamSpec("P")

HubArg = Hub | str | os.PathLike | None
"""A Hub, or what :func:`kernelhub.hub.select.open_hub` accepts: a path, URL, "hf", None."""

_memo: dict[tuple[str, str, str, str | None, bytes, str | None], ModuleType] = {}
"""(hub key, repo, spec, backend) → module, so repeated get_kernel calls cost a dict lookup."""


class Resolution(Record, frozen=True):
    """Where a repository spec led: the commit, its variants and the pick for this system."""

    repo_id: str
    hub: Hub
    ref: str
    commit: str
    variants: list[str]
    system: SystemInfo
    selection: Selection

    @property
    def variant(self) -> str:
        """The chosen variant; raises NoCompatibleVariantError listing every rejection."""
        if self.selection.chosen is not None:
            return self.selection.chosen
        where = f"{self.repo_id} at {self.ref} ({self.commit[:12]})"
        if not self.variants:
            raise NoCompatibleVariantError(f"{where} has no builds (nothing under build/)")
        lines = "\n".join(f"  {n}: {why}" for n, why in sorted(self.selection.rejected.items()))
        raise NoCompatibleVariantError(
            f"{where} has no build this system can load ({self.system.describe()}):\n{lines}\n"
            "Ask the kernel's maintainers for a build for this system, or pass backend= "
            "to load builds for another backend."
        )


def open_hub_arg(hub: HubArg) -> Hub:
    """Accept a Hub, a target string (path, URL, "hf") or None (the default hub)."""
    if isinstance(hub, Hub):
        return hub
    if hub is not None and not isinstance(hub, str | os.PathLike):
        raise HubError(
            f"hub={hub!r} is not a hub: pass a Hub, a path, an http(s) URL, 'hf' or None"
        )
    return open_hub(hub)


def default_spec(refs: Refs, repo_id: str) -> VersionSpec:
    """With no version or revision: the highest ``v<N>`` branch, else ``main``."""
    majors = [m for b in refs.branches if (m := branch_major(b)) is not None]
    if majors:
        return VersionSpec(major=max(majors))
    if "main" in refs.branches:
        return VersionSpec(ref="main")
    raise VersionSpecError(
        f"{repo_id} has no v<N> branch and no main branch to load by default; "
        f"{refs.describe()}. Pass version= or revision=."
    )


def list_refs(repo_id: str, *, hub: HubArg = None) -> Refs:
    """The repository's refs from the hub, or from the cache in offline mode."""
    check_repo_id(repo_id)
    hub = open_hub_arg(hub)
    return _refs(repo_id, hub, KernelCache())


def _refs(repo_id: str, hub: Hub, cache: KernelCache) -> Refs:
    if settings.offline():
        refs = cache.read_refs(hub.key, repo_id)
        if refs is None:
            raise KernelHubError(
                f"offline mode: no refs of {repo_id} are cached, so its versions cannot be "
                "resolved; load it once online, pin a cached commit, or unset "
                "KERNELHUB_OFFLINE/HF_HUB_OFFLINE"
            )
        return refs
    with hub_call(hub, f"listing the refs of {repo_id}"):
        refs = hub.list_refs(repo_id)
    cache.write_refs(hub.key, repo_id, refs)
    return refs


def _offline_miss(what: str) -> KernelHubError:
    return KernelHubError(
        f"offline mode: {what} is not in the cache; load it once online or unset "
        "KERNELHUB_OFFLINE/HF_HUB_OFFLINE"
    )


def _per_commit(
    hub: Hub, repo_id: str, commit: str, *,
    read: Callable[[str, str, str], T | None],
    ask: Callable[[str, str], T],
    write: Callable[[str, str, str, T], None],
    doing: str, what: str,
) -> T:
    """What ``commit`` holds: ``read`` from the cache when there (a commit never changes),
    else ``ask``-ed of the hub (a failure is one HubError saying it was ``doing`` that) and
    ``write``-n to the cache. Offline mode forbids asking: ``what`` is then missing."""
    if (cached := read(hub.key, repo_id, commit)) is not None:
        return cached
    if settings.offline():
        raise _offline_miss(what)
    with hub_call(hub, doing):
        value = ask(repo_id, commit)
    write(hub.key, repo_id, commit, value)
    return value


def _variants_at(repo_id: str, commit: str, hub: Hub, cache: KernelCache) -> list[str]:
    return _per_commit(hub, repo_id, commit, read=cache.read_variants, ask=hub.list_variants,
                       write=cache.write_variants,
                       doing=f"listing the variants of {repo_id} at {commit[:12]}",
                       what=f"{repo_id} at {commit[:12]}")


class _Request(Record, frozen=True):
    """A hub kernel as the caller named it, checked: nothing has asked the hub yet."""

    repo_id: str
    spec: VersionSpec | None
    hub: Hub
    backend: str | None


def _request(
    repo_id: str,
    version: int | str | None = None,
    revision: str | None = None,
    *,
    hub: HubArg = None,
    backend: str | None = None,
) -> _Request:
    """The one parameter list of :func:`resolve_kernel`, :func:`locate_kernel` and
    :func:`has_kernel`, checked: a malformed repo id or spec raises here, before any hub
    is asked."""
    check_repo_id(repo_id)
    spec = select_spec(version, revision)
    return _Request(repo_id, spec, open_hub_arg(hub), backend)


def _called_like(parse: Callable[P, _Request]
                 ) -> Callable[[Callable[[_Request], T]], Callable[P, T]]:
    """Make ``step`` (which takes a checked request) callable with ``parse``'s parameters,
    which type checkers and ``help()`` then show, so the parameters are written once."""

    def decorate(step: Callable[[_Request], T]) -> Callable[P, T]:
        @functools.wraps(step)
        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return step(parse(*args, **kwargs))

        call.__signature__ = inspect.signature(parse).replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(step).return_annotation)
        return call

    return decorate


def _resolve(request: _Request) -> Resolution:
    repo_id, spec, hub = request.repo_id, request.spec, request.hub
    cache = KernelCache()
    if spec is not None and spec.commit is not None:
        ref, commit = spec.commit, spec.commit
    else:
        refs = _refs(repo_id, hub, cache)
        ref, commit = resolve(spec or default_spec(refs, repo_id), refs, repo_id)
    variants = _variants_at(repo_id, commit, hub, cache)
    system = detect_system(request.backend)
    return Resolution(repo_id, hub, ref, commit, variants, system, select_variant(variants, system))


@_called_like(_request)
def resolve_kernel(request: _Request) -> Resolution:
    """Resolve a spec to a commit and pick a variant, without fetching or importing."""
    return _resolve(request)


def install_kernel(resolution: Resolution) -> tuple[Path, bool]:
    """Make the chosen variant present in the cache; return (dir, freshly_installed)."""
    variant = resolution.variant
    cache = KernelCache()
    hub, repo_id, commit = resolution.hub, resolution.repo_id, resolution.commit
    if (path := cache.installed(hub.key, repo_id, commit, variant)) is not None:
        return path, False
    if settings.offline():
        raise KernelHubError(
            f"offline mode: {variant} of {repo_id} at {commit[:12]} is not in the cache; "
            "load it once online or unset KERNELHUB_OFFLINE/HF_HUB_OFFLINE"
        )
    return cache.install(hub, repo_id, commit, variant), True


@_called_like(_request)
def locate_kernel(request: _Request) -> Path:
    """The cache directory of the variant get_kernel would load (fetched, not imported)."""
    return install_kernel(_resolve(request))[0]


def get_kernel(
    repo_id: str,
    version: int | str | None = None,
    revision: str | None = None,
    *,
    trust_remote_code: bool = False,
    hub: HubArg = None,
    backend: str | None = None,
) -> ModuleType:
    """Load a kernel from a hub and return its module.

    ``version`` is an int major (head of branch ``v<N>``), a tag or branch name, a
    specifier such as ``">=1.2,<2"`` or a commit sha; ``revision`` is a branch, tag or
    sha. Give at most one. With neither, the highest ``v<N>`` branch is loaded (``main``
    when the repository has no major branches), so a default load never silently
    changes major version behind a published ``v<N>`` line.

    ``backend`` overrides the detected backend (e.g. ``"cpu"`` on a GPU machine).
    Code from organisations not trusted by default or by configuration is refused
    unless ``trust_remote_code=True``. Where the user's signing policy names the org,
    the release's signature is checked before anything is fetched or imported
    (docs/signing.md); ``trust_remote_code`` does not bypass that. Results are memoized
    per process (per policy).
    """
    return _load_kernel(repo_id, version, revision, trust_remote_code, hub, backend, None)


def load_locked_kernel(
    repo_id: str,
    *,
    lockfile: Path | str | None = None,
    trust_remote_code: bool = False,
    hub: HubArg = None,
    backend: str | None = None,
) -> ModuleType:
    """Load the commit ``lockfile`` (default ``./kernels.lock``) pins for ``repo_id``.

    Before anything is imported, the variant for this system must match the hash the
    lock records for it (kernelhub's metadata sha256 when present, else the ecosystem's
    ``git_lfs_concat``); a lock with hashes but none for this variant is refused. Once
    the variant is in the cache (``kernelhub download``) this asks the hub nothing.
    """
    from .lockfile import lock_entry

    entry = lock_entry(repo_id, Path(lockfile) if lockfile is not None else None)
    return load_locked_entry(entry, trust_remote_code=trust_remote_code, hub=hub,
                             backend=backend)


def load_locked_entry(entry: LockEntry, *, trust_remote_code: bool = False,
                      hub: HubArg = None, backend: str | None = None) -> ModuleType:
    """Load what one lock-file entry pins, checked against its hashes (see
    :func:`load_locked_kernel`)."""
    return _load_kernel(entry.repo_id, None, entry.sha, trust_remote_code, hub, backend, entry)


def _load_kernel(repo_id: str, version: int | str | None, revision: str | None,
                 trust_remote_code: bool, hub: HubArg, backend: str | None,
                 locked: LockEntry | None) -> ModuleType:
    request = _request(repo_id, version, revision, hub=hub, backend=backend)
    hub = request.hub
    check_trusted(repo_id, hub, trust_remote_code)
    policy = policy_for(repo_id.partition("/")[0])
    # The policy is part of the key: tightening it makes the next call check again; so
    # is the lock entry, so an edited lock is checked again.
    pins = json.dumps(locked.to_json(), sort_keys=True) if locked is not None else None
    key = (hub.key, repo_id, f"{version!r}|{revision!r}", backend, policy.token, pins)
    if (module := _memo.get(key)) is not None:
        return module
    resolution = _resolve(request)
    signed_sha256 = _signed_metadata_sha256(resolution, policy)
    path, _ = install_kernel(resolution)
    if locked is not None:
        check_locked(locked, resolution.variant, path)
    # A build without code for this GPU must fail here, not at its first kernel launch.
    check_archs(resolution.variant, read_metadata(path).backend.archs, resolution.system)
    module = load_variant_dir(path, metadata_sha256=signed_sha256)
    _memo[key] = module
    return module


def check_locked(entry: LockEntry, variant: str, path: Path) -> None:
    """Refuse a variant dir that does not match the hash its lock entry records.

    Each hash's module is imported only where the lock records that hash: a pin without
    hashes imports neither.
    """
    where = f"{variant} of {entry.repo_id} at {entry.sha[:12]}"
    if (want := entry.metadata_sha256.get(variant)) is not None:
        from .metadata import read_metadata_bytes
        from .release_manifest import metadata_sha256

        actual = metadata_sha256(read_metadata_bytes(path))
        kind = "metadata sha256"
    elif (want := entry.variant_hashes.get(variant)) is not None:
        from .hub_hashes import cached_variant_hash

        actual = cached_variant_hash(path)
        kind = "hash (git_lfs_concat)"
    elif entry.variant_hashes or entry.metadata_sha256:
        raise LockFileError(
            f"the lock file has no hash for {where}, the build this system loads; it locks "
            f"{', '.join(sorted(entry.variant_hashes or entry.metadata_sha256))}. Run "
            "`kernelhub lock` again"
        )
    else:
        return  # a pin without hashes (the older {repo: sha} form): the commit is the pin
    if actual != want:
        raise IntegrityError(
            f"refusing to load {where}: its {kind} is {actual[:23]}…, but the lock file "
            f"records {want[:23]}…; nothing of it was imported. Run `kernelhub cache clear` "
            "and `kernelhub download` if the cache is damaged, or `kernelhub lock` if the "
            "lock is stale"
        )


def _release_files(resolution: Resolution, cache: KernelCache) -> ReleaseFiles:
    hub, repo_id, commit = resolution.hub, resolution.repo_id, resolution.commit
    return _per_commit(hub, repo_id, commit, read=cache.read_release, ask=hub.fetch_release,
                       write=cache.write_release,
                       doing=f"sending the release signature of {repo_id}",
                       what=f"the release signature of {repo_id} at {commit[:12]}")


def _signed_metadata_sha256(resolution: Resolution, policy: OrgPolicy) -> str | None:
    """What the org's signing policy says the chosen variant's metadata.json must hash to.

    None when no signature applies (no policy for the org, or an unsigned release the
    policy allows); raises SignatureError when the policy refuses the release. Checked
    before the variant is fetched, so a refused release downloads nothing but its
    manifest and signature.
    """
    if not policy.active:
        return None
    from .release_check import check_release, signed_metadata_digest  # signing policies only

    files = _release_files(resolution, KernelCache())
    manifest = check_release(
        files, policy, resolution.repo_id, resolution.ref, resolution.commit
    )
    if manifest is None:
        return None
    where = f"{resolution.repo_id} at {resolution.ref} ({resolution.commit[:12]})"
    return signed_metadata_digest(manifest, resolution.variant, where)


def describe_signature(resolution: Resolution) -> str:
    """The release signature at the resolved commit and the verdict of the user's policy."""
    from .release_check import describe_release

    policy = policy_for(resolution.repo_id.partition("/")[0])
    files = _release_files(resolution, KernelCache())
    return describe_release(
        files, policy, resolution.repo_id, resolution.ref, resolution.commit
    )


@_called_like(_request)
def has_kernel(request: _Request) -> bool:
    """Whether the repository has a build this system can load (nothing is imported).

    A missing repository or version is False; a malformed spec or repo id still raises
    (it is refused before the hub is asked).
    """
    try:
        resolution = _resolve(request)
    except (RepoNotFoundError, VersionSpecError):
        return False
    return resolution.selection.chosen is not None


# -- local builds ------------------------------------------------------------------


def _local_archs(build_dir: Path, names: list[str]) -> dict[str, list[str]]:
    """backend.archs of local builds (metadata is on disk: reading it is cheap), so
    selection can prefer the build with code for this GPU."""
    archs: dict[str, list[str]] = {}
    for name in names:
        try:
            archs[name] = read_metadata(build_dir / name).backend.archs
        except KernelHubError:
            continue  # unreadable metadata: selection ranks it as unknown, import reports it
    return archs


def find_local_variant(path: Path | str, *, backend: str | None = None) -> Path:
    """The variant dir get_local_kernel would load from ``path``.

    ``path`` may be a variant dir (has metadata.json), a dir of variant dirs (such as
    ``build/`` or ``build/<kernel>/``), or a kernel source dir whose builds are in its
    own ``build/`` or in ``<project root>/build/<kernel name>/`` (the builder's layout,
    for a source dir directly under the project's ``kernels-src/``). Parent directories
    are never searched.
    """
    if not isinstance(path, str | os.PathLike):
        raise KernelHubError(
            f"a local kernel path must be a str or a Path, not {type(path).__name__} {path!r}"
        )
    path = Path(path).expanduser().resolve()
    if (path / METADATA_FILE).is_file():
        return path
    if not path.is_dir():
        raise KernelHubError(f"{path} does not exist or is not a directory")
    candidates = local_build_dirs(path)
    for build_dir in candidates:
        if names := variant_dirs(build_dir):
            system = detect_system(backend)
            selection = select_variant(names, system, _local_archs(build_dir, names))
            if selection.chosen is None:
                lines = "\n".join(f"  {n}: {why}" for n, why in sorted(selection.rejected.items()))
                raise NoCompatibleVariantError(
                    f"{build_dir} has no build this system can load ({system.describe()}):\n"
                    f"{lines}\nRebuild for this system with `builder build`."
                )
            return build_dir / selection.chosen
    raise KernelHubError(
        f"no built variants found for {path}: looked in "
        f"{', '.join(str(c) for c in candidates)}; build it first with `builder build`, "
        "or name the variant directory itself"
    )


def get_local_kernel(path: Path | str, *, backend: str | None = None) -> ModuleType:
    """Load a local build; naming a path is the act of trusting it."""
    return load_variant_dir(find_local_variant(path, backend=backend))
