"""Dashboard benchmark: tbscope's dashboard and TensorBoard 2.21's, in headless chromium, on the
same logdir (200 runs x 50 scalar tags x 10,000 steps, written by tbscope's writer), each server
loaded before anything is timed.

    .venv/bin/python bench/dashboard.py                 # the issue's figures, medians of 20
    .venv/bin/python bench/dashboard.py --quick         # 8 runs x 10 tags x 1,000 steps, 3 reps
    .venv/bin/python bench/dashboard.py --no-tensorboard

Figures:
- first scalars chart painted after navigation: tbscope's own mark (set the frame after the first
  chart's draw), and for both dashboards the time at which a screenshot of the first chart first
  shows the runs' lines (polling, so coarser, but the same method for both);
- smoothing slider input -> next painted frame (200 runs x 1,000 points per chart): measured in
  the page for tbscope; for TensorBoard (its chart draws in a worker) the time until the chart's
  pixels change, by screenshot polling;
- scrolling through 50 chart cards: frame intervals (requestAnimationFrame) while the page
  scrolls at a steady 40 px per frame, p50/p95/max;
- initial JS + CSS gzipped, from the built index.html.

Results go to bench/results/dashboard.md and .json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CORPUS_ROOT = Path(os.environ.get("TBSCOPE_BENCH_CORPUS_DIR", BENCH / ".corpus"))
RESULTS = BENCH / "results"
STATIC = ROOT / "python" / "tbscope" / "server" / "static"
GENERATOR_VERSION = 1
# The e2e tests' chromium and its flags (one list for both).
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from browser_util import CHROMIUM  # noqa: E402 - after the path
from browser_util import CHROMIUM_ARGS as ARGS  # noqa: E402 - after the path

# The logdir ---------------------------------------------------------------------------------


def run_name(i: int) -> str:
    return f"sweep_{i // 20:02d}/trial_{i % 20:02d}"


def tag_names(n: int) -> list[str]:
    groups = ["train", "eval", "optim", "system", "grad"]
    return [f"{groups[k % len(groups)]}/metric_{k:02d}" for k in range(n)]


def _write_run(job: tuple[str, int, int, int]) -> None:
    import numpy as np
    import tbscope

    root, i, tags, steps = job
    names = tag_names(tags)
    rng = np.random.default_rng(i)
    s = np.arange(steps)
    cols = []
    for k in range(tags):
        decay = np.exp(-s / (steps / (2 + (i % 7))))
        cols.append(((1 + k % 3) * decay + 0.05 * rng.standard_normal(steps) + 0.01 * i).tolist())
    with tbscope.SummaryWriter(os.path.join(root, run_name(i))) as w:
        for step in range(steps):
            w.log(step, {names[k]: cols[k][step] for k in range(tags)})


def ensure_logdir(runs: int, tags: int, steps: int, jobs: int) -> Path:
    name = f"dashboard-{runs}r-{tags}t-{steps}s"
    path = CORPUS_ROOT / name
    marker = path / "corpus.json"
    spec = {"runs": runs, "tags": tags, "steps": steps, "generator_version": GENERATOR_VERSION}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return path
    partial = CORPUS_ROOT / (name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
    partial.mkdir(parents=True)
    t0 = time.perf_counter()
    print(f"writing {runs} runs x {tags} tags x {steps} steps with tbscope's writer ({jobs} processes)...", flush=True)
    with multiprocessing.Pool(jobs) as pool:
        for _ in pool.imap_unordered(_write_run, [(str(partial), i, tags, steps) for i in range(runs)]):
            pass
    (partial / "corpus.json").write_text(json.dumps(spec))
    partial.rename(path)
    print(f"  done in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


# Servers ------------------------------------------------------------------------------------


def get_json(url: str, timeout: float = 30) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def start_tbscope(logdir: Path) -> tuple[subprocess.Popen[str], str]:
    exe = Path(sys.executable).with_name("tbscope")
    proc = subprocess.Popen(
        [str(exe), "serve", str(logdir), "--port", "0", "--reload_interval", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    url = ""
    while time.monotonic() < deadline and not url:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
        if m:
            url = m.group(0).rstrip(".,)")
    if not url:
        proc.kill()
        raise RuntimeError("tbscope serve printed no URL")
    if not url.endswith("/"):
        url += "/"
    # Drain its output so it never blocks on a full pipe.
    import threading

    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    t0 = time.perf_counter()
    while not get_json(url + "api/v1/status")["loading"]["done"]:
        time.sleep(0.25)
    print(f"tbscope serve loaded in {time.perf_counter() - t0:.1f} s: {url}", flush=True)
    return proc, url


def start_tensorboard(
    logdir: Path, runs: int, tags: int, load_cap: float
) -> tuple[subprocess.Popen[bytes], str, float, bool]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("tensorboard")
    log = open(tempfile.mktemp(prefix="tensorboard-", suffix=".log"), "wb")
    proc = subprocess.Popen(
        [str(exe), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1", "--reload_interval", "5"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    t0 = time.perf_counter()
    # Loaded = every run lists every tag with its last step (RustBoard fills reservoirs as it goes).
    last = -1
    stable = 0
    loaded = False
    while time.perf_counter() - t0 < load_cap:
        try:
            tags_by_run = get_json(url + "data/plugin/scalars/tags")
            n = sum(len(v) for v in tags_by_run.values())
            if n >= runs * tags:
                any_run = next(iter(tags_by_run))
                any_tag = next(iter(tags_by_run[any_run]))
                pts = get_json(
                    url + "data/plugin/scalars/scalars?" + urllib.parse.urlencode({"run": any_run, "tag": any_tag})
                )
                stable = stable + 1 if pts and pts[-1][1] == last else 0
                last = pts[-1][1] if pts else -1
                if stable >= 2:
                    loaded = True
                    break
        except Exception:  # not answering yet
            pass
        time.sleep(2)
    took = time.perf_counter() - t0
    print(f"tensorboard {'loaded' if loaded else 'NOT loaded'} in {took:.0f} s: {url}", flush=True)
    return proc, url, took, loaded


# Measurements -------------------------------------------------------------------------------


def colored_pixels(png: bytes) -> int:
    """Pixels that are clearly a line colour: saturated, not the grey of grids and text."""
    import io

    import numpy as np
    from PIL import Image

    px = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)
    return int(((px.max(axis=2) - px.min(axis=2)) > 60).sum())


def poll_first_chart(page: Any, selector: str, t_nav: float, timeout: float = 60) -> float:
    """Seconds from navigation until the first chart's screenshot shows coloured lines."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        el = page.query_selector(selector)
        if el is not None:
            try:
                png = el.screenshot(timeout=5000)
                if colored_pixels(png) > 400:
                    return time.perf_counter() - t_nav
            except Exception:
                pass
        time.sleep(0.01)
    raise TimeoutError(f"no chart painted in {timeout} s ({selector})")


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def capped(xs: list[float | None], cap_ms: float, unit: str = "s") -> str:
    """Median of samples where None is "more than the cap": the median itself is "> cap" when
    half or more were capped; the count of capped samples is said."""
    if not xs:
        return "no sample"
    vals = sorted(math.inf if x is None else x for x in xs)
    m = statistics.median(vals)
    n_cap = sum(1 for x in xs if x is None)
    scale, fmt = (1000, "{:.1f} s") if unit == "s" else (1, "{:.0f} ms")
    text = f"> {fmt.format(cap_ms / scale)}" if math.isinf(m) else fmt.format(m / scale)
    lo = fmt.format(vals[0] / scale) if not math.isinf(vals[0]) else f"> {fmt.format(cap_ms / scale)}"
    hi = fmt.format(vals[-1] / scale) if not math.isinf(vals[-1]) else f"> {fmt.format(cap_ms / scale)}"
    extra = f"; {n_cap} of {len(xs)} over the cap" if n_cap else ""
    return f"{text} (n={len(xs)}, {lo} to {hi}{extra})"


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def cpu_session(page: Any) -> Any:
    """A DevTools session whose duration metrics count the renderer main thread's CPU time
    (thread ticks), which a loaded machine distorts far less than wall time."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    return cdp


def cpu_ms(cdp: Any) -> dict[str, float]:
    """Main-thread CPU so far, ms: all tasks, script, style, layout."""
    m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
    return {
        "task": 1000 * m["TaskDuration"],
        "script": 1000 * m["ScriptDuration"],
        "style": 1000 * m["RecalcStyleDuration"],
        "layout": 1000 * m["LayoutDuration"],
    }


def cpu_delta(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b[k] - a[k] for k in a}


def tbscope_first_chart(browser: Any, url: str, repeat: int) -> dict[str, Any]:
    marks: list[float] = []
    polled: list[float] = []
    steps: list[dict[str, float]] = []
    cpu: list[float] = []  # the page's main-thread CPU from navigation to the mark
    for i in range(repeat):
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        page = ctx.new_page()
        cdp = cpu_session(page) if i % 2 == 0 else None
        t0 = time.perf_counter()
        page.goto(url + "#scalars")
        if cdp is not None:
            page.wait_for_function(
                "() => performance.getEntriesByName('tbscope:first-chart-painted').length > 0", timeout=60_000
            )
            cpu.append(cpu_ms(cdp)["task"])
            marks.append(
                page.evaluate("() => performance.getEntriesByName('tbscope:first-chart-painted')[0].startTime")
            )
            # Where the time went: the page's own marks (ms after navigation).
            steps.append(
                page.evaluate(
                    """() => { const m = (n) => (performance.getEntriesByName(n)[0] || {}).startTime;
                    const f = performance.getEntriesByName('tbscope:scalars-fetch')[0];
                    const d = performance.getEntriesByName('tbscope:chart-draw')[0];
                    return {status: m('tbscope:status'), runs: m('tbscope:runs'), tags: m('tbscope:tags'),
                            first_fetch_start: f && f.startTime, first_fetch_ms: f && f.duration,
                            first_draw_ms: d && d.duration, painted: m('tbscope:first-chart-painted')}; }"""
                )
            )
        else:
            polled.append(poll_first_chart(page, ".scalar-card .linechart", t0) * 1000)
        ctx.close()
    return {"mark_ms": marks, "poll_ms": polled, "steps": steps, "cpu_ms": cpu}


def tensorboard_first_chart(browser: Any, url: str, repeat: int, cap: float, budget: float) -> dict[str, Any]:
    """TensorBoard's first chart, by the same screenshot poll as tbscope's. A navigation that
    shows no chart within `cap` seconds counts as "> cap" (recorded as None); repetitions stop
    once `budget` seconds have gone (at least one is made)."""
    polled: list[float | None] = []
    t_start = time.perf_counter()
    for _ in range(repeat):
        if polled and time.perf_counter() - t_start > budget:
            break
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        page = ctx.new_page()
        t0 = time.perf_counter()
        try:
            page.goto(url + "#timeseries", timeout=cap * 1000)
            left = cap - (time.perf_counter() - t0)
            polled.append(poll_first_chart(page, "scalar-card line-chart", t0, timeout=max(left, 0.1)) * 1000)
        except Exception:  # the page's load or its chart not within the cap
            polled.append(None)
        ctx.close()
    return {"poll_ms": polled, "cap_ms": cap * 1000}


SMOOTH_JS = """
async (v) => {
  const s = document.querySelector('#smoothing');
  performance.mark('bench:smooth-input');
  const t0 = performance.now();
  s.value = String(v);
  s.dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const ms = performance.now() - t0;
  performance.mark('bench:smooth-painted');
  return ms;
}
"""


# The trace events summed for each figure: every task, and within them the animation frame's
# scripts and the commit.
TRACED = {"task": "RunTask", "animation_frame": "FireAnimationFrame", "commit": "Commit"}
TRACE_CATEGORIES = ["toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline", "cc", "blink.user_timing"]


def _thread_ms(events: list[dict[str, Any]], name: str) -> float:
    return sum(e.get("tdur", 0) for e in events if e["name"] == name) / 1000


def traced_smoothing_cpu(browser: Any, page: Any, repeat: int) -> list[dict[str, float]]:
    """CPU of the renderer's main thread from each smoothing input to the end of its painted
    frame, from a DevTools trace (thread time of the tasks in between): the input's handling,
    the frame's scripts (the redraw) and its commit (where the canvas is rasterised)."""
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    for i in range(repeat):
        page.evaluate(SMOOTH_JS, 0.51 + 0.02 * (i % 10))
        page.wait_for_timeout(300)
    events = json.loads(browser.stop_tracing())["traceEvents"]
    marks: dict[str, list[tuple[int, int]]] = {"bench:smooth-input": [], "bench:smooth-painted": []}
    for e in events:
        if e.get("name") in marks:
            marks[e["name"]].append((e["pid"], e["ts"]))
    if not marks["bench:smooth-input"]:
        return []
    pid = marks["bench:smooth-input"][0][0]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    main = [
        e
        for e in events
        if e.get("ph") == "X" and names.get((e["pid"], e["tid"])) == "CrRendererMain" and e["pid"] == pid
    ]
    out = []
    for (_, t0), (_, t1) in zip(marks["bench:smooth-input"], marks["bench:smooth-painted"]):
        inside = [e for e in main if e["ts"] < t1 and e["ts"] + e.get("dur", 0) > t0]
        out.append({k: _thread_ms(inside, n) for k, n in TRACED.items()})
    return out


def tbscope_smoothing(browser: Any, url: str, repeat: int, runs: int) -> dict[str, Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.goto(url + "#scalars?points=1000")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.scalar-card')].filter(c => c.dataset.state === 'ready').length >= 2",
        timeout=120_000,
    )
    page.wait_for_timeout(1500)
    foot = page.eval_on_selector(".scalar-card .card-foot", "e => e.textContent")
    times: list[float] = []
    draws: list[float] = []
    for i in range(repeat):
        page.evaluate("() => performance.clearMeasures('tbscope:chart-draw')")
        times.append(page.evaluate(SMOOTH_JS, 0.5 + 0.02 * (i % 10)))
        d = page.evaluate("() => performance.getEntriesByName('tbscope:chart-draw').map(e => e.duration)")
        if d:
            draws.append(d[0])
    # Separately, traced (the tracing has a cost of its own): the same inputs' CPU.
    cpu = traced_smoothing_cpu(browser, page, repeat)
    ctx.close()
    return {"ms": times, "first_card": foot, "cpu_ms": cpu, "draw_ms": draws}


def tensorboard_smoothing(
    browser: Any, url: str, repeat: int, cap: float, budget: float, load_cap: float
) -> dict[str, Any]:
    """TensorBoard draws its charts in a worker: the time until the first chart's pixels change
    after the smoothing input (screenshots of its box). A repetition that shows no change within
    `cap` seconds counts as "> cap" (None); repetitions stop once `budget` seconds have gone; a
    page whose first chart does not show within `load_cap` seconds gives no figure."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    times: list[float | None] = []
    try:
        page.goto(url + "#timeseries", timeout=load_cap * 1000)
        poll_first_chart(page, "scalar-card line-chart", time.perf_counter(), timeout=load_cap)
    except Exception:  # the page's load or its chart not within the cap
        ctx.close()
        return {"ms": times, "cap_ms": cap * 1000, "note": f"no chart within {load_cap:.0f} s"}
    page.wait_for_timeout(3000)
    box = page.query_selector("scalar-card line-chart").bounding_box()
    shot = lambda: page.screenshot(clip=box, timeout=cap * 1000)  # noqa: E731 - a clip, no stability wait
    t_start = time.perf_counter()
    for i in range(repeat):
        if times and time.perf_counter() - t_start > budget:
            break
        try:
            before = shot()
        except Exception:  # a screenshot that times out: the page is stuck
            break
        v = 0.5 + 0.02 * (i % 10) + 0.01
        t0 = time.perf_counter()
        page.evaluate(
            "(v) => { const i = [...document.querySelectorAll('mat-slider input')].find(x => +x.max < 1 && +x.value < 1); i.value = String(v); i.dispatchEvent(new Event('input', {bubbles: true})); i.dispatchEvent(new Event('change', {bubbles: true})); }",
            v,
        )
        changed = False
        while time.perf_counter() - t0 < cap:
            try:
                if shot() != before:
                    changed = True
                    break
            except Exception:  # counted as no change within the cap
                break
        times.append((time.perf_counter() - t0) * 1000 if changed else None)
        page.wait_for_timeout(500)
    ctx.close()
    return {"ms": times, "cap_ms": cap * 1000}


SCROLL_JS = """
async (cards) => {
  const main = document.querySelector('#main');
  const first = document.querySelector('.scalar-card');
  const rowH = first.getBoundingClientRect().height + 12;
  const perRow = Math.max(1, Math.round(main.clientWidth / (first.getBoundingClientRect().width + 12)));
  const distance = Math.ceil(cards / perRow) * rowH;
  const intervals = [];
  let last = performance.now();
  await new Promise(resolve => {
    const step = (t) => {
      intervals.push(t - last);
      last = t;
      main.scrollTop += 40;
      if (main.scrollTop >= distance || main.scrollTop + main.clientHeight >= main.scrollHeight - 1) resolve();
      else requestAnimationFrame(step);
    };
    requestAnimationFrame((t) => { last = t; requestAnimationFrame(step); });
  });
  return {intervals: intervals.slice(1), distance, perRow};
}
"""


def tbscope_scroll(browser: Any, url: str, repeat: int, cards: int) -> dict[str, Any]:
    """The scroll over all `cards` cards (one per tag: 50 by default) with every run selected,
    and the same page with no run selected (empty charts): the floor that the machine itself
    gives the compositor, for reading the first."""
    allv: list[float] = []
    p95s: list[float] = []
    floor: list[float] = []
    cpu: list[float] = []  # main-thread CPU per frame of the scroll, ms
    floor_cpu: list[float] = []
    for i in range(max(2, repeat // 2)):
        empty = i % 2 == 1
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        page = ctx.new_page()
        page.goto(url + ("#scalars?only=" if empty else "#scalars"))
        if empty:
            page.wait_for_function(
                "n => document.querySelectorAll('.scalar-card').length >= n", arg=cards, timeout=60_000
            )
        else:
            page.wait_for_function(
                "() => performance.getEntriesByName('tbscope:first-chart-painted').length > 0", timeout=60_000
            )
        # Steady state: the charts on screen loaded and drawn (the scroll, not the first load).
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        cdp = cpu_session(page)
        before = cpu_ms(cdp)
        r = page.evaluate(SCROLL_JS, cards)
        per_frame = cpu_delta(before, cpu_ms(cdp))["task"] / max(1, len(r["intervals"]) + 1)
        if empty:
            floor.extend(r["intervals"])
            floor_cpu.append(per_frame)
        else:
            allv.extend(r["intervals"])
            p95s.append(pct(r["intervals"], 0.95))
            cpu.append(per_frame)
        ctx.close()
    return {
        "intervals_ms": allv,
        "p95_per_run": p95s,
        "empty_intervals_ms": floor,
        "cpu_per_frame_ms": cpu,
        "empty_cpu_per_frame_ms": floor_cpu,
    }


def bundle_size() -> dict[str, Any]:
    html = (STATIC / "index.html").read_text()
    files = re.findall(r'(?:src|href)="static/([^"]+\.(?:js|css))"', html)
    sizes = {f: len(gzip.compress((STATIC / f).read_bytes(), 9)) for f in files}
    lazy = {
        f"assets/{p.name}": len(gzip.compress(p.read_bytes(), 9))
        for p in (STATIC / "assets").glob("*.js")
        if f"assets/{p.name}" not in sizes
    }
    return {"initial_gzip_bytes": sum(sizes.values()), "initial": sizes, "lazy": lazy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--tags", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="8 runs x 10 tags x 1,000 steps, 3 repetitions")
    ap.add_argument("--no-tensorboard", action="store_true")
    ap.add_argument("--tb-repeat", type=int, default=5, help="repetitions for TensorBoard's side (default 5)")
    ap.add_argument(
        "--tb-cap", type=float, default=60, help="seconds: a TensorBoard first chart not shown by then counts as > cap"
    )
    ap.add_argument(
        "--tb-smooth-cap", type=float, default=30, help="seconds: a smoothing change not shown by then counts as > cap"
    )
    ap.add_argument(
        "--tb-budget",
        type=float,
        default=300,
        help="seconds per TensorBoard phase after which no new repetition starts",
    )
    ap.add_argument("--tb-load-cap", type=float, default=600, help="seconds to wait for TensorBoard to load the logdir")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.tags, a.steps, a.repeat, a.tb_repeat = 8, 10, 1000, 3, 3
    if not (STATIC / "index.html").exists():
        print("the dashboard is not built: run `make build`", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    logdir = ensure_logdir(a.runs, a.tags, a.steps, a.jobs)
    results: dict[str, Any] = {
        "corpus": {"runs": a.runs, "tags": a.tags, "steps": a.steps},
        "repeat": a.repeat,
        "load": os.getloadavg(),
    }
    results["bundle"] = bundle_size()
    results["tb_repeat"] = a.tb_repeat
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)

        def phase(name: str, fn: Any, *args: Any) -> None:
            t0 = time.perf_counter()
            results[name] = fn(*args)
            print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / "dashboard.partial.json").write_text(json.dumps(results, indent=1))

        proc, url = start_tbscope(logdir)
        try:
            phase("tbscope_first_chart", tbscope_first_chart, browser, url, a.repeat)
            phase("tbscope_smoothing", tbscope_smoothing, browser, url, a.repeat, a.runs)
            phase("tbscope_scroll", tbscope_scroll, browser, url, a.repeat, a.tags)
        finally:
            proc.terminate()
            proc.wait(30)
        if not a.no_tensorboard:
            tproc, turl, took, loaded = start_tensorboard(logdir, a.runs, a.tags, a.tb_load_cap)
            results["tensorboard_load_s"] = took
            results["tensorboard_loaded"] = loaded
            try:
                # Timed only once it has loaded (or its loading cap has passed: then said so).
                phase(
                    "tensorboard_first_chart",
                    tensorboard_first_chart,
                    browser,
                    turl,
                    a.tb_repeat,
                    a.tb_cap,
                    a.tb_budget,
                )
                phase(
                    "tensorboard_smoothing",
                    tensorboard_smoothing,
                    browser,
                    turl,
                    a.tb_repeat,
                    a.tb_smooth_cap,
                    a.tb_budget,
                    3 * a.tb_cap,  # its page's first chart, once: longer than a sample's cap
                )
            finally:
                tproc.terminate()
                tproc.wait(30)
        browser.close()
    results["load_after"] = os.getloadavg()
    report = render(results)
    print(report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "dashboard.json").write_text(json.dumps(results, indent=1))
    (RESULTS / "dashboard.md").write_text(report)
    return 0


def render(r: dict[str, Any]) -> str:
    c = r["corpus"]
    tf = r.get("tbscope_first_chart", {})
    ts = r.get("tbscope_smoothing", {})
    sc = r.get("tbscope_scroll", {})
    bf = r.get("tensorboard_first_chart", {})
    bs = r.get("tensorboard_smoothing", {})
    iv = sc.get("intervals_ms", [])
    rows = [
        ("first scalars chart painted (own mark)", "< 1000 ms", f"{med(tf.get('mark_ms', [])):.0f} ms", "-"),
        (
            "first scalars chart painted (screenshot poll)",
            "< 1000 ms",
            f"{med(tf.get('poll_ms', [])):.0f} ms",
            capped(bf.get("poll_ms", []), bf.get("cap_ms", math.inf)) if bf else "not run",
        ),
        (
            "smoothing input -> next painted frame",
            "< 50 ms",
            f"{med(ts.get('ms', [])):.1f} ms (p95 {pct(ts.get('ms', []), 0.95):.1f})",
            capped(bs.get("ms", []), bs.get("cap_ms", math.inf)) + " (pixels changed)" if bs else "not run",
        ),
        (
            f"scrolling {c['tags']} cards: frame interval p95",
            "<= 20 ms",
            f"{pct(iv, 0.95):.1f} ms (p50 {pct(iv, 0.5):.1f}, max {max(iv) if iv else math.nan:.0f})",
            "-",
        ),
        (
            "same scroll, no run selected (the machine's floor)",
            "-",
            f"{pct(sc.get('empty_intervals_ms', []), 0.95):.1f} ms (p50 {pct(sc.get('empty_intervals_ms', []), 0.5):.1f})",
            "-",
        ),
        ("initial JS + CSS gzipped", "<= 100 KB", f"{r['bundle']['initial_gzip_bytes'] / 1024:.1f} KB", "-"),
    ]
    scpu = ts.get("cpu_ms", [])
    cpu_rows = [
        (
            "first chart: main thread from navigation to the mark",
            f"{med(tf.get('cpu_ms', [])):.0f} ms",
        ),
        (
            "smoothing input -> painted frame: main thread (animation frame / commit)",
            f"{med([c['task'] for c in scpu]):.1f} ms ({med([c['animation_frame'] for c in scpu]):.1f} / "
            f"{med([c['commit'] for c in scpu]):.1f}); the first chart's redraw, in-page: "
            f"{med(ts.get('draw_ms', [])):.1f} ms",
        ),
        (
            f"scrolling {c['tags']} cards: main thread per frame",
            f"{med(sc.get('cpu_per_frame_ms', [])):.1f} ms (no run selected: "
            f"{med(sc.get('empty_cpu_per_frame_ms', [])):.1f} ms)",
        ),
    ]
    out = [
        f"Dashboard bench: {c['runs']} runs x {c['tags']} tags x {c['steps']} steps, medians of {r['repeat']} (TensorBoard {r.get('tb_repeat', r['repeat'])}), load average {r['load'][0]:.1f} before / {r['load_after'][0]:.1f} after",
        "",
        "| figure | target | tbscope | TensorBoard 2.21 |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {x} | {y} |" for a, b, x, y in rows],
        "",
        "CPU time of the page's main thread (DevTools thread ticks; less distorted by load than wall time):",
        "",
        "| figure | tbscope |",
        "|---|---|",
        *[f"| {a} | {x} |" for a, x in cpu_rows],
        "",
        f"smoothing measured on: {ts.get('first_card', '')}",
        *(
            [
                f"TensorBoard {'loaded the logdir' if r.get('tensorboard_loaded') else 'had NOT loaded the logdir'} in "
                f"{r['tensorboard_load_s']:.0f} s before its figures were taken (caps: first chart "
                f"{bf.get('cap_ms', math.nan) / 1000:.0f} s, smoothing {bs.get('cap_ms', math.nan) / 1000:.0f} s a sample)"
                + (f"; smoothing: {bs['note']}" if bs.get("note") else "")
            ]
            if "tensorboard_load_s" in r
            else []
        ),
        "first chart, where the time went (medians, ms after navigation): "
        + ", ".join(
            f"{k} {med([s[k] for s in tf.get('steps', []) if s.get(k) is not None]):.0f}"
            for k in ("status", "runs", "tags", "first_fetch_start", "first_fetch_ms", "first_draw_ms", "painted")
        ),
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
