"""tests/torch runs in the torch venv (`make test-torch`), never here. What this venv can check is
that the suite fails, rather than skips, where torch is missing or a test skips itself: a
skipped suite would let `make test` pass with torch untested."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def pytest_run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


def test_without_torch_the_suite_fails():
    import importlib.util

    assert importlib.util.find_spec("torch") is None, "the main venv must not have torch (it has a venv of its own)"
    r = pytest_run(["tests/torch"], REPO)
    assert r.returncode not in (0, 5), r.stdout
    assert "No module named 'torch'" in r.stdout + r.stderr


def test_a_skip_in_the_suite_is_a_failure(tmp_path):
    stand_in = tmp_path / "modules"
    stand_in.mkdir()
    (stand_in / "torch.py").write_text("")  # lets the suite's conftest import; its hooks are what is tested
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(REPO / "tests" / "torch" / "conftest.py", suite / "conftest.py")
    (suite / "test_skipping.py").write_text(
        "import pytest\n\n"
        "def test_skips():\n    pytest.skip('no reason')\n\n"
        "def test_passes():\n    pass\n")
    (suite / "test_module_skip.py").write_text("import pytest\n\npytest.importorskip('no_such_module')\n")
    args = ["-c", os.devnull, "--rootdir", str(suite)]
    r = pytest_run([*args, str(suite / "test_skipping.py")], suite, PYTHONPATH=str(stand_in))
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, r.stdout
    assert "tests/torch never skip" in r.stdout
    r = pytest_run([*args, str(suite / "test_module_skip.py")], suite, PYTHONPATH=str(stand_in))
    assert r.returncode == 2 and "1 error" in r.stdout, r.stdout  # a collection error stops the run
    assert "tests/torch never skip" in r.stdout
