"""The table's widened ``Linear`` (integrations.transformers.widen): kept only for bfloat16
models on CPUs without native bfloat16 products, said once; the user's explicit entry
kept; ``nn.Linear`` marked only while the table's kernelize runs, for exactly that class;
and the name a valid KernelConfig key."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from kernelhub.integrations.transformers import machine, widen  # noqa: E402
from kernelhub.integrations.transformers.kernel_config import KernelConfig  # noqa: E402
from kernelhub.integrations.transformers.table import DEFAULT_MAPPING  # noqa: E402
from kernelhub.layer.decorators import CONDITION_ATTR, LAYER_NAME_ATTR  # noqa: E402

AVX2 = frozenset({"avx", "avx2", "fma"})
AVX512_BF16 = AVX2 | {"avx512f", "avx512_bf16"}
AMX = AVX512_BF16 | {"amx_tile", "amx_bf16"}


def tiny_llama(dtype: torch.dtype = torch.bfloat16) -> torch.nn.Module:
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=128)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


@pytest.fixture
def on_cpu(monkeypatch):
    """Choose the CPU's flags; nothing said before."""
    monkeypatch.setattr(widen, "_told", set())
    monkeypatch.setattr(machine, "_told", set())

    def use(flags: frozenset[str]) -> None:
        monkeypatch.setattr(machine, "cpu_flags", lambda: flags)
    return use


def test_the_table_maps_linear_to_rmsnorm_on_the_cpu_for_inference_only():
    (ref,) = DEFAULT_MAPPING[widen.WIDEN_NAME]["cpu"]
    assert (ref.repo_id, ref.name, ref.version) == ("kernels-community/rmsnorm", "Linear", 1)
    from kernelhub.layer.mapping import Mode

    assert all(Mode.TRAINING not in m for m in ref.modes)
    assert set(DEFAULT_MAPPING[widen.WIDEN_NAME]) == {"cpu"}


def test_a_bfloat16_model_without_native_products_widens_and_says_so_once(on_cpu, caplog):
    on_cpu(AVX2)
    with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
        for _ in range(2):  # a second model: silent
            entries = {"Linear": [1], "RMSNorm": [2]}
            assert widen.settle_widening(entries, set(), tiny_llama(), "cpu")
            assert entries == {"Linear": [1], "RMSNorm": [2]}
    assert [r.getMessage() for r in caplog.records] == [widen.WIDENED]
    assert "float32" in widen.WIDENED and "decode" in widen.WIDENED


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_other_dtypes_are_untouched_silently(on_cpu, caplog, dtype):
    on_cpu(AVX2)
    entries = {"Linear": [1], "RMSNorm": [2]}
    with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
        assert not widen.settle_widening(entries, set(), tiny_llama(dtype), "cpu")
    assert entries == {"RMSNorm": [2]}
    assert caplog.records == []


@pytest.mark.parametrize("flags", [AVX512_BF16, AMX])
def test_cpus_with_native_bfloat16_products_keep_pytorchs_and_say_why(on_cpu, caplog, flags):
    on_cpu(flags)
    entries = {"Linear": [1]}
    with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
        assert not widen.settle_widening(entries, set(), tiny_llama(), "cpu")
    assert entries == {}
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("Linear: keeping PyTorch on this CPU (CPUs with avx512_bf16")


def test_off_the_cpu_nothing_is_widened(on_cpu):
    on_cpu(AVX2)
    entries = {"Linear": [1]}
    assert not widen.settle_widening(entries, set(), tiny_llama(), "cuda")
    assert entries == {}


@pytest.mark.parametrize("flags", [AVX2, AMX])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_users_explicit_entry_is_never_overridden(on_cpu, caplog, flags, dtype):
    on_cpu(flags)
    entries = {"Linear": ["theirs"]}
    with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
        assert widen.settle_widening(entries, {"Linear"}, tiny_llama(dtype), "cpu")
    assert entries == {"Linear": ["theirs"]}
    assert caplog.records == []


def test_no_entry_nothing_to_settle(on_cpu):
    on_cpu(AVX2)
    entries: dict[str, list[int]] = {"RMSNorm": [1]}  # e.g. {"Linear": None} in a KernelConfig
    assert not widen.settle_widening(entries, set(), tiny_llama(), "cpu")
    assert entries == {"RMSNorm": [1]}


class _Scaled(torch.nn.Linear):
    pass


def test_nn_linear_is_marked_only_inside_the_block_and_only_exactly():
    linear = torch.nn.Linear
    assert LAYER_NAME_ATTR not in linear.__dict__
    with widen.linear_marked():
        assert linear.kernel_layer_name == "Linear"
        condition = getattr(linear, CONDITION_ATTR)
        assert condition(linear(2, 2)) and not condition(_Scaled(2, 2))
    assert LAYER_NAME_ATTR not in linear.__dict__ and CONDITION_ATTR not in linear.__dict__


def test_a_mark_someone_else_put_on_nn_linear_is_left_alone(monkeypatch):
    monkeypatch.setattr(torch.nn.Linear, LAYER_NAME_ATTR, "TheirLinear", raising=False)
    with widen.linear_marked():
        assert torch.nn.Linear.kernel_layer_name == "TheirLinear"
    assert torch.nn.Linear.kernel_layer_name == "TheirLinear"


def test_linear_is_a_kernel_config_key_of_a_model_with_linear_layers():
    model = tiny_llama()
    assert "Linear" in KernelConfig().valid_keys(model)
    KernelConfig(kernel_mapping={"Linear": None}).check_keys(model)  # turning it off
