"""Shapes and tables (issue 14): text tensors keep their shape, legacy histograms never run
backwards, meshes decoded, and TF1's session logs and log messages as a `logs` table.

Fixtures come from TensorBoard's own proto classes and pure-Python writer and from
tensorboardX; expected values from TensorBoard's EventAccumulator or its event file loader.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.main import main

pytest.importorskip("tensorboard")
pytest.importorskip("tensorboardX")


def _accumulator(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"tensors": 0, "histograms": 0})
    acc.Reload()
    return acc


def _tb_writer(run_dir):
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    return EventFileWriter(str(run_dir))


def _text_md():
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))


def test_text_tensors_keep_their_shape(tmp_path):
    """2x2, 1x4 and 4x1 text tensors come back with their shapes, as TensorBoard sees them."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.util import tensor_util

    run = tmp_path / "run"
    w = _tb_writer(run)
    cells = np.array([b"a", b"b", b"c", b"d"], dtype=object)
    shapes = {"t2x2": (2, 2), "t1x4": (1, 4), "t4x1": (4, 1), "t4": (4,)}
    for tag, shape in shapes.items():
        value = summary_pb2.Summary.Value(
            tag=tag, metadata=_text_md(), tensor=tensor_util.make_tensor_proto(cells.reshape(shape))
        )
        w.add_event(event_pb2.Event(step=1, wall_time=10.0, summary=summary_pb2.Summary(value=[value])))
    value = summary_pb2.Summary.Value(
        tag="scalar_text", metadata=_text_md(), tensor=tensor_util.make_tensor_proto(b"only")
    )
    w.add_event(event_pb2.Event(step=2, wall_time=11.0, summary=summary_pb2.Summary(value=[value])))
    w.close()

    acc = _accumulator(run)
    text = tbscope.read_text(tmp_path)
    for tag in [*shapes, "scalar_text"]:
        expected = tensor_util.make_ndarray(acc.Tensors(tag)[0].tensor_proto)
        rows = text[text["tag"] == tag].sort_values("index")
        assert [tuple(s) for s in rows["shape"]] == [expected.shape] * expected.size, tag
        assert rows["text"].tolist() == [x.decode() for x in expected.reshape(-1)]
    # The server's text endpoint gives each record's shape.
    from urllib.parse import quote

    from server_util import get_json

    server = tbscope.serve(tmp_path, port=0, cache=False, reload_interval=0)
    try:
        assert server.wait_loaded(60)
        for tag, shape in shapes.items():
            cols = get_json(server.url, f"api/v1/text?run=run&tag={quote(tag)}")["columns"]
            assert (cols["shape"], cols["text"]) == ([list(shape)], [["a", "b", "c", "d"]]), tag
        cols = get_json(server.url, "api/v1/text?run=run&tag=scalar_text")["columns"]
        assert (cols["shape"], cols["text"]) == ([[]], ["only"])
    finally:
        server.stop()
    # The shape is a column of the SQL table too.
    got = tbscope.sql(tmp_path, "SELECT DISTINCT tag, shape FROM text ORDER BY tag").to_pandas()
    assert {t: list(s) for t, s in zip(got["tag"], got["shape"])} == {
        "scalar_text": [],
        "t1x4": [1, 4],
        "t2x2": [2, 2],
        "t4": [4],
        "t4x1": [4, 1],
    }


def _legacy_histogram(step, limits, counts, lo, hi):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    values = np.repeat(np.linspace(lo, hi, 4), 1)
    histo = summary_pb2.HistogramProto(
        min=lo,
        max=hi,
        num=float(sum(counts)),
        sum=float(values.sum()),
        sum_squares=float((values**2).sum()),
        bucket_limit=limits,
        bucket=counts,
    )
    return event_pb2.Event(
        step=step,
        wall_time=100.0 + step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="h", histo=histo)]),
    )


def test_legacy_histograms_never_run_backwards(tmp_path):
    """An empty first bucket whose limit lies below min, or an empty last bucket starting above
    max: TensorBoard's edges (min, max) would make them run backwards. Every bucket is kept,
    the inner edges are TensorBoard's, and no bucket has left > right."""
    run = tmp_path / "run"
    w = _tb_writer(run)
    w.add_event(_legacy_histogram(0, [0.5, 1.0, 2.0], [0.0, 3.0, 1.0], 0.6, 1.8))  # empty first
    w.add_event(_legacy_histogram(1, [0.6, 1.0, 1.5], [1.0, 3.0, 0.0], 0.5, 0.9))  # empty last
    w.add_event(_legacy_histogram(2, [0.5, 1.0, 2.0], [1.0, 3.0, 1.0], 0.2, 1.8))  # ordinary
    w.close()
    # tensorboardX keeps an empty bucket in front of the data when the data starts past the
    # first bin edge it was given.
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path / "tbx")) as tw:
        tw.add_histogram("h", np.array([0.55, 0.7, 1.2, 1.4]), 0, bins=np.array([0.0, 0.5, 1.0, 1.5, 2.0]))

    hist = tbscope.read_histograms(tmp_path).sort_values(["run", "step"])
    for left, right in zip(hist["left"], hist["right"]):
        assert (np.asarray(left) <= np.asarray(right)).all(), (left, right)
    for run_name in ("run", "tbx"):
        acc = _accumulator(tmp_path / run_name)
        for ev in acc.Histograms("h"):
            h = ev.histogram_value
            row = hist[(hist["run"] == run_name) & (hist["step"] == ev.step)].iloc[0]
            k = len(h.bucket)
            assert list(row["count"]) == list(h.bucket)
            # Inner edges are the writer's limits, as in TensorBoard.
            assert list(row["right"][: k - 1]) == list(h.bucket_limit[: k - 1])
            assert list(row["left"][1:]) == list(h.bucket_limit[: k - 1])
            # Outer edges: min and max where they do not run backwards.
            assert row["left"][0] == min(h.min, h.bucket_limit[0])
            assert row["right"][-1] == max(h.max, h.bucket_limit[k - 2])
            assert (row["min"], row["max"]) == (h.min, h.max)
    # The case of the issue is in the fixture: TensorBoard's own edges run backwards there.
    first = hist[(hist["run"] == "run") & (hist["step"] == 0)].iloc[0]
    assert first["min"] > first["right"][0] and first["left"][0] == first["right"][0] == 0.5


def test_meshes_decoded(tmp_path):
    """tensorboardX's add_mesh: vertices, faces and colours as (n, 3) arrays, per step and
    sample, equal to the tensors TensorBoard's accumulator holds for the three series."""
    from tensorboard.util import tensor_util
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(0)
    vertices = rng.standard_normal((2, 5, 3)).astype(np.float32)
    faces = np.array([[[0, 1, 2], [2, 3, 4]]] * 2, dtype=np.int32)
    colors = rng.integers(0, 256, (2, 5, 3), dtype=np.uint8)
    config = {"camera": {"cls": "PerspectiveCamera", "fov": 75}}
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.add_mesh("cube", vertices, colors=colors, faces=faces, config_dict=config, global_step=3)
        w.add_mesh("cloud", vertices[:1] * 2, global_step=4)
        w.add_scalar("loss", 1.0, 0)

    lg = tbscope.scan(tmp_path)
    frame = lg.meshes()
    df = frame.to_pandas()
    assert sorted(zip(df["tag"], df["step"], df["index"])) == [("cloud", 4, 0), ("cube", 3, 0), ("cube", 3, 1)]
    from tensorboard.plugins.mesh import plugin_data_pb2

    # Which series holds which part, as TensorBoard's mesh plugin reads it from the metadata.
    acc = _accumulator(tmp_path / "run")
    parts = {1: "vertices", 2: "faces", 3: "colors"}
    want = {}
    for tag in acc.Tags()["tensors"]:
        meta = plugin_data_pb2.MeshPluginData.FromString(acc.SummaryMetadata(tag).plugin_data.content)
        if meta.name == "cube":
            want[parts[meta.content_type]] = tensor_util.make_ndarray(acc.Tensors(tag)[0].tensor_proto)
    assert set(want) == set(parts.values())
    for _, row in df[df["tag"] == "cube"].iterrows():
        for part, arr in want.items():
            # The mesh plugin's dtypes (tensorboardX writes faces as float32; they are indices).
            assert row[part].dtype == {"vertices": np.float32, "faces": np.int32, "colors": np.uint8}[part]
            np.testing.assert_array_equal(row[part], arr[row["index"]])
        assert json.loads(row["config"]) == config
    cloud = df[df["tag"] == "cloud"].iloc[0]
    np.testing.assert_array_equal(cloud["vertices"], vertices[0] * 2)
    assert cloud["faces"] is None and cloud["colors"] is None
    # The same table in SQL.
    got = tbscope.sql(tmp_path, "SELECT tag, step, len(vertices) AS n FROM meshes ORDER BY tag, index").fetchall()
    assert got == [("cloud", 4, 15), ("cube", 3, 15), ("cube", 3, 15)]


def _tf1_logdir(root):
    """Session logs and log messages as TF1's supervisor and logging wrote them."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    w = _tb_writer(root / "train")
    SL = event_pb2.SessionLog
    LM = event_pb2.LogMessage
    w.add_event(event_pb2.Event(step=0, wall_time=5.0, session_log=SL(status=SL.START, msg="starting")))
    w.add_event(
        event_pb2.Event(
            step=1,
            wall_time=6.0,
            summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=0.5)]),
        )
    )
    w.add_event(
        event_pb2.Event(
            step=10, wall_time=7.0, session_log=SL(status=SL.CHECKPOINT, checkpoint_path="/ckpt/model.ckpt-10")
        )
    )
    w.add_event(event_pb2.Event(step=11, wall_time=8.0, log_message=LM(level=LM.WARN, message="loss is <b>NaN</b>")))
    w.add_event(event_pb2.Event(step=12, wall_time=9.0, log_message=LM(level=LM.ERROR, message="stopping")))
    w.add_event(event_pb2.Event(step=12, wall_time=9.5, session_log=SL(status=SL.STOP)))
    w.close()
    w = _tb_writer(root / "eval")
    w.add_event(event_pb2.Event(step=3, wall_time=20.0, session_log=SL(status=SL.START)))
    w.close()


def _loader_events(run_dir):
    """Every session log and log message, as TensorBoard's own event file loader reads them."""
    import glob

    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(glob.glob(str(run_dir / "events.out.tfevents.*"))):
        for ev in EventFileLoader(path).Load():
            if ev.HasField("session_log") or ev.HasField("log_message"):
                out.append(ev)
    return out


def test_logs_table_matches_tensorboards_loader(tmp_path):
    from tensorboard.compat.proto import event_pb2

    _tf1_logdir(tmp_path)
    logs = tbscope.scan(tmp_path).logs().to_pandas()
    assert list(logs.columns) == [
        "run",
        "step",
        "wall_time",
        "timestamp",
        "source",
        "status",
        "level",
        "message",
        "checkpoint_path",
    ]
    for run in ("train", "eval"):
        rows = logs[logs["run"] == run]
        events = _loader_events(tmp_path / run)
        assert len(rows) == len(events)
        for (_, row), ev in zip(rows.iterrows(), events):
            assert (row["step"], row["wall_time"]) == (ev.step, ev.wall_time)
            assert row["timestamp"].timestamp() == ev.wall_time
            if ev.HasField("session_log"):
                s = ev.session_log
                assert row["source"] == "session_log" and pd.isna(row["level"])
                assert row["status"] == event_pb2.SessionLog.SessionStatus.Name(s.status)
                assert (row["message"], row["checkpoint_path"]) == (s.msg, s.checkpoint_path)
            else:
                m = ev.log_message
                assert row["source"] == "log_message" and pd.isna(row["status"]) and pd.isna(row["checkpoint_path"])
                assert row["level"] == event_pb2.LogMessage.Level.Name(m.level)
                assert row["message"] == m.message
    # The runs table still counts restarts from session logs only.
    assert tbscope.scan(tmp_path).run_info().to_pandas().set_index("run")["restarts"].to_dict() == {
        "eval": 0,
        "train": 0,
    }


def test_logs_filters_cache_sql_and_cli(tmp_path):
    _tf1_logdir(tmp_path)
    eager = tbscope.read_logs(tmp_path, runs="train", steps=(10, 12))
    assert eager["step"].tolist() == [10, 11] and set(eager["run"]) == {"train"}
    # A cached scan (cold, then warm) answers the same.
    cache_dir = tmp_path.parent / (tmp_path.name + "-cache")
    for _ in range(2):
        cached = tbscope.scan(tmp_path, cache=str(cache_dir)).logs().to_pandas()
        assert cached.equals(tbscope.scan(tmp_path).logs().to_pandas())
    assert tbscope.scan(tmp_path, cache=str(cache_dir), runs="eval").logs().to_pandas()["run"].tolist() == ["eval"]
    got = tbscope.sql(tmp_path, "SELECT checkpoint_path FROM logs WHERE status = 'CHECKPOINT'").fetchall()
    assert got == [("/ckpt/model.ckpt-10",)]
    result = CliRunner().invoke(
        main,
        [
            "sql",
            str(tmp_path),
            "SELECT level, message FROM logs WHERE source = 'log_message' ORDER BY step",
            "--format",
            "csv",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["level,message", "WARN,loss is <b>NaN</b>", "ERROR,stopping"]


def test_sql_names_every_table(tbx_logdir):
    """`tbscope sql`'s help lists every table it serves, images, audio and blobs included,
    and each of them answers a query."""
    from tbscope._query import TABLES

    help_text = " ".join(CliRunner().invoke(main, ["sql", "--help"]).output.split())
    for name in TABLES:
        assert name in help_text, name
    for name in ("images", "audio", "blobs", "meshes", "logs"):
        assert name in TABLES
        n = tbscope.sql(tbx_logdir, f"SELECT count(*) FROM {name}").fetchall()[0][0]
        assert n == len(getattr(tbscope.scan(tbx_logdir), name)()), name

    bad = CliRunner().invoke(main, ["sql", str(tbx_logdir), "SELECT * FROM nonsense"])
    assert bad.exit_code == 2 and "blobs" in bad.output and "logs" in bad.output


def test_sql_blobs_table(tmp_path):
    """A graph, as PyTorch's and TensorFlow's graph writers store it, is a row of `blobs`."""
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.graph_pb2 import GraphDef
    from tensorboardX.proto.node_def_pb2 import NodeDef

    graph = GraphDef(
        node=[NodeDef(name="x", op="Placeholder"), NodeDef(name="y", op="Relu", input=["x"])]
    ).SerializeToString()
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.file_writer.add_event(Event(graph_def=graph, step=0))
    got = tbscope.sql(tmp_path, "SELECT tag, plugin, blob_length FROM blobs").fetchall()
    assert got == [("__run_graph__", "graphs", len(graph))]
    acc = _accumulator(tmp_path / "run")
    assert acc.Graph().SerializeToString() == graph
    assert tbscope.scan(tmp_path).blobs().blob(0) == graph
