"""tbscope.SummaryWriter: what it writes, read back by TensorBoard's own readers and by tbscope.

Truth comes from outside: TensorBoard's EventAccumulators and raw event loader, its protos and
``tensor_util.make_ndarray``, tensorboardX's writer for the same input, numpy, and torch's
histogram algorithm re-implemented here from its documented behaviour.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import socket
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tbscope
from fixtures import tf_default_edges
from tbscope import _core

if not hasattr(_core, "EventWriter"):
    pytest.skip("the native EventWriter is not built yet (make build)", allow_module_level=True)

from tbscope import SummaryWriter

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:tensorboard.*")


# --------------------------------------------------------------------------------------------
# Reading back with TensorBoard


def event_files(d) -> list[Path]:
    return sorted(p for p in Path(d).rglob("*") if "tfevents" in p.name and p.is_file())


def raw_events(path) -> list:
    """Every Event of one file (or of every file of a directory), unmigrated."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    files = [Path(path)] if Path(path).is_file() else event_files(path)
    return [ev for f in files for ev in LegacyEventFileLoader(str(f)).Load()]


def accumulator(run_dir):
    """TensorBoard's plugin EventAccumulator over a run directory, keeping everything."""
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    guidance = {k: 0 for k in ("tensors", "scalars", "histograms", "images", "audio", "compressedHistograms")}
    acc = pea.EventAccumulator(str(run_dir), size_guidance=guidance, purge_orphaned_data=False)
    acc.Reload()
    return acc


def legacy_accumulator(run_dir, purge: bool = False):
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(run_dir), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE, purge_orphaned_data=purge)
    acc.Reload()
    return acc


def tb_scalars(run_dir) -> dict[str, list[tuple[int, float, float]]]:
    """tag -> [(step, wall_time, value)] as TensorBoard's Python data provider sees them."""
    from tensorboard.util import tensor_util

    acc = accumulator(run_dir)
    out = {}
    for tag in acc.Tags()["tensors"]:
        md = acc.SummaryMetadata(tag)
        if md.plugin_data.plugin_name != "scalars":
            continue
        out[tag] = [
            (e.step, e.wall_time, float(tensor_util.make_ndarray(e.tensor_proto).item())) for e in acc.Tensors(tag)
        ]
    return out


def f32(x: float) -> float:
    return float(np.float32(x))


# --------------------------------------------------------------------------------------------
# Scalars


def test_add_scalar_round_trip(tmp_path):
    values = [0.5, 3, np.float32(1.25), np.float64(-2.5), np.int64(7), np.array(4.5), np.array([5.5]), True, 1e30, -0.0]
    with SummaryWriter(tmp_path) as w:
        for i, v in enumerate(values):
            w.add_scalar("loss", v, i, 1000.0 + i)
        w.add_scalar("step_types", 1.0, np.int64(10), 2000.25)
        w.add_scalar("step_types", 2.0, 11.0, np.float64(2001.5))  # torch does int(step)
        w.add_scalar("no_step", 9.0)
    want = [(i, 1000.0 + i, f32(float(np.asarray(v).reshape(-1)[0]))) for i, v in enumerate(values)]
    got = tb_scalars(tmp_path)
    assert got["loss"] == want
    assert got["step_types"] == [(10, 2000.25, 1.0), (11, 2001.5, 2.0)]
    ((step, wall, value),) = got["no_step"]
    assert (step, value) == (0, 9.0) and abs(wall - time.time()) < 60
    df = tbscope.read_scalars(tmp_path, tags="loss")
    assert df["step"].tolist() == [s for s, _, _ in want]
    assert df["value"].tolist() == [v for _, _, v in want]
    assert df["wall_time"].tolist() == [t for _, t, _ in want]


def test_add_scalar_legacy_field_and_file_version(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("a", 1.5, 3)
    evs = raw_events(tmp_path)
    assert evs[0].file_version == "brain.Event:2"
    (v,) = evs[1].summary.value
    assert v.WhichOneof("value") == "simple_value" and v.simple_value == 1.5 and evs[1].step == 3
    assert not v.HasField("metadata")  # as torch/tensorboardX legacy scalars


def test_new_style_and_double_precision(tmp_path):
    x = 0.1  # not representable in float32: tells float from double
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("f", x, 1, new_style=True)
        w.add_scalar("d", x, 1, None, True, True)
    by_tag = {ev.summary.value[0].tag: ev.summary.value[0] for ev in raw_events(tmp_path) if ev.HasField("summary")}
    from tensorboard.compat.proto import types_pb2

    f, d = by_tag["f"], by_tag["d"]
    assert f.metadata.plugin_data.plugin_name == d.metadata.plugin_data.plugin_name == "scalars"
    assert f.tensor.dtype == types_pb2.DT_FLOAT and d.tensor.dtype == types_pb2.DT_DOUBLE
    assert list(f.tensor.tensor_shape.dim) == [] and list(d.tensor.tensor_shape.dim) == []
    got = tb_scalars(tmp_path)
    assert got["f"][0][2] == f32(x) and got["d"][0][2] == x
    df = tbscope.read_scalars(tmp_path).set_index("tag")
    assert df.loc["f", "value"] == f32(x) and df.loc["d", "value"] == x


def test_display_name_and_description(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("kw", 1.0, 0, display_name="Loss", summary_description="the loss")
        w.add_scalar("pos", 2.0, 0, None, "Title", "words")  # tensorboardX's positional order
    vals = {ev.summary.value[0].tag: ev.summary.value[0] for ev in raw_events(tmp_path) if ev.HasField("summary")}
    assert vals["kw"].simple_value == 1.0 and vals["kw"].metadata.display_name == "Loss"
    assert vals["kw"].metadata.summary_description == "the loss"
    assert vals["pos"].metadata.display_name == "Title" and vals["pos"].metadata.summary_description == "words"
    assert tb_scalars(tmp_path)["pos"][0][2] == 2.0


def test_add_scalar_rejects_arrays_and_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError, match=r"'t'.*shape \(3,\).*add_histogram"):
            w.add_scalar("t", np.arange(3.0))
        with pytest.raises(TypeError, match="add_text"):
            w.add_scalar("t", "high")
        with pytest.raises(TypeError, match="tag must be a str"):
            w.add_scalar(3, 1.0)


def test_log_one_event_many_tags(tmp_path):
    metrics = {f"m/{i}": i * 0.25 for i in range(100)}
    metrics["one_element"] = np.array([[7.0]])
    metrics["np"] = np.float32(2.5)
    with SummaryWriter(tmp_path) as w:
        w.log(5, metrics, walltime=123.0)
        w.log(6, {"m/0": 1.0})
    evs = [e for e in raw_events(tmp_path) if e.HasField("summary")]
    assert len(evs) == 2 and len(evs[0].summary.value) == len(metrics)
    got = tb_scalars(tmp_path)
    assert got["m/0"] == [(5, 123.0, 0.0), (6, evs[1].wall_time, 1.0)]
    assert got["m/99"] == [(5, 123.0, 24.75)]
    assert got["one_element"] == [(5, 123.0, 7.0)] and got["np"] == [(5, 123.0, 2.5)]


def test_log_names_the_bad_tag(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError, match=r"log.*'weights'.*add_histogram\(\) or add_tensor\(\)"):
            w.log(1, {"loss": 1.0, "weights": np.ones(4)})
        with pytest.raises(TypeError, match=r"'name'.*add_text"):
            w.log(1, {"name": "resnet"})
    assert tb_scalars(tmp_path) == {}  # nothing half-written


def test_add_scalars_default_layout_is_one_run(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for i in range(3):
            w.add_scalars("run_14h", {"xsinx": i * 1.0, "xcosx": -i * 1.0}, i)
    assert [p.parent for p in event_files(tmp_path)] == [tmp_path]  # no extra run folders
    got = tb_scalars(tmp_path)
    assert got["run_14h/xsinx"] == [(i, got["run_14h/xsinx"][i][1], float(i)) for i in range(3)]
    assert [v for _, _, v in got["run_14h/xcosx"]] == [0.0, -1.0, -2.0]
    # one event per call, one wall time for all its values
    evs = [e for e in raw_events(tmp_path) if e.HasField("summary")]
    assert len(evs) == 3 and all(len(e.summary.value) == 2 for e in evs)


def test_add_scalars_torch_layout(tmp_path):
    with SummaryWriter(tmp_path, layout="torch") as w:
        for i in range(3):
            w.add_scalars("a/b", {"x": i * 1.0, "y": i * 2.0}, i)
        assert set(w.all_writers) == {str(tmp_path), str(tmp_path / "a_b_x"), str(tmp_path / "a_b_y")}
    # torch: <log_dir>/<main_tag with / -> _>_<tag>, each holding the tag main_tag
    runs = sorted({p.parent.name for p in event_files(tmp_path)})
    assert runs == ["a_b_x", "a_b_y", tmp_path.name]
    x, y = tb_scalars(tmp_path / "a_b_x")["a/b"], tb_scalars(tmp_path / "a_b_y")["a/b"]
    assert [v for _, _, v in x] == [0.0, 1.0, 2.0] and [v for _, _, v in y] == [0.0, 2.0, 4.0]
    assert [t for _, t, _ in x] == [t for _, t, _ in y]  # one instant per call, as torch


# --------------------------------------------------------------------------------------------
# Histograms: torch's algorithm, re-implemented from its documented behaviour, is the oracle.


def torch_histogram(values, edges, max_bins=None) -> dict:
    """torch.utils.tensorboard.summary.make_histogram, from its description: numpy.histogram
    counts (float64 values); optionally max_bins merging (groups of n // max_bins bins after
    zero-padding on the right, every group-th limit kept, plus the last); then the buckets
    between the first and last non-empty one, plus one empty bucket on the left; bucket_limit
    holds right edges."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    counts, limits = np.histogram(v, bins=edges)
    if max_bins is not None and len(counts) > max_bins:
        g = len(counts) // max_bins
        counts = np.concatenate([counts, np.zeros(-len(counts) % g, counts.dtype)]).reshape(-1, g).sum(axis=1)
        limits = np.concatenate([limits[:-1:g], limits[-1:]])
    nonzero = np.flatnonzero(counts)
    first, last = int(nonzero[0]), int(nonzero[-1])
    if first > 0:
        bucket = counts[first - 1 : last + 1]
    else:
        bucket = np.concatenate([[0], counts[: last + 1]])
    return dict(
        min=v.min(),
        max=v.max(),
        num=float(v.size),
        sum=v.sum(),
        sum_squares=v.dot(v),
        bucket_limit=limits[first : last + 2].tolist(),
        bucket=[float(c) for c in bucket],
    )


def read_histos(run_dir, tag) -> list:
    return [h.histogram_value for h in legacy_accumulator(run_dir).Histograms(tag)]


def assert_histo_equal(h, want: dict) -> None:
    assert list(h.bucket_limit) == want["bucket_limit"]
    assert list(h.bucket) == want["bucket"]
    assert h.num == want["num"]
    for k in ("min", "max"):
        assert getattr(h, k) == want[k] or (math.isnan(getattr(h, k)) and math.isnan(want[k])), k
    for k in ("sum", "sum_squares"):
        got, exp = getattr(h, k), want[k]
        assert (math.isnan(got) and math.isnan(exp)) or got == pytest.approx(exp, rel=1e-12, abs=1e-300), k


RNG = np.random.default_rng(1234)
HISTOGRAM_INPUTS = {
    "normal_f32": RNG.standard_normal(5000).astype(np.float32),
    "normal_f64": RNG.standard_normal(3000) * 1e3,
    "ints": RNG.integers(-50, 50, size=(20, 30)),
    "constant": np.full(100, 3.0),
    "one_value": np.array([0.0]),
    "tiny_and_huge": np.array([1e-14, -1e-14, 1e-12, 1e19, -1e19, 5e20, -5e20]),  # some outside every edge
    "with_nan": np.array([1.0, np.nan, 2.0, 3.0]),
    "edge_values": tf_default_edges()[[10, 500, 1000, 1500]],  # exactly on limits
    "bool": RNG.random(64) > 0.5,
    "float16": RNG.standard_normal(256).astype(np.float16),
    "list": [0.5, 1.5, 2.5, 2.5],
}


@pytest.mark.parametrize("name", list(HISTOGRAM_INPUTS))
def test_histogram_tensorflow_bins_match_torch(tmp_path, name):
    values = HISTOGRAM_INPUTS[name]
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", values, 7)
    (h,) = read_histos(tmp_path, "h")
    assert_histo_equal(h, torch_histogram(np.asarray(values, dtype=np.float64), tf_default_edges()))
    evs = [e for e in raw_events(tmp_path) if e.HasField("summary")]
    assert evs[0].step == 7 and evs[0].summary.value[0].WhichOneof("value") == "histo"


@pytest.mark.parametrize("bins", ["auto", "fd", "sturges", 10, 1, "edges"])
def test_histogram_other_bins_match_torch(tmp_path, bins):
    values = RNG.standard_normal(2000).astype(np.float32)
    if bins == "edges":
        bins = np.linspace(-2, 2, 9)  # values outside are not counted, as numpy
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", values, 0, bins=bins)
    (h,) = read_histos(tmp_path, "h")
    edges = np.histogram_bin_edges(values.astype(np.float64), bins=bins)
    assert_histo_equal(h, torch_histogram(values, edges))


@pytest.mark.parametrize("max_bins", [1, 7, 64, 10000])
def test_histogram_max_bins_match_torch(tmp_path, max_bins):
    values = RNG.standard_normal(4000) * 10
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", values, 0, max_bins=max_bins)
        w.add_histogram("h10", values, 0, bins=100, max_bins=max_bins)
    assert_histo_equal(read_histos(tmp_path, "h")[0], torch_histogram(values, tf_default_edges(), max_bins))
    assert_histo_equal(
        read_histos(tmp_path, "h10")[0], torch_histogram(values, np.histogram_bin_edges(values, 100), max_bins)
    )


def test_histogram_same_as_tensorboardx(tmp_path):
    from tensorboardX import SummaryWriter as TbxWriter

    inputs = {k: HISTOGRAM_INPUTS[k] for k in ("normal_f32", "normal_f64", "ints", "tiny_and_huge")}
    with SummaryWriter(tmp_path / "ours") as w, TbxWriter(str(tmp_path / "tbx")) as x:
        for i, (tag, values) in enumerate(inputs.items()):
            w.add_histogram(tag, values, i)
            x.add_histogram(tag, values, i)
            w.add_histogram(tag + "_auto", values, i, bins="auto", max_bins=20)
            x.add_histogram(tag + "_auto", values, i, bins="auto", max_bins=20)
    for tag in [t + s for t in inputs for s in ("", "_auto")]:
        (ours,), (theirs,) = read_histos(tmp_path / "ours", tag), read_histos(tmp_path / "tbx", tag)
        assert list(ours.bucket_limit) == list(theirs.bucket_limit), tag
        assert list(ours.bucket) == list(theirs.bucket), tag
        assert (ours.min, ours.max, ours.num) == (theirs.min, theirs.max, theirs.num), tag
        assert ours.sum == pytest.approx(theirs.sum, rel=1e-12) and ours.sum_squares == pytest.approx(
            theirs.sum_squares, rel=1e-12
        )


def test_histogram_read_by_tbscope(tmp_path):
    values = HISTOGRAM_INPUTS["normal_f32"]
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", values, 3)
    want = torch_histogram(values, tf_default_edges())
    (row,) = tbscope.read_histograms(tmp_path).to_dict("records")
    assert row["step"] == 3 and list(row["count"]) == want["bucket"]
    assert row["num"] == want["num"] and row["min"] == want["min"] and row["max"] == want["max"]


def test_histogram_empty_and_raw(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="The input has no element"):
            w.add_histogram("h", np.zeros(0))
        w.add_histogram_raw(
            "raw",
            min=0.0,
            max=4.0,
            num=6,
            sum=10.0,
            sum_squares=22.0,
            bucket_limits=np.array([1.0, 2.0, 4.0]),
            bucket_counts=[1, 2, 3],
            global_step=2,
        )
        with pytest.raises(ValueError, match=re.escape("len(bucket_limits) != len(bucket_counts)")):
            w.add_histogram_raw("raw", 0, 1, 1, 1, 1, [1.0, 2.0], [1.0])
    (h,) = read_histos(tmp_path, "raw")
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (0.0, 4.0, 6.0, 10.0, 22.0)
    assert list(h.bucket_limit) == [1.0, 2.0, 4.0] and list(h.bucket) == [1.0, 2.0, 3.0]


def test_default_bins_attribute():
    # torch and tensorboardX users read writer.default_bins
    assert SummaryWriter(write_to_disk=False).default_bins == tf_default_edges().tolist()


# --------------------------------------------------------------------------------------------
# Tensors

TENSOR_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def sample(dtype: str) -> np.ndarray:
    a = (np.arange(24).reshape(2, 3, 4) - 5) * 1.5
    if dtype == "bool":
        return a > 0
    if dtype.startswith("complex"):
        return (a + 1j * a[::-1]).astype(dtype)
    return (
        a.astype(dtype)
        if dtype.startswith("float")
        else np.abs(a).astype(dtype)
        if dtype.startswith("u")
        else a.astype(dtype)
    )


@pytest.mark.parametrize("dtype", TENSOR_DTYPES)
def test_add_tensor_round_trip(tmp_path, dtype):
    pytest.importorskip("tbscope._summary", reason="tbscope._summary (the encoders) has not landed")
    from tensorboard.util import tensor_util

    arr = sample(dtype)
    with SummaryWriter(tmp_path) as w:
        w.add_tensor("t", arr, 4)
        w.add_tensor("scalar", np.array(3, dtype=dtype), 5)
        w.add_tensor("non_contiguous", arr[:, ::2].T, 6)
    acc = accumulator(tmp_path)
    for tag, want in (("t", arr), ("scalar", np.array(3, dtype=dtype)), ("non_contiguous", arr[:, ::2].T)):
        (e,) = acc.Tensors(tag)
        got = tensor_util.make_ndarray(e.tensor_proto)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), tag
        assert acc.SummaryMetadata(tag).plugin_data.plugin_name == "tensor"  # as torch
    frame = tbscope.scan(tmp_path).tensors()
    df = frame.to_pandas()
    (row,) = df[df["tag"] == "t"].to_dict("records")
    assert row["step"] == 4
    assert np.array_equal(np.asarray(row["value"]).reshape(arr.shape), arr)


def test_add_tensor_strings(tmp_path):
    from tensorboard.util import tensor_util

    arr = np.array([["a", "bé"], ["", "long text"]])
    with SummaryWriter(tmp_path) as w:
        w.add_tensor("s", arr, 1)
        w.add_tensor("b", np.array([b"\x00\xff", b"x"], dtype=object), 1)
    acc = accumulator(tmp_path)
    got = tensor_util.make_ndarray(acc.Tensors("s")[0].tensor_proto)
    assert got.shape == (2, 2) and [x.decode() for x in got.reshape(-1)] == arr.reshape(-1).tolist()
    got = tensor_util.make_ndarray(acc.Tensors("b")[0].tensor_proto)
    assert got.tolist() == [b"\x00\xff", b"x"]


def test_add_tensor_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    pytest.importorskip("tbscope._summary", reason="tbscope._summary (the encoders) has not landed")
    arr = np.array([[1.0, -2.5], [0.0078125, 3e38]], dtype=ml_dtypes.bfloat16)
    with SummaryWriter(tmp_path) as w:
        w.add_tensor("bf", arr, 0)
    (e,) = accumulator(tmp_path).Tensors("bf")
    assert e.tensor_proto.dtype == 14  # DT_BFLOAT16
    assert e.tensor_proto.tensor_content == arr.tobytes()
    (row,) = tbscope.scan(tmp_path).tensors().to_pandas().to_dict("records")
    assert np.array_equal(np.asarray(row["value"]).astype(np.float32).reshape(2, 2), arr.astype(np.float32))


# --------------------------------------------------------------------------------------------
# Files, names, lifecycle

NAME = re.compile(r"^events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)(.*)$")


def test_file_name_like_tensorboard(tmp_path):
    with SummaryWriter(tmp_path, filename_suffix=".v2") as a, SummaryWriter(tmp_path) as b:
        pass
    names = sorted(p.name for p in event_files(tmp_path))
    assert len(names) == 2
    parsed = [NAME.match(n).groups() for n in names]
    for stamp, host, pid, _, _ in parsed:
        assert abs(int(stamp) - time.time()) < 60
        assert host == socket.gethostname() and int(pid) == os.getpid()
    assert sorted(p[4] for p in parsed) == ["", ".v2"]
    assert len({p[3] for p in parsed}) == 2  # per-process counter: two writers, two files
    assert a.files[0].endswith(".v2") and Path(b.files[0]).parent == tmp_path


def test_default_log_dir_like_torch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1") as w:
        w.add_scalar("x", 1.0)
    (d,) = (tmp_path / "runs").iterdir()
    assert re.fullmatch(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname()) + "_lr0.1", d.name)
    assert w.get_logdir() == os.path.join("runs", d.name) == w.log_dir == w.logdir


def test_pathlike_and_tbx_logdir_keyword(tmp_path):
    with SummaryWriter(logdir=str(tmp_path / "a")) as a, SummaryWriter(tmp_path / "b") as b:
        a.add_scalar("x", 1.0)
        b.add_scalar("x", 1.0)
    assert tb_scalars(tmp_path / "a")["x"][0][2] == 1.0 and tb_scalars(tmp_path / "b")["x"][0][2] == 1.0


def test_purge_step_as_tensorboardx(tmp_path):
    """A resumed run with purge_step hides the crashed run's later points in TensorBoard, the
    same as with tensorboardX's writer (torch writes the same two events)."""
    from tensorboardX import SummaryWriter as TbxWriter

    for name, cls in (("ours", SummaryWriter), ("tbx", TbxWriter)):
        d = str(tmp_path / name)
        w = cls(d)
        for i in range(10):
            w.add_scalar("x", float(i), i)
        w.close()
        # A resumed run starts later: in the next second, so its file name sorts after the
        # first one's whatever the per-process file counter (9 -> 10 would sort first).
        time.sleep(1.001 - time.time() % 1)
        w = cls(d, purge_step=5, filename_suffix=".resumed")  # a later file name
        for i in range(5, 8):
            w.add_scalar("x", 100.0 + i, i)
        w.close()
    ours = [(e.step, e.value) for e in legacy_accumulator(tmp_path / "ours", purge=True).Scalars("x")]
    theirs = [(e.step, e.value) for e in legacy_accumulator(tmp_path / "tbx", purge=True).Scalars("x")]
    assert ours == theirs
    starts = [e for e in raw_events(tmp_path / "ours") if e.HasField("session_log")]
    assert [(e.step, e.session_log.status) for e in starts] == [(5, 1)]


def test_purge_step_only_in_the_first_file(tmp_path):
    w = SummaryWriter(tmp_path, purge_step=3)
    w.close()
    w.add_scalar("x", 1.0, 4)  # reopens a new file: torch writes the marker once
    w.close()
    assert len(event_files(tmp_path)) == 2
    assert [e.step for e in raw_events(tmp_path) if e.HasField("session_log")] == [3]


def test_close_is_idempotent_and_reopens_like_torch(tmp_path):
    w = SummaryWriter(tmp_path)
    w.add_scalar("x", 1.0, 0)
    w.close()
    w.close()
    assert len(event_files(tmp_path)) == 1
    w.add_scalar("x", 2.0, 1)  # torch's writer opens a new file after close()
    w.close()
    assert len(event_files(tmp_path)) == 2 and len(w.files) == 2
    assert [v for _, _, v in tb_scalars(tmp_path)["x"]] == [1.0, 2.0]


def test_file_writer_close_then_write(tmp_path):
    w = SummaryWriter(tmp_path)
    w.file_writer.close()
    w.add_scalar("x", 1.0, 0)  # a new file, as after SummaryWriter.close()
    w.close()
    assert len(event_files(tmp_path)) == 2 and tb_scalars(tmp_path)["x"][0][2] == 1.0


def test_write_to_disk_false(tmp_path):
    w = SummaryWriter(tmp_path / "nothing", write_to_disk=False)
    w.add_scalar("x", 1.0)
    w.log(1, {"a": 1.0})
    w.add_histogram("h", np.ones(3))
    w.flush()
    w.close()
    assert not (tmp_path / "nothing").exists()


def test_flush_hands_data_to_the_os(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    for i in range(100):
        w.add_scalar("x", float(i), i)
    w.flush()
    assert len(tb_scalars(tmp_path)["x"]) == 100  # readable by another reader before close()
    w.add_scalar("x", 100.0, 100)
    w.flush(fsync=True)
    assert len(tb_scalars(tmp_path)["x"]) == 101
    w.close()


def test_file_writer_protobufs(tmp_path):
    """Code that builds protos itself uses writer.file_writer (Lightning's hparams, ...)."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.summary_pb2 import Summary

    with SummaryWriter(tmp_path) as w:
        assert w.file_writer.get_logdir() == str(tmp_path) == w._get_file_writer().get_logdir()
        w.file_writer.add_summary(Summary(value=[Summary.Value(tag="p", simple_value=2.5)]), 4, 10.0)
        w.file_writer.add_event(
            Event(session_log=SessionLog(status=SessionLog.CHECKPOINT, msg="hi")), step=5, walltime=11.0
        )
        w.file_writer.add_summary(Summary(value=[Summary.Value(tag="p", simple_value=3.5)]).SerializeToString(), 6)
    assert [(s, v) for s, _, v in tb_scalars(tmp_path)["p"]] == [(4, 2.5), (6, 3.5)]
    (ev,) = [e for e in raw_events(tmp_path) if e.HasField("session_log")]
    assert (ev.step, ev.wall_time, ev.session_log.msg) == (5, 11.0, "hi")


def test_use_metadata(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with w.use_metadata(global_step=10, walltime=5.0):
            w.add_scalar("x", 1.0)
            w.add_scalar("x", 2.0, 11)
            w.add_histogram("h", np.ones(3))
        w.add_scalar("x", 3.0, 12, 6.0)
    assert tb_scalars(tmp_path)["x"] == [(10, 5.0, 1.0), (11, 5.0, 2.0), (12, 6.0, 3.0)]
    assert legacy_accumulator(tmp_path).Histograms("h")[0].step == 10


def test_export_scalars_to_json(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalars("m", {"a": 1.0, "b": 2.0}, 0, 100.0)
        w.add_scalars("m", {"a": 3.0}, 1, 101.0)
        w.export_scalars_to_json(tmp_path / "all.json")
        w.add_scalars("m", {"a": 5.0}, 2, 102.0)
        w.export_scalars_to_json(tmp_path / "more.json")
    first = json.loads((tmp_path / "all.json").read_text())
    key_a, key_b = (os.path.join(str(tmp_path), "m/a"), os.path.join(str(tmp_path), "m/b"))
    assert first[key_a] == [[100.0, 0, 1.0], [101.0, 1, 3.0]] and first[key_b] == [[100.0, 0, 2.0]]
    assert json.loads((tmp_path / "more.json").read_text())[key_a] == [[102.0, 2, 5.0]]


# --------------------------------------------------------------------------------------------
# Same signatures as tensorboardX's writer (torch's: tests/torch/test_dropin.py, against torch itself)

# Where the two writers disagree about a positional slot, ours follows torch and recognises
# tensorboardX's value by its type (tested in the test_*_positional tests below).
TBX_POSITIONAL_EXCEPTIONS = {
    ("__init__", "log_dir"),
    ("__init__", "logdir"),
    ("add_scalar", "display_name"),
    ("add_scalar", "summary_description"),
    ("add_hparams", "name"),
    ("add_hparams", "global_step"),
    ("add_image_with_boxes", "dataformats"),
    ("add_image_with_boxes", "labels"),
}


def params(fn) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def check_compatible(ours, their_names: list[str], method: str, exceptions=frozenset()) -> None:
    mine = params(ours)
    by_name = {p.name: (i, p) for i, p in enumerate(mine)}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in mine)
    for pos, name in enumerate(their_names):
        if (method, name) in exceptions:
            continue
        if name not in by_name:
            assert var_kw, f"{method}: no parameter {name!r}"
            continue
        i, p = by_name[name]
        assert i == pos and p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY), (
            f"{method}: {name!r} is at {i} ({p.kind}), theirs at {pos}"
        )


def test_tensorboardx_signatures():
    from tensorboardX import SummaryWriter as TbxWriter

    public = [n for n in dir(TbxWriter) if not n.startswith("_") or n in ("__init__", "__enter__", "__exit__")]
    for name in public:
        theirs = getattr(TbxWriter, name)
        if not callable(theirs):
            continue
        assert hasattr(SummaryWriter, name), f"tensorboardX's SummaryWriter.{name} is missing"
        check_compatible(
            getattr(SummaryWriter, name),
            [p.name for p in params(theirs) if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL, p.KEYWORD_ONLY)],
            name,
            TBX_POSITIONAL_EXCEPTIONS,
        )
        for p in params(theirs):
            if p.kind is p.KEYWORD_ONLY:
                assert p.name in inspect.signature(getattr(SummaryWriter, name)).parameters, (name, p.name)


def test_constructor_positional_compat(tmp_path):
    # torch: (log_dir, comment, purge_step, max_queue, flush_secs, filename_suffix)
    w = SummaryWriter(str(tmp_path / "t"), "", None, 5, 30, ".sfx")
    assert (w.max_queue, w.flush_secs, w.filename_suffix) == (5, 30, ".sfx")
    w.close()
    # tensorboardX: (..., write_to_disk, log_dir, comet_config, **kwargs)
    w = SummaryWriter(None, "", None, 10, 120, "", True, str(tmp_path / "x"), {"disabled": True}, unknown=1)
    assert w.get_logdir() == str(tmp_path / "x") and w.kwargs == {"unknown": 1}
    w.close()
    with pytest.raises(ValueError, match="layout"):
        SummaryWriter(tmp_path, layout="tensorflow")


def test_public_methods_are_documented():
    for name, fn in inspect.getmembers(SummaryWriter, callable):
        if not name.startswith("_"):
            assert fn.__doc__, name


# --------------------------------------------------------------------------------------------
# Rich kinds: encoded by tbscope._summary, written here


def need_summary(name: str):
    mod = pytest.importorskip("tbscope._summary", reason="tbscope._summary (the encoders) has not landed")
    if not hasattr(mod, name):
        pytest.skip(f"tbscope._summary.{name} has not landed")
    return mod


def test_add_text_and_image_round_trip(tmp_path):
    need_summary("text")
    need_summary("image")
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    img = (np.arange(3 * 8 * 5) % 256).reshape(3, 8, 5).astype(np.uint8)
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "hello **world**", 2)
        w.add_image("img", img, 3)
        w.add_image("img_hwc", img.transpose(1, 2, 0), 3, dataformats="HWC")
    acc = legacy_accumulator(tmp_path)
    (im,) = acc.Images("img")
    assert im.step == 3 and (im.width, im.height) == (5, 8)
    decoded = np.asarray(Image.open(io.BytesIO(im.encoded_image_string)))
    assert np.array_equal(decoded, img.transpose(1, 2, 0))
    assert acc.Images("img_hwc")[0].encoded_image_string == im.encoded_image_string
    texts = tbscope.read_text(tmp_path)
    assert texts["text"].tolist() == ["hello **world**"] and texts["step"].tolist() == [2]


def test_add_hparams_default_layout_in_the_run(tmp_path):
    need_summary("hparams")
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("train/loss", 0.5, 1)
        w.add_hparams({"lr": 0.1, "opt": "adam", "wd": True}, {"hparam/acc": 0.9}, global_step=1)
    assert {p.parent for p in event_files(tmp_path)} == {tmp_path}  # no extra run folder
    hp = tbscope.scan(tmp_path).hparams().to_pandas()
    (row,) = hp.to_dict("records")
    assert row["run"] == "." and row["hparam:lr"] == 0.1 and row["hparam:opt"] == "adam" and row["hparam:wd"] is True
    assert tb_scalars(tmp_path)["hparam/acc"][0][2] == f32(0.9)
    plugins = {
        accumulator(tmp_path).SummaryMetadata(t).plugin_data.plugin_name
        for t in accumulator(tmp_path).Tags()["tensors"]
    }
    assert "hparams" in plugins


def test_add_hparams_leaves_a_logged_metric_curve_alone(tmp_path):
    """A metric the run already logs is not written again: the extra point at step 0 would
    make TensorBoard's restart rule drop the whole curve. A new metric still gets its point."""
    need_summary("hparams")
    with SummaryWriter(tmp_path) as w:
        for step in range(10, 110, 10):
            w.add_scalar("eval/acc", step / 100, step)
        w.add_hparams({"lr": 0.1}, {"eval/acc": 1.0, "hparam/final": 2.0})
    df = tbscope.read_scalars(tmp_path)
    acc = df[df["tag"] == "eval/acc"]
    assert acc["step"].tolist() == list(range(10, 110, 10))
    assert df[df["tag"] == "hparam/final"][["step", "value"]].values.tolist() == [[0, 2.0]]
    # TensorBoard, with its restart rule, still sees the whole curve.
    preempted = tbscope.read_scalars(tmp_path, restarts="preempt")
    assert (preempted["tag"] == "eval/acc").sum() == 10


def test_add_hparams_torch_layout(tmp_path):
    need_summary("hparams")
    with SummaryWriter(tmp_path, layout="torch") as w:
        w.add_hparams({"lr": 0.1}, {"hparam/acc": 0.9}, run_name="trial")
        w.add_hparams({"lr": 0.2}, {"hparam/acc": 0.8})
    runs = sorted({p.parent.relative_to(tmp_path).as_posix() for p in event_files(tmp_path)})
    assert runs[0] == "." and "trial" in runs and len(runs) == 3
    assert tb_scalars(tmp_path / "trial")["hparam/acc"][0][2] == f32(0.9)


def test_add_hparams_tensorboardx_positional_name(tmp_path):
    need_summary("hparams")
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.1}, {"hparam/acc": 0.9}, "named")  # tensorboardX: (.., name, global_step)
    assert (tmp_path / "named").is_dir()


# --------------------------------------------------------------------------------------------
# fsspec URLs: one new object per flush


def test_memory_url_rotates_objects(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = uuid.uuid4().hex  # the memory filesystem is shared by the whole process
    url = f"memory://{root}/exp/run1"
    w = SummaryWriter(url, filename_suffix=".sfx")
    for seg in range(3):
        for i in range(10):
            w.add_scalar("x", float(seg * 10 + i), seg * 10 + i)
        w.flush()
    w.flush()  # nothing new: no empty object
    w.add_histogram("h", np.arange(5.0), 30)
    w.close()
    names = sorted(fs.ls(f"/{root}/exp/run1", detail=False))
    assert len(names) == 4
    stem = w.files[0].rsplit("/", 1)[1]  # events.out.tfevents.<time>.<host>.<pid>.<n>
    assert NAME.match(stem).group(3) == str(os.getpid())
    for k, n in enumerate(names):
        assert Path(n).name == f"{stem}.{k:06d}.sfx"
    local = tmp_path / "run1"
    local.mkdir()
    for n in names:
        data = fs.cat_file(n)
        (local / Path(n).name).write_bytes(data)
        assert raw_events(local / Path(n).name)[0].file_version == "brain.Event:2"  # each complete
    got = tb_scalars(local)["x"]
    assert [(s, v) for s, _, v in got] == [(i, float(i)) for i in range(30)]
    assert len(read_histos(local, "h")) == 1
    df = tbscope.read_scalars(local)
    assert df["step"].tolist() == list(range(30))
    fs.rm(f"/{root}", recursive=True)


def test_file_url_is_a_local_path(tmp_path):
    with SummaryWriter(tmp_path.as_uri() + "/run") as w:
        w.add_scalar("x", 1.0, 1)
    (f,) = event_files(tmp_path / "run")
    assert tb_scalars(f.parent)["x"] == [(1, tb_scalars(f.parent)["x"][0][1], 1.0)]


def test_remote_torch_layout_and_hparams_subfolders(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = uuid.uuid4().hex
    with SummaryWriter(f"memory://{root}/run", layout="torch") as w:
        w.add_scalars("m", {"a": 1.0, "b": 2.0}, 0)
    dirs = sorted(p for p in fs.ls(f"/{root}/run", detail=False))
    assert [Path(d).name for d in dirs if fs.isdir(d)] == ["m_a", "m_b"]
    fs.rm(f"/{root}", recursive=True)


def test_remote_writer_dropped_without_close_uploads(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = uuid.uuid4().hex
    w = SummaryWriter(f"memory://{root}/run")
    w.add_scalar("x", 1.0, 0)
    del w
    import gc

    gc.collect()
    (name,) = fs.ls(f"/{root}/run", detail=False)
    p = tmp_path / Path(name).name
    p.write_bytes(fs.cat_file(name))
    assert [v for _, _, v in tb_scalars(tmp_path)["x"]] == [1.0]
    fs.rm(f"/{root}", recursive=True)


def write_rich(w, tmp_path, media: bool) -> None:
    """One call of every rich add_* method, with small inputs."""
    from tensorboard.compat.proto.graph_pb2 import GraphDef
    from tensorboard.compat.proto.node_def_pb2 import NodeDef

    rng = np.random.default_rng(0)
    w.add_text("notes", "some *markdown*", 1)
    w.add_image("img", rng.random((3, 6, 4)), 1)
    w.add_images("imgs", rng.random((2, 3, 6, 4)), 1)
    w.add_image_with_boxes("boxes", rng.random((3, 16, 16)), np.array([[1, 1, 8, 8], [2, 3, 10, 12]]), 1)
    if media:
        w.add_video("vid", rng.random((1, 3, 3, 8, 8)), 1, fps=2)
        w.add_audio("snd", np.sin(np.linspace(0, 40, 800)), 1, sample_rate=8000)
    w.add_pr_curve("pr", rng.random(50) > 0.5, rng.random(50), 1)
    w.add_pr_curve_raw(
        "prraw", [5, 3, 1], [4, 2, 0], [1, 3, 5], [0, 2, 4], [0.5, 0.6, 1.0], [1.0, 0.6, 0.2], 1, num_thresholds=3
    )
    w.add_custom_scalars({"cat": {"chart": ["Multiline", ["a", "b"]]}})
    w.add_mesh("mesh", np.array([[[0.0, 0, 0], [1, 0, 0], [0, 1, 0]]]), faces=np.array([[[0, 1, 2]]]), global_step=1)
    if media:  # tensorboardX's add_graph needs torch
        w.add_graph(GraphDef(node=[NodeDef(name="x", op="Const")]))
    w.add_embedding(rng.random((5, 3)), metadata=list("abcde"), global_step=1, tag="emb")


def test_every_rich_kind_reaches_tensorboard_like_tensorboardx(tmp_path):
    """Each rich method writes what tensorboardX writes for the same call: the same tags under
    the same plugins, as TensorBoard's own accumulator reads them."""
    for name in (
        "text",
        "image",
        "images",
        "image_boxes",
        "audio",
        "pr_curve",
        "pr_curve_raw",
        "custom_scalars",
        "mesh",
        "graph_event",
        "write_embedding",
    ):
        need_summary(name)
    pytest.importorskip("PIL")
    from tensorboardX import SummaryWriter as TbxWriter

    with SummaryWriter(tmp_path / "ours") as w:
        write_rich(w, tmp_path, media=True)
    with TbxWriter(str(tmp_path / "tbx")) as x:
        write_rich(x, tmp_path, media=False)  # tensorboardX needs moviepy, soundfile and torch for these

    def plugins(run):
        acc = accumulator(run)
        return acc, {t: acc.SummaryMetadata(t).plugin_data.plugin_name for t in acc.Tags()["tensors"]}

    ours_acc, ours = plugins(tmp_path / "ours")
    _, theirs = plugins(tmp_path / "tbx")
    assert ours.pop("vid") == "images" and ours.pop("snd") == "audio" and ours.pop("__run_graph__") == "graphs"

    def family(tags: dict[str, str]) -> set[tuple[str, str]]:
        # The encoders name some tags their own way (text without "/text_summary", one mesh
        # tag per component: see docs/writing-kinds.md); compare what the call was named.
        return {(re.split(r"[/_]", t)[0], p) for t, p in tags.items()}

    assert family(ours) == family(theirs)
    assert ours_acc.Graph().node[0].name == "x"
    for run in ("ours", "tbx"):
        assert (tmp_path / run / "projector_config.pbtxt").is_file()


def test_add_figure(tmp_path):
    need_summary("figure")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = []
    for k in range(2):
        fig = plt.figure(figsize=(2, 1), dpi=50)
        fig.gca().plot([0, 1], [k, 1 - k])
        figs.append(fig)
    with SummaryWriter(tmp_path) as w:
        w.add_figure("one", figs[0], 1)
        w.add_figure("many", figs, 2, close=True)
    acc = legacy_accumulator(tmp_path)
    (one,) = acc.Images("one")
    assert (one.step, one.width, one.height) == (1, 100, 50)  # 2 x 1 inches at 50 dpi
    assert acc.Images("many")[0].step == 2
    assert not plt.get_fignums()  # closed, as asked


def test_text_tag_follows_the_layout(tmp_path):
    """torch and tensorboardX name a text series ``<tag>/text_summary``; layout="torch" keeps
    that for tools keyed on their names, the default keeps the tag as given."""
    need_summary("text")
    with SummaryWriter(tmp_path / "ours") as w:
        w.add_text("notes", "hello", 1)
    with SummaryWriter(tmp_path / "torch", layout="torch") as w:
        w.add_text("notes", "hello", 1)
    assert set(accumulator(tmp_path / "ours").Tags()["tensors"]) == {"notes"}
    assert set(accumulator(tmp_path / "torch").Tags()["tensors"]) == {"notes/text_summary"}
