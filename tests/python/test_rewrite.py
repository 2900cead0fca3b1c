"""``tbscope.rewrite()`` / ``tbscope rewrite``: log surgery, checked from the outside.

Inputs are written by tensorboardX and by TensorBoard's own EventFileWriter (the shared
fixtures, plus small logdirs made here with TensorBoard's protos for multi-value events,
metadata carried only by a tag's first value, restarts and per-rank files). Outputs are read
back with TensorBoard's EventAccumulators (``oracle.py``), TensorBoard's raw event loader and
``tbscope.scan``: what a rewrite keeps must read the same as in the input, value for value.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

tbscope = pytest.importorskip("tbscope")

import oracle  # noqa: E402
from tbscope._cli.main import main  # noqa: E402
from tbscope._reader import KINDS  # noqa: E402

# Where a row's bytes sit in its file: different after a rewrite by design.
LOCATION = ("blob_file", "blob_offset", "file", "offset")
ORACLE_KINDS = ("scalars", "tensors", "histograms", "images", "audio", "text", "blobs")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _norm(v):
    """A cell as something == compares exactly: floats by their bits (NaN == NaN, -0.0 != 0.0),
    arrays by dtype, shape and bytes."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (float, np.floating)):
        return ("f", struct.pack("<d", float(v)))
    if isinstance(v, np.ndarray):
        if v.dtype == object:  # strings: by value, not by their pointers
            return ("o", v.shape, tuple(_norm(x) for x in v.ravel().tolist()))
        return ("a", str(v.dtype), v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (memoryview, bytearray)):
        return bytes(v)
    return v


def _canon(col: pa.ChunkedArray) -> pa.Array:
    """A column as something ``equals`` compares exactly: dictionaries decoded, floats (and
    lists of floats) as their bits, so NaN equals NaN and -0.0 differs from 0.0."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    a = col.combine_chunks()
    if pa.types.is_floating(a.type):
        return a.view({16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[a.type.bit_width])
    if pa.types.is_large_list(a.type) and pa.types.is_floating(a.type.value_type):
        return pa.LargeListArray.from_arrays(a.offsets, _canon(pa.chunked_array([a.values])), mask=a.is_null())
    return a


def tables(path, **scan_kwargs) -> dict[str, pa.Table]:
    """Every kind's table from tbscope.scan, without byte locations, in canonical form."""
    lg = tbscope.scan(path, **scan_kwargs)
    out = {}
    for kind in KINDS:
        t = lg._frame(kind).to_arrow()
        names = [c for c in t.column_names if c not in LOCATION]
        out[kind] = pa.table([_canon(t.column(c)) for c in names], names=names)
    return out


def drop_rows(tabs: dict[str, pa.Table], *, tags=(), steps=None) -> dict[str, pa.Table]:
    """Expected tables: rows of these tags, or with steps in [lo, hi), removed."""
    out = {}
    for kind, t in tabs.items():
        keep = pc.invert(pc.is_in(t["tag"], value_set=pa.array(sorted(tags), pa.string())))
        if steps is not None:
            lo, hi = steps
            inside = pc.and_(
                pc.greater_equal(t["step"], lo if lo is not None else -(2**63)),
                pc.less(t["step"], hi if hi is not None else 2**63 - 1),
            )
            keep = pc.and_(keep, pc.invert(inside))
        out[kind] = t.filter(keep)
    return out


def oracle_rows(df: pd.DataFrame) -> list[tuple]:
    """An oracle table per (run, tag) in arrival order, cells normalised: a tag's first
    arrival may move when its first values are dropped, its own order may not."""
    df = df.sort_values(["run", "tag"], kind="stable").reset_index(drop=True)
    return [tuple(_norm(v) for v in row) for row in df.itertuples(index=False)]


def oracle_tables(path) -> dict[str, list[tuple]]:
    o = oracle.load(path, cache=False)
    return {k: oracle_rows(getattr(o, k)()) for k in ORACLE_KINDS}


def fingerprint(root: Path) -> dict[str, tuple]:
    """Every file under ``root``: content hash, size and modification time."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def event_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*tfevents*"))


def raw_events(path: Path) -> list:
    """Every Event of one file, or of every event file under a directory in name order,
    through TensorBoard's own loader."""
    from tensorboard.backend.event_processing import event_file_loader

    files = [path / f for f in event_files(path)] if path.is_dir() else [path]
    return [e for f in files for e in event_file_loader.LegacyEventFileLoader(str(f)).Load()]


# --------------------------------------------------------------------------------------------
# logdirs made here, with TensorBoard's writer and protos
# --------------------------------------------------------------------------------------------


def _write_surgery_logdir(root: Path) -> None:
    """``multi``: events holding several values of several kinds; ``meta``: TF2 tensors with
    metadata only on the first value (plus a description); ``restart``: two files, the second
    going back in steps; ``ranks``: two writers' files in one run."""
    from fixtures import BASE_WALL, _png, _TBWriter
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_md
    from tensorboard.plugins.text import metadata as text_md
    from tensorboard.util import tensor_util

    def wall(i: float) -> float:
        return BASE_WALL + 0.5 * i

    V = summary_pb2.Summary.Value
    smd = scalar_md.create_summary_metadata(display_name="Loss", description="the *loss*")
    tmd = text_md.create_summary_metadata(display_name="", description="notes")
    w = _TBWriter(root / "multi")
    for s in range(6):
        w.values(
            s,
            wall(s),
            V(tag="loss", tensor=tensor_util.make_tensor_proto(np.float32(1 / (s + 1))), metadata=smd),
            V(tag="lr", simple_value=0.1 * s),
            V(
                tag="img",
                image=summary_pb2.Summary.Image(
                    height=2, width=3, colorspace=3, encoded_image_string=_png(2, 3, seed=s)
                ),
            ),
            V(tag="note", tensor=tensor_util.make_tensor_proto([f"step {s}", "b"]), metadata=tmd),
            V(tag="lr", simple_value=-1.0 * s),  # the same tag twice in one event
        )
    w.close()

    w = _TBWriter(root / "meta")
    for s in range(5):
        w.value(s, wall(s), "m", tensor_util.make_tensor_proto(np.float32(s * 1.5)), smd if s == 0 else None)
        w.value(s, wall(s), "t", tensor_util.make_tensor_proto(f"text {s}"), tmd if s == 0 else None)
    w.close()

    from fixtures import _next_second  # files sort by their creation second

    w = _TBWriter(root / "restart", ".0")
    for s in range(10):
        w.values(
            s,
            wall(s),
            V(tag="acc", simple_value=s / 10),
            V(tag="x", tensor=tensor_util.make_tensor_proto(np.float64(s)), metadata=smd),
        )
    w.close()
    _next_second()
    w = _TBWriter(root / "restart", ".1")
    for s in range(5, 12):
        w.values(
            s,
            wall(100 + s),
            V(tag="acc", simple_value=10 + s / 10),
            V(tag="x", tensor=tensor_util.make_tensor_proto(np.float64(100 + s)), metadata=smd),
        )
    w.close()

    for rank in range(2):
        w = _TBWriter(root / "ranks", f".rank{rank}")
        for s in range(4):
            w.value(s, wall(s + rank / 10), f"rank{rank}/loss", simple_value=float(s + rank))
            w.value(s, wall(s + rank / 10), "loss", simple_value=float(10 * rank + s))
        w.close()


@pytest.fixture(scope="module")
def surgery(tmp_path_factory) -> Path:
    pytest.importorskip("tensorboard")
    root = tmp_path_factory.mktemp("surgery")
    _write_surgery_logdir(root)
    return root


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


# --------------------------------------------------------------------------------------------
# nothing dropped: the same data, compacted
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tbx", "tb", "wild"])
def test_a_plain_rewrite_reads_the_same_in_tensorboard_and_tbscope(request, name, out):
    src = request.getfixturevalue(f"{name}_logdir")
    before = fingerprint(src)
    stats = tbscope.rewrite(src, out)
    assert fingerprint(src) == before, "the input changed"
    assert stats.verified and stats.output == str(out)
    assert tables(out) == tables(src)
    if name != "wild":  # TensorBoard's loaders take a minute on the wild files
        assert oracle_tables(out) == oracle_tables(src)
    # One file per run, nothing re-encoded, every record kept: each run's file is its input
    # files, concatenated in name order, byte for byte.
    runs = {os.path.dirname(f) for f in event_files(out)}
    assert len(event_files(out)) == len(runs) == stats.runs == len(stats.files_out)
    assert stats.records_in == stats.records_out and stats.records_rewritten == 0
    for f in stats.files_out:
        run = os.path.dirname(f)
        inputs = [g for g in event_files(src) if os.path.dirname(g) == run]
        assert (out / f).read_bytes() == b"".join((src / g).read_bytes() for g in inputs), f
    assert stats.bytes_out == sum((out / f).stat().st_size for f in event_files(out))
    assert all(".tbscope-rewrite." in f for f in stats.files_out)
    # No staging directory left next to the output.
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


def test_merging_keeps_tensorboards_read_order(tb_logdir, out):
    """Files of a run are concatenated in name order: the bytes are exactly the input's."""
    tbscope.rewrite(tb_logdir, out)
    src = tb_logdir / "scalars"
    merged = event_files(out / "scalars")
    assert len(merged) == 1 and len(event_files(src)) == 2
    want = b"".join((src / f).read_bytes() for f in event_files(src))
    assert (out / "scalars" / merged[0]).read_bytes() == want


def test_no_merge_keeps_one_file_per_input_file(tbx_logdir, out):
    stats = tbscope.rewrite(tbx_logdir, out, merge=False, drop_tags="dup")
    assert event_files(out) == event_files(tbx_logdir)
    assert sorted(stats.files_out) == event_files(out)
    assert tables(out) == drop_rows(tables(tbx_logdir), tags={"dup"})


# --------------------------------------------------------------------------------------------
# dropping tags and steps
# --------------------------------------------------------------------------------------------


def test_drop_tags_and_keep_tags(tbx_logdir, tmp_path):
    dropped = tmp_path / "dropped"
    stats = tbscope.rewrite(tbx_logdir, dropped, drop_tags=["loss/*", "img/*", "hist/[0-9]"])
    want = oracle_tables(tbx_logdir)
    got = oracle_tables(dropped)
    gone = {"loss/odd", "loss/train", "img/chw_u8", "img/hwc_float", "img/gray", "img/hw", "img/rgba"} | {
        f"hist/{k}" for k in range(5)
    }
    for kind in ORACLE_KINDS:
        assert got[kind] == [r for r in want[kind] if r[1] not in gone], kind
    # Every dropped value was one row (legacy scalars, histograms and images).
    rows = tables(tbx_logdir)
    gone_rows = sum(
        pc.sum(pc.is_in(rows[k]["tag"], value_set=pa.array(sorted(gone)))).as_py()
        for k in ("scalars", "histograms", "images")
    )
    assert stats.values_dropped == gone_rows > 0
    kept = tmp_path / "kept"
    tbscope.rewrite(tbx_logdir, kept, tags="hist/*")
    series = tbscope.scan(kept).series().to_pandas()
    assert series["tag"].astype(str).str.startswith("hist/").all() and len(series) == 8
    assert oracle_tables(kept)["histograms"] == [r for r in want["histograms"] if r[1].startswith("hist/")]


def test_multi_value_events_keep_their_other_values_byte_for_byte(surgery, out):
    stats = tbscope.rewrite(surgery, out, runs="multi", drop_tags=["img", "note"])
    src_summ = [e for e in raw_events(surgery / "multi") if e.HasField("summary")]
    out_summ = [e for e in raw_events(out / "multi") if e.HasField("summary")]
    assert len(src_summ) == len(out_summ) == 6
    for a, b in zip(src_summ, out_summ):
        assert (a.step, a.wall_time) == (b.step, b.wall_time)
        kept = [v for v in a.summary.value if v.tag not in ("img", "note")]
        # Each kept value is the input's, serialised identically (raw bytes copied).
        assert [v.SerializeToString() for v in b.summary.value] == [v.SerializeToString() for v in kept]
        assert [v.tag for v in b.summary.value] == ["loss", "lr", "lr"]
    assert stats.records_rewritten == 6 and stats.values_dropped == 12
    o_in, o_out = oracle.load(surgery / "multi", cache=False), oracle.load(out / "multi", cache=False)
    assert oracle_rows(o_out.scalars()) == oracle_rows(o_in.scalars())
    assert o_out.runs[0].metadata("loss") == o_in.runs[0].metadata("loss")
    assert oracle_rows(o_out.images()) == [] and oracle_rows(o_out.text()) == []


def test_drop_steps_drops_whole_records_but_not_session_logs(tb_logdir, out):
    stats = tbscope.rewrite(tb_logdir, out, drop_steps=(1, 3))
    assert tables(out) == drop_rows(tables(tb_logdir), steps=(1, 3))
    want = oracle_tables(tb_logdir)
    got = oracle_tables(out)
    for kind in ORACLE_KINDS:
        assert got[kind] == [r for r in want[kind] if not 1 <= r[2] < 3], kind

    # Session logs (restarts, checkpoints) are not points: every one is still there.
    def sessions(root):
        return [(e.step, e.session_log.status) for e in raw_events(root / "events") if e.HasField("session_log")]

    assert sessions(out) == sessions(tb_logdir) and any(1 <= s < 3 for s, _ in sessions(out))
    assert stats.records_dropped > 0


def test_first_metadata_moves_to_the_first_kept_value(surgery, out):
    """TF2-style series carry their metadata on the first value only: dropping that value must
    not turn the output's series into plain tensors or lose its description."""
    stats = tbscope.rewrite(surgery, out, runs="meta", drop_steps=(None, 2))
    assert stats.metadata_moved == 2
    o_in, o_out = oracle.load(surgery / "meta", cache=False), oracle.load(out / "meta", cache=False)
    for tag in ("m", "t"):
        md = o_out.runs[0].metadata(tag)
        assert md is not None and md == o_in.runs[0].metadata(tag), tag
    assert md.summary_description == "notes"
    assert oracle_rows(o_out.scalars()) == [r for r in oracle_rows(o_in.scalars()) if r[2] >= 2]
    assert oracle_rows(o_out.text()) == [r for r in oracle_rows(o_in.text()) if r[2] >= 2]
    ser = tbscope.scan(out).series().to_pandas().set_index("tag")
    assert ser.loc["m", "kind"] == "scalars" and ser.loc["m", "display_name"] == "Loss"
    assert ser.loc["t", "kind"] == "text"
    # Only the first kept value received it; the others are as they were.
    values = [v for e in raw_events(out / "meta") if e.HasField("summary") for v in e.summary.value]
    assert [v.HasField("metadata") for v in values] == [True, True] + [False] * 4


def test_tf1_style_metadata_survives_in_the_tb_fixture(tb_logdir, out):
    tbscope.rewrite(tb_logdir, out, runs="scalars", drop_steps=(0, 1))
    ser = tbscope.scan(out).series().to_pandas().set_index("tag")
    assert ser.loc["tf1_style", "kind"] == "scalars"
    o_out = oracle.load(out / "scalars", cache=False)
    assert oracle.kind_of(o_out.runs[0].metadata("tf1_style")) == "scalars"


def test_graph_records_are_tags_of_their_own(tb_logdir, out):
    tbscope.rewrite(tb_logdir, out, runs="events", drop_tags=["__run_graph__"])
    evs = raw_events(out / "events")
    assert not any(e.HasField("graph_def") for e in evs)
    assert any(e.HasField("meta_graph_def") for e in evs) and any(e.HasField("tagged_run_metadata") for e in evs)
    blobs = oracle_tables(out)["blobs"]
    assert blobs and all(r[1] != "__run_graph__" for r in blobs)


# --------------------------------------------------------------------------------------------
# restarts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tbx", "tb", "surgery"])
def test_preempt_gives_exactly_tensorboards_preempted_view(request, name, out):
    src = request.getfixturevalue(name if name == "surgery" else f"{name}_logdir")
    stats = tbscope.rewrite(src, out, restarts="preempt")
    assert stats.values_dropped > 0
    assert tables(out) == tables(src, restarts="preempt")
    # Kept steps only increase, so preempting the output again changes nothing.
    assert tables(out, restarts="preempt") == tables(out)
    # TensorBoard's accumulators on the output see what RustBoard's rule keeps of the input.
    o_in, o_out = oracle.load(src, cache=False), oracle.load(out, cache=False)
    for kind in ORACLE_KINDS:
        want = oracle_rows(oracle.preempt(getattr(o_in, kind)()))
        assert oracle_rows(getattr(o_out, kind)()) == want, kind


def test_preempt_trims_a_run_that_went_back_in_steps(surgery, out):
    tbscope.rewrite(surgery, out, runs="restart", restarts="preempt")
    got = tbscope.read_scalars(out)
    for tag, base in (("acc", 10.0), ("x", 100.0)):
        s = got[got["tag"] == tag]
        assert s["step"].tolist() == list(range(12))
        # Steps 5..9 come from the restart (the second file), 0..4 from the first.
        assert s["value"].tolist()[5:] == pytest.approx(
            [base + (st / 10 if tag == "acc" else st) for st in range(5, 12)]
        )
    assert len(event_files(out)) == 1


def test_preempt_then_drop_steps(tbx_logdir, out):
    tbscope.rewrite(tbx_logdir, out, restarts="preempt", drop_steps=(3, None))
    assert tables(out) == drop_rows(tables(tbx_logdir, restarts="preempt"), steps=(3, None))


# --------------------------------------------------------------------------------------------
# per-rank files
# --------------------------------------------------------------------------------------------


def test_per_rank_files_become_one(surgery, out):
    assert len(event_files(surgery / "ranks")) == 2
    stats = tbscope.rewrite(surgery, out, runs="ranks")
    assert event_files(out) == [f"ranks/{stats.files_out[0].split('/')[-1]}"] and stats.files_in == 2
    o_in, o_out = oracle.load(surgery / "ranks", cache=False), oracle.load(out / "ranks", cache=False)
    assert oracle_rows(o_out.scalars()) == oracle_rows(o_in.scalars())
    shared = tbscope.read_scalars(out, tags="loss")
    assert shared["value"].tolist() == [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0]


# --------------------------------------------------------------------------------------------
# damaged input
# --------------------------------------------------------------------------------------------


def test_corrupt_records_and_truncated_tails_are_left_out_and_reported(tbx_logdir, tmp_path, out):
    src = tmp_path / "damaged"
    shutil.copytree(tbx_logdir, src)
    root_files = sorted(src.glob("*tfevents*"))
    victim = root_files[0]
    data = bytearray(victim.read_bytes())
    flip = len(data) // 2
    data[flip] ^= 0xFF
    victim.write_bytes(bytes(data))
    tail_file = sorted((src / "train").glob("*tfevents*"))[0]
    whole = tail_file.read_bytes()
    with open(tail_file, "ab") as f:
        f.write(whole[:30])  # a record header and part of a payload, as a killed writer leaves
    scanned = tbscope.scan(src)
    lost = [p for p in scanned.report.problems if p.severity in ("corrupt", "truncated")]
    assert {p.severity for p in lost} == {"corrupt", "truncated"}

    before = fingerprint(src)
    stats = tbscope.rewrite(src, out)
    assert fingerprint(src) == before
    assert [(p.file, p.severity, p.offset, p.length) for p in stats.report.problems] == [
        (p.file, p.severity, p.offset, p.length) for p in lost
    ]
    assert not stats.report.ok and stats.bytes_skipped == sum(p.length for p in lost)
    # The output holds every intact record and nothing else: it reads cleanly.
    assert tables(out) == tables(src)
    assert len(tbscope.scan(out).report) == 0
    # TensorBoard gives up on a file at its first bad record; on the output it reads it all.
    tb_in = oracle.load(src, cache=False).scalars()
    tb_out = oracle.load(out, cache=False).scalars()
    assert len(tb_out) == len(scanned.scalars()) > len(tb_in)


# --------------------------------------------------------------------------------------------
# safety: the input is never touched, the output appears whole or not at all
# --------------------------------------------------------------------------------------------


def test_unsafe_outputs_are_refused(tbx_logdir, tmp_path):
    before = fingerprint(tbx_logdir)
    for bad in (tbx_logdir, tbx_logdir / "train", tbx_logdir / "new" / "deeper", tbx_logdir.parent):
        with pytest.raises(ValueError, match="input"):
            tbscope.rewrite(tbx_logdir, bad, force=True)
    assert fingerprint(tbx_logdir) == before
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="force=True"):
        tbscope.rewrite(tbx_logdir, taken)
    assert (taken / "notes.txt").read_text() == "mine"
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        tbscope.rewrite(tbx_logdir, a_file, force=True)
    # force replaces a logdir (an earlier output), never a directory holding other files.
    with pytest.raises(ValueError, match="notes.txt"):
        tbscope.rewrite(tbx_logdir, taken, force=True)
    assert (taken / "notes.txt").read_text() == "mine"
    (taken / "notes.txt").unlink()
    tbscope.rewrite(tbx_logdir, taken, tags="dup")
    stats = tbscope.rewrite(tbx_logdir, taken, force=True, drop_tags="dup")
    assert event_files(taken) == sorted(stats.files_out)
    assert "dup" not in set(tbscope.read_scalars(taken)["tag"].astype(str))
    empty = tmp_path / "empty"
    empty.mkdir()
    tbscope.rewrite(tbx_logdir, empty)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "empty", "taken"]
    with pytest.raises(ValueError, match="every step"):
        tbscope.rewrite(tbx_logdir, tmp_path / "x", drop_steps=(None, None))
    with pytest.raises(ValueError, match="restarts"):
        tbscope.rewrite(tbx_logdir, tmp_path / "x", restarts="newest")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        tbscope.rewrite(tmp_path / "missing", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_single_event_file_as_input(tbx_logdir, out):
    one = sorted((tbx_logdir / "train").glob("*tfevents*"))[0]
    stats = tbscope.rewrite(one, out, drop_tags="pr*")
    assert stats.runs == 1 and len(event_files(out)) == 1 and event_files(out)[0] == stats.files_out[0]
    assert tables(out) == drop_rows(tables(one), tags={"pr", "pr_raw"})


def test_a_mismatch_leaves_the_output_staged_and_the_name_free(tbx_logdir, tmp_path):
    """The verification step on a staged output that was changed after it was written: the
    rewrite refuses to publish it."""
    from tbscope import _core
    from tbscope._rewrite import RewriteError, _verify_and_commit

    dst = tmp_path / "out"
    native = _core.rewrite(str(tbx_logdir), str(dst), commit=False)
    staging = Path(native["staging"])
    assert staging.parent == tmp_path and staging.name.startswith(".out.") and not dst.exists()
    # Cut the last record of one staged file off.
    victim = staging / sorted(native["files_out"])[0]
    recs = raw_events(victim)
    assert len(recs) > 2
    data = victim.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    victim.write_bytes(data[: 16 + length])  # only the first record
    kwargs = dict(force=False, runs=None, tags=None, drop_pattern=None, drop_steps=None, restarts="all", threads=None)
    with pytest.raises(RewriteError, match="rows expected") as err:
        _verify_and_commit(tbx_logdir, dst, str(staging), **kwargs)
    assert err.value.staging == str(staging) and staging.is_dir() and not dst.exists()
    # The untampered output verifies and is published.
    native = _core.rewrite(str(tbx_logdir), str(dst), commit=False)
    _verify_and_commit(tbx_logdir, dst, native["staging"], **kwargs)
    assert dst.is_dir() and not Path(native["staging"]).exists()


def test_a_killed_rewrite_leaves_nothing_under_the_name(wild_logdir, tmp_path):
    """SIGKILL while the rewrite runs: the output name is either absent or complete."""
    dst = tmp_path / "out"
    code = f"import tbscope; tbscope.rewrite({str(wild_logdir)!r}, {str(dst)!r}, restarts='preempt')"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".out.") for p in tmp_path.iterdir()) and not dst.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the rewrite never started"
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    if dst.exists():  # it had already finished: then it must be whole
        assert tables(dst) == tables(wild_logdir, restarts="preempt")
    else:
        staged = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
        assert staged, "neither the output nor its staging directory exists"


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="tbscope")


def test_cli_rewrite(tbx_logdir, tmp_path):
    out = tmp_path / "out"
    r = _cli(
        "rewrite", str(tbx_logdir), "-o", str(out), "--restarts", "preempt", "--drop-tags", "loss/*", "--format", "json"
    )
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)[0]
    assert row["output"] == str(out) and row["verified"] is True
    assert row["files_out"] == len(event_files(out)) and row["records_out"] < row["records_in"]
    want = tables(tbx_logdir, restarts="preempt")
    assert tables(out) == drop_rows(want, tags={"loss/train", "loss/odd"})
    # An occupied output is a usage error that says how to go on.
    r = _cli("rewrite", str(tbx_logdir), "-o", str(out))
    assert r.exit_code == 2 and "--force" in r.output and len(r.output.strip().splitlines()) == 1
    r = _cli("rewrite", str(tbx_logdir), "-o", str(tbx_logdir / "inside"))
    assert r.exit_code == 2 and "inside the input" in r.output
    r = _cli("rewrite", str(tbx_logdir), "-o", str(tmp_path / "o2"), "--drop-steps", ":")
    assert r.exit_code == 2 and "every step" in r.output
    r = _cli(
        "rewrite",
        str(tbx_logdir),
        "-o",
        str(out),
        "--force",
        "--no-merge",
        "--runs",
        "train",
        "--tags",
        "img/*",
        "--drop-steps",
        "1:",
        "--format",
        "csv",
    )
    assert r.exit_code == 0, r.output
    assert event_files(out) == [f for f in event_files(tbx_logdir) if f.startswith("train/") and f.count("/") == 1]
    got = tbscope.read_images(out)
    assert (
        set(got["tag"].astype(str)) == {"img/chw_u8", "img/hwc_float", "img/gray", "img/hw", "img/rgba"}
        and (got["step"] < 1).all()
    )


def test_cli_reports_damage_as_warnings(tbx_logdir, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(tbx_logdir / "eval", src)
    f = sorted(src.rglob("*tfevents*"))[0]
    with open(f, "ab") as fh:
        fh.write(b"\x00" * 7)
    r = _cli("rewrite", str(src), "-o", str(tmp_path / "out"), "--format", "csv")
    assert r.exit_code == 0, r.output
    assert "truncated" in r.stderr and "not copied" in r.stderr
    df = pd.read_csv(__import__("io").StringIO(r.stdout))
    assert df.loc[0, "bytes_skipped"] == 7 and not math.isnan(df.loc[0, "seconds"])
