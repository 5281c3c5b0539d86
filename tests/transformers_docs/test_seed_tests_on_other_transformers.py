"""The seed tests (tests/seeds, SEEDS.md) run in this session on the installed
Transformers; here they run again on the previous release, 5.24, in a child pytest whose
path starts with the 5.24 overlay (``ci/setup-transformers``). The child reuses this
session's built and published hub (``KERNELHUB_E2E_PUBLISHED``), so nothing is compiled
twice.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e import PUBLISHED, REPO, Workspace
from transformers_docs.ranges import OLDER, environment, transformers_version

pytest.importorskip("transformers")


@pytest.mark.slow
def test_seed_tests_pass_on_the_previous_transformers(published: Workspace):
    env = published.env()
    env.update(environment("5.24"), **{PUBLISHED: str(published.root)})
    assert transformers_version(env) == OLDER
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/seeds", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, text=True, capture_output=True)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    print(f"seed tests on transformers {OLDER}: {summary}")
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary, summary
