"""Revalidation of every answer that carries an ETag, for every GET route of the app: a repeat
with ``If-None-Match`` is a 304 with no body, and a change to what the answer shows (new
events, or the profile files it reads) is a 200 with a new ETag.

The routes come from the app's own route table: a route added without a line in ``ROUTES`` or
``NO_ETAG`` fails ``test_every_get_route_is_listed``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tbscope
from server_util import get_json, request

TRACE = Path(__file__).resolve().parents[1] / "data" / "torch_profiler" / "hostA.1795710513538474591.pt.trace.json.gz"
TRACE_FILE = f"exp/{TRACE.name}"


@dataclass(frozen=True)
class Spec:
    query: str = ""
    #: What the ETag follows: "events" (the data generation), "profiles" (the profile files'
    #: sizes and times, not the events) or "key" (a blob: its key names its bytes for good).
    follows: str = "events"


_SERIES = "run=exp&tag={tag}"
ROUTES: dict[str, Spec] = {
    "/api/v1/runs": Spec(),
    "/api/v1/tags": Spec("kind=scalars"),
    "/api/v1/series": Spec(),
    "/api/v1/health": Spec(),
    "/api/v1/scalars": Spec("tag=loss"),
    "/api/v1/histograms": Spec(_SERIES.format(tag="weights")),
    "/api/v1/distributions": Spec(_SERIES.format(tag="weights")),
    "/api/v1/images": Spec(_SERIES.format(tag="pic")),
    "/api/v1/audio": Spec(_SERIES.format(tag="tone")),
    "/api/v1/text": Spec(_SERIES.format(tag="note")),
    "/api/v1/tensors": Spec(_SERIES.format(tag="matrix")),
    "/api/v1/pr_curves": Spec(_SERIES.format(tag="pr")),
    "/api/v1/hparams": Spec(),
    "/api/v1/custom_scalars": Spec(),
    "/api/v1/embeddings": Spec(),
    "/api/v1/embeddings/projection": Spec("run=exp&tag=words:00001"),
    "/api/v1/embeddings/sprite": Spec("run=exp&tag=words:00001"),
    "/api/v1/profiles": Spec(follows="profiles"),
    "/api/v1/profile/events": Spec(f"run=exp&file={TRACE_FILE}", "profiles"),
    "/api/v1/profile/operations": Spec(f"run=exp&file={TRACE_FILE}", "profiles"),
    "/api/v1/blob/{key}": Spec(follows="key"),
}
#: GET routes without an ETag, and why.
NO_ETAG = {
    "/api/v1/status": "the poll that says whether anything changed: always answered",
    "/api/v1/changes": "answers a generation the client names",
    "/api/v1/events": "a stream",
    "/api/v1/sql": "a query's answer; not revalidated",
    "/api/v1/download": "an attachment",
    "/api/v1/download/summary": "an attachment",
    "/": "the dashboard page (no-cache, read from the wheel)",
    "/static/{path:path}": "the dashboard's files (hashed names are immutable)",
    "/api/docs": "the rendered OpenAPI document",
    "/api/openapi.json": "the OpenAPI document",
    "/api": "a 404 that points to the docs",
    "/api/v1": "a 404 that points to the docs",
}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    """One run with every kind, an embedding with a sprite, and a torch.profiler trace."""
    root = tmp_path_factory.mktemp("etags")
    run = root / "exp"
    rng = np.random.default_rng(0)
    with tbscope.SummaryWriter(run) as w:
        for step in range(20):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.add_histogram("weights", rng.normal(size=200), 0)
        w.add_image("pic", rng.random((3, 4, 4)), 0)
        w.add_audio("tone", np.sin(np.linspace(0, 50, 800)).astype(np.float32), 0, sample_rate=8000)
        w.add_text("note", "hello", 0)
        w.add_tensor("matrix", rng.normal(size=(2, 3)), 0)
        w.add_pr_curve("pr", rng.integers(0, 2, 30), rng.random(30), 0)
        w.add_custom_scalars({"Main": {"loss": ["Multiline", ["loss"]]}})
        w.add_hparams({"lr": 0.1}, {"hparam/final": 0.5})
        w.add_embedding(rng.normal(size=(9, 4)), label_img=rng.random((9, 3, 4, 4)), global_step=1, tag="words")
    shutil.copy(TRACE, run / TRACE.name)
    return root


@pytest.fixture(scope="module")
def server(logdir):
    s = tbscope.serve(logdir, port=0, cache=False, reload_interval=0.2)
    assert s.wait_loaded(60)
    yield s
    s.stop()


def _routes(routes: list, prefix: str = "") -> list[tuple[str, set[str]]]:
    """Every route's full path and methods. FastAPI 0.163 keeps an included router as one
    entry of the table (its routes and prefix inside it), older ones copy its routes in."""
    out = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        if inner is not None:
            out += _routes(inner.routes, prefix + r.include_context.prefix)
        else:
            out.append((prefix + r.path, set(getattr(r, "methods", None) or ())))
    return out


def test_every_get_route_is_listed(server):
    from tbscope.server.app import create_api

    gets = {path for path, methods in _routes(create_api(server.store).routes) if "GET" in methods}
    assert gets == set(ROUTES) | set(NO_ETAG), "classify the new route in ROUTES or NO_ETAG"
    assert not set(ROUTES) & set(NO_ETAG)


def _path(server, route: str, spec: Spec) -> str:
    path = route.removeprefix("/")
    if route == "/api/v1/blob/{key}":
        key = get_json(server.url, f"api/v1/images?{_SERIES.format(tag='pic')}")["columns"]["key"][0]
        path = path.replace("{key}", key)
    return path + (f"?{spec.query}" if spec.query else "")


def _append_and_reload(server, run: Path) -> None:
    before = server.store.generation
    with tbscope.SummaryWriter(run) as w:
        w.add_scalar("loss", 0.01, 1000 + before)
    deadline = time.monotonic() + 30
    while server.store.generation == before:
        assert time.monotonic() < deadline, "the server did not reload"
        time.sleep(0.05)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_repeat_is_304_and_a_change_is_a_new_etag(server, logdir, route):
    spec = ROUTES[route]
    path = _path(server, route, spec)
    first = request(server.url, path)
    assert first.status == 200, (path, first.body[:300])
    tag = first.headers["etag"]
    again = request(server.url, path, headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b"", path
    assert again.headers["etag"] == tag and again.headers["cache-control"] == first.headers["cache-control"]

    _append_and_reload(server, logdir / "exp")
    after = request(server.url, path, headers={"If-None-Match": tag})
    if spec.follows == "events":
        assert after.status == 200 and after.body, path
        assert after.headers["etag"] != tag
    else:
        # Not from the events: new events leave the client's copy current.
        assert after.status == 304, path
    if spec.follows == "profiles":
        trace = logdir / TRACE_FILE
        st = trace.stat()
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        touched = request(server.url, path, headers={"If-None-Match": tag})
        assert touched.status == 200 and touched.body and touched.headers["etag"] != tag, path


def test_health_while_loading_is_not_revalidated_after_the_load_ends(server):
    """The first load's end publishes no new generation: an answer that said ``loading`` must
    not be confirmed (304) once it is over."""
    store = server.store
    store._loaded.clear()  # as during the first load (its end only sets this event)
    try:
        during = request(server.url, "api/v1/health")
        assert during.status == 200 and b'"loading":true' in during.body.replace(b" ", b"")
    finally:
        store._loaded.set()
    after = request(server.url, "api/v1/health", headers={"If-None-Match": during.headers["etag"]})
    assert after.status == 200 and b'"loading":false' in after.body.replace(b" ", b"")
    assert after.headers["etag"] != during.headers["etag"]
