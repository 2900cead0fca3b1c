"""Profiles (issue 14): torch.profiler's Chrome traces and TensorBoard's profile plugin files,
listed by ``Logdir.profiles()``, opened by ``Logdir.profile()`` and served by ``tbscope serve``.

The trace is a real one (torch 2.13, tests/data/torch_profiler); expected values come from
reading that file with Python's ``json``, not from tbscope. ``tests/torch/test_profiles.py``
does the same with a trace torch writes during the test.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

import pytest
import tbscope
from server_util import get_json, request

TRACE = Path(__file__).resolve().parents[1] / "data" / "torch_profiler" / "hostA.1795710513538474591.pt.trace.json.gz"
SESSION = "2026_11_26_16_00_00"


def expected_events(path: Path) -> tuple[list[dict], dict, dict]:
    """The trace's timed events and its process and thread names, read with json."""
    raw = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    events = raw["traceEvents"] if isinstance(raw, dict) else raw
    procs = {str(e["pid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {
        (str(e["pid"]), str(e["tid"])): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    return [e for e in events if e.get("ph") != "M"], procs, threads


def _plugin_trace() -> bytes:
    """A trace in the layout TensorFlow's profiler gives the trace viewer (documented format):
    ``displayTimeUnit``, process and thread names, complete events, and a B/E pair."""
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:CPU:0"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "tf_Compute"}},
        {"ph": "X", "pid": 1, "tid": 2, "ts": 10.0, "dur": 100.0, "name": "MatMul", "cat": "op"},
        {"ph": "X", "pid": 1, "tid": 2, "ts": 20.0, "dur": 30.0, "name": "BiasAdd", "cat": "op"},
        {"ph": "B", "pid": 1, "tid": 3, "ts": 15.0, "name": "Iterator::GetNext"},
        {"ph": "E", "pid": 1, "tid": 3, "ts": 65.0},
    ]
    return gzip.compress(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}).encode())


@pytest.fixture
def logdir(tmp_path) -> Path:
    root = tmp_path / "logs"
    run = root / "torch_run"
    run.mkdir(parents=True)
    shutil.copy(TRACE, run / TRACE.name)
    with tbscope.SummaryWriter(run) as w:
        w.add_scalar("loss", 1.0, 0)
    session = root / "tf_run" / "plugins" / "profile" / SESSION
    session.mkdir(parents=True)
    (session / "worker0.trace.json.gz").write_bytes(_plugin_trace())
    (session / "worker0.xplane.pb").write_bytes(b"\x0a\x00")
    (root / "tf_run" / "notes.json").write_text("{}")  # not a profile
    return root


def test_profiles_are_listed(logdir):
    df = tbscope.scan(logdir).profiles().to_pandas()
    assert list(df.columns) == ["run", "session", "host", "time", "size", "format", "source", "path"]
    rows = {r["path"]: r for r in df.to_dict("records")}
    assert set(rows) == {
        f"torch_run/{TRACE.name}",
        f"tf_run/plugins/profile/{SESSION}/worker0.trace.json.gz",
        f"tf_run/plugins/profile/{SESSION}/worker0.xplane.pb",
    }
    t = rows[f"torch_run/{TRACE.name}"]
    assert (t["run"], t["session"], t["host"], t["format"], t["source"]) == (
        "torch_run",
        "",
        "hostA",
        "chrome_trace",
        "torch",
    )
    assert t["size"] == TRACE.stat().st_size
    # The file name's time stamp (nanoseconds) is when torch wrote it.
    assert abs(t["time"].value - 1795710513538474591) < 10_000
    p = rows[f"tf_run/plugins/profile/{SESSION}/worker0.trace.json.gz"]
    assert (p["run"], p["session"], p["host"], p["format"], p["source"]) == (
        "tf_run",
        SESSION,
        "worker0",
        "chrome_trace",
        "profile_plugin",
    )
    assert str(p["time"]) == "2026-11-26 16:00:00+00:00"
    assert rows[f"tf_run/plugins/profile/{SESSION}/worker0.xplane.pb"]["format"] == "xplane"
    # Profiles are not runs of the event logs.
    assert tbscope.scan(logdir).runs == ["torch_run"]


def test_torch_trace_opens_as_its_events(logdir):
    lg = tbscope.scan(logdir)
    prof = lg.profile(f"torch_run/{TRACE.name}")
    assert prof.info["host"] == "hostA"
    df = prof.events.to_pandas()
    assert list(df.columns) == [
        "name",
        "category",
        "phase",
        "start",
        "duration",
        "self_duration",
        "process",
        "thread",
        "pid",
        "tid",
        "args",
    ]
    events, procs, threads = expected_events(TRACE)
    assert len(df) == len(events)  # every non-metadata event, in order (no B/E here)
    for (_, row), ev in zip(df.iterrows(), events):
        assert (row["name"], row["category"], row["phase"]) == (ev.get("name", ""), ev.get("cat", ""), ev["ph"])
        assert row["start"] == ev["ts"]
        if ev["ph"] == "X":
            assert row["duration"] == ev["dur"]
        else:
            assert row["duration"] != row["duration"]  # NaN: no duration
        pid, tid = str(ev["pid"]), str(ev["tid"])
        assert (row["pid"], row["tid"]) == (pid, tid)
        assert row["process"] == procs.get(pid, pid) and row["thread"] == threads.get((pid, tid), tid)
        if "args" in ev:
            assert json.loads(row["args"]) == ev["args"]
    # Self time: a ProfilerStep's duration less its direct children's on the same thread.
    timed = [e for e in events if e["ph"] == "X"]
    step = next(e for e in timed if e["name"].startswith("ProfilerStep#"))
    inside = [
        e
        for e in timed
        if e is not step
        and (e["pid"], e["tid"]) == (step["pid"], step["tid"])
        and step["ts"] <= e["ts"]
        and e["ts"] + e["dur"] <= step["ts"] + step["dur"]
    ]
    direct = [
        e
        for e in inside
        if not any(
            o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and o["dur"] > e["dur"]
            for o in inside
        )
    ]
    row = df[(df["name"] == step["name"]) & (df["start"] == step["ts"])].iloc[0]
    assert row["self_duration"] == pytest.approx(step["dur"] - sum(e["dur"] for e in direct))
    # The same file by row number (the listing is sorted by run: tf_run's two files first).
    assert lg.profile(2).info == prof.info


def test_top_operations_match_the_trace(logdir):
    prof = tbscope.scan(logdir).profile(f"torch_run/{TRACE.name}")
    top = prof.top_operations(n=None)
    events, _, _ = expected_events(TRACE)
    calls: dict[tuple[str, str], int] = defaultdict(int)
    total: dict[tuple[str, str], float] = defaultdict(float)
    for e in events:
        if e["ph"] == "X":
            calls[(e["name"], e.get("cat", ""))] += 1
            total[(e["name"], e.get("cat", ""))] += e["dur"]
    assert len(top) == len(calls)
    for r in top.to_dict("records"):
        key = (r["name"], r["category"])
        assert r["calls"] == calls[key] and r["total"] == pytest.approx(total[key])
        assert 0 <= r["self_total"] <= r["total"] + 1e-9
    assert list(top["self_total"]) == sorted(top["self_total"], reverse=True)
    assert top["self_share"].sum() == pytest.approx(1.0)
    assert any(n.startswith("aten::") for n in prof.top_operations(10)["name"])


def test_plugin_trace_pairs_begin_and_end(logdir):
    prof = tbscope.scan(logdir).profile(f"tf_run/plugins/profile/{SESSION}/worker0.trace.json.gz")
    df = prof.events.to_pandas()
    rows = {r["name"]: r for r in df.to_dict("records")}
    assert rows["MatMul"]["self_duration"] == 70.0 and rows["BiasAdd"]["self_duration"] == 30.0
    assert rows["MatMul"]["process"] == "/device:CPU:0" and rows["MatMul"]["thread"] == "tf_Compute"
    assert (
        rows["Iterator::GetNext"]["phase"],
        rows["Iterator::GetNext"]["duration"],
        rows["Iterator::GetNext"]["thread"],
    ) == ("X", 50.0, "3")


def test_profile_errors_say_what_to_do(logdir, tmp_path):
    lg = tbscope.scan(logdir)
    with pytest.raises(ValueError, match="xplane file of the profile plugin"):
        lg.profile(f"tf_run/plugins/profile/{SESSION}/worker0.xplane.pb")
    with pytest.raises(FileNotFoundError, match="Logdir.profiles"):
        lg.profile("tf_run/notes.json")
    with pytest.raises(ValueError, match="not inside the logdir"):
        lg.profile(str(tmp_path / "elsewhere.pt.trace.json"))
    with pytest.raises(IndexError):
        lg.profile(99)
    bad = logdir / "torch_run" / "broken.1.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    with pytest.raises(ValueError, match="broken.1.pt.trace.json: not a Chrome trace"):
        lg.profile("torch_run/broken.1.pt.trace.json")


@pytest.fixture
def server(logdir):
    s = tbscope.serve(logdir, port=0, cache=False, reload_interval=0)
    assert s.wait_loaded(60)
    yield s
    s.stop()


def test_server_profile_endpoints(server, logdir):
    listing = get_json(server.url, "api/v1/profiles")["columns"]
    assert sorted(listing["file"]) == sorted(tbscope.scan(logdir).profiles().to_pandas()["path"])
    i = listing["file"].index(f"torch_run/{TRACE.name}")
    run, file = listing["run"][i], listing["file"][i]
    q = f"run={quote(run)}&file={quote(file)}"
    ev = get_json(server.url, f"api/v1/profile/events?{q}")
    events, _, _ = expected_events(TRACE)
    timed = [e for e in events if e["ph"] == "X"]
    assert ev["total"] == len(timed) and not ev["truncated"]
    assert ev["start_min"] == min(e["ts"] for e in timed)
    assert ev["end_max"] == pytest.approx(max(e["ts"] + e["dur"] for e in timed))
    assert sorted(ev["columns"]["name"]) == sorted(e["name"] for e in timed)
    assert {(lane["process"], lane["pid"]) for lane in ev["lanes"]} >= {("python", str(timed[0]["pid"]))}
    # A window keeps the events overlapping it; a limit keeps the longest.
    lo = ev["start_min"] + (ev["end_max"] - ev["start_min"]) / 2
    win = get_json(server.url, f"api/v1/profile/events?{q}&start={lo}&end={lo + 50}")
    assert win["total"] == sum(1 for e in timed if e["ts"] + e["dur"] >= lo and e["ts"] <= lo + 50)
    two = get_json(server.url, f"api/v1/profile/events?{q}&limit=2")
    assert (
        two["truncated"]
        and sorted(two["columns"]["duration"], reverse=True) == sorted((e["dur"] for e in timed), reverse=True)[:2]
    )
    ops = get_json(server.url, f"api/v1/profile/operations?{q}&limit=5")["columns"]
    want = tbscope.scan(logdir).profile(file).top_operations(5)
    assert ops["name"] == want["name"].tolist() and ops["calls"] == want["calls"].tolist()
    # ETags from the file: a revalidation is a 304 until the file changes.
    r = request(server.url, f"api/v1/profile/events?{q}")
    assert request(server.url, f"api/v1/profile/events?{q}", headers={"If-None-Match": r.headers["etag"]}).status == 304
    assert (
        request(
            server.url,
            "api/v1/profiles",
            headers={"If-None-Match": request(server.url, "api/v1/profiles").headers["etag"]},
        ).status
        == 304
    )


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("api/v1/profile/events?run=torch_run&file=../../../etc/passwd", 404),
        ("api/v1/profile/events?run=torch_run&file=/etc/passwd", 404),
        ("api/v1/profile/events?run=tf_run&file=tf_run/notes.json", 404),
        (f"api/v1/profile/events?run=tf_run&file=tf_run/plugins/profile/{SESSION}/worker0.xplane.pb", 400),
        (f"api/v1/profile/events?run=torch_run&file=torch_run/{TRACE.name}&start=5&end=1", 400),
        (f"api/v1/profile/operations?run=torch_run&file=torch_run/{TRACE.name}&limit=0", 400),
        ("api/v1/profile/events?run=torch_run", 400),
    ],
)
def test_server_profile_errors(server, path, status):
    r = request(server.url, path)
    assert r.status == status, r.body
    err = r.json()["error"]
    assert err["status"] == status and err["message"]


def test_server_sql_has_the_new_tables(server, logdir):
    """The server's SQL names the same tables as `tbscope sql`: profiles, logs, meshes, blobs."""
    from tbscope._query import TABLES
    from tbscope.server.sql import TABLES as SERVER_TABLES

    assert set(SERVER_TABLES) == set(TABLES)
    got = get_json(server.url, "api/v1/sql?q=" + quote("SELECT host, format FROM profiles ORDER BY path"))["columns"]
    assert got == {"host": ["worker0", "worker0", "hostA"], "format": ["chrome_trace", "xplane", "chrome_trace"]}
    for name in ("blobs", "meshes", "logs"):
        n = get_json(server.url, "api/v1/sql?q=" + quote(f"SELECT count(*) AS n FROM {name}"))["columns"]["n"][0]
        assert n == len(getattr(tbscope.scan(logdir), name)()), name


def test_profiles_name_runs_as_the_reader_does(tmp_path):
    # One run-name rule: a directory whose name is not UTF-8 names the same run for the
    # profiles and for the event logs (and can be put in the table at all).
    import os

    root = tmp_path / "logs"
    run = root / os.fsdecode(b"caf\xe9") / "a"
    run.mkdir(parents=True)
    shutil.copy(TRACE, run / TRACE.name)
    with tbscope.SummaryWriter(run) as w:
        w.add_scalar("loss", 1.0, 0)
    (nested := root / "top").mkdir()
    shutil.copy(TRACE, nested / TRACE.name)
    runs = tbscope.scan(root).runs
    assert len(runs) == 1 and runs[0].endswith("/a")
    df = tbscope.scan(root).profiles().to_pandas()
    assert sorted(df["run"]) == sorted([runs[0], "top"])


def test_server_opens_a_trace_under_a_name_that_is_not_utf8(tmp_path):
    # The listing's `file` is a display name (the reader's rule); the server must open the real
    # file behind it, not a path rebuilt from that name.
    import os

    root = tmp_path / "logs"
    run = root / os.fsdecode(b"caf\xe9")
    run.mkdir(parents=True)
    shutil.copy(TRACE, run / TRACE.name)
    s = tbscope.serve(root, port=0, cache=False, reload_interval=0)
    try:
        assert s.wait_loaded(60)
        listing = get_json(s.url, "api/v1/profiles")["columns"]
        assert len(listing["file"]) == 1
        q = f"run={quote(listing['run'][0])}&file={quote(listing['file'][0])}"
        ev = get_json(s.url, f"api/v1/profile/events?{q}")
        events, _, _ = expected_events(TRACE)
        assert ev["total"] == sum(1 for e in events if e["ph"] == "X")
    finally:
        s.stop()
