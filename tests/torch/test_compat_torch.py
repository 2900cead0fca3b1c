"""tbscope.compat against TensorBoard's accumulators and tbparse on logs torch's own
``SummaryWriter`` wrote: the comparison of tests/python/test_compat_diff.py (every public name
of the originals, every answer, only docs/compat.md's differences allowed), on torch's files."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.tensorboard import SummaryWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from test_compat_diff import GUIDANCES, compare_accumulators, compare_readers  # after the path


def _write(root: Path) -> Path:
    g = torch.Generator().manual_seed(0)
    with SummaryWriter(root / "main") as w:
        for step in range(30):
            w.add_scalar("loss", float(torch.rand(1, generator=g)), step)
            w.add_scalars("pair", {"a": step, "b": -step}, step)
            if step % 5 == 0:
                w.add_histogram("weights", torch.randn(200, generator=g), step)
                w.add_image("image", torch.rand(3, 6, 5, generator=g), step)
                w.add_audio("sound", torch.rand(1, 400, generator=g) * 2 - 1, step, sample_rate=8000)
                w.add_text("note", f"step **{step}**", step)
                w.add_pr_curve("pr", torch.randint(0, 2, (50,), generator=g), torch.rand(50, generator=g), step)
        # torch writes no SessionLog: steps that go back stay (file_version 2)
        for step in range(10, 15):
            w.add_scalar("loss", -1.0, step)
        w.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hp/acc": 0.5}, run_name=".")
        with warnings.catch_warnings():  # torch's add_graph traces with torch.jit.trace, deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            w.add_graph(torch.nn.Linear(3, 2), torch.zeros(1, 3))
    return root


@pytest.fixture(scope="module")
def torch_logdir(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("torch-compat"))


def _runs(root: Path) -> list[Path]:
    return sorted({p.parent for p in root.rglob("*tfevents*") if p.is_file()})


@pytest.mark.parametrize("kind", ["legacy", "plugin"])
def test_accumulators_match_the_originals_on_torch_files(torch_logdir, kind):
    problems = {}
    for run in _runs(torch_logdir):
        for gname, guidance in GUIDANCES.items():
            for purge in (True, False):
                got = compare_accumulators(kind, run, guidance, purge)
                if got:
                    problems[f"{run.relative_to(torch_logdir)} {gname} purge={purge}"] = got
    assert len(_runs(torch_logdir)) >= 3  # main and add_scalars' two runs
    assert not problems, problems


@pytest.mark.parametrize("pivot", [False, True], ids=["long", "pivot"])
def test_summary_reader_matches_tbparse_on_torch_files(torch_logdir, pivot):
    problems = {}
    files = sorted(p for p in torch_logdir.rglob("*tfevents*") if p.is_file())
    for path in [torch_logdir, *files]:
        for extra in (set(), {"wall_time", "dir_name", "file_name"}):
            got = compare_readers(path, pivot and not extra, extra)
            if got:
                problems[f"{path.relative_to(torch_logdir)} {sorted(extra)}"] = got
    assert not problems, problems


def test_the_logs_hold_what_the_comparison_needs(torch_logdir):
    """Guard against an empty comparison: the originals see every kind torch wrote."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(torch_logdir / "main")).Reload()
    tags = acc.Tags()
    assert tags["scalars"] == ["loss", "hp/acc"] and tags["histograms"] == ["weights"]
    assert tags["images"] == ["image"] and tags["audio"] == ["sound"] and tags["graph"]
    assert [e.step for e in acc.Scalars("loss")][:3] == [0, 1, 2] and np.isclose(acc.Scalars("loss")[-1].value, -1.0)
