"""Damaged logdirs: truncated tails, corrupt records, odd files, and how they are reported.

Every case starts from a valid event file written by TensorBoard's own ``EventFileWriter``
(20 scalar records, steps 0..19, after the file_version record) and damages a copy of it. The
contract under test:

* a record running past the end of the file is a *truncated tail*: not data loss, resumed by
  ``reload()``;
* bad length CRC, bad data CRC, a length above the cap and an undecodable payload are
  *corrupt*: skipped, reported with the file and byte range, and reading resumes at the next
  offset where both CRCs hold;
* every intact record is still returned;
* ``strict=True`` raises ``CorruptRecordError`` instead.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tbscope
from tfrecord_util import child_result, frame, masked_crc

crc32c = pytest.importorskip("crc32c")
event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")

STEPS = list(range(20))
NAME = "events.out.tfevents.1700000000.test"


def header(length: int) -> bytes:
    """A record header (length and valid length CRC) without its payload."""
    head = struct.pack("<Q", length)
    return head + struct.pack("<I", masked_crc(head))


def scalar_event(step: int, value: float, wall: float | None = None, tag: str = "loss") -> bytes:
    return event_pb2.Event(
        wall_time=1_700_000_000.0 + step if wall is None else wall,
        step=step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]),
    ).SerializeToString()


def spans(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every record of a valid file."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack("<Q", data[pos : pos + 8])
        out.append((pos, 16 + n))
        pos += 16 + n
    assert pos == len(data)
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> bytes:
    """A valid event file from TensorBoard's writer: file_version, then steps 0..19 of 'loss'."""
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    d = tmp_path_factory.mktemp("base")
    w = EventFileWriter(str(d))
    for s in STEPS:
        w.add_event(event_pb2.Event.FromString(scalar_event(s, s * 0.5)))
    w.close()
    (path,) = d.glob("*tfevents*")
    data = path.read_bytes()
    assert len(spans(data)) == 1 + len(STEPS)
    return data


def put(root: Path, data: bytes, run: str = "run", name: str = NAME) -> Path:
    path = root / run / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def steps(lg) -> list[int]:
    return [int(s) for s in lg.scalars().to_pandas()["step"]]


def problems(lg, severity: str | None = None) -> list[tuple[str, int, int]]:
    return [(p.severity, p.offset, p.length) for p in lg.report.problems if severity in (None, p.severity)]


def assert_strict_raises(root: Path, *where: str, **kw) -> None:
    with pytest.raises(tbscope.CorruptRecordError) as info:
        tbscope.scan(root, strict=True, **kw).scalars()
    for w in where:
        assert w in str(info.value)
    with pytest.raises(tbscope.CorruptRecordError):
        tbscope.read_scalars(root, strict=True, **kw)


# --------------------------------------------------------------------------------------------
# intact and truncated files
# --------------------------------------------------------------------------------------------


def test_intact_file(base, tmp_path):
    put(tmp_path, base)
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert lg.report.ok and len(lg.report) == 0
    assert str(lg.report) == "no problems"
    tbscope.scan(tmp_path, strict=True).scalars()


@pytest.mark.parametrize(
    "into", [1, 11, 12, 30, -1], ids=["in-length", "in-length-crc", "after-header", "in-payload", "no-data-crc"]
)
def test_truncated_tail_is_kept_for_later(base, tmp_path, into):
    recs = spans(base)
    k = 8  # record index; record 0 is file_version, so steps 0..6 are complete before it
    off, span = recs[k]
    cut = off + (into if into > 0 else span + into)
    path = put(tmp_path, base[:cut])
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS[: k - 1]
    assert problems(lg) == [("truncated", off, cut - off)]
    (p,) = lg.report.problems
    assert p.file == f"run/{NAME}" and p.run == "run"
    assert "ends inside a record" in p.reason
    assert lg.report.ok  # a file still being written is not data loss
    assert lg.run_info().to_pandas()["truncated_bytes"].tolist() == [cut - off]
    # strict=True reads every file as finished: the cut record is then a stopped tail (one
    # record lost), which it refuses.
    with pytest.raises(tbscope.CorruptRecordError, match="stopped tail"):
        tbscope.scan(tmp_path, strict=True).scalars()

    # The writer finishes the record and writes more: reload() picks up exactly the rest.
    with open(path, "ab") as f:
        f.write(base[cut:])
    stats = lg.reload()
    assert stats.bytes_read == len(base) - off
    assert stats.rows == len(STEPS) - (k - 1)
    assert steps(lg) == STEPS
    assert len(lg.report) == 0
    assert lg.run_info().to_pandas()["truncated_bytes"].tolist() == [0]


# --------------------------------------------------------------------------------------------
# torn records: pending while the file may be written, then corruption or a stopped tail
# --------------------------------------------------------------------------------------------


def torn(base: bytes) -> tuple[bytes, int, int]:
    """``base`` with the first 60 bytes of a big record before record 8: (bytes, where, 60)."""
    at = spans(base)[8][0]
    big = frame(scalar_event(100, 1.0, tag="x" * 5000))
    return base[:at] + big[:60] + base[at:], at, 60


def test_torn_record_with_whole_records_after_it(base, tmp_path):
    data, at, n = torn(base)
    put(tmp_path, data)
    # Just written, the newest file of its run: it may still be written, so everything from
    # the torn header on is a pending tail (it may be one record whose payload embeds others).
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS[:7]
    assert problems(lg) == [("truncated", at, len(data) - at)]
    assert lg.report.ok
    # Read as finished: the torn bytes are lost data, every whole record after them is read.
    fin = tbscope.scan(tmp_path, tail_timeout=0)
    assert steps(fin) == STEPS
    assert problems(fin) == [("corrupt", at, n)]
    assert fin.report.problems[0].reason.startswith("torn record")
    assert not fin.report.ok
    assert_strict_raises(tmp_path, "torn record")


def test_a_newer_file_makes_a_pending_tail_final(base, tmp_path):
    data, at, n = torn(base)
    put(tmp_path, data)
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS[:7]
    # The writer restarted into a new file: the old one will not be written again.
    put(tmp_path, base, name="events.out.tfevents.4000000000.test")
    lg.reload()
    assert steps(lg) == STEPS + STEPS
    assert problems(lg) == [("corrupt", at, n)]


def test_stopped_tail_is_a_warning(base, tmp_path):
    last = spans(base)[-1][0]
    put(tmp_path, base[:-5])
    lg = tbscope.scan(tmp_path, tail_timeout=0)
    assert steps(lg) == STEPS[:-1]
    assert problems(lg) == [("warning", last, len(base) - 5 - last)]
    assert lg.report.problems[0].reason.startswith("stopped tail")
    assert lg.report.ok  # one record lost where a writer stopped: reported, not a failure


@pytest.mark.parametrize("bad", [-1, "10", float("nan"), True, None])
def test_tail_timeout_takes_seconds(tmp_path, bad):
    with pytest.raises(ValueError, match="tail_timeout"):
        tbscope.scan(tmp_path, tail_timeout=bad)


# --------------------------------------------------------------------------------------------
# corrupt records
# --------------------------------------------------------------------------------------------


def flip(data: bytes, at: int, mask: int = 0x55) -> bytes:
    b = bytearray(data)
    b[at] ^= mask
    return bytes(b)


@pytest.mark.parametrize(
    "where, reason",
    [
        (0, "bad length crc"),  # the length itself
        (9, "bad length crc"),  # its CRC
        (12 + 3, "bad data crc"),  # the payload
        (-2, "bad data crc"),  # the data CRC
    ],
    ids=["length", "length-crc", "payload", "data-crc"],
)
def test_bad_crc_skips_one_record(base, tmp_path, where, reason):
    recs = spans(base)
    k = 6
    off, span = recs[k]
    put(tmp_path, flip(base, off + (where if where >= 0 else span + where)))
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == [s for s in STEPS if s != k - 1]
    assert problems(lg) == [("corrupt", off, span)]
    (p,) = lg.report.problems
    assert reason in p.reason and "skipped to the next valid record" in p.reason
    assert not lg.report.ok
    assert lg.run_info().to_pandas()["corrupt_records"].tolist() == [1]
    assert_strict_raises(tmp_path, NAME, f"@{off}")


@pytest.mark.parametrize("garbage", [b"x" * 37, b"\x00" * 5, os.urandom(300)], ids=["text", "zeros", "random"])
def test_garbage_between_records(base, tmp_path, garbage):
    off, _ = spans(base)[10]
    put(tmp_path, base[:off] + garbage + base[off:])
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS  # nothing lost
    assert problems(lg) == [("corrupt", off, len(garbage))]
    assert_strict_raises(tmp_path, NAME)


def test_garbage_at_the_start(base, tmp_path):
    put(tmp_path, b"NOT AN EVENT FILE HEADER" + base)
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert problems(lg) == [("corrupt", 0, 24)]


def test_resync_needs_both_crcs(base, tmp_path):
    # A decoy: a header whose length CRC holds, then 5 bytes whose data CRC does not.
    decoy = header(5) + b"abcde" + b"\x00\x00\x00\x00"
    off, _ = spans(base)[10]
    junk = b"junk" + decoy + b"more junk"
    put(tmp_path, base[:off] + junk + base[off:])
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert problems(lg) == [("corrupt", off, len(junk))]


def test_huge_length_is_corruption_not_a_truncated_tail(base, tmp_path):
    # A valid length CRC on a length of 1 TiB: above the default 256 MiB cap, so it is not
    # waited for as a record still being written.
    off, _ = spans(base)[5]
    put(tmp_path, base[:off] + header(1 << 40) + base[off:])
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert problems(lg) == [("corrupt", off, 12)]
    assert "above the cap" in lg.report.problems[0].reason


def test_max_record_bytes(base, tmp_path):
    big = event_pb2.Event(
        wall_time=1.0,
        step=100,
        summary=summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(
                    tag="pic", image=summary_pb2.Summary.Image(height=1, width=1, encoded_image_string=os.urandom(5000))
                )
            ]
        ),
    ).SerializeToString()
    off, _ = spans(base)[10]
    put(tmp_path, base[:off] + frame(big) + base[off:])
    span = 16 + len(big)

    default = tbscope.scan(tmp_path)
    assert len(default.images()) == 1 and default.report.ok

    capped = tbscope.scan(tmp_path, max_record_bytes=1000)
    assert steps(capped) == STEPS
    assert len(capped.images()) == 0
    assert problems(capped) == [("corrupt", off, span)]
    assert f"record length {len(big)} is above the cap" in capped.report.problems[0].reason
    assert_strict_raises(tmp_path, NAME, max_record_bytes=1000)


def test_undecodable_payload_with_valid_crcs(base, tmp_path):
    junk = b"\xff\xff\xff\xff not a protobuf \x07"
    off, _ = spans(base)[3]
    put(tmp_path, base[:off] + frame(junk) + base[off:])
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert problems(lg) == [("corrupt", off, 16 + len(junk))]
    assert "not a valid Event" in lg.report.problems[0].reason
    assert_strict_raises(tmp_path, "not a valid Event")


def test_several_problems_in_one_file_are_each_reported(base, tmp_path):
    recs = spans(base)
    data = flip(base, recs[15][0] + 20)  # bad data CRC, step 14
    data = flip(data, recs[4][0] + 2)  # bad length CRC, step 3
    data = data[: recs[10][0]] + b"garbage!" + data[recs[10][0] :]
    put(tmp_path, data)
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == [s for s in STEPS if s not in (3, 14)]
    assert problems(lg) == [
        ("corrupt", recs[4][0], recs[4][1]),
        ("corrupt", recs[10][0], 8),
        ("corrupt", recs[15][0] + 8, recs[15][1]),
    ]
    assert lg.run_info().to_pandas()["corrupt_records"].tolist() == [3]


def test_corruption_then_a_truncated_tail(base, tmp_path):
    recs = spans(base)
    cut = recs[-1][0] + 10
    data = flip(base[:cut], recs[5][0] + 1)
    path = put(tmp_path, data)
    lg = tbscope.scan(tmp_path)
    assert problems(lg) == [("corrupt", recs[5][0], recs[5][1]), ("truncated", recs[-1][0], 10)]
    assert not lg.report.ok
    with open(path, "ab") as f:
        f.write(base[cut:])
    assert lg.reload().rows == 1
    assert steps(lg) == [s for s in STEPS if s != 4]
    # The corrupt entry is kept (once); the truncation is resolved.
    assert problems(lg) == [("corrupt", recs[5][0], recs[5][1])]


def test_strict_reload_raises_only_for_new_problems(base, tmp_path):
    path = put(tmp_path, base)
    lg = tbscope.scan(tmp_path, strict=True)
    assert steps(lg) == STEPS
    with open(path, "ab") as f:
        f.write(b"garbage" + frame(scalar_event(20, 1.0)))
    with pytest.raises(tbscope.CorruptRecordError, match=f"@{len(base)}"):
        lg.reload()
    # What was read is kept; the next reload has nothing new to complain about.
    assert steps(lg) == STEPS + [20]
    assert lg.reload().bytes_read == 0


# --------------------------------------------------------------------------------------------
# values that cannot be used as they are
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wall", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_wall_time_keeps_the_point(base, tmp_path, wall):
    off = len(base)
    put(tmp_path, base + frame(scalar_event(20, 7.5, wall=wall)) + frame(scalar_event(21, 8.5)))
    lg = tbscope.scan(tmp_path)
    df = lg.scalars().to_pandas()
    assert list(df["step"]) == STEPS + [20, 21]
    row = df.iloc[20]
    assert row["value"] == 7.5
    assert np.isnan(row["wall_time"]) and row["timestamp"] is pd.NaT
    assert df.iloc[21]["wall_time"] == 1_700_000_021.0
    ((sev, o, _),) = problems(lg)
    assert (sev, o) == ("warning", off)
    assert "null wall time" in lg.report.problems[0].reason
    # The point is kept, so nothing was lost (Report.ok), but strict still raises on it.
    assert lg.report.ok
    assert_strict_raises(tmp_path, "wall time")


# --------------------------------------------------------------------------------------------
# odd files
# --------------------------------------------------------------------------------------------


def test_zero_length_file_does_not_disturb_the_run(base, tmp_path):
    put(tmp_path, base)
    put(tmp_path, b"", name="events.out.tfevents.1800000000.empty")
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert lg.run_info().to_pandas()["files"].tolist() == [2]
    assert lg.report.ok
    tbscope.scan(tmp_path, strict=True).scalars()


def test_zero_length_file_is_reported(tmp_path):
    put(tmp_path, b"")
    lg = tbscope.scan(tmp_path)
    assert any(p.file == f"run/{NAME}" and "empty" in p.reason.lower() for p in lg.report.problems)


def test_logdir_without_event_files_is_reported(tmp_path):
    (tmp_path / "notes.txt").write_text("not an event file")
    lg = tbscope.scan(tmp_path)
    assert lg.runs == []
    assert "no event files" in str(lg.report).lower()


def test_no_event_files_warning_goes_once_files_appear(base, tmp_path):
    # Before: the warning stayed in the report of a reloaded scan that now holds runs.
    lg = tbscope.scan(tmp_path)
    assert lg.runs == [] and "no event files" in str(lg.report)
    put(tmp_path, base)
    lg.reload()
    assert steps(lg) == STEPS
    assert lg.report.problems == () and lg.report.ok


def test_strict_reload_raises_for_new_problems_after_the_warning_goes(base, tmp_path):
    lg = tbscope.scan(tmp_path, strict=True)
    with pytest.raises(tbscope.CorruptRecordError, match="no event files"):
        lg.reload()
    damaged = bytearray(base)
    damaged[len(base) // 2] ^= 0xFF
    put(tmp_path, bytes(damaged))
    # The warning leaves the report as the corrupt record enters it: the new problem must still
    # be seen as new (it took the warning's place, so counting positions would miss it).
    with pytest.raises(tbscope.CorruptRecordError, match="corrupt"):
        lg.reload()


def test_random_bytes_named_like_an_event_file(base, tmp_path):
    put(tmp_path, base, run="good")
    junk = np.random.default_rng(5).integers(0, 256, size=4000, dtype=np.uint8).tobytes()
    put(tmp_path, junk, run="junk")
    lg = tbscope.scan(tmp_path)
    assert lg.runs == ["good", "junk"]
    assert steps(lg) == STEPS
    junk_problems = [p for p in lg.report.problems if p.run == "junk"]
    assert junk_problems and junk_problems[0].severity == "corrupt" and junk_problems[0].offset == 0
    # The whole file is accounted for: corrupt bytes, then at most a header's worth that
    # could still become a record.
    covered = sum(p.length for p in junk_problems)
    assert covered == len(junk)
    assert all(p.severity == "corrupt" for p in junk_problems[:-1])
    assert junk_problems[-1].severity in ("corrupt", "truncated")
    assert not lg.report.ok
    assert_strict_raises(tmp_path, "junk/")


def test_other_files_are_ignored(base, tmp_path):
    put(tmp_path, base)
    put(tmp_path, b"\x00garbage", name="notes.txt")
    put(tmp_path, b"projector config", name="projector_config.pbtxt")
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS and len(lg.report) == 0


def test_directory_named_like_an_event_file(base, tmp_path):
    put(tmp_path, base)
    (tmp_path / "run" / "events.out.tfevents.1800000000.dir").mkdir()
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    assert lg.runs == ["run"]
    assert lg.run_info().to_pandas()["files"].tolist() == [1]
    assert lg.report.ok
    tbscope.scan(tmp_path, strict=True).scalars()


def test_dangling_symlink(base, tmp_path):
    put(tmp_path, base)
    os.symlink(tmp_path / "gone", tmp_path / "run" / "events.out.tfevents.1800000000.link")
    lg = tbscope.scan(tmp_path)
    assert steps(lg) == STEPS
    ((sev, _, _),) = problems(lg)
    assert sev == "error"
    p = lg.report.problems[0]
    assert p.file == "run/events.out.tfevents.1800000000.link" and "cannot open" in p.reason
    assert not lg.report.ok
    assert_strict_raises(tmp_path, "cannot open")


def _scan_summary(root: str | Path) -> dict:
    """What a scan of ``root`` found: runs, scalar rows and the report, as plain data."""
    lg = tbscope.scan(root)
    return {
        "runs": lg.runs,
        "rows": len(lg.scalars()),
        "report": [p.__dict__ for p in lg.report.problems],
        "ok": lg.report.ok,
    }


def _scan_as_nobody(root: str) -> dict:
    """Scan ``root`` in a forked child that dropped root's rights (permission bits then apply)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgid(65534)
            os.setuid(65534)
            out = _scan_summary(root)
            try:
                tbscope.scan(root, strict=True).scalars()
                out["strict"] = None
            except tbscope.CorruptRecordError as e:
                out["strict"] = str(e)
        except BaseException as e:
            out = {"exception": repr(e)}
            code = 1
        os.write(w, json.dumps(out).encode())
        os._exit(code)
    os.close(w)
    data, _ = child_result(pid, r)
    return json.loads(data)


@pytest.mark.skipif(not hasattr(os, "fork") or os.name != "posix", reason="needs fork() and permissions")
def test_unreadable_file_and_directory(base):
    # chmod 000 means nothing to root, so as root the scan runs in a child as 'nobody'.
    root = Path(tempfile.mkdtemp(prefix="tbscope-perm-"))
    try:
        os.chmod(root, 0o755)
        for run in ("a", "b", "c"):
            p = put(root, base, run=run)
            os.chmod(p.parent, 0o755)
            os.chmod(p, 0o644)
        os.chmod(root / "b" / NAME, 0)
        os.chmod(root / "c", 0)
        if os.geteuid() == 0:
            out = _scan_as_nobody(str(root))
        else:
            out = _scan_summary(root)
        assert "exception" not in out, out
        assert out["rows"] == len(STEPS)  # run a, intact
        assert "a" in out["runs"]
        by_run = {p["run"]: p for p in out["report"]}
        assert by_run["b"]["severity"] == "error" and by_run["b"]["file"] == f"b/{NAME}"
        assert "cannot open" in by_run["b"]["reason"] and "ermission denied" in by_run["b"]["reason"]
        assert by_run["c"]["severity"] == "error" and "cannot list directory" in by_run["c"]["reason"]
        assert not out["ok"]
        if "strict" in out:
            assert out["strict"] and "ermission denied" in out["strict"]
    finally:
        os.chmod(root / "b" / NAME, 0o644)
        os.chmod(root / "c", 0o755)
        shutil.rmtree(root)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_fifo_named_like_an_event_file_does_not_hang(base, tmp_path):
    put(tmp_path, base)
    os.mkfifo(tmp_path / "run" / "events.out.tfevents.1800000000.fifo")
    code = "import sys, tbscope; lg = tbscope.scan(sys.argv[1]); print(len(lg.scalars()), lg.report)"
    try:
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=2)
    except subprocess.TimeoutExpired:
        pytest.fail("scan hung on a FIFO")
    assert out.returncode == 0 and out.stdout.startswith("20 ")


# --------------------------------------------------------------------------------------------
# verify=False
# --------------------------------------------------------------------------------------------


def test_verify_false_skips_data_crcs(base, tmp_path):
    recs = spans(base)
    off, span = recs[6]
    # Flip a bit of the float in step 5's payload: it still decodes, to a different value.
    payload = base[off + 12 : off + span - 4]
    at = off + 12 + payload.index(struct.pack("<f", 2.5)) + 3
    put(tmp_path, flip(base, at, 0x01))
    checked = tbscope.scan(tmp_path)
    assert steps(checked) == [s for s in STEPS if s != 5]
    assert problems(checked) == [("corrupt", off, span)]

    unchecked = tbscope.scan(tmp_path, verify=False)
    df = unchecked.scalars().to_pandas()
    assert list(df["step"]) == STEPS  # the damaged record is read as it is ...
    assert df.iloc[5]["value"] != 2.5  # ... with its damaged value
    assert len(unchecked.report) == 0  # ... and nobody notices


def test_verify_false_still_catches_what_does_not_decode(base, tmp_path):
    recs = spans(base)
    off, span = recs[6]
    # Wire type 7 does not exist: the payload no longer decodes, so the CRC is checked after all.
    put(tmp_path, base[: off + 12] + b"\x0f" + base[off + 13 :])
    lg = tbscope.scan(tmp_path, verify=False)
    assert steps(lg) == [s for s in STEPS if s != 5]
    assert problems(lg) == [("corrupt", off, span)]
    assert "bad data crc" in lg.report.problems[0].reason


def test_verify_false_still_checks_length_crcs(base, tmp_path):
    off, span = spans(base)[6]
    put(tmp_path, flip(base, off + 1))
    lg = tbscope.scan(tmp_path, verify=False)
    assert steps(lg) == [s for s in STEPS if s != 5]
    assert problems(lg) == [("corrupt", off, span)]


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def test_report_semantics():
    P = tbscope.Problem
    trunc = P("run", "run/f", "truncated", 100, 7, "file ends inside a record")
    corrupt = P("run", "run/f", "corrupt", 40, 42, "bad data crc")
    warning = P("run", "run/f", "warning", 80, 0, "wall time is NaN")
    error = P("run", "run/g", "error", 0, 0, "cannot open")
    assert tbscope.Report(()).ok
    assert tbscope.Report((trunc,)).ok  # truncated tails are not data loss
    for p in (corrupt, error):
        assert not tbscope.Report((trunc, p)).ok
    assert tbscope.Report((trunc, warning)).ok  # a warning keeps the data
    r = tbscope.Report((corrupt, trunc, error))
    assert len(r) == 3
    assert r.by_severity("corrupt") == [corrupt]
    assert r.by_severity("warning") == []
    assert str(corrupt) == "corrupt: run/f@40 (42 bytes): bad data crc"
    assert str(warning) == "warning: run/f@80: wall time is NaN"
    assert str(r).splitlines() == [str(corrupt), str(trunc), str(error)]
    assert str(tbscope.Report(())) == "no problems"


def test_report_names_the_file_relative_to_the_logdir(base, tmp_path):
    recs = spans(base)
    put(tmp_path, flip(base, recs[2][0] + 20), run="deep/er/run")
    lg = tbscope.scan(tmp_path)
    (p,) = lg.report.problems
    assert (p.run, p.file, p.severity, p.offset, p.length) == (
        "deep/er/run",
        f"deep/er/run/{NAME}",
        "corrupt",
        recs[2][0],
        recs[2][1],
    )
    # Opening a single file names it by its file name.
    single = tbscope.scan(tmp_path / "deep" / "er" / "run" / NAME)
    assert single.report.problems[0].file == NAME
