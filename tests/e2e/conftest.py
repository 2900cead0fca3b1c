"""End-to-end fixtures: a logdir written by tensorboardX (and TensorBoard's own writer), a real
`tbscope serve` on loopback, and Debian's chromium driven by Playwright (never a downloaded
browser)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_util import CHROMIUM, CHROMIUM_ARGS, Page, Server
from logdir import write


@pytest.fixture(scope="session")
def logdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="tbscope-e2e-"))
    write(d / "logs")
    yield d / "logs"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server(logdir: Path) -> Iterator[Server]:
    s = Server(logdir)
    try:
        s.wait_loaded()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: `make chromium` installs Debian's chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.close()
