"""``kernelhub.ecosystem`` offers the ecosystem's whole public API — every name of the
installed ``kernels`` 0.19's ``__all__`` — with signatures that accept every call the
ecosystem's accept, the same enum members and record fields, and the same behaviour on
a real LocalHub (the toy kernel of kh_toy_layers)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import kernelhub.ecosystem as ours
import pytest
import torch
from kernelhub import value_types as records
from kh_toy_layers import TRUSTED_REPO, ToyHub, publish_toy_kernel
from packaging.version import Version

PENDING: dict[str, str] = {
    # Served lazily from the module of the helper that builds it; remove a name here
    # when its module lands (the test below then checks it like every other name).
}


def _ecosystem() -> Any:
    try:
        found = version("kernels")
    except PackageNotFoundError:
        pytest.skip("the ecosystem's kernels package is not installed (Transformers 5.25 "
                    "brings it; ci/requirements-dev.txt installs that)")
    if not Version("0.19") <= Version(found) < Version("0.20"):
        pytest.skip(f"kernels {found} is installed; this compares against 0.19")
    import kernels

    return kernels


P = inspect.Parameter


def call_incompatibilities(theirs: inspect.Signature, mine: inspect.Signature) -> list[str]:
    """Calls ``theirs`` accepts that ``mine`` would refuse or read differently."""
    problems = []
    tp = [p for p in theirs.parameters.values() if p.name != "self"]
    op = [p for p in mine.parameters.values() if p.name != "self"]
    by_name = {p.name: p for p in op}
    var_kw = any(p.kind is P.VAR_KEYWORD for p in op)
    positional = [p for p in op if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    for i, p in enumerate(tp):
        if p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD) and (
                i >= len(positional) or positional[i].name != p.name):
            problems.append(f"positional parameter {i} is {p.name!r} there")
        q = by_name.get(p.name)
        if q is None:
            if not var_kw:
                problems.append(f"no parameter {p.name!r}")
            continue
        if q.kind is P.POSITIONAL_ONLY and p.kind is not P.POSITIONAL_ONLY:
            problems.append(f"{p.name!r} is positional-only here")
        if p.default is not P.empty and q.default is P.empty:
            problems.append(f"{p.name!r} is required here")
        elif p.default is not P.empty and p.default != q.default:
            problems.append(f"{p.name!r} defaults to {q.default!r}, there {p.default!r}")
    named = {p.name for p in tp}
    problems += [f"requires {q.name!r}, which the ecosystem's does not have" for q in op
                 if q.name not in named and q.default is P.empty
                 and q.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    return problems


def _signature(obj: Any) -> inspect.Signature | None:
    """How ``obj`` is called (a class: without ``self``), or None for a native class, whose
    ``__init__`` shows only ``(*args, **kwargs)``."""
    try:
        init = inspect.signature(obj.__init__) if inspect.isclass(obj) else None
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    if init is not None and [p.kind for p in init.parameters.values()
                             if p.name != "self"] == [P.VAR_POSITIONAL, P.VAR_KEYWORD]:
        return None if not hasattr(obj, "__signature__") else sig  # native, unless a Record
    return sig


def test_every_name_is_served_but_the_pending_ones():
    kernels = _ecosystem()
    assert set(ours.__all__) == set(kernels.__all__)
    for name in kernels.__all__:
        if name in PENDING:
            with pytest.raises(AttributeError, match=r"does not serve .* yet"):
                getattr(ours, name)
            continue
        assert getattr(ours, name) is not None, name


def test_signatures_accept_every_call_the_ecosystems_accept():
    kernels = _ecosystem()
    found = {}
    for name in sorted(set(kernels.__all__) - set(PENDING)):
        theirs, mine = getattr(kernels, name), getattr(ours, name)
        if not callable(theirs) or (isinstance(theirs, type) and issubclass(theirs, enum.Enum)):
            continue
        if (their_sig := _signature(theirs)) is None:
            continue
        if problems := call_incompatibilities(their_sig, inspect.signature(mine)):
            found[name] = problems
    assert found == {}


@pytest.mark.parametrize("name", ["Mode", "KernelizeFallback"])
def test_flags_have_the_ecosystems_members(name):
    kernels = _ecosystem()
    theirs = {m.name for m in getattr(kernels, name) if m.name and not m.name.startswith("_")}
    assert theirs <= set(getattr(ours, name).__members__)
    for member in theirs:  # and the same composition of the combined members
        parts = {m.name for m in getattr(kernels, name) if m.value and m in
                 getattr(kernels, name)[member]}
        mine = {m.name for m in getattr(ours, name) if m.value and m in
                getattr(ours, name)[member]}
        assert parts == mine, member


@pytest.mark.parametrize("name", ["KernelizedLayer", "KernelizedFunc", "KernelizedLayers",
                                  "RepoInfo", "LoadedKernel", "VariantAccepted",
                                  "VariantRejected"])
def test_records_have_the_ecosystems_fields(name):
    kernels = _ecosystem()
    fields = [f.name for f in dataclasses.fields(getattr(kernels, name))]
    assert list(records.fields(getattr(ours, name))) == fields  # ours are Records


def test_metadata_has_the_ecosystems_properties():
    kernels = _ecosystem()
    theirs = {n for n in dir(kernels.Metadata) if not n.startswith("_")}
    assert theirs <= {n for n in dir(ours.Metadata) if not n.startswith("_")}


def test_version_is_the_api_served():
    kernels = _ecosystem()
    assert Version(ours.__version__).release[:2] == Version(kernels.__version__).release[:2]


# -- behaviour on a real hub --------------------------------------------------------


@pytest.fixture
def toy(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> ToyHub:
    hub = publish_toy_kernel(tmp_path_factory.mktemp("ecosystem-hub"))
    monkeypatch.setenv("KERNELHUB_HUB", str(hub.root))
    return hub


def test_loading_the_ecosystems_way_reports_what_was_loaded(toy: ToyHub):
    import kernelhub

    module = ours.get_kernel(TRUSTED_REPO, version=1, user_agent="app/1", check_arch=False)
    assert ours.has_kernel(TRUSTED_REPO, version=1, trust_remote_code=False)
    commit = kernelhub.resolve_kernel(TRUSTED_REPO, 1).commit
    loaded = [k for k in ours.get_loaded_kernels() if k.module is module]
    assert len(loaded) == 1
    assert loaded[0].repo_info == ours.RepoInfo(TRUSTED_REPO, commit)
    metadata = loaded[0].metadata
    assert metadata.name == "toy_activation" and metadata.name.python_name == "toy_activation"
    assert metadata.id == module.__name__ and metadata.version == 1
    assert metadata.backend.backend_type is None  # backend-agnostic, as kernels 0.19.1 says
    assert metadata.digest is not None and "layers.py" in metadata.digest.files
    again = ours.Metadata.read_from_file(toy.variant_dir / "metadata.json")
    assert again.id == metadata.id
    with pytest.raises(ValueError):
        ours.Metadata.from_bytes(b"{not json")
    assert ours.get_local_kernel(toy.variant_dir) is module  # the same build: one import
    # ...but two loads: kernels 0.19.1 lists the local one too.
    paths = [k for k in ours.get_loaded_kernels() if k.module is module]
    assert len(paths) == 2 and paths[1].repo_info is None


def test_has_kernel_raises_for_a_missing_version_as_theirs_does(toy: ToyHub):
    from kernelhub.errors import VersionSpecError

    with pytest.raises(VersionSpecError, match="99"):
        ours.has_kernel(TRUSTED_REPO, version=99)
    assert isinstance(VersionSpecError("x"), ValueError)  # what kernels 0.19.1 raises


def test_backend_type_is_the_ecosystems_enum() -> None:
    from kernelhub.ecosystem.records import Backend

    assert Backend.from_str("cuda") is Backend.CUDA and str(Backend.ROCm) == "rocm"
    assert Backend.from_str("npu") is Backend.CANN
    with pytest.raises(ValueError):
        Backend.from_str("abacus")


def test_variants_are_judged_for_this_system(toy: ToyHub):
    decisions = ours.get_kernel_variants(TRUSTED_REPO, version=1)
    assert [type(d).__name__ for d in decisions] == ["VariantAccepted"]
    assert decisions[0].variant.variant_str == "torch-universal"
    assert ours.get_kernel_variants(TRUSTED_REPO, version=1, backend="cpu")


def test_layers_through_the_ecosystem_names(toy: ToyHub):
    @ours.use_kernel_forward_from_hub("SiluAndMul")
    class SiluAndMul(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = x.chunk(2, dim=-1)
            return torch.nn.functional.silu(a) * b

    model = torch.nn.Sequential(SiluAndMul())
    repo = ours.LayerRepository(TRUSTED_REPO, layer_name="SiluAndMul", version=1)
    with ours.use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
        ours.kernelize(model, mode=ours.Mode.INFERENCE, device="cpu")
    assert ours.get_kernelized_layers(model).layers["0"].repo == repo
