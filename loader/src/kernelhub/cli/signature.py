"""``kernelhub verify-signature``: check a published kernel's signatures, every variant.

Both kinds a release can carry: kernelhub's SSH release signature (``release.json.sig``,
one per commit) and the ecosystem's sigstore bundle per variant (``metadata.json.sigstore``).
Each variant is fetched (which checks every file against ``metadata.json``'s digest) and
its bundle verified in full, offline, never answered from the verification cache. The
sigstore signers are the org's policy (``[signing.sigstore.orgs]``), or the ecosystem's
own build workflows where the config names none.
"""

from __future__ import annotations

import argparse

from .. import api
from ..cache import KernelCache
from ..errors import KernelHubError, SignatureError
from ..formats.metadata import read_metadata_bytes
from ..printable import printable
from ..signing.sigstore import (
    BUNDLE_FILE,
    PRESETS,
    SigstorePolicy,
    configured_trusted_root,
    sigstore_policy_for,
    verify_bundle,
)
from .args import add_target_args
from .text import error_line


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = sub.add_parser(
        "verify-signature", help="verify a kernel's release and sigstore signatures")
    verify.add_argument("repo", help="org/name")
    verify.add_argument("version", nargs="?",
                        help="kernel version (int major, tag, branch, specifier or commit)")
    verify.add_argument("--all-variants", action="store_true",
                        help="every variant at the commit, not only the one this system loads")
    verify.add_argument("--filter-unsigned", action="store_true",
                        help="skip variants without a sigstore signature instead of failing")
    verify.add_argument("--signers", choices=sorted(PRESETS),
                        help="check sigstore signatures against this preset, not the config")
    add_target_args(verify, spec=False)
    verify.add_argument("--revision", help="branch, tag or commit instead of a version")
    verify.set_defaults(func=_verify)


def _policy(org: str, preset: str | None) -> tuple[SigstorePolicy, str]:
    configured = None if preset else sigstore_policy_for(org)
    if configured is not None:
        return configured, f"the policy for {org!r} in the config"
    name = preset or "huggingface"
    return (SigstorePolicy(org, PRESETS[name], "refuse", configured_trusted_root()),
            f"the {name!r} signers")


def _verify(args: argparse.Namespace) -> None:
    resolution = api.resolve_kernel(args.repo, args.version, args.revision, hub=args.hub,
                                    backend=args.backend)
    print(printable(f"{args.repo} at {resolution.ref} ({resolution.commit[:12]}) on "
                    f"{resolution.hub.key}"))
    print(f"release: {printable(api.describe_signature(resolution))}")
    names = resolution.variants if args.all_variants else [resolution.variant]
    policy, which = _policy(args.repo.partition("/")[0], args.signers)
    print(f"sigstore: checked against {which}")
    cache, failed = KernelCache(), []
    for name in sorted(names):
        try:
            path = cache.install(resolution.hub, args.repo, resolution.commit, name)
        except KernelHubError as e:
            print(f"  FAIL {printable(name)}: {error_line(e)}")
            failed.append(name)
            continue
        try:
            bundle = (path / BUNDLE_FILE).read_bytes()
        except FileNotFoundError:
            if not args.filter_unsigned:
                print(f"  FAIL {printable(name)}: not sigstore-signed (no {BUNDLE_FILE})")
                failed.append(name)
            continue
        try:
            signer = verify_bundle(read_metadata_bytes(path), bundle, policy, name, cached=False)
        except SignatureError as e:
            print(f"  FAIL {printable(name)}: {error_line(e)}")
            failed.append(name)
            continue
        print(f"  ok   {printable(name)}: signed by {printable(signer)}; every file matches "
              "the signed digest")
    if failed:
        raise KernelHubError(f"{len(failed)} of {len(names)} variants failed verification")
