"""Autotuning's former name, ``verify``, still works everywhere users wrote it, and says
once per process what to write instead."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from kernelhub import kernelize, use_kernel_mapping
from kernelhub.cli import main as cli_main
from kernelhub.layer import LayerRepository, Mode, autotune_report
from kernelhub.layer.autotune import autotune_from_env, renamed, timing
from kh_autotune_toy import REPO, SlowSiluAndMul


@pytest.fixture
def env(autotune_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renamed, "_warned", set())  # a fresh process: nothing said yet
    monkeypatch.setattr(timing, "measure", quiet_and_faster)  # what is measured is not the point


def quiet_and_faster(kernel: Callable[[], object], pytorch: Callable[[], object],
                     rounds: int = timing.ROUNDS) -> timing.Timing:
    return timing.Timing((1e-4,) * rounds, (1e-3,) * rounds, 0.0)


def deprecations(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, FutureWarning)]


def test_kernelize_verify_autotunes_and_says_so_once(env: None) -> None:
    model, x = SlowSiluAndMul(), torch.randn(4, 32)
    repo = LayerRepository(REPO, layer_name="Good", version=1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}):
            kernelize(model, mode=Mode.INFERENCE, verify=True)
            kernelize(model, mode=Mode.INFERENCE, verify=True)
    assert deprecations(record) == [
        "kernelize(verify=...) is deprecated: use kernelize(autotune=...) (autotuning: the "
        "kernel runs only where it is correct and faster than PyTorch on this machine)"]
    assert record[0].filename == __file__, "the warning does not point at the caller"
    model(x)
    [(_, seen)] = autotune_report(model)
    assert seen.decision.use_kernel


def test_verification_report_is_autotune_report(env: None) -> None:
    from kernelhub import verification_report

    model, x = SlowSiluAndMul(), torch.randn(4, 32)
    with use_kernel_mapping({"SiluAndMul": {"cpu": LayerRepository(REPO, layer_name="Good",
                                                                     version=1)}}):
        kernelize(model, mode=Mode.INFERENCE, autotune=True)
    model(x)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert verification_report(model) == autotune_report(model) != []
        verification_report(model)
    assert len(deprecations(record)) == 1
    assert "use autotune_report" in deprecations(record)[0]


def test_kernelhub_verify_environment_variable(env: None, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    monkeypatch.delenv("KERNELHUB_AUTOTUNE", raising=False)
    monkeypatch.delenv("KERNELHUB_VERIFY", raising=False)
    assert autotune_from_env() is False
    monkeypatch.setenv("KERNELHUB_AUTOTUNE", "1")
    assert autotune_from_env() is True
    monkeypatch.delenv("KERNELHUB_AUTOTUNE")
    monkeypatch.setenv("KERNELHUB_VERIFY", "1")
    with pytest.warns(FutureWarning, match="KERNELHUB_VERIFY is deprecated: use KERNELHUB_AUTOTUNE"):
        assert autotune_from_env() is True
    monkeypatch.setenv("KERNELHUB_AUTOTUNE", "0")  # the new name decides where both are set
    assert autotune_from_env() is False


def test_kernel_config_verify(env: None) -> None:
    from kernelhub.integrations.transformers import KernelConfig, KernelConfigError

    with pytest.warns(FutureWarning, match=r"KernelConfig\(verify=...\) is deprecated") as record:
        assert KernelConfig(verify=True).autotune is True
    assert record[0].filename == __file__, "the warning does not point at the caller"
    assert KernelConfig(autotune=True).autotune is True
    assert KernelConfig().autotune is False
    with pytest.raises(KernelConfigError, match="verify must be True or False, not 'yes'"):
        KernelConfig(verify="yes")  # type: ignore[arg-type]
    with pytest.raises(KernelConfigError, match="autotune must be True or False, not 1"):
        KernelConfig(autotune=1)  # type: ignore[arg-type]


def test_verify_report_command(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["verify-report"]) == 0
    out, err = capsys.readouterr()
    assert "kernelhub verify-report is deprecated: use kernelhub autotune-report" in err
    assert out.startswith("no autotuning decisions cached")
