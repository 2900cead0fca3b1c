"""The Embeddings view in Debian's chromium against a real `tbscope serve`, on embeddings that
tensorboardX's add_embedding wrote (and one from tbscope's own writer): points drawn in their
category colours, search, the selected point's metadata and thumbnail, hover, 3-D rotation."""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import numpy as np
import pytest
from browser_util import Page, Server

XSS_WORD = '<img src=x onerror="window.__xss=1">'
CLASSES = ("alpha", "beta", "gamma")
N = 60

# Pixels of each colour (within a small distance) on the scatter's canvas.
PIXELS_JS = """
(colors) => {
  const canvas = document.getElementById('emb-canvas');
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const rgb = colors.map(h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)));
  const counts = colors.map(() => 0);
  for (let p = 0; p < d.length; p += 4) {
    if (d[p + 3] < 180) continue;
    for (let k = 0; k < rgb.length; k++) {
      const c = rgb[k];
      if (Math.abs(d[p] - c[0]) + Math.abs(d[p + 1] - c[1]) + Math.abs(d[p + 2] - c[2]) < 40) counts[k]++;
    }
  }
  return counts;
}
"""

HASH_JS = """
() => {
  const canvas = document.getElementById('emb-canvas');
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let h = 0;
  for (let i = 0; i < d.length; i += 4) h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) | 0;
  return h;
}
"""


def words() -> list[str]:
    return [XSS_WORD if i == 5 else f"w{i}" for i in range(N)]


@pytest.fixture(scope="module")
def emb_server() -> Iterator[Server]:
    import tbscope
    from tensorboardX import SummaryWriter

    d = Path(tempfile.mkdtemp(prefix="tbscope-e2e-emb-"))
    rng = np.random.default_rng(0)
    centres = np.array([[8.0, 0, 0, 0, 0], [0, 8.0, 0, 0, 0], [0, 0, 8.0, 0, 0]])
    cls = [i % 3 for i in range(N)]
    mat = centres[cls] + rng.normal(size=(N, 5))
    meta = [[w, CLASSES[c], f"{i / 10:.1f}"] for i, (w, c) in enumerate(zip(words(), cls))]
    imgs = np.zeros((N, 3, 6, 6))
    for i, c in enumerate(cls):
        imgs[i, c] = 1.0  # a red, green or blue square per class
    with SummaryWriter(str(d / "words")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(
            mat, metadata=meta, metadata_header=["word", "class", "score"], label_img=imgs, global_step=3, tag="words"
        )
    with tbscope.SummaryWriter(str(d / "plain")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(rng.normal(size=(25, 4)), tag="plain")
    s = Server(d)
    try:
        s.wait_loaded()
        yield s
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)


def api(server: Server, path: str) -> Any:
    with urllib.request.urlopen(server.url + "api/v1/" + path) as r:
        return json.load(r)


def wait_points(p: Page, n: int, dims: int = 2) -> None:
    p.page.wait_for_function(
        "([n, dims]) => { const c = document.getElementById('emb-canvas'); return c && c.dataset.state === 'ready' && c.dataset.points === String(n) && c.dataset.dims === String(dims); }",
        arg=[n, dims],
        timeout=60_000,
    )
    p.page.wait_for_timeout(150)  # the draw happens in the next frame


def test_scatter_colours_search_details_and_rotation(page: Page, emb_server: Server) -> None:
    p = page.page
    p.goto(emb_server.url + "#embeddings")
    wait_points(page, 25)  # the first embedding: run plain
    assert p.locator("#emb-select option").all_inner_texts() == [
        "plain · plain:00000 · 25×4",
        "words · words:00003 · 60×5",
    ]
    assert p.locator("#emb-select").input_value() == "0"
    p.select_option("#emb-select", label="words · words:00003 · 60×5")
    wait_points(page, N)

    # Coloured by the first categorical column with few values: class (word has 60 values).
    assert p.locator("#emb-color").input_value() == "meta:class"
    legend = p.locator("#emb-legend .emb-legend-label").all_inner_texts()
    assert sorted(legend) == sorted(CLASSES)
    swatches = p.eval_on_selector_all("#emb-legend .swatch", "els => els.map(e => getComputedStyle(e).backgroundColor)")
    hexes = [
        "#{:02x}{:02x}{:02x}".format(*tuple(int(v) for v in s[s.index("(") + 1 : s.index(")")].split(",")[:3]))
        for s in swatches
    ]
    counts = p.evaluate(PIXELS_JS, hexes)
    assert all(c > 20 for c in counts), (hexes, counts)  # every category's points are drawn
    assert "variance explained" in p.locator("#emb-info").inner_text()

    # Search the word column with the runs filter's syntax: a glob.
    p.select_option("#emb-search-by", "meta:word")
    p.fill("#emb-search", "w1*")
    expect = [w for w in words() if w.startswith("w1")]
    p.wait_for_function("n => document.getElementById('emb-canvas').dataset.matches === String(n)", arg=len(expect))
    assert p.locator("#emb-matches .emb-match").all_inner_texts() == expect
    assert f"{len(expect)} matches" in p.locator("#emb-info").inner_text()

    # One match is selected: its metadata and its thumbnail (from the sprite) are shown.
    p.fill("#emb-search", "w7")
    p.wait_for_function("() => document.getElementById('emb-details').textContent.includes('w7')")
    details = p.locator("#emb-details").inner_text()
    assert "beta" in details and "0.7" in details
    p.wait_for_selector("#emb-details canvas.emb-thumb", timeout=10_000)
    green = p.evaluate(
        "() => { const c = document.querySelector('#emb-details canvas.emb-thumb'); const d = c.getContext('2d').getImageData(2, 2, 1, 1).data; return [d[0], d[1], d[2]]; }"
    )
    assert green[1] > 200 and green[0] < 40 and green[2] < 40  # point 7 is class 1: a green square

    # Hovering the selected point shows its tooltip.
    p.wait_for_function("() => document.getElementById('emb-canvas').dataset.selectedX !== undefined")
    box = p.locator("#emb-canvas").bounding_box()
    assert box is not None
    x = float(p.locator("#emb-canvas").get_attribute("data-selected-x") or "nan")
    y = float(p.locator("#emb-canvas").get_attribute("data-selected-y") or "nan")
    p.mouse.move(box["x"] + x, box["y"] + y)
    p.wait_for_selector(".emb-tip.show")
    assert "w7" in p.locator(".emb-tip").inner_text()

    # Hostile metadata is text: searching for it shows it literally and runs nothing.
    p.fill("#emb-search", "<img*")
    p.wait_for_function("() => document.getElementById('emb-canvas').dataset.matches === '1'")
    assert p.locator("#emb-matches .emb-match").all_inner_texts() == [XSS_WORD]
    assert p.evaluate("() => window.__xss") is None

    # A numeric column colours by a gradient with its range in the legend.
    p.fill("#emb-search", "")
    p.select_option("#emb-color", "meta:score")
    assert p.locator("#emb-legend").inner_text().split() == ["0", "5.9"]

    # 3-D: another projection from the server; a drag rotates it.
    p.click(".embeddings-view .segmented button[data-dims='3']")
    wait_points(page, N, dims=3)
    before = (p.evaluate(HASH_JS), p.locator("#emb-canvas").get_attribute("data-yaw"))
    p.mouse.move(box["x"] + 200, box["y"] + 200)
    p.mouse.down()
    p.mouse.move(box["x"] + 320, box["y"] + 230, steps=8)
    p.mouse.up()
    p.wait_for_timeout(150)
    after = (p.evaluate(HASH_JS), p.locator("#emb-canvas").get_attribute("data-yaw"))
    assert after[1] != before[1] and after[0] != before[0]
    page.screenshot("embeddings-3d")
    # The settings are in the URL, so a link reproduces the view.
    state = parse_qs(parse_qs(p.evaluate("location.hash").split("?", 1)[1])["emb"][0])
    assert state == {"run": ["words"], "tag": ["words:00003"], "dims": ["3"], "color": ["meta:score"]}
    assert page.errors == [] and page.dialogs == []


def test_a_link_reproduces_the_view_and_the_run_selection_applies(page: Page, emb_server: Server) -> None:
    p = page.page
    emb = urlencode(
        {"run": "words", "tag": "words:00003", "dims": "3", "color": "meta:class", "by": "meta:word", "q": "w1*"}
    )
    p.goto(emb_server.url + "#embeddings?" + urlencode({"emb": emb}))
    wait_points(page, N, dims=3)
    assert p.locator("#emb-select option:checked").inner_text() == "words · words:00003 · 60×5"
    assert p.locator("#emb-color").input_value() == "meta:class"
    assert p.locator("#emb-search").input_value() == "w1*"
    p.wait_for_function("() => document.getElementById('emb-canvas').dataset.matches === '11'")
    assert p.locator(".embeddings-view .segmented button[data-dims='3']").get_attribute("aria-checked") == "true"
    # Only the runs the runs panel selects are offered, as in every view.
    p.goto(emb_server.url + "#embeddings?only=words")
    p.reload()
    wait_points(page, N)
    assert p.locator("#emb-select option").all_inner_texts() == ["words · words:00003 · 60×5"]
    assert page.errors == [] and page.dialogs == []


def test_embedding_without_metadata_and_the_projection_served(page: Page, emb_server: Server) -> None:
    p = page.page
    p.goto(emb_server.url + "#embeddings")
    wait_points(page, 25)
    assert p.locator("#emb-search").is_disabled()
    assert p.locator("#emb-color option").all_inner_texts() == ["(none)"]
    # The view draws what the server computed: same points, same sampling.
    got = api(emb_server, "embeddings/projection?run=plain&tag=plain:00000")
    assert len(got["columns"]["x"]) == 25
    assert page.errors == [] and page.dialogs == []


def test_unavailable_method_says_why(page: Page, emb_server: Server) -> None:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("scikit-learn is installed here: t-SNE works")  # the ImportError path is what this checks
    p = page.page
    p.goto(emb_server.url + "#embeddings")
    wait_points(page, 25)
    p.select_option("#emb-method", "tsne")
    p.wait_for_selector(".emb-error")
    assert "pip install scikit-learn" in p.locator(".emb-error").inner_text()
    assert p.locator("#emb-canvas").get_attribute("data-state") == "error"


def test_embeddings_tab_greyed_out_only_without_embeddings(page: Page, server: Server, emb_server: Server) -> None:
    """Like the other kinds, the Embeddings tab is greyed out (class `empty`) when the logdir has
    none; the session's main logdir has none, this module's has two."""
    counts = api(server, "status")["kinds"]
    if "embeddings" not in counts:
        pytest.skip("this server's status does not count embeddings yet (kinds.embeddings)")
    assert counts["embeddings"] == 0
    assert api(emb_server, "status")["kinds"]["embeddings"] == 2
    p = page.page
    tab = '.tab[data-view="embeddings"]'
    for srv, empty in ((server, True), (emb_server, False)):
        p.goto(srv.url + "#scalars")
        # The tabs are drawn again once the status has arrived: the scalars tab then has its count.
        p.wait_for_function(
            "() => /\\d+ tags?/.test(document.querySelector('.tab[data-view=\"scalars\"]')?.title ?? '')"
        )
        classes = p.get_attribute(tab, "class") or ""
        assert ("empty" in classes.split()) is empty, classes
        assert p.get_attribute(tab, "title") == ("0 embeddings" if empty else "2 embeddings")
    # A greyed-out tab still opens its view (and says there is nothing to show).
    p.goto(server.url + "#embeddings")
    p.wait_for_selector(f"{tab}.active")
    assert page.errors == []
