"""Whom we trust to run code: which organisations may load at all, and whose signature
an organisation's releases need.

A kernel is a Python package plus native code; loading it runs both with the user's
privileges. The checks therefore sit on every path that loads from a hub, including
warm cache loads: a cached copy is no more trusted than the hub it came from. Both
answers — is this org trusted (:func:`check_trusted`), and which keys must have signed
its release (:func:`policy_for`) — are read from the same user configuration, so they
live in one module; verifying a signature against the policy is
:mod:`kernelhub.signing.policy`'s job.

**Trusted organisations.** Remote code is refused unless its org is trusted (the
default org, the config file, ``$KERNELHUB_TRUSTED_ORGS``, or the hub's own list) or the
caller passes ``trust_remote_code=True``.

**Release-signing policy, per org.** Keys come from OpenSSH ``allowed_signers`` files
(the file ``ssh-keygen -Y verify -f`` and git's ``gpg.ssh.allowedSignersFile`` read; the
principals are org names) and from ``[signing.keys]`` in the config file; see
:class:`kernelhub.settings.SigningSettings`. Two keys for one org is how a key is
rotated: both verify until the old one is removed. The rules:

* an org with allowed keys refuses unsigned releases, unless it is listed in
  ``allow-unsigned`` (a signed release must still verify with one of its keys);
* an org listed in ``require`` (or matched by ``"*"``) refuses unsigned releases, and
  with no allowed key it refuses everything, saying how to add one;
* an org with neither loads as before — no signature is looked at, no request is made —
  which is how Hub repositories that were never signed keep working.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.hub.base"}  # PEP 810: imported when first used

import fnmatch
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from .. import settings, user_files
from ..errors import FlagTypeError, KernelHubError, SigningKeyError, TrustError
from ..hub.base import Hub, TrustAskingHub
from ..value_types import Record

if TYPE_CHECKING:
    from .sshsig import PublicKey

# -- trusted organisations ----------------------------------------------------------

DEFAULT_TRUSTED_ORGS: frozenset[str] = frozenset({"kernels-community"})


def user_trusted_orgs() -> frozenset[str]:
    """The default org plus the user's config file and ``$KERNELHUB_TRUSTED_ORGS``."""
    return DEFAULT_TRUSTED_ORGS | settings.trusted_orgs()


def is_trusted(repo_id: str, hub: Hub | None) -> bool:
    """Whether ``repo_id``'s organisation is trusted (asks the hub only if needed)."""
    org = repo_id.partition("/")[0]
    if org in user_trusted_orgs():
        return True
    if hub is None:
        return False
    if isinstance(hub, TrustAskingHub):  # a Hub-API server, per org
        return bool(hub.trusts(org))
    return org in hub.trusted_orgs()


def served_trusted_orgs(declared: frozenset[str]) -> frozenset[str]:
    """What a hub server answers to "is this org a trusted publisher?": kernelhub's
    default (``kernels-community``, as the Hugging Face Hub answers for it) plus the orgs
    its operator ``declared`` — so the loader, ``kernelhub serve``'s endpoint and the
    ecosystem's loader reading that endpoint give one answer out of the box."""
    return DEFAULT_TRUSTED_ORGS | declared


def require_bool(value: object, name: str) -> bool:
    """``value`` if it is a real bool, else :class:`FlagTypeError` naming the flag.

    Opt-ins decide whether foreign code runs, so ``"false"``, ``0`` or ``None`` must not
    be read through ``bool()``: a truthy string would silently say yes.
    """
    if isinstance(value, bool):
        return value
    raise FlagTypeError(
        f"{name} must be True or False, not {type(value).__name__} {value!r}; pass a bool"
    )


Vouch = bool | frozenset[str]
"""What the caller vouched for: ``True`` every repository of the load (the kernel and the
dependencies it declares), a set of repository ids only those (the ecosystem's
allow-list form), ``False`` none. A load's dependencies are judged by the same value,
so an allow-list naming a kernel never extends to what that kernel pulls in."""


def vouch(value: object, name: str = "trust_remote_code") -> Vouch:
    """``value`` checked into a :data:`Vouch`: a real bool, or a list (tuple, set) of
    repository ids; anything else is :class:`FlagTypeError` naming the flag."""
    if isinstance(value, bool):
        return value
    if isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str)
                                                                  for v in value):
        return frozenset(value)
    raise FlagTypeError(
        f"{name} must be True, False or a list of repository ids, not "
        f"{type(value).__name__} {value!r}"
    )


def vouches_for(vouched: Vouch, repo_id: str) -> bool:
    """Whether ``vouched`` (see :data:`Vouch`) covers ``repo_id``."""
    return vouched if isinstance(vouched, bool) else repo_id in vouched


def trust_flag(repo_id: str, value: object, name: str = "trust_remote_code") -> bool:
    """The ecosystem's ``trust_remote_code`` for one repository: a bool, or a list of
    repository ids trusted besides the trusted organisations (its allow-list form)."""
    return vouches_for(vouch(value, name), repo_id)


def check_trusted(repo_id: str, hub: Hub | None, trust_remote_code: Vouch) -> None:
    """Raise :class:`TrustError` unless the caller (``trust_remote_code``, a
    :data:`Vouch`) or the configuration trusts ``repo_id``."""
    if vouches_for(vouch(trust_remote_code), repo_id) or is_trusted(repo_id, hub):
        return
    org = repo_id.partition("/")[0]
    raise TrustError(
        f"refusing to load {repo_id}: loading a kernel runs its Python and native code, and "
        f"organisation {org!r} is not trusted. If you trust it, pass trust_remote_code=True "
        f"(or list {repo_id!r} in it), or add it to KERNELHUB_TRUSTED_ORGS "
        f"(comma-separated) or to [trust] orgs in {settings.config_path()}."
    )


# -- release-signing policy --------------------------------------------------------

_UNSUPPORTED_OPTIONS = ("cert-authority", "valid-after", "valid-before")


class OrgPolicy(Record, frozen=True):
    """The signing policy that applies to one org's releases."""

    org: str
    keys: tuple[PublicKey, ...]
    refuse_unsigned: bool

    @property
    def active(self) -> bool:
        """Whether loads from this org look at release signatures at all."""
        return bool(self.keys) or self.refuse_unsigned

    @property
    def token(self) -> bytes:
        """Identifies the policy's content (for memo and verification-cache keys)."""
        h = hashlib.sha256(b"refuse" if self.refuse_unsigned else b"allow")
        for blob in sorted(k.blob for k in self.keys):
            h.update(blob)
        return h.digest()

    def fingerprints(self) -> str:
        return ", ".join(k.fingerprint for k in self.keys) or "none"


def matches(name: str, patterns: str | frozenset[str] | set[str]) -> bool:
    """OpenSSH pattern-list matching: ``*``/``?`` wildcards, ``!pattern`` excludes."""
    items = patterns.split(",") if isinstance(patterns, str) else list(patterns)
    hit = False
    for raw in items:
        pattern = raw.strip()
        if pattern.startswith("!"):
            if fnmatch.fnmatchcase(name, pattern[1:]):
                return False
        elif pattern and fnmatch.fnmatchcase(name, pattern):
            hit = True
    return hit


def _split(text: str, comma: bool = False) -> list[str]:
    """Split on whitespace (or on commas) outside double quotes, as allowed_signers quotes."""
    out: list[str] = []
    current, quoted = "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if not quoted and (ch == "," if comma else ch.isspace()):
            out.append(current)
            current = ""
        else:
            current += ch
    return [part for part in [*out, current] if part]


def _options(text: str, where: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for option in _split(text, comma=True):
        name, _, value = option.partition("=")
        found[name.lower()] = value.strip('"')
    for name in _UNSUPPORTED_OPTIONS:
        if name in found:
            raise SigningKeyError(
                f"{where}: option {name!r} is not supported for release signing keys; "
                "list plain keys (rotate by listing both keys, then removing the old one)"
            )
    return found


def allowed_signers(path: Path, org: str) -> list[PublicKey]:
    """The Ed25519 keys ``path`` allows to sign ``org``'s releases.

    Lines for other principals, other namespaces, or other key types (an RSA key a team
    uses for git) are skipped: they can never sign a kernelhub release.
    """
    from ..formats import release_manifest
    from . import sshsig
    try:
        text = user_files.read_bounded(path).decode("utf-8")
    except UnicodeDecodeError:
        raise SigningKeyError(f"allowed signers file {path} is not UTF-8 text") from None
    except OSError as e:
        raise KernelHubError(
            f"cannot read allowed signers file {path}: {e.strerror or e}; fix "
            "KERNELHUB_ALLOWED_SIGNERS or [signing] allowed-signers"
        ) from None
    keys: list[PublicKey] = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        fields = _split(line.strip())
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 3:
            raise SigningKeyError(f"{where}: expected 'principals [options] key-type key'")
        options: dict[str, str] = {}
        rest = fields[1:]
        if not rest[0].startswith(("ssh-", "ecdsa-", "sk-")):
            options, rest = _options(rest[0], where), rest[1:]
        if not matches(org, fields[0].strip('"')):
            continue
        if "namespaces" in options and not matches(release_manifest.NAMESPACE,
                                                   options["namespaces"]):
            continue
        if not rest or rest[0] != sshsig.KEY_TYPE:
            continue
        keys.append(sshsig.parse_public_key(" ".join(rest), where))
    return keys


def policy_for(org: str) -> OrgPolicy:
    """The policy for ``org`` from the config file and the environment, read now."""
    config = settings.signing()
    keys: list[PublicKey] = []
    for path in config.allowed_signers_files:
        keys += allowed_signers(path, org)
    if config.keys:
        from . import sshsig
        keys += [
            sshsig.parse_public_key(line, f"{settings.config_path()}: [signing.keys] {name}")
            for name, line in config.keys
            if matches(org, name)
        ]
    unique = tuple({k.blob: k for k in keys}.values())
    if matches(org, config.allow_unsigned):
        refuse = False
    else:
        refuse = bool(unique) or matches(org, config.require)
    return OrgPolicy(org, unique, refuse)
