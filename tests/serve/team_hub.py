"""A team's hub for the sign-in, search and download tests: a public kernel and a private
one, each one pure-Python variant, released as ``v1.0.0``."""

from __future__ import annotations

from pathlib import Path

from served import WRITE_TOKEN

SECRET = "acme/secret"
PUBLIC = "acme/public"


def publish_team_kernels(hub: Path, work: Path, url: str) -> None:
    """acme/public and acme/secret (made private through the served Hub API: a LocalHub
    has no private repositories of its own), one pure-Python variant each, released."""
    from huggingface_hub import HfApi
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import make_variant

    HfApi(endpoint=url, token=WRITE_TOKEN).create_repo(SECRET, repo_type="kernel", private=True)
    for repo_id in (PUBLIC, SECRET):
        variant = work / repo_id / "torch-universal"
        make_variant(variant, name=repo_id.split("/")[1])
        LocalPublisher(hub).publish(repo_id, "v1", {"torch-universal": variant}, tag="v1.0.0",
                                    message="release 1.0.0")
