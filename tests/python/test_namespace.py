"""The package namespace: what ``import tbscope`` gives, whichever of its modules were
imported first, and what it leaves unimported until used."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_functions_named_like_their_modules_stay_functions():
    # Importing the modules first (as the CLI does) must not leave the package's attribute a module.
    out = run("import tbscope.rewrite, tbscope.export, tbscope.query, tbscope.curves, tbscope.server; import tbscope, types; print([isinstance(getattr(tbscope, n), types.ModuleType) for n in ('rewrite', 'export', 'sql', 'downsample', 'serve')])")
    assert out == "[False, False, False, False, False]"


def test_the_server_and_writer_load_on_first_use():
    out = run("import sys, tbscope; before = [m in sys.modules for m in ('tbscope.writer', 'tbscope.server', 'tbscope.query')]; tbscope.SummaryWriter; tbscope.sql; print(before, 'tbscope.writer' in sys.modules, 'tbscope.query' in sys.modules, sorted(set(tbscope.__all__) - set(dir(tbscope))))")
    assert out == "[False, False, False] True True []"
