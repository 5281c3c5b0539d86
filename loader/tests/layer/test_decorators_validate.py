"""Marking layers and functions, and the pure-layer checks kernel layers must pass."""

from __future__ import annotations

import pytest
import torch
from kernelhub.layer import (
    LayerValidationError,
    replace_kernel_forward_from_hub,
    use_kernel_forward_from_hub,
    use_kernel_func_from_hub,
    use_kernelized_func,
    validate_layer,
)
from kernelhub.layer.repos import func_layer
from kernelhub.layer.validate import forward_incompatibility
from torch import nn


def test_marking_a_class_only_adds_the_layer_name() -> None:
    class Act(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    marked = use_kernel_forward_from_hub("Act")(Act)
    assert marked is Act and Act.kernel_layer_name == "Act"
    assert torch.equal(Act()(torch.ones(2)), torch.full((2,), 2.0))

    class Foreign(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    replace_kernel_forward_from_hub(Foreign, "Foreign")
    assert Foreign.kernel_layer_name == "Foreign"


def test_a_marked_function_is_a_module_that_still_works_as_the_function() -> None:
    def scale(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
        """Multiply."""
        return x * factor

    for decorator in (use_kernel_forward_from_hub, use_kernel_func_from_hub):
        module = decorator("scale")(scale)
        assert isinstance(module, nn.Module)
        assert type(module).kernel_layer_name == "scale"
        assert torch.equal(module(torch.ones(2), factor=3.0), torch.full((2,), 3.0))
        assert forward_incompatibility(type(module).forward, func_layer(scale, "s").forward) is None


def test_a_kernel_function_refusing_a_call_hands_it_to_the_replaced_function(caplog) -> None:
    import types

    def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return x * table  # the model's own function

    def kernel(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return x * table + 100  # tells the two apart

    kernel.unsupported_reason = (  # type: ignore[attr-defined]
        lambda x, table: "half-width table" if table.shape[-1] != x.shape[-1] else None)
    module = use_kernel_forward_from_hub("rotate")(rotate)
    module.forward = types.MethodType(func_layer(kernel, "kernel").forward, module)
    x = torch.ones(2, 4)
    assert torch.equal(module(x, torch.ones(4)), torch.full((2, 4), 101.0))
    with caplog.at_level("WARNING"):
        for _ in range(2):  # said once
            assert torch.equal(module(x, torch.full((2, 1), 3.0)), torch.full((2, 4), 3.0))
    said = [r.getMessage() for r in caplog.records if "half-width table" in r.getMessage()]
    assert said == ["kernel: running rotate's own code (half-width table)"]


def test_a_prepared_call_decides_and_runs_in_one_pass(caplog) -> None:
    """``prepare_call`` returns the reason or the call itself: what deciding worked out
    is what runs, so the arguments are read once per call, not once per look."""
    import types

    looks: list[str] = []

    def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return x * table  # the model's own function

    def kernel(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        raise AssertionError("kernelize runs the prepared call, not the function again")

    def prepare_call(x: torch.Tensor, table: torch.Tensor) -> object:
        looks.append("looked")
        if table.shape[-1] != x.shape[-1]:
            return "a narrow table"
        width = table.shape[-1]  # worked out once, used by the call
        return lambda: x * table[..., :width] + 100

    kernel.prepare_call = prepare_call  # type: ignore[attr-defined]
    kernel.unsupported_reason = lambda x, table: pytest.fail(  # type: ignore[attr-defined]
        "prepare_call is preferred")
    module = use_kernel_forward_from_hub("rotate")(rotate)
    module.forward = types.MethodType(func_layer(kernel, "kernel").forward, module)
    x = torch.ones(2, 4)
    assert torch.equal(module(x, torch.ones(4)), torch.full((2, 4), 101.0))
    assert looks == ["looked"]
    with caplog.at_level("WARNING"):
        assert torch.equal(module(x, torch.full((2, 1), 3.0)), torch.full((2, 4), 3.0))
    assert looks == ["looked", "looked"]
    assert any(r.getMessage() == "kernel: running rotate's own code (a narrow table)"
               for r in caplog.records)


def test_bad_decorator_arguments_are_clear() -> None:
    with pytest.raises(TypeError, match="non-empty str"):
        use_kernel_forward_from_hub("")
    with pytest.raises(TypeError, match="decorates functions"):
        use_kernel_func_from_hub("x")(nn.ReLU)
    with pytest.raises(TypeError, match="is not marked"):
        use_kernelized_func(lambda x: x)


def test_use_kernelized_func_gives_each_instance_its_own_function_module() -> None:
    @use_kernel_forward_from_hub("double")
    def double(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    @use_kernelized_func(double)
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

    a, b = Block(), Block()
    assert set(a._kernel_funcs) == {"double"}
    assert a._kernel_funcs["double"] is not b._kernel_funcs["double"]
    assert type(a._kernel_funcs["double"]) is type(double)
    assert set(a.state_dict()) == {"lin.weight", "lin.bias"}, "not registered as submodules"


class Original(nn.Module):
    def forward(self, x: torch.Tensor, scale: float = 1.0, *, eps: float = 1e-6) -> torch.Tensor:
        return x


@pytest.mark.parametrize("forward_src,ok", [
    ("def forward(self, x, scale=1.0, *, eps=1e-6): return x", True),
    ("def forward(self, input, s=2.0, *, eps=0.0): return input", True),  # names may differ
    ("def forward(self, *args, **kwargs): return args[0]", True),
    ("def forward(self, x, scale=1.0, extra=None, *, eps=1e-6): return x", True),
    ("def forward(self, x): return x", False),
    ("def forward(self, x, scale, *, eps=1e-6): return x", False),
    ("def forward(self, x, scale=1.0): return x", False),
    ("def forward(self, x, scale=1.0, y=None, *, eps=1e-6, must): return x", False),
    ("def forward(self, x, y, z=1.0, *, eps=1e-6): return x", False),
])
def test_forward_signature_compatibility(forward_src: str, ok: bool) -> None:
    namespace: dict = {}
    exec(forward_src, namespace)
    layer = type("Kernel", (nn.Module,), {"forward": namespace["forward"]})
    if ok:
        validate_layer(layer, Original, "kernel")
    else:
        with pytest.raises(LayerValidationError, match="forward is not compatible"):
            validate_layer(layer, Original, "kernel")


def test_pure_layer_rules() -> None:
    class Good(nn.Module):
        """Docstrings and the two capability flags are allowed."""

        has_backward = False
        can_torch_compile = True

        def forward(self, x: torch.Tensor, scale: float = 1.0, *, eps: float = 1e-6
                    ) -> torch.Tensor:
            return x

    validate_layer(Good, Original, "k")

    class State(Good):
        cache: dict = {}

    with pytest.raises(LayerValidationError, match="State defines cache"):
        validate_layer(State, Original, "k")

    class NoForward(nn.Module):
        pass

    with pytest.raises(LayerValidationError, match="no forward of its own"):
        validate_layer(NoForward, Original, "k")

    with pytest.raises(LayerValidationError, match=r"must be an nn\.Module subclass"):
        validate_layer(int, Original, "k")
