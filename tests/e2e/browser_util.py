"""End-to-end helpers: a real `tbscope serve` in a subprocess, and pages of Debian's chromium
that record console errors and dialogs. (Not named conftest: pytest may load tests/python's
conftest under that module name in the same session.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "e2e"
CHROMIUM = os.environ.get("TBSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
if hasattr(os, "geteuid") and os.geteuid() == 0:
    CHROMIUM_ARGS.append("--no-sandbox")  # chromium refuses to start sandboxed as root


class Server:
    """`tbscope serve` in a subprocess; the URL is read from what it prints."""

    def __init__(self, logdir: Path, *args: str) -> None:
        exe = Path(sys.executable).with_name("tbscope")
        self.proc = subprocess.Popen(
            [str(exe), "serve", str(logdir), "--port", "0", "--reload_interval", "1", "--no-cache", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        self.output: list[str] = []
        self.url = ""
        found = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                m = re.search(r"https?://(?:127\.0\.0\.1|localhost|\[::1\]):\d+/\S*", line)
                if m and not self.url:
                    self.url = m.group(0).rstrip(".,)").split("?")[0]  # without ?token=
                    if not self.url.endswith("/"):
                        self.url += "/"
                    found.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        if not found.wait(60):
            self.stop()
            raise RuntimeError("tbscope serve printed no URL:\n" + "".join(self.output))

    def wait_loaded(self, timeout: float = 120) -> None:
        import json

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(self.url + "api/v1/status") as r:
                if json.load(r)["loading"]["done"]:
                    return
            time.sleep(0.2)
        raise TimeoutError("the server did not finish loading")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(20)
        self.pump.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Page:
    """A page that records console errors, page errors and dialogs (an XSS would open one)."""

    def __init__(self, browser: Any, width: int = 1280, height: int = 800, color_scheme: str = "light") -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=color_scheme, device_scale_factor=1)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

        def on_dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", on_dialog)

    def screenshot(self, name: str, publish: bool = False) -> Path:
        """Into build/e2e/; with `publish`, also into $TBSCOPE_SCREENSHOTS (make screenshots
        sets it to docs/screenshots)."""
        BUILD.mkdir(parents=True, exist_ok=True)
        path = BUILD / f"{name}.png"
        self.page.screenshot(path=str(path))
        target = os.environ.get("TBSCOPE_SCREENSHOTS")
        if publish and target:
            Path(ROOT / target).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, ROOT / target / f"{name}.png")
        return path

    def close(self) -> None:
        self.context.close()
