"""``builder publish``: push a kernel's built variants to a hub as one commit.

Every variant under ``<out>/<kernel>/`` is checked first — its metadata must carry the
manifest's version and release and its files must match their digests — so a stale or
tampered build is refused before anything reaches the hub. Each variant's binaries are
re-checked too (:mod:`check`: read from the files, not trusted from metadata.json): a
binary that breaks a rule is refused, and one that needs a newer glibc/libstdc++ than
manylinux_2_28 is refused unless ``allow_host_abi``. Then one
``hub.publish(repo, "v<major>", {variant: dir}, tag="v<release>")`` replaces exactly
those variant dirs on the branch; variants built elsewhere stay. With ``--sign KEY`` the
commit also carries a signed release manifest (:mod:`kernelhub.formats.release_manifest`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from enum import Enum
from pathlib import Path

from kernelhub.errors import MetadataError
from kernelhub.formats.metadata import verify_variant
from kernelhub.formats.release_manifest import NAMESPACE
from kernelhub.hub.calls import hub_call
from kernelhub.signing.sshsig import SigningKey, load_signing_key

from ..check.variant import AbiPolicy, raise_if_fatal, static_checks
from ..errors import BuilderError
from ..layout import built_variants, kernel_dir
from ..manifest import KernelManifest, Project, VariantNames
from .base import HubPublisher, PublishResult
from .names import published_names

SIGN_KEY_ENV = "KERNELHUB_SIGNING_KEY"
SIGN_PASSPHRASE_ENV = "KERNELHUB_SIGNING_KEY_PASSPHRASE"


def repo_id_for(project: Project, kernel: KernelManifest) -> str:
    return kernel.repo_id or f"{project.org}/{kernel.name}"


def collect_variants(
    project: Project, kernel: KernelManifest, out_dir: Path, *, allow_host_abi: bool = False,
    names: VariantNames | None = None,
) -> dict[str, Path]:
    """Built variants of ``kernel``, each verified against the manifest, its digests and
    the checks, under every name ``names`` asks for (default: the project's setting,
    :mod:`.names`)."""
    names = names or project.variant_names
    found = built_variants(out_dir, project, kernel)
    if not found:
        raise BuilderError(
            f"nothing to publish for {kernel.name}: no built variants under "
            f"{kernel_dir(out_dir, project, kernel)}; run builder build {kernel.name} first"
        )
    variants: dict[str, Path] = {}
    for variant, path in found:
        metadata = verify_variant(path)
        if metadata.name != kernel.name:
            raise MetadataError(
                f"{path}: built for kernel {metadata.name!r}, not {kernel.name!r}; "
                "remove the directory and rebuild"
            )
        if (metadata.version, metadata.release) != (kernel.version, kernel.release):
            raise MetadataError(
                f"{path}: built as version {metadata.version} release {metadata.release}, "
                f"but build.toml says version {kernel.version} release {kernel.release}; "
                f"rebuild with builder build {kernel.name}"
            )
        policy = AbiPolicy.HOST if allow_host_abi else AbiPolicy.MANYLINUX_2_28
        raise_if_fatal(f"refusing to publish {path}", static_checks(path, variant), policy)
        for name in published_names(variant, names):
            variants[name] = path
    return variants


class StalePolicy(str, Enum):
    """What to do with variants of an older release on the branch head (docs/shipping.md)."""

    REFUSE = "refuse"
    """Default: publish nothing and say which variants would be mislabelled."""
    DROP = "drop"
    """Delete them from the branch in the same commit: the new tag holds only this release."""
    CARRY = "carry"
    """Keep them: the new tag then also marks builds of an older release, said aloud."""


class StaleVariantsError(BuilderError):
    """The branch holds variants of another release that this publish does not replace."""


def stale_variants(
    hub: HubPublisher, repo_id: str, branch: str, release: str, publishing: Iterable[str]
) -> dict[str, str | None]:
    """Variants on the branch head, not being published now, built for another release."""
    skip = set(publishing)
    return {name: rel for name, rel in sorted(hub.branch_releases(repo_id, branch).items())
            if name not in skip and rel != release}


def publish_kernel(
    project: Project,
    kernel: KernelManifest,
    out_dir: Path,
    hub: HubPublisher,
    *,
    dry_run: bool = False,
    allow_host_abi: bool = False,
    key: SigningKey | None = None,
    stale: StalePolicy = StalePolicy.REFUSE,
    branch: str | None = None,
    private: bool = False,
    create_pr: bool = False,
    names: VariantNames | None = None,
) -> PublishResult:
    """Publish ``kernel``'s built variants as one commit on ``v<major>``, tagged with the
    release; variants of other releases on the branch are handled by ``stale``; with
    ``key``, sign the release (see :mod:`kernelhub.formats.release_manifest`: the signature covers
    every variant the tagged commit holds).

    ``branch``: another branch than ``v<major>`` — a preview, so no release tag (a tag
    ``v<release>`` marks a commit of the version branch). ``create_pr``: open a pull request
    against the branch instead of committing to it (Hub-API hubs; no tag). ``private``: a
    repository the publish creates is private. ``names``: which generations of variant
    names (default: the project's ``[hub] variant-names``).
    """
    variants = collect_variants(project, kernel, out_dir, allow_host_abi=allow_host_abi,
                                names=names)
    repo_id = repo_id_for(project, kernel)
    release_branch = f"v{kernel.version}"
    branch = branch or release_branch
    tagged = branch == release_branch and not create_pr
    tag = f"v{kernel.release}" if tagged else None
    if key is not None and not tagged:
        raise BuilderError(
            f"--sign signs the release v{kernel.release} on {release_branch}; "
            f"{'a pull request' if create_pr else f'branch {branch}'} carries no release. "
            "Publish to the version branch to sign, or leave out --sign")
    old = stale_variants(hub, repo_id, branch, kernel.release, variants)
    listing = ", ".join(f"{name} ({rel or 'unknown release'})" for name, rel in old.items())
    if old and stale is StalePolicy.REFUSE:
        raise StaleVariantsError(
            f"{repo_id}@{branch} holds variants of another release that this publish of "
            f"{kernel.release} does not rebuild: {listing}; "
            f"{f'tag {tag} would carry them' if tag else 'they would be mixed with it'}. Build "
            "them too, or pass --drop-stale (remove them from the branch) or --carry-stale "
            "(keep them under the new tag). Nothing was published"
        )
    message = (
        f"Publish {kernel.name} {kernel.release}: {len(variants)} variant(s)\n\n"
        + "\n".join(sorted(variants))
    )
    if old and stale is StalePolicy.DROP:
        message += "\n\nRemoved (older releases): " + listing
    if old and stale is StalePolicy.CARRY:
        message += "\n\nCarried from older releases: " + listing
    from .hf import HfPublisher  # huggingface_hub only when publishing

    # A refused connection or a server's odd answer reaches the user as one HubError.
    with hub_call(hub, f"publishing {repo_id} {kernel.release}"):
        sign = (lambda data: key.sign(data, NAMESPACE)) if key is not None else None
        remove = list(old) if stale is StalePolicy.DROP else []
        if isinstance(hub, HfPublisher):
            result = hub.publish(
                repo_id, branch, variants, tag=tag, message=message, dry_run=dry_run,
                sign=sign, remove=remove, private=private, create_pr=create_pr,
                readme=render_readme(project, kernel))
        else:
            result = hub.publish(
                repo_id, branch, variants, tag=tag, message=message, dry_run=dry_run,
                sign=sign, remove=remove, private=private, create_pr=create_pr)
    notes = []
    if old and stale is StalePolicy.CARRY:
        notes.append(f"carried under {tag or branch} (built for another release): {listing}")
    if not tagged and not create_pr:
        notes.append(f"no release tag: v{kernel.release} marks a commit of {release_branch}, "
                     f"and this publish went to {branch}")
    return replace(result, notes=[*result.notes, *notes]) if notes else result


def render_readme(project: Project, kernel: KernelManifest) -> str:
    """The README.md a Hub repository shows on main: what the kernel is and how to load it."""
    from ..compile.render import template_environment

    return template_environment().get_template("README.md.j2").render(
        kernel=kernel, repo_id=repo_id_for(project, kernel))


def default_release_key() -> str | None:
    """``--sign``'s default: ``$KERNELHUB_SIGNING_KEY`` (how CI passes a key file)."""
    return os.environ.get(SIGN_KEY_ENV) or None


def load_release_key(path: str | Path) -> SigningKey:
    """The private key ``--sign`` names; its passphrase, if any, from the environment."""
    return load_signing_key(path, os.environ.get(SIGN_PASSPHRASE_ENV))


def describe_result(result: PublishResult, key: SigningKey | None = None) -> str:
    """What a publish did, in the words a user wants after running it."""
    where = f"{result.repo_id}@{result.branch}"
    new_repo = " (new repository)" if result.created_repo else ""
    if not result.changed and not (result.dry_run and result.operations):
        lines = [f"{where}: no change ({len(result.unchanged)} variant(s) already up to date)"]
    elif result.dry_run:
        lines = [f"dry run: would publish {where}{new_repo}; nothing was changed"]
    elif result.pull_request:
        lines = [f"opened pull request {result.pull_request} against {where}"]
    else:
        head = result.commit[:12] if result.commit else "?"
        lines = [f"published {where} → commit {head}{new_repo}"]
    lines += [f"  added     {v}" for v in result.added]
    lines += [f"  replaced  {v}" for v in result.replaced]
    lines += [f"  removed   {v}" for v in result.removed]
    lines += [f"  unchanged {v}" for v in result.unchanged]
    if result.tag:
        lines.append(f"  tag       {result.tag}")
    if result.signed and key is not None:
        lines.append(f"  signed    by {key.public.fingerprint}: {', '.join(result.signed)}")
    elif key is None and not result.dry_run:
        lines.append("  unsigned  (publish with --sign KEY to sign the release)")
    lines += [f"  note: {n}" for n in result.notes]
    if result.operations:
        lines.append("  operations" + (" that would run:" if result.dry_run else ":"))
        lines += [f"    {op}" for op in result.operations]
    return "\n".join(lines)
