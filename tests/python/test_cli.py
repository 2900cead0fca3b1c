"""The ``tbscope`` command line: every command, its formats, filters, errors and exit codes.

Most tests use click's CliRunner (in process); a few run the installed console script and
``python -m tbscope`` as real subprocesses, as users do (a terminal for the spinner, a pipe
closed early, symlinks on disk). Expected values come from TensorBoard's EventAccumulator,
from what the fixtures wrote (numpy) and from ``tbscope.read_scalars``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.main import EXIT_CODES, main
from tfrecord_util import frame

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


def test_check_stopped_tail_fails_only_with_strict(truncated):
    # Just written: a pending tail, whatever --strict says.
    assert run("check", str(truncated), "--strict").exit_code == 0
    # Read as finished: the cut record is a stopped tail, a warning.
    for final in (["--final"], ["--tail-timeout", "0"]):
        r = run("check", str(truncated), *final)
        assert r.exit_code == 0, r.output
        assert "stopped tail" in r.output
        r = run("check", str(truncated), *final, "--strict")
        assert r.exit_code == 1, r.output


def test_check_torn_record_is_data_loss_once_final(tmp_path):
    records = [frame(scalar_event("loss", s, float(s))) for s in range(6)]
    big = frame(scalar_event("x" * 4000, 9, 1.0))
    at = len(b"".join(records[:3]))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / NAME).write_bytes(b"".join(records[:3]) + big[:50] + b"".join(records[3:]))
    r = run("check", str(tmp_path))
    assert r.exit_code == 0, r.output  # may still be written: a pending tail
    assert "truncated" in r.output
    r = run("check", str(tmp_path), "--final", "--format", "json")
    assert r.exit_code == 1, r.output
    rows = json.loads(r.output)
    assert [(p["severity"], p["offset"], p["length"]) for p in rows] == [("corrupt", at, 50)]
    assert rows[0]["reason"].startswith("torn record")


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
    assert (row["run"], row["file"], row["severity"], row["offset"], row["length"]) == (
        "run",
        f"run/{NAME}",
        "corrupt",
        CORRUPT_AT,
        15,
    )
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


# --------------------------------------------------------------------------------------------
# shared: exit codes, usage errors, formats, logging, progress
# --------------------------------------------------------------------------------------------


def one_line_error(r) -> str:
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1, r.output
    assert lines[0].startswith("Error:") and "Traceback" not in r.output
    return lines[0]


def test_main_help_documents_exit_codes():
    r = run("--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "Exit status:" in text
    for code, meaning in EXIT_CODES:
        assert f"{code} {' '.join(meaning.split())}" in text


@pytest.mark.parametrize(
    "command, has, lacks",
    [
        (["check"], ["1 found lost data", "reading failed"], []),
        (["clean"], ["1 could not remove a run", "reading failed"], ["lost data"]),
        (["sql"], ["1 reading failed"], ["lost data", "remove a run", "did not verify"]),
        (["cache", "clear"], ["1 left an entry in place"], ["reading failed", "lost data"]),
        (["cache", "ls"], ["0 success; 2 bad usage"], ["1 "]),
    ],
)
def test_each_commands_help_says_what_its_exit_status_1_means(command, has, lacks):
    r = run(*command, "--help")
    assert r.exit_code == 0
    epilog = " ".join(r.output.split()).split("Exit status:")[1]
    for words in has:
        assert words in epilog
    for words in lacks:
        assert words not in epilog


def test_commands_of_issue_4():
    assert {"ls", "tags", "summary", "sql", "export", "check", "clean"} <= set(main.commands)


@pytest.mark.parametrize(
    "args, words",
    [
        (["ls", "{d}", "--steps", "3"], ["--steps", "A:B"]),
        (["ls", "{d}", "--kinds", "scalars,nope"], ["unknown kind 'nope'", "scalars"]),
        (["tags", "{d}", "--format", "xml"], ["--format", "'xml' is not one of"]),
        (["ls", "{d}", "--bogus"], ["No such option", "--bogus"]),
        (["ls"], ["Missing argument", "LOGDIR"]),
        (["summary", "{d}", "--tags", "[z-a]"], ["tags"]),
    ],
)
def test_usage_errors_are_one_line_exit_2(clean, args, words):
    r = run(*[a.format(d=clean) for a in args])
    assert r.exit_code == 2, r.output
    line = one_line_error(r)
    for w in words:
        assert w in line


def test_usage_error_points_at_the_command_help(clean):
    line = one_line_error(run("ls", str(clean), "--steps", "x"))
    assert "tbscope ls --help" in line


@pytest.mark.parametrize("command", ["ls", "tags", "summary", "check"])
def test_missing_logdir_is_exit_2_for_every_reader(tmp_path, command):
    r = run(command, str(tmp_path / "nope"))
    assert r.exit_code == 2
    assert "check the path" in one_line_error(r)


@pytest.mark.parametrize("command", ["ls", "tags", "summary", "check", "sql", "export", "clean"])
def test_every_reading_command_takes_the_same_format_option(command):
    opts = {o for p in main.commands[command].params for o in p.opts}
    assert "--format" in opts
    fmt = next(p for p in main.commands[command].params if "--format" in p.opts)
    assert list(fmt.type.choices) == ["table", "csv", "json"]


@pytest.mark.parametrize("command", ["ls", "tags", "export"])
def test_filters_are_the_same_everywhere(command):
    opts = {o for p in main.commands[command].params for o in p.opts}
    assert {"--runs", "--tags", "--kinds", "--steps"} <= opts


def test_verbose_logs_what_was_read(clean):
    r = run("-v", "ls", str(clean), "--format", "csv")
    assert r.exit_code == 0
    assert "INFO tbscope: read 2 files" in r.stderr
    assert "INFO" not in r.stdout
    quiet = run("ls", str(clean), "--format", "csv")
    assert quiet.stderr == ""


def test_table_is_plain_when_piped(clean):
    r = run("ls", str(clean))
    assert r.exit_code == 0
    assert "\x1b[" not in r.output  # no colour codes
    assert not any(c in r.output for c in "│┃━─")  # no box drawing
    lines = r.output.splitlines()
    assert lines[0].split()[:3] == ["run", "kinds", "tags"]
    assert [line.split()[0] for line in lines[1:]] == ["run0", "run1"]
    assert all(line == line.rstrip() for line in lines)


# --------------------------------------------------------------------------------------------
# ls and tags, against TensorBoard's own loader
# --------------------------------------------------------------------------------------------


def tb_series(run_dir: Path) -> dict[str, dict]:
    """tag -> points, first/last step and plugin, from TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    acc = pea.EventAccumulator(str(run_dir), size_guidance={pea.TENSORS: 0}, purge_orphaned_data=False)
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        events = acc.Tensors(tag)
        steps = [e.step for e in events]
        out[tag] = {
            "points": len(events),
            "first_step": min(steps),
            "last_step": max(steps),
            "plugin": acc.SummaryMetadata(tag).plugin_data.plugin_name,
        }
    return out


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_ls_machine_formats(clean, fmt):
    r = run("ls", str(clean), "--format", fmt)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output) if fmt == "json" else pd.read_csv(io.StringIO(r.output)).to_dict("records")
    assert [row["run"] for row in rows] == ["run0", "run1"]
    for row in rows:
        want = tb_series(clean / row["run"])
        files = [p for p in (clean / row["run"]).iterdir() if "tfevents" in p.name]
        assert row["kinds"] == "scalars,hparams"
        assert row["tags"] == len(want)
        assert row["points"] == sum(s["points"] for s in want.values())
        assert row["first_step"] == min(s["first_step"] for s in want.values())
        assert row["last_step"] == max(s["last_step"] for s in want.values()) == 9
        assert row["files"] == len(files)
        assert row["bytes"] == sum(p.stat().st_size for p in files)
        # The newest of the file mtimes and the event wall times (TensorBoard's raw loader).
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

        walls = [e.wall_time for p in files for e in LegacyEventFileLoader(str(p)).Load()]
        newest = max(max(p.stat().st_mtime for p in files), max(walls))
        assert pd.Timestamp(row["last_write"]).timestamp() == pytest.approx(newest, abs=2e-6)


def test_ls_filters_narrow_the_counts(clean):
    r = run("ls", str(clean), "--runs", "run1", "--tags", "loss", "--steps", "2:5", "--format", "json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)
    assert (row["run"], row["kinds"], row["tags"], row["points"], row["first_step"], row["last_step"]) == (
        "run1",
        "scalars",
        1,
        3,
        2,
        4,
    )


def test_ls_table(clean):
    r = run("ls", str(clean))
    assert r.exit_code == 0
    for text in ("run0", "run1", "scalars,hparams", "size", "KiB" if (clean / "run0").stat().st_size > 1024 else "B"):
        assert text in r.output


def test_ls_single_event_file(corrupt):
    r = run("ls", str(corrupt / "run" / NAME), "--format", "json")
    assert r.exit_code == 0
    (row,) = json.loads(r.output)
    assert row["run"] == "." and row["files"] == 1 and row["points"] == 5  # garbage skipped, every record kept


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_tags_match_tensorboard(clean, fmt):
    r = run("tags", str(clean), "--format", fmt)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output) if fmt == "json" else pd.read_csv(io.StringIO(r.output)).to_dict("records")
    assert list(rows[0]) == ["run", "tag", "kind", "points", "first_step", "last_step", "plugin"]
    got = {(row["run"], row["tag"]): row for row in rows}
    want = {(run_, tag): s for run_ in ("run0", "run1") for tag, s in tb_series(clean / run_).items()}
    assert set(got) == set(want)
    for key, s in want.items():
        row = got[key]
        assert (row["points"], row["first_step"], row["last_step"], row["plugin"]) == (
            s["points"],
            s["first_step"],
            s["last_step"],
            s["plugin"],
        ), key
    assert got[("run0", "loss")]["kind"] == "scalars"
    assert got[("run0", "_hparams_/experiment")]["kind"] == "hparams"


def test_tags_kinds_filter(clean):
    r = run("tags", str(clean), "--kinds", "scalars", "--format", "csv")
    got = pd.read_csv(io.StringIO(r.output))
    assert set(got["kind"]) == {"scalars"}
    assert sorted(set(got["tag"])) == ["acc", "loss"]
    r = run("tags", str(clean), "--kinds", "scalars", "--kinds", "hparams", "--format", "csv")
    assert set(pd.read_csv(io.StringIO(r.output))["kind"]) == {"scalars", "hparams"}


def test_tags_json_empty_is_an_empty_array(clean):
    r = run("tags", str(clean), "--runs", "nothing-matches", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.output) == []


# --------------------------------------------------------------------------------------------
# summary: --stats, --group-by, --steps
# --------------------------------------------------------------------------------------------


def clean_values(i: int, tag: str) -> np.ndarray:
    """What the `clean` fixture wrote for run i: loss (i+1)(10-s)/4 and acc s/8, s = 0..9."""
    s = np.arange(10)
    return (i + 1) * (10 - s) / 4 if tag == "loss" else s / 8


def test_summary_steps_filter(clean):
    r = run("summary", str(clean), "--steps", ":5", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    for i, row in enumerate(rows):
        assert row["loss:last"] == clean_values(i, "loss")[4]
        assert row["acc:max"] == clean_values(i, "acc")[:5].max()


def test_summary_stats(clean):
    r = run("summary", str(clean), "--stats", "last,argmin,argmax", "--format", "csv")
    assert r.exit_code == 0, r.output
    got = pd.read_csv(io.StringIO(r.output))
    for i in range(2):
        for tag in ("loss", "acc"):
            v = clean_values(i, tag)
            assert got.loc[i, f"{tag}:last"] == v[-1]
            assert got.loc[i, f"{tag}:argmin_step"] == int(np.argmin(v))
            assert got.loc[i, f"{tag}:argmax_step"] == int(np.argmax(v))
        assert "loss:min" not in got.columns
    bad = run("summary", str(clean), "--stats", "last,median-ish")
    assert bad.exit_code == 2 and "median-ish" in one_line_error(bad)


def test_summary_no_hparams(clean):
    r = run("summary", str(clean), "--no-hparams", "--format", "json")
    assert r.exit_code == 0, r.output
    assert not any(k.startswith("hparam:") for k in json.loads(r.output)[0])


def test_summary_group_by_regex(clean):
    r = run("summary", str(clean), "--tags", "loss", "--group-by", "run", "--format", "csv")
    assert r.exit_code == 0, r.output
    got = pd.read_csv(io.StringIO(r.output))
    both = np.stack([clean_values(0, "loss"), clean_values(1, "loss")])
    assert len(got) == 10
    assert got["mean"].tolist() == pytest.approx(both.mean(axis=0).tolist())
    assert got["std"].tolist() == pytest.approx(both.std(axis=0, ddof=1).tolist())
    assert got["count"].tolist() == [2] * 10
    assert got["step"].tolist() == list(range(10))


# --------------------------------------------------------------------------------------------
# sql
# --------------------------------------------------------------------------------------------


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# DuckDB is an optional dependency (tbscope[sql]).
needs_sql = pytest.mark.skipif(not _has("duckdb"), reason="duckdb is not installed")
BEST = "SELECT run, max(value) AS best, count(*) AS n FROM scalars WHERE tag = 'loss' GROUP BY run ORDER BY run"


@needs_sql
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_sql_matches_read_scalars(clean, fmt):
    r = run("sql", str(clean), BEST, "--format", fmt)
    assert r.exit_code == 0, r.output
    got = pd.DataFrame(json.loads(r.output)) if fmt == "json" else pd.read_csv(io.StringIO(r.output))
    df = tbscope.read_scalars(clean, tags="loss")
    want = df.groupby("run", observed=True)["value"].agg(["max", "size"])
    assert got["run"].tolist() == ["run0", "run1"]
    assert (
        got["best"].tolist() == want["max"].tolist() == [clean_values(0, "loss").max(), clean_values(1, "loss").max()]
    )
    assert got["n"].tolist() == want["size"].tolist() == [10, 10]


@needs_sql
def test_sql_table_and_stdin(clean):
    r = CliRunner().invoke(main, ["sql", str(clean), "-"], input=BEST, prog_name="tbscope")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["run", "best", "n"]
    assert lines[1].split() == ["run0", "2.5", "10"]


@needs_sql
def test_sql_filters_and_params(clean):
    r = run(
        "sql",
        str(clean),
        "SELECT run, count(*) AS n FROM scalars GROUP BY run ORDER BY run",
        "--runs",
        "run1",
        "--steps",
        "5:",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"run": "run1", "n": 10}]  # 2 tags x steps 5..9
    r = run(
        "sql",
        str(clean),
        "SELECT count(*) AS n FROM scalars WHERE tag = $tag AND step >= $lo",
        "--param",
        "tag=acc",
        "--param",
        "lo=7",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"n": 6}]  # acc at 7, 8, 9 in two runs


@needs_sql
def test_sql_error_is_one_line_exit_2(clean):
    r = run("sql", str(clean), "SELECT nope FROM scalarz")
    assert r.exit_code == 2
    assert "scalarz" in one_line_error(r)


@needs_sql
def test_sql_large_result_streams_as_csv(clean):
    r = run("sql", str(clean), "SELECT range AS i FROM range(300000)", "--format", "csv")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0] == "i" and len(lines) == 300001 and lines[-1] == "299999"


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_export_file_equals_direct_read(clean, tmp_path, suffix):
    out = tmp_path / f"scalars.{suffix}"
    r = run("export", str(clean), "-o", str(out), "--tags", "loss", "--format", "json")
    assert r.exit_code == 0, r.output
    (report,) = json.loads(r.output)
    want = tbscope.read_scalars(clean, tags="loss")
    if suffix == "parquet":
        got = pd.read_parquet(out)
    elif suffix == "csv":
        got = pd.read_csv(out)
    else:
        got = pd.read_json(out, lines=True)
    assert report["output"] == str(out) and report["rows"] == len(want) == len(got) == 20
    assert got["run"].astype(str).tolist() == want["run"].astype(str).tolist()
    assert got["step"].tolist() == want["step"].tolist()
    assert got["value"].tolist() == want["value"].tolist()


def test_export_partitioned_dataset(clean, tmp_path):
    import pyarrow.dataset as ds

    out = tmp_path / "dataset"
    r = run("export", str(clean), "-o", str(out), "--partition-by", "run", "--format", "json")
    assert r.exit_code == 0, r.output
    got = ds.dataset(out, format="parquet", partitioning="hive").to_table().to_pandas()
    want = tbscope.read_scalars(clean)
    assert len(got) == len(want) == 40
    key = ["run", "tag", "step"]
    got = got.astype({"run": str, "tag": str}).sort_values(key).reset_index(drop=True)
    want = want.astype({"run": str, "tag": str}).sort_values(key).reset_index(drop=True)
    assert got["value"].tolist() == want["value"].tolist()


def test_export_format_errors_name_the_options(clean, tmp_path):
    """The command's errors name --to and --partition-by, not the Python API's keywords."""
    r = run("export", str(clean), "-o", str(tmp_path / "scalars.out"))
    assert r.exit_code == 2 and "--to csv|parquet|jsonl" in r.output and "format=" not in r.output
    assert not (tmp_path / "scalars.out").exists()
    r = run("export", str(clean), "-o", str(tmp_path / "dataset"), "--partition-by", "run", "--to", "csv")
    assert r.exit_code == 2 and "--to csv cannot be partitioned" in r.output and "partition_by=" not in r.output
    r = run("export", str(clean), "-o", str(tmp_path / "scalars.out"), "--to", "csv", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.output)[0]["rows"] == 40


# --------------------------------------------------------------------------------------------
# clean (retention)
# --------------------------------------------------------------------------------------------

OLD = 1_000_000_000.0  # 2001-09-09: far older than any --older-than used below


def raw_event(**fields) -> bytes:
    return frame(event_pb2.Event(**fields).SerializeToString())


def write_old_run(d: Path, name: str = "events.out.tfevents.1000000000.old", *, points: bool = True) -> Path:
    """A run last written in 2001 (event wall times and file mtime)."""
    d.mkdir(parents=True, exist_ok=True)
    records = [raw_event(wall_time=OLD, file_version="brain.Event:2")]
    if points:
        for s in range(3):
            value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (s + 1))
            records.append(raw_event(wall_time=OLD + s, step=s, summary=summary_pb2.Summary(value=[value])))
    p = d / name
    p.write_bytes(b"".join(records))
    os.utime(p, (OLD + 10, OLD + 10))
    return p


@pytest.fixture
def retention(tmp_path) -> tuple[Path, Path]:
    """(logdir, outside): runs of every shape clean must tell apart, plus a directory outside
    the logdir that a symlink inside points to."""
    from tensorboardX import SummaryWriter

    root = tmp_path / "logs"
    outside = tmp_path / "outside"
    old = write_old_run(root / "old")
    (root / "old" / "model.ckpt").write_bytes(b"keep me")  # not an event file: stays
    write_old_run(root / "nested")  # an old run with a live run inside it
    with SummaryWriter(str(root / "nested" / "live"), flush_secs=3600) as w:
        w.add_scalar("loss", 1.0, 0)
    with SummaryWriter(str(root / "fresh"), flush_secs=3600) as w:
        w.add_scalar("loss", 1.0, 0)
    (root / "zero").mkdir()
    z = root / "zero" / "events.out.tfevents.1000000000.zero"
    z.write_bytes(b"")
    os.utime(z, (OLD, OLD))
    write_old_run(root / "header" / "deep", points=False)  # only the file_version record
    nodata = root / "nodata"
    nodata.mkdir()
    p = nodata / "events.out.tfevents.1000000000.nodata"
    p.write_bytes(
        raw_event(wall_time=OLD, file_version="brain.Event:2")
        + raw_event(wall_time=OLD, step=4, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    )
    os.utime(p, (OLD, OLD))
    # Old data outside the logdir, reached through a symlinked run directory and a symlinked
    # event file: both must survive whatever clean is told.
    write_old_run(outside / "run")
    (root / "ext").symlink_to(outside / "run", target_is_directory=True)
    (root / "linkfile").mkdir()
    (root / "linkfile" / "events.out.tfevents.1000000000.link").symlink_to(
        write_old_run(outside / "file", "events.out.tfevents.1000000000.target")
    )
    os.utime(root / "linkfile" / "events.out.tfevents.1000000000.link", (OLD, OLD), follow_symlinks=False)
    assert old.exists()
    return root, outside


def tree(root: Path) -> dict[str, int]:
    """Every path under root (symlinks not followed) with its size: a snapshot."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.lstat().st_size
    return out


def clean_json(*args: str):
    r = run("clean", *args, "--format", "json")
    assert r.exit_code == 0, r.output
    return {row["run"]: row for row in json.loads(r.stdout)}, r


def test_clean_dry_run_is_the_default_and_changes_nothing(retention):
    root, outside = retention
    before, before_out = tree(root), tree(outside)
    rows, r = clean_json(str(root), "--older-than", "30d")
    assert tree(root) == before and tree(outside) == before_out
    assert set(rows) == {"old", "nested", "zero", "header/deep", "nodata", "ext", "linkfile"}
    assert rows["old"]["action"] == "would delete"
    assert rows["old"]["bytes"] == (root / "old" / "events.out.tfevents.1000000000.old").stat().st_size
    assert rows["old"]["last_activity"].startswith("2001-09-09")
    assert rows["ext"]["action"].startswith("skipped") and "outside the logdir" in rows["ext"]["action"]
    assert rows["linkfile"]["action"].startswith("skipped") and "symlink" in rows["linkfile"]["action"]
    freed = sum(row["bytes"] for row in rows.values() if row["action"] == "would delete")
    assert f"({freed} bytes) would be freed" in r.stderr and "--yes" in r.stderr
    # --dry-run said out loud is the same.
    again, _ = clean_json(str(root), "--older-than", "30d", "--dry-run")
    assert again == rows and tree(root) == before


def test_clean_delete_removes_only_event_files_and_never_leaves_the_logdir(retention):
    root, outside = retention
    before_out = tree(outside)
    rows, r = clean_json(str(root), "--older-than", "30d", "--yes")
    deleted = {run_ for run_, row in rows.items() if row["action"] == "deleted"}
    assert deleted == {"old", "nested", "zero", "header/deep", "nodata"}
    assert tree(outside) == before_out  # the symlinks' targets survive
    assert (root / "ext").is_symlink() and (root / "linkfile" / "events.out.tfevents.1000000000.link").is_symlink()
    after = tree(root)
    assert "old/model.ckpt" in after and not any("tfevents" in p for p in after if p.startswith("old/"))
    assert not (root / "zero").exists() and not (root / "header").exists()  # left empty: removed
    assert not (root / "nodata").exists()
    assert any(p.startswith("nested/live/events.out.tfevents") for p in after)  # a live nested run stays
    assert any(p.startswith("fresh/events.out.tfevents") for p in after)
    assert tbscope.scan(root).runs == ["ext", "fresh", "linkfile", "nested/live"]
    freed = sum(row["bytes"] for row in rows.values() if row["action"] == "deleted")
    assert f"({freed} bytes) freed" in r.stderr


def test_clean_empty_and_no_data(retention):
    root, _ = retention
    rows, _ = clean_json(str(root), "--empty")
    assert set(rows) == {"zero", "header/deep"}
    rows, _ = clean_json(str(root), "--no-data")
    assert set(rows) == {"zero", "header/deep", "nodata"}
    assert rows["nodata"]["reason"] == "no data"


def test_clean_rules_combine_with_and(retention, tmp_path):
    from tensorboardX import SummaryWriter

    root, _ = retention
    SummaryWriter(str(root / "just-started")).close()  # a header only, written now
    rows, _ = clean_json(str(root), "--empty")
    assert "just-started" in rows
    rows, _ = clean_json(str(root), "--empty", "--older-than", "1d")
    assert set(rows) == {"zero", "header/deep"}
    assert rows["zero"]["reason"].startswith("idle ") and rows["zero"]["reason"].endswith("; empty")


def test_clean_before_date(retention):
    root, _ = retention
    rows, _ = clean_json(str(root), "--before", "2001-09-10T00:00+00:00", "--runs", "old")
    assert set(rows) == {"old"}
    rows, _ = clean_json(str(root), "--before", "2001-09-08T00:00+00:00")
    assert rows == {}


def test_clean_age_uses_the_newest_of_wall_time_and_mtime(retention):
    root, _ = retention
    ev = root / "old" / "events.out.tfevents.1000000000.old"
    os.utime(ev)  # touched now: the events are old, the file is not
    rows, _ = clean_json(str(root), "--older-than", "30d")
    assert "old" not in rows


def test_clean_archive(retention, tmp_path):
    root, outside = retention
    dest = tmp_path / "archive"
    ev = root / "old" / "events.out.tfevents.1000000000.old"
    data = ev.read_bytes()
    rows, _ = clean_json(
        str(root), "--older-than", "30d", "--runs", "old", "--runs", "header/*", "--archive", str(dest), "--yes"
    )
    assert {r_: row["action"] for r_, row in rows.items()} == {"old": "archived", "header/deep": "archived"}
    assert (dest / "old" / ev.name).read_bytes() == data and not ev.exists()
    assert (dest / "header" / "deep" / "events.out.tfevents.1000000000.old").exists()
    assert tbscope.read_scalars(dest / "old")["value"].tolist() == [float(np.float32(1 / (s + 1))) for s in range(3)]
    # Archiving never overwrites: the same run again fails, and its file stays.
    write_old_run(root / "old")
    r = run("clean", str(root), "--older-than", "30d", "--runs", "old", "--archive", str(dest), "--yes")
    assert r.exit_code == 1
    assert "already exists" in r.output and ev.exists()


@pytest.mark.parametrize(
    "extra, words",
    [
        ([], ["at least one of --older-than"]),
        (["--older-than", "30x"], ["30x", "30d"]),
        (["--older-than", "1 month"], ["1 month"]),
        (["--before", "yesterday"], ["yesterday", "ISO 8601"]),
        (["--empty", "--dry-run", "--yes"], ["--dry-run", "--yes"]),
        (["--empty", "--delete", "--archive", "x"], ["--delete", "--archive"]),
        (["--empty", "--archive", "{root}/inside"], ["inside the logdir"]),
    ],
)
def test_clean_usage_errors(retention, extra, words):
    root, _ = retention
    before = tree(root)
    r = run("clean", str(root), *[e.format(root=root) for e in extra])
    assert r.exit_code == 2, r.output
    line = one_line_error(r)
    for w in words:
        assert w in line
    assert tree(root) == before


def test_clean_refuses_a_single_file(corrupt):
    r = run("clean", str(corrupt / "run" / NAME), "--empty")
    assert r.exit_code == 2


def test_parse_age_and_date():
    from tbscope._clean import parse_age, parse_date

    assert parse_age("30d") == 30 * 86400
    assert parse_age("12h") == 12 * 3600
    assert parse_age("90m") == 90 * 60
    assert parse_age("1d12h") == 36 * 3600
    assert parse_age("2w") == 14 * 86400
    assert parse_age("1.5h") == 5400
    for bad in ("", "d", "30", "30dd", "-1d", "1y"):
        with pytest.raises(ValueError):
            parse_age(bad)
    assert parse_date("2026-01-01T00:00+00:00") == 1767225600.0


# --------------------------------------------------------------------------------------------
# real processes: progress on a terminal, pipes, symlinks
# --------------------------------------------------------------------------------------------


def test_spinner_only_when_stderr_is_a_terminal(clean):
    import pty

    env = dict(os.environ, COLUMNS="120")
    master, slave = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "tbscope", "ls", str(clean), "--format", "csv"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    ) as p:
        os.close(slave)
        out = p.stdout.read()
        assert p.wait(timeout=60) == 0
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert b"reading " + str(clean).encode() in err
    assert out.decode().startswith("run,kinds,")  # data still goes to stdout, uncoloured
    r = _proc(sys.executable, "-m", "tbscope", "ls", str(clean), "--format", "csv")
    assert r.returncode == 0 and r.stderr == ""  # no terminal: no spinner


@needs_sql
def test_closed_pipe_exits_quietly(clean):
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tbscope",
            "sql",
            str(clean),
            "SELECT range AS i FROM range(2000000)",
            "--format",
            "csv",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as p:
        assert p.stdout.readline() == b"i\n"
        p.stdout.close()  # like `| head -1`
        err = p.stderr.read()
        assert p.wait(timeout=60) == 0
    assert err == b"", err.decode()


def test_clean_in_a_real_process_keeps_the_symlink_target(retention):
    root, outside = retention
    before = tree(outside)
    r = _proc(sys.executable, "-m", "tbscope", "clean", str(root), "--older-than", "1d", "--yes")
    assert r.returncode == 0, r.stderr
    assert tree(outside) == before
    assert "outside the logdir" in r.stdout and "deleted" in r.stdout
    assert "WARNING tbscope: ext:" in r.stderr


# --------------------------------------------------------------------------------------------
# what could not be read is never hidden; export and sql safety; glob escapes
# --------------------------------------------------------------------------------------------


def _as_nobody(*args: str) -> subprocess.CompletedProcess:
    """``python -m tbscope ARGS`` as an unprivileged user: as root (CI), under ``setpriv``,
    since permission bits deny root nothing."""
    cmd = [sys.executable, "-m", "tbscope", *args]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture()
def unreadable():
    """A logdir in a directory anyone may enter: run ``a`` intact, run ``b`` whose event file
    cannot be opened, and a run directory ``c`` that cannot be listed; plus a directory anyone
    may write to, for outputs."""
    import shutil
    import tempfile

    if (
        os.geteuid() == 0
        and not Path("/usr/bin/setpriv").exists()
        and not any(Path(p, "setpriv").exists() for p in os.environ.get("PATH", "").split(":"))
    ):
        pytest.skip("running as root without setpriv: permissions cannot deny anything")
    base = Path(tempfile.mkdtemp(prefix="tbscope-unread-"))
    os.chmod(base, 0o755)
    root = base / "logdir"
    records = b"".join(frame(scalar_event("loss", s, float(s))) for s in range(5))
    for run_name in "abc":
        (root / run_name).mkdir(parents=True)
        (root / run_name / NAME).write_bytes(records)
    for d in (root, *(root / r for r in "abc")):
        os.chmod(d, 0o755)
    for r in "abc":
        os.chmod(root / r / NAME, 0o644)
    out = base / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    os.chmod(root / "b" / NAME, 0)
    os.chmod(root / "c", 0)
    try:
        yield root, out
    finally:
        os.chmod(root / "c", 0o755)
        os.chmod(root / "b" / NAME, 0o644)
        shutil.rmtree(base)


READING = {
    "ls": ["ls", "{root}", "--format", "csv"],
    "tags": ["tags", "{root}", "--format", "csv"],
    "summary": ["summary", "{root}", "--format", "csv"],
    "summary-json": ["summary", "{root}", "--format", "json"],
    "group-by": ["summary", "{root}", "--group-by", "(.)", "--format", "csv"],
    "sql": ["sql", "{root}", "SELECT count(*) AS n FROM scalars", "--format", "csv"],
    "export": ["export", "{root}", "-o", "{out}/x.csv", "--format", "csv"],
    "clean": ["clean", "{root}", "--no-data", "--yes", "--format", "csv"],
    "rewrite": ["rewrite", "{root}", "-o", "{out}/rewritten"],
}


@pytest.mark.skipif(os.name != "posix", reason="needs permission bits")
@pytest.mark.parametrize("command", list(READING))
def test_reading_commands_print_what_they_could_not_read_and_exit_1(unreadable, command):
    # Before: `ls` showed run b as an empty run and `sql` counted 0 for it, both with exit 0
    # and nothing on stderr.
    if command == "sql" and not _has("duckdb"):
        pytest.skip("duckdb is not installed")
    root, out = unreadable
    r = _as_nobody(*(a.format(root=root, out=out) for a in READING[command]))
    assert r.returncode == 1, (r.stdout, r.stderr)
    if command == "rewrite":
        # A rewrite would silently lose the data: it refuses and writes nothing.
        assert "Permission denied" in r.stderr and "would miss its data" in r.stderr
        assert list(out.iterdir()) == []
        return
    err = r.stderr.splitlines()
    assert f"Error: cannot read b/{NAME}: cannot open: Permission denied (os error 13)" in err, r.stderr
    assert "Error: cannot read c: cannot list directory: Permission denied (os error 13)" in err, r.stderr
    assert "Traceback" not in r.stderr
    # What could be read is still there.
    if command == "sql":
        assert r.stdout.splitlines() == ["n", "5"]
    elif command == "export":
        assert pd.read_csv(out / "x.csv")["run"].tolist() == ["a"] * 5
    elif command == "clean":
        # --no-data picks run b (it read as empty) but it is never removed: its file may hold data.
        assert "could not be read whole" in r.stdout and (root / "b").exists()
    else:
        assert "a" in r.stdout


def test_a_dangling_event_file_is_an_error_in_process(clean, tmp_path):
    import shutil

    root = tmp_path / "logdir"
    shutil.copytree(clean, root)
    (root / "run0" / "events.out.tfevents.9.gone").symlink_to(tmp_path / "nowhere")
    r = run("ls", str(root), "--format", "csv")
    assert r.exit_code == 1
    assert r.stdout.startswith("run,") and "run1" in r.stdout
    assert "Error: cannot read run0/events.out.tfevents.9.gone: cannot open" in r.stderr


def test_ls_over_damaged_records_exits_0(corrupt):
    # Damaged records are not I/O errors: they keep their own path (tbscope check).
    r = run("ls", str(corrupt))
    assert r.exit_code == 0 and r.stderr == ""


def test_export_refuses_an_existing_output_unless_force(clean, tmp_path):
    out = tmp_path / "x.csv"
    out.write_text("keep me")
    r = run("export", str(clean), "-o", str(out))
    assert r.exit_code == 2 and "--force" in one_line_error(r)
    assert out.read_text() == "keep me"
    r = run("export", str(clean), "-o", str(out), "--force", "--format", "json")
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(out)) == len(tbscope.read_scalars(clean))


def test_export_never_writes_over_an_input_event_file(clean, tmp_path):
    import shutil

    root = tmp_path / "logdir"
    shutil.copytree(clean, root)
    victim = next(root.rglob("*tfevents*"))
    before = victim.read_bytes()
    # Before: this replaced the event file with CSV.
    for extra in ([], ["--force"]):
        r = run("export", str(root), "-o", str(victim), "--to", "csv", *extra)
        assert r.exit_code == 2 and "named like an event file" in one_line_error(r)
    assert victim.read_bytes() == before
    r = run("export", str(root), "-o", str(root / "all.parquet"))
    assert r.exit_code == 0, r.output


@needs_sql
def test_sql_external_access_is_an_opt_in(clean, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    q = f"SELECT content FROM read_text('{secret}')"
    r = run("sql", str(clean), q)
    assert r.exit_code == 2 and "--external-access" in one_line_error(r) and "hunter2" not in r.output
    r = run("sql", str(clean), q, "--external-access", "--format", "csv")
    assert r.exit_code == 0 and "hunter2" in r.stdout


def test_a_glob_escape_for_a_literal_bracket(tmp_path):
    # Before: '[[]abc]' failed with "unclosed character class".
    records = b"".join(frame(scalar_event("loss", s, float(s))) for s in range(3))
    for name in ("[abc]", "a", "[x]"):
        (tmp_path / name).mkdir()
        (tmp_path / name / NAME).write_bytes(records)
    for glob, want in (
        ("[[]abc]", ["[abc]"]),
        ("[[]*", ["[abc]", "[x]"]),
        ("[]a]", ["a"]),
        ("[!a]*", ["[abc]", "[x]"]),
    ):
        r = run("ls", str(tmp_path), "--runs", glob, "--format", "csv")
        assert r.exit_code == 0, r.output
        assert pd.read_csv(io.StringIO(r.stdout))["run"].tolist() == want, glob


def test_every_command_reading_a_logdir_takes_the_shared_scan_options():
    # One decorator (logdir_options) gives LOGDIR and the scan flags: a command that grew its own
    # copy would drift from the others (help text, parsing of --steps, --cache-dir checks).
    from tbscope._cli.main import _iter_commands

    for name, cmd in _iter_commands():
        if name == "serve":  # LOGDIR may be name:path pairs; the server parses its own
            continue
        if name == "cache":  # reads no logdir: its commands list and delete caches
            continue
        params = {p.name: p for p in cmd.params}
        assert isinstance(params.get("logdir"), click.Argument), name
        assert cmd.params[0].name == "logdir", name
        assert "--runs" in params["runs"].opts, name
        help_text = cmd.get_help(click.Context(cmd, info_name=name))
        assert "Only runs matching the glob" in help_text, name


def test_cache_dir_with_no_cache_is_a_usage_error(tmp_path):
    r = CliRunner().invoke(main, ["ls", str(tmp_path), "--no-cache", "--cache-dir", str(tmp_path / "c")])
    assert r.exit_code == 2, r.output
    assert "--no-cache and --cache-dir contradict each other" in r.output
