"""Fuzzing the command lines: every subcommand of ``kernelhub`` and ``builder``, and
``kernelhub serve``'s arguments, with hostile arguments, files and settings.

The properties, for every run:

* no exception escapes a command's ``main`` (argparse's own exit 2 is a usage error,
  said in one line; anything else escaping is a raw traceback);
* an error is one line;
* no credential given in a hub URL (``user:password@``, ``?token=``) is printed or logged;
* nothing a hub or a file supplied reaches the terminal unescaped: no control or
  formatting character, and no forged line;
* ``kernelhub cache clear`` with the cache pointed at a directory that holds anything
  else (a home directory) loses nothing.

Every distinct failure (its kind and where it was raised) is collected and reported
together, so one CI run lists them all. Examples are derandomized and bounded:
``KERNELHUB_FUZZ_EXAMPLES`` (default 120 here per command line) raises the count.
A subcommand without a row in the tables below fails :func:`test_every_subcommand_is_fuzzed`,
so a new command is fuzzed from the day it lands.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import logging
import os
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = max(int(os.environ.get("KERNELHUB_FUZZ_EXAMPLES", "120")) // 6, 5)
"""Per subcommand: 20 by default (the loader's fuzz targets run 120 each)."""
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
"""No per-example deadline: a command's time depends on the machine's load (a deadline
made runs flaky on a shared machine); the example count bounds the run."""

SECRET = "Zq7SECRETwv"
"""A credential given in hub URLs; it must never be printed or logged."""
FORGED = "FORGEDLINE"
"""What a hostile hub or file puts after a newline, hoping to start a line of its own."""
ORG = "kernelhub-tests"
REPO = f"{ORG}/relu"
SHA = "0123456789abcdef0123456789abcdef01234567"
OWN_CODE = ("kernelhub", "kernelhub_builder", "kernelhub_serve")


# -- the world the commands run in ---------------------------------------------------


@dataclass
class World:
    """Hubs, projects, files and settings the runs draw from; all under one tmp dir."""

    root: Path
    hub: Path
    dead_url: str
    hostile_url: str
    project: Path
    out: Path
    sentinel_home: Path
    files: dict[str, Path] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)

    def fresh(self, name: str) -> Path:
        path = self.root / "scratch" / name
        path.mkdir(parents=True, exist_ok=True)
        return path


class _HostileHub(http.server.BaseHTTPRequestHandler):
    """A test server speaking the shape of the Hub API's read endpoints, as a hostile
    hub would: ref and file names with control characters and line breaks, and error
    pages that echo the request (with its query) back."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.endswith("/refs"):
            body = json.dumps({"branches": [
                {"name": "v1", "ref": "refs/heads/v1", "targetCommit": SHA},
                {"name": f"v2\n{FORGED} branch", "ref": "refs/heads/v2", "targetCommit": SHA},
                {"name": "main\x1b[2J\x1b]0;owned\x07", "ref": "refs/heads/main",
                 "targetCommit": SHA},
            ], "tags": [{"name": "v1.0.0\u202e\r" + FORGED, "ref": "refs/tags/v1.0.0",
                         "targetCommit": f"{SHA[:39]}\n{FORGED}"}], "converts": []}).encode()
            status = 200
        elif "/tree/" in path:
            body = json.dumps([
                {"type": "directory", "path": f"build/torch-universal\n{FORGED} chosen",
                 "oid": SHA},
                {"type": "directory", "path": "build/\x1b[31mtorch-cpu\x1b[0m", "oid": SHA},
                {"type": "directory", "path": "build/torch\u2028cpu", "oid": SHA},
            ]).encode()
            status = 200
        else:  # an error page that quotes the request, query string and all
            body = f"<html>no such thing: {self.path}\n{FORGED}</html>".encode()
            status = 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TOML_DOCS: dict[str, bytes] = {
    "empty": b"",
    "binary": b"\xff\xfe\x00\x01garbage",
    "deep-arrays": b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "deep-tables": b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000 + b"\n",
    "deep-pyproject": b"[tool.kernels.dependencies]\n\"org/x\" = " + b"[" * 5000 + b"]" * 5000,
    "tool-int": b"[project]\nname = \"a\"\n[tool]\nkernels = 5\n",
    "tool-scalar": b"tool = 5\n",
    "deps-int": b"[tool.kernels]\ndependencies = 3\n",
    "deps-values": b"[tool.kernels.dependencies]\n\"org/x\" = 1.5\n\"bad id\" = [1]\n"
                   b"[tool.kernelhub.dependencies]\n\"org/x\" = \"\\u0000\"\n",
    "trust": b"[trust]\norgs = 5\n",
    "signing": b"[signing]\nallowed-signers = 5\nrequire = [\"*\"]\n[signing.keys]\norg = 5\n",
    "signing-paths": b"[signing]\nallowed-signers = [\"~nosuchuser/x\", \"a\\u0000b\"]\n"
                     b"require = [\"*\"]\n",
    "kernels-toml": b"kernels = 5\n[hub]\ntarget = 5\n[matrix]\ntorch = \"x\"\n",
    "kernels-toml-hub": b"kernels = [\"relu_py\"]\n[hub]\norg = \"o\"\ntarget = \"http://[::1\"\n",
    "tokens": b"anonymous-read = 5\n[[token]]\nname = 5\n",
    "tokens-deep": b"[[token]]\nname = \"t\"\nread = " + b"[" * 5000 + b"]" * 5000,
}
JSON_DOCS: dict[str, bytes] = {
    "big-int": b"{\"version\": 1" + b"0" * 5000 + b"}",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "garbage": b"\x00\xff{",
    "lock-shapes": json.dumps([{"repo_id": REPO, "sha": SHA, "variants": 5},
                               {"repo_id": 5, "sha": None}]).encode(),
    "lock-pins": json.dumps({REPO: SHA, "a/b": "v1"}).encode(),
}


def _metadata(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "relu", "id": "_relu_cpu_0123456789", "version": 1, "release": "1.0.0",
        "license": "MIT", "python-depends": [], "torch": "2.13",
        "backend": {"type": "cpu", "archs": []},
        "provenance": {"kernel-builder": {"version": "1"}},
        "digest": {"algorithm": "sha256", "files": {}},
    }
    data.update(changes)
    return data


def _variant_dir(dest: Path, metadata: bytes | dict[str, Any]) -> Path:
    """A one-file variant whose metadata is ``metadata`` (digests filled in when a dict)."""
    from kernelhub.formats.metadata import compute_digests

    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text("X = 1\n")
    if isinstance(metadata, dict):
        metadata = dict(metadata, digest={"algorithm": "sha256",
                                          "files": compute_digests(dest)})
        metadata = json.dumps(metadata).encode()
    (dest / "metadata.json").write_bytes(metadata)
    return dest


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from kernelhub_builder.cli import main as builder_main
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import make_variant

    root = tmp_path_factory.mktemp("fuzz-cli")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    world = World(
        root=root, hub=root / "hub",
        dead_url=f"http://127.0.0.1:{_dead_port()}",
        hostile_url=f"http://127.0.0.1:{server.server_address[1]}",
        project=root / "project", out=root / "project" / "build",
        sentinel_home=root / "home-like",
    )
    staging = root / "staging"
    make_variant(staging / "torch-universal", name="relu")
    make_variant(staging / "torch-cpu", name="relu")
    LocalPublisher(world.hub).publish(REPO, "v1", {p.name: p for p in staging.iterdir()},
                                      tag="v1.0.0", message="release 1.0.0")

    # A builder project of one pure-Python kernel: nothing is compiled, ever.
    fixture = Path(__file__).parents[1] / "builder" / "tests" / "fixtures" / "project"
    (world.project / "kernels-src").mkdir(parents=True)
    import shutil

    shutil.copytree(fixture / "kernels-src" / "relu_py", world.project / "kernels-src" / "relu_py")
    (world.project / "kernels.toml").write_text(
        'kernels = ["relu_py"]\n[hub]\norg = "kernelhub-tests"\n[matrix]\ntorch = ["2.13"]\n'
        'backends = ["cpu"]\nsystems = ["x86_64-linux", "aarch64-linux"]\n'
        '[toolchain.torch]\n"2.13" = "torch==2.13.0"\n')
    with _quiet():
        code = builder_main(["--project", str(world.project), "build", "--no-import-check"])
    assert code == 0, "the fuzz project must build"

    world.sentinel_home.mkdir()
    (world.sentinel_home / ".bashrc").write_text("keep me\n")
    (world.sentinel_home / "Documents").mkdir()
    (world.sentinel_home / "Documents" / "thesis.tex").write_text("keep me too\n")
    (world.sentinel_home / "verify").mkdir()  # a name kernelhub uses, but not its cache
    (world.sentinel_home / "verify" / "notes.txt").write_text("mine\n")

    files = root / "files"
    files.mkdir()
    for name, raw in {**{f"{k}.toml": v for k, v in TOML_DOCS.items()},
                      **{f"{k}.json": v for k, v in JSON_DOCS.items()}}.items():
        (files / name).write_bytes(raw)
        world.files[name] = files / name
    world.files["dir-not-file"] = root / "a-dir"
    world.files["dir-not-file"].mkdir()
    world.files["missing"] = root / "missing-file"
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    world.files["loop"] = root / "loop-a"
    world.files["endless"] = Path("/dev/zero")  # read with a bound, or memory fills up
    world.files["key-garbage"] = files / "key"
    world.files["key-garbage"].write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n")

    dirs = root / "dirs"
    for name, raw in TOML_DOCS.items():  # project dirs for lock and download
        (dirs / f"pyproject-{name}").mkdir(parents=True)
        (dirs / f"pyproject-{name}" / "pyproject.toml").write_bytes(raw)
        world.dirs[f"pyproject-{name}"] = dirs / f"pyproject-{name}"
    for name, raw in JSON_DOCS.items():
        (dirs / f"lock-{name}").mkdir(parents=True)
        (dirs / f"lock-{name}" / "kernels.lock").write_bytes(raw)
        (dirs / f"lock-{name}" / "pyproject.toml").write_text(
            f'[tool.kernels.dependencies]\n"{REPO}" = 1\n')
        world.dirs[f"lock-{name}"] = dirs / f"lock-{name}"
    for name in ("kernels-toml", "kernels-toml-hub", "deep-arrays", "binary"):
        (dirs / f"project-{name}").mkdir(parents=True)
        (dirs / f"project-{name}" / "kernels.toml").write_bytes(TOML_DOCS[name])
        world.dirs[f"project-{name}"] = dirs / f"project-{name}"
    deep_kernel = dirs / "project-deep-build-toml"
    shutil.copytree(world.project / "kernels-src", deep_kernel / "kernels-src")
    shutil.copy(world.project / "kernels.toml", deep_kernel / "kernels.toml")
    (deep_kernel / "kernels-src" / "relu_py" / "build.toml").write_bytes(TOML_DOCS["deep-arrays"])
    world.dirs["project-deep-build-toml"] = deep_kernel
    for name, meta in {
        "provenance-str": _metadata(provenance="a string"),
        "hostile-strings": _metadata(name=f"relu\n{FORGED} name", license="MIT\x1b[2J",
                                     torch="2.13\u202e", release="1.0.0\r" + FORGED,
                                     provenance={"kernel-builder": {"version": "\x07"},
                                                 "kernel": {"commit": f"x\n{FORGED}"}}),
    }.items():
        world.dirs[f"variant-{name}"] = _variant_dir(dirs / f"variant-{name}" / "torch-universal",
                                                     meta).parent
    world.dirs["variant-big-int"] = _variant_dir(dirs / "variant-big-int" / "torch-universal",
                                                 JSON_DOCS["big-int"]).parent
    world.dirs["variant-deep"] = _variant_dir(dirs / "variant-deep" / "torch-universal",
                                              JSON_DOCS["deep"]).parent
    artifact = dirs / "artifact-bad" / "relu_py" / "torch-cpu"
    artifact.mkdir(parents=True)
    (artifact / "metadata.json").write_bytes(JSON_DOCS["big-int"])
    world.dirs["artifact-bad"] = dirs / "artifact-bad"
    world.dirs["artifact-good"] = world.out
    world.dirs["empty"] = dirs / "empty"
    world.dirs["empty"].mkdir()
    world.dirs["file-not-dir"] = world.files["empty.toml"]
    world.dirs["missing"] = root / "missing-dir"
    world.dirs["loop"] = world.files["loop"]
    try:
        yield world
    finally:
        server.shutdown()
        server.server_close()


# -- hostile words -------------------------------------------------------------------

HOSTILE_WORDS = [
    "", " ", "-", "--", ".", "..", "/", "a\x00b", "~nosuchuser", "~nosuchuser/x",
    "a" * 5000, "a/" * 2100, "\x1b[31mred", f"x\n{FORGED}", "\u202eevil", "org/\u00e9",
    "http://[::1", "http://[::1]:99999", "https://", "http://:0", f"ftp://u:{SECRET}@h/x",
    "org/name", "org/", "/name", "a/b/c", "v1", ">=1,<2", SHA, "-1", "1e400", "None",
]


def hostile(*usual: str) -> st.SearchStrategy[str]:
    """One of the ``usual`` words (a third of the time), a hostile word, or any text."""
    words = [st.sampled_from(usual)] if usual else []
    return st.one_of(*words, st.sampled_from(HOSTILE_WORDS),
                     st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))


def hub_values(w: World) -> st.SearchStrategy[str]:
    return st.sampled_from([
        str(w.hub), w.hostile_url, f"{w.hostile_url}/?token={SECRET}",
        f"http://user:{SECRET}@{w.dead_url[7:]}", f"{w.dead_url}/?token={SECRET}",
        f"{w.dead_url}/p?access_token={SECRET}&x=1", f"https://{SECRET}@{w.dead_url[7:]}/",
        "http://[::1", "http://[::1]:99999", "https://", "hf", str(w.files["empty.toml"]),
        str(w.dirs["missing"]), "~nosuchuser/hub", "a\x00b", "a" * 5000,
    ])


def path_values(w: World, kind: str) -> st.SearchStrategy[str]:
    table = w.files if kind == "file" else w.dirs
    return st.one_of(st.sampled_from(sorted(str(p) for p in table.values())),
                     st.sampled_from(["~nosuchuser/x", "a\x00b", "a" * 5000, "a/" * 2100,
                                      "-", ""]))


def spec_args(w: World) -> st.SearchStrategy[list[str]]:
    pairs = st.lists(st.one_of(
        st.tuples(st.just("--hub"), hub_values(w)),
        st.tuples(st.sampled_from(["--version", "--revision"]),
                  hostile("1", "v1", "v1.0.0", "main", ">=1", SHA)),
        st.tuples(st.just("--backend"), st.sampled_from(["cpu", "cpu", "cuda", "gpu"])),
    ), max_size=3)
    return pairs.map(lambda items: [x for pair in items for x in pair])


def repo_values() -> st.SearchStrategy[str]:
    return st.one_of(st.just(REPO), hostile(f"{ORG}/nope", "kernels-community/activation"))


# -- running a command ---------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    env: dict[str, str | None]
    code: object = None
    out: str = ""
    err: str = ""
    logs: str = ""
    crash: BaseException | None = None
    trace: str = ""


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def _quiet() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


@contextlib.contextmanager
def _environment(env: dict[str, str | None], cwd: Path) -> Iterator[None]:
    saved = dict(os.environ)
    here = Path.cwd()
    try:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


def _forget_process_state() -> None:
    from kernelhub.hub import hf
    from kernelhub.load import pipeline
    from kernelhub.signing import policy as release_policy

    pipeline._memo.clear()
    release_policy._verified.clear()
    hf._found_types.clear()


def run_command(main: Callable[[list[str]], int], argv: list[str], env: dict[str, str | None],
                cwd: Path) -> Run:
    run = Run(argv, env)
    records = _Records()
    loggers = [logging.getLogger(), logging.getLogger("huggingface_hub")]
    for logger in loggers:
        logger.addHandler(records)
    _forget_process_state()
    try:
        with _environment(env, cwd), _quiet() as (out, err):
            try:
                run.code = main(list(argv))
            except SystemExit as e:
                run.code = e.code
            except BaseException as e:  # what the property is about: nothing escapes
                run.crash = e
                run.trace = traceback.format_exc()
        run.out, run.err = out.getvalue(), err.getvalue()
    finally:
        for logger in loggers:
            logger.removeHandler(records)
    run.logs = "\n".join(records.lines)
    return run


def _where(error: BaseException) -> str:
    """The innermost frame of our own code an exception passed through."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if any(f"/{p}/" in f.filename for p in OWN_CODE)]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return "?"
    return f"{frame.filename.split('/src/')[-1]}:{frame.lineno}"


def problems(run: Run, w: World) -> dict[str, str]:
    """Every property ``run`` breaks, keyed by a signature of the failure."""
    found: dict[str, str] = {}
    shown = f"argv={run.argv!r}\nenv={run.env!r}"
    if run.crash is not None:
        key = f"raw {type(run.crash).__name__} at {_where(run.crash)}"
        found[key] = f"{shown}\n{run.trace[-3000:]}"
        return found
    if run.code not in (0, 1, 2):
        found[f"exit status {run.code!r}"] = shown
    everything = "\n".join((run.out, run.err, run.logs))
    if SECRET in everything:
        line = next(x for x in everything.splitlines() if SECRET in x)
        found[f"credential printed by {run.argv[:1]}"] = f"{shown}\n{line[:500]}"
    text = run.out + run.err
    for line in text.splitlines():
        if any(not c.isprintable() for c in line):
            found[f"unescaped control character from {run.argv[:1]}"] = f"{shown}\n{line!r}"[:2000]
            break
        if line.startswith(FORGED):
            found[f"forged line from {run.argv[:1]}"] = f"{shown}\n{line!r}"[:2000]
            break
    errors = [x for x in run.err.splitlines() if x.strip()]
    if run.code == 1 and len(errors) > 1 and not run.out.strip():
        first = errors[0]
        if "error" in first and all("error" not in x for x in errors[1:]):
            found[f"multi-line error from {run.argv[:1]}"] = f"{shown}\n{run.err[:1500]}"
    if not (w.sentinel_home / ".bashrc").is_file() or not (
            w.sentinel_home / "Documents" / "thesis.tex").is_file() or not (
            w.sentinel_home / "verify" / "notes.txt").is_file():
        found["cache clear lost files that are not kernelhub's"] = shown
    return found


def environments(w: World) -> st.SearchStrategy[dict[str, str | None]]:
    cache = st.sampled_from([str(w.root / "cache"), str(w.root / "cache"),
                             str(w.files["empty.toml"]), str(w.sentinel_home),
                             "~nosuchuser/cache", "a" * 5000])
    config = st.sampled_from([str(w.root / "no-config.toml"), str(w.root / "no-config.toml"),
                              *(str(w.files[f"{k}.toml"]) for k in
                                ("deep-arrays", "deep-tables", "binary", "trust", "signing",
                                 "signing-paths")),
                              str(w.files["dir-not-file"]), "~nosuchuser/config.toml",
                              "/dev/zero"])
    default_hub = st.sampled_from([str(w.hub), str(w.hub), f"http://u:{SECRET}@{w.dead_url[7:]}",
                                   f"{w.hostile_url}/?token={SECRET}", "http://[::1",
                                   str(w.files["empty.toml"]), "~nosuchuser/hub"])
    signers = st.sampled_from([None, None, str(w.files["garbage.json"]), "/dev/zero",
                               str(w.files["dir-not-file"]), "~nosuchuser/signers"])
    return st.fixed_dictionaries({
        "KERNELHUB_CACHE": cache,
        "KERNELHUB_CONFIG": config,
        "KERNELHUB_HUB": default_hub,
        "HF_ENDPOINT": st.sampled_from([f"http://u:{SECRET}@{w.dead_url[7:]}",
                                        f"{w.hostile_url}?token={SECRET}"]),
        "KERNELHUB_ALLOWED_SIGNERS": signers,
        "KERNELHUB_REQUIRE_SIGNED": st.sampled_from([None, "*"]),
        "KERNELHUB_TRUSTED_ORGS": st.just(ORG),
        "KERNELHUB_OFFLINE": st.sampled_from([None, None, "1"]),
        "HOME": st.just(str(w.root / "home")),
        "KERNELHUB_BUILDER_HOME": st.just(str(w.root / "builder-home")),
        "HF_HOME": st.just(str(w.root / "hf-home")),
        "HF_TOKEN": st.just(None),
        "HF_HUB_DISABLE_TELEMETRY": st.just("1"),
        "KERNELHUB_HUB_TIMEOUT": st.just("5"),
        "NO_PROXY": st.just("127.0.0.1"),
    })


# -- the commands --------------------------------------------------------------------

Argv = Callable[[st.DataObject, World], list[str]]


def _maybe(data: st.DataObject, *args: str) -> list[str]:
    return list(args) if data.draw(st.booleans()) else []


KERNELHUB: dict[str, Argv] = {
    "versions": lambda d, w: ["versions", d.draw(repo_values()), *d.draw(spec_args(w))],
    "info": lambda d, w: ["info", d.draw(st.one_of(repo_values(), path_values(w, "dir"))),
                          *d.draw(spec_args(w))],
    "cache": lambda d, w: ["cache", d.draw(st.sampled_from(["path", "clear", "clear", "ls"]))],
    "env": lambda d, w: ["env", *_maybe(d, "--json")],
    "check": lambda d, w: ["check", d.draw(repo_values()), *d.draw(spec_args(w))],
    "lock": lambda d, w: ["lock", *_maybe(d, d.draw(path_values(w, "dir")))],
    "download": lambda d, w: ["download", *_maybe(d, d.draw(path_values(w, "dir"))),
                              *_maybe(d, "--all-variants")],
    "variants": lambda d, w: ["variants", d.draw(repo_values()), *d.draw(spec_args(w)),
                              *_maybe(d, d.draw(st.sampled_from(["--all-versions", "--json",
                                                                 "--only-compatible"])))],
    "describe-api": lambda d, w: ["describe-api", d.draw(st.one_of(repo_values(),
                                                                   path_values(w, "dir"))),
                                  *d.draw(spec_args(w)), *_maybe(d, "--json")],
    "verify-signature": lambda d, w: ["verify-signature", d.draw(repo_values()),
                                      *d.draw(spec_args(w).map(
                                          lambda a: [x.replace("--version", "--revision")
                                                     for x in a])),
                                      *_maybe(d, "--all-variants"),
                                      *_maybe(d, "--filter-unsigned")],
    # Never --trust-remote-code: a benchmark script is the kernel's code.
    "benchmark": lambda d, w: ["benchmark", d.draw(st.one_of(repo_values(),
                                                             path_values(w, "dir"))),
                               *d.draw(spec_args(w)), "--iterations", "1", "--warmup", "0",
                               "--no-plots",
                               *_maybe(d, "--benchmarks", d.draw(path_values(w, "dir"))),
                               *_maybe(d, "--output", d.draw(path_values(w, "file")))],
    "autotune-report": lambda d, w: ["autotune-report",
                                     *_maybe(d, "--name", d.draw(hostile())),
                                     *_maybe(d, "--model", d.draw(hostile())),
                                     *_maybe(d, "--forget")],
    "verify-report": lambda d, w: ["verify-report", *_maybe(d, "--name", d.draw(hostile())),
                                   *_maybe(d, "--forget")],
    "publish-benchmark": lambda d, w: ["publish-benchmark", d.draw(repo_values()),
                                       d.draw(hostile(SHA)), d.draw(hostile("torch-cpu")),
                                       d.draw(path_values(w, "file")),
                                       *_maybe(d, d.draw(path_values(w, "file"))),
                                       *_maybe(d, "--hub", d.draw(hub_values(w)))],
    "init": lambda d, w: ["init", d.draw(hostile("my-kernel")),
                          *_maybe(d, d.draw(path_values(w, "dir"))),
                          *_maybe(d, "--org", d.draw(hostile()))],
}
"""Every ``kernelhub`` subcommand (serve is fuzzed through its own arguments below)."""

BUILDER_KERNELS = hostile("relu_py")
BUILDER: dict[str, Argv] = {
    "list-variants": lambda d, w: ["list-variants", *_maybe(d, d.draw(BUILDER_KERNELS)),
                                   *_maybe(d, "--json")],
    "ci-matrix": lambda d, w: ["ci-matrix", *_maybe(d, d.draw(BUILDER_KERNELS)),
                               *_maybe(d, "--github-output")],
    "merge-artifacts": lambda d, w: ["merge-artifacts", *d.draw(
        st.lists(path_values(w, "dir"), min_size=1, max_size=2))],
    "build": lambda d, w: ["build", *_maybe(d, d.draw(BUILDER_KERNELS)), "--no-import-check",
                           *_maybe(d, "--variant", d.draw(hostile("torch-cpu", "*"))),
                           *_maybe(d, "--shard", d.draw(hostile("1/2", "0/0", "3/2")))],
    "check": lambda d, w: ["check", *_maybe(d, d.draw(BUILDER_KERNELS)), "--no-import-check",
                           *_maybe(d, "--abi", d.draw(st.sampled_from(["host", "x"])))],
    # Never a real kernel: running a kernel's tests needs its torch environments.
    "test": lambda d, w: ["test", d.draw(hostile())],
    "publish": lambda d, w: ["publish", *_maybe(d, d.draw(BUILDER_KERNELS)),
                             *_maybe(d, "--hub", d.draw(hub_values(w))),
                             *_maybe(d, "--dry-run"),
                             *_maybe(d, "--sign", d.draw(path_values(w, "file"))),
                             *_maybe(d, d.draw(st.sampled_from(["--drop-stale",
                                                                "--carry-stale"])))],
    "init": lambda d, w: ["init", d.draw(hostile("my-kernel")),
                          *_maybe(d, d.draw(path_values(w, "dir")))],
    # Never a real kernel, and always -c: a shell needs the kernel's torch environment,
    # and without -c it would wait for a terminal.
    "shell": lambda d, w: ["shell", d.draw(hostile()), "-c", "true",
                           *_maybe(d, "--variant", d.draw(hostile("torch-cpu", "*")))],
    # Always --check: a rewrite would rename the world's relu_py for every later example.
    "migrate": lambda d, w: ["migrate", "--check", *_maybe(d, d.draw(BUILDER_KERNELS))],
    "build-and-publish": lambda d, w: [
        "build-and-publish", *_maybe(d, d.draw(BUILDER_KERNELS)), "--dry-run",
        "--no-import-check", *_maybe(d, "--hub", d.draw(hub_values(w))),
        *_maybe(d, "--variant", d.draw(hostile("torch-cpu", "*"))),
        *_maybe(d, "--branch", d.draw(hostile("v1"))),
        *_maybe(d, "--variant-names", d.draw(hostile("both")))],
}
"""Every ``builder`` subcommand; its global options come from :func:`builder_globals`."""


def builder_globals(d: st.DataObject, w: World) -> list[str]:
    project = d.draw(st.one_of(st.just(str(w.project)), st.just(str(w.project)),
                               path_values(w, "dir"), path_values(w, "file")))
    out = d.draw(st.sampled_from([None, str(w.out), str(w.files["empty.toml"]), "a\x00b",
                                  "~nosuchuser/out"]))
    return ["--project", project, *(["--out", out] if out else [])]


SERVE_OPTIONS: dict[str, Callable[[st.DataObject, World], list[str]]] = {
    "--hub": lambda d, w: ["--hub", d.draw(st.sampled_from([
        str(w.root / "serve-hub"), str(w.files["empty.toml"]), "~nosuchuser/hub", "a\x00b",
        "a" * 5000, f"http://u:{SECRET}@{w.dead_url[7:]}"]))],
    "--tokens": lambda d, w: ["--tokens", d.draw(path_values(w, "file"))],
    "--port": lambda d, w: ["--port", d.draw(hostile("8900", "-1", "99999999"))],
    "--host": lambda d, w: ["--host", d.draw(hostile("127.0.0.1"))],
    "--lfs-threshold": lambda d, w: ["--lfs-threshold", d.draw(hostile("0", "-5"))],
    "--public-url": lambda d, w: ["--public-url", d.draw(hub_values(w))],
    "--no-anonymous-reads": lambda d, w: ["--no-anonymous-reads"],
    "--log-level": lambda d, w: ["--log-level", d.draw(hostile("info"))],
}


def _report(found: dict[str, str]) -> str:
    return f"{len(found)} distinct failures:\n\n" + "\n\n".join(
        f"== {key}\n{detail}" for key, detail in sorted(found.items()))


def test_every_subcommand_is_fuzzed() -> None:
    from kernelhub.cli import build_parser
    from kernelhub.optional_commands import installed
    from kernelhub_builder.cli import _parser
    from kernelhub_serve.cli import parser as serve_parser

    commands = set(build_parser().get_default("commands")) | set(installed()) - {"serve"}
    assert commands <= set(KERNELHUB), sorted(commands - set(KERNELHUB))
    builder_commands = next(a for a in _parser()._actions
                            if isinstance(a.choices, dict)).choices
    assert set(builder_commands) <= set(BUILDER), sorted(set(builder_commands) - set(BUILDER))
    serve_options = {o for a in serve_parser()._actions for o in a.option_strings
                     if o.startswith("--")} - {"--help"}
    assert serve_options <= set(SERVE_OPTIONS), sorted(serve_options - set(SERVE_OPTIONS))


def _fuzz(world: World, main: Callable[[list[str]], int],
          argv: Callable[[st.DataObject, World], list[str]]) -> None:
    """Run ``main`` on the drawn arguments and settings; fail listing every distinct problem."""
    found: dict[str, str] = {}

    @FUZZ
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        env = data.draw(environments(world))
        run = run_command(main, argv(data, world), env, world.fresh("cwd"))
        if os.environ.get("KERNELHUB_FUZZ_VERBOSE"):
            print("ran", repr(run.argv)[:200], run.code, type(run.crash).__name__,
                  repr((run.err or run.out)[-200:]), file=sys.__stderr__)
        for key, detail in problems(run, world).items():
            found.setdefault(key, detail)

    one()
    assert not found, _report(found)


@pytest.mark.parametrize("command", sorted(KERNELHUB))
def test_kernelhub_command_line(world: World, command: str) -> None:
    from kernelhub.cli import main

    _fuzz(world, main, KERNELHUB[command])


def test_kernelhub_words_in_any_order(world: World) -> None:
    from kernelhub.cli import main

    _fuzz(world, main, lambda d, w: d.draw(st.lists(
        st.one_of(st.sampled_from(sorted(KERNELHUB)), hostile()), max_size=4)))


@pytest.mark.parametrize("command", sorted(BUILDER))
def test_builder_command_line(world: World, command: str) -> None:
    from kernelhub_builder.cli import main

    def argv(d: st.DataObject, w: World) -> list[str]:
        if command == "init":
            return BUILDER[command](d, w)
        return [*builder_globals(d, w), *BUILDER[command](d, w)]

    _fuzz(world, main, argv)


def test_serve_arguments(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kernelhub serve`` up to the point where it would start listening: uvicorn's
    ``run`` is the one thing replaced, by a recorder (the server itself is tested in
    tests/serve)."""
    import uvicorn
    from kernelhub_serve.cli import main

    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(app))

    def argv(d: st.DataObject, w: World) -> list[str]:
        names = d.draw(st.lists(st.sampled_from(sorted(SERVE_OPTIONS)), max_size=4,
                                unique=True))
        return [x for name in names for x in SERVE_OPTIONS[name](d, w)]

    _fuzz(world, main, argv)


def run_once(main: Callable[[Sequence[str]], int], argv: list[str], world: World,
             **env: str | None) -> Run:
    """One command in the fuzz environment (for tests that pin a single probe)."""
    base: dict[str, str | None] = {
        "KERNELHUB_CACHE": str(world.root / "cache"),
        "KERNELHUB_CONFIG": str(world.root / "no-config.toml"),
        "KERNELHUB_HUB": str(world.hub), "HOME": str(world.root / "home"),
        "KERNELHUB_TRUSTED_ORGS": ORG, "HF_TOKEN": None, "NO_PROXY": "127.0.0.1",
        "HF_HOME": str(world.root / "hf-home"),
        "KERNELHUB_BUILDER_HOME": str(world.root / "builder-home"),
    }
    return run_command(main, argv, {**base, **env}, world.fresh("cwd"))


# -- the probes, one test each (issue 23) -------------------------------------
#
# Each was a raw traceback, a leaked credential, a forged line or lost files before the
# fixes; the fuzzing above finds their kind, these pin each one by name.


def _kernelhub(argv: list[str], world: World, **env: str | None) -> Run:
    from kernelhub.cli import main

    return run_once(main, argv, world, **env)


def _builder(argv: list[str], world: World, **env: str | None) -> Run:
    from kernelhub_builder.cli import main

    return run_once(main, argv, world, **env)


def assert_one_line_error(run: Run, world: World) -> str:
    """``run`` failed with a usage or kernelhub error said in one line; returns it."""
    assert run.crash is None, run.trace
    assert run.code in (1, 2), (run.code, run.out, run.err)
    assert not problems(run, world), _report(problems(run, world))
    errors = [x for x in run.err.splitlines() if "error:" in x]
    assert len(errors) == 1, run.err
    return errors[0]


def _dead(world: World) -> str:
    return world.dead_url[len("http://"):]


@pytest.mark.parametrize("how", ["KERNELHUB_HUB userinfo", "--hub userinfo", "--hub ?token=",
                                 "HF_ENDPOINT userinfo", "HF_ENDPOINT ?token="])
def test_probe_credentials_in_hub_urls_are_never_printed(world: World, how: str) -> None:
    urls = {"userinfo": f"http://user:{SECRET}@{_dead(world)}",
            "?token=": f"{world.dead_url}/?token={SECRET}"}
    where, _, kind = how.partition(" ")
    argv, env = ["variants", REPO], {}
    if where == "--hub":
        argv += ["--hub", urls[kind]]
    elif where == "KERNELHUB_HUB":
        env["KERNELHUB_HUB"] = urls[kind]
    else:
        env["HF_ENDPOINT"] = urls[kind]
        argv += ["--hub", "hf"]
    line = assert_one_line_error(_kernelhub(argv, world, **env), world)
    assert SECRET not in line


def test_probe_builder_publish_never_prints_the_hubs_credentials(world: World) -> None:
    run = _builder(["--project", str(world.project), "publish", "relu_py", "--hub",
                    f"http://user:{SECRET}@{_dead(world)}"], world)
    assert SECRET not in assert_one_line_error(run, world)


def test_probe_api_errors_and_their_chain_never_hold_credentials(world: World) -> None:
    from kernelhub import get_kernel
    from kernelhub.errors import KernelHubError

    for hub in (f"http://user:{SECRET}@{_dead(world)}", f"{world.hostile_url}/x?token={SECRET}"):
        with _environment({"KERNELHUB_CACHE": str(world.root / "cache"), "HF_TOKEN": None,
                           "KERNELHUB_TRUSTED_ORGS": ORG}, world.root), \
                pytest.raises(KernelHubError) as caught:
            get_kernel(REPO, version=1, hub=hub)
        text = "".join(traceback.format_exception(caught.value))
        assert SECRET not in text, text


def test_probe_cache_clear_in_a_home_directory_loses_nothing(world: World) -> None:
    before = sorted(p.relative_to(world.sentinel_home) for p in world.sentinel_home.rglob("*"))
    line = assert_one_line_error(
        _kernelhub(["cache", "clear"], world, KERNELHUB_CACHE=str(world.sentinel_home)), world)
    assert "nothing was removed" in line
    assert sorted(p.relative_to(world.sentinel_home)
                  for p in world.sentinel_home.rglob("*")) == before


def test_probe_cache_clear_when_the_cache_root_is_a_file(world: World) -> None:
    line = assert_one_line_error(
        _kernelhub(["cache", "clear"], world, KERNELHUB_CACHE=str(world.files["empty.toml"])),
        world)
    assert "not a directory" in line
    assert world.files["empty.toml"].is_file()


def test_probe_kernelize_none_is_a_kernelhub_error() -> None:
    from kernelhub import kernelize
    from kernelhub.errors import KernelHubError

    with pytest.raises(KernelHubError, match=r"torch\.nn\.Module"):
        kernelize(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["a\x00b", "a" * 5000, "~nosuchuser/kernel"])
def test_probe_local_paths_in_the_api_are_kernelhub_errors(path: str) -> None:
    from kernelhub import get_local_kernel
    from kernelhub.errors import KernelHubError

    with pytest.raises(KernelHubError) as caught:
        get_local_kernel(path)
    assert len(str(caught.value).splitlines()) == 1


PROBES: dict[str, Callable[[World], tuple[str, list[str], dict[str, str | None]]]] = {
    "--hub 'http://[::1'": lambda w: ("kernelhub", ["versions", REPO, "--hub", "http://[::1"], {}),
    "a 5000-character name": lambda w: ("kernelhub", ["info", "a" * 5000], {}),
    "a 5000-character hub path": lambda w: ("kernelhub", ["variants", REPO, "--hub", "a" * 5000],
                                            {}),
    "kernelhub init into a file": lambda w: (
        "kernelhub", ["init", "my-kernel", str(w.files["empty.toml"] / "sub")], {}),
    "builder init into a file": lambda w: (
        "builder", ["init", "my-kernel", str(w.files["empty.toml"] / "sub")], {}),
    "lock with [tool] kernels = 5": lambda w: (
        "kernelhub", ["lock", str(w.dirs["pyproject-tool-int"])], {}),
    "lock with tool = 5": lambda w: (
        "kernelhub", ["lock", str(w.dirs["pyproject-tool-scalar"])], {}),
    "lock with deeply nested pyproject.toml": lambda w: (
        "kernelhub", ["lock", str(w.dirs["pyproject-deep-pyproject"])], {}),
    "list-variants with deeply nested kernels.toml": lambda w: (
        "builder", ["--project", str(w.dirs["project-deep-arrays"]), "list-variants"], {}),
    "list-variants with deeply nested build.toml": lambda w: (
        "builder", ["--project", str(w.dirs["project-deep-build-toml"]), "list-variants"], {}),
    "a deeply nested config.toml": lambda w: (
        "kernelhub", ["variants", REPO], {"KERNELHUB_CONFIG": str(w.files["deep-arrays.toml"])}),
    "a 5000-digit number in metadata.json": lambda w: (
        "kernelhub", ["info", str(w.dirs["variant-big-int"])], {}),
    "a NUL byte in a local path": lambda w: ("kernelhub", ["info", "./a\x00b"], {}),
    "~nosuchuser in a local path": lambda w: ("kernelhub", ["info", "~nosuchuser/kernel"], {}),
    "~nosuchuser as the cache": lambda w: (
        "kernelhub", ["cache", "clear"], {"KERNELHUB_CACHE": "~nosuchuser/cache"}),
    "/dev/zero as config": lambda w: (
        "kernelhub", ["variants", REPO], {"KERNELHUB_CONFIG": "/dev/zero"}),
    "/dev/zero as allowed-signers": lambda w: (
        "kernelhub", ["variants", REPO], {"KERNELHUB_ALLOWED_SIGNERS": "/dev/zero",
                                          "KERNELHUB_REQUIRE_SIGNED": "*"}),
    "builder publish --hub <a regular file>": lambda w: (
        "builder", ["--project", str(w.project), "publish", "relu_py", "--hub",
                    str(w.files["empty.toml"])], {}),
}
"""The issue's raw tracebacks from the command lines, each an input and its command."""


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_probe_is_one_line(world: World, probe: str) -> None:
    which, argv, env = PROBES[probe](world)
    run = (_kernelhub if which == "kernelhub" else _builder)(argv, world, **env)
    assert_one_line_error(run, world)


def test_probe_info_on_metadata_whose_provenance_is_a_string(world: World) -> None:
    run = _kernelhub(["info", str(world.dirs["variant-provenance-str"])], world)
    assert "provenance" in assert_one_line_error(run, world)


def test_probe_info_prints_metadata_strings_escaped(world: World) -> None:
    run = _kernelhub(["info", str(world.dirs["variant-hostile-strings"])], world)
    assert run.crash is None, run.trace
    assert not problems(run, world), _report(problems(run, world))
    assert "\\x1b" in run.out or "\\n" in run.out, run.out  # shown, escaped


@pytest.mark.parametrize("argv", [["versions", REPO], ["variants", REPO, "--all-versions"],
                                  ["variants", REPO, "--json"]])
def test_probe_a_hostile_hubs_ref_names_cannot_forge_lines(world: World, argv: list[str]) -> None:
    run = _kernelhub([*argv, "--hub", world.hostile_url], world)
    assert run.crash is None, run.trace
    assert not problems(run, world), _report(problems(run, world))
    assert FORGED in run.out + run.err or run.code == 1, (run.out, run.err)
