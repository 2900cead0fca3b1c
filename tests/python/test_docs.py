"""The docs' examples run, and the docs cover what they claim to cover.

Every ```python block in docs/*.md and README.md is executed. The blocks of one page run in
order, in one fresh directory holding ``demo-logdir`` (written by
examples/write_demo_logdir.py), each block in its own namespace: a block may use files an
earlier block of its page wrote, but must import what it uses, as a reader pasting it would.
"""

from __future__ import annotations

import re
import shutil
import traceback
from pathlib import Path

import fixtures
import pytest
import tbscope
from tbscope._cli.main import main as cli_main
from tbscope._reader import KINDS

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.fixture(scope="session")
def demo_logdir(tmp_path_factory) -> Path:
    pytest.importorskip("tensorboardX")
    return fixtures.write_demo_logdir(tmp_path_factory.mktemp("docs") / "demo-logdir")


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_python_blocks_run(doc, demo_logdir, tmp_path, monkeypatch, capsys):
    blocks = python_blocks(doc)
    shutil.copytree(demo_logdir, tmp_path / "demo-logdir")
    monkeypatch.chdir(tmp_path)
    # A cache root of the test's own: blocks that clear caches must not clear the user's.
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(tmp_path / "cache-root"))
    for line, code in blocks:
        # Pad with newlines so tracebacks give the line number in the Markdown file.
        compiled = compile("\n" * (line - 1) + code, str(doc.relative_to(REPO)), "exec")
        try:
            exec(compiled, {"__name__": "__main__"})
        except Exception:
            pytest.fail(f"the python block at {doc.relative_to(REPO)}:{line} failed:\n{traceback.format_exc()}")
    capsys.readouterr()


def test_blocks_are_found():
    counts = {p.name: len(python_blocks(p)) for p in DOCS}
    assert counts["README.md"] >= 1
    for name in ("quickstart.md", "kinds.md", "robustness.md"):
        assert counts[name] >= 3, counts


@pytest.mark.parametrize("name", ["quickstart.md", "kinds.md", "cli.md", "robustness.md", "schema.md"])
def test_doc_exists(name):
    assert (REPO / "docs" / name).is_file()


def test_kinds_doc_has_a_section_per_kind():
    text = (REPO / "docs" / "kinds.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\w+)\s*$", text, re.M)
    assert headings == list(KINDS)
    for kind in KINDS:
        section = text.split(f"## {kind}\n", 1)[1].split("\n## ", 1)[0]
        assert "```python" in section, f"no example for {kind}"


def test_cli_doc_covers_every_command_and_option():
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = []
    for opt in (o for p in cli_main.params for o in p.opts + p.secondary_opts):
        if opt not in text:
            missing.append(opt)
    for name, command in cli_main.commands.items():
        if f"tbscope {name}" not in text:
            missing.append(f"tbscope {name}")
        for param in command.params:
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("-") and opt not in text:
                    missing.append(f"{name} {opt}")
    assert not missing, f"docs/cli.md does not mention {missing}"
    for code in ("| 0 |", "| 1 |", "| 2 |"):
        assert code in text


def test_every_public_name_is_documented_somewhere():
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS)
    undocumented = [n for n in tbscope.__all__ if not n.startswith("_") and n not in text]
    # Classes users never construct may stay implicit.
    assert set(undocumented) <= {"BlobFrame", "Frame", "TensorFrame", "Problem", "Report", "LoadStats", "Logdir"}, (
        undocumented
    )


@pytest.mark.parametrize("doc", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{doc.name} links to missing files: {broken}"


def test_readme_sampling_figures_are_tensorboards():
    """The README's figures for what TensorBoard keeps per tag are TensorBoard's own defaults."""
    from tensorboard.backend.event_processing import data_ingester, event_accumulator

    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    server = data_ingester.DEFAULT_TENSOR_SIZE_GUIDANCE
    legacy = event_accumulator.DEFAULT_SIZE_GUIDANCE
    assert (
        f"its server keeps {server['scalars']:,} scalars and {server['images']} images per tag, and its "
        f"`EventAccumulator` {legacy['scalars']:,} scalars and {legacy['images']} images"
    ) in text
