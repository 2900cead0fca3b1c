"""The dashboard in Debian's chromium against a real `tbscope serve`: what a person sees."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_util import Page, Server
from logdir import RUNS, SPIKE_STEP, XSS_RUN, XSS_TAG, append

# Counts the pixels of each colour (within a small distance) on one card's chart canvas.
PIXELS_JS = """
([tag, colors]) => {
  const card = [...document.querySelectorAll('.scalar-card')].find(c => c.dataset.tag === tag);
  const canvas = card && card.querySelector('canvas');
  if (!canvas) return null;
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const rgb = colors.map(h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)));
  const counts = colors.map(() => 0);
  for (let p = 0; p < d.length; p += 4) {
    if (d[p + 3] < 200) continue;
    for (let k = 0; k < rgb.length; k++) {
      const c = rgb[k];
      if (Math.abs(d[p] - c[0]) + Math.abs(d[p + 1] - c[1]) + Math.abs(d[p + 2] - c[2]) < 24) counts[k]++;
    }
  }
  return counts;
}
"""

CANVAS_HASH_JS = """
(tag) => {
  const card = [...document.querySelectorAll('.scalar-card')].find(c => c.dataset.tag === tag);
  const canvas = card.querySelector('canvas');
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let h = 0;
  for (let i = 0; i < d.length; i += 4) h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) | 0;
  return h;
}
"""


def api(server: Server, path: str) -> Any:
    with urllib.request.urlopen(server.url + "api/v1/" + path) as r:
        return json.load(r)


def colors(server: Server) -> dict[str, str]:
    c = api(server, "runs?limit=100000")["columns"]
    return dict(zip(c["run"], c["color"]))


def open_scalars(p: Page, server: Server, fragment: str = "scalars?smoothing=0") -> None:
    p.page.goto(server.url + "#" + fragment)
    wait_card(p, "train/loss")


def wait_card(p: Page, tag: str, timeout: float = 60_000) -> None:
    p.page.wait_for_function(
        "(tag) => [...document.querySelectorAll('.scalar-card')].some(c => c.dataset.tag === tag && c.dataset.state === 'ready' && c.querySelector('canvas'))",
        arg=tag,
        timeout=timeout,
    )
    p.page.wait_for_timeout(100)  # the draw happens in the next frame


def card_foot(p: Page, tag: str) -> str:
    return p.page.evaluate(
        "(tag) => [...document.querySelectorAll('.scalar-card')].find(c => c.dataset.tag === tag).querySelector('.card-foot').textContent",
        tag,
    )


def test_scalars_chart_draws_every_selected_run(page: Page, server: Server) -> None:
    open_scalars(page, server)
    cols = colors(server)
    runs = [r for r in RUNS] + [XSS_RUN]
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in runs]])
    assert counts is not None
    for run, n in zip(runs, counts):
        assert n > 30, f"{run} ({cols[run]}) is not drawn: {n} pixels of its colour"
    assert "5 runs" in card_foot(page, "train/loss")
    page.screenshot("scalars-light")
    assert page.errors == [] and page.dialogs == []


def test_scalars_arrive_as_arrow_and_draw_the_same_points(page: Page, server: Server) -> None:
    """The cards ask for Arrow IPC and read it into the points the JSON answer has."""
    answers: list[tuple[str, str]] = []
    page.page.on(
        "response",
        lambda r: answers.append((r.url, r.headers.get("content-type", ""))) if "/api/v1/scalars?" in r.url else None,
    )
    open_scalars(page, server, "scalars?smoothing=0&tags=train/loss")
    loss = [(u, t) for u, t in answers if "tag=train%2Floss" in u]
    assert loss and all(t.startswith("application/vnd.apache.arrow.stream") for _, t in loss), answers
    with urllib.request.urlopen(loss[-1][0]) as r:  # the same request, as JSON
        data = json.load(r)
    shown = sum(len(s["columns"]["step"]) for s in data["series"])
    total = sum(s["total_points"] for s in data["series"])
    assert f"{shown:,} of {total:,} points" in card_foot(page, "train/loss")
    cols = colors(server)
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[s["run"]] for s in data["series"]]])
    assert all(n > 30 for n in counts), counts
    assert page.errors == []


def test_scalars_still_draw_from_a_json_answer(page: Page, server: Server) -> None:
    """A proxy or server that answers the scalars request with JSON only: the chart is the same."""
    page.page.route(
        "**/api/v1/scalars?*",
        lambda route: route.continue_(headers={**route.request.headers, "accept": "application/json"}),
    )
    open_scalars(page, server, "scalars?smoothing=0&tags=train/loss")
    cols = colors(server)
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in RUNS]])
    assert all(n > 30 for n in counts), counts
    assert page.errors == []


def test_smoothing_slider_changes_the_line(page: Page, server: Server) -> None:
    open_scalars(page, server, "scalars?smoothing=0")
    before = page.page.evaluate(CANVAS_HASH_JS, "train/loss")
    page.page.eval_on_selector(
        "#smoothing", "(el) => { el.value = '0.95'; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    page.page.wait_for_timeout(300)
    after = page.page.evaluate(CANVAS_HASH_JS, "train/loss")
    assert before != after
    assert "smoothing=0.95" in page.page.url
    # Smoothed lines are drawn in the run colour over faint raw lines: still every run.
    cols = colors(server)
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in RUNS]])
    assert all(n > 30 for n in counts), counts
    assert page.errors == []


FAINT_JS = """
([tag, colors]) => {
  const card = [...document.querySelectorAll('.scalar-card')].find(c => c.dataset.tag === tag);
  const canvas = card && card.querySelector('canvas');
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const rgb = colors.map(h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)));
  const counts = colors.map(() => 0);
  for (let p = 0; p < d.length; p += 4) {
    if (d[p + 3] < 20 || d[p + 3] > 120) continue;  // the raw layer's alpha is 0x40
    for (let k = 0; k < rgb.length; k++) {
      const c = rgb[k];
      if (Math.abs(d[p] - c[0]) + Math.abs(d[p + 1] - c[1]) + Math.abs(d[p + 2] - c[2]) < 40) counts[k]++;
    }
  }
  return counts;
}
"""


def test_raw_lines_drawn_faint_behind_the_smoothed_ones(page: Page, server: Server) -> None:
    """The smoothed lines are painted first and the faint raw layer a frame later: it comes."""
    open_scalars(page, server, "scalars?smoothing=0")
    cols = colors(server)
    args = ["train/loss", [cols[r] for r in RUNS]]
    # Without smoothing, the only pixels of that alpha are the lines' antialiased edges.
    edges = page.page.evaluate(FAINT_JS, args)
    page.page.eval_on_selector(
        "#smoothing", "(el) => { el.value = '0.95'; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    page.page.wait_for_timeout(300)
    faint = page.page.evaluate(FAINT_JS, args)
    assert all(f > 1.3 * e for f, e in zip(faint, edges)), (faint, edges)
    strong = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in RUNS]])
    assert all(n > 30 for n in strong), strong
    assert page.errors == []


def test_first_requests_start_with_the_page(page: Page, server: Server) -> None:
    """status, runs and the scalar tags are preloaded by index.html and the app takes those
    answers: each is requested once, by the page's links, not again by the app's fetches."""
    urls: list[str] = []
    page.page.on("request", lambda r: urls.append(r.url.split("/api/v1/", 1)[1]) if "/api/v1/" in r.url else None)
    open_scalars(page, server, "scalars")
    firsts = ["status", "runs?offset=0&limit=100000", "tags?kind=scalars"]
    assert [urls.count(u) for u in firsts] == [1, 1, 1], urls
    initiators = page.page.evaluate(
        "(names) => names.map(n => performance.getEntriesByType('resource').filter(e => e.name.endsWith('/api/v1/' + n)).map(e => e.initiatorType))",
        firsts,
    )
    assert initiators == [["link"], ["link"], ["link"]], initiators
    assert page.errors == []


def test_run_filter_hides_runs(page: Page, server: Server) -> None:
    open_scalars(page, server)
    cols = colors(server)
    page.page.fill("#run-filter", "lr=0.01")
    # Two runs with train/loss pass (their hparams child runs pass too but have no such tag).
    page.page.wait_for_function(
        "() => document.querySelector('.scalar-card[data-tag=\"train/loss\"] .card-foot').textContent.startsWith('2 runs')"
    )
    assert page.page.inner_text(".run-count").startswith("4 of 4")
    page.page.wait_for_timeout(200)
    hidden = [r for r in RUNS if "lr=0.1/" in r] + [XSS_RUN]
    shown = [r for r in RUNS if "lr=0.01/" in r]
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in hidden + shown]])
    assert counts[: len(hidden)] == [0] * len(hidden), counts
    assert all(n > 30 for n in counts[len(hidden) :]), counts
    assert "runs=lr%3D0.01" in page.page.url
    assert page.errors == []


def test_spike_survives_downsampling_and_zoom(page: Page, server: Server) -> None:
    """10,000 points, one spike: visible in the overview and after zooming near it."""
    open_scalars(page, server, "scalars?smoothing=0&outliers=1&tags=train/loss")
    # The y range includes the spike (outliers not ignored): the axis reaches 50.
    top = page.page.evaluate(
        "() => { const c = [...document.querySelectorAll('.scalar-card')].find(c => c.dataset.tag === 'train/loss'); return c.querySelector('.card-foot').textContent; }"
    )
    assert "of" in top  # downsampled: "N of 50,xxx points (extremes kept)"
    data = api(server, f"scalars?tag=train/loss&run={urllib.request.quote(RUNS[0])}&points=400")
    assert max(v for v in data["series"][0]["columns"]["value"] if isinstance(v, (int, float))) == 50.0
    # Drag-zoom around the spike: the card refetches the window and still has the spike.
    over = page.page.locator('.scalar-card[data-tag="train/loss"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    assert box
    x0 = box["x"] + box["width"] * (SPIKE_STEP - 600) / 10000
    x1 = box["x"] + box["width"] * (SPIKE_STEP + 600) / 10000
    y = box["y"] + box["height"] / 2
    page.page.mouse.move(x0, y)
    page.page.mouse.down()
    page.page.mouse.move(x1, y, steps=5)
    page.page.mouse.up()
    page.page.wait_for_function(
        "() => document.querySelector('.scalar-card[data-tag=\"train/loss\"] .card-foot').textContent.includes('zoomed')"
    )
    wait_card(page, "train/loss")
    cols = colors(server)
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[RUNS[0]]]])
    assert counts[0] > 10
    page.screenshot("scalars-zoomed")
    assert page.errors == []


def test_image_and_audio_load(page: Page, server: Server) -> None:
    page.page.goto(server.url + "#images")
    page.page.wait_for_function(
        "() => [...document.querySelectorAll('.image-card img')].some(i => i.complete && i.naturalWidth > 0)",
        timeout=30_000,
    )
    w = page.page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('.image-card img')].map(i => i.naturalWidth))"
    )
    assert w == 64
    page.screenshot("images")
    page.page.goto(server.url + "#audio")
    page.page.wait_for_function(
        "() => [...document.querySelectorAll('.audio-card audio')].some(a => a.readyState >= 1 && a.duration > 0)",
        timeout=30_000,
    )
    dur = page.page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('.audio-card audio')].map(a => a.duration || 0))"
    )
    assert abs(dur - 0.5) < 0.01
    assert page.errors == []


def test_hostile_text_tags_and_run_names_stay_inert(page: Page, server: Server) -> None:
    page.page.goto(server.url + "#text?tags=notes")
    page.page.wait_for_function("() => document.querySelectorAll('.text-card .markdown').length >= 2", timeout=30_000)
    page.page.evaluate(
        "async () => { const m = document.querySelector('#main'); for (let y = 0; y < m.scrollHeight; y += 300) { m.scrollTop = y; await new Promise(r => setTimeout(r, 100)); } }"
    )
    page.page.wait_for_function("() => document.querySelectorAll('.text-card .markdown').length >= 8", timeout=30_000)
    # Markdown renders (table, code); hostile HTML does not execute or even exist as elements.
    assert page.page.locator(".markdown table").count() >= 1
    assert page.page.locator(".markdown pre code").count() >= 1
    assert page.page.locator(".markdown img, .markdown script, .markdown iframe, [onerror], [onmouseover]").count() == 0
    hrefs = page.page.eval_on_selector_all(".markdown a", "els => els.map(e => e.getAttribute('href'))")
    assert not any(h and h.lower().startswith("javascript") for h in hrefs), hrefs
    # The run name and tag show as text.
    page.page.goto(server.url + "#text?tags=xss")
    page.page.wait_for_function("() => document.querySelectorAll('.text-card .markdown').length >= 1", timeout=30_000)
    assert page.page.locator(".text-card .card-run span", has_text="onerror").count() == 1
    assert page.page.locator(".text-card .card-title", has_text="<script>").count() == 1
    # A rank-2 text tensor is a table, its cells text.
    page.page.goto(server.url + "#text?tags=table")
    page.page.wait_for_selector(".text-card table.data td")
    cells = page.page.eval_on_selector_all(".text-card table.data td", "tds => tds.map(t => t.textContent)")
    assert cells[:3] == ["", "cat", "dog"] and '<img src=x onerror="window.__xss=1">' in cells
    page.page.goto(server.url + "#scalars?tags=xss")
    wait_card(page, XSS_TAG)
    assert page.page.locator(".scalar-card .card-title", has_text="<script>").count() == 1
    page.page.fill("#run-filter", "xss")
    page.page.wait_for_timeout(300)
    assert page.page.locator(".run-row .run-name", has_text="onerror").count() >= 1
    assert page.page.evaluate("() => window.__xss") is None
    assert page.dialogs == []
    assert page.errors == []


def test_hparams_table_sorts_and_selection_filters_charts(page: Page, server: Server) -> None:
    page.page.goto(server.url + "#hparams")
    page.page.wait_for_selector(".hparams-table tr[data-row]", timeout=30_000)
    page.page.click('.hparams-table th[data-key="hp:batch"]')
    vals = page.page.eval_on_selector_all(
        ".hparams-table tbody tr[data-row]",
        "rows => rows.map(r => r.children[[...r.closest('table').querySelectorAll('thead tr:first-child th')].findIndex(th => th.dataset.key === 'hp:batch')].textContent)",
    )
    nums = [float(v) for v in vals if v]
    assert nums == sorted(nums) and len(nums) >= 4
    page.page.click('.hparams-table th[data-key="hp:batch"]')
    vals = page.page.eval_on_selector_all(
        ".hparams-table tbody tr[data-row]",
        "rows => rows.map(r => r.children[[...r.closest('table').querySelectorAll('thead tr:first-child th')].findIndex(th => th.dataset.key === 'hp:batch')].textContent)",
    )
    nums = [float(v) for v in vals if v]
    assert nums == sorted(nums, reverse=True)
    page.page.fill('.col-filter[data-key="hp:lr"]', "<0.05")
    page.page.wait_for_timeout(200)
    page.screenshot("hparams")
    page.page.click("#hparams-select-filtered")
    assert "only=" in page.page.url
    page.page.click('.tab[data-view="scalars"]')
    wait_card(page, "train/loss")
    page.page.evaluate(
        "() => { const s = document.querySelector('#smoothing'); s.value = '0'; s.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    page.page.wait_for_timeout(300)
    cols = colors(server)
    counts = page.page.evaluate(PIXELS_JS, ["train/loss", [cols[r] for r in RUNS]])
    for run, n in zip(RUNS, counts):
        if "lr=0.01/" in run:
            assert n > 30, (run, counts)
        else:
            assert n == 0, (run, counts)
    assert page.errors == []


def test_live_append_shows_new_points_without_reload(page: Page, server: Server, logdir: Path) -> None:
    open_scalars(page, server)
    page.page.evaluate("() => { window.__noReload = true; }")
    before = card_foot(page, "train/lr")
    append(logdir, RUNS[3], "train/lr", range(10_000, 12_000, 10), 0.5)
    page.page.wait_for_function(
        "(before) => { const c = document.querySelector('.scalar-card[data-tag=\"train/lr\"] .card-foot'); return c && c.textContent !== before && c.textContent !== ''; }",
        arg=before,
        timeout=30_000,
    )
    assert page.page.evaluate("() => window.__noReload") is True
    assert page.errors == []


@pytest.mark.parametrize(
    "view",
    [
        "scalars",
        "custom_scalars",
        "histograms",
        "distributions",
        "images",
        "audio",
        "text",
        "tensors",
        "pr_curves",
        "hparams",
        "health",
        "embeddings",
        "profile",
    ],
)
def test_no_console_errors_on_any_view(page: Page, server: Server, view: str) -> None:
    page.page.goto(server.url + "#" + view)
    page.page.wait_for_load_state("networkidle")
    page.page.wait_for_timeout(500)
    # Scroll everything into view once so every card loads and draws.
    page.page.evaluate(
        "async () => { const m = document.querySelector('#main'); for (let y = 0; y < m.scrollHeight; y += 400) { m.scrollTop = y; await new Promise(r => setTimeout(r, 60)); } }"
    )
    page.page.wait_for_load_state("networkidle")
    page.page.wait_for_timeout(300)
    assert page.page.locator(".error-state").count() == 0, page.page.locator(".error-state").all_inner_texts()
    assert page.errors == [], page.errors
    page.page.evaluate("() => { document.querySelector('#main').scrollTop = 0; }")
    page.screenshot(f"view-{view}")


def test_dark_theme_and_keyboard(page: Page, server: Server) -> None:
    open_scalars(page, server, "scalars")
    page.page.keyboard.press("d")
    assert page.page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    wait_card(page, "train/loss")
    page.screenshot("scalars-dark")
    page.page.keyboard.press("d")
    page.page.keyboard.press("l")
    assert "log=1" in page.page.url
    page.page.keyboard.press("/")
    assert page.page.evaluate("() => document.activeElement.id") == "run-filter"
    assert page.errors == []


def test_url_state_round_trips(page: Page, server: Server) -> None:
    frag = "scalars?runs=validation&smoothing=0.8&x=relative&log=1"
    page.page.goto(server.url + "#" + frag)
    wait_card(page, "train/loss")
    assert page.page.input_value("#run-filter") == "validation"
    assert page.page.input_value("#smoothing") == "0.8"
    assert page.page.get_attribute('.segmented [data-x="relative"]', "aria-checked") == "true"
    assert page.page.is_checked("#log-y")
    assert "2 runs" in card_foot(page, "train/loss")
    assert page.errors == []


def test_url_follows_a_long_slider_drag(page: Page, server: Server) -> None:
    """A drag sends an input per frame and the URL is written at most every 100 ms: a burst of
    300 inputs (through some 30 slider positions, each a new URL) writes it at most once while
    it lasts and once after, ends on the last value, and a pasted link of it restores it."""
    open_scalars(page, server, "scalars?smoothing=0")
    burst = page.page.evaluate(
        """() => {
        const writes = [];
        const replace = history.replaceState.bind(history);
        history.replaceState = (data, unused, url) => { writes.push(String(url)); return replace(data, unused, url); };
        window.__urlWrites = writes;
        const s = document.querySelector('#smoothing');
        const positions = new Set();
        for (let i = 1; i <= 300; i++) {
            s.value = String(0.2 + i / 1000);
            positions.add(s.value);
            s.dispatchEvent(new Event('input', {bubbles: true}));
        }
        return {positions: positions.size, during: writes.length};
        }"""
    )
    page.page.wait_for_function("() => location.hash.includes('smoothing=0.5')", timeout=5_000)
    page.page.wait_for_timeout(300)  # nothing later overwrites it
    writes = page.page.evaluate("() => window.__urlWrites")
    # Without the throttle each of the ~30 positions is a write, all during the burst.
    assert burst["positions"] >= 20, burst
    assert burst["during"] <= 1, (burst, writes)
    assert len(writes) <= 2, writes
    assert "smoothing=0.5" in writes[-1]
    assert "smoothing=0.5" in page.page.url
    link = page.page.url
    page.page.goto(server.url + "#scalars")
    page.page.goto(link)
    wait_card(page, "train/loss")
    assert page.page.input_value("#smoothing") == "0.5"
    assert page.errors == []


def test_csv_and_png_downloads(page: Page, server: Server) -> None:
    """The CSV holds every logged point (not the downsampled ones on screen); the PNG is one."""
    open_scalars(
        page, server, "scalars?smoothing=0&tags=train/loss&runs=" + urllib.request.quote("/^exp\\/lr=0\\.01\\/train$/")
    )
    assert card_foot(page, "train/loss").startswith("1 run")
    card = page.page.locator('.scalar-card[data-tag="train/loss"]')
    card.hover()
    with page.page.expect_download() as dl:
        card.locator('button[title^="Download the data as CSV"]').click()
    import csv

    rows = list(csv.reader(Path(dl.value.path()).read_text().splitlines()))
    assert rows[0][:3] == ["run", "tag", "step"]
    assert len(rows) == 1 + 10_000 and {r[0] for r in rows[1:]} == {"exp/lr=0.01/train"}
    assert [int(r[2]) for r in rows[1:]] == list(range(10_000))
    with page.page.expect_download() as dl:
        card.locator('button[title^="Download the chart as PNG"]').click()
    assert dl.value.suggested_filename == "train_loss.png"
    assert Path(dl.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.errors == []


def test_profile_timeline_zooms_and_lists_top_operations(page: Page, server: Server) -> None:
    """The torch.profiler trace in the fixture logdir: listed, drawn as a timeline whose wheel
    zoom narrows the window and fetches that window's events, and its top operations."""
    listing = api(server, "profiles")["columns"]
    assert listing["source"] == ["torch"] and listing["format"] == ["chrome_trace"]
    page.page.goto(server.url + "#profile")
    page.page.wait_for_function(
        "() => document.querySelector('.profile-timeline')?.dataset.state === 'ready'", timeout=30_000
    )
    page.page.wait_for_function(
        "() => document.querySelectorAll('.profile-ops-table tbody tr').length > 0", timeout=30_000
    )
    ops = page.page.locator(".profile-ops-table tbody tr td.op-name").all_inner_texts()
    want = api(
        server,
        f"profile/operations?run={urllib.parse.quote(listing['run'][0])}&file={urllib.parse.quote(listing['file'][0])}&limit=50",
    )["columns"]["name"]
    assert ops == want and any(name.startswith("aten::") for name in ops)
    drawn = int(page.page.evaluate("() => document.querySelector('.profile-timeline').dataset.drawn"))
    assert drawn > 50
    span0 = page.page.evaluate(
        "() => { const d = document.querySelector('.profile-timeline').dataset; return Number(d.end) - Number(d.start); }"
    )
    box = page.page.locator(".profile-canvas").bounding_box()
    assert box is not None
    page.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
    with page.page.expect_response(lambda r: "profile/events" in r.url and "start=" in r.url):
        for _ in range(4):
            page.page.mouse.wheel(0, -300)
            page.page.wait_for_timeout(30)
    page.page.wait_for_timeout(300)
    span1 = page.page.evaluate(
        "() => { const d = document.querySelector('.profile-timeline').dataset; return Number(d.end) - Number(d.start); }"
    )
    assert span1 < span0 / 4
    # Double-click shows the whole trace again.
    page.page.mouse.dblclick(box["x"] + box["width"] * 0.6, box["y"] + 40)
    page.page.wait_for_timeout(300)
    span2 = page.page.evaluate(
        "() => { const d = document.querySelector('.profile-timeline').dataset; return Number(d.end) - Number(d.start); }"
    )
    assert abs(span2 - span0) < 1e-6 * span0
    page.screenshot("profile")
    assert page.errors == []
