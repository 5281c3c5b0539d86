"""Publish benchmark results to the kernel's hub repository (layout:
:mod:`kernelhub.benchmark.results`): one commit on the results branch adding or replacing
a build's files, never touching a version branch or a release tag. ``kernelhub benchmark
--publish`` reaches it as the optional command ``kernelhub publish-benchmark`` (:func:`main`,
registered in ``kernelhub.commands``): the loader never imports the builder.

On a LocalHub the commit is made with git plumbing and the branch moved with a
compare-and-swap (retried on top of a concurrent writer's commit, as variant publishing
does); on a Hub-API server it is one ``create_commit`` to the branch, made first if the
repository has none.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Sequence

from kernelhub.benchmark.results import RESULTS_BRANCH, machine_slug, result_dir
from kernelhub.errors import KernelHubError, PublishConflictError
from kernelhub.hub.git import ZERO_OID, IndexEntry, RefUpdate

from .base import HubPublisher
from .local import LocalPublisher

_ATTEMPTS = 8


def publish_results(publisher: HubPublisher, repo_id: str, files: dict[str, bytes],
                    message: str) -> str:
    """Commit ``files`` (path in repo → bytes) on :data:`RESULTS_BRANCH`; the new commit."""
    if isinstance(publisher, LocalPublisher):
        return _local(publisher, repo_id, files, message)
    from .hf import HfPublisher

    if isinstance(publisher, HfPublisher):
        return _hub_api(publisher, repo_id, files, message)
    raise TypeError(f"cannot publish benchmark results to {publisher!r}")


def _local(publisher: LocalPublisher, repo_id: str, files: dict[str, bytes], message: str) -> str:
    repo = publisher.open_repo(repo_id)
    entries = [IndexEntry("100644", repo.hash_blob(data), path) for path, data in sorted(files.items())]
    ref = f"refs/heads/{RESULTS_BRANCH}"
    for attempt in range(_ATTEMPTS):
        head = repo.resolve_commit(ref)
        tree = repo.write_tree(repo.tree_of(head) if head else None, [], entries)
        commit = repo.commit_tree(tree, head, message)
        if repo.update_refs([RefUpdate(ref, commit, head or ZERO_OID)]) is None:
            return commit
        time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
    raise PublishConflictError(f"could not publish benchmark results to {repo_id}: branch "
                               f"{RESULTS_BRANCH} kept moving; nothing was changed, try again")


def _hub_api(publisher: object, repo_id: str, files: dict[str, bytes], message: str) -> str:
    from huggingface_hub import CommitOperationAdd

    from .hf import HfPublisher

    assert isinstance(publisher, HfPublisher)
    api, repo_type = publisher.api, publisher.type_of(repo_id)
    api.create_branch(repo_id, branch=RESULTS_BRANCH, repo_type=repo_type, exist_ok=True)
    info = api.create_commit(
        repo_id, [CommitOperationAdd(path, data) for path, data in sorted(files.items())],
        commit_message=message, revision=RESULTS_BRANCH, repo_type=repo_type)
    return str(info.oid)


def main(argv: Sequence[str]) -> int:
    """``kernelhub publish-benchmark REPO COMMIT VARIANT RESULTS.json [PLOT.png] --hub HUB``:
    commit a benchmark run's document (and plot) under the build's results directory."""
    from kernelhub.cli.text import ArgumentParser, error_line
    from kernelhub.user_files import cli_path, read_bounded

    parser = ArgumentParser(prog="kernelhub publish-benchmark")
    parser.add_argument("repo")
    parser.add_argument("commit")
    parser.add_argument("variant")
    parser.add_argument("results", type=cli_path)
    parser.add_argument("plot", type=cli_path, nargs="?")
    parser.add_argument("--hub", help="hub path, URL or 'hf' (default: $KERNELHUB_HUB)")
    args = parser.parse_args(list(argv))
    from .select import open_publisher

    try:
        document = read_bounded(args.results)
        data = json.loads(document)
        machine = data.get("machineInfo") if isinstance(data, dict) else None
        if not isinstance(machine, dict):
            raise KernelHubError(f"{args.results} is not a benchmark document (no machineInfo)")
        base = f"{result_dir(args.commit, args.variant)}/{machine_slug(machine)}"
        files = {f"{base}.json": document}
        if args.plot is not None:
            files[f"{base}.png"] = read_bounded(args.plot)
        commit = publish_results(open_publisher(args.hub), args.repo, files,
                                 f"benchmark {args.variant} at {args.commit[:12]}")
    except (KernelHubError, OSError, ValueError, RecursionError) as e:
        print(f"kernelhub publish-benchmark: error: {error_line(e)}", file=sys.stderr)
        return 1
    print(json.dumps({"published": sorted(files), "branch": RESULTS_BRANCH, "commit": commit}))
    return 0
