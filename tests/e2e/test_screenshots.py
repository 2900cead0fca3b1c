"""The pictures in docs/screenshots (make screenshots publishes them; make test keeps them in
build/e2e): the views a person sees first, light and dark, at 1280x800."""

from __future__ import annotations

from typing import Any

from browser_util import Page, Server


def shoot(browser: Any, server: Server, fragment: str, name: str, ready: str, scheme: str = "light") -> None:
    p = Page(browser, color_scheme=scheme)
    try:
        p.page.goto(server.url + "#" + fragment)
        p.page.wait_for_function(ready, timeout=30_000)
        p.page.wait_for_timeout(600)
        p.screenshot(name, publish=True)
        assert p.errors == [], p.errors
    finally:
        p.close()


CHARTS = "() => [...document.querySelectorAll('.scalar-card')].filter(c => c.dataset.state === 'ready').length >= 2"


def test_screenshots(browser: Any, server: Server) -> None:
    shoot(browser, server, "scalars?tags=train", "scalars-light", CHARTS)
    shoot(browser, server, "scalars?tags=train", "scalars-dark", CHARTS, scheme="dark")
    shoot(browser, server, "hparams", "hparams", "() => document.querySelectorAll('.hparams-table tr[data-row]').length >= 4")
    shoot(browser, server, "histograms", "histograms", "() => document.querySelectorAll('.hist-card canvas').length >= 2", scheme="dark")
    shoot(browser, server, "distributions", "distributions", "() => document.querySelectorAll('.dist-card canvas').length >= 2")
    shoot(browser, server, "images", "images", "() => [...document.querySelectorAll('.image-card img')].filter(i => i.complete && i.naturalWidth).length >= 2")
    shoot(browser, server, "text?tags=notes/markdown", "text", "() => document.querySelectorAll('.text-card .markdown table').length >= 1")
