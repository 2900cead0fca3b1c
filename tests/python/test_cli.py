"""The ``tbscope`` command line: version, help, ``check`` exit codes, ``summary`` formats.

Most tests use click's CliRunner (in process); a few run the installed console script and
``python -m tbscope`` as real subprocesses, as users do.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import tbscope
from tfrecord_util import frame
from tbscope.cli import main

crc32c = pytest.importorskip("crc32c")
event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")

NAME = "events.out.tfevents.1700000000.cli"
SCRIPT = Path(sys.executable).with_name("tbscope")




def scalar_event(tag: str, step: int, value: float) -> bytes:
    return event_pb2.Event(
        wall_time=1_700_000_000.0 + step,
        step=step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]),
    ).SerializeToString()


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """Two runs with hparams (tensorboardX) and scalars 'loss' and 'acc' at steps 0..9."""
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    root = tmp_path_factory.mktemp("clean")
    for i, lr in enumerate([0.1, 0.01]):
        with SummaryWriter(str(root / f"run{i}"), flush_secs=3600) as w:
            for s in hparams({"lr": lr, "opt": "adam"}, {"acc": 0.0}):
                w._get_file_writer().add_summary(s)
            for step in range(10):
                w.add_scalar("loss", (i + 1) * (10 - step) / 4, step, walltime=1000.0 + step)
                w.add_scalar("acc", step / 8, step, walltime=1000.0 + step)
    return root


CORRUPT_AT = sum(len(frame(scalar_event("loss", s, float(s)))) for s in range(2))


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corrupt")
    records = [frame(scalar_event("loss", s, float(s))) for s in range(5)]
    (root / "run").mkdir()
    # 15 bytes of garbage between the second and third records.
    (root / "run" / NAME).write_bytes(b"".join(records[:2]) + b"this is garbage" + b"".join(records[2:]))
    return root


@pytest.fixture(scope="module")
def truncated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("truncated")
    good = b"".join(frame(scalar_event("loss", s, float(s))) for s in range(5))
    (root / "run").mkdir()
    (root / "run" / NAME).write_bytes(good[:-7])
    return root


def run(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="tbscope")


# --------------------------------------------------------------------------------------------
# version and help
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    r = run(flag)
    assert r.exit_code == 0
    assert r.output.strip() == f"tbscope, version {tbscope.__version__}"


COMMANDS = sorted(main.commands)


def test_commands():
    assert {"check", "summary"} <= set(COMMANDS)


@pytest.mark.parametrize("command", [None, *COMMANDS])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(command, flag):
    args = [flag] if command is None else [command, flag]
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("Usage: tbscope")
    if command is None:
        for c in COMMANDS:
            assert c in r.output
    else:
        assert f"tbscope {command} [OPTIONS]" in r.output
        assert "Example" in r.output  # every command shows how to call it
        first_words = " ".join(main.commands[command].help.split()[:5])
        assert first_words in " ".join(r.output.split())


def test_no_command_shows_usage():
    r = run()
    assert "Usage: tbscope" in r.output
    assert r.exit_code in (0, 2)


def test_unknown_command_is_a_usage_error():
    r = run("frobnicate")
    assert r.exit_code == 2
    assert "No such command" in r.output


# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------


def test_check_clean(clean):
    r = run("check", str(clean))
    assert r.exit_code == 0, r.output
    assert "2 runs" in r.output and "2 files" in r.output
    assert "no problems found" in r.output


def test_check_truncated_is_not_data_loss(truncated):
    r = run("check", str(truncated))
    assert r.exit_code == 0, r.output
    assert "truncated" in r.output and NAME in r.output


def test_check_corrupt(corrupt):
    r = run("check", str(corrupt))
    assert r.exit_code == 1
    text = " ".join(r.output.split())
    assert "corrupt" in text and f"run/{NAME} @ {CORRUPT_AT} (15 bytes)" in text


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_check_machine_formats(corrupt, clean, fmt):
    r = run("check", str(corrupt), "--format", fmt)
    assert r.exit_code == 1
    if fmt == "json":
        rows = json.loads(r.output)
    else:
        rows = pd.read_csv(io.StringIO(r.output)).to_dict("records")
    assert len(rows) == 1
    row = rows[0]
    assert (row["run"], row["file"], row["severity"], row["offset"], row["length"]) == ("run", f"run/{NAME}", "corrupt", CORRUPT_AT, 15)
    assert "crc" in row["reason"]
    ok = run("check", str(clean), "--format", fmt)
    assert ok.exit_code == 0
    if fmt == "json":
        assert json.loads(ok.output) == []
    else:
        assert ok.output.strip() == "run,file,severity,offset,length,reason"


def test_check_no_verify(tmp_path):
    # Damage a float's low bit: the record still decodes, so only the data CRC can tell.
    data = bytearray(frame(scalar_event("loss", 3, 2.5)))
    data[12 + bytes(data[12:-4]).index(struct.pack("<f", 2.5))] ^= 1
    (tmp_path / NAME).write_bytes(bytes(data))
    assert run("check", str(tmp_path)).exit_code == 1
    assert run("check", "--no-verify", str(tmp_path)).exit_code == 0


def test_check_missing_path_is_one_line_with_a_hint(tmp_path):
    missing = str(tmp_path / "nope")
    r = run("check", missing)
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1, r.output
    assert lines[0].startswith("Error:") and missing in lines[0]
    assert "check the path" in lines[0]
    assert "Traceback" not in r.output


def test_debug_shows_the_exception(tmp_path):
    r = run("--debug", "check", str(tmp_path / "nope"))
    assert r.exit_code != 0
    assert isinstance(r.exception, FileNotFoundError)


def test_check_single_event_file(corrupt):
    r = run("check", str(corrupt / "run" / NAME))
    assert r.exit_code == 1
    assert "1 runs" in r.output


def test_check_empty_logdir_says_so(tmp_path):
    r = run("check", str(tmp_path))
    assert "no event files" in r.output.lower()


def test_bad_glob_is_a_one_line_usage_error(clean):
    r = run("summary", str(clean), "--tags", "[z-a]")
    assert r.exit_code == 2
    assert len([line for line in r.output.splitlines() if line.strip()]) == 1


# --------------------------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------------------------


def test_summary_csv_matches_the_api(clean):
    r = run("summary", str(clean), "--format", "csv")
    assert r.exit_code == 0, r.output
    got = pd.read_csv(io.StringIO(r.output))
    want = tbscope.scan(clean).summary()
    assert list(got.columns) == list(want.columns)
    assert list(got["run"]) == ["run0", "run1"]
    for col in want.columns:
        if col in ("run", "hparam:opt"):
            assert list(got[col]) == list(want[col])
        else:
            assert got[col].tolist() == pytest.approx(want[col].tolist(), rel=1e-12), col
    assert list(got["hparam:lr"]) == [0.1, 0.01]
    assert list(got["loss:last"]) == [0.25, 0.5]
    assert list(got["loss:max"]) == [2.5, 5.0]


def test_summary_json(clean):
    r = run("summary", str(clean), "--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [row["run"] for row in rows] == ["run0", "run1"]
    assert rows[1]["hparam:opt"] == "adam"
    assert rows[1]["acc:last"] == 9 / 8 and rows[1]["acc:min"] == 0.0
    assert rows[0]["max_step"] == 9


def test_summary_table(clean):
    r = run("summary", str(clean))
    assert r.exit_code == 0, r.output
    for text in ("run0", "run1", "lr", "opt", "adam", "loss", "acc", "max_step", "0.25"):
        assert text in r.output
    assert "hparam:" not in r.output and ":last" not in r.output


def test_summary_filters(clean):
    r = run("summary", str(clean), "--runs", "run1", "--tags", "loss", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [row["run"] for row in rows] == ["run1"]
    assert not any(k.startswith("acc:") for k in rows[0])
    assert rows[0]["loss:min"] == 0.5


def test_summary_missing_path(tmp_path):
    r = run("summary", str(tmp_path / "nope"))
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "check the path" in r.output


# --------------------------------------------------------------------------------------------
# real processes
# --------------------------------------------------------------------------------------------


def _proc(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed next to this python")
def test_console_script(corrupt, tmp_path):
    r = _proc(str(SCRIPT), "check", str(corrupt))
    assert r.returncode == 1 and "corrupt" in r.stdout
    r = _proc(str(SCRIPT), "check", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "check the path" in r.stderr
    assert "Traceback" not in r.stderr
    r = _proc(str(SCRIPT), "--debug", "check", str(tmp_path / "nope"))
    assert r.returncode != 0 and "Traceback" in r.stderr and "FileNotFoundError" in r.stderr


def test_python_dash_m(clean):
    r = _proc(sys.executable, "-m", "tbscope", "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tbscope, version {tbscope.__version__}"
    r = _proc(sys.executable, "-m", "tbscope", "summary", str(clean), "--format", "csv")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0].startswith("run,max_step,")
    assert len(pd.read_csv(io.StringIO(r.stdout))) == 2

