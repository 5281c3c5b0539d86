"""The loading API: the public functions, each a thin shell over :mod:`kernelhub.load`.

Every function here checks the caller's words into a request
(:func:`kernelhub.load.request.kernel_request`) and hands it to the pipeline
(:mod:`kernelhub.load.pipeline`: resolve → fetch → verify → import), which decides when
the hub is asked at all and runs every check on the bytes that are imported.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.deps", "kernelhub.errors", "kernelhub.formats.metadata",
    "kernelhub.hub.calls", "kernelhub.hub.search",
    "kernelhub.load.fetch", "kernelhub.load.request", "kernelhub.load.resolve",
    "kernelhub.load.verify", "kernelhub.selection", "kernelhub.signing.trust",
    "kernelhub.system", "kernelhub.user_files", "kernelhub.versions",
}

from collections.abc import Collection
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from . import cache
from .deps import DepNode, KernelDependency, Located, located, resolve_tree
from .errors import KernelHubError, NoCompatibleVariantError, RepoNotFoundError, VersionSpecError
from .formats.metadata import METADATA_FILE, read_metadata
from .hub.calls import hub_name
from .hub.search import as_search_path
from .load import pipeline, validators
from .load.fetch import fetch
from .load.request import HubArg, kernel_request, open_hub_arg
from .load.resolve import (
    Resolution,
    default_spec,
    refs_of,
    release_files,
    resolve_request,
    serving_hub,
)
from .load.verify import verify_fetched
from .selection import select_variant
from .signing.trust import policy_for
from .system import detect_system
from .user_files import user_path
from .versions import Refs, check_repo_id

if TYPE_CHECKING:
    from .lock import LockEntry, LockPins

__all__ = [
    "HubArg",
    "Resolution",
    "default_spec",
    "dependency_tree",
    "describe_signature",
    "download_locked",
    "find_local_variant",
    "get_kernel",
    "get_local_kernel",
    "has_kernel",
    "list_refs",
    "load_locked_entry",
    "load_locked_kernel",
    "load_variant_dir",
    "locate_kernel",
    "lock_project",
    "open_hub_arg",
    "resolve_kernel",
]


def list_refs(repo_id: str, *, hub: HubArg = None) -> Refs:
    """The repository's refs from the hub that serves it (the first on a search path that
    has it), or from the cache in offline mode."""
    check_repo_id(repo_id)
    store = cache.KernelCache()
    return refs_of(repo_id, serving_hub(open_hub_arg(hub), repo_id, None, store), store)


def resolve_kernel(repo_id: str, version: int | str | None = None, revision: str | None = None,
                   *, hub: HubArg = None, backend: str | None = None) -> Resolution:
    """Resolve a spec to a commit and pick a variant, without fetching or importing."""
    return resolve_request(kernel_request(repo_id, version, revision, hub=hub, backend=backend))


def locate_kernel(repo_id: str, version: int | str | None = None, revision: str | None = None,
                  *, hub: HubArg = None, backend: str | None = None,
                  trust_remote_code: bool | Collection[str] = False) -> Path:
    """The cache directory of the variant get_kernel would load: fetched and checked as
    for a load (trust, the org's signing policy), not imported."""
    return pipeline.locate(kernel_request(repo_id, version, revision, hub=hub, backend=backend,
                                          trust_remote_code=trust_remote_code))


def get_kernel(
    repo_id: str,
    version: int | str | None = None,
    revision: str | None = None,
    *,
    trust_remote_code: bool | Collection[str] = False,
    hub: HubArg = None,
    backend: str | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """Load a kernel from a hub and return its module.

    ``version`` is an int major (head of branch ``v<N>``), a tag or branch name, a
    specifier such as ``">=1.2,<2"`` or a commit sha; ``revision`` is a branch, tag or
    sha. Give at most one. With neither, the highest ``v<N>`` branch is loaded (``main``
    when the repository has no major branches), so a default load never silently
    changes major version behind a published ``v<N>`` line.

    ``backend`` overrides the detected backend (e.g. ``"cpu"`` on a GPU machine).
    Code from organisations not trusted by default or by configuration is refused
    unless ``trust_remote_code=True``, or a list of repository ids that names it (the
    ecosystem's allow-list: it vouches for those repositories only, so a dependency the
    kernel declares loads only if it is listed or its org is trusted). Where the user's signing policy names the org,
    the release's signature is checked before anything is fetched or imported
    (docs/signing.md); ``trust_remote_code`` does not bypass that. Results are memoized
    per process (per policy). ``check_arch=False`` loads a build whose declared GPU
    architectures do not include this GPU's (e.g. one with a Triton fallback).
    """
    return pipeline.load(kernel_request(repo_id, version, revision, hub=hub, backend=backend,
                                        trust_remote_code=trust_remote_code,
                                        check_arch=check_arch))


def load_locked_kernel(
    repo_id: str,
    *,
    lockfile: Path | str | None = None,
    trust_remote_code: bool | Collection[str] = False,
    hub: HubArg = None,
    backend: str | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """Load the commit ``lockfile`` (default ``./kernels.lock``) pins for ``repo_id``.

    Before anything is imported, the variant for this system must match the hash the
    lock records for it (kernelhub's metadata sha256 when present, else the ecosystem's
    ``git_lfs_concat``); a lock with hashes but none for this variant is refused. The
    kernel's ``kernel-depends`` load at the commits the same lock pins, checked alike
    (a dependency it does not pin is refused). Once the variants are in the cache
    (``kernelhub download``) this asks the hub nothing.
    """
    from . import lock
    pins = lock.read_pins(lockfile)
    return load_locked_entry(pins.pick(repo_id), pins=pins, trust_remote_code=trust_remote_code,
                             hub=hub, backend=backend, check_arch=check_arch)


def load_locked_entry(entry: LockEntry, *, pins: LockPins | None = None,
                      trust_remote_code: bool | Collection[str] = False, hub: HubArg = None,
                      backend: str | None = None, check_arch: bool = True) -> ModuleType:
    """Load what one lock-file entry pins, checked against its hashes (see
    :func:`load_locked_kernel`). Its kernel's dependencies load as ``pins`` (the whole
    lock the entry came from) pins them, each checked against its own hashes; without
    ``pins`` the entry is the whole lock, and a kernel that declares dependencies is
    refused rather than loading versions nobody locked."""
    from . import lock
    pins = pins if pins is not None else lock.LockPins(
        {entry.repo_id: entry}, "given to load_locked_entry alone (pass pins=, the whole lock, "
        "for the kernel's dependencies)")
    request = kernel_request(entry.repo_id, revision=entry.sha, hub=hub, backend=backend,
                             trust_remote_code=trust_remote_code, lock=entry, pins=pins,
                             check_arch=check_arch)
    _prefer_locked_hub(request.hub, entry)
    return pipeline.load(request)


def _prefer_locked_hub(hub: object, entry: LockEntry) -> None:
    """Through a search path holding the hub ``entry`` was locked from, read the pin from
    that hub (a hub not on the path is never added: the user's path decides where code
    may come from)."""
    if entry.hub is None or (path := as_search_path(hub)) is None:
        return
    for each in path.hubs:
        if hub_name(each) == entry.hub:
            path.settle(entry.repo_id, each)
            return


def describe_signature(resolution: Resolution) -> str:
    """The release signature at the resolved commit and the verdict of the user's policy."""
    from .signing import policy as release_policy
    policy = policy_for(resolution.repo_id.partition("/")[0])
    return release_policy.describe_release(release_files(resolution), policy, resolution.repo_id,
                            resolution.ref, resolution.commit)


def has_kernel(repo_id: str, version: int | str | None = None, revision: str | None = None,
               *, hub: HubArg = None, backend: str | None = None) -> bool:
    """Whether the repository has a build this system can load (nothing is imported).

    A missing repository or version is False; a malformed spec or repo id still raises
    (it is refused before the hub is asked).
    """
    request = kernel_request(repo_id, version, revision, hub=hub, backend=backend)
    try:
        resolution = resolve_request(request)
    except (RepoNotFoundError, VersionSpecError):
        return False
    return resolution.selection.chosen is not None


# -- dependency trees --------------------------------------------------------------


def dependency_tree(kernel: str | Path, version: int | str | None = None,
                    revision: str | None = None, *, hub: HubArg = None,
                    backend: str | None = None) -> DepNode:
    """The ``kernel-depends`` tree of a hub kernel (a repo id) or a local build (a Path, as
    :func:`get_local_kernel` takes it), each dependency resolved on ``hub`` for this system
    (or ``backend``) and its chosen variant fetched for the metadata naming its own;
    nothing is imported (``kernelhub info --dep-tree`` draws it)."""
    if isinstance(kernel, Path):
        variant_dir = find_local_variant(kernel, backend=backend)
        root = located(str(kernel), None, variant_dir.name, read_metadata(variant_dir),
                       str(variant_dir), variant_dir)
    else:
        root = _located_on_hub(resolve_kernel(kernel, version, revision, hub=hub,
                                              backend=backend))

    def resolve(dep: KernelDependency) -> Located:
        resolution = resolve_kernel(dep.repo_id, dep.version, dep.revision, hub=hub,
                                    backend=backend)
        resolution.variant  # noqa: B018 - raises, naming every rejection, when none fits
        return _located_on_hub(resolution)

    return resolve_tree(root, resolve)


def _located_on_hub(resolution: Resolution) -> Located:
    variant_dir = fetch(resolution).path
    return located(resolution.repo_id, resolution.commit, variant_dir.name,
                   read_metadata(variant_dir), str(variant_dir), resolution)


# -- project locks ---------------------------------------------------------------


def lock_project(project_dir: Path, *, hub: HubArg = None, fmt: str = "kernels"
                 ) -> tuple[list[Path], list[LockEntry]]:
    """Write ``<project_dir>/kernels.lock`` for the project's kernel dependencies and every
    kernel they depend on (``kernel-depends``, recursively: :mod:`kernelhub.lock_tree`),
    with kernelhub's hashes in ``kernelhub.lock`` beside it (``fmt="kernelhub"``: one
    hashed ``kernels.lock``; see :mod:`kernelhub.lock`); return the files written and the
    entries.

    Every variant at the locked commit is fetched into the cache once to hash it, so the
    lock serves every platform, not only this one.
    """
    from . import lock, lock_tree
    versions = lock.project_dependencies(project_dir)
    tree = lock_tree.lock_tree(versions, hub=hub)
    written = lock.write_lock(Path(project_dir) / lock.LOCKFILE_NAME, tree.entries,
                              versions=versions, dependencies=tree.dependencies, fmt=fmt)
    return written, list(tree.entries)


def download_locked(project_dir: Path, *, all_variants: bool = False, hub: HubArg = None,
                    backend: str | None = None) -> list[Path]:
    """Fetch what ``<project_dir>/kernels.lock`` pins (this system's variant, or all of
    them) into the cache, each checked against the lock; return the variant dirs."""
    from . import lock
    paths = []
    for repo_id, entry in sorted(lock.read_lock(Path(project_dir) / lock.LOCKFILE_NAME).items()):
        resolution = resolve_request(kernel_request(repo_id, revision=entry.sha, hub=hub,
                                                    backend=backend))
        variants = resolution.variants if all_variants else [resolution.variant]
        for variant in variants:
            fetched = fetch(resolution, variant)
            pipeline.checked(verify_fetched(fetched), [validators.LockValidator(entry)]).discard()
            paths.append(fetched.path)
    return paths


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
    from .formats.build_layout import local_build_dirs, variant_dirs  # a local build only

    path = user_path(path, "the local kernel path").resolve()
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


def load_variant_dir(path: Path | str) -> ModuleType:
    """Verify and import the variant dir at ``path`` (naming it trusts it); return its
    top-level module. What runs is exactly what was read and verified, once."""
    return pipeline.load_local(user_path(path, "the variant directory"))


def get_local_kernel(path: Path | str, *, backend: str | None = None) -> ModuleType:
    """Load a local build; naming a path is the act of trusting it (a variant inside the
    kernel cache is still held to its org's signing policy)."""
    return pipeline.load_local(find_local_variant(path, backend=backend))
