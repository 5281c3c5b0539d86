"""Fixtures of the SEEDS.md end-to-end tests: the published hub, tiny saved models and
the Transformers integration switched on for one test at a time.

Models are built from a config (no weights can be downloaded here), saved with
``save_pretrained`` and loaded back with ``from_pretrained``, as a user would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import Workspace
from seeds.seedkit import TINY

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")



@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny Qwen3 and a tiny Llama, each saved once for the whole session."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    dirs = {}
    for name, config in (("qwen3", Qwen3Config(**TINY)), ("llama", LlamaConfig(**TINY))):
        torch.manual_seed(0)
        path = tmp_path_factory.mktemp(name)
        AutoModelForCausalLM.from_config(config).save_pretrained(path)
        dirs[name] = path
    return dirs


@pytest.fixture
def hub_env(published: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """This session's hub and cache, and the integration enabled (then disabled again)."""
    from kernelhub.integrations import transformers as kh

    for key, value in published.env(cache="seed-cache").items():
        if key.startswith("KERNELHUB_"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("KERNELHUB_TRUSTED_ORGS", raising=False)
    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    kh.enable()
    yield published
    kh.disable()
