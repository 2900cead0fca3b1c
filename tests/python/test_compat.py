"""``tbscope.compat`` against the real thing, value for value.

* ``compat.EventAccumulator`` vs TensorBoard's legacy ``event_accumulator.EventAccumulator``,
* ``compat.PluginEventAccumulator`` vs ``plugin_event_accumulator.EventAccumulator``
  (both with every size guidance 0 and ``purge_orphaned_data=False``: keep everything),
* ``compat.SummaryReader`` vs tbparse's ``SummaryReader``,

on logdirs written by tensorboardX and by TensorBoard's own writer (``fixtures.py``) plus a
TF2-style logdir written here that tbparse can read end to end. Every run of every logdir is
compared: tags (with their order), every event of every tag, protos byte for byte.

Where tbscope differs on purpose, the comparison says so and checks the documented rule instead
of skipping the value:

* legacy histograms: the last bucket limit is the histogram's ``max`` (RustBoard's edges), not
  the writer's last limit (``LAST_LIMIT_IS_MAX``);
* wall times that are +-inf in the file are NaN (tbscope stores them as null), except in
  ``Tensors``, which reads them from the records;
* tbparse needs TensorFlow for images and audio; tbscope decodes them without it, so they are
  compared against the accumulator's bytes instead, and tbparse is asked only for the other
  event types;
* ``pivot=True`` cells holding several values: tbparse orders them with an unstable sort when
  ``step`` is its only sort key, so there they are compared as multisets;
* the order of hparams names inside one file is protobuf map order, which varies between
  processes even for tbparse itself, so ``tags["hparams"]`` is compared as a set.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fixtures

compat = pytest.importorskip("tbscope.compat")
ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
pea = pytest.importorskip("tensorboard.backend.event_processing.plugin_event_accumulator")

logging.getLogger("tensorboard").setLevel(logging.ERROR)

#: the compat classes return the writer's last bucket limit, as TensorBoard and tbparse do (the
#: native tables end the last bucket at ``max``).
LAST_LIMIT_IS_MAX = False
#: tbparse's default event types without TensorFlow (it cannot decode images or audio).
TBPARSE_TYPES = {"scalars", "tensors", "histograms", "hparams", "text"}


# --------------------------------------------------------------------------------------------
# a TF2-style logdir tbparse reads without errors
# --------------------------------------------------------------------------------------------


def write_tf2_logdir(root: Path) -> None:
    """TF2-style tensor summaries (what ``tf.summary`` writes), via TensorBoard's writer.

    ``a``      rank-0 tensors of several dtypes (plugin scalars), text, v2 histograms,
               an image tensor, hparams session start, a pr curve.
    ``b``      two files; the second restarts at step 3 (overlapping steps) and a legacy
               ``simple_value`` tag lives next to tensor tags; ``mixed`` is a simple_value in the
               first file and a tensor in the second (each accumulator bucket gets its part).
    ``b/c``    a nested run with the same tags (directory ordering, merging across runs).
    """
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.histogram import summary_v2 as hist_v2
    from tensorboard.plugins.hparams import summary_v2 as hp_v2
    from tensorboard.plugins.image import metadata as image_metadata
    from tensorboard.plugins.pr_curve import metadata as pr_metadata
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.plugins.text import summary_v2 as text_v2
    from tensorboard.util import tensor_util

    rng = np.random.default_rng(3)
    smd = scalar_metadata.create_summary_metadata(display_name="", description="")
    imd = image_metadata.create_summary_metadata(display_name="", description="")
    wall = fixtures._wall

    w = fixtures._TBWriter(root / "a")
    data = rng.normal(size=300)
    for s in range(6):
        w.value(s, wall(s), "loss", tensor_util.make_tensor_proto(np.float32(1.0 / (s + 1))), smd)
        w.value(s, wall(s), "lr", tensor_util.make_tensor_proto(np.float64(0.1 * 0.5**s)), smd)
        w.values(s, wall(s), *text_v2.text_pb("note", f"step {s} ✓").value)
        if s % 2 == 0:
            w.values(s, wall(s), *hist_v2.histogram_pb("weights", data * (s + 1), buckets=7).value)
            png = fixtures._png(4, 3, 3, seed=s)
            w.value(s, wall(s), "img", fixtures.string_tensor_proto(np.array([b"3", b"4", png], dtype=object)), imd)
    tp = np.array([10, 8, 5], np.float32)
    fp = np.array([10, 5, 2], np.float32)
    curve = np.stack([tp, fp, 10 - fp, 10 - tp, tp / (tp + fp), tp / 10]).astype(np.float32)
    w.value(2, wall(2), "pr", tensor_util.make_tensor_proto(curve),
            pr_metadata.create_summary_metadata(display_name="pr", description="", num_thresholds=3))
    w.values(0, wall(0), *hp_v2.hparams_pb({"lr": 0.1, "opt": "adam", "bn": True, "layers": 4},
                                             trial_id="trial-a", start_time_secs=wall(0)).value)
    w.close()
    # tbparse's own tensor decoder fails on integer and bool tensors stored in typed fields
    # (it looks up dtypes TensorBoard's stub lacks), so they get a run that only the
    # accumulator tests and tbscope read
    w = fixtures._TBWriter(root / "ints")
    for s in range(6):
        w.value(s, wall(s), "count", tensor_util.make_tensor_proto(np.int64(10 * s)), smd)
        w.value(s, wall(s), "flag", tensor_util.make_tensor_proto(np.bool_(s % 2)), smd)
    w.close()

    def run_b(directory: Path) -> None:
        w = fixtures._TBWriter(directory, ".0")
        for s in range(6):
            w.value(s, wall(10 + s), "loss", tensor_util.make_tensor_proto(np.float32(s)), smd)
            w.values(s, wall(10 + s), summary_pb2.Summary.Value(tag="acc", simple_value=s / 10))
            w.values(s, wall(10 + s), summary_pb2.Summary.Value(tag="mixed", simple_value=s))
        w.close()
        fixtures._next_second()
        w = fixtures._TBWriter(directory, ".1")
        for s in range(3, 8):
            w.value(s, wall(30 + s), "loss", tensor_util.make_tensor_proto(np.float32(100 + s)), smd)
            w.values(s, wall(30 + s), summary_pb2.Summary.Value(tag="acc", simple_value=1 + s / 10))
            w.value(s, wall(30 + s), "mixed", tensor_util.make_tensor_proto(np.float32(-s)), smd)
        w.close()

    run_b(root / "b")
    run_b(root / "b" / "c")


@pytest.fixture(scope="module")
def tf2_logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tf2_logdir")
    write_tf2_logdir(root)
    return root


def _runs(root: Path) -> list[Path]:
    """Every directory holding event files (TensorBoard's runs)."""
    return sorted({p.parent for p in root.rglob("*tfevents*") if p.is_file()})


@pytest.fixture(params=["tbx", "tb", "tf2", "wild"])
def logdir(request) -> Path:
    """Each logdir in turn; ``wild`` (real files from public repositories) skips when absent."""
    return request.getfixturevalue(f"{request.param}_logdir")


# --------------------------------------------------------------------------------------------
# comparison helpers
# --------------------------------------------------------------------------------------------


def _same_wall(ours: float, theirs: float) -> bool:
    """Exact, except that non-finite wall times are NaN in tbscope's columns (documented)."""
    if not math.isfinite(theirs):
        return math.isnan(ours)
    return ours == theirs


def _same_float(a: Any, b: Any) -> bool:
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _proto_key(e: Any) -> tuple[int, float | None, bytes]:
    w = e.wall_time
    return e.step, (w if math.isfinite(w) else None), e.tensor_proto.SerializeToString()


def _check(problems: list[str], ok: bool, what: str) -> None:
    if not ok:
        problems.append(what)


# --------------------------------------------------------------------------------------------
# legacy EventAccumulator
# --------------------------------------------------------------------------------------------


def _compare_legacy(run: Path, purge: bool = False) -> list[str]:
    theirs = ea.EventAccumulator(str(run), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE,
                                 purge_orphaned_data=purge).Reload()
    ours = compat.EventAccumulator(str(run), size_guidance=compat.STORE_EVERYTHING_SIZE_GUIDANCE,
                                   purge_orphaned_data=purge).Reload()
    p: list[str] = []
    tags = theirs.Tags()
    _check(p, ours.Tags() == tags, f"Tags: {ours.Tags()} != {tags}")
    for tag in tags["scalars"]:
        a, b = ours.Scalars(tag), theirs.Scalars(tag)
        _check(p, len(a) == len(b), f"Scalars({tag}) length {len(a)} != {len(b)}")
        for x, y in zip(a, b):
            _check(p, type(x) is type(y) and x.step == y.step and _same_wall(x.wall_time, y.wall_time)
                   and _same_float(x.value, y.value), f"Scalars({tag}): {x} != {y}")
    for tag in tags["histograms"]:
        a, b = ours.Histograms(tag), theirs.Histograms(tag)
        _check(p, len(a) == len(b), f"Histograms({tag}) length")
        for x, y in zip(a, b):
            hx, hy = x.histogram_value, y.histogram_value
            fields = ("min", "max", "num", "sum", "sum_squares")
            _check(p, x.step == y.step and _same_wall(x.wall_time, y.wall_time)
                   and all(_same_float(getattr(hx, f), getattr(hy, f)) for f in fields)
                   and list(hx.bucket) == list(hy.bucket), f"Histograms({tag}) @ {y.step}: {hx} != {hy}")
            limits = list(hy.bucket_limit)
            if LAST_LIMIT_IS_MAX and limits:
                limits[-1] = hy.max
            _check(p, list(hx.bucket_limit) == limits, f"Histograms({tag}) limits {hx.bucket_limit} != {limits}")
        ca, cb = ours.CompressedHistograms(tag), theirs.CompressedHistograms(tag)
        for x, y, h in zip(ca, cb, b):
            hv = h.histogram_value
            _check(p, (x.step, x.wall_time) == (y.step, y.wall_time)
                   and [(bp, float(v)) for bp, v in x.compressed_histogram_values]
                   == [(bp, float(v)) for bp, v in y.compressed_histogram_values],
                   f"CompressedHistograms({tag}): {x} != {y}")
    for tag in tags["images"]:
        a, b = ours.Images(tag), theirs.Images(tag)
        _check(p, [(x.step, x.wall_time, x.encoded_image_string, x.width, x.height) for x in a]
               == [(y.step, y.wall_time, y.encoded_image_string, y.width, y.height) for y in b], f"Images({tag})")
    for tag in tags["audio"]:
        a, b = ours.Audio(tag), theirs.Audio(tag)
        _check(p, a == b, f"Audio({tag})")
    for tag in tags["tensors"]:
        a, b = ours.Tensors(tag), theirs.Tensors(tag)
        _check(p, [_proto_key(e) for e in a] == [_proto_key(e) for e in b], f"Tensors({tag})")
    for tag in tags["run_metadata"]:
        _check(p, ours.RunMetadata(tag) == theirs.RunMetadata(tag), f"RunMetadata({tag})")
    if tags["graph"]:
        _check(p, ours.Graph() == theirs.Graph(), "Graph()")
    if tags["meta_graph"]:
        _check(p, ours.MetaGraph() == theirs.MetaGraph(), "MetaGraph()")
    for tag, md in theirs.summary_metadata.items():
        _check(p, ours.SummaryMetadata(tag) == md, f"SummaryMetadata({tag})")
    _check(p, ours.summary_metadata == theirs.summary_metadata, "summary_metadata")
    for plugin in theirs._plugin_to_tag_to_content:
        _check(p, ours.PluginTagToContent(plugin) == theirs.PluginTagToContent(plugin), f"PluginTagToContent({plugin})")
    with pytest.raises(KeyError):
        ours.PluginTagToContent("no such plugin")
    _check(p, ours.FirstEventTimestamp() == theirs.FirstEventTimestamp(), "FirstEventTimestamp")
    _check(p, ours.file_version == theirs.file_version, "file_version")
    _check(p, ours.GetSourceWriter() == theirs.GetSourceWriter(), "GetSourceWriter")
    return p


def test_legacy_accumulator_matches_tensorboard(logdir):
    problems = {str(run.relative_to(logdir)): _compare_legacy(run) for run in _runs(logdir)}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_legacy_accumulator_single_file(tb_logdir):
    """A path to one event file reads that file only, as TensorBoard does."""
    run = tb_logdir / "scalars"
    first = sorted(run.glob("*tfevents*"))[0]
    assert not _compare_legacy(first)


def test_legacy_buckets_split_by_field(tf2_logdir):
    """``mixed`` is a simple_value in one file and a tensor in the next: Scalars holds the first
    part, Tensors the second, exactly like TensorBoard's bucketing by Summary.Value field."""
    acc = compat.EventAccumulator(str(tf2_logdir / "b"), purge_orphaned_data=False).Reload()
    tags = acc.Tags()
    assert "mixed" in tags["scalars"] and "mixed" in tags["tensors"]
    assert [e.step for e in acc.Scalars("mixed")] == list(range(6))
    assert [e.step for e in acc.Tensors("mixed")] == list(range(3, 8))
    assert "loss" in tags["tensors"] and "loss" not in tags["scalars"]
    with pytest.raises(KeyError):
        acc.Scalars("loss")  # a TF2 scalar is a tensor to the legacy accumulator


def test_event_classes_are_tensorboards():
    assert compat.ScalarEvent is ea.ScalarEvent
    assert compat.HistogramEvent is ea.HistogramEvent
    assert compat.HistogramValue is ea.HistogramValue
    assert compat.ImageEvent is ea.ImageEvent
    assert compat.AudioEvent is ea.AudioEvent
    assert compat.TensorEvent is ea.TensorEvent
    assert compat.CompressedHistogramEvent is ea.CompressedHistogramEvent


def test_tensor_protos_are_tensorboard_protos(tb_logdir):
    from tensorboard.compat.proto import tensor_pb2
    from tensorboard.util import tensor_util

    acc = compat.EventAccumulator(str(tb_logdir / "scalars"), purge_orphaned_data=False).Reload()
    ev = acc.Tensors("dtype/float64")
    assert all(isinstance(e.tensor_proto, tensor_pb2.TensorProto) for e in ev)
    assert tensor_util.make_ndarray(ev[0].tensor_proto).dtype == np.float64


# --------------------------------------------------------------------------------------------
# plugin EventAccumulator
# --------------------------------------------------------------------------------------------


def _compare_plugin(run: Path) -> list[str]:
    theirs = pea.EventAccumulator(str(run), size_guidance={"tensors": 0}, purge_orphaned_data=False).Reload()
    ours = compat.PluginEventAccumulator(str(run), size_guidance={"tensors": 0}, purge_orphaned_data=False).Reload()
    p: list[str] = []
    tags = theirs.Tags()
    _check(p, ours.Tags() == tags, f"Tags: {ours.Tags()} != {tags}")
    for tag in tags["tensors"]:
        a, b = ours.Tensors(tag), theirs.Tensors(tag)
        _check(p, [_proto_key(e) for e in a] == [_proto_key(e) for e in b], f"Tensors({tag})")
    _check(p, ours.AllSummaryMetadata() == theirs.AllSummaryMetadata(), "AllSummaryMetadata")
    _check(p, ours.summary_metadata == theirs.summary_metadata, "summary_metadata")
    _check(p, ours.ActivePlugins() == theirs.ActivePlugins(), "ActivePlugins")
    for plugin in theirs.ActivePlugins():
        _check(p, ours.PluginTagToContent(plugin) == theirs.PluginTagToContent(plugin), f"PluginTagToContent({plugin})")
    if tags["graph"]:
        _check(p, ours.Graph() == theirs.Graph(), "Graph()")
        _check(p, ours.SerializedGraph() == theirs.SerializedGraph(), "SerializedGraph()")
    if tags["meta_graph"]:
        _check(p, ours.MetaGraph() == theirs.MetaGraph(), "MetaGraph()")
    _check(p, ours.FirstEventTimestamp() == theirs.FirstEventTimestamp(), "FirstEventTimestamp")
    return p


def test_plugin_accumulator_matches_tensorboard(logdir):
    problems = {str(run.relative_to(logdir)): _compare_plugin(run) for run in _runs(logdir)}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_plugin_accumulator_finds_zero_element_records(tb_logdir):
    """``img/none`` (an image summary of zero images) and ``text/empty`` have no row in tbscope's
    tables; the accumulator finds their records by scanning the run's files."""
    acc = compat.PluginEventAccumulator(str(tb_logdir / "plugins"), purge_orphaned_data=False).Reload()
    assert [e.step for e in acc.Tensors("img/none")] == [0]
    assert len(acc.Tensors("text/empty")) == 1


def test_zero_element_records_are_found_after_damage(tb_logdir, tmp_path):
    """The run's files are walked with the reader's framing, which resynchronises after damage,
    not by hopping from length to length (which took garbage for a length and stopped)."""
    import shutil
    import struct

    run = tmp_path / "plugins"
    shutil.copytree(tb_logdir / "plugins", run)
    for f in run.glob("*tfevents*"):
        data = f.read_bytes()
        first = 16 + struct.unpack("<Q", data[:8])[0]
        f.write_bytes(data[:first] + b"\xff" * 40 + data[first:])
    acc = compat.PluginEventAccumulator(str(run), purge_orphaned_data=False).Reload()
    assert [e.step for e in acc.Tensors("img/none")] == [0]
    assert len(acc.Tensors("text/empty")) == 1


def test_read_records_uses_the_readers_framing(tmp_path):
    """``_core.read_records``: payloads with offsets, both CRCs checked, damage skipped, a record
    still being written left out; a wrong offset is an error, not bytes read as a record."""
    from tbscope import _core
    from tfrecord_util import frame

    payloads = [b"first", b"second with xyz", b"third xyz"]
    recs = [frame(p) for p in payloads]
    data = recs[0] + b"garbage" + recs[1] + recs[2] + frame(b"unfinished")[:9]
    path = tmp_path / "events.out.tfevents.1700000000.h"
    path.write_bytes(data)
    at1 = len(recs[0]) + 7
    at2 = at1 + len(recs[1])
    assert _core.read_records(path) == [(0, b"first"), (at1, payloads[1]), (at2, payloads[2])]
    assert _core.read_records(path, containing=b"xyz") == [(at1, payloads[1]), (at2, payloads[2])]
    assert _core.read_records(path, [at2, 0]) == [(at2, payloads[2]), (0, b"first")]
    with pytest.raises(OSError, match="no whole record at offset"):
        _core.read_records(path, [at1 + 1])
    with pytest.raises(FileNotFoundError):
        _core.read_records(tmp_path / "missing")


# --------------------------------------------------------------------------------------------
# semantics that differ from TensorBoard on purpose
# --------------------------------------------------------------------------------------------


def test_size_guidance_samples_as_tensorboard_does(tbx_logdir):
    """TensorBoard's reservoir is seeded: a guidance of 2 keeps the same 2 points of 25 (the
    last one always); 0 keeps everything; a negative guidance gets TensorBoard's ValueError."""
    run = str(tbx_logdir)
    ours = compat.EventAccumulator(run, size_guidance={compat.SCALARS: 2}, purge_orphaned_data=False).Reload()
    theirs = ea.EventAccumulator(run, size_guidance={ea.SCALARS: 2}, purge_orphaned_data=False).Reload()
    assert ours.Scalars("loss/train") == theirs.Scalars("loss/train")
    assert len(ours.Scalars("loss/train")) == 2 and ours.Scalars("loss/train")[-1].step == 24
    everything = compat.EventAccumulator(run, size_guidance={compat.SCALARS: 0}, purge_orphaned_data=False).Reload()
    assert len(everything.Scalars("loss/train")) == 25
    with pytest.raises(ValueError):
        compat.EventAccumulator(run, size_guidance={compat.SCALARS: -1})


def test_purge_keeps_runs_tensorboard_would_not_purge(tf2_logdir, tbx_logdir):
    """With the default purge_orphaned_data=True, a run without a SessionLog restart is read
    whole, as TensorBoard reads it: overlapping steps across files and steps going back inside
    a file_version 2 file (tensorboardX ``back``) are all kept."""
    assert not _compare_legacy(tf2_logdir / "b", purge=True)
    assert not _compare_legacy(tbx_logdir / "eval" / "deep" / "er", purge=True)
    acc = compat.EventAccumulator(str(tbx_logdir)).Reload()
    assert len(acc.Scalars("back")) == 8 and len(acc.Scalars("dup")) == 4


def test_purge_after_a_restart_is_tensorboards(tb_logdir):
    """``events`` logs SessionLog.START twice (a restart at step 2): each accumulator purges as
    its TensorBoard namesake does. The plugin one drops the pre-restart steps >= 2 of every
    tag; the legacy one purges at every START but never touches tensors."""
    run = tb_logdir / "events"
    theirs = pea.EventAccumulator(str(run), size_guidance={"tensors": 0}).Reload()
    ours = compat.PluginEventAccumulator(str(run), size_guidance={"tensors": 0}).Reload()
    assert [_proto_key(e) for e in ours.Tensors("loss")] == [_proto_key(e) for e in theirs.Tensors("loss")]
    assert [e.step for e in ours.Tensors("loss")] == [0, 1, 2, 3, 4]
    legacy = compat.EventAccumulator(str(run)).Reload()
    legacy_tb = ea.EventAccumulator(str(run)).Reload()
    assert [e.step for e in legacy.Tensors("loss")] == [e.step for e in legacy_tb.Tensors("loss")]
    kept = compat.EventAccumulator(str(run), purge_orphaned_data=False).Reload()
    assert [e.step for e in kept.Tensors("loss")] == [0, 1, 2, 3, 2, 3, 4]


def test_reload_reads_what_was_appended(tmp_path):
    from tensorboard.compat.proto import summary_pb2

    w = fixtures._TBWriter(tmp_path)
    for s in range(3):
        w.values(s, fixtures._wall(s), summary_pb2.Summary.Value(tag="x", simple_value=float(s)))
    w.w.flush()
    acc = compat.EventAccumulator(str(tmp_path))
    assert acc.Tags()["scalars"] == []  # nothing is read before Reload, as in TensorBoard
    acc.Reload()
    assert [e.value for e in acc.Scalars("x")] == [0.0, 1.0, 2.0]
    for s in range(3, 5):
        w.values(s, fixtures._wall(s), summary_pb2.Summary.Value(tag="x", simple_value=float(s)))
    w.close()
    assert acc.Reload() is acc
    assert [e.value for e in acc.Scalars("x")] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_works_without_tensorboard(tbx_logdir):
    """Without TensorBoard the event classes are identical dataclasses, scalars/histograms/images
    read fine, and only proto-returning calls raise a clear ImportError."""
    script = textwrap.dedent(
        f"""
        import sys, dataclasses

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "tensorboard" or name.startswith("tensorboard."):
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        from tbscope import compat

        assert dataclasses.is_dataclass(compat.ScalarEvent)
        assert [f.name for f in dataclasses.fields(compat.HistogramValue)] == [
            "min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket"]
        acc = compat.EventAccumulator({str(tbx_logdir)!r}, purge_orphaned_data=False).Reload()
        assert len(acc.Scalars("loss/train")) == 25
        assert acc.Tags()["tensors"] == ["notes/text_summary", "custom_scalars__config__"]
        train = compat.EventAccumulator({str(tbx_logdir / "train")!r}).Reload()
        assert len(train.Histograms("hist/0")) == 2 and len(train.Images("img/chw_u8")) == 2
        try:
            acc.Tensors("notes/text_summary")
        except ImportError as e:
            assert "tensorboard" in str(e), e
        else:
            raise AssertionError("Tensors() should need tensorboard")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


# --------------------------------------------------------------------------------------------
# SummaryReader vs tbparse
# --------------------------------------------------------------------------------------------

EXTRAS = [
    set(),
    {"wall_time"},
    {"dir_name", "file_name", "wall_time", "min", "max", "num", "sum", "sum_squares"},
    {"dir_name"},
]


def _sort_key(x: Any) -> tuple[int, Any]:
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return (0, float(x)) if x == x else (1, 0.0)
    return (2, repr(x))


def _same_cell(a: Any, b: Any, column: str, multiset: bool) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)):
            return False
        if multiset and not any(isinstance(x, np.ndarray) for x in a):
            a, b = sorted(a, key=_sort_key), sorted(b, key=_sort_key)
        return all(_same_cell(x, y, column, multiset) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype != b.dtype:
            return False
        if column.endswith("limits") and LAST_LIMIT_IS_MAX and a.size and b.size:
            a, b = a[:-1], b[:-1]  # compared against max separately
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if column == "wall_time" and isinstance(b, float) and not math.isfinite(b):
        return isinstance(a, float) and math.isnan(a)
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)):
        return _same_float(a, b)
    return type(a) is type(b) and a == b


def _compare_frames(ours: pd.DataFrame, theirs: pd.DataFrame, multiset: bool) -> list[str]:
    if list(ours.columns) != list(theirs.columns):
        return [f"columns {list(ours.columns)} != {list(theirs.columns)}"]
    p = [f"dtype {c}: {ours[c].dtype} != {theirs[c].dtype}" for c in ours.columns if ours[c].dtype != theirs[c].dtype]
    if len(ours) != len(theirs):
        return p + [f"{len(ours)} rows != {len(theirs)}"]
    for c in ours.columns:
        for i, (a, b) in enumerate(zip(ours[c].tolist(), theirs[c].tolist())):
            if not _same_cell(a, b, c, multiset):
                p.append(f"row {i} {c}: {a!r:.120} != {b!r:.120}")
                break
    return p


def _tbparse_events(reader: Any, event_type: str) -> pd.DataFrame:
    """tbparse's frame; its own pandas deprecation warnings (``inplace=True``) are not ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return reader.get_events(event_type)


def _compare_reader(path: Path, pivot: bool, extra: set[str]) -> list[str]:
    tbparse = pytest.importorskip("tbparse")
    theirs = tbparse.SummaryReader(str(path), pivot=pivot, extra_columns=extra, event_types=TBPARSE_TYPES)
    ours = compat.SummaryReader(path, pivot=pivot, extra_columns=extra, event_types=TBPARSE_TYPES)
    # tbparse sorts pivot rows with one key (step) using an unstable sort: list order is arbitrary
    multiset = pivot and not ({"dir_name", "file_name"} & extra)
    problems = []
    for et in sorted(TBPARSE_TYPES):
        for msg in _compare_frames(getattr(ours, et), _tbparse_events(theirs, et), multiset):
            problems.append(f"{et}: {msg}")
    a, b = ours.tags, theirs.tags
    a["hparams"], b["hparams"] = sorted(a["hparams"]), sorted(b["hparams"])
    if a != b:
        problems.append(f"tags {a} != {b}")
    return problems


TBPARSE_LOGDIRS = [("tbx", ""), ("tf2", "a"), ("tf2", "b"), ("tb", "events"), ("tb", "legacy"), ("tb", "quirks")]


@pytest.mark.parametrize("which,sub", TBPARSE_LOGDIRS, ids=[f"{a}/{b}" if b else a for a, b in TBPARSE_LOGDIRS])
@pytest.mark.parametrize("pivot", [False, True], ids=["long", "pivot"])
def test_summary_reader_matches_tbparse(request, which, sub, pivot):
    """tbparse cannot read the tb fixture's plugins/scalars/tensors runs at all (it raises on
    multi-element text and on bfloat16), so those runs are left to the accumulator tests."""
    path = request.getfixturevalue(f"{which}_logdir") / sub
    problems = {str(sorted(extra)): _compare_reader(path, pivot, extra) for extra in EXTRAS}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_summary_reader_matches_tbparse_on_wild_files(wild_logdir):
    """Real-world files (Keras, Lightning, TF1/TF2, tensorboardX) from several repositories:
    long format over the whole tree at once; wide format per repository, skipping those over
    1 MB because tbparse's own pivot takes about a minute per 4 MB (tbscope: a fraction of a
    second)."""
    problems = {f"long {sorted(extra)}": _compare_reader(wild_logdir, False, extra) for extra in EXTRAS[1:3]}
    for repo in sorted(p for p in wild_logdir.iterdir() if p.is_dir()):
        if sum(f.stat().st_size for f in repo.rglob("*tfevents*") if f.is_file()) < 1 << 20:
            problems[f"pivot {repo.name}"] = _compare_reader(repo, True, {"wall_time"})
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_summary_reader_single_file_and_children(tf2_logdir):
    tbparse = pytest.importorskip("tbparse")
    f = sorted((tf2_logdir / "b").glob("*tfevents*"))[1]
    extra = {"wall_time", "dir_name", "file_name"}
    ours = compat.SummaryReader(str(f), extra_columns=extra, event_types=TBPARSE_TYPES)
    theirs = tbparse.SummaryReader(str(f), extra_columns=extra, event_types=TBPARSE_TYPES)
    for et in TBPARSE_TYPES:
        assert not _compare_frames(getattr(ours, et), _tbparse_events(theirs, et), False), et
    root = compat.SummaryReader(tf2_logdir / "b", event_types=TBPARSE_TYPES)
    their_root = tbparse.SummaryReader(str(tf2_logdir / "b"), event_types=TBPARSE_TYPES)
    assert list(root.children) == list(their_root.children)
    assert not _compare_frames(root["c"].tensors, _tbparse_events(their_root["c"], "tensors"), False)
    assert repr(root) == repr(their_root)


def test_summary_reader_tf2_scalars_are_tensors(tf2_logdir):
    """As in tbparse, ``scalars`` holds simple_value series; TF2 scalars come back in
    ``tensors`` as Python scalars of their own dtype (int, bool, float)."""
    r = compat.SummaryReader(tf2_logdir / "ints")
    assert r.scalars.empty
    t = r.tensors
    count = t[t["tag"] == "count"]["value"].tolist()
    flag = t[t["tag"] == "flag"]["value"].tolist()
    assert count == [0, 10, 20, 30, 40, 50] and all(type(v) is int for v in count)
    assert flag == [False, True] * 3 and all(type(v) is bool for v in flag)


def test_summary_reader_argument_errors(tbx_logdir, tmp_path):
    with pytest.raises(ValueError):
        compat.SummaryReader(tmp_path / "missing")
    with pytest.raises(KeyError):
        compat.SummaryReader(tbx_logdir, extra_columns={"nope"})
    with pytest.raises(KeyError):
        compat.SummaryReader(tbx_logdir, event_types={"nope"})
    with pytest.raises(ValueError):
        compat.SummaryReader(tbx_logdir, extra_columns=["wall_time"])  # type: ignore[arg-type]
    r = compat.SummaryReader(tbx_logdir, event_types={"scalars"})
    with pytest.raises(ValueError):
        r.get_events("tensors")  # not asked for
    with pytest.raises(ValueError):
        r.get_tags("nope")
    assert r.get_tags("tensors") == []
    assert compat.SummaryReader(tmp_path).scalars.empty  # no event files: an empty frame


# ---- images and audio (tbparse needs TensorFlow for these; checked against the bytes) ----------


def _png_array(data: bytes) -> np.ndarray:
    from PIL import Image

    arr = np.asarray(Image.open(__import__("io").BytesIO(data)))
    return arr[:, :, None] if arr.ndim == 2 else arr


def test_summary_reader_images(tbx_logdir, tb_logdir):
    pytest.importorskip("PIL")
    for run in (tbx_logdir / "train", tb_logdir / "legacy"):
        acc = ea.EventAccumulator(str(run), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE, purge_orphaned_data=False).Reload()
        df = compat.SummaryReader(run, extra_columns={"width", "height", "wall_time"}).images
        assert list(df.columns) == ["step", "tag", "value", "height", "width", "wall_time"]
        expected = sorted(((t, e) for t in acc.Tags()["images"] for e in acc.Images(t)), key=lambda te: (te[0], te[1].step))
        assert len(df) == len(expected)
        for row, (tag, e) in zip(df.itertuples(index=False), expected):
            assert (row.tag, row.step, row.height, row.width, row.wall_time) == (tag, e.step, e.height, e.width, e.wall_time)
            assert row.value.dtype == np.uint8 and row.value.shape[:2] == (e.height, e.width)
            assert np.array_equal(row.value, _png_array(e.encoded_image_string))
        wide = compat.SummaryReader(run, pivot=True).images
        assert list(wide.columns) == ["step"] + sorted(acc.Tags()["images"])


def test_summary_reader_audio(tbx_logdir, tb_logdir):
    import io
    import wave

    for run in (tbx_logdir / "train", tb_logdir / "legacy"):
        acc = ea.EventAccumulator(str(run), size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE, purge_orphaned_data=False).Reload()
        df = compat.SummaryReader(run, extra_columns={"content_type", "length_frames", "sample_rate"}).audio
        assert list(df.columns) == ["step", "tag", "value", "content_type", "length_frames", "sample_rate"]
        expected = sorted(((t, e) for t in acc.Tags()["audio"] for e in acc.Audio(t)), key=lambda te: (te[0], te[1].step))
        assert len(df) == len(expected) > 0
        for row, (tag, e) in zip(df.itertuples(index=False), expected):
            assert (row.tag, row.step, row.content_type, row.length_frames, row.sample_rate) == (
                tag, e.step, e.content_type, e.length_frames, e.sample_rate)
            with wave.open(io.BytesIO(e.encoded_audio_string)) as w:
                pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, w.getnchannels())
            # tf.audio.decode_wav: float32 [frames, channels], int16 / 32768
            assert row.value.dtype == np.float32 and row.value.shape == pcm.shape == (e.length_frames, pcm.shape[1])
            assert np.array_equal(row.value, pcm.astype(np.float32) / 32768.0)


# ---- scale ----------------------------------------------------------------------------------------


def test_summary_reader_scalars_are_vectorised(tmp_path, monkeypatch):
    """Scalars never go through a per-row Python step: building a 200k-row frame must not call
    the per-record probe more than once per (tag, file), nor build per-row Python objects for
    the values."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    n_steps, tags = 40_000, ["a", "b/c", "d", "e", "f"]
    path = tmp_path / "events.out.tfevents.1.host"
    with open(path, "wb") as fh:
        rw = RecordWriter(fh)
        rw.write(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString())
        ev = event_pb2.Event()
        val = ev.summary.value.add()
        for s in range(n_steps):
            for t in tags:
                ev.step, ev.wall_time = s, 1.0 + s
                val.tag, val.simple_value = t, s * 0.5
                rw.write(ev.SerializeToString())
    calls = []
    real = compat._probe_event
    monkeypatch.setattr(compat, "_probe_event", lambda data, tag: calls.append(tag) or real(data, tag))
    df = compat.SummaryReader(tmp_path, extra_columns={"wall_time"}).scalars
    assert len(df) == n_steps * len(tags) and len(calls) == len(tags)
    assert df["value"].dtype == np.float64 and df["step"].dtype == np.int64
    assert df["tag"].tolist()[:: n_steps] == sorted(tags)
    assert np.array_equal(df["value"].to_numpy()[:n_steps], np.arange(n_steps) * 0.5)
    wide = compat.SummaryReader(tmp_path, pivot=True).scalars
    assert list(wide.columns) == ["step"] + sorted(tags) and len(wide) == n_steps
    assert all(wide[t].dtype == np.float64 for t in tags)
