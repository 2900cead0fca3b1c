"""The public Python API, end to end: filters, steps, kinds, provenance, frames and their
conversions, blobs, tensors, hparams and summary, reload, restarts, threads, fork, Ctrl-C and
argument errors.

Logdirs are written at test time, either with tensorboardX / TensorBoard's protos or (when
exact bytes or sizes matter) by framing serialized Event protos ourselves with ``crc32c``.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
import wave
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import tbscope
from tfrecord_util import child_result, frame, masked_crc

crc32c = pytest.importorskip("crc32c")
event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")

# --------------------------------------------------------------------------------------------
# writing records ourselves
# --------------------------------------------------------------------------------------------


def version_event(wall: float = 1.0) -> bytes:
    return event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()


def scalar_event(tag: str, step: int, value: float, wall: float | None = None) -> bytes:
    ev = event_pb2.Event(
        wall_time=1_700_000_000.0 + step if wall is None else wall,
        step=step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]),
    )
    return ev.SerializeToString()


def summary_event(step: int, *values, wall: float | None = None) -> bytes:
    ev = event_pb2.Event(
        wall_time=1_700_000_000.0 + step if wall is None else wall,
        step=step,
        summary=summary_pb2.Summary(value=list(values)),
    )
    return ev.SerializeToString()


def write_file(path: Path, payloads, mode: str = "wb") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        for p in payloads:
            f.write(frame(p))


def event_file(run_dir: Path, name: str = "1") -> Path:
    return run_dir / f"events.out.tfevents.{name}.test"


def png_bytes(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def wav_bytes(frames: int, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.arange(frames, dtype="<i2") * 37).tobytes())
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------

TAGS = ["train/loss", "train/acc", "train/lr", "Val/Acc", "val/loss", "lr", "weird (x)+1.5"]
RUNS = [".", "a", "b/c"]
STEPS = list(range(10))


@pytest.fixture(scope="module")
def tags_logdir(tmp_path_factory) -> Path:
    """Three runs ('.', 'a', 'b/c'), every tag of TAGS at steps 0..9, value = step + tag index."""
    root = tmp_path_factory.mktemp("tags")
    for run in RUNS:
        payloads = [version_event()]
        for s in STEPS:
            payloads += [scalar_event(t, s, s + i / 10) for i, t in enumerate(TAGS)]
        write_file(event_file(root / run), payloads)
    return root


def tags_of(path, **kw) -> set[str]:
    return set(tbscope.read_scalars(path, **kw)["tag"].astype(str))


# --------------------------------------------------------------------------------------------
# filters
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tags, expected",
    [
        ("*loss", {"train/loss", "val/loss"}),  # * crosses /
        ("train*", {"train/loss", "train/acc", "train/lr"}),
        ("*/*", {"train/loss", "train/acc", "train/lr", "Val/Acc", "val/loss"}),
        ("lr", {"lr"}),  # a glob matches the whole name
        ("?al/*", {"Val/Acc", "val/loss"}),
        ("[V]al/*", {"Val/Acc"}),
        ("[!V]al/*", {"val/loss"}),
        ("train/[!l]*", {"train/acc"}),
        ("train.loss", set()),  # '.' is literal in a glob
        ("weird (x)+1.5", {"weird (x)+1.5"}),  # regex metacharacters are literal
        ("weird (x)+1?5", {"weird (x)+1.5"}),
        ("nothing*", set()),
    ],
)
def test_tag_globs(tags_logdir, tags, expected):
    assert tags_of(tags_logdir, tags=tags) == expected


@pytest.mark.parametrize(
    "pattern, expected",
    [
        (re.compile("acc"), {"train/acc"}),  # matched anywhere, like re.search; case-sensitive
        (re.compile("acc", re.IGNORECASE), {"train/acc", "Val/Acc"}),
        (re.compile(r"^val/"), {"val/loss"}),
        (re.compile(r"lr$"), {"lr", "train/lr"}),
        (re.compile(r"\(x\)"), {"weird (x)+1.5"}),
    ],
)
def test_tag_regexes(tags_logdir, pattern, expected):
    assert tags_of(tags_logdir, tags=pattern) == expected


def test_regex_verbose_flag_is_honoured(tags_logdir):
    assert tags_of(tags_logdir, tags=re.compile(r"train / loss  # the training loss", re.VERBOSE)) == {"train/loss"}


def test_lists_mix_globs_and_regexes(tags_logdir):
    assert tags_of(tags_logdir, tags=["lr", re.compile("Acc$")]) == {"lr", "Val/Acc"}
    assert tags_of(tags_logdir, tags=("train/l*", "val/*")) == {"train/loss", "train/lr", "val/loss"}


@pytest.mark.parametrize(
    "runs, expected",
    [
        (None, {".", "a", "b/c"}),
        ("*", {".", "a", "b/c"}),
        (".", {"."}),
        ("b/*", {"b/c"}),
        ("?", {".", "a"}),
        (re.compile("^b"), {"b/c"}),
        (["a", re.compile("c$")], {"a", "b/c"}),
    ],
)
def test_run_filters(tags_logdir, runs, expected):
    lg = tbscope.scan(tags_logdir, runs=runs)
    assert set(lg.runs) == expected
    assert set(lg.scalars().to_pandas()["run"].astype(str)) == expected


def test_filters_combine(tags_logdir):
    df = tbscope.read_scalars(tags_logdir, runs="b/*", tags="*loss", steps=(3, 5))
    assert set(df["run"].astype(str)) == {"b/c"}
    assert set(df["tag"].astype(str)) == {"train/loss", "val/loss"}
    assert sorted(df["step"]) == [3, 3, 4, 4]


@pytest.mark.parametrize("what", ["runs", "tags"])
def test_empty_filter_list_is_an_error(tags_logdir, what):
    with pytest.raises(ValueError, match=rf"{what}=.*empty.*None"):
        tbscope.scan(tags_logdir, **{what: []})


@pytest.mark.parametrize(
    "bad, named",
    [
        ([5], "int"),
        ([None], "NoneType"),
        (("loss", 3.5), "float"),
        pytest.param(5, "int"),
        pytest.param(1.5, "float"),
        pytest.param(b"loss", "bytes"),
        pytest.param(re.compile(b"loss"), "bytes"),
    ],
    ids=["list-int", "list-None", "tuple-float", "int", "float", "bytes", "bytes-pattern"],
)
def test_wrong_filter_types_raise_a_helpful_type_error(tags_logdir, bad, named):
    with pytest.raises(TypeError) as info:
        tbscope.scan(tags_logdir, tags=bad)
    msg = str(info.value)
    assert "tags=" in msg and "glob" in msg and "re.Pattern" in msg
    assert f"got {named}" in msg


def test_unsupported_regex_syntax_is_a_value_error(tags_logdir):
    with pytest.raises(ValueError, match="(?s)tags=.*look-around"):
        tbscope.scan(tags_logdir, tags=re.compile(r"(?<=train/)loss"))


# --------------------------------------------------------------------------------------------
# steps and kinds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "steps, expected",
    [
        ((2, 5), [2, 3, 4]),  # half-open
        ((None, 3), [0, 1, 2]),
        ((7, None), [7, 8, 9]),
        ((None, None), STEPS),
        (None, STEPS),
        (range(2, 5), [2, 3, 4]),
        ((5, 5), []),
        ((100, None), []),
    ],
)
def test_steps_half_open(tags_logdir, steps, expected):
    df = tbscope.read_scalars(tags_logdir, runs="a", tags="lr", steps=steps)
    assert list(df["step"]) == expected


@pytest.mark.parametrize(
    "steps, exc, match",
    [
        (range(0, 10, 2), ValueError, "step 1"),
        ([1, 3], TypeError, r"\(start, stop\)"),
        ((1.5, 3), TypeError, "ints or None"),
        ((1, 2, 3), TypeError, r"\(start, stop\)"),
        ("0:10", TypeError, r"\(start, stop\)"),
    ],
)
def test_bad_steps(tags_logdir, steps, exc, match):
    with pytest.raises(exc, match=match):
        tbscope.scan(tags_logdir, steps=steps)


@pytest.fixture(scope="module")
def mixed_logdir(tmp_path_factory) -> Path:
    """tensorboardX: scalars, histograms, text and an image in one run, steps 0..4."""
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("mixed")
    with SummaryWriter(str(root / "run"), flush_secs=3600) as w:
        for s in range(5):
            w.add_scalar("loss", 1.0 / (s + 1), s, walltime=1000.0 + s)
            w.add_histogram("weights", np.arange(20.0) * (s + 1), s, walltime=1000.0 + s)
            w.add_text("note", f"step {s}", s, walltime=1000.0 + s)
        w.add_image("pic", np.zeros((3, 4, 4), dtype=np.uint8), 0, walltime=1000.0)
    return root


def test_steps_apply_to_every_kind(mixed_logdir):
    lg = tbscope.scan(mixed_logdir, steps=(1, 3))
    for frame_ in (lg.scalars(), lg.histograms(), lg.text()):
        assert sorted(frame_.to_pandas()["step"]) == [1, 2], frame_.name
    assert len(lg.images()) == 0


def test_kinds(mixed_logdir):
    only = tbscope.scan(mixed_logdir, kinds="scalars")
    assert len(only.scalars()) == 5
    assert len(only.histograms()) == len(only.text()) == len(only.images()) == 0
    two = tbscope.scan(mixed_logdir, kinds=["histograms", "text"])
    assert len(two.scalars()) == 0
    assert len(two.histograms()) == len(two.text()) == 5
    assert set(two.series().to_pandas()["kind"]) == {"histograms", "text"}
    everything = tbscope.scan(mixed_logdir)
    assert (len(everything.scalars()), len(everything.histograms()), len(everything.images())) == (5, 5, 1)


def test_empty_kinds_list_is_an_error(mixed_logdir):
    with pytest.raises(ValueError, match="kinds="):
        tbscope.scan(mixed_logdir, kinds=[])


def test_wrong_kinds_type_is_a_helpful_type_error(mixed_logdir):
    with pytest.raises(TypeError, match="kinds="):
        tbscope.scan(mixed_logdir, kinds=5)


# --------------------------------------------------------------------------------------------
# argument errors
# --------------------------------------------------------------------------------------------


def test_missing_path_raises_file_not_found(tmp_path):
    missing = tmp_path / "no-such-logdir"
    with pytest.raises(FileNotFoundError, match="no-such-logdir"):
        tbscope.scan(missing)
    with pytest.raises(FileNotFoundError):
        tbscope.read_scalars(str(missing))


def test_bad_restarts(tags_logdir):
    with pytest.raises(ValueError, match='restarts="sometimes".*"all".*"preempt"'):
        tbscope.scan(tags_logdir, restarts="sometimes")


@pytest.mark.parametrize("kinds", ["scalar", ["scalars", "images2"]])
def test_bad_kinds(tags_logdir, kinds):
    with pytest.raises(ValueError, match="unknown kind.*choose from.*scalars.*histograms"):
        tbscope.scan(tags_logdir, kinds=kinds)


@pytest.mark.parametrize("threads", [0, -1, "2", 1.5])
def test_bad_threads(tags_logdir, threads):
    with pytest.raises(ValueError, match="threads= takes a positive int"):
        tbscope.scan(tags_logdir, threads=threads)


# --------------------------------------------------------------------------------------------
# provenance
# --------------------------------------------------------------------------------------------


def test_provenance_offsets_point_at_records(mixed_logdir):
    lg = tbscope.scan(mixed_logdir, provenance=True)
    checked = 0
    for frame_ in (lg.scalars(), lg.histograms(), lg.text(), lg.images()):
        df = frame_.to_pandas()
        assert {"file", "offset"} <= set(df.columns)
        assert isinstance(df["file"].dtype, pd.CategoricalDtype)
        assert df["offset"].dtype == np.int64
        for rel, offset, step in zip(df["file"].astype(str), df["offset"], df["step"]):
            with open(mixed_logdir / rel, "rb") as f:
                f.seek(offset)
                head = f.read(12)
                (length,) = struct.unpack("<Q", head[:8])
                assert struct.unpack("<I", head[8:])[0] == masked_crc(head[:8]), (rel, offset)
                payload = f.read(length)
                assert struct.unpack("<I", f.read(4))[0] == masked_crc(payload)
            ev = event_pb2.Event.FromString(payload)
            assert ev.step == step
            assert ev.HasField("summary")
            checked += 1
    assert checked == 16


def test_no_provenance_columns_by_default(mixed_logdir):
    assert not {"file", "offset"} & set(tbscope.scan(mixed_logdir).scalars().columns)


# --------------------------------------------------------------------------------------------
# frames and conversions
# --------------------------------------------------------------------------------------------


def test_to_pandas_dtypes(tags_logdir):
    df = tbscope.scan(tags_logdir).scalars().to_pandas()
    assert list(df.columns) == ["run", "tag", "step", "wall_time", "timestamp", "value"]
    assert isinstance(df["run"].dtype, pd.CategoricalDtype)
    assert isinstance(df["tag"].dtype, pd.CategoricalDtype)
    assert df["step"].dtype == np.int64
    assert df["wall_time"].dtype == np.float64
    assert df["value"].dtype == np.float64
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    expected = pd.to_datetime(df["wall_time"], unit="s", utc=True)
    assert (df["timestamp"] - expected).abs().max() < pd.Timedelta(microseconds=1)
    assert len(df) == len(RUNS) * len(TAGS) * len(STEPS)


def test_eager_readers_return_pandas(mixed_logdir):
    for fn in (tbscope.read_scalars, tbscope.read_histograms, tbscope.read_text, tbscope.read_images):
        df = fn(mixed_logdir)
        assert isinstance(df, pd.DataFrame) and len(df) > 0, fn.__name__
        assert isinstance(df["run"].dtype, pd.CategoricalDtype)
    assert "data" in tbscope.read_images(mixed_logdir).columns
    assert "data" not in tbscope.read_images(mixed_logdir, blobs=False).columns
    assert len(tbscope.read_audio(mixed_logdir)) == 0
    assert len(tbscope.read_tensors(mixed_logdir)) == 0


def test_to_polars(tags_logdir):
    pl = pytest.importorskip("polars")
    frame_ = tbscope.scan(tags_logdir).scalars()
    df = frame_.to_polars()
    assert isinstance(df, pl.DataFrame)
    assert df.schema["run"] == pl.Categorical and df.schema["tag"] == pl.Categorical
    assert df.schema["timestamp"] == pl.Datetime("ns", "UTC")
    pdf = frame_.to_pandas()
    assert df["value"].to_list() == pdf["value"].tolist()
    assert df["tag"].cast(pl.String).to_list() == pdf["tag"].astype(str).tolist()
    assert pl.DataFrame(frame_).shape == df.shape  # through __arrow_c_stream__


def test_to_arrow(tags_logdir):
    t = tbscope.scan(tags_logdir).scalars().to_arrow()
    assert isinstance(t, pa.Table)
    assert pa.types.is_dictionary(t.schema.field("run").type)
    assert pa.types.is_dictionary(t.schema.field("tag").type)
    assert t.schema.field("timestamp").type == pa.timestamp("ns", tz="UTC")
    assert t.num_rows == len(RUNS) * len(TAGS) * len(STEPS)


def test_arrow_c_stream_is_fresh_per_call(tags_logdir):
    frame_ = tbscope.scan(tags_logdir).scalars()
    first = pa.RecordBatchReader.from_stream(frame_).read_all()
    second = pa.RecordBatchReader.from_stream(frame_).read_all()
    assert first.num_rows == second.num_rows == len(frame_)
    assert first.equals(second)
    assert pa.table(frame_).equals(first)
    c1, c2 = frame_.__arrow_c_stream__(), frame_.__arrow_c_stream__()
    assert c1 is not c2
    assert pa.schema(frame_).equals(first.schema)  # __arrow_c_schema__


def test_iter_batches_and_to_numpy(tags_logdir):
    frame_ = tbscope.scan(tags_logdir).scalars()
    batches = list(frame_.iter_batches(max_rows=7))
    assert all(isinstance(b, pa.RecordBatch) and 0 < b.num_rows <= 7 for b in batches)
    assert pa.Table.from_batches(batches).equals(frame_.to_arrow())
    values = frame_.to_numpy("value")
    steps = frame_.to_numpy("step")
    assert values.dtype == np.float64 and steps.dtype == np.int64
    np.testing.assert_array_equal(values, frame_.to_pandas()["value"].to_numpy())
    np.testing.assert_array_equal(steps, frame_.to_pandas()["step"].to_numpy())


def test_frame_basics(tags_logdir):
    frame_ = tbscope.scan(tags_logdir, runs="a").scalars()
    assert len(frame_) == frame_.num_rows == len(TAGS) * len(STEPS)
    assert frame_.columns == ["run", "tag", "step", "wall_time", "timestamp", "value"]
    assert "70 rows" in repr(frame_)
    with pytest.raises(TypeError, match="no blobs"):
        frame_.blob(0)


# --------------------------------------------------------------------------------------------
# blobs: images and audio
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blob_logdir(tmp_path_factory):
    """Legacy Summary.Image / Summary.Audio records with bytes we know exactly."""
    root = tmp_path_factory.mktemp("blobs")
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, size=(5 + i, 3 + i, 3), dtype=np.uint8) for i in range(3)]
    pngs = [png_bytes(a) for a in images]
    wavs = [wav_bytes(100 + 50 * i) for i in range(2)]
    payloads = [version_event()]
    for i, (arr, png) in enumerate(zip(images, pngs)):
        img = summary_pb2.Summary.Image(height=arr.shape[0], width=arr.shape[1], colorspace=3, encoded_image_string=png)
        payloads.append(summary_event(i, summary_pb2.Summary.Value(tag="pic", image=img)))
    for i, w in enumerate(wavs):
        au = summary_pb2.Summary.Audio(
            sample_rate=8000.0,
            num_channels=1,
            length_frames=100 + 50 * i,
            encoded_audio_string=w,
            content_type="audio/wav",
        )
        payloads.append(summary_event(i, summary_pb2.Summary.Value(tag="clip", audio=au)))
    write_file(event_file(root / "run"), payloads)
    return root, images, pngs, wavs


def test_blob_bytes_equal_what_was_written(blob_logdir):
    root, images, pngs, wavs = blob_logdir
    lg = tbscope.scan(root)
    im = lg.images()
    assert isinstance(im, tbscope.BlobFrame)
    assert [im.blob(i) for i in range(len(im))] == pngs
    df = im.to_pandas(blobs=True)
    assert list(df["data"]) == pngs
    assert list(df["width"]) == [a.shape[1] for a in images]
    assert list(df["height"]) == [a.shape[0] for a in images]
    assert "data" not in im.to_pandas().columns
    au = lg.audio()
    assert [au.blob(i) for i in range(len(au))] == wavs
    adf = au.to_pandas(blobs=True)
    assert list(adf["data"]) == wavs
    assert list(adf["length_frames"]) == [100, 150]
    assert list(adf["sample_rate"]) == [8000.0, 8000.0]
    assert list(tbscope.read_audio(root)["data"]) == wavs


def test_png_decodes_to_the_pixels_written(tmp_path):
    from PIL import Image
    from tensorboardX import SummaryWriter

    arr = np.random.default_rng(3).integers(0, 256, size=(3, 6, 9), dtype=np.uint8)  # CHW
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.add_image("pic", arr, 0)
    im = tbscope.scan(tmp_path).images()
    assert len(im) == 1
    row = im.to_pandas().iloc[0]
    assert (row["width"], row["height"], row["content_type"]) == (9, 6, "image/png")
    pixels = np.asarray(Image.open(io.BytesIO(im.blob(0))))
    np.testing.assert_array_equal(pixels, arr.transpose(1, 2, 0))


def test_blob_bytes_are_read_lazily(blob_logdir, tmp_path):
    root, _, pngs, _ = blob_logdir
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    im = tbscope.scan(copy).images()
    assert len(im) == 3
    # The scan kept offsets, not bytes: the file is read when a blob is asked for.
    path = next(copy.rglob("*tfevents*"))
    data = path.read_bytes()
    last = im.to_pandas().iloc[2]
    patched = bytearray(data)
    patched[last["blob_offset"] : last["blob_offset"] + 4] = b"LAZY"
    path.write_bytes(bytes(patched))
    assert im.blob(2)[:4] == b"LAZY"
    path.write_bytes(data[: last["blob_offset"]])
    with pytest.raises(OSError, match="shorter"):
        im.blob(2)


# --------------------------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------------------------


def test_tensor_values_keep_dtype_and_shape(tmp_path):
    from tensorboard.util import tensor_util

    md = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="custom"))
    values = {
        "f64": np.arange(6, dtype=np.float64).reshape(2, 3),
        "f32": np.array([[0.5, -1.25]], dtype=np.float32),
        "f16": np.array([1.5, -2.0], dtype=np.float16),
        "i32": np.array([1, -2, 3, 4], dtype=np.int32),
        "i64": np.array([2**40, -(2**40)], dtype=np.int64),
        "u8": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
        "bool": np.array([True, False, True]),
        "str": np.array([b"a", b"bc"]),
    }
    payloads = [version_event()]
    for s in range(2):
        payloads.append(
            summary_event(
                s,
                *[
                    summary_pb2.Summary.Value(
                        tag=k, tensor=tensor_util.make_tensor_proto(v + s if v.dtype.kind in "fiu" else v), metadata=md
                    )
                    for k, v in values.items()
                ],
            )
        )
    write_file(event_file(tmp_path / "run"), payloads)
    tf = tbscope.scan(tmp_path).tensors()
    assert isinstance(tf, tbscope.TensorFrame)
    df = tf.to_pandas()
    assert len(df) == 2 * len(values)
    assert set(df["plugin"].astype(str)) == {"custom"}
    for (tag, step), got, shape in zip(zip(df["tag"].astype(str), df["step"]), df["value"], df["shape"]):
        want = values[tag]
        if want.dtype.kind in "fiu":
            want = want + step
        assert isinstance(got, np.ndarray)
        assert shape == want.shape
        if tag == "str":
            assert got.dtype == object and list(got) == list(want)
        else:
            assert got.dtype == want.dtype, tag
            np.testing.assert_array_equal(got, want)
    assert len(tf.values()) == len(df)
    assert tbscope.read_tensors(tmp_path)["value"].iloc[0].shape == (2, 3)


# --------------------------------------------------------------------------------------------
# hparams, summary, series, run_info
# --------------------------------------------------------------------------------------------


def write_hparams(run_dir: Path, hp: dict, metrics=None) -> None:
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    with SummaryWriter(str(run_dir), flush_secs=3600) as w:
        for s in hparams(hp, {"acc": 0.0}):
            w._get_file_writer().add_summary(s)
        for step, values in enumerate(metrics or []):
            for tag, v in values.items():
                w.add_scalar(tag, v, step, walltime=1000.0 + step)


@pytest.fixture(scope="module")
def hp_logdir(tmp_path_factory) -> Path:
    """Three trials with hparams and metrics in the same run, plus a run without hparams."""
    root = tmp_path_factory.mktemp("hp")
    rng = np.random.default_rng(0)
    for i, (lr, opt, bn) in enumerate([(0.1, "adam", True), (0.01, "sgd", False), (0.001, "adam", True)]):
        metrics = [{"loss": float(v), "acc": float(a)} for v, a in zip(rng.random(8), rng.random(8))]
        write_hparams(root / f"trial-{i}", {"lr": lr, "opt": opt, "bn": bn}, metrics)
    write_file(event_file(root / "plain"), [version_event()] + [scalar_event("loss", s, 10.0 - s) for s in range(4)])
    return root


def test_hparams_table(hp_logdir):
    df = tbscope.scan(hp_logdir).hparams().to_pandas()
    assert list(df["run"]) == ["trial-0", "trial-1", "trial-2"]
    assert {"group_name", "start_time", "end_time", "status"} <= set(df.columns)
    assert df["hparam:lr"].tolist() == [0.1, 0.01, 0.001]
    assert df["hparam:lr"].dtype == np.float64
    assert df["hparam:opt"].tolist() == ["adam", "sgd", "adam"]
    assert df["hparam:bn"].tolist() == [True, False, True]
    assert df["hparam:bn"].dtype == bool


def test_summary_matches_a_pandas_groupby(hp_logdir):
    lg = tbscope.scan(hp_logdir)
    summary = lg.summary()
    assert isinstance(summary, pd.DataFrame)
    assert list(summary["run"]) == ["plain", "trial-0", "trial-1", "trial-2"]
    sc = tbscope.read_scalars(hp_logdir)
    g = sc.groupby(["run", "tag"], observed=True)["value"]
    expected = pd.DataFrame({"last": g.last(), "min": g.min(), "max": g.max()})
    checked = 0
    for (run, tag), row in expected.iterrows():
        got = summary.set_index("run").loc[run]
        for stat in ("last", "min", "max"):
            assert got[f"{tag}:{stat}"] == row[stat], (run, tag, stat)
            checked += 1
    assert checked == 3 * (1 + 2 * 3)
    assert pd.isna(summary.set_index("run").loc["plain", "acc:last"])
    assert summary.set_index("run").loc["trial-1", "hparam:opt"] == "sgd"
    assert summary.set_index("run").loc["trial-2", "hparam:lr"] == 0.001
    assert pd.isna(summary.set_index("run").loc["plain", "hparam:lr"])
    assert summary.set_index("run")["max_step"].to_dict() == {"plain": 3, "trial-0": 7, "trial-1": 7, "trial-2": 7}


def test_summary_last_is_the_last_value_even_if_nan(tmp_path):
    values = [3.0, 2.0, 1.0, float("nan")]
    write_file(
        event_file(tmp_path / "run"), [version_event()] + [scalar_event("loss", s, v) for s, v in enumerate(values)]
    )
    s = tbscope.scan(tmp_path).summary().set_index("run")
    assert (s.loc["run", "loss:min"], s.loc["run", "loss:max"]) == (1.0, 3.0)
    assert np.isnan(s.loc["run", "loss:last"])


@pytest.fixture(scope="module")
def keras_logdir(tmp_path_factory) -> Path:
    """Keras' layout: logs/run-N holds the hparams, logs/run-N/{train,validation} the metrics."""
    root = tmp_path_factory.mktemp("keras")
    for i, lr in enumerate([0.1, 0.01]):
        write_hparams(root / "logs" / f"run-{i}", {"lr": lr, "units": 16 * (i + 1)})
        for j, sub in enumerate(["train", "validation"]):
            payloads = [version_event()] + [
                scalar_event("epoch_loss", s, (i + 1) * (j + 1) * (5 - s)) for s in range(3)
            ]
            write_file(event_file(root / "logs" / f"run-{i}" / sub), payloads)
    # A run below a run with hparams that has hparams of its own keeps them.
    write_hparams(root / "logs" / "run-1" / "retrain", {"lr": 0.5, "units": 99}, [{"epoch_loss": 1.0}])
    return root


def test_summary_inherits_hparams_from_the_session_run(keras_logdir):
    s = tbscope.scan(keras_logdir).summary().set_index("run")
    assert s.loc["logs/run-0/train", "hparam:lr"] == 0.1
    assert s.loc["logs/run-0/validation", "hparam:lr"] == 0.1
    assert s.loc["logs/run-0/validation", "hparam:units"] == 16
    assert s.loc["logs/run-1/train", "hparam:lr"] == 0.01
    assert s.loc["logs/run-1/validation", "epoch_loss:last"] == 4 * 3
    assert s.loc["logs/run-1/validation", "epoch_loss:max"] == 4 * 5
    assert s.loc["logs/run-1/retrain", "hparam:lr"] == 0.5
    assert s.loc["logs/run-1/retrain", "hparam:units"] == 99


def test_summary_keeps_hparams_with_a_tag_filter(keras_logdir):
    s = tbscope.scan(keras_logdir, tags="epoch_*").summary().set_index("run")
    assert s.loc["logs/run-0/train", "hparam:lr"] == 0.1


def test_summary_keeps_hparams_with_a_step_filter(keras_logdir):
    s = tbscope.scan(keras_logdir, steps=(1, None)).summary().set_index("run")
    assert s.loc["logs/run-0/train", "hparam:lr"] == 0.1
    assert s.loc["logs/run-0/train", "epoch_loss:max"] == 4


def test_summary_keeps_inherited_hparams_with_a_run_filter(keras_logdir):
    s = tbscope.scan(keras_logdir, runs="*/validation").summary().set_index("run")
    assert list(s.index) == ["logs/run-0/validation", "logs/run-1/validation"]
    assert s.loc["logs/run-0/validation", "hparam:lr"] == 0.1


def test_series(mixed_logdir):
    df = tbscope.scan(mixed_logdir).series().to_pandas()
    by_tag = df.set_index("tag")
    assert by_tag.loc["loss", "kind"] == "scalars"
    assert by_tag.loc["weights", "kind"] == "histograms"
    assert by_tag.loc["pic", "kind"] == "images"
    assert by_tag.loc["note/text_summary", "kind"] == "text"
    assert by_tag.loc["loss", "points"] == 5
    assert (by_tag.loc["loss", "first_step"], by_tag.loc["loss", "last_step"]) == (0, 4)
    assert set(df["run"]) == {"run"}


def test_run_info(tags_logdir):
    lg = tbscope.scan(tags_logdir)
    assert lg.runs == [".", "a", "b/c"]
    info = lg.run_info().to_pandas().set_index("run")
    assert list(info.index) == [".", "a", "b/c"]
    for run in RUNS:
        path = event_file(tags_logdir / run)
        row = info.loc[run]
        assert row["files"] == 1
        assert row["bytes"] == path.stat().st_size
        assert row["records"] == 1 + len(TAGS) * len(STEPS)
        assert row["scalars"] == len(TAGS) * len(STEPS)
        assert row["max_step"] == 9
        assert row["corrupt_records"] == 0 and row["truncated_bytes"] == 0
        assert row["last_wall_time"] == 1_700_000_009.0
    assert "3 runs" in repr(lg)


def test_single_event_file_is_one_run(tags_logdir):
    lg = tbscope.scan(event_file(tags_logdir / "a"))
    assert lg.runs == ["."]
    assert len(lg.scalars()) == len(TAGS) * len(STEPS)


# --------------------------------------------------------------------------------------------
# reload
# --------------------------------------------------------------------------------------------


def test_reload_reads_only_what_is_new(tmp_path):
    a1 = event_file(tmp_path / "a", "1")
    write_file(a1, [version_event()] + [scalar_event("loss", s, s) for s in range(5)])
    lg = tbscope.scan(tmp_path)
    assert repr(lg).endswith("not read yet>")
    assert list(lg.scalars().to_pandas()["step"]) == [0, 1, 2, 3, 4]

    # Unchanged: nothing is read.
    stats = lg.reload()
    assert isinstance(stats, tbscope.LoadStats)
    assert (stats.files_read, stats.bytes_read, stats.records, stats.rows) == (0, 0, 0, 0)

    # Appended records.
    size = a1.stat().st_size
    write_file(a1, [scalar_event("loss", s, s) for s in range(5, 8)], mode="ab")
    stats = lg.reload()
    assert (stats.files_read, stats.rows, stats.records) == (1, 3, 3)
    assert stats.bytes_read == a1.stat().st_size - size
    assert list(lg.scalars().to_pandas()["step"]) == list(range(8))

    # A new file in a run, and a new run.
    write_file(event_file(tmp_path / "a", "2"), [version_event()] + [scalar_event("loss", s, s) for s in range(8, 10)])
    write_file(event_file(tmp_path / "b", "1"), [version_event()] + [scalar_event("acc", s, s) for s in range(3)])
    stats = lg.reload()
    assert (stats.files_read, stats.rows) == (2, 5)
    assert lg.runs == ["a", "b"]
    df = lg.scalars().to_pandas()
    assert len(df) == 13
    assert not df.duplicated(["run", "tag", "step"]).any()
    assert list(df[df["run"] == "a"]["step"]) == list(range(10))

    stats = lg.reload()
    assert (stats.files_read, stats.bytes_read, stats.rows) == (0, 0, 0)
    assert len(lg.scalars()) == 13
    assert lg.report.ok and len(lg.report) == 0


# --------------------------------------------------------------------------------------------
# restarts
# --------------------------------------------------------------------------------------------


def test_restarts_preempt(tmp_path):
    # A job logs steps 0..9, dies and restarts from a checkpoint at step 5 (a second file).
    write_file(
        event_file(tmp_path / "run", "1"), [version_event()] + [scalar_event("loss", s, float(s)) for s in range(10)]
    )
    write_file(
        event_file(tmp_path / "run", "2"), [version_event()] + [scalar_event("loss", s, 100.0 + s) for s in range(5, 8)]
    )
    every = tbscope.read_scalars(tmp_path)
    assert list(every["step"]) == list(range(10)) + [5, 6, 7]
    pre = tbscope.read_scalars(tmp_path, restarts="preempt")
    assert list(pre["step"]) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert list(pre["value"]) == [0.0, 1.0, 2.0, 3.0, 4.0, 105.0, 106.0, 107.0]
    # The step bound applies after preemption.
    late = tbscope.read_scalars(tmp_path, restarts="preempt", steps=(6, None))
    assert list(late["value"]) == [106.0, 107.0]


# --------------------------------------------------------------------------------------------
# threads, fork, Ctrl-C
# --------------------------------------------------------------------------------------------


def _norm(v):
    """NaN-safe, hashable form of a cell."""
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v


def _rows(frame_) -> list:
    return [tuple(_norm(v) for v in row.values()) for row in frame_.to_arrow().to_pylist()]


def _everything(lg) -> dict:
    kinds = ("scalars", "tensors", "histograms", "images", "audio", "text", "blobs", "hparams", "series", "run_info")
    out = {k: _rows(getattr(lg, k)()) for k in kinds}
    out["runs"] = lg.runs
    out["report"] = lg.report
    return out


def test_threads_do_not_change_results(tbx_logdir):
    one = _everything(tbscope.scan(tbx_logdir, threads=1))
    two = _everything(tbscope.scan(tbx_logdir, threads=2))
    assert one.keys() == two.keys()
    for k in one:
        assert one[k] == two[k], k
    assert len(one["scalars"]) > 50 and len(one["tensors"]) > 0


def test_repeated_scans_give_identical_tables(tbx_logdir):
    first = tbscope.scan(tbx_logdir).tensors().to_arrow()
    for _ in range(6):
        again = tbscope.scan(tbx_logdir).tensors().to_arrow()
        assert again.equals(first)
        assert list(again.column("plugin").chunk(0).dictionary) == list(first.column("plugin").chunk(0).dictionary)


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory) -> Path:
    """150 runs of 200k scalar records each (one real file, symlinked): about 1 s to read in
    full on two threads of the 2-core CI machine (long enough to interrupt)."""
    root = tmp_path_factory.mktemp("big")
    block = b"".join(frame(scalar_event("loss", s, s * 0.5)) for s in range(5000))
    base = root / "base" / "events.out.tfevents.0.base"
    base.parent.mkdir()
    base.write_bytes(block * 40)
    for i in range(150):
        (root / f"r{i:03d}").mkdir()
        os.symlink(base, root / f"r{i:03d}" / "events.out.tfevents.0.x")
    return root


def _count_workers() -> int:
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        n += bool(re.fullmatch(r"tbscope-\d+", name))
    return n


def _max_worker_threads(fn) -> int:
    """Runs ``fn`` while counting tbscope's worker threads ('tbscope-N') in /proc."""
    seen = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            seen[0] = max(seen[0], _count_workers())
            time.sleep(0.001)

    # Workers of an earlier load may still be exiting; wait for them first.
    deadline = time.monotonic() + 5
    while _count_workers() and time.monotonic() < deadline:
        time.sleep(0.005)
    t = threading.Thread(target=sample)
    t.start()
    try:
        fn()
    finally:
        stop.set()
        t.join()
    return seen[0]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_thread_count_from_argument_and_environment(big_logdir, monkeypatch):
    def load(**kw):
        return lambda: tbscope.scan(big_logdir, runs="r00[0-3]", **kw).reload()

    monkeypatch.setenv("TBSCOPE_NUM_THREADS", "3")
    assert _max_worker_threads(load()) == 3
    assert _max_worker_threads(load(threads=2)) == 2  # the argument wins
    monkeypatch.setenv("TBSCOPE_NUM_THREADS", "1")
    assert _max_worker_threads(load()) == 0  # one thread: no pool at all
    monkeypatch.delenv("TBSCOPE_NUM_THREADS")
    default = _max_worker_threads(load())
    monkeypatch.setenv("TBSCOPE_NUM_THREADS", "not a number")  # ignored
    assert _max_worker_threads(load()) == default


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_after_load(tbx_logdir):
    parent = tbscope.scan(tbx_logdir, threads=2)
    want = _everything(parent)
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "fork() of a multi-threaded process"
        pid = os.fork()
    if pid == 0:  # child: a new read, and a reload of the inherited Logdir
        code = 0
        try:
            fresh = _everything(tbscope.scan(tbx_logdir, threads=2))
            again = parent.reload()
            ok = fresh == want and again.bytes_read == 0 and _everything(parent) == want
            os.write(w, b"same" if ok else b"different")
        except BaseException as e:
            os.write(w, repr(e).encode()[:500])
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    answer, status = child_result(pid, r)
    assert answer == b"same"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    # The parent still works after the fork, with its pool.
    assert _everything(tbscope.scan(tbx_logdir, threads=2)) == want


CHILD = """
import sys, time, tbscope
lg = tbscope.scan(sys.argv[1])
print("reading", flush=True)
t = time.monotonic()
lg.reload()
print("finished after", time.monotonic() - t, flush=True)
"""


def test_ctrl_c_interrupts_a_long_read(big_logdir):
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(big_logdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline() == "reading\n"
        time.sleep(0.2)
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        elapsed = time.monotonic() - t
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "finished" not in out, f"the read ended before the signal: {out}"
    assert "KeyboardInterrupt" in err
    assert p.returncode != 0
    assert elapsed < 3, f"took {elapsed:.2f} s to stop"


def test_a_step_filter_does_not_change_a_series_kind(tb_logdir):
    """TF2 writers put a series' metadata (hence its kind) in its first record only: a step
    range that leaves those first records out must still file every value under its kind."""
    full = tbscope.scan(tb_logdir)
    kinds = full.series().to_pandas().set_index(["run", "tag"])["kind"].astype(str).to_dict()
    first_steps = full.series().to_pandas()["first_step"]
    lo = int(first_steps.min()) + 1
    part = tbscope.scan(tb_logdir, steps=(lo, None))
    part_kinds = part.series().to_pandas().set_index(["run", "tag"])["kind"].astype(str).to_dict()
    assert part_kinds and all(kinds[k] == v for k, v in part_kinds.items()), part_kinds
    checked = 0
    for name in ("scalars", "histograms", "text", "tensors"):
        whole = getattr(full, name)().to_pandas()
        cut = getattr(part, name)().to_pandas()
        want = whole[whole["step"] >= lo]
        key = ["run", "tag", "step", "wall_time"]
        assert sorted(map(tuple, cut[key].astype(str).values)) == sorted(map(tuple, want[key].astype(str).values)), name
        checked += len(want)
    assert checked > 0
