"""Fixtures of the ``kernelhub serve`` tests: a hub directory, a tokens file, a server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # served.py, shared with benchmarks/serve.py

from chromium import chromium
from served import serving, write_tokens_file


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    root.mkdir()
    return root


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return write_tokens_file(tmp_path / "tokens.toml")


@pytest.fixture
def server(hub: Path, tokens_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A served hub (uvicorn in a thread) with the test tokens; huggingface_hub in this
    process talks to it with no token or endpoint from the environment."""
    from kernelhub_serve.tokens import TokenTable

    for var in ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(hub.parent / "hf-home"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with serving(hub, TokenTable.load(tokens_file)) as url:
        yield url


@pytest.fixture
def browser() -> Iterator[object]:
    """A real headless Chromium (tests/serve/chromium.py); skipped where none is installed."""
    with chromium() as driver:
        yield driver
