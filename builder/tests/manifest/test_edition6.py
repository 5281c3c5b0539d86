"""build.toml edition 6 read into the same model as edition 5, and every mistake one line
naming the file, the key and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_trees import write_kernel
from kernelhub.deps import KernelDependency
from kernelhub_builder.errors import ManifestError
from kernelhub_builder.manifest import KernelManifest, load_kernel

EDITION_6 = """\
[general]
name = "demo"
version = 2
edition = 6
license = "apache-2.0"
backends = ["cpu", "cuda"]
build-layout = "zip"
kernel-depends = [
  { repo-id = "kernels-community/activation", version = 1 },
  { repo-id = "acme/helpers", revision = "v0.3.0" },
]

[general.cuda]
minver = "12.8"
kernel-depends = [{ repo-id = "kernels-community/flash-attn2", version = 2 }]

[general.hub]
repo-id = "acme/demo"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_cpu]
language = "cpp-cpu"
depends = ["torch"]
src = ["demo_cpu/demo.cpp"]

[kernel.demo_cuda]
language = "cpp-cuda"
depends = ["torch"]
src = ["demo_cuda/demo.cu"]
cuda-capabilities = ["8.0", "9.0"]
cuda-minver = "12.8"
"""


def load(tmp_path: Path, toml: str) -> KernelManifest:
    return load_kernel(write_kernel(tmp_path, toml))


def test_edition_6_reads_into_the_model(tmp_path: Path) -> None:
    kernel = load(tmp_path, EDITION_6)
    assert kernel.edition == 6
    assert kernel.backends == ("cpu", "cuda")
    assert kernel.build_layout == "zip"
    assert [(p.name, p.backend, p.language) for p in kernel.parts] == [
        ("demo_cpu", "cpu", "cpp-cpu"), ("demo_cuda", "cuda", "cpp-cuda")]
    assert kernel.parts[1].cuda_capabilities == ("8.0", "9.0")
    assert kernel.cuda_minver == "12.8"
    assert kernel.kernel_depends == (
        KernelDependency("kernels-community/activation", version=1),
        KernelDependency("acme/helpers", revision="v0.3.0"),
    )
    assert kernel.backend_kernel_depends == {
        "cuda": (KernelDependency("kernels-community/flash-attn2", version=2),)}
    assert [d.repo_id for d in kernel.kernel_depends_for("cuda")] == [
        "kernels-community/activation", "acme/helpers", "kernels-community/flash-attn2"]
    assert [d.repo_id for d in kernel.kernel_depends_for("cpu")] == [
        "kernels-community/activation", "acme/helpers"]
    assert kernel.kernel_depends[1].to_json() == {"repo-id": "acme/helpers",
                                                  "revision": "v0.3.0"}


def test_edition_5_and_6_of_one_kernel_are_one_model(tmp_path: Path) -> None:
    """The edition is the only difference: everything downstream sees the same kernel."""
    six = EDITION_6.replace('build-layout = "zip"\n', "")
    five = (six.replace("edition = 6", "edition = 5")
            .replace('language = "cpp-cpu"', 'backend = "cpu"')
            .replace('language = "cpp-cuda"', 'backend = "cuda"'))
    a, b = load(tmp_path / "five", five), load(tmp_path / "six", six)
    assert a.edition == 5 and b.edition == 6
    assert a.parts == b.parts
    assert a.kernel_depends == b.kernel_depends and a.build_layout == b.build_layout == "files"


NOARCH_6 = """\
[general]
name = "demo"
edition = 6
license = "mit"
backends = ["cuda"]

[torch-noarch]
"""


def test_noarch_capabilities_in_the_ecosystems_spelling(tmp_path: Path) -> None:
    kernel = load(tmp_path, NOARCH_6 + 'cuda_capabilities = ["8.0"]\nrocm_archs = ["gfx942"]\n')
    assert kernel.torch.noarch and kernel.torch.framework == "torch-noarch"
    assert kernel.torch.cuda_capabilities == ("8.0",)
    assert kernel.torch.rocm_archs == ("gfx942",)


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('build-layout = "zip"', 'build-layout = "tar"', "general.build-layout",
         "unknown layout 'tar'; allowed: files, zip"),
        ("edition = 6", "edition = 7", "general.edition", "unsupported edition 7"),
        ('name = "demo"', 'name = "my_demo"', "general.name",
         "not a kernel name in edition 6: use at least two lowercase letters, digits and '-' "
         "(the ecosystem's tools refuse '_'), e.g. 'my-demo'"),
        ('license = "apache-2.0"\n', "", "general.license",
         'missing; edition 6 requires one, e.g. license = "apache-2.0"'),
        ('language = "cpp-cpu"', 'language = "cpu"', "kernel.demo_cpu.language",
         'edition 6 names kinds, e.g. "cpp-cpu"'),
        ('language = "cpp-cpu"', 'language = "cpp-cpuu"', "kernel.demo_cpu.language",
         "did you mean 'cpp-cpu'?"),
        ('language = "cpp-cpu"', 'backend = "cpu"', "kernel.demo_cpu.backend",
         'instead: language = "cpp-cpu" (builder migrate rewrites it)'),
        ('language = "cpp-cpu"', 'language = "cpp-cpu"\ncuda-flags = ["-O3"]',
         "kernel.demo_cpu.cuda-flags", "only applies to cpp-cuda parts; this part is cpp-cpu"),
        ('language = "cpp-cpu"', 'language = "rust-cpu"\ncargo-manifest = "Cargo.toml"',
         "kernel.demo_cpu.depends", "only applies to cpp-cpu or cpp-cuda or cpp-metal"),
        ('[general.cuda]\n', '[general.cuda]\ncuda-capabilities = ["8.0"]\n',
         "general.cuda.cuda-capabilities", "unknown key"),
        ('minver = "12.8"\nkernel', 'minver = "12.8"\ncuda-minver = "12.8"\nkernel',
         "general.cuda.cuda-minver", "unknown key"),
        ("[general]\n", '[general]\nuniversal = false\n', "general.universal",
         "not part of edition 6; remove it"),
        ("[general]\n", '[general]\nrelease = "2.0.0"\n', "general.release",
         "not part of edition 6"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }',
         '{ repo-id = "acme/helpers", revision = "v0.3.0", version = 1 }',
         None, "general: kernel-depends[1]: give exactly one of version and revision"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }', '{ repo-id = "acme/helpers" }',
         None, "general: kernel-depends[1]: give exactly one of version and revision"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }',
         '{ repo-id = "helpers", version = 1 }', None,
         "general: kernel-depends[1]: repo-id 'helpers' is not 'org/name'"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }',
         '{ repo-id = "acme/demo", version = 1 }', "general.kernel-depends[1].repo-id",
         "cannot depend on itself"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }',
         '{ repo-id = "kernels-community/activation", version = 2 }',
         "general.kernel-depends[1].repo-id", "listed twice"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }',
         '{ repo = "acme/helpers", version = 1 }', None,
         "general: kernel-depends[1] must be an object with repo-id and version or revision"),
        ('{ repo-id = "acme/helpers", revision = "v0.3.0" }', '"acme/helpers"', None,
         "general: kernel-depends[1] must be an object with repo-id and version or revision"),
    ],
)
def test_edition_6_mistakes_are_one_line(tmp_path: Path, old: str, new: str, key: str | None,
                                         message: str) -> None:
    assert old in EDITION_6
    with pytest.raises(ManifestError) as info:
        load(tmp_path, EDITION_6.replace(old, new, 1))
    assert info.value.key == key
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ("edition = 6", "edition = 5", "general.build-layout",
         "an edition-6 key; set general.edition = 6 (builder migrate rewrites the file for it)"),
        ('language = "cpp-cpu"', 'backend = "cpu"', "kernel.demo_cuda.language",
         "an edition-6 key"),
    ],
)
def test_edition_6_keys_in_edition_5_say_how_to_move(tmp_path: Path, old: str, new: str,
                                                     key: str, message: str) -> None:
    toml = EDITION_6.replace(old, new, 1)
    if old.startswith("language"):  # the other part still says language: edition 5 lacks it
        toml = toml.replace("edition = 6", "edition = 5").replace('build-layout = "zip"\n', "")
    with pytest.raises(ManifestError) as info:
        load(tmp_path, toml)
    assert info.value.key == key
    assert message in str(info.value)


def test_old_spelling_in_edition_6_names_the_new_one(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        load(tmp_path, NOARCH_6 + 'cuda-capabilities = ["8.0"]\n')
    assert "edition 6 spells this 'torch-noarch.cuda_capabilities'; builder migrate" in str(
        info.value)


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ('[tvm-ffi]\nsrc = ["torch-ext/torch_binding.cpp"]\n', "tvm-ffi", "a tvm-ffi kernel"),
        ("[mlx-noarch]\n", "mlx-noarch", "cannot build: MLX kernels (mlx-metal) are written for "
                                          "Apple's MLX framework, not torch"),
    ],
)
def test_other_frameworks_are_refused_in_one_line(tmp_path: Path, table: str, key: str,
                                                  message: str) -> None:
    toml = ('[general]\nname = "demo"\nedition = 6\nlicense = "mit"\nbackends = ["metal"]\n'
            + table)
    with pytest.raises(ManifestError) as info:
        load(tmp_path, toml)
    assert info.value.key == key
    assert message in str(info.value)


def test_rust_parts_are_refused_in_one_line(tmp_path: Path) -> None:
    toml = EDITION_6.replace('language = "cpp-cpu"\ndepends = ["torch"]\n',
                             'language = "rust-cutile"\ncargo-manifest = "Cargo.toml"\n'
                             'tileiras-minver = "13.2"\n')
    with pytest.raises(ManifestError) as info:
        load(tmp_path, toml)
    assert info.value.key == "kernel.demo_cpu.language"
    assert "rust-cutile parts build tvm-ffi extensions, which kernelhub does not build" in str(
        info.value)


def test_backends_kernelhub_does_not_build_are_listed_with_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelhub_builder.cli import main

    root = write_kernel(tmp_path / "demo", EDITION_6.replace(
        'backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda", "tpu", "neuron"]'))
    with pytest.warns(UserWarning, match="kernelhub cannot build tpu, neuron"):
        assert load_kernel(root).skipped_backends == ("tpu", "neuron")
    assert main(["--project", str(root), "list-variants"]) == 0
    said = capsys.readouterr()
    out = said.out
    assert "tpu: not built by kernelhub: TPU kernels are built against torch_tpu" in out
    assert "neuron: not built by kernelhub: AWS Neuron kernels" in out
    assert said.err.splitlines() == [  # one line, not Python's file, line and source
        f"warning: {root / 'build.toml'}: general.backends: kernelhub cannot build tpu, "
        "neuron; building the other backends only"]


NEURON_ONLY = """\
[general]
name = "relu-nki"
version = 1
license = "apache-2.0"
backends = ["neuron"]

[general.hub]
repo-id = "acme/relu-nki"

[torch-noarch]
"""


def test_a_tree_only_for_backends_kernelhub_cannot_build_is_valid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A neuron-only tree (the ecosystem's relu-nki) lists, migrates and builds nothing,
    each said in one line; it was refused as having "no buildable backend"."""
    from kernelhub_builder.cli import main

    root = write_kernel(tmp_path / "relu-nki", NEURON_ONLY, files=())
    (root / "torch-ext" / "relu_nki").mkdir()
    (root / "torch-ext" / "relu_nki" / "__init__.py").write_text("")
    warned = (f"warning: {root / 'build.toml'}: general.backends: kernelhub cannot build "
              "neuron; nothing to build here")
    assert main(["--project", str(root), "list-variants"]) == 0
    said = capsys.readouterr()
    assert "neuron: not built by kernelhub" in said.out and said.err.splitlines() == [warned]
    assert main(["--project", str(root), "migrate"]) == 0
    said = capsys.readouterr()
    assert "edition = 6" in (root / "build.toml").read_text()
    assert warned in said.err.splitlines() and "Traceback" not in said.err
    assert "UserWarning" not in said.err
    assert main(["--project", str(root), "build"]) == 0
    assert "relu-nki: nothing to build" in " ".join(capsys.readouterr().err.split())


def test_an_empty_backends_list_is_refused(tmp_path: Path) -> None:
    root = write_kernel(tmp_path / "demo", NEURON_ONLY.replace('["neuron"]', "[]"), files=())
    with pytest.raises(ManifestError, match=r"general\.backends: is empty"):
        load_kernel(root)
