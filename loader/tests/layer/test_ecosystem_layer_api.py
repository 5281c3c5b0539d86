"""What the layers API gained for code written against the ecosystem's loader (kernels
0.19): ``KernelizeFallback``, ``kernel_condition``, ``get_kernelized_layers``, the
ecosystem's own ``Mode`` accepted as is, ``check_arch`` and picklable repositories —
against the toy kernel on a real LocalHub (see conftest.py)."""

from __future__ import annotations

import copy
import enum
import pickle
import warnings
from pathlib import Path

import pytest
import torch
from kernelhub.layer import (
    KernelizedLayer,
    KernelizeError,
    KernelizeFallback,
    LayerRepository,
    LocalLayerRepository,
    LockedLayerRepository,
    Mode,
    get_kernelized_layers,
    kernel_of,
    kernelize,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
    use_kernelized_func,
)
from kernelhub.layer.mapping import as_mode
from kh_autotune_toy import SiluAndMul
from kh_toy_layers import TRUSTED_REPO, ToyHub
from torch import nn


def _small(module: nn.Module) -> bool:
    return module.weight.numel() < 32


@use_kernel_forward_from_hub("RMSNorm", condition=_small)
class Norm(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.variance_epsilon = 1e-6

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        var = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(var + self.variance_epsilon))


@use_kernel_forward_from_hub("rotary")
def rotary(q, k, cos, sin, unsqueeze_dim=1):
    return q, k


@use_kernelized_func(rotary)
class Attention(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.small, self.big = Norm(16), Norm(64)
        self.act = SiluAndMul()
        self.attn = Attention()


def repo(layer: str = "RMSNorm", **kw) -> LayerRepository:
    return LayerRepository(TRUSTED_REPO, layer_name=layer, version=1, **kw)


@pytest.fixture
def model(hub_env: ToyHub) -> Model:
    return Model()


def test_condition_keeps_the_instances_it_refuses_on_pytorch(model: Model) -> None:
    with use_kernel_mapping({"RMSNorm": {"cpu": repo()}}):
        kernelize(model, mode=Mode.INFERENCE)
    assert kernel_of(model.small) == repo()
    assert kernel_of(model.big) is None


def test_get_kernelized_layers_reports_layers_and_attached_functions(model: Model) -> None:
    from kernelhub.layer import FuncRepository

    func = FuncRepository(TRUSTED_REPO, func_name="rotary", version=1)
    with use_kernel_mapping({"RMSNorm": {"cpu": repo()}, "rotary": {"cpu": func}}):
        kernelize(model, mode=Mode.INFERENCE)
    found = get_kernelized_layers(model)
    assert found.layers == {"small": KernelizedLayer(model.small, repo())}
    assert list(found.funcs) == [("attn", "rotary")]
    assert found.funcs[("attn", "rotary")].repo == func
    again = get_kernelized_layers(copy.deepcopy(model))
    assert set(again.layers) == {"small"} and set(again.funcs) == {("attn", "rotary")}


class EcosystemMode(enum.Flag):
    """Shaped like the ecosystem's ``kernels.Mode`` (the same names, its own values)."""

    _NONE = 0
    FALLBACK = enum.auto()
    TRAINING = enum.auto()
    INFERENCE = enum.auto()
    TORCH_COMPILE = enum.auto()


def test_a_mode_of_the_ecosystems_shape_is_taken_by_name(model: Model) -> None:
    assert as_mode(EcosystemMode.TRAINING | EcosystemMode.TORCH_COMPILE) == (
        Mode.TRAINING | Mode.TORCH_COMPILE)
    assert as_mode(3) is None
    with use_kernel_mapping({"RMSNorm": {"cpu": {EcosystemMode.INFERENCE: repo()}}}):
        kernelize(model, mode=EcosystemMode.INFERENCE)
    assert kernel_of(model.small) == repo()


def test_the_installed_ecosystem_mode_is_taken_too(model: Model) -> None:
    kernels = pytest.importorskip("kernels")
    if kernels.Mode is Mode:
        pytest.skip("`kernels` is kernelhub's compatibility module here")
    with use_kernel_mapping({"RMSNorm": {"cpu": {kernels.Mode.INFERENCE: repo()}}}):
        kernelize(model, mode=kernels.Mode.INFERENCE,
                  use_fallback=kernels.KernelizeFallback.ALL)
    assert kernel_of(model.small) == repo()


@pytest.mark.parametrize(("mapping", "case"), [
    ({}, KernelizeFallback.NO_LAYER),
    ({"SiluAndMul": {"cuda": repo("SiluAndMul")}}, KernelizeFallback.NO_DEVICE),
    ({"SiluAndMul": {"cpu": {Mode.INFERENCE: repo("SiluAndMul")}}},
     KernelizeFallback.NO_COMPATIBLE_MODE),
    ({"SiluAndMul": {"cpu": repo("NoSuchLayer")}}, KernelizeFallback.CANNOT_LOAD),
])
def test_each_fallback_case_is_allowed_or_refused_on_its_own(hub_env: ToyHub, mapping: dict,
                                                             case: KernelizeFallback) -> None:
    model = nn.Sequential(SiluAndMul())
    with use_kernel_mapping(mapping), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernelize(model, mode=Mode.TRAINING, use_fallback=case)
        assert kernel_of(model[0]) is None
        with pytest.raises(KernelizeError, match="no usable kernel for layer 'SiluAndMul'"):
            kernelize(model, mode=Mode.TRAINING, use_fallback=KernelizeFallback.ALL & ~case)


def test_bool_fallbacks_keep_their_meaning(hub_env: ToyHub) -> None:
    model = nn.Sequential(SiluAndMul())
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo("NoSuchLayer")}}):
        with pytest.warns(UserWarning, match="failed to load"):
            kernelize(model, mode=Mode.INFERENCE, use_fallback=True)
        with pytest.raises(KernelizeError):
            kernelize(model, mode=Mode.INFERENCE, use_fallback=False)
    kernelize(model, mode=Mode.INFERENCE, use_fallback=False)  # unmapped layers: fine
    with pytest.raises(TypeError, match="use_fallback takes"):
        kernelize(model, mode=Mode.INFERENCE, use_fallback="yes")  # type: ignore[arg-type]


def test_ecosystem_kernelize_raises_on_a_load_failure_by_default(hub_env: ToyHub) -> None:
    from kernelhub.ecosystem import kernelize as ecosystem_kernelize

    model = nn.Sequential(SiluAndMul())
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo("NoSuchLayer")}}), \
            pytest.raises(KernelizeError, match="failed to load"):
        ecosystem_kernelize(model, mode=Mode.INFERENCE)


def test_repositories_take_the_ecosystems_keywords_and_pickle(hub_env: ToyHub,
                                                             tmp_path: Path) -> None:
    listed = LayerRepository("someone/else", layer_name="X", version=1,
                             trust_remote_code=["someone/else"], user_agent="app/1",
                             check_arch=False)
    assert listed.trusted and not repo().trusted
    local = LocalLayerRepository(tmp_path, layer_name="X", check_arch=False)
    locked = LockedLayerRepository(TRUSTED_REPO, layer_name="SiluAndMul",
                                   lockfile=tmp_path / "kernels.lock", check_arch=False)
    for value in (listed, local, locked):
        assert pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(TypeError, match="check_arch"):
        LayerRepository(TRUSTED_REPO, layer_name="X", check_arch="no")  # type: ignore[arg-type]


def test_accelerate_hooks_stay_in_front_of_the_kernel(model: Model) -> None:
    """A device_map-offloaded layer carries an accelerate hook around its forward; the
    kernel goes behind it (``_old_forward``), so inputs are still moved first, and taking
    the kernel off puts the layer's own forward back behind the hook."""
    hooks = pytest.importorskip("accelerate.hooks")

    class Counting(hooks.ModelHook):
        calls = 0

        def pre_forward(self, module, *args, **kwargs):
            Counting.calls += 1
            return args, kwargs

    hooks.add_hook_to_module(model.small, Counting())
    hooked = model.small.forward
    x = torch.randn(2, 16)
    expected = model.small(x)
    with use_kernel_mapping({"RMSNorm": {"cpu": repo()}}):
        kernelize(model, mode=Mode.INFERENCE)
    assert model.small.forward is hooked
    assert kernel_of(model.small) == repo()
    torch.testing.assert_close(model.small(x), expected)
    assert Counting.calls == 2
    kernelize(model, mode=Mode.INFERENCE)  # empty mapping: PyTorch again, hook kept
    assert kernel_of(model.small) is None and model.small.forward is hooked
    assert model.small._old_forward.__func__ is Norm.forward


def test_each_gpu_index_is_routed_by_its_own_capability(hub_env: ToyHub,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``kernelize(device="cuda:1")`` chooses among capability ranges by GPU 1's capability,
    not GPU 0's (a machine with two GPU generations). Routing only: torch is told what
    each GPU reports; nothing runs on a GPU."""
    from kernelhub.layer import CUDAProperties, Device

    capabilities = {0: (8, 0), 1: (9, 0)}
    asked: list[object] = []

    def capability(index=None):
        asked.append(index)
        return capabilities[0 if index is None else index]

    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    ampere = Device("cuda", CUDAProperties(min_capability=80, max_capability=89))
    hopper = Device("cuda", CUDAProperties(min_capability=90, max_capability=90))
    mapping = {"SiluAndMul": {ampere: repo("SiluAndMul"), hopper: repo("InferenceSiluAndMul")}}
    model = nn.Sequential(SiluAndMul())
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device="cuda:1")
        assert kernel_of(model[0]) == repo("InferenceSiluAndMul") and asked[-1] == 1
        kernelize(model, mode=Mode.INFERENCE, device=torch.device("cuda", 0))
        assert kernel_of(model[0]) == repo("SiluAndMul") and asked[-1] == 0
