"""The Nix flake against the builder: one matrix, the same bytes, shared through a cache.

These run the real Nix (Debian's nix-bin, set up by ci/setup-nix) on the repository's
flake. Heavy steps build one variant of each kind: compiled CPU (activation, torch 2.13),
pure Python (triton-activation torch-cuda), stable ABI (rmsnorm CPU) and, where nvcc is
installed, CUDA (activation torch 2.14 cu130); all are also what the e2e workspace
builds, so the `builder build` side costs nothing extra in a full run.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from e2e import RELEASES, REPO, Workspace, builder, run, torch_python
from kernelhub.formats.provenance import NULL_COMMIT

COMPILED = ("activation", "torch213-cxx11-cpu-x86_64-linux")
PURE = ("triton-activation", "torch-cuda")
STABLE_ABI = ("rmsnorm", "torch-stable-abi213-cpu-x86_64-linux")
CUDA = ("activation", "torch214-cxx11-cu130-x86_64-linux")


def _compared() -> tuple[tuple[str, str], ...]:
    """One variant of each kind `.#kernels` builds; CUDA where the builder finds nvcc."""
    from kernelhub_builder.plan.toolchains import detect_toolchains

    cuda = (CUDA,) if detect_toolchains().nvcc is not None else ()
    return (COMPILED, PURE, STABLE_ABI, *cuda)

pytestmark = pytest.mark.skipif(
    shutil.which("nix") is None, reason="nix is not installed: run ci/setup-nix (ci/setup does)"
)


def nix(*args: str, cwd: Path = REPO, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["nix", *args], cwd=cwd, check=check)


def nix_build(attr: str, *extra: str, cwd: Path = REPO, check: bool = True
              ) -> subprocess.CompletedProcess[str]:
    return nix("build", "--no-link", "--json", f".#{attr}", *extra, cwd=cwd, check=check)


def out_path(proc: subprocess.CompletedProcess[str]) -> Path:
    return Path(json.loads(proc.stdout)[0]["outputs"]["out"])


@pytest.fixture(scope="module")
def host_toolchain() -> None:
    """The machine's host toolchain for the flake, as the README's set-up makes it: the
    builder Python for this checkout's dependencies and every torch env of the matrix
    (Nix builds use them read-only, never create them)."""
    run(["bash", str(REPO / "ci" / "setup-nix")])


@pytest.fixture(scope="module")
def nix_variants(host_toolchain: None) -> dict[tuple[str, str], Path]:
    keys = _compared()
    built = json.loads(nix("build", "--no-link", "--json", *(f".#{k}-{v}" for k, v in keys)
                           ).stdout)
    # Nix lists the results in its own order; a store path's name is "<kernel>-<variant>".
    outs = {Path(b["outputs"]["out"]).name.split("-", 1)[1]: Path(b["outputs"]["out"])
            for b in built}
    return {(k, v): outs[f"{k}-{v}"] for k, v in keys}


@pytest.fixture(scope="module")
def builder_variants(workspace: Workspace) -> dict[tuple[str, str], Path]:
    """The same variants from `builder build` (free when the e2e build already ran)."""
    keys = _compared()
    for kernel in dict.fromkeys(k for k, _ in keys):
        builder(workspace, "build", kernel,
                *(arg for k, v in keys if k == kernel for arg in ("--variant", v)))
    return {(k, v): workspace.out / k / v for k, v in keys}


def files_of(variant_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(variant_dir).as_posix(): p.read_bytes()
        for p in sorted(variant_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def head_commit(repo: Path) -> str:
    return run(["git", "-C", str(repo), "rev-parse", "HEAD"]).stdout.strip()


def tree_is_clean(repo: Path) -> bool:
    return run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]
               ).stdout.strip() == ""


def without_kernel_provenance(metadata: dict) -> dict:
    """metadata.json minus provenance.kernel: the one part that names the checkout's state."""
    data = json.loads(json.dumps(metadata))
    data.get("provenance", {}).pop("kernel", None)
    return data


def test_host_toolchain_names_no_checkout(host_toolchain: None) -> None:
    """Builds from any checkout run with the Python named after their own dependencies
    (the flake and the builder compute the same name), never with the .venv of whichever
    checkout ran the set-up last."""
    from kernelhub_builder.compile.nix_host import python_dir, python_key
    from kernelhub_builder.manifest import read_toml as load_toml

    key = python_key(REPO / "builder" / "pyproject.toml", REPO / "loader" / "pyproject.toml")
    assert nix("eval", "--raw", ".#lib.hostPythonKey").stdout == key
    python = python_dir(key) / "bin" / "python"
    assert python.exists()
    # That Python has no kernelhub-builder installed: the builder's version (hashed into
    # ids) comes from the code's own tree, as in the store.
    said = run([str(python), "-c", "import kernelhub_builder as b; print(b.__version__)"],
               env={"PYTHONPATH": f"{REPO / 'builder' / 'src'}:{REPO / 'loader' / 'src'}",
                    "PATH": "/usr/bin:/bin"})
    assert said.stdout.strip() == load_toml(REPO / "builder" / "pyproject.toml")["project"]["version"]
    from kernelhub_builder.compile.nix_host import host_env_file

    recorded = host_env_file().read_text()
    assert str(REPO) not in recorded and ".venv" not in recorded
    drv = _derivation(_drv_path(f"packages.x86_64-linux.{COMPILED[0]}-{COMPILED[1]}"))
    (env,) = (d["env"] for d in drv.values())
    assert env["pythonKey"] == key
    assert not any(str(REPO) in value for value in env.values())


def test_flake_variants_equal_builder_list_variants() -> None:
    from_nix = json.loads(nix("eval", "--json", ".#variants").stdout)
    from_builder = json.loads(
        run([str(REPO / ".venv" / "bin" / "builder"), "--project", str(REPO),
             "list-variants", "--json"]).stdout
    )
    keys = ("variant", "kind", "backend", "compute", "system", "torch")
    assert sorted(from_nix) == sorted(from_builder)
    for kernel, rows in from_builder.items():
        assert [{k: r[k] for k in keys} for r in from_nix[kernel]] == \
            [{k: r[k] for k in keys} for r in rows], kernel
    # The list covers what this host cannot build too (ROCm, Metal, other systems).
    names = {r["variant"] for r in from_nix["activation"]}
    assert {"torch213-metal-aarch64-darwin", "torch213-cxx11-rocm70-x86_64-linux"} <= names


def _flake_copy(tmp_path: Path, build_toml: str) -> Path:
    """A copy of the flake with one small kernel whose build.toml is ``build_toml``."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "nix", root / "nix")
    shutil.copy(REPO / "flake.nix", root / "flake.nix")
    shutil.copy(REPO / "flake.lock", root / "flake.lock")
    (root / "kernels.toml").write_text('kernels = ["tiny"]\n')
    kernel = root / "kernels-src" / "tiny"
    (kernel / "torch-ext" / "tiny").mkdir(parents=True)
    (kernel / "torch-ext" / "tiny" / "__init__.py").write_text("")
    (kernel / "torch-ext" / "torch_binding.cpp").write_text("")
    (kernel / "build.toml").write_text(build_toml)
    return root


def _buildable_tiny_flake(tmp_path: Path) -> Path:
    """A flake copy with the builder, the project's matrix and one pure-Python kernel
    never built before (a fresh nonce in its code): its ``torch-cpu`` variant builds
    through host-build.sh in seconds and is never already in the store."""
    root = _flake_copy(tmp_path, '[general]\nname = "tiny"\nbackends = ["cpu"]\n'
                                 "[torch-noarch]\n")
    for package in ("builder", "loader"):
        shutil.copytree(REPO / package / "src", root / package / "src",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(REPO / package / "pyproject.toml", root / package / "pyproject.toml")
    project = (REPO / "kernels.toml").read_text().split("[releases]")[0].splitlines()
    (root / "kernels.toml").write_text("".join(
        ('kernels = ["tiny"]' if line.startswith("kernels =") else line) + "\n"
        for line in project))
    (root / "kernels-src" / "tiny" / "torch-ext" / "tiny" / "__init__.py").write_text(
        f"NONCE = {uuid.uuid4().hex!r}\n")
    return root


def _in_mount_namespace(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                           f"set -eu\n{script}"], env=env, text=True, capture_output=True)


def test_host_toolchain_is_found_whatever_home_is(tmp_path: Path, host_toolchain: None
                                                  ) -> None:
    """CI systems, containers and test harnesses set HOME to somewhere other than the
    user database's home. Set-up must record the host toolchain where a Nix build (which
    sees no HOME) looks, and a build that finds nothing must say where it looked and how
    to fix it. Run in a private mount namespace whose database home holds no
    nix-host.env (a tmpfs over its directory), so the machine's own file cannot stand in."""
    from kernelhub_builder.plan.torch_env import builder_home

    if shutil.which("unshare") is None or _in_mount_namespace("true", dict(os.environ)
                                                              ).returncode != 0:
        pytest.skip("no private mount namespace here (unshare --mount)")
    config_dir = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".config" / "kernelhub"
    config_dir.mkdir(parents=True, exist_ok=True)
    hide = f"mount -t tmpfs kernelhub-test {config_dir}\n"
    root = _buildable_tiny_flake(tmp_path)
    elsewhere = tmp_path / "ci-home"
    elsewhere.mkdir()
    # The torch envs and builder Python stay the machine's (set-up made them).
    env = {**os.environ, "HOME": str(elsewhere), "KERNELHUB_BUILDER_HOME": str(builder_home()),
           "KERNELHUB_BUILDER_ENVS_READ_ONLY": "1"}  # as they are: no loader reinstall
    build = f"nix build --no-link --json 'path:{root}#tiny-torch-cpu'\n"

    missing = _in_mount_namespace(hide + build, env)
    assert missing.returncode != 0
    said = next(line for line in missing.stderr.splitlines()
                if "no host toolchain for Nix builds" in line)
    assert f"{config_dir}/nix-host.env" in said and "/etc/kernelhub/nix-host.env" in said
    assert "run ci/setup-nix" in said

    found = _in_mount_namespace(f"{hide}bash {REPO / 'ci' / 'setup-nix'}\n"
                                f"test -f {config_dir}/nix-host.env\n{build}", env)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "not under HOME=" in found.stdout
    assert not (elsewhere / ".config" / "kernelhub" / "nix-host.env").exists()
    built = out_path(subprocess.CompletedProcess([], 0, found.stdout.splitlines()[-1], ""))
    assert json.loads((built / "metadata.json").read_text())["name"] == "tiny"


def test_host_build_script_reads_where_set_up_writes() -> None:
    """nix/host-build.sh (shell) and nix_host.py (Python) name the same two files."""
    from kernelhub_builder.compile.nix_host import ENV_FILE_IN_HOME, SYSTEM_ENV_FILE

    script = (REPO / "nix" / "host-build.sh").read_text()
    assert f'"${{home:-/nonexistent}}/{ENV_FILE_IN_HOME}" {SYSTEM_ENV_FILE}; do' in script
    assert 'home=$(getent passwd "$(id -u)"' in script


@pytest.mark.parametrize(
    ("build_toml", "expected"),
    [
        ('[general]\nname = "tiny"\nbackends = ["cpux"]\n[torch-noarch]\n',
         "kernels-src/tiny/build.toml: general.backends: unknown backend 'cpux'"),
        ('[general]\nname = "tiny"\nbackends = ["cpu"]\n'
         '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\nminver = "two"\n'
         '[kernel.tiny_cpu]\nbackend = "cpu"\nsrc = ["torch-ext/torch_binding.cpp"]\n',
         "kernels-src/tiny/build.toml: torch.minver: 'two' is not a torch version such as "
         "'2.13'"),
        ('[general]\nname = "tiny"\nbackends = ["cpu", "cpu"]\n[torch-noarch]\n',
         "kernels-src/tiny/build.toml: general.backends: has duplicates: ['cpu', 'cpu']"),
        ('[general]\nname = "Tiny Kernel"\n[torch-noarch]\n',
         "kernels-src/tiny/build.toml: general.name: 'Tiny Kernel' is not a kernel name"),
    ],
)
def test_bad_build_toml_is_one_error_naming_file_and_key(
    tmp_path: Path, build_toml: str, expected: str
) -> None:
    root = _flake_copy(tmp_path, build_toml)
    proc = nix("eval", "--json", f"path:{root}#variants", check=False)
    assert proc.returncode != 0
    first = proc.stderr.strip().splitlines()
    message = next(line for line in first if line.startswith("error:"))
    assert expected in message, proc.stderr
    assert "while evaluating" not in proc.stderr  # no stack trace, just the message
    # The builder says the same words about the same file and key.
    said = run([str(REPO / ".venv" / "bin" / "builder"), "--project", str(root),
                "list-variants"], check=False)
    assert said.returncode == 1
    assert expected.split(": ", 1)[1].split(";")[0] in " ".join((said.stdout + said.stderr).split())


def test_nix_build_equals_builder_build(
    nix_variants: dict[tuple[str, str], Path], builder_variants: dict[tuple[str, str], Path]
) -> None:
    """Same ids, same digests, same bytes; metadata differs at most in provenance.kernel."""
    for key, from_nix in nix_variants.items():
        from_builder = builder_variants[key]
        nix_meta = json.loads((from_nix / "metadata.json").read_text())
        builder_meta = json.loads((from_builder / "metadata.json").read_text())
        assert nix_meta["id"] == builder_meta["id"], key
        assert nix_meta["digest"] == builder_meta["digest"], key
        assert without_kernel_provenance(nix_meta) == without_kernel_provenance(builder_meta)
        nix_files = files_of(from_nix)
        builder_files = files_of(from_builder)
        nix_files.pop("metadata.json")
        builder_files.pop("metadata.json")
        assert nix_files == builder_files, key
        # The store has no .git: the flake passed its revision in.
        if tree_is_clean(REPO):
            assert nix_meta["provenance"]["kernel"] == {"commit": head_commit(REPO),
                                                        "dirty": False}
        else:  # Nix 2.8 gives a dirty tree no revision; newer Nix the dirty one's
            kernel = nix_meta["provenance"]["kernel"]
            assert kernel["dirty"] is True
            # a full id either way: kernels 0.19 refuses a kernel part without one
            assert kernel["commit"] in (NULL_COMMIT, head_commit(REPO))


def test_no_op_rebuild_is_cached(nix_variants: dict[tuple[str, str], Path]) -> None:
    again = nix_build(f"{COMPILED[0]}-{COMPILED[1]}")
    assert out_path(again) == nix_variants[COMPILED]
    assert "building" not in again.stderr


def test_two_checkouts_build_identical_bytes(
    tmp_path: Path, builder_variants: dict[tuple[str, str], Path]
) -> None:
    """A clone at another path, built into another build dir: the same .so and metadata."""
    dirty = run(["git", "-C", str(REPO), "status", "--porcelain", "--", "kernels-src/activation",
                 "builder", "loader", "kernels.toml"]).stdout.strip()
    if dirty:
        pytest.skip(f"uncommitted changes to what the variant hashes (a clone cannot have "
                    f"them): {dirty.splitlines()[0]}")
    clone = tmp_path / "another" / "much-longer-checkout-path" / "kernelhub"
    run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)])
    other = Workspace(root=tmp_path, out=tmp_path / "elsewhere-build", hub=tmp_path / "hub")
    kernel, variant = COMPILED
    builder(other, "build", kernel, "--variant", variant, project=clone)
    mine = builder_variants[COMPILED]
    theirs = other.out / kernel / variant
    assert files_of(theirs).keys() == files_of(mine).keys()
    so = next(p.name for p in mine.iterdir() if p.suffix == ".so")
    assert (theirs / so).read_bytes() == (mine / so).read_bytes()
    assert str(REPO).encode() not in (mine / so).read_bytes()
    mine_meta = json.loads((mine / "metadata.json").read_text())
    theirs_meta = json.loads((theirs / "metadata.json").read_text())
    # Only "dirty" may differ: the clone is clean, this checkout may have other edits.
    mine_meta["provenance"]["kernel"].pop("dirty")
    theirs_meta["provenance"]["kernel"].pop("dirty")
    assert theirs_meta == mine_meta


def _keys(tmp_path: Path) -> tuple[Path, str]:
    """A signing key made by `nix key generate-secret` and its public half."""
    secret = tmp_path / "cache-key.sec"
    secret.write_text(nix("key", "generate-secret", "--key-name", "kernelhub-test-1").stdout)
    public = subprocess.run(["nix", "key", "convert-secret-to-public"], input=secret.read_text(),
                            text=True, capture_output=True, check=True)
    return secret, public.stdout.strip()


def _substitute(tmp_path: Path, name: str, cache: Path, public_key: str, attr: str
                ) -> subprocess.CompletedProcess[str]:
    """Build ``attr`` into a fresh store that may only substitute (--max-jobs 0)."""
    return nix_build(attr, "--store", str(tmp_path / name), "--substituters", f"file://{cache}",
                     "--trusted-public-keys", public_key, "--max-jobs", "0", check=False)


def _valid_in(tmp_path: Path, name: str, path: Path) -> bool:
    return nix("path-info", "--store", str(tmp_path / name), str(path), check=False
               ).returncode == 0


def test_binary_cache_substitutes_signed_and_refuses_unsigned_or_tampered(
    tmp_path: Path, nix_variants: dict[tuple[str, str], Path]
) -> None:
    attr = f"{COMPILED[0]}-{COMPILED[1]}"
    path = nix_variants[COMPILED]
    secret, public_key = _keys(tmp_path)
    signed = tmp_path / "signed-cache"
    nix("copy", "--to", f"file://{signed}?secret-key={secret}&compression=none", str(path))

    got = _substitute(tmp_path, "store-a", signed, public_key, attr)
    assert got.returncode == 0, got.stderr
    assert out_path(got) == path
    assert "copying path" in got.stderr and "from 'file://" in got.stderr
    assert "building" not in got.stderr
    substituted = tmp_path / "store-a" / path.relative_to("/")
    assert files_of(substituted) == files_of(path)

    unsigned = tmp_path / "unsigned-cache"
    nix("copy", "--to", f"file://{unsigned}?compression=none", str(path))
    refused = _substitute(tmp_path, "store-b", unsigned, public_key, attr)
    assert refused.returncode != 0
    assert "is not signed by any of the keys" in refused.stderr
    assert not _valid_in(tmp_path, "store-b", path)

    tampered = tmp_path / "tampered-cache"
    shutil.copytree(signed, tampered)
    (nar,) = (tampered / "nar").glob("*.nar")
    data = bytearray(nar.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit inside the .so
    nar.write_bytes(bytes(data))
    refused = _substitute(tmp_path, "store-c", tampered, public_key, attr)
    assert refused.returncode != 0
    assert "hash mismatch" in refused.stderr
    assert not _valid_in(tmp_path, "store-c", path)


def _hub_tree(hub: Path, repo_id: str) -> dict[str, str]:
    git_dir = hub / "models" / repo_id
    listing = run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "v1"]).stdout
    return {line.split("\t", 1)[1]: line.split()[2] for line in listing.splitlines()}


def test_publish_from_nix_result_equals_publish_from_build_dir(
    tmp_path: Path, workspace: Workspace, nix_variants: dict[tuple[str, str], Path],
    builder_variants: dict[tuple[str, str], Path],
) -> None:
    kernel, variant = COMPILED
    result = tmp_path / "result"  # what `nix build .#activation` lays out: links into the store
    (result / kernel).mkdir(parents=True)
    (result / kernel / variant).symlink_to(nix_variants[COMPILED])
    build_dir = tmp_path / "build"
    shutil.copytree(builder_variants[COMPILED], build_dir / kernel / variant)

    hubs = {}
    for name, source in (("from-nix", result), ("from-build", build_dir)):
        ws = Workspace(root=tmp_path, out=source, hub=tmp_path / name)
        run([str(REPO / ".venv" / "bin" / "builder"), "--project", str(REPO), "publish", kernel,
             "--hub", str(ws.hub), "--build-dir", str(source)], env=ws.env())
        hubs[name] = _hub_tree(ws.hub, f"kernels-community/{kernel}")
    meta = f"build/{variant}/metadata.json"
    assert hubs["from-nix"].keys() == hubs["from-build"].keys()
    differing = {k for k in hubs["from-nix"] if hubs["from-nix"][k] != hubs["from-build"][k]}
    # Equal bytes everywhere; metadata.json too when the checkout is clean (the flake and
    # the builder then record the same commit, dirty = false).
    assert differing <= ({meta} if not tree_is_clean(REPO) else set())


def _derivation(drv_path: str, recursive: bool = False) -> dict:
    args = ["show-derivation", drv_path] + (["--recursive"] if recursive else [])
    return json.loads(nix(*args).stdout)


def _drv_path(attr: str) -> str:
    return nix("eval", "--raw", f".#{attr}.drvPath").stdout.strip()


def test_hermetic_derivations_instantiate_offline_with_nixpkgs_names() -> None:
    """Hermetic outputs instantiate against the stub set (nixpkgs' attribute names); a CUDA
    variant depends on nvcc and the torch of its minor, a CPU one on neither nvcc nor the
    other torch, and both read the very inputs the host derivations read. Never built."""
    stub = "lib.hermeticStub.x86_64-linux"
    cuda = _derivation(_drv_path(f"{stub}.activation-torch214-cxx11-cu130-x86_64-linux"),
                       recursive=True)
    cpu = _derivation(_drv_path(f"{stub}.activation-torch213-cxx11-cpu-x86_64-linux"),
                      recursive=True)

    def names(closure: dict) -> set[str]:
        return {Path(p).name.split("-", 1)[1] for p in closure}

    assert {"cuda_nvcc-13.0.drv", "python3-torch-bin-2.14.1.drv"} <= names(cuda)
    assert "python3-torch-2.13.0.drv" in names(cpu)
    assert not {"cuda_nvcc-13.0.drv", "python3-torch-bin-2.14.1.drv"} & names(cpu)
    # A pure-Python variant is import-checked under the newest torch, so it adopts that.
    pure = _derivation(_drv_path(f"{stub}.{PURE[0]}-{PURE[1]}"), recursive=True)
    assert "python3-torch-bin-2.14.1.drv" in names(pure)
    assert "cuda_nvcc-13.0.drv" not in names(pure)
    (pure_drv,) = (v for k, v in pure.items() if k.endswith(f"{PURE[1]}-1.0.0.drv"))
    assert pure_drv["env"]["torchMinor"] == "2.14"
    hermetic = next(v for k, v in cpu.items() if k.endswith(f"cpu-x86_64-linux-{RELEASES['activation']}.drv"))
    host = _derivation(_drv_path(
        "packages.x86_64-linux.activation-torch213-cxx11-cpu-x86_64-linux"), recursive=True)
    host_build = next(v for k, v in host.items() if k.endswith("-build.drv"))
    assert hermetic["env"]["kernelSrc"] == host_build["env"]["kernelSrc"]
    assert hermetic["env"]["builderSrc"] == host_build["env"]["builderSrc"]
    # The real package set is pinned, not floating.
    lock = json.loads((REPO / "flake.lock").read_text())["nodes"]["nixpkgs"]["locked"]
    assert len(lock["rev"]) == 40 and lock["narHash"].startswith("sha256-")


def test_readme_only_change_rebuilds_nothing(tmp_path: Path) -> None:
    """Derivations hash only what the variant id hashes: a kernel README or test edit
    leaves every variant's derivation as it was; a source edit changes that kernel's."""
    root = tmp_path / "tree"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", ".kernelhub", "result*", "__pycache__", ".*cache"))
    attrs = ["activation-torch213-cxx11-cpu-x86_64-linux", "rmsnorm-torch-stable-abi213-cpu-x86_64-linux"]

    def drvs() -> list[str]:
        return [nix("eval", "--raw", f"path:{root}#packages.x86_64-linux.{a}.drvPath").stdout
                for a in attrs]

    before = drvs()
    (root / "kernels-src" / "activation" / "README.md").write_text("changed\n")
    (root / "README.md").write_text("changed\n")
    (root / "kernels-src" / "activation" / "tests" / "new_test.py").write_text("x = 1\n")
    assert drvs() == before
    with (root / "kernels-src" / "activation" / "activation_cpu" / "kernels.h").open("a") as f:
        f.write("\n// changed\n")
    after = drvs()
    assert after[0] != before[0] and after[1] == before[1]


def test_adopted_python_is_a_read_only_torch_env(tmp_path: Path, host_toolchain: None) -> None:
    """The hermetic build's first step, with this host's torch 2.13 Python standing in
    for nixpkgs' (the step is the same): the builder then uses it without pip."""
    python = torch_python("2.13")
    env = {"KERNELHUB_BUILDER_HOME": str(tmp_path / "home"),
           "KERNELHUB_BUILDER_ENVS_READ_ONLY": "1", "PATH": "/usr/bin:/bin"}
    said = run([str(REPO / ".venv" / "bin" / "python"), "-m", "kernelhub_builder.compile.nix_build",
                "adopt-env", "--project-file", str(REPO / "kernels.toml"), "--minor", "2.13",
                "--python", str(python)], env=env)
    assert "torch 2.13.0" in said.stdout
    code = ("from kernelhub_builder.plan.torch_env import ensure_torch_env;"
            "e = ensure_torch_env('2.13', 'torch==2.13.0'); print(e.torch_version, e.root)")
    ready = run([str(REPO / ".venv" / "bin" / "python"), "-c", code], env=env)
    assert ready.stdout.split()[0].startswith("2.13.0")
    # Read-only: a minor nobody adopted is an error, not a pip install.
    missing = run([str(REPO / ".venv" / "bin" / "python"), "-m", "kernelhub_builder.compile.nix_build",
                   "build", "--project-file", str(REPO / "kernels.toml"), "--entry",
                   "activation", "--kernel-src", str(REPO / "kernels-src" / "activation"),
                   "--variant", "torch214-cxx11-cpu-x86_64-linux", "--out",
                   str(tmp_path / "out")], env=env, check=False)
    assert missing.returncode == 1
    assert "no ready torch 2.14 environment" in missing.stderr
