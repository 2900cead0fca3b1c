"""torch.profiler's traces, written by real torch during the test, read by tbscope: listed by
``Logdir.profiles()`` next to torch's own SummaryWriter logs, and opened as the events the
file holds (read independently with ``json``)."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.tensorboard import SummaryWriter

import tbscope


@pytest.mark.parametrize("use_gzip", [False, True])
def test_torch_profiler_trace_is_listed_and_opened(tmp_path, use_gzip):
    run = tmp_path / "run"
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    x = torch.randn(4, 8)
    with SummaryWriter(str(run)) as w:
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
            on_trace_ready=tensorboard_trace_handler(str(run), worker_name="worker0", use_gzip=use_gzip),
        ) as p:
            for step in range(4):
                loss = model(x).sum()
                loss.backward()
                w.add_scalar("loss", loss.item(), step)
                p.step()

    lg = tbscope.scan(tmp_path)
    listing = lg.profiles().to_pandas()
    assert len(listing) == 1
    row = listing.iloc[0]
    assert (row["run"], row["host"], row["format"], row["source"]) == ("run", "worker0", "chrome_trace", "torch")
    path = tmp_path / row["path"]
    assert path.name.endswith(".pt.trace.json.gz" if use_gzip else ".pt.trace.json")
    assert row["size"] == path.stat().st_size
    assert lg.runs == ["run"] and len(lg.scalars()) == 4

    raw = path.read_bytes()
    events = [e for e in json.loads(gzip.decompress(raw) if use_gzip else raw)["traceEvents"] if e.get("ph") != "M"]
    df = lg.profile(row["path"]).events.to_pandas()
    assert len(df) == len(events)
    assert df["name"].tolist() == [e.get("name", "") for e in events]
    complete = [e for e in events if e["ph"] == "X"]
    assert df[df["phase"] == "X"]["duration"].tolist() == [e["dur"] for e in complete]
    assert df["start"].tolist() == [e["ts"] for e in events]

    top = lg.profile(row["path"]).top_operations(n=None)
    assert dict(zip(top["name"], top["calls"])) == dict(Counter(e["name"] for e in complete))
    assert {"aten::addmm", "aten::relu"} <= set(top["name"])
    steps = top[top["name"].str.startswith("ProfilerStep#")]
    assert len(steps) == 2  # the two active steps of the schedule
