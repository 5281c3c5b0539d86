"""The calls kernelize may route to the functions: Transformers passes its model call's
keyword arguments through (which its own functions ignore), and a call setting a feature
the kernel does not implement must be declined before it runs, not raise inside a model."""

from __future__ import annotations

import inspect

import pytest
import torch

FUNCTIONS = ("causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
             "selective_state_update", "selective_scan_fn")


def test_extra_keyword_arguments_are_ignored_as_transformers_does() -> None:
    import mamba_ssm

    torch.manual_seed(0)
    x, w = torch.randn(1, 8, 5), torch.randn(8, 4)
    plain = mamba_ssm.causal_conv1d_fn(x, w, activation="silu")
    passed = mamba_ssm.causal_conv1d_fn(x, w, activation="silu", output_attentions=False,
                                        position_ids=torch.arange(5))
    torch.testing.assert_close(passed, plain)
    assert mamba_ssm.causal_conv1d_fn.unsupported_reason(x, w, activation="silu",
                                                         position_ids=None) is None


@pytest.mark.parametrize(("name", "kwargs", "declined"), [
    ("causal_conv1d_fn", {"seq_idx": torch.zeros(1, 5, dtype=torch.int32)}, "seq_idx"),
    ("causal_conv1d_update", {"cache_seqlens": torch.zeros(1, dtype=torch.int32)},
     "cache_seqlens"),
    ("mamba_chunk_scan_combined", {"cu_seqlens": torch.tensor([0, 5])}, "cu_seqlens"),
    ("mamba_chunk_scan_combined", {"return_varlen_states": True}, "return_varlen_states"),
    ("selective_state_update", {"state_batch_indices": torch.zeros(1, dtype=torch.int32)},
     "state_batch_indices"),
])
def test_unimplemented_features_are_declined_before_the_call(name, kwargs, declined) -> None:
    import mamba_ssm

    function = getattr(mamba_ssm, name)
    reason = function.unsupported_reason
    required = [p for p in inspect.signature(function).parameters.values()
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    args = (torch.empty(0),) * len(required)  # only binding matters: nothing runs
    why = reason(*args, **kwargs)
    assert why is not None and declined in why
    assert reason(*args) is None


def test_every_function_takes_what_transformers_passes() -> None:
    """kernelize's own signature check accepts each function for Transformers' original."""
    transformers = pytest.importorskip("transformers")
    validate = pytest.importorskip("kernelhub.layer.validate")
    repos = pytest.importorskip("kernelhub.layer.repos")
    import importlib

    import mamba_ssm

    originals = {
        "causal_conv1d_fn": ("mamba2", "causal_conv1d_fn"),
        "causal_conv1d_update": ("mamba2", "causal_conv1d_update"),
        "mamba_chunk_scan_combined": ("mamba2", "mamba2_chunk_scan"),
        "selective_state_update": ("mamba2", "mamba2_selective_state_update"),
    }
    checked = 0
    for name, (model, attr) in originals.items():
        try:
            module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
        except ImportError:
            continue
        original = getattr(module, attr, None)
        if original is None:
            continue
        # Transformers registers the function as a module whose forward is the function;
        # kernelize compares that forward with the kernel function's layer.
        layer = repos.func_layer(getattr(mamba_ssm, name), name)
        why = validate.forward_incompatibility(validate.forward_of(type(original)),
                                               validate.forward_of(layer))
        assert why is None, f"{name} vs Transformers {transformers.__version__} {attr}: {why}"
        checked += 1
    if not checked:
        pytest.skip(f"Transformers {transformers.__version__} registers none of these functions")


def _bound_verdict(function, args, kwargs) -> str | None:
    """The verdict by binding the call, as the check did before it looked parameters up
    by position and name."""
    from mamba_ssm._calls import UNSUPPORTED

    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except TypeError as e:
        return f"arguments the kernel does not take ({e})"
    given = [n for n in UNSUPPORTED[function.__name__]
             if (value := bound.arguments.get(n)) is not None and value is not False]
    return (f"{', '.join(given)} (packed sequences or indexed states) not supported"
            if given else None)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_quick_verdict_is_the_bound_one(name) -> None:
    import mamba_ssm

    function = getattr(mamba_ssm, name)
    params = [p for p in inspect.signature(function).parameters.values()
              if p.kind is p.POSITIONAL_OR_KEYWORD]
    required = [p for p in params if p.default is p.empty]
    t = torch.empty(0)
    calls = [((t,) * len(required), {}), ((t,) * (len(required) - 1), {}),
             ((t,) * (len(params) + 1), {}), ((t,) * len(required), {"output_attentions": 1}),
             ((t,) * len(required), {required[0].name: t})]
    from mamba_ssm._calls import UNSUPPORTED

    for declined in UNSUPPORTED[name]:
        at = next(i for i, p in enumerate(params) if p.name == declined)
        calls += [((t,) * len(required), {declined: t}), ((t,) * len(required), {declined: None}),
                  ((t,) * len(required), {declined: False}), ((t,) * (at + 1), {}),
                  ((t,) * at + (None,), {})]
    for args, kwargs in calls:
        assert function.unsupported_reason(*args, **kwargs) == _bound_verdict(
            function, args, kwargs), (name, len(args), sorted(kwargs))
