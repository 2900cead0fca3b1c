"""Benchmarks of `tbscope serve` (issue 12's targets), with TensorBoard side by side.

1. **Latency, one client.** A logdir of 1,000 runs x 4 scalar tags x 10,000 steps written with
   tbscope's writer; one tag across all runs, downsampled to 1,000 points per run, as Arrow IPC:
   p50 and p99 over repeated requests on a loaded server (the first request, which builds the
   tag's index, is reported on its own).
2. **Latency, 16 clients.** The same request on 100 runs from 16 concurrent clients (threads
   with keep-alive connections, a fixed number of requests each): errors, p50, p99.
3. **Cold start** on the 10M-event benchmark corpus (`bench/corpus.py`, 40 runs): from launching
   `tbscope serve` to the first complete answer for one tag across all runs, every point; without
   the cache, with an empty cache, and restarted on a warm cache. TensorBoard 2.21
   (`tensorboard --logdir`, its Rust loader) side by side: its first answer, and the time until
   that tag is complete in all 40 runs (sampled to 1,000 points each, as it serves them).
4. **Memory.** Peak RSS of the server with the 10M corpus loaded and the tag served, minus an idle
   server's (empty logdir), against the bytes of the Arrow columns it holds.

    .venv/bin/python bench/serve.py            # everything (generates the corpora once)
    .venv/bin/python bench/serve.py --quick    # small corpora, a smoke test

Results go to bench/results/serve.md and .json; bench/README.md has the figures and their
conditions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
CORPUS_ROOT = Path(os.environ.get("TBSCOPE_BENCH_CORPUS_DIR", BENCH / ".corpus"))
sys.path.insert(0, str(BENCH))
from corpus import CorpusSpec, ensure_corpus, tag_names  # noqa: E402

VENV_BIN = Path(sys.executable).parent
ARROW = "application/vnd.apache.arrow.stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    if not v:
        return math.nan
    k = (len(v) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), seconds: unlike wall
    time, it does not grow when other processes take the CPUs."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_peak(pid: int) -> int:
    """VmHWM (peak resident set) of a process, bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


# --------------------------------------------------------------------------------------------
# the 1,000-run corpus, written with tbscope's own writer


def many_runs_corpus(root: Path, runs: int, tags: int, steps: int) -> Path:
    import numpy as np
    import tbscope

    path = root / f"serve-{runs}r-{tags}t-{steps}s"
    marker = path / "corpus.json"
    if marker.exists():
        return path
    partial = path.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    names = [f"train/loss_{i}" if i else "train/loss" for i in range(tags)]
    t0 = time.time()
    x = np.arange(steps)
    for r in range(runs):
        rng = np.random.default_rng(r)
        values = np.exp(-x / (2000 + r))[None, :] + rng.normal(0, 0.01, (tags, steps))
        with tbscope.SummaryWriter(partial / f"sweep_{r // 100:02d}/run_{r:04d}", flush_secs=3600) as w:
            for s in range(steps):
                w.log(s, {names[t]: float(values[t, s]) for t in range(tags)})
        if r % 100 == 99:
            print(f"  {r + 1}/{runs} runs written ({time.time() - t0:.0f} s)", flush=True)
    (partial / "corpus.json").write_text(json.dumps({"runs": runs, "tags": tags, "steps": steps}))
    partial.rename(path)
    return path


# --------------------------------------------------------------------------------------------
# servers as separate processes


class Proc:
    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        self.err: list[bytes] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.err.append(line)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGINT)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def tbscope_serve(logdir: Path, port: int, *extra: str, env: dict[str, str] | None = None) -> Proc:
    return Proc(
        [str(VENV_BIN / "tbscope"), "serve", str(logdir), "--port", str(port), "--reload_interval", "0", *extra],
        env=env,
    )


def http(
    url: str, headers: dict[str, str] | None = None, data: bytes | None = None, timeout: float = 120
) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0, b"", {}


def wait_first_answer(url: str, deadline: float) -> float | None:
    while time.perf_counter() < deadline:
        code, _, _ = http(url, timeout=5)
        if code == 200:
            return time.perf_counter()
        time.sleep(0.01)
    return None


# --------------------------------------------------------------------------------------------
# 1 and 2: latency on the 1,000-run corpus


def latency(logdir: Path, tag: str, repeats: int, clients: int, per_client: int, runs_subset: int) -> dict[str, Any]:
    import pyarrow as pa

    port = free_port()
    cache = tempfile.mkdtemp(prefix="tbscope-bench-cache-")
    env = {**os.environ, "TBSCOPE_CACHE_DIR": cache}
    proc = tbscope_serve(logdir, port, env=env)
    base = f"http://127.0.0.1:{port}/api/v1/"
    out: dict[str, Any] = {}
    try:
        if wait_first_answer(base + "status", time.perf_counter() + 120) is None:
            raise RuntimeError(b"".join(proc.err).decode())
        while not json.loads(http(base + "status")[1])["loading"]["done"]:
            time.sleep(0.05)
        out["load_seconds"] = time.perf_counter() - proc.t0
        # The server writes its cache on a thread of its own after loading (docs/server.md,
        # "The cache"): time the requests once that is done, or the write's CPU (counted in the
        # server's per-request CPU) and its contention are measured with them.
        deadline = time.perf_counter() + 300
        while not any(Path(cache).glob("*/CURRENT")) and time.perf_counter() < deadline:
            time.sleep(0.1)
        out["cache_written_s"] = time.perf_counter() - proc.t0
        url = base + f"scalars?tag={tag}&points=1000"
        t = time.perf_counter()
        c0 = cpu_seconds(proc.p.pid)
        code, body, _ = http(url, {"Accept": ARROW})
        out["first_request_ms"] = (time.perf_counter() - t) * 1000
        out["first_request_server_cpu_ms"] = (cpu_seconds(proc.p.pid) - c0) * 1000
        table = pa.ipc.open_stream(body).read_all()
        out["runs_in_answer"] = len(json.loads(table.schema.metadata[b"tbscope.series"]))
        out["rows_in_answer"] = table.num_rows
        out["answer_bytes"] = len(body)
        times = []
        client_cpu = []
        c0 = cpu_seconds(proc.p.pid)
        for _ in range(repeats):
            t, tc = time.perf_counter(), time.thread_time()
            code, body, _ = http(url, {"Accept": ARROW})
            times.append((time.perf_counter() - t) * 1000)
            client_cpu.append((time.thread_time() - tc) * 1000)
            assert code == 200
        server_cpu = (cpu_seconds(proc.p.pid) - c0) * 1000 / repeats
        out["one_client"] = {
            "requests": repeats,
            "p50_ms": percentile(times, 0.5),
            "p99_ms": percentile(times, 0.99),
            "server_cpu_ms_per_request": server_cpu,
            "client_cpu_ms_p50": percentile(client_cpu, 0.5),
        }
        # 16 clients, the same request on 100 runs (POST: the run list is long).
        runs = json.loads(http(base + f"runs?limit={runs_subset}")[1])["columns"]["run"][:runs_subset]
        body_req = json.dumps({"tag": tag, "runs": runs, "points": 1000}).encode()
        lat: list[float] = []
        errors = 0
        lock = threading.Lock()

        def client() -> None:
            nonlocal errors
            import http.client as hc

            conn = hc.HTTPConnection("127.0.0.1", port, timeout=120)
            for _ in range(per_client):
                t0 = time.perf_counter()
                try:
                    conn.request(
                        "POST",
                        "/api/v1/scalars",
                        body=body_req,
                        headers={"Accept": ARROW, "Content-Type": "application/json"},
                    )
                    r = conn.getresponse()
                    r.read()
                    ok = r.status == 200
                except Exception:  # counted as an error
                    ok = False
                    conn.close()
                    conn = hc.HTTPConnection("127.0.0.1", port, timeout=120)
                dt = (time.perf_counter() - t0) * 1000
                with lock:
                    lat.append(dt)
                    errors += 0 if ok else 1
            conn.close()

        threads = [threading.Thread(target=client) for _ in range(clients)]
        c0 = cpu_seconds(proc.p.pid)
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        out["concurrent"] = {
            "clients": clients,
            "requests": len(lat),
            "errors": errors,
            "p50_ms": percentile(lat, 0.5),
            "p99_ms": percentile(lat, 0.99),
            "seconds": time.perf_counter() - t0,
            "runs": len(runs),
            "server_cpu_ms_per_request": (cpu_seconds(proc.p.pid) - c0) * 1000 / max(1, len(lat)),
        }
    finally:
        proc.stop()
        shutil.rmtree(cache, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------
# 3 and 4: cold start and memory on the 10M corpus, TensorBoard side by side


def tbscope_cold(logdir: Path, tag: str, runs: int, cache_dir: str | None, label: str) -> dict[str, Any]:
    import pyarrow as pa

    port = free_port()
    env = dict(os.environ)
    extra: list[str] = []
    if cache_dir is None:
        extra.append("--no-cache")
    else:
        env["TBSCOPE_CACHE_DIR"] = cache_dir
    # A cache generation published by this server, not an earlier one (the restart's).
    had_cache = cache_dir is not None and any(Path(cache_dir).glob("*/CURRENT"))
    proc = tbscope_serve(logdir, port, *extra, env=env)
    base = f"http://127.0.0.1:{port}/api/v1/"
    deadline = time.perf_counter() + 300
    first = wait_first_answer(base + "status", deadline)
    complete = None
    expected_points = None
    while first is not None and time.perf_counter() < deadline:
        code, body, _ = http(base + f"scalars?tag={tag}&points=0", {"Accept": ARROW})
        if code == 200:
            t = pa.ipc.open_stream(body).read_all()
            meta = t.schema.metadata
            series = json.loads(meta[b"tbscope.series"])
            if meta[b"tbscope.loading"] == b"false" and len(series) == runs:
                complete = time.perf_counter()
                expected_points = t.num_rows
                break
        time.sleep(0.005)
    cpu = cpu_seconds(proc.p.pid)
    # The API is built when a request needs it or once the server is idle after the load: one
    # small request of it gives the CPU of the whole start-up beside that of the answer.
    http(base + "runs?limit=1")
    cpu_with_api = cpu_seconds(proc.p.pid)
    # The server writes its cache after the answer (docs/server.md, "The cache"): wait for the
    # generation (stopping would abandon it, and the restart below would find no cache). The
    # time is when this poll, which starts after the answer, saw it.
    cache_written = None
    if cache_dir is not None and not had_cache:
        while time.perf_counter() < deadline:
            if any(Path(cache_dir).glob("*/CURRENT")):
                cache_written = time.perf_counter()
                break
            time.sleep(0.01)
    peak = rss_peak(proc.p.pid)
    proc.stop()
    return {
        "label": label,
        "first_answer_s": None if first is None else first - proc.t0,
        "complete_s": None if complete is None else complete - proc.t0,
        "cpu_s": cpu,
        "cpu_with_api_s": cpu_with_api,
        "cache_written_s": None if cache_written is None else cache_written - proc.t0,
        "points": expected_points,
        "peak_rss": peak,
    }


def idle_rss() -> int:
    empty = Path(tempfile.mkdtemp(prefix="tbscope-empty-"))
    port = free_port()
    proc = tbscope_serve(empty, port, "--no-cache")
    base = f"http://127.0.0.1:{port}/api/v1/"
    wait_first_answer(base + "status", time.perf_counter() + 60)
    http(base + "scalars?tag=x&points=0", {"Accept": ARROW})
    peak = rss_peak(proc.p.pid)
    proc.stop()
    shutil.rmtree(empty, ignore_errors=True)
    return peak


def column_bytes(logdir: Path, tag: str) -> int:
    """Bytes of the Arrow columns a server holds for the corpus: the scalar table, and the
    served tag's index (step, wall time, value)."""
    import tbscope

    lg = tbscope.scan(logdir)
    table = lg.scalars().to_arrow()
    n_tag = len(tbscope.scan(logdir, tags=[tag], kinds="scalars").scalars())
    return int(table.nbytes) + n_tag * 24


def tensorboard_cold(logdir: Path, tag: str, runs: int) -> dict[str, Any]:
    port = free_port()
    proc = Proc(
        [
            str(VENV_BIN / "tensorboard"),
            "--logdir",
            str(logdir),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--load_fast=true",
            "--reload_interval=1",
        ]
    )
    base = f"http://127.0.0.1:{port}/"
    deadline = time.perf_counter() + 300
    first = wait_first_answer(base + "data/runs", deadline)
    complete = None
    while first is not None and time.perf_counter() < deadline:
        code, body, _ = http(base + "data/runs")
        names = json.loads(body) if code == 200 else []
        if len(names) >= runs:
            form = urllib.parse.urlencode([("tag", tag)] + [("runs", r) for r in names]).encode()
            code, body, _ = http(
                base + "data/plugin/scalars/scalars_multirun",
                {"Content-Type": "application/x-www-form-urlencoded"},
                data=form,
            )
            if code == 200:
                got = json.loads(body)
                # Complete: every run has the tag up to its last step (TensorBoard keeps 1,000
                # points per series and always the last one).
                full = [r for r, pts in got.items() if pts and pts[-1][1] == STEPS_10M - 1]
                if len(full) == runs:
                    complete = time.perf_counter()
                    break
        time.sleep(0.05)
    cpu = cpu_seconds(proc.p.pid)  # its Rust loader is a child process: not counted here
    peak = rss_peak(proc.p.pid)
    proc.stop()
    return {
        "label": "TensorBoard 2.21 (--load_fast=true)",
        "cpu_s": cpu,
        "first_answer_s": None if first is None else first - proc.t0,
        "complete_s": None if complete is None else complete - proc.t0,
        "peak_rss": peak,
    }


STEPS_10M = 10_000


def main() -> int:
    global STEPS_10M
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small corpora (a smoke test)")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--skip-tensorboard", action="store_true")
    ap.add_argument("--only", default="latency,cold", help="latency, cold (cold start and memory), or both")
    args = ap.parse_args()

    out_dir = BENCH / "results"
    out_dir.mkdir(exist_ok=True)
    runs, tags, steps = (50, 4, 2000) if args.quick else (1000, 4, 10_000)
    spec = CorpusSpec(runs=4, tags=5, steps=1000) if args.quick else CorpusSpec(runs=40, tags=25, steps=10_000)
    STEPS_10M = spec.steps
    results: dict[str, Any] = {"quick": args.quick, "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    only = set(args.only.split(","))
    previous = out_dir / "serve.json"
    if only != {"latency", "cold"} and previous.exists():
        results = {**json.loads(previous.read_text()), **results}  # keep the other part's figures
    if "latency" in only:
        print(f"corpus of {runs} runs x {tags} tags x {steps} steps (tbscope's writer)", flush=True)
        many = many_runs_corpus(CORPUS_ROOT, runs, tags, steps)
        print("latency...", flush=True)
        results["latency"] = latency(many, "train/loss", args.repeats, 16, 8 if args.quick else 20, min(100, runs))
        print(json.dumps(results["latency"], indent=1), flush=True)
    if "cold" not in only:
        results["load_average_end"] = os.getloadavg()
        (out_dir / "serve.json").write_text(json.dumps(results, indent=1))
        print(render(results))
        return 0
    corpus = ensure_corpus(spec, root=CORPUS_ROOT)
    tag = tag_names(spec.tags)[0]
    cold: list[dict[str, Any]] = []
    print("cold starts...", flush=True)
    cold.append(tbscope_cold(corpus.logdir, tag, spec.runs, None, "tbscope serve --no-cache"))
    cache = tempfile.mkdtemp(prefix="tbscope-bench-cache-")
    try:
        cold.append(tbscope_cold(corpus.logdir, tag, spec.runs, cache, "tbscope serve, empty cache"))
        cold.append(tbscope_cold(corpus.logdir, tag, spec.runs, cache, "tbscope serve, restart on the cache"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if not args.skip_tensorboard:
        cold.append(tensorboard_cold(corpus.logdir, tag, spec.runs))
    for c in cold:
        print(c, flush=True)
    results["cold"] = cold
    idle = idle_rss()
    cols = column_bytes(corpus.logdir, tag)
    results["memory"] = {
        "idle_rss": idle,
        "loaded_peak_rss": cold[0]["peak_rss"],
        "column_bytes": cols,
        "ratio": (cold[0]["peak_rss"] - idle) / cols,
    }
    print(results["memory"], flush=True)
    results["load_average_end"] = os.getloadavg()
    (out_dir / "serve.json").write_text(json.dumps(results, indent=1))
    (out_dir / "serve.md").write_text(render(results))
    print(render(results))
    return 0


def render(r: dict[str, Any]) -> str:
    lines = [
        f"load average at the start: {', '.join(f'{x:.1f}' for x in r['load_average'])} on {r['cpus']} CPUs"
        + (f"; at the end: {', '.join(f'{x:.1f}' for x in r['load_average_end'])}" if "load_average_end" in r else ""),
        "",
        "| target | measured | goal |",
        "|---|---|---|",
    ]
    if "latency" in r:
        lines += _latency_rows(r["latency"])
    if "cold" in r:
        lines += _cold_rows(r)
    return "\n".join(lines) + "\n"


def _latency_rows(lat: dict[str, Any]) -> list[str]:
    return [
        f"| one tag x {lat['runs_in_answer']} runs, 1,000 points each, Arrow, one client: p50 / p99 | {lat['one_client']['p50_ms']:.0f} / {lat['one_client']['p99_ms']:.0f} ms; server CPU {lat['one_client'].get('server_cpu_ms_per_request', math.nan):.0f} ms a request (first request {lat['first_request_ms']:.0f} ms, server CPU {lat.get('first_request_server_cpu_ms', math.nan):.0f} ms) | < 150 / < 400 ms |",
        f"| same on {lat['concurrent']['runs']} runs, {lat['concurrent']['clients']} clients x {lat['concurrent']['requests'] // lat['concurrent']['clients']} requests: errors, p50 / p99 | {lat['concurrent']['errors']}, {lat['concurrent']['p50_ms']:.0f} / {lat['concurrent']['p99_ms']:.0f} ms; server CPU {lat['concurrent'].get('server_cpu_ms_per_request', math.nan):.1f} ms a request | 0, < 300 ms / < 1 s |",
    ]


def _cold_rows(r: dict[str, Any]) -> list[str]:
    lines = []
    for c in r["cold"]:
        first = "-" if c["first_answer_s"] is None else f"{c['first_answer_s']:.2f} s"
        done = "-" if c["complete_s"] is None else f"{c['complete_s']:.2f} s"
        cpu = f"; CPU {c['cpu_s']:.2f} s" if c.get("cpu_s") is not None else ""
        if c.get("cpu_with_api_s") is not None:
            cpu += f" ({c['cpu_with_api_s']:.2f} s with the API built)"
        if c.get("cache_written_s") is not None:
            cpu += f"; cache published (seen) at {c['cache_written_s']:.2f} s"
        lines.append(
            f"| cold start, {c['label']}: first answer, tag complete in all runs | {first}, {done}{cpu} | tbscope < 1.5 s (cache: < 0.8 s) |"
        )
    m = r["memory"]
    lines.append(
        f"| memory: peak RSS {m['loaded_peak_rss'] / 2**20:.0f} MiB - idle {m['idle_rss'] / 2**20:.0f} MiB, vs {m['column_bytes'] / 2**20:.0f} MiB of columns | {m['ratio']:.2f}x | < 2x |"
    )
    return lines


if __name__ == "__main__":
    sys.exit(main())
