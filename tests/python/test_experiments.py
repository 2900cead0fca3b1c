"""The hparams join: torch's and tensorboardX's ``add_hparams`` child runs are one experiment
with their parent, in summary(), hparams(), aggregate() and SQL; logs written otherwise are
unchanged. Layouts come from tensorboardX itself, from torch's format written with
TensorBoard's own writer and proto classes (torch is not installed here), and from a real
PyTorch Lightning file."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import tbscope
from tbscope._experiments import hparams_children

SEEDS = (0, 1, 2)
LRS = (0.1, 0.01)


def _curve(lr: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in 2.0 * np.exp(-lr * np.arange(20)) + rng.normal(0, 0.01, 20)]


@pytest.fixture(scope="module")
def tbx_experiments(tmp_path_factory) -> Path:
    """tensorboardX: curves in exp_<lr>_<seed>, add_hparams into exp_<lr>_<seed>/<time>."""
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("tbx_exp")
    for lr in LRS:
        for seed in SEEDS:
            with SummaryWriter(str(root / f"exp_{lr}_{seed}")) as w:
                values = _curve(lr, seed)
                for step, v in enumerate(values):
                    w.add_scalar("train/loss", v, step)
                w.add_hparams({"lr": lr, "seed": seed, "opt": "adam"}, {"hparam/final_loss": values[-1]})
    return root


def _torch_hparams_summaries(hparam_dict: dict, metric_dict: dict):
    """The three Summary protos torch.utils.tensorboard.summary.hparams builds, with
    TensorBoard's proto classes (same messages, fields and plugin metadata as torch)."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.metadata import (
        EXPERIMENT_TAG,
        PLUGIN_DATA_VERSION,
        PLUGIN_NAME,
        SESSION_END_INFO_TAG,
        SESSION_START_INFO_TAG,
    )
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

    def wrap(tag: str, content: HParamsPluginData) -> Summary:
        md = SummaryMetadata(
            plugin_data=SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=content.SerializeToString())
        )
        return Summary(value=[Summary.Value(tag=tag, metadata=md)])

    ssi = SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        if isinstance(v, bool):
            ssi.hparams[k].bool_value = v
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_BOOL")))
        elif isinstance(v, (int, float)):
            ssi.hparams[k].number_value = v
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))
        else:
            ssi.hparams[k].string_value = v
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_STRING")))
    exp = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (
        wrap(EXPERIMENT_TAG, HParamsPluginData(experiment=exp, version=PLUGIN_DATA_VERSION)),
        wrap(SESSION_START_INFO_TAG, HParamsPluginData(session_start_info=ssi, version=PLUGIN_DATA_VERSION)),
        wrap(
            SESSION_END_INFO_TAG,
            HParamsPluginData(
                session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS")), version=PLUGIN_DATA_VERSION
            ),
        ),
    )


def _write(writer, summary, step) -> None:
    from tensorboard.compat.proto.event_pb2 import Event

    ev = Event(wall_time=time.time(), summary=summary)
    if step is not None:
        ev.step = step
    writer.add_event(ev)


@pytest.fixture(scope="module")
def torch_experiments(tmp_path_factory) -> Path:
    """torch.utils.tensorboard's layout and records: its FileWriter is TensorBoard's
    EventFileWriter; add_scalar writes simple_value; add_hparams opens a writer on
    <run>/<str(time.time())> with experiment, session start and end, then the metrics."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    root = tmp_path_factory.mktemp("torch_exp")
    for lr in LRS:
        for seed in SEEDS:
            run = root / f"exp_{lr}_{seed}"
            main = EventFileWriter(str(run))
            values = _curve(lr, seed)
            for step, v in enumerate(values):
                _write(main, Summary(value=[Summary.Value(tag="train/loss", simple_value=v)]), step)
            metrics = {"hparam/final_loss": values[-1]}
            child = EventFileWriter(str(run / str(time.time())))
            for s in _torch_hparams_summaries({"lr": lr, "seed": seed, "opt": "adam"}, metrics):
                _write(child, s, None)
            for k, v in metrics.items():
                _write(child, Summary(value=[Summary.Value(tag=k, simple_value=v)]), None)
            child.close()
            main.close()
    return root


@pytest.fixture(params=["tbx", "torch"])
def experiments(request) -> Path:
    return request.getfixturevalue(f"{request.param}_experiments")


def test_the_layout_really_has_child_runs(experiments):
    runs = tbscope.scan(experiments).runs
    assert len(runs) == 12  # what summary() used to give: two rows per experiment
    assert sum("/" in r for r in runs) == 6


def test_summary_has_one_row_per_experiment(experiments):
    s = tbscope.scan(experiments).summary(stats=["last", "min"])
    assert list(s["run"]) == [f"exp_{lr}_{seed}" for lr in sorted(LRS) for seed in SEEDS]
    s = s.set_index("run")
    for lr in LRS:
        for seed in SEEDS:
            row = s.loc[f"exp_{lr}_{seed}"]
            curve = _curve(lr, seed)
            assert row["hparam:lr"] == lr and row["hparam:seed"] == seed and row["hparam:opt"] == "adam"
            assert row["train/loss:last"] == pytest.approx(curve[-1], rel=1e-6)
            assert row["train/loss:min"] == pytest.approx(min(curve), rel=1e-6)
            assert row["hparam/final_loss:last"] == pytest.approx(curve[-1], rel=1e-6)
            assert row["max_step"] == 19


def test_hparams_table_is_named_by_experiment(experiments):
    hp = tbscope.scan(experiments).hparams().to_pandas()
    assert list(hp["run"]) == [f"exp_{lr}_{seed}" for lr in sorted(LRS) for seed in SEEDS]
    assert all(h.startswith(r + "/") for r, h in zip(hp["run"], hp["hparams_run"]))
    assert hp["status"].tolist() == ["success"] * 6


def test_aggregate_by_seed_keeps_the_curves(experiments):
    agg = tbscope.scan(experiments).aggregate("hparam:seed", stats=["mean", "count"])
    loss = agg[agg["tag"] == "train/loss"]
    assert sorted(set(loss["group"])) == ["lr=0.01, opt=adam", "lr=0.1, opt=adam"]
    assert (loss["count"] == 3).all() and len(loss) == 2 * 20
    for lr in LRS:
        got = loss[loss["group"] == f"lr={lr}, opt=adam"].sort_values("step")["mean"].to_numpy()
        want = np.mean([_curve(lr, s) for s in SEEDS], axis=0)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    final = agg[agg["tag"] == "hparam/final_loss"]
    assert (final["count"] == 3).all() and len(final) == 2


def test_sql_sees_experiments(experiments):
    rows = tbscope.sql(experiments, 'SELECT run, "hparam:lr" FROM summary ORDER BY run').fetchall()
    assert [r[0] for r in rows] == [f"exp_{lr}_{seed}" for lr in sorted(LRS) for seed in SEEDS]


def test_filtered_scans_join_too(experiments):
    s = tbscope.scan(experiments, tags="train/*").summary(stats=["last"]).set_index("run")
    assert len(s) == 6 and s.loc["exp_0.1_1", "hparam:seed"] == 1
    s = tbscope.scan(experiments, runs="exp_0.1_*").summary(stats=["last"]).set_index("run")
    assert list(s.index) == [f"exp_0.1_{seed}" for seed in SEEDS]
    assert s["hparam:lr"].tolist() == [0.1] * 3
    assert s["hparam/final_loss:last"].notna().all()


def test_several_add_hparams_calls_stay_separate(tbx_logdir):
    """tensorboardX fixture: one writer called add_hparams twice (hp/trial_0, hp/trial_1)."""
    s = tbscope.scan(tbx_logdir).summary().set_index("run")
    assert {"hp/trial_0", "hp/trial_1"} <= set(s.index)
    assert s.loc["hp/trial_0", "hparam:opt"] == "adam"


def test_hparams_in_the_run_itself_are_unchanged(tmp_path):
    with tbscope.SummaryWriter(tmp_path / "run") as w:
        for step in range(5):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.add_hparams({"lr": 0.1}, {"loss": 0.2})
    s = tbscope.scan(tmp_path).summary()
    assert list(s["run"]) == ["run"] and s["hparam:lr"].tolist() == [0.1]


def test_lightning_file_is_one_experiment(wild_logdir):
    path = wild_logdir / "Abdul-AA__Text-Generation-With-LSTM" / "lightning_logs"
    if not path.is_dir():
        pytest.skip("the Lightning file is not in the wild set")
    lg = tbscope.scan(path)
    s = lg.summary()
    assert list(s["run"]) == ["version_0"]
    hp = lg.hparams().to_pandas()
    assert list(hp["run"]) == ["version_0"] and list(hp["hparams_run"]) == ["version_0"]
    assert any(c.startswith("hparam:") for c in s.columns)
    assert "hp_metric:last" in s.columns


def test_rule_edge_cases():
    runs = ["a", "a/1", "b", "b/1", "b/2", "c/1", "d", "d/1", "e", "e/x/1"]
    hp = {"a/1", "b/1", "b/2", "c/1", "d", "d/1", "e/x/1"}
    contents = {r: [("hparams", 1), ("scalars", 1)] for r in hp}
    got = hparams_children(runs, hp, contents)
    # a: one child; b: two children (separate); c: no parent run; d: parent has hparams;
    # e/x/1: its parent e/x is not a run.
    assert got == {"a/1": "a"}
    contents["a/1"] = [("hparams", 1), ("scalars", 20)]  # a child with a curve is a run of its own
    assert hparams_children(runs, hp, contents) == {}
    contents["a/1"] = [("hparams", 1), ("images", 1)]
    assert hparams_children(runs, hp, contents) == {}
