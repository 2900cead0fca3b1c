"""PR curves and custom-scalar layouts, compared with what TensorBoard's own code makes of the
same files (its EventAccumulator's tensors and its custom-scalars plugin's merged layout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tbscope
from tbscope._plugins import merge_layouts

LAYOUT_A = {
    "Losses": {
        "train": ["Multiline", ["loss/train.*", "loss/total"]],
        "band": ["Margin", ["acc/mid", "acc/lo", "acc/hi"]],
    },
    "Other": {"lr": ["Multiline", ["lr"]]},
}
LAYOUT_B = {
    "Losses": {"train": ["Multiline", ["loss/train.*", "loss/total"]], "eval": ["Multiline", ["loss/eval"]]},
    "New": {"gpu": ["Multiline", ["gpu/.*"]]},
}


@pytest.fixture(scope="module")
def plugin_logdir(tmp_path_factory) -> Path:
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("plugins")
    rng = np.random.default_rng(3)
    for run, layout in (("a", LAYOUT_A), ("b", LAYOUT_B)):
        with SummaryWriter(str(root / run)) as w:
            w.add_custom_scalars(layout)
            for step in range(3):
                labels = rng.integers(0, 2, 100)
                preds = np.clip(labels * 0.3 + rng.random(100) * 0.7, 0, 1)
                w.add_pr_curve("pr/main", labels, preds, step, num_thresholds=11 + step)
                w.add_scalar("loss/total", 1.0 / (step + 1), step)
    with SummaryWriter(str(root / "plain")) as w:
        w.add_scalar("loss/total", 1.0, 0)
    return root


def test_pr_curves_match_tensorboards_tensors(plugin_logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    pr = tbscope.scan(plugin_logdir).pr_curves().to_pandas()
    assert len(pr) == 6 and set(pr["run"]) == {"a", "b"}
    checked = 0
    for run in ("a", "b"):
        acc = EventAccumulator(str(plugin_logdir / run), size_guidance={"tensors": 0})
        acc.Reload()
        for ev in acc.Tensors("pr/main"):
            want = tensor_util.make_ndarray(ev.tensor_proto).astype(np.float64)
            row = pr[(pr["run"] == run) & (pr["step"] == ev.step)].iloc[0]
            assert row["wall_time"] == ev.wall_time
            for i, name in enumerate(("tp", "fp", "tn", "fn", "precision", "recall")):
                np.testing.assert_array_equal(np.array(row[name]), want[i])
            np.testing.assert_array_equal(np.array(row["thresholds"]), np.linspace(0, 1, want.shape[1]))
            assert list(row["shape"]) == [6, want.shape[1]]
            checked += 1
    assert checked == 6


def test_custom_scalar_layouts(plugin_logdir):
    layouts = tbscope.scan(plugin_logdir).custom_scalars()
    assert set(layouts) == {"a", "b"}
    cats = {c["title"]: c for c in layouts["a"]["category"]}
    assert set(cats) == {"Losses", "Other"}
    charts = {c["title"]: c for c in cats["Losses"]["chart"]}
    assert charts["train"]["multiline"]["tag"] == ["loss/train.*", "loss/total"]
    assert charts["band"]["margin"]["series"] == [{"value": "acc/mid", "lower": "acc/lo", "upper": "acc/hi"}]


def test_merged_layout_matches_tensorboards_plugin(plugin_logdir):
    from google.protobuf import json_format
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.context import RequestContext
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.custom_scalar import custom_scalars_plugin, layout_pb2

    mux = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"custom_scalars": 0})
    mux.AddRunsFromDirectory(str(plugin_logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(plugin_logdir))
    plugin = custom_scalars_plugin.CustomScalarsPlugin(
        base_plugin.TBContext(data_provider=provider, logdir=str(plugin_logdir), multiplexer=mux)
    )
    want = plugin.layout_impl(RequestContext(), "")
    proto = json_format.Parse(want, layout_pb2.Layout())
    got = merge_layouts(tbscope.scan(plugin_logdir).custom_scalars())
    assert [c["title"] for c in got["category"]] == [c.title for c in proto.category]
    for mine, theirs in zip(got["category"], proto.category):
        assert [c["title"] for c in mine["chart"]] == [c.title for c in theirs.chart]
        for chart, tchart in zip(mine["chart"], theirs.chart):
            if "multiline" in chart:
                assert chart["multiline"]["tag"] == list(tchart.multiline.tag)
            else:
                assert [s["value"] for s in chart["margin"]["series"]] == [s.value for s in tchart.margin.series]
