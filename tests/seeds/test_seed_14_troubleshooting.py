"""SEEDS 14 — troubleshooting: a missing or out-of-range package gives an ImportError that
says how to install a compatible one; load failures name hardware/driver/version causes."""

from __future__ import annotations

import pytest
from kernelhub import KernelHubError, get_kernel
from kernelhub.integrations.transformers.patch import check_transformers
from kernelhub.integrations.transformers.seams import version_problem


def test_installed_transformers_is_accepted():
    check_transformers()


@pytest.mark.parametrize("found", [None, "4.57.1"])
def test_missing_or_too_old_transformers_says_what_to_install(found):
    assert "pip install 'transformers>=5.0'" in version_problem(found)


@pytest.mark.parametrize("found", ["5.0.0", "5.24.0", "5.25.0", "6.0.0"])
def test_every_release_from_5_0_is_served_by_its_seams_not_a_pin(found):
    assert version_problem(found) is None


def test_load_failure_names_the_driver_cause(hub_env):
    import torch

    if torch.version.cuda:
        pytest.skip("this torch has CUDA; the message under test is for a CPU-only torch")
    with pytest.raises(KernelHubError, match="without CUDA"):
        get_kernel("kernels-community/activation", 1, backend="cuda")


def test_load_failure_names_the_version_cause(hub_env):
    with pytest.raises(KernelHubError, match=r"has no version 9.*v1"):
        get_kernel("kernels-community/activation", 9)
