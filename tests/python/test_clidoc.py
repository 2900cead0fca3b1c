"""docs/cli.md is generated from the click commands, and the examples it shows really run.

The reference is regenerated here and compared with the committed file; the examples in every
command's help (which the reference copies) are run against the demo logdir the other docs use
(examples/write_demo_logdir.py, written with tensorboardX), as a user would paste them.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import fixtures
import pandas as pd
import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.doc import REGENERATE, all_commands, command_examples, render
from tbscope._cli.main import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "cli.md"


def test_cli_md_is_up_to_date():
    want = render()
    have = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert have == want, f"docs/cli.md is out of date with the CLI; regenerate it with: {REGENERATE}"


def test_reference_covers_every_command_and_option():
    text = render()
    for name, cmd in all_commands():
        assert f"### `tbscope {name}`" in text
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}" in text or f", {opt}" in text or f"/ {opt}" in text, (name, opt)
        for example in command_examples(cmd):
            assert example in text


def test_every_command_has_examples():
    for name, cmd in all_commands():
        examples = command_examples(cmd)
        assert examples, f"{name} has no Examples block in its help"
        assert all((e + " ").startswith(f"tbscope {name} ") for e in examples), examples


def test_reference_is_markdown_safe():
    text = render()
    # Placeholders such as <tag> must be escaped, or Markdown would swallow them as HTML.
    outside_code = [line for line in text.split("```")[0::2]]
    for chunk in outside_code:
        for line in chunk.splitlines():
            if line.startswith("<!--") or line.endswith("-->"):
                continue
            stripped = line.replace("\\<", "").replace("\\>", "")
            code_spans = stripped.split("`")[0::2]
            assert not any("<" in span for span in code_spans), line


def test_generator_runs_as_a_module():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "tbscope._cli.doc"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == render()


# --------------------------------------------------------------------------------------------
# the examples, run


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    pytest.importorskip("tensorboardX")
    return fixtures.write_demo_logdir(tmp_path_factory.mktemp("clidoc") / "runs")


def _needs(example: str) -> str | None:
    """Why an example cannot run here, or None."""
    if " sql " in example and importlib.util.find_spec("duckdb") is None:
        return "duckdb (tbscope[sql]) is not installed"
    return None


EXAMPLES = [(name, e) for name, cmd in sorted(all_commands()) for e in command_examples(cmd)] + [
    ("main", e) for e in command_examples(main)
]


@pytest.mark.parametrize("name, example", EXAMPLES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXAMPLES)])
def test_example_runs(demo, tmp_path, monkeypatch, name, example):
    why = _needs(example)
    if why:
        pytest.skip(why)
    # A copy: clean examples with --yes must not change the logdir other examples read.
    shutil.copytree(demo, tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    # A cache root of the test's own: `tbscope cache clear` examples must not clear the user's.
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(tmp_path / "cache-root"))
    argv = shlex.split(example)
    assert argv[0] == "tbscope"
    r = CliRunner().invoke(main, argv[1:], prog_name="tbscope")
    assert r.exit_code == 0, f"{example}\n{r.output}"
    out = r.stdout
    if "--format json" in example:
        assert isinstance(json.loads(out), list)
    if "--format csv" in example:
        assert len(pd.read_csv(io.StringIO(out))) > 0
    if argv[1] == "export":
        assert os.path.exists(argv[argv.index("-o") + 1])


def test_example_results_are_right(demo, monkeypatch):
    """The examples' numbers agree with the API the docs describe."""
    monkeypatch.chdir(demo.parent)
    r = CliRunner().invoke(main, ["ls", "runs/", "--runs", "lr=0.1/*", "--format", "json"], prog_name="tbscope")
    rows = json.loads(r.stdout)
    assert [row["run"] for row in rows] == ["lr=0.1/seed=0", "lr=0.1/seed=1", "lr=0.1/seed=2"]
    want = tbscope.read_scalars(demo, runs="lr=0.1/*")
    assert sum(row["last_step"] == want["step"].max() for row in rows) == 3
    r = CliRunner().invoke(
        main, ["tags", "runs/", "--kinds", "scalars", "--tags", "train/*", "--format", "csv"], prog_name="tbscope"
    )
    got = pd.read_csv(io.StringIO(r.stdout))
    counts = tbscope.read_scalars(demo, tags="train/*").groupby(["run", "tag"], observed=True).size()
    assert sorted(zip(got["run"], got["tag"], got["points"])) == sorted(
        (str(a), str(b), int(n)) for (a, b), n in counts.items()
    )
