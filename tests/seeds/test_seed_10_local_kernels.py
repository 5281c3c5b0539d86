"""SEEDS 10 — local kernels: ``KernelConfig(mapping, use_local_kernel=True)`` with
``"/abs/path:LayerName"`` loads from disk instead of a hub."""

from __future__ import annotations

from seeds.seedkit import kernels_in, load


def test_local_build_is_used_without_a_hub(hub_env, model_dirs, monkeypatch, tmp_path):
    from kernelhub.integrations.transformers import KernelConfig

    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "no-hub"))  # a hub load would fail
    path = hub_env.out / "activation"
    config = KernelConfig({"SiLU": f"{path}:Silu"}, use_local_kernel=True, inherit_mapping=False)
    model = load(model_dirs["qwen3"], kernel_config=config)
    used = kernels_in(model)
    assert used and all(r == f"{path}:Silu" for n, r in used.items() if n.endswith("act_fn"))
