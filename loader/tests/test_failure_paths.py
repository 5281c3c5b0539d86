"""Every failure is a typed kernelhub error with one line, and nothing is left half-done.

Each test feeds one thing a careless user, a broken disk or a misbehaving hub produces,
and checks the error type, that the message is one line, and what is left behind.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub import api, cli, load_variant_dir
from kernelhub.cache import KernelCache
from kernelhub.errors import (
    CacheError,
    HubError,
    KernelHubError,
    KernelLoadError,
    LockFileError,
    MappingError,
    MetadataError,
    RepoIdError,
)
from kernelhub.formats.metadata import Metadata, parse_metadata
from kernelhub.hub.hf import HfHub
from kernelhub.hub.local import LocalHub
from kernelhub.layer.mapping import normalize_mapping
from kernelhub.layer.repos import LayerRepository, locked_revision
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import DirHub, make_variant, unique_id

REPO = "kernels-community/kern"
SHA = "a" * 40


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message, f"not one line: {message!r}"
    assert "Traceback" not in message
    return message


# -- repository ids -----------------------------------------------------------------


@pytest.mark.parametrize("repo_id", [123, None, b"org/name", ["org", "name"], 1.5])
def test_non_string_repo_ids_are_typed_errors(repo_id: object, dirhub: DirHub) -> None:
    for call in (
        lambda: api.get_kernel(repo_id, 1, hub=dirhub),  # type: ignore[arg-type]
        lambda: api.has_kernel(repo_id, hub=dirhub),  # type: ignore[arg-type]
        lambda: api.resolve_kernel(repo_id, hub=dirhub),  # type: ignore[arg-type]
        lambda: api.list_refs(repo_id, hub=dirhub),  # type: ignore[arg-type]
        lambda: LayerRepository(repo_id, layer_name="L"),  # type: ignore[arg-type]
    ):
        with pytest.raises(RepoIdError) as err:
            call()
        one_line(err.value)
    assert dirhub.calls == []


@pytest.mark.parametrize("repo_id", ["", "org", "org/", "/name", "a/b/c", "../x", "org/na me",
                                     "org/name\n", "-org/name"])
def test_malformed_repo_ids_are_refused_before_any_hub_work(repo_id: str, dirhub: DirHub) -> None:
    with pytest.raises(RepoIdError) as err:
        api.get_kernel(repo_id, 1, trust_remote_code=True, hub=dirhub)
    assert repr(repo_id) in one_line(err.value)
    assert dirhub.calls == []


# -- metadata -----------------------------------------------------------------------

GOOD = {"name": "k", "id": "_k_cpu_0123456789", "version": 1, "release": "1.0.0",
        "backend": {"type": "cpu", "archs": []},
        "digest": {"algorithm": "sha256", "files": {"__init__.py": "x"}}}


@pytest.mark.parametrize(("key", "value"), [
    ("backend", {"type": "cpu", "archs": "sm80"}),
    ("backend", {"type": 5, "archs": []}),
    ("backend", {"archs": []}),
    ("backend", {"type": "cpu", "archs": [80]}),
    ("python-depends", 5),
    ("python-depends", [5]),
    ("python-depends", "torch"),
    ("provenance", "x"),
    ("provenance", [1]),
    ("license", 5),
    ("torch", 2.13),
    ("digest", {"algorithm": "sha256", "files": {"__init__.py": 5}}),
    ("name", ["k"]),
    ("version", True),
])
def test_wrong_typed_metadata_fields_are_metadata_errors(key: str, value: object) -> None:
    data = json.loads(json.dumps(GOOD))
    data[key] = value
    with pytest.raises(MetadataError) as err:
        Metadata.from_json(data, "metadata.json")
    assert key in one_line(err.value)


def test_pathologically_nested_metadata_is_a_metadata_error() -> None:
    with pytest.raises(MetadataError) as err:
        parse_metadata(b"[" * 200_000, "metadata.json")
    one_line(err.value)


# -- cache files --------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    b'{"branches": [1, 2]}',
    b'{"branches": {"v1": 5}}',
    b'{"branches": {}, "tags": "v1"}',
    b"[" * 200_000,
    b"\xff\xfe",
    b"[]",
])
def test_corrupt_refs_cache_is_a_typed_error(content: bytes, tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "c")
    path = cache.repo_dir("k", REPO) / "refs.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(KernelHubError) as err:
        cache.read_refs("k", REPO)
    assert "kernelhub cache clear" in one_line(err.value)


@pytest.mark.parametrize("content", [b'{"a": 1}', b"[1]", b"[" * 200_000, b"nope"])
def test_corrupt_variant_list_is_a_typed_error(content: bytes, tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "c")
    path = cache.commit_dir("k", REPO, SHA) / "variants.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(KernelHubError) as err:
        cache.read_variants("k", REPO, SHA)
    one_line(err.value)


def test_a_cache_file_that_is_a_directory_is_a_typed_error(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "c")
    (cache.repo_dir("k", REPO) / "refs.json").mkdir(parents=True)
    with pytest.raises(KernelHubError) as err:
        cache.read_refs("k", REPO)
    one_line(err.value)


def test_cache_root_that_is_a_file(tmp_path: Path, dirhub: DirHub,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    variant = tmp_path / "staging" / "v"
    make_variant(variant)
    dirhub.add(REPO, "v1", {"torch-universal": variant})
    root = tmp_path / "not-a-dir"
    root.write_text("I am a file")
    monkeypatch.setenv("KERNELHUB_CACHE", str(root))
    with pytest.raises(CacheError) as err:
        api.get_kernel(REPO, 1, hub=dirhub)
    assert str(root) in one_line(err.value) and "KERNELHUB_CACHE" in str(err.value)
    assert root.read_text() == "I am a file"


# -- lock files ---------------------------------------------------------------------


@pytest.mark.parametrize("pin", ["main", "v1", "v1.0.0", "A" * 40, "a" * 39, "a" * 41, 5,
                                 None, ["a" * 40], "-" + "a" * 39])
def test_lock_file_entries_must_be_commit_ids(pin: object, tmp_path: Path) -> None:
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps({REPO: pin}))
    with pytest.raises(LockFileError) as err:
        locked_revision(REPO, lock)
    one_line(err.value)
    lock.write_text(json.dumps([{"repo_id": REPO, "sha": pin}]))
    with pytest.raises(LockFileError):
        locked_revision(REPO, lock)


@pytest.mark.parametrize("content", ["[" * 200_000, "5", '"x"', "\udcff"])
def test_malformed_lock_files_are_lock_file_errors(content: str, tmp_path: Path) -> None:
    lock = tmp_path / "kernels.lock"
    lock.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(LockFileError) as err:
        locked_revision(REPO, lock)
    one_line(err.value)


def test_a_valid_lock_entry_still_works(tmp_path: Path) -> None:
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": REPO, "sha": SHA}]))
    assert locked_revision(REPO, lock) == SHA


# -- mappings -----------------------------------------------------------------------


@pytest.mark.parametrize("mapping", [
    {"X": 5}, {5: None}, {"X": {"tpu": None}}, {"X": {"cuda": "org/repo:L"}},
    {"X": {"cuda": {"nomode": None}}}, [("X", None)],
])
def test_malformed_mappings_are_mapping_errors(mapping: object) -> None:
    with pytest.raises(MappingError) as err:
        normalize_mapping(mapping)  # type: ignore[arg-type]
    one_line(err.value)


# -- hubs that cannot be reached or misbehave ---------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _BadHubHandler(http.server.BaseHTTPRequestHandler):
    """A test server that answers every Hub-API request wrongly, in one of a few ways."""

    mode = "500"

    def do_GET(self) -> None:
        body = {"500": b'{"error": "boom"}', "garbage": b"<html>not json",
                "wrong-shape": b'{"branches": 5, "tags": "x", "converts": null}',
                "list": b"[1, 2, 3]"}[self.mode]
        self.send_response(500 if self.mode == "500" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET
    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=["500", "garbage", "wrong-shape", "list"])
def bad_hub(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("Handler", (_BadHubHandler,), {"mode": request.param})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # huggingface_hub retries 5xx with backoff; one answer is enough to judge the error.
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2")


def test_unreachable_hub_is_a_hub_error(no_retries: None) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    for call in (
        lambda: api.get_kernel(REPO, 1, hub=endpoint),
        lambda: api.has_kernel(REPO, hub=endpoint),
        lambda: api.list_refs(REPO, hub=endpoint),
    ):
        with pytest.raises(HubError) as err:
            call()
        assert endpoint in one_line(err.value)


def test_every_hub_method_is_translated_at_the_loaders_seam(no_retries: None) -> None:
    hub = api.open_hub_arg(HfHub(f"http://127.0.0.1:{_closed_port()}"))
    # The other methods go through the same seam; huggingface_hub retries tree listings and
    # downloads with backoff (~25 s each) on a refused connection, too slow to repeat here.
    for call in (lambda: hub.list_refs(REPO),):
        with pytest.raises(HubError) as err:
            call()
        assert hub.endpoint in one_line(err.value)


def test_misbehaving_hub_is_a_hub_error(bad_hub: str, no_retries: None,
                                        request: pytest.FixtureRequest) -> None:
    start = time.monotonic()
    calls = [lambda: api.get_kernel(REPO, 1, hub=bad_hub),
             lambda: api.list_refs(REPO, hub=bad_hub)]
    if "500" not in request.node.name:  # huggingface_hub retries a 500 tree listing for ~20 s
        calls.append(lambda: api.get_kernel(REPO, revision=SHA, hub=bad_hub))
    for call in calls:
        with pytest.raises(KernelHubError) as err:
            call()
        one_line(err.value)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("command", [["variants", REPO], ["info", REPO]])
def test_cli_reports_an_unreachable_hub_in_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str], no_retries: None
) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    assert cli.main([*command, "--hub", endpoint]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kernelhub: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


# -- cache keys ---------------------------------------------------------------------


def test_every_distinct_endpoint_gets_its_own_cache() -> None:
    endpoints = ["http://hub.example:8080", "https://hub.example:8080",
                 "http://hub.example:8080/mirror-a", "http://hub.example:8080/mirror-b",
                 "http://hub.example", "http://hub.example:80", "http://hub.example:9"]
    keys = {HfHub(e).key for e in endpoints}
    assert len(keys) == len(endpoints)
    # The same server written differently keeps one cache.
    assert HfHub("http://hub.example:8080/").key == HfHub("http://hub.example:8080").key
    assert HfHub("http://Hub.Example:9").key == HfHub("http://hub.example:9").key


def test_local_hubs_at_different_paths_have_different_keys(tmp_path: Path) -> None:
    assert LocalHub(tmp_path / "a").key != LocalHub(tmp_path / "b").key


# -- variant ids that would shadow other modules -------------------------------------


@pytest.mark.parametrize("module_id", ["json", "email", "kernelhub_fake_stdlib_shadow"])
def test_an_id_naming_an_importable_module_is_refused(module_id: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # The variant would otherwise own that top-level name for the rest of the process.
    shadow = tmp_path / "site"
    shadow.mkdir()
    (shadow / "kernelhub_fake_stdlib_shadow.py").write_text("")
    monkeypatch.syspath_prepend(str(shadow))
    make_variant(tmp_path / "v", module_id=module_id)
    with pytest.raises(KernelLoadError) as err:
        load_variant_dir(tmp_path / "v")
    assert module_id in one_line(err.value)


def test_a_fifo_in_a_variant_does_not_hang_the_load(tmp_path: Path) -> None:
    make_variant(tmp_path / "v", module_id=unique_id())
    os.mkfifo(tmp_path / "v" / "pipe")
    result: list[BaseException] = []

    def load() -> None:
        try:
            load_variant_dir(tmp_path / "v")
        except KernelHubError as e:
            result.append(e)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "loading a variant with a FIFO in it hung"
    assert "pipe" in one_line(result[0])


# -- a git ref lock left by a crashed publish ----------------------------------------


def _publish_once(hub: LocalPublisher, tmp_path: Path, label: str) -> str | None:
    staged = tmp_path / "staging" / label / "torch-universal"
    make_variant(staged, init=f"LABEL = {label!r}\n")
    return hub.publish(REPO, "v1", {"torch-universal": staged}, tag=None,
                       message=label).commit


def test_stale_ref_lock_names_the_file_to_remove(tmp_path: Path) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    first = _publish_once(hub, tmp_path, "first")
    lock = hub.repo_path(REPO) / "refs" / "heads" / "v1.lock"
    lock.write_text("")  # what `git update-ref` leaves when it is killed mid-update
    an_hour_ago = time.time() - 3600
    os.utime(lock, (an_hour_ago, an_hour_ago))
    start = time.monotonic()
    with pytest.raises(HubError) as err:
        _publish_once(hub, tmp_path, "second")
    message = one_line(err.value)
    assert str(lock) in message and "remove that file" in message
    assert time.monotonic() - start < 10, "a stale lock must not be retried for long"
    assert LocalHub(tmp_path / "hub").list_refs(REPO).branches["v1"] == first
    lock.unlink()
    assert _publish_once(hub, tmp_path, "third") != first


# -- more probes: what a careless caller passes ---------------------------------------


def test_config_path_that_is_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         dirhub: DirHub) -> None:
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path))
    with pytest.raises(KernelHubError) as err:
        api.get_kernel("someone/kernel", 1, hub=dirhub)
    assert str(tmp_path) in one_line(err.value)


def test_loading_a_file_as_a_variant_dir(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(MetadataError) as err:
        load_variant_dir(not_a_dir)
    assert str(not_a_dir) in one_line(err.value)


@pytest.mark.parametrize("path", [5, None, ["a"], b"/tmp"])
def test_local_kernel_path_of_the_wrong_type(path: object) -> None:
    with pytest.raises(KernelHubError) as err:
        api.get_local_kernel(path)  # type: ignore[arg-type]
    one_line(err.value)


@pytest.mark.parametrize("hub", [5, 1.5, ["hf"], object()])
def test_hub_argument_of_the_wrong_type(hub: object) -> None:
    with pytest.raises(KernelHubError) as err:
        api.get_kernel(REPO, 1, hub=hub)  # type: ignore[arg-type]
    one_line(err.value)
