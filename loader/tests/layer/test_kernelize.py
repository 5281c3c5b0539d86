"""kernelize against a real kernel published to a real LocalHub (see conftest.py)."""

from __future__ import annotations

import copy
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import kernelhub
import pytest
import torch
import torch.nn.functional as F
from kernelhub import TrustError
from kernelhub.errors import SignatureError
from kernelhub.layer import (
    FuncRepository,
    KernelizeError,
    LayerRepository,
    LocalFuncRepository,
    LocalLayerRepository,
    LockedLayerRepository,
    Mode,
    kernel_of,
    kernelize,
    register_kernel_mapping,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
    use_kernelized_func,
)
from kernelhub.lock import LOCKFILE_NAME
from kh_toy_layers import TRUSTED_REPO, UNTRUSTED_REPO, ToyHub
from torch import nn


@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        d = input.shape[-1] // 2
        return F.silu(input[..., :d]) * input[..., d:]


@use_kernel_forward_from_hub("RMSNorm")
class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(size) + 0.5)
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        var = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(var + self.variance_epsilon))


class MLP(nn.Module):
    def __init__(self, size: int = 16) -> None:
        super().__init__()
        self.up = nn.Linear(size, 2 * size)
        self.act = SiluAndMul()
        self.norm = RMSNorm(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.up(x)))


def calls() -> list[str]:
    """The toy kernel's record of which of its layers ran."""
    return kernelhub.get_kernel(TRUSTED_REPO, version=1).CALLS


def silu_repo(layer: str = "SiluAndMul", **kw: Any) -> LayerRepository:
    return LayerRepository(TRUSTED_REPO, layer_name=layer, version=1, **kw)


@pytest.fixture
def model(hub_env: ToyHub) -> MLP:
    torch.manual_seed(0)
    calls().clear()
    return MLP()


def test_inference_replaces_forward_per_instance_and_matches_pytorch(model: MLP) -> None:
    x = torch.randn(3, 16)
    expected = model(x)
    other = SiluAndMul()  # same class, not in the model: must keep PyTorch
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()},
                             "RMSNorm": {"cpu": silu_repo("RMSNorm")}}):
        assert kernelize(model, mode=Mode.INFERENCE) is model
    assert kernel_of(model.act) == silu_repo()
    assert kernel_of(model.norm) == silu_repo("RMSNorm")
    assert kernel_of(other) is None
    assert "forward" not in SiluAndMul.__dict__ or SiluAndMul.forward.__module__ == __name__
    torch.testing.assert_close(model(x), expected)
    assert calls() == ["SiluAndMul", "RMSNorm"]
    other(x[..., :16].repeat(1, 2))
    assert calls() == ["SiluAndMul", "RMSNorm"], "an instance outside the model ran the kernel"


def test_empty_mapping_restores_pytorch_forward(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}}):
        kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.act) is not None
    kernelize(model, mode=Mode.INFERENCE)  # the mapping is empty again
    assert kernel_of(model.act) is None and "forward" not in model.act.__dict__
    calls().clear()
    model(torch.randn(2, 16))
    assert calls() == []


def test_no_entry_for_this_device_falls_back_without_error(model: MLP) -> None:
    x = torch.randn(2, 16)
    expected = model(x)
    with use_kernel_mapping({"SiluAndMul": {"cuda": silu_repo()}}), warnings.catch_warnings():
        warnings.simplefilter("error")
        kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.act) is None
    torch.testing.assert_close(model(x), expected)


def test_use_fallback_false_raises_naming_layer_device_and_mode(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cuda": silu_repo()}}), \
            pytest.raises(KernelizeError, match=r"act: no usable kernel for layer 'SiluAndMul' "
                          r"on cpu in mode INFERENCE\n.*no entry for cpu \(it has: cuda\)"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)


def test_training_skips_layers_without_backward_then_uses_the_next_entry(model: MLP) -> None:
    mapping = {"SiluAndMul": {"cpu": {Mode.INFERENCE: silu_repo("InferenceSiluAndMul"),
                                      Mode.FALLBACK: silu_repo("SiluAndMul")}}}
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE)
        assert kernel_of(model.act) == silu_repo("InferenceSiluAndMul")
        kernelize(model, mode=Mode.TRAINING)
        assert kernel_of(model.act) == silu_repo("SiluAndMul")
    x = torch.randn(2, 16, requires_grad=True)
    model(x).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_training_without_any_backward_layer_keeps_pytorch(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo("InferenceSiluAndMul")}}):
        kernelize(model, mode=Mode.TRAINING)
    assert kernel_of(model.act) is None


def test_inference_uses_a_training_entry_but_not_the_reverse(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": {Mode.TRAINING: silu_repo()}}}):
        kernelize(model, mode=Mode.INFERENCE)
        assert kernel_of(model.act) == silu_repo()
    with use_kernel_mapping({"SiluAndMul": {"cpu": {Mode.INFERENCE: silu_repo()}}}):
        kernelize(model, mode=Mode.TRAINING)
        assert kernel_of(model.act) is None


def test_torch_compile_mode_needs_can_torch_compile(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo("EagerSiluAndMul")}}):
        kernelize(model, mode=Mode.INFERENCE)
        assert kernel_of(model.act) == silu_repo("EagerSiluAndMul")
        kernelize(model, mode=Mode.INFERENCE | Mode.TORCH_COMPILE)
        assert kernel_of(model.act) is None


def test_training_torch_compile_runs_without_graph_breaks(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()},
                             "RMSNorm": {"cpu": silu_repo("RMSNorm")}}):
        kernelize(model, mode=Mode.TRAINING | Mode.TORCH_COMPILE)
    assert kernel_of(model.act) is not None and kernel_of(model.norm) is not None
    x = torch.randn(4, 16)
    expected = MLP.forward(model, x)  # eager, through the kernels
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), expected)


def test_mode_defaults_to_what_the_model_is_doing(model: MLP) -> None:
    mapping = {"SiluAndMul": {"cpu": {Mode.INFERENCE: silu_repo("InferenceSiluAndMul"),
                                      Mode.TRAINING: silu_repo("SiluAndMul")}}}
    with use_kernel_mapping(mapping):
        kernelize(model.eval())
        assert kernel_of(model.act) == silu_repo("InferenceSiluAndMul")
        kernelize(model.train())
        assert kernel_of(model.act) == silu_repo("SiluAndMul")


@pytest.mark.parametrize("mode", [Mode.FALLBACK, Mode.TORCH_COMPILE,
                                  Mode.INFERENCE | Mode.TRAINING])
def test_invalid_kernelize_modes_are_refused(model: MLP, mode: Mode) -> None:
    with pytest.raises(ValueError, match="exactly one of INFERENCE or TRAINING"):
        kernelize(model, mode=mode)


@pytest.mark.parametrize("layer,message", [
    ("WithInit", "defines __init__"),
    ("WithHelper", "defines helper"),
    ("TwoInputs", "forward is not compatible"),
])
def test_impure_layers_are_refused_with_a_warning_and_pytorch_runs(
        model: MLP, layer: str, message: str) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo(layer)}}), \
            pytest.warns(UserWarning, match=message):
        kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.act) is None


def test_impure_layer_with_use_fallback_false_raises_the_reason(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo("WithInit")}}), \
            pytest.raises(KernelizeError, match="defines __init__"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)


def test_missing_layer_name_lists_what_the_kernel_has(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo("Nope")}}), \
            pytest.raises(KernelizeError, match=r"has no layer 'Nope'.*SiluAndMul"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)


def test_untrusted_org_is_refused_unless_trusted_explicitly(model: MLP) -> None:
    untrusted = LayerRepository(UNTRUSTED_REPO, layer_name="SiluAndMul", version=1)
    with use_kernel_mapping({"SiluAndMul": {"cpu": untrusted}}), \
            pytest.raises(TrustError, match="someone-else"):
        kernelize(model, mode=Mode.INFERENCE)
    for flag in ("trust_remote_code", "allow_all_kernels"):
        repo = LayerRepository(UNTRUSTED_REPO, layer_name="SiluAndMul", version=1, **{flag: True})
        with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
            kernelize(model, mode=Mode.INFERENCE)
        assert kernel_of(model.act) == repo


def test_a_release_the_signing_policy_refuses_is_raised_not_skipped(
    model: MLP, monkeypatch: pytest.MonkeyPatch
) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}}):
        kernelize(model, mode=Mode.INFERENCE)  # the toy release is unsigned: no policy, fine
        # Tightened while the layer is loaded and cached: the next kernelize checks again.
        monkeypatch.setenv("KERNELHUB_REQUIRE_SIGNED", TRUSTED_REPO.partition("/")[0])
        with pytest.raises(SignatureError, match="unsigned"):
            kernelize(model, mode=Mode.INFERENCE)


def test_layers_load_once_per_repository_and_class(model: MLP) -> None:
    class CountingRepo:
        def __init__(self) -> None:
            self.inner, self.loads = silu_repo(), 0

        def load(self) -> type:
            self.loads += 1
            return self.inner.load()

        def cache_key(self) -> tuple:
            return self.inner.cache_key()

        def __str__(self) -> str:
            return str(self.inner)

    repo = CountingRepo()
    many = nn.Sequential(*[SiluAndMul() for _ in range(5)])
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
        kernelize(many, mode=Mode.INFERENCE)
        kernelize(many, mode=Mode.INFERENCE)
    assert repo.loads == 1
    assert all(kernel_of(m) is repo for m in many)


def test_use_hub_kernels_off_makes_kernelize_a_noop(
        model: MLP, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelhub import settings

    monkeypatch.setattr(settings, "_warned_disabled", False)
    register_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}})
    monkeypatch.setenv("USE_HUB_KERNELS", "OFF")
    with pytest.warns(UserWarning, match="USE_HUB_KERNELS=OFF"):
        kernelize(model, mode=Mode.INFERENCE)
    for value in ("0", "no"):  # one warning per process, not one per call
        monkeypatch.setenv("USE_HUB_KERNELS", value)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.act) is None
    with pytest.raises(kernelhub.KernelHubError, match="disabled by USE_HUB_KERNELS=no"):
        silu_repo().load()  # direct loads through a layer repository are off too
    monkeypatch.setenv("USE_HUB_KERNELS", "1")  # read at call time, not import time
    kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.act) is not None


def test_instance_level_marker_and_unmarked_classes(model: MLP) -> None:
    plain = nn.Sequential(nn.Linear(4, 4))
    plain[0].kernel_layer_name = "SiluAndMul"  # type: ignore[assignment]
    # nn.Linear.forward(self, input) is signature-compatible with SiluAndMul.forward(self, x)
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}}):
        kernelize(plain, mode=Mode.INFERENCE)
    assert kernel_of(plain[0]) == silu_repo()


def test_deepcopy_of_a_kernelized_model_runs_the_kernel_on_the_copy(model: MLP) -> None:
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}}):
        kernelize(model, mode=Mode.INFERENCE)
    clone = copy.deepcopy(model)
    assert clone.act.forward.__self__ is clone.act
    kernelize(clone, mode=Mode.INFERENCE)  # empty mapping: restores the copy
    assert "forward" not in clone.act.__dict__ and kernel_of(model.act) is not None


def test_func_repository_replaces_a_pure_layer(model: MLP) -> None:
    repo = FuncRepository(TRUSTED_REPO, func_name="silu_and_mul", version=1)
    x = torch.randn(2, 16)
    expected = model(x)
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
        kernelize(model, mode=Mode.INFERENCE)
    calls().clear()
    torch.testing.assert_close(model(x), expected)
    assert calls() == ["silu_and_mul"]


@use_kernel_forward_from_hub("rotary_pos_emb")
def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 unsqueeze_dim: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    half = q.shape[-1] // 2

    def rot(x: torch.Tensor) -> torch.Tensor:
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


@use_kernelized_func(apply_rotary)
class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._kernel_funcs["rotary_pos_emb"](self.proj(q), k, cos, sin)


def test_function_kernels_replace_per_instance_function_modules(hub_env: ToyHub) -> None:
    first, second = Attention(), Attention()
    assert first._kernel_funcs["rotary_pos_emb"] is not second._kernel_funcs["rotary_pos_emb"]
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    cos, sin = torch.randn(1, 3, 8), torch.randn(1, 3, 8)
    expected = first(q, k, cos, sin)
    repo = FuncRepository(TRUSTED_REPO, func_name="rotary", version=1)
    with use_kernel_mapping({"rotary_pos_emb": {"cpu": repo}}):
        kernelize(first, mode=Mode.INFERENCE)
    calls().clear()
    torch.testing.assert_close(first(q, k, cos, sin), expected)
    assert calls() == ["rotary"]
    assert kernel_of(second._kernel_funcs["rotary_pos_emb"]) is None
    assert apply_rotary(q, k, cos, sin)[0].shape == q.shape  # module-level calls still work


def test_local_repositories_load_from_disk_without_any_hub(
        toy_hub: ToyHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHUB_OFFLINE", "1")
    model = MLP()
    layer = LocalLayerRepository(toy_hub.variant_dir, layer_name="SiluAndMul",
                                 package_name="toy_activation")
    with use_kernel_mapping({"SiluAndMul": {"cpu": layer}}):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)
    assert kernel_of(model.act) == layer
    func = LocalFuncRepository(toy_hub.variant_dir, func_name="silu_and_mul")
    with use_kernel_mapping({"SiluAndMul": {"cpu": func}}):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)
    assert kernel_of(model.act) == func
    wrong = LocalLayerRepository(toy_hub.variant_dir, layer_name="SiluAndMul",
                                 package_name="other")
    with use_kernel_mapping({"SiluAndMul": {"cpu": wrong}}), \
            pytest.raises(KernelizeError, match="not the expected package 'other'"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)


def test_locked_repository_loads_the_commit_in_the_lock_file(
        model: MLP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = kernelhub.resolve_kernel(TRUSTED_REPO, version=1).commit
    lockfile = tmp_path / LOCKFILE_NAME
    lockfile.write_text(json.dumps([{"repo_id": TRUSTED_REPO, "sha": commit, "variants": {}}]))
    monkeypatch.chdir(tmp_path)
    repo = LockedLayerRepository(TRUSTED_REPO, layer_name="SiluAndMul")
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)
    assert kernel_of(model.act) == repo
    assert repo.cache_key()[4] == commit
    lockfile.write_text("{}")
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}), \
            pytest.raises(KernelizeError, match="has no entry for kernels-community/toy"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback=False)


def _simulate_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int],
                  hip: str | None) -> None:
    """Routing only: what torch reports about a GPU. Nothing runs on a GPU here."""
    monkeypatch.setattr(torch.version, "hip", hip, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)


def test_capability_routing_with_simulated_cuda_runtime(
        model: MLP, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelhub.layer import CUDAProperties, Device

    _simulate_gpu(monkeypatch, (9, 0), None)
    ampere = Device("cuda", CUDAProperties(min_capability=80, max_capability=89))
    hopper = Device("cuda", CUDAProperties(min_capability=90, max_capability=90))
    mapping = {"SiluAndMul": {"cuda": silu_repo("EagerSiluAndMul"), ampere: silu_repo(),
                              hopper: silu_repo("InferenceSiluAndMul")}}
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device="cuda")
        assert kernel_of(model.act) == silu_repo("InferenceSiluAndMul")
        _simulate_gpu(monkeypatch, (7, 5), None)
        kernelize(model, mode=Mode.INFERENCE, device="cuda")
        assert kernel_of(model.act) == silu_repo("EagerSiluAndMul"), "generic entry"


def test_rocm_routing_with_simulated_hip_runtime(
        model: MLP, monkeypatch: pytest.MonkeyPatch) -> None:
    _simulate_gpu(monkeypatch, (9, 4), "6.4.0")
    mapping = {"SiluAndMul": {"cuda": silu_repo("EagerSiluAndMul"), "rocm": silu_repo()}}
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device="cuda")
    assert kernel_of(model.act) == silu_repo()


def test_a_class_marked_by_another_library_is_recognised(model: MLP) -> None:
    class ExternalSilu(nn.Module):  # marked the way Transformers' decorator marks classes
        kernel_layer_name = "SiluAndMul"

        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            d = hidden.shape[-1] // 2
            return F.silu(hidden[..., :d]) * hidden[..., d:]

    layer = ExternalSilu()
    with use_kernel_mapping({"SiluAndMul": {"cpu": silu_repo()}}):
        kernelize(layer, mode=Mode.INFERENCE)
    assert kernel_of(layer) == silu_repo()


def test_only_a_load_failure_is_warned_about_whatever_the_names_say(
    model: MLP, hub_env: ToyHub, tmp_path: Path
) -> None:
    # A repository whose path reads "failed to load" and which is skipped for a mode
    # reason (no backward in training) is no load failure: kernelize decides by type.
    odd = tmp_path / "failed to load" / "toy"
    shutil.copytree(hub_env.variant_dir, odd)
    skipped = LocalLayerRepository(odd, layer_name="InferenceSiluAndMul")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_kernel_mapping({"SiluAndMul": {"cpu": skipped}}):
            kernelize(model, mode=Mode.TRAINING)
    assert kernel_of(model.act) is None
    broken = LocalLayerRepository(tmp_path / "missing", layer_name="SiluAndMul")
    with pytest.warns(UserWarning, match="failed to load"), \
            use_kernel_mapping({"SiluAndMul": {"cpu": broken}}):
        kernelize(model, mode=Mode.INFERENCE)
