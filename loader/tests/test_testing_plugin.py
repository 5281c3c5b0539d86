"""The pytest plugin makes a kernel's tests import the built variant by its plain name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kh_doubles import make_variant


def _run_pytest(tests: Path, variant: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELHUB_TEST_VARIANT"}
    if variant is not None:
        env["KERNELHUB_TEST_VARIANT"] = str(variant)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kernelhub.testing", "-p", "no:cacheprovider",
         str(tests)],
        cwd=tests, env=env, capture_output=True, text=True, timeout=120,
    )


def test_kernel_tests_import_the_variant_under_test(tmp_path: Path) -> None:
    meta = make_variant(tmp_path / "build" / "torch-universal", name="my-act",
                        init="def double(x):\n    return 2 * x\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_act.py").write_text(
        "import my_act\n"
        "def test_double():\n"
        "    assert my_act.double(21) == 42\n"
        f"    assert my_act.__name__ == {meta.id!r}\n"
    )
    result = _run_pytest(tests, tmp_path / "build" / "torch-universal")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernelhub: testing variant" in result.stdout
    assert "1 passed" in result.stdout


def test_a_broken_variant_stops_the_run_with_its_error(tmp_path: Path) -> None:
    make_variant(tmp_path / "v", name="my-act")
    (tmp_path / "v" / "__init__.py").write_text("tampered = True\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text("def test_x():\n    pass\n")
    result = _run_pytest(tests, tmp_path / "v")
    assert result.returncode != 0
    assert "KERNELHUB_TEST_VARIANT" in result.stderr
    assert "sha256 does not match" in result.stderr
