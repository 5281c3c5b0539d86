"""The ecosystem's sigstore signatures: a bundle per variant, checked by per-org policy.

The kernel ecosystem's CI signs each variant's ``metadata.json`` with sigstore (keyless:
a short-lived Fulcio certificate for the workflow's OIDC identity, logged in Rekor) and
publishes the bundle next to it as ``build/<variant>/metadata.json.sigstore``. The
metadata's digest covers every other file, so a verified bundle vouches for the whole
variant. The bundle is not in the digest (it is made after the digest) and is never
imported.

Verification is offline: the bundle carries the certificate, the transparency-log entry
with its inclusion proof, signed checkpoint and signed entry timestamp, and the
``sigstore`` library checks them against a trust root on disk — the Sigstore public-good
root that the installed sigstore package ships, or one the user configures. No request is
made at load.

Policy, per org, next to the SSH release signatures (docs/signing.md)::

    [signing.sigstore]
    trusted-root = "trusted_root.json"       # optional; default: the root sigstore ships

    [signing.sigstore.orgs.kernels-community]
    signers = "huggingface"                  # the ecosystem's own build workflows
    unsigned = "warn"                        # refuse (default) | warn | allow

    [signing.sigstore.orgs.acme]             # org names or patterns, as [signing.keys]
    signers = [{issuer = "https://token.actions.githubusercontent.com",
                repository = "acme/kernels",
                workflows = ["https://github.com/acme/kernels/.github/workflows/build.yaml@refs/heads/main"]},
               {issuer = "https://accounts.google.com", identity = "release@acme.dev"}]

An org without such a table is not checked (nothing is read, sigstore is never imported).
With one, a bundle must verify and name an allowed signer, else the variant is refused
(:class:`~kernelhub.errors.SignatureError`); an unsigned variant is refused, warned about
once, or allowed as ``unsigned`` says (``[signing] allow-unsigned`` allows it too).
Successful checks are remembered by content (metadata, bundle, trust root, policy) in the
process and, under the user's HMAC key, on disk (:mod:`kernelhub.signing.verified_marks`).
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.signing.trust"}  # PEP 810: imported when first used

import hashlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .. import settings
from ..errors import KernelHubError, SignatureError
from ..formats.metadata import SIGNATURE_SIDECARS
from ..lazy_names import deferred
from ..value_types import Record
from . import verified_marks
from .trust import matches

if TYPE_CHECKING:
    from importlib import resources as importlib_resources

    from cryptography import x509
    from sigstore import errors as sigstore_errors
    from sigstore import models as sigstore_models
    from sigstore import verify as sigstore_verify
    from sigstore._internal import tuf as sigstore_tuf
    from sigstore.models import TrustedRoot
    from sigstore.verify import policy as sigstore_policy
    from sigstore.verify.policy import VerificationPolicy
else:  # sigstore is the optional ``sigstore`` extra, imported only where a policy applies
    importlib_resources = deferred("importlib.resources")
    x509 = deferred("cryptography.x509")
    sigstore_errors = deferred("sigstore.errors")
    sigstore_models = deferred("sigstore.models")
    sigstore_verify = deferred("sigstore.verify")
    sigstore_tuf = deferred("sigstore._internal.tuf")
    sigstore_policy = deferred("sigstore.verify.policy")

BUNDLE_FILE = SIGNATURE_SIDECARS[0]
"""The sigstore bundle of a variant's metadata.json, next to it."""

GITHUB_ACTIONS = "https://token.actions.githubusercontent.com"
"""The OIDC issuer of GitHub Actions workflows."""

UNSIGNED_RULES = ("refuse", "warn", "allow")


class SigstoreSigner(Record, frozen=True):
    """One identity allowed to sign: a CI workflow of a repository, or an identity (the
    certificate's subject alternative name) at an OIDC issuer."""

    issuer: str
    repository: str | None = None
    """``owner/name`` on GitHub: the certificate's source repository."""
    workflows: tuple[str, ...] = ()
    """Build signer URIs (``https://github.com/<repo>/.github/workflows/<f>.yaml@<ref>``)."""
    identity: str | None = None

    def describe(self) -> str:
        who = self.identity or (f"{self.repository} workflows {', '.join(self.workflows)}"
                                if self.workflows else self.repository or "any identity")
        return f"{who} (issuer {self.issuer})"


def _github(repo: str, *workflows: str) -> SigstoreSigner:
    base = f"https://github.com/{repo}/.github/workflows"
    return SigstoreSigner(GITHUB_ACTIONS, repo,
                          tuple(f"{base}/{w}@refs/heads/main" for w in workflows))


PRESETS: dict[str, tuple[SigstoreSigner, ...]] = {
    "huggingface": (
        _github("huggingface/kernels-community", "build.yaml", "build-mac.yaml",
                "build-windows.yaml", "sign-old-builds.yaml"),
        _github("huggingface/kernels-community-rs", "build.yaml"),
    ),
}
"""Named signer sets: ``huggingface`` is who signs the ecosystem's community kernels
(the build workflows of huggingface/kernels-community and kernels-community-rs)."""


class SigstorePolicy(Record, frozen=True):
    """The sigstore policy that applies to one org's variants."""

    org: str
    signers: tuple[SigstoreSigner, ...]
    unsigned: str = "refuse"
    trusted_root: Path | None = None
    """None: the Sigstore public-good root shipped with the installed sigstore package."""

    @property
    def token(self) -> bytes:
        """Identifies the policy's content (part of the verification-cache key)."""
        return hashlib.sha256(repr((self.signers, str(self.trusted_root))).encode()).digest()


def _strings(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise KernelHubError(f"{settings.config_path()}: {where} must be a string or a list of strings")


def _signer(entry: object, where: str) -> SigstoreSigner:
    if not isinstance(entry, dict):
        raise KernelHubError(f"{settings.config_path()}: {where}: each signer is a table "
                             '{issuer = "...", repository = "...", workflows = [...]} or '
                             '{issuer = "...", identity = "..."}')
    unknown = set(entry) - {"issuer", "repository", "workflows", "identity"}
    issuer = entry.get("issuer", GITHUB_ACTIONS)
    repository, identity = entry.get("repository"), entry.get("identity")
    if unknown or not isinstance(issuer, str) or not (
            isinstance(repository, str) or isinstance(identity, str)):
        raise KernelHubError(
            f"{settings.config_path()}: {where}: a signer names an issuer and a repository "
            f"(with workflows) or an identity{f'; unknown keys {sorted(unknown)}' if unknown else ''}")
    workflows = _strings(entry.get("workflows", []), f"{where} workflows")
    return SigstoreSigner(issuer, repository if isinstance(repository, str) else None, workflows,
                          identity if isinstance(identity, str) else None)


def configured_trusted_root() -> Path | None:
    """``[signing.sigstore] trusted-root`` (relative to the config file), or None."""
    root = (settings.sigstore_section() or {}).get("trusted-root")
    if root is not None and not isinstance(root, str):
        raise KernelHubError(f"{settings.config_path()}: [signing.sigstore] trusted-root must "
                             "be a path")
    return settings.config_path().parent / Path(root).expanduser() if root else None


def sigstore_policy_for(org: str) -> SigstorePolicy | None:
    """The sigstore policy for ``org`` from ``[signing.sigstore]``, or None when it has none."""
    section = settings.sigstore_section()
    if section is None:
        return None
    orgs = section.get("orgs", {})
    if not isinstance(orgs, dict):
        raise KernelHubError(f"{settings.config_path()}: [signing.sigstore.orgs] must be a table")
    found = [(pattern, rules) for pattern, rules in sorted(orgs.items()) if matches(org, pattern)]
    if not found:
        return None
    pattern, rules = found[0]
    where = f"[signing.sigstore.orgs.{pattern}]"
    if not isinstance(rules, dict):
        raise KernelHubError(f"{settings.config_path()}: {where} must be a table")
    raw = rules.get("signers")
    if isinstance(raw, str):
        if raw not in PRESETS:
            raise KernelHubError(f"{settings.config_path()}: {where} signers: unknown preset "
                                 f"{raw!r}; presets: {', '.join(PRESETS)}")
        signers = PRESETS[raw]
    elif isinstance(raw, list) and raw:
        signers = tuple(_signer(entry, f"{where} signers") for entry in raw)
    else:
        raise KernelHubError(f"{settings.config_path()}: {where} needs signers: a preset name "
                             f"({', '.join(PRESETS)}) or a list of signer tables")
    unsigned = rules.get("unsigned", "refuse")
    if unsigned not in UNSIGNED_RULES:
        raise KernelHubError(f"{settings.config_path()}: {where} unsigned must be one of "
                             f"{', '.join(UNSIGNED_RULES)}")
    if matches(org, settings.signing().allow_unsigned):
        unsigned = "allow"
    return SigstorePolicy(org, tuple(signers), unsigned, configured_trusted_root())


# -- verification -----------------------------------------------------------------------

_verified: dict[bytes, str] = {}
"""Content key → signer identity (successes only)."""
_warned: set[tuple[str, str]] = set()


def _import_sigstore() -> None:
    """Import sigstore, an optional package: where it is missing, say how to install it
    rather than fail at the first of its names."""
    try:
        sigstore_verify.Verifier  # noqa: B018 - the first access imports sigstore
    except ImportError:
        raise _sigstore_missing() from None


def _sigstore_missing() -> SignatureError:
    return SignatureError(
        "a sigstore signing policy applies but the sigstore package is not installed; "
        "install it with: pip install 'kernelhub[sigstore]'")


def shipped_trusted_root() -> Path:
    """The Sigstore public-good trust root as the installed sigstore package ships it."""
    _import_sigstore()
    store = importlib_resources.files("sigstore._store").joinpath(
        quote(sigstore_tuf.DEFAULT_TUF_URL, safe=""))
    return Path(str(store.joinpath("trusted_root.json")))


def _trusted_root(policy: SigstorePolicy) -> tuple[TrustedRoot, bytes]:
    try:  # before reading the root: a missing sigstore is no parse error
        trusted_root = sigstore_models.TrustedRoot
    except ImportError:
        raise _sigstore_missing() from None
    path = policy.trusted_root or shipped_trusted_root()
    try:
        raw = path.read_bytes()
        return trusted_root.from_file(str(path)), raw
    except OSError as e:
        raise SignatureError(f"cannot read the sigstore trust root {path}: {e.strerror or e}; "
                             "fix [signing.sigstore] trusted-root") from None
    except Exception as e:  # the library's own parse errors have no common base
        raise SignatureError(f"{path} is not a sigstore trusted root ({e}); fix "
                             "[signing.sigstore] trusted-root") from None


def _verification_policy(signers: tuple[SigstoreSigner, ...]) -> VerificationPolicy:
    p = sigstore_policy
    alternatives: list[VerificationPolicy] = []
    for signer in signers:
        rules: list[VerificationPolicy] = []
        if signer.identity is not None:
            rules.append(p.Identity(identity=signer.identity, issuer=signer.issuer))
        else:
            rules += [p.OIDCIssuer(signer.issuer), p.OIDCIssuerV2(signer.issuer)]
        if signer.repository is not None:
            rules.append(p.OIDCSourceRepositoryURI(f"https://github.com/{signer.repository}"))
        if signer.workflows:
            rules.append(p.AnyOf([p.OIDCBuildSignerURI(w) for w in signer.workflows]))
        alternatives.append(p.AllOf(rules))
    return p.AnyOf(alternatives)


def _content_key(metadata: bytes, bundle: bytes, root: bytes, policy: SigstorePolicy) -> bytes:
    h = hashlib.sha256(b"kernelhub-sigstore/1")
    for part in (metadata, bundle, root, policy.token):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _signer_identity(certificate: Any) -> str:
    """The build signer URI (a workflow) if the certificate has one, else its first SAN."""
    oid = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
    try:
        value = certificate.extensions.get_extension_for_oid(oid).value.value
        return str(value[2:].decode("utf-8"))  # a short DER UTF8String: tag, length, text
    except (x509.ExtensionNotFound, UnicodeDecodeError, AttributeError):
        pass
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "an unnamed signer"
    names = [str(v) for v in san.get_values_for_type(x509.UniformResourceIdentifier)]
    names += [str(v) for v in san.get_values_for_type(x509.RFC822Name)]
    return names[0] if names else "an unnamed signer"


def verify_bundle(metadata: bytes, bundle: bytes, policy: SigstorePolicy, where: str,
                  cached: bool = True) -> str:
    """Verify ``bundle`` over ``metadata`` for ``policy``; the signer's identity, or
    SignatureError saying what failed. Offline: the trust root is a file. ``cached=False``
    verifies in full even where this content verified before (and remembers it again)."""
    root, root_bytes = _trusted_root(policy)
    key = _content_key(metadata, bundle, root_bytes, policy)
    if cached and (signer := _verified.get(key) or verified_marks.recall(key)) is not None:
        _verified[key] = signer
        return signer
    _import_sigstore()
    try:
        parsed = sigstore_models.Bundle.from_json(bundle)
    except (sigstore_errors.Error, ValueError) as e:
        raise SignatureError(f"{where}: {BUNDLE_FILE} is not a valid sigstore bundle "
                             f"({_one_line(e)}); its integrity cannot be checked") from None
    try:
        sigstore_verify.Verifier(trusted_root=root).verify_artifact(
            metadata, parsed, _verification_policy(policy.signers))
    except sigstore_errors.Error as e:
        raise SignatureError(
            f"{where}: the sigstore signature does not verify for {policy.org!r}'s policy "
            f"({_one_line(e)}); allowed signers: "
            f"{'; '.join(s.describe() for s in policy.signers)}") from None
    signer = _signer_identity(parsed.signing_certificate)
    _verified[key] = signer
    verified_marks.remember(key, signer)
    return signer


def check_sigstore(repo_id: str, variant: str, metadata: bytes, bundle: bytes | None,
                   policy: SigstorePolicy | None = None) -> str | None:
    """Apply the org's sigstore policy to one variant: the signer's identity when a bundle
    verified, None when no policy applies or an unsigned variant is let through (with one
    warning per variant where the policy says ``warn``); SignatureError otherwise."""
    policy = policy or sigstore_policy_for(repo_id.partition("/")[0])
    if policy is None:
        return None
    where = f"{repo_id} {variant}"
    if bundle is None:
        if policy.unsigned == "refuse":
            raise SignatureError(
                f"{where} has no sigstore signature ({BUNDLE_FILE}) and the policy for "
                f"{policy.org!r} requires one; set unsigned = \"warn\" under "
                f"[signing.sigstore.orgs.{policy.org}] in {settings.config_path()} to load it")
        if policy.unsigned == "warn" and (repo_id, variant) not in _warned:
            _warned.add((repo_id, variant))
            warnings.warn(f"{where} is not sigstore-signed, so its integrity cannot be "
                          f"verified beyond the hub's own content", stacklevel=3)
        return None
    return verify_bundle(metadata, bundle, policy, where)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
