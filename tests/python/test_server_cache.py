"""tbscope serve through its cache (the default): the read is served first and the cache written
after it, off the request path, through a real uvicorn on loopback.

``TBSCOPE_CACHE_TEST_HOLD=<path>`` holds the server's cache write before it writes anything until
``<path>`` exists (or the write is abandoned), so these tests see the server while its write is
pending without timing anything."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import tbscope
from server_util import get_json

STEPS = 300


def _write(root: Path, lo: int, hi: int) -> None:
    for seed in (0, 1):
        with tbscope.SummaryWriter(root / f"seed{seed}", filename_suffix=f".{lo}") as w:
            for step in range(lo, hi):
                w.add_scalar("loss", 1.0 / (step + 1) + seed, step)


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    _write(root, 0, STEPS)
    return root


@pytest.fixture()
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(d))
    return d


def _points(url: str) -> dict[str, list[tuple[int, float]]]:
    """Per run, its (step, value) points in step order (a run's files are served in file order)."""
    body = get_json(url, "api/v1/scalars?tag=loss&points=0")
    assert body["loading"] is False
    return {s["run"]: sorted(zip(s["columns"]["step"], s["columns"]["value"])) for s in body["series"]}


def _the_cache(logdir: Path) -> Path:
    from tbscope._cache import cache_dir

    return Path(cache_dir(logdir))


def _status(s: tbscope.Server) -> str:
    (st,) = s.store.sources
    info = st.logdir.cache_info
    assert info is not None
    return info.status


def _check(url: str, hi: int) -> None:
    """Every point of both runs up to step ``hi``, with its value."""
    got = _points(url)
    assert sorted(got) == ["seed0", "seed1"]
    for seed in (0, 1):
        steps, values = zip(*got[f"seed{seed}"])
        assert list(steps) == list(range(hi))
        assert list(values) == pytest.approx([1.0 / (step + 1) + seed for step in range(hi)])


def test_first_answer_comes_before_the_cache_is_written(logdir, cache_root, tmp_path, monkeypatch):
    release = tmp_path / "release"
    monkeypatch.setenv("TBSCOPE_CACHE_TEST_HOLD", str(release))
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        _check(s.url, STEPS)
        # The complete answer was served while the cache write waits: nothing published yet.
        cache = _the_cache(logdir)
        assert not (cache / "CURRENT").exists()
        assert not s.store.wait_cache_written(0.05)
        release.touch()
        assert s.store.wait_cache_written(60)
        assert (cache / "CURRENT").exists()
    monkeypatch.delenv("TBSCOPE_CACHE_TEST_HOLD")
    # Restarted: everything comes from the generation written in the background.
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert _status(s) == "hit"
        _check(s.url, STEPS)


def test_stop_during_the_write_abandons_it(logdir, cache_root, tmp_path, monkeypatch):
    # A first start writes a generation; the data then grows.
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60) and s.store.wait_cache_written(60)
    cache = _the_cache(logdir)
    first = (cache / "CURRENT").read_text()
    _write(logdir, STEPS, STEPS + 50)
    # The second start's write is held, and the server stopped meanwhile.
    monkeypatch.setenv("TBSCOPE_CACHE_TEST_HOLD", str(tmp_path / "never"))
    s = tbscope.serve(logdir, port=0, reload_interval=0)
    try:
        assert s.wait_loaded(60)
        _check(s.url, STEPS + 50)
        assert not s.store.wait_cache_written(0.05)
    finally:
        t0 = time.monotonic()
        s.stop()
    assert time.monotonic() - t0 < 5
    assert not s.store._writer.is_alive()
    # The cache is the first generation, whole; the abandoned write left nothing behind.
    assert (cache / "CURRENT").read_text() == first
    assert not [p.name for p in cache.iterdir() if p.name.startswith("tmp-")]
    monkeypatch.delenv("TBSCOPE_CACHE_TEST_HOLD")
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert _status(s) == "updated"
        _check(s.url, STEPS + 50)
        assert s.store.wait_cache_written(60)
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert _status(s) == "hit"
        _check(s.url, STEPS + 50)


def test_stop_during_the_first_write_then_a_rebuild(logdir, cache_root, tmp_path, monkeypatch):
    monkeypatch.setenv("TBSCOPE_CACHE_TEST_HOLD", str(tmp_path / "never"))
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
    cache = _the_cache(logdir)
    assert not cache.exists() or not [p.name for p in cache.iterdir() if p.name.startswith(("tmp-", "gen-", "CUR"))]
    monkeypatch.delenv("TBSCOPE_CACHE_TEST_HOLD")
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert _status(s) == "miss"
        _check(s.url, STEPS)


def test_live_append_during_the_write_is_seen(logdir, cache_root, tmp_path, monkeypatch):
    release = tmp_path / "release"
    monkeypatch.setenv("TBSCOPE_CACHE_TEST_HOLD", str(release))
    with tbscope.serve(logdir, port=0, reload_interval=0.2) as s:
        assert s.wait_loaded(60)
        gen = get_json(s.url, "api/v1/status")["generation"]
        _write(logdir, STEPS, STEPS + 20)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(_points(s.url)["seed1"]) < STEPS + 20:
            time.sleep(0.05)
        _check(s.url, STEPS + 20)
        assert get_json(s.url, f"api/v1/changes?since={gen}")["runs"] == ["seed0", "seed1"]
        # All of it while the first write is still held.
        assert not (_the_cache(logdir) / "CURRENT").exists()
        release.touch()
        assert s.store.wait_cache_written(60)
    monkeypatch.delenv("TBSCOPE_CACHE_TEST_HOLD")
    # The write after the append holds it too.
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert _status(s) == "hit"
        _check(s.url, STEPS + 20)


def test_library_cache_stays_synchronous(logdir, tmp_path, monkeypatch):
    """scan(cache=...) outside the server writes its generation before the read returns."""
    monkeypatch.setenv("TBSCOPE_CACHE_TEST_HOLD", str(tmp_path / "never"))
    lg = tbscope.scan(logdir, cache=tmp_path / "c")
    lg.reload()
    info = lg.cache_info
    assert info is not None and info.status == "miss" and info.written
    assert (tmp_path / "c" / "CURRENT").exists()
