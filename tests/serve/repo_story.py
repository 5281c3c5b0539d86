"""A kernel repository with a history worth reading, for the repository page tests: release
v1.0.0 (a CPU and a universal variant), then a README, docs and odd files committed
through the served hub's Hub API, then release v1.1.0 (the CPU variant rebuilt, the
universal one dropped, a CUDA one added)."""

from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from kh_doubles import make_variant
from served import WRITE_TOKEN

REPO_ID = "acme/demo"
CPU, UNIVERSAL, CUDA = "torch213-cxx11-cpu-x86_64-linux", "torch-universal", "torch-cuda"
README = """---
license: apache-2.0
tags: [kernel]
---
# Demo kernel

Fast *activations*. See [the usage notes](docs/usage.md) and [section](#usage).

| op | speed-up |
|---|---|
| silu | 2.1x |

<details><summary>More</summary>Hidden detail.</details>
"""
BACKENDS = {CPU: "cpu", UNIVERSAL: "universal", CUDA: "cuda"}
HOSTILE_TEXT = "<script>window.pwned = 'file'</script>\n& <b>not bold</b>\n"
BINARY = bytes(range(256)) * 8


def publish_release(hub: Path, work: Path, release: str, variants: dict[str, str],
                    remove: tuple[str, ...] = ()) -> str:
    """``variants`` (name → its ``__init__.py``) published to branch v1, tagged
    ``v<release>``; returns the commit."""
    from kernelhub_builder.ship import LocalPublisher

    dirs = {}
    for name, init in variants.items():
        dest = dirs[name] = work / release / name
        make_variant(dest, name="demo", init=init, backend=BACKENDS[name])
        meta = json.loads((dest / "metadata.json").read_text())
        meta["release"] = release  # metadata.json is outside its own digest
        (dest / "metadata.json").write_text(json.dumps(meta))
    result = LocalPublisher(hub).publish(REPO_ID, "v1", dirs, tag=f"v{release}",
                                         message=f"release {release}", remove=remove)
    return str(result.commit)


def publish_story(hub: Path, work: Path, url: str) -> dict[str, str]:
    """The repository above; returns the commit of each step."""
    first = publish_release(hub, work, "1.0.0", {CPU: "VALUE = 1\n", UNIVERSAL: "VALUE = 1\n"})
    api = HfApi(endpoint=url, token=WRITE_TOKEN)
    docs = api.create_commit(
        REPO_ID, repo_type="kernel", revision="v1", commit_message="Docs and odd files\n\n"
        "A README, usage notes, a file that looks like HTML and a binary one.",
        operations=[CommitOperationAdd("README.md", README.encode()),
                    CommitOperationAdd("docs/usage.md", b"# Usage\n\nCall `silu`.\n"),
                    CommitOperationAdd("docs/page.html", HOSTILE_TEXT.encode()),
                    CommitOperationAdd("data/table.bin", BINARY)])
    second = publish_release(hub, work, "1.1.0", {CPU: "VALUE = 2\n", CUDA: "VALUE = 3\n"},
                             remove=(UNIVERSAL,))
    return {"v1.0.0": first, "docs": str(docs.oid), "v1.1.0": second}
