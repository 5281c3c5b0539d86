"""Property-based fuzzing of every loader entry point that takes user or hub data.

The one property: whatever comes in, the only exceptions that come out are kernelhub's
own (:class:`KernelHubError` and its subclasses), each with a one-line message. A
``TypeError`` from deep inside, a ``RecursionError`` from a nested document or a
``KeyError`` from a response of the wrong shape is a bug.

Examples are bounded (``max_examples``, a generous ``deadline``) and derandomized so the
module stays well under a minute on two cores and a failure reproduces in CI. Set
``KERNELHUB_FUZZ_EXAMPLES`` to run more examples locally.
"""

from __future__ import annotations

import http.server
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelhub import api
from kernelhub.cache import KernelCache
from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import parse_metadata
from kernelhub.formats.variants import is_variant_name, parse_variant
from kernelhub.integrations.transformers import attention
from kernelhub.integrations.transformers.kernel_config import KernelConfig
from kernelhub.layer.mapping import CUDAProperties, Device, Mode, normalize_mapping
from kernelhub.layer.repos import LayerRepository, locked_revision
from kernelhub.selection import select_variant
from kernelhub.system import SystemInfo
from kernelhub.versions import (
    Refs,
    check_repo_id,
    parse_release,
    parse_revision,
    resolve,
    select_spec,
    split_repo_string,
)

EXAMPLES = int(os.environ.get("KERNELHUB_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=5),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SMALL = settings(FUZZ, max_examples=max(EXAMPLES // 4, 10))

REPO = "kernels-community/kern"
SHA = "0123456789abcdef0123456789abcdef01234567"


def only_kernelhub_errors(call: Callable[[], Any]) -> Any:
    """Run ``call``; a kernelhub error is fine (one line), anything else fails the test."""
    try:
        return call()
    except KernelHubError as e:
        message = str(e)
        assert message and "\n" not in message, f"{type(e).__name__} not one line: {message!r}"
        return None


# -- strategies ---------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
words = st.sampled_from(["", " ", "v1", "v1.2.0", "main", "1", "0", "-1", ">=1.0,<2", "~=1.2",
                         "==1.*", ">=", "1.0", SHA, SHA.upper(), SHA[:39], "refs/heads/v1",
                         "a..b", "v1.lock", "org/name", "@", ":", "..", "/", "\n", "\x00"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True), text, words)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
              st.floats(allow_nan=False, allow_infinity=False), text, words),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(text, words), inner, max_size=4)),
    max_leaves=12,
)
anything = st.one_of(scalars, json_values, st.binary(max_size=20),
                     st.tuples(scalars, scalars), st.lists(scalars, max_size=3))
commits = st.one_of(st.just(SHA), st.text("0123456789abcdef", min_size=40, max_size=40), text)
refs = st.builds(Refs, branches=st.dictionaries(st.one_of(words, text), commits, max_size=5),
                 tags=st.dictionaries(st.one_of(words, text, st.from_regex(
                     r"v[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,2}(rc[0-9])?", fullmatch=True)),
                     commits, max_size=5))
variant_names = st.one_of(
    text, words,
    st.from_regex(r"torch[0-9]{1,3}-cxx11-(cpu|cu1[0-9]{2}|rocm[0-9]{2,3}|xpu20[0-9]{2}[0-9]|metal)"
                  r"-(x86_64|aarch64)-(linux|darwin)", fullmatch=True),
    st.from_regex(r"torch-stable-abi[0-9]{1,3}-(cpu|cu[0-9]{3})-(x86_64|aarch64)-(linux|darwin)",
                  fullmatch=True),
    st.sampled_from(["torch-universal", "torch-cuda", "torch-cpu", "torch-metal", "torch-"]),
)
systems = st.builds(
    SystemInfo, torch=st.tuples(st.integers(1, 3), st.integers(0, 20)),
    os=st.sampled_from(["linux", "darwin", "windows"]),
    arch=st.sampled_from(["x86_64", "aarch64"]),
    backend=st.sampled_from(["cpu", "cuda", "rocm", "xpu", "metal"]),
    cuda=st.none() | st.tuples(st.integers(10, 13), st.integers(0, 9)),
    capability=st.none() | st.tuples(st.integers(5, 12), st.integers(0, 9)),
)


# -- version specs and repo ids -------------------------------------------------------


@FUZZ
@given(version=anything, revision=anything)
def test_version_specs(version: Any, revision: Any) -> None:
    only_kernelhub_errors(lambda: select_spec(version, revision))
    only_kernelhub_errors(lambda: parse_revision(revision))


@FUZZ
@given(version=st.one_of(st.integers(0, 50), words, text), refs=refs)
def test_resolving_specs_against_hub_refs(version: Any, refs: Refs) -> None:
    spec = only_kernelhub_errors(lambda: select_spec(version, None))
    if spec is not None:
        only_kernelhub_errors(lambda: resolve(spec, refs, REPO))
    only_kernelhub_errors(lambda: refs.describe())
    only_kernelhub_errors(lambda: api.default_spec(refs, REPO))


@FUZZ
@given(value=st.one_of(anything, st.from_regex(r"[A-Za-z0-9._/@:-]{0,30}", fullmatch=True)))
def test_repo_ids_and_repo_strings(value: Any) -> None:
    only_kernelhub_errors(lambda: check_repo_id(value))
    if isinstance(value, str):
        only_kernelhub_errors(lambda: split_repo_string(value))
        only_kernelhub_errors(lambda: parse_release(value))
        only_kernelhub_errors(lambda: attention.parse(value) if ":" in value else None)


# -- metadata.json ------------------------------------------------------------------

GOOD_METADATA = {"name": "k", "id": "_k_cpu_0123456789", "version": 1, "release": "1.0.0",
                 "license": "MIT", "python-depends": [], "torch": "2.13",
                 "backend": {"type": "cpu", "archs": []},
                 "provenance": {"kernel-builder": {"version": "1"}},
                 "digest": {"algorithm": "sha256", "files": {"__init__.py": "x"}}}


@FUZZ
@given(raw=st.binary(max_size=200))
def test_metadata_from_arbitrary_bytes(raw: bytes) -> None:
    only_kernelhub_errors(lambda: parse_metadata(raw, "metadata.json"))


@FUZZ
@given(changes=st.dictionaries(st.sampled_from([*sorted(GOOD_METADATA), "extra"]), json_values,
                               min_size=1, max_size=4),
       nested=st.dictionaries(st.sampled_from(["type", "archs", "algorithm", "files"]),
                              json_values, max_size=2))
def test_metadata_with_wrong_field_values(changes: dict, nested: dict) -> None:
    data = json.loads(json.dumps(GOOD_METADATA))
    data.update(changes)
    for key in ("backend", "digest"):
        if isinstance(data.get(key), dict):
            data[key].update(nested)
    raw = json.dumps(data).encode()
    metadata = only_kernelhub_errors(lambda: parse_metadata(raw, "metadata.json"))
    if metadata is not None:  # what parsed must be what the loader relies on
        assert isinstance(metadata.id, str) and isinstance(metadata.backend.type, str)
        assert all(isinstance(a, str) for a in metadata.backend.archs)
        assert all(isinstance(d, str) for d in metadata.python_depends)
        assert all(isinstance(v, str) for v in metadata.digest_files.values())


# -- lock files and cache files -----------------------------------------------------


def _write(raw: bytes) -> Path:
    fd, name = tempfile.mkstemp(prefix="kh-fuzz-")
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return Path(name)


lock_documents = st.one_of(
    st.binary(max_size=120),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.one_of(st.just(REPO), text), st.one_of(commits, json_values), max_size=3)
    .map(lambda v: json.dumps(v).encode()),
    st.lists(st.fixed_dictionaries({"repo_id": st.one_of(st.just(REPO), json_values),
                                    "sha": st.one_of(commits, json_values)},
                                   optional={"variants": json_values, "kernelhub": json_values}),
             max_size=3)
    .map(lambda v: json.dumps(v).encode()),
)


@FUZZ
@given(raw=lock_documents)
def test_lock_files(raw: bytes) -> None:
    path = _write(raw)
    try:
        pin = only_kernelhub_errors(lambda: locked_revision(REPO, path))
        if pin is not None:
            assert pin == pin.lower() and len(pin) == 40
    finally:
        path.unlink()


@FUZZ
@given(refs_raw=lock_documents, variants_raw=lock_documents)
def test_corrupt_cache_files(refs_raw: bytes, variants_raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = KernelCache(Path(tmp))
        refs_path = cache.repo_dir("k", REPO) / "refs.json"
        variants_path = cache.commit_dir("k", REPO, SHA) / "variants.json"
        variants_path.parent.mkdir(parents=True)
        refs_path.write_bytes(refs_raw)
        variants_path.write_bytes(variants_raw)
        got = only_kernelhub_errors(lambda: cache.read_refs("k", REPO))
        if got is not None:
            assert all(isinstance(v, str) for v in {**got.branches, **got.tags}.values())
        only_kernelhub_errors(lambda: cache.read_variants("k", REPO, SHA))


# -- variant names and selection ----------------------------------------------------


@FUZZ
@given(names=st.lists(variant_names, max_size=6), system=systems,
       archs=st.lists(st.one_of(text, st.from_regex(r"(sm_)?[0-9]{2,3}[a-z]?(\+PTX)?",
                                                    fullmatch=True)), max_size=3))
def test_variant_names_and_selection(names: list[str], system: SystemInfo,
                                     archs: list[str]) -> None:
    for name in names:
        only_kernelhub_errors(lambda n=name: parse_variant(n))
        assert isinstance(is_variant_name(name), bool)
    selection = only_kernelhub_errors(
        lambda: select_variant(names, system, dict.fromkeys(names, archs)))
    if selection is not None:
        assert selection.chosen is None or selection.chosen in names


# -- kernel mappings and KernelConfig ------------------------------------------------

repositories = st.builds(lambda layer: LayerRepository(REPO, layer_name=layer),
                         st.sampled_from(["SiluAndMul", "RMSNorm"]))
mapping_keys = st.one_of(st.sampled_from(["cuda", "rocm", "cpu", "mps", "metal", "xpu", "tpu",
                                          "CUDA", ""]),
                         st.sampled_from(list(Mode)),
                         st.builds(lambda caps: Device("cuda", CUDAProperties(*sorted(caps))),
                                   st.tuples(st.integers(0, 120), st.integers(0, 120))),
                         scalars)
mapping_values = st.recursive(
    st.one_of(repositories, scalars),
    lambda inner: st.dictionaries(mapping_keys, inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(mapping=st.one_of(st.dictionaries(st.one_of(text, words, scalars), mapping_values,
                                         max_size=3), anything))
def test_kernel_mappings(mapping: Any) -> None:
    only_kernelhub_errors(lambda: normalize_mapping(mapping))


spec_strings = st.one_of(
    text, words, st.sampled_from(["org/repo:Layer", "kernels-community/act:SiluAndMul",
                                  "/abs/path:Layer", "org/repo", ":Layer"]))
config_values = st.recursive(
    st.one_of(spec_strings, st.none(), scalars,
              st.tuples(spec_strings, st.dictionaries(
                  st.sampled_from(["version", "revision", "trust_remote_code", "other"]),
                  anything, max_size=3))),
    lambda inner: st.dictionaries(st.one_of(mapping_keys, text), inner, max_size=3),
    max_leaves=6,
)


@FUZZ
@given(mapping=st.dictionaries(st.one_of(text, words, st.tuples(text, text),
                                         st.tuples(st.tuples(text, text), st.tuples(text, text)),
                                         scalars), config_values, max_size=3),
       inherit=st.one_of(st.booleans(), scalars), local=st.one_of(st.booleans(), scalars))
def test_kernel_config(mapping: dict, inherit: Any, local: Any) -> None:
    config = only_kernelhub_errors(
        lambda: KernelConfig(mapping, inherit_mapping=inherit, use_local_kernel=local))
    if config is not None:
        for device in ("cuda", "cpu"):
            for spec in config.for_device(device).values():
                assert spec is None or isinstance(spec.trust_remote_code, bool)


# -- hub responses ------------------------------------------------------------------


class _Responses:
    """What the test server answers next: one JSON body per request path kind."""

    def __init__(self) -> None:
        self.refs: bytes = b"{}"
        self.tree: bytes = b"[]"
        self.status = 200


class _FuzzHubHandler(http.server.BaseHTTPRequestHandler):
    """A test server speaking the shape (not the sense) of the Hub API's read endpoints."""

    answers: _Responses
    """Not ``responses``: BaseHTTPRequestHandler uses that name for its status table."""

    def do_GET(self) -> None:
        body = self.answers.refs if "/refs" in self.path else self.answers.tree
        self.send_response(self.answers.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fuzz_hub() -> Iterator[tuple[str, _Responses]]:
    responses = _Responses()
    handler = type("Handler", (_FuzzHubHandler,), {"answers": responses})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", responses
    server.shutdown()
    server.server_close()


ref_entry = st.fixed_dictionaries(
    {"name": st.one_of(words, text, json_values), "ref": st.one_of(text, json_values),
     "targetCommit": st.one_of(commits, json_values)})
refs_bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"branches": st.one_of(st.lists(ref_entry, max_size=3), json_values),
                           "tags": st.one_of(st.lists(ref_entry, max_size=3), json_values),
                           "converts": st.just([])}),
).map(lambda v: json.dumps(v).encode())
tree_bodies = st.one_of(
    json_values,
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["directory", "file", "x"]),
                                    "path": st.one_of(st.builds("build/{}".format, variant_names),
                                                      text),
                                    "oid": st.one_of(commits, json_values),
                                    "size": st.one_of(st.integers(0, 10), json_values)}),
             max_size=3),
).map(lambda v: json.dumps(v).encode())


@SMALL
@given(refs_body=refs_bodies, tree_body=tree_bodies, status=st.sampled_from([200, 200, 404]))
def test_hub_api_responses(fuzz_hub: tuple[str, _Responses], refs_body: bytes, tree_body: bytes,
                           status: int) -> None:
    endpoint, responses = fuzz_hub
    responses.refs, responses.tree, responses.status = refs_body, tree_body, status
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KERNELHUB_CACHE"] = tmp
        only_kernelhub_errors(lambda: api.resolve_kernel(REPO, hub=endpoint, backend="cpu"))
        only_kernelhub_errors(lambda: api.resolve_kernel(REPO, revision=SHA, hub=endpoint,
                                                         backend="cpu"))


# -- the user's config file ---------------------------------------------------------

config_documents = st.one_of(
    st.binary(max_size=80),
    st.sampled_from(["[trust]\norgs = {}\n", "[trust]\norgs = [{}]\n", "trust = 5\n",
                     "[trust]\norgs = ['a', 1]\n", "[trust]\norgs = 'a'\n", "[[trust]]\n",
                     "[trust]\norgs = [\"\\n\"]\n"]).map(str.encode),
    st.builds(lambda v: f"[trust]\norgs = {json.dumps(v)}\n".encode(), json_values),
)


@FUZZ
@given(raw=config_documents)
def test_config_file(raw: bytes) -> None:
    from kernelhub import settings
    from kernelhub.signing import trust

    path = _write(raw)
    previous = os.environ.get("KERNELHUB_CONFIG")
    os.environ["KERNELHUB_CONFIG"] = str(path)
    try:
        orgs = only_kernelhub_errors(settings.trusted_orgs)
        if orgs is not None:
            assert all(isinstance(o, str) for o in orgs)
        only_kernelhub_errors(lambda: trust.is_trusted(REPO, None))
    finally:
        path.unlink()
        if previous is None:
            os.environ.pop("KERNELHUB_CONFIG", None)
        else:
            os.environ["KERNELHUB_CONFIG"] = previous
