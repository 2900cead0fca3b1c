"""tests/torch: run by ``make test-torch`` with build/torch-venv's Python, against real torch.

torch is imported here unconditionally, so in an environment where it cannot be imported every
test here errors instead of being skipped: a skipped test cannot fail. For the same reason a
test that skips itself is reported as a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - must import; see the module docstring

HERE = Path(__file__).resolve().parent
# `import tensorboard_view` under any --import-mode, and helpers shared with tests/python.
for folder in (HERE, HERE.parent / "python"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"tests/torch never skip (the torch venv has everything they need): {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        report.outcome = "failed"
        report.longrepr = f"tests/torch never skip (the torch venv has everything they need): {report.longrepr}"
