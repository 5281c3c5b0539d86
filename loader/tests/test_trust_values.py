"""Trust and opt-in flags are real bools on every path: ``"false"`` never means yes.

A truthy string such as ``"false"`` or ``"0"`` used to pass ``bool()`` and so opt in to
running an untrusted organisation's code. Every flag now refuses anything but a bool
with a typed error that names the flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import get_kernel
from kernelhub.errors import FlagTypeError, KernelHubError, TrustError
from kernelhub.integrations.transformers.kernel_config import KernelConfig, from_transformers
from kernelhub.layer.repos import (
    FuncRepository,
    LayerRepository,
    LockedFuncRepository,
    LockedLayerRepository,
)
from kernelhub.signing.trust import check_trusted, trust_flag
from kh_doubles import DirHub

NOT_BOOLS = ["false", "False", "0", "", "no", 0, 1, None, [], 1.0]


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_kernel_config_trust_remote_code_must_be_a_bool(value: object) -> None:
    with pytest.raises(FlagTypeError, match="trust_remote_code"):
        KernelConfig({"RMSNorm": ("someone/kernel:RMSNorm", {"trust_remote_code": value})})


def test_kernel_config_false_string_no_longer_trusts() -> None:
    # The reported hole: {"trust_remote_code": "false"} was read as True.
    with pytest.raises(FlagTypeError):
        KernelConfig({"RMSNorm": ("someone/kernel:RMSNorm", {"trust_remote_code": "false"})})
    spec = KernelConfig({"RMSNorm": ("someone/kernel:RMSNorm", {"trust_remote_code": False})})
    assert spec.entries["RMSNorm"]["cpu"].trust_remote_code is False


@pytest.mark.parametrize("field", ["inherit_mapping", "use_local_kernel"])
def test_kernel_config_switches_must_be_bools(field: str) -> None:
    with pytest.raises(FlagTypeError, match=field):
        KernelConfig({}, **{field: "false"})


def test_transformers_config_switches_must_be_bools() -> None:
    class TransformersConfig:
        kernel_mapping: dict = {}
        inherit_mapping = "false"
        use_local_kernel = False

    with pytest.raises(FlagTypeError, match="inherit_mapping"):
        from_transformers(TransformersConfig())


@pytest.mark.parametrize("value", [v for v in NOT_BOOLS if v != []] + [[1], ("a/b", 2)])
def test_get_kernel_trust_remote_code_must_be_a_bool_or_repo_ids(value: object,
                                                                 dirhub: DirHub) -> None:
    # a list of repository ids is the ecosystem's allow-list form (an empty one trusts none)
    with pytest.raises(FlagTypeError, match="trust_remote_code"):
        get_kernel("someone/kernel", 1, trust_remote_code=value, hub=dirhub)  # type: ignore[arg-type]
    assert dirhub.calls == []


def test_check_trusted_refuses_a_string(tmp_path: Path) -> None:
    with pytest.raises(FlagTypeError):
        check_trusted("someone/kernel", DirHub(tmp_path), trust_remote_code="false")  # type: ignore[arg-type]
    with pytest.raises(TrustError):
        check_trusted("someone/kernel", DirHub(tmp_path), trust_remote_code=False)


@pytest.mark.parametrize("cls", [LayerRepository, FuncRepository, LockedLayerRepository,
                                 LockedFuncRepository])
@pytest.mark.parametrize("flag", ["trust_remote_code", "allow_all_kernels"])
def test_repository_flags_must_be_bools(cls: type, flag: str) -> None:
    name = {"layer_name": "L"} if "Layer" in cls.__name__ else {"func_name": "f"}
    with pytest.raises(FlagTypeError, match=flag):
        cls("someone/kernel", **name, **{flag: "false"})


def test_flag_errors_are_kernelhub_and_type_errors() -> None:
    with pytest.raises(KernelHubError):
        LayerRepository("someone/kernel", layer_name="L", trust_remote_code="yes")
    with pytest.raises(TypeError):
        LayerRepository("someone/kernel", layer_name="L", trust_remote_code="yes")


def test_ecosystem_trust_flag_takes_an_allow_list() -> None:
    # The ecosystem's loader accepts trust_remote_code=[repo ids] besides True/False.
    assert trust_flag("someone/kernel", ["someone/kernel"]) is True
    assert trust_flag("someone/kernel", ["someone/other"]) is False
    assert trust_flag("someone/kernel", True) is True
    for value in ("someone/kernel", [1], None, "false"):
        with pytest.raises(FlagTypeError, match="list of repository ids"):
            trust_flag("someone/kernel", value)


def test_ecosystem_install_kernel_honours_the_allow_list(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelhub import ecosystem
    from kernelhub.errors import RepoNotFoundError

    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "hub"))
    (tmp_path / "hub").mkdir()
    with pytest.raises(TrustError):
        ecosystem.install_kernel("someone/kernel", trust_remote_code=["someone/other"])
    with pytest.raises(RepoNotFoundError):  # trusted now: it gets as far as the hub
        ecosystem.install_kernel("someone/kernel", trust_remote_code=["someone/kernel"])
