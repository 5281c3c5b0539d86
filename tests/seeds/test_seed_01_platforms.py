"""SEEDS 1 — platforms: CUDA, ROCm (detected at run time), Metal, XPU and CPU."""

from __future__ import annotations

import pytest
import torch
from kernelhub.integrations.transformers import KernelConfig
from kernelhub.integrations.transformers.kernel_config import device_type_of
from seeds.seedkit import ids, kernels_in, load


def test_cpu_model_is_routed_to_cpu_kernels(hub_env, model_dirs):
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert device_type_of(model) == "cpu"
    assert kernels_in(model), "no layer of the CPU model runs a kernel"
    assert model(ids()).logits.isfinite().all()


def test_offloaded_parameters_take_the_device_map_device():
    """Transformers >= 5.25 passes from_pretrained's device_map to set_use_kernels: layers
    whose parameters are offloaded (on meta) run where the map sends them."""
    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    assert device_type_of(model, {"": 0}) == "cuda"
    assert device_type_of(model, {"a": "disk", "b": "cpu"}) == "cpu"
    assert device_type_of(torch.nn.Linear(2, 2), {"": 0}) == "cpu"  # placed: the map is moot


def test_every_platform_keeps_its_own_entry():
    """One per-device dict serves every platform; each device gets exactly its entry."""
    config = KernelConfig({"SiLU": {
        "cuda": "kernels-community/activation:Silu",
        "rocm": "kernels-community/activation-rocm:Silu",
        "xpu": "kernels-community/activation-xpu:Silu",
        "mps": "kernels-community/activation-metal:Silu",
        "cpu": "kernels-community/activation:Silu",
    }})
    sources = {d: config.for_device(d)["SiLU"].source for d in ("cuda", "rocm", "xpu", "metal", "cpu")}
    assert sources["rocm"] == "kernels-community/activation-rocm"
    assert sources["metal"] == "kernels-community/activation-metal"
    assert len(set(sources.values())) == 4


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_gpu_model_is_routed_by_runtime_detection(hub_env, model_dirs):
    """On an AMD GPU torch says 'cuda'; kernelhub must still pick the rocm entries."""
    model = load(model_dirs["qwen3"], use_kernels=True, device_map="cuda")
    assert device_type_of(model) == ("rocm" if torch.version.hip else "cuda")
    model(ids().cuda())
