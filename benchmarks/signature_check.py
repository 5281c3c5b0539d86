"""What does checking a release signature cost a warm load?

A pure-Python variant is published to a LocalHub once signed (and once unsigned), loaded
once to warm the cache, then loaded again in fresh processes with and without a signing
policy for its org. Reported: the median time of the ``get_kernel`` call in a fresh
process (cache warm, pinned commit: no hub call at all), and, inside one process, the
parts of the signature path — reading the policy; the check answered from this process's
memory, from this user's HMAC'd disk record, or by verifying (the first verification in a
process loads cryptography's native library) — and a memoized ``get_kernel`` call with
and without a policy.

    .venv/bin/python benchmarks/signature_check.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kernelhub.formats.metadata import BackendInfo, Metadata, compute_digests, write_metadata
from kernelhub.formats.release_manifest import NAMESPACE
from kernelhub.signing.sshsig import load_signing_key
from kernelhub_builder.ship import LocalPublisher

FRESH_LOAD = """
import json, sys, time
import torch, kernelhub
t0 = time.perf_counter()
kernelhub.get_kernel(sys.argv[1], revision=sys.argv[2], hub=sys.argv[3])
print(json.dumps({"s": time.perf_counter() - t0}))
"""

PARTS = """
import json, os, sys, time
import torch
from kernelhub import api
from kernelhub.signing import policy as release_policy
from kernelhub.load.validators import SignatureValidator
from kernelhub.signing.trust import policy_for
repo, commit, hub = sys.argv[1:4]
def signed_sha256(res, policy):
    SignatureValidator(policy).on_resolution(res)
def best(fn, n=200):
    times = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return min(times)
res = api.resolve_kernel(repo, revision=commit, hub=hub)
out = {"policy_for": best(lambda: policy_for("acme"))}
policy = policy_for("acme")
t0 = time.perf_counter(); signed_sha256(res, policy)
out["first check in a new process (disk record)"] = time.perf_counter() - t0
out["check, in-process hit"] = best(lambda: signed_sha256(res, policy))
def disk_check():
    release_policy._verified.clear(); signed_sha256(res, policy)
out["check, disk record hit"] = best(disk_check, 50)
recall = release_policy.verified_marks.recall
release_policy.verified_marks.recall = lambda key: None
t0 = time.perf_counter(); disk_check()
out["first Ed25519 check (loads cryptography)"] = time.perf_counter() - t0
out["check, nothing cached (verify)"] = best(disk_check, 50)
release_policy.verified_marks.recall = recall
api.get_kernel(repo, revision=commit, hub=hub)
out["memoized get_kernel, policy"] = best(lambda: api.get_kernel(repo, revision=commit, hub=hub))
del os.environ["KERNELHUB_ALLOWED_SIGNERS"]
api.get_kernel(repo, revision=commit, hub=hub)
out["memoized get_kernel, no policy"] = best(lambda: api.get_kernel(repo, revision=commit, hub=hub))
print(json.dumps(out))
"""


def make_variant(dest: Path, files: int) -> None:
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text("from . import layers\nVALUE = 1\n")
    (dest / "layers").mkdir()
    (dest / "layers" / "__init__.py").write_text("X = 1\n")
    for i in range(files):
        (dest / f"part_{i}.py").write_text(f"# part {i}\n" + "x = 1\n" * 200)
    write_metadata(dest, Metadata(
        name="bench", id=f"_bench_universal_{os.urandom(5).hex()}", version=1,
        release="1.0.0", backend=BackendInfo("universal", []),
        digest_files=compute_digests(dest), provenance={}))


def run(code: str, env: dict[str, str], *args: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kh-sigbench-") as tmp:
        root = Path(tmp)
        private = Ed25519PrivateKey.generate()
        (root / "key").write_bytes(private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption()))
        key = load_signing_key(root / "key")
        (root / "allowed").write_text(f"acme {key.public.openssh()}\n")
        hub = LocalPublisher(root / "hub")
        commits = {}
        for repo, sign in (("acme/signed", True), ("acme/unsigned", False)):
            make_variant(root / "staged" / repo / "torch-universal", files=20)
            commits[repo] = hub.publish(
                repo, "v1", {"torch-universal": root / "staged" / repo / "torch-universal"},
                tag="v1.0.0", message="bench",
                sign=(lambda d: key.sign(d, NAMESPACE)) if sign else None).commit

        base = dict(os.environ, KERNELHUB_CACHE=str(root / "cache"),
                    KERNELHUB_CONFIG=str(root / "none.toml"), KERNELHUB_TRUSTED_ORGS="acme")
        for var in ("KERNELHUB_ALLOWED_SIGNERS", "KERNELHUB_REQUIRE_SIGNED",
                    "KERNELHUB_ALLOW_UNSIGNED"):
            base.pop(var, None)
        with_policy = dict(base, KERNELHUB_ALLOWED_SIGNERS=str(root / "allowed"))
        scenarios = [
            ("unsigned release, no policy", "acme/unsigned", base),
            ("signed release, no policy", "acme/signed", base),
            ("signed release, policy allows the key", "acme/signed", with_policy),
        ]
        print(f"warm get_kernel in a fresh process, pinned commit, median of {args.runs} "
              "(scenarios interleaved):")
        times: dict[str, list[float]] = {label: [] for label, _, _ in scenarios}
        for _label, repo, env in scenarios:
            run(FRESH_LOAD, env, repo, commits[repo], str(hub.root))  # warm the cache
        for _ in range(args.runs):
            for label, repo, env in scenarios:
                times[label].append(run(FRESH_LOAD, env, repo, commits[repo], str(hub.root))["s"])
        for label, samples in times.items():
            print(f"  {label:45s} {statistics.median(samples) * 1e3:8.2f} ms")
        parts = run(PARTS, with_policy, "acme/signed", commits["acme/signed"], str(hub.root))
        print("inside one process (best of many):")
        for name, seconds in parts.items():
            print(f"  {name:45s} {seconds * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
