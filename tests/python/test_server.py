"""tbscope serve, through a real uvicorn server on loopback: every endpoint, the answers'
shapes and values, and the security rules (traversal, token, cookie, Host header, CSP, SQL)."""

from __future__ import annotations

import io
import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tbscope
from server_util import get_json, request

LOSS_STEPS = 500


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    """Every kind: scalars (with NaN, inf and a spike), histograms, images, audio, text, a
    tensor, PR curves, a custom-scalar layout, and torch-style hparams (a child run)."""
    from tensorboardX import SummaryWriter as TbxWriter

    root = tmp_path_factory.mktemp("serve")
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        run = root / f"exp/seed{seed}"
        with tbscope.SummaryWriter(run) as w:
            for step in range(LOSS_STEPS):
                v = math.exp(-step / 100) + 0.01 * seed
                if seed == 0 and step == 300:
                    v = 50.0  # a spike
                if seed == 0 and step == 400:
                    v = float("nan")
                if seed == 1 and step == 450:
                    v = float("inf")
                w.add_scalar("loss", v, step)
            for step in range(0, LOSS_STEPS, 100):
                w.add_histogram("weights", rng.normal(0, 1 + step / 100, 500), step)
            y, x = np.mgrid[0:8, 0:8] / 7.0
            w.add_image("pic", np.stack([x, y, x * y]), 0)
            w.add_audio("tone", np.sin(np.linspace(0, 200, 4000)).astype(np.float32), 0, sample_rate=8000)
            w.add_text("note", "**bold** <script>alert(1)</script>", 0)
        with TbxWriter(str(run)) as t:
            t.add_pr_curve("pr", rng.integers(0, 2, 50), rng.random(50), 0)
            t.add_custom_scalars({"Main": {"loss": ["Multiline", ["loss"]]}})
            t.add_hparams({"lr": 0.1, "seed": seed}, {"hparam/final": 0.5 + seed})
    return root


@pytest.fixture(scope="module")
def server(logdir):
    s = tbscope.serve(logdir, port=0, cache=False, reload_interval=0.3)
    assert s.wait_loaded(60)
    yield s
    s.stop()


def test_index_and_docs(server):
    r = request(server.url, "")
    assert r.status == 200 and r.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'self'" in r.headers["content-security-policy"]
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    docs = request(server.url, "api/docs")
    assert docs.status == 200 and b"/api/v1/scalars" in docs.body and b"<script" not in docs.body
    spec = get_json(server.url, "api/openapi.json")
    assert "/api/v1/scalars" in spec["paths"] and "/api/v1/hparams" in spec["paths"]


def test_status(server):
    s = get_json(server.url, "api/v1/status")
    assert s["loading"]["done"] and s["generation"] >= 1
    assert s["kinds"]["scalars"] >= 1 and s["kinds"]["images"] == 1 and s["kinds"]["pr_curves"] == 1
    assert s["kinds"]["hparams"] is True and s["kinds"]["custom_scalars"] is True
    assert s["kinds"]["embeddings"] == 0
    assert s["token_required"] is False


def test_runs_and_colours(server):
    r = get_json(server.url, "api/v1/runs")
    names = r["columns"]["run"]
    assert names == sorted(names) and "exp/seed0" in names and r["total"] == len(names)
    again = get_json(server.url, "api/v1/runs")
    assert again["columns"]["color"] == r["columns"]["color"]
    assert all(c.startswith("#") and len(c) == 7 for c in r["columns"]["color"])
    page = get_json(server.url, "api/v1/runs?offset=1&limit=1")
    assert page["columns"]["run"] == names[1:2] and page["total"] == len(names)
    only = get_json(server.url, "api/v1/runs?filter=exp/seed?")
    assert only["columns"]["run"] == ["exp/seed0", "exp/seed1"]
    rx = get_json(server.url, "api/v1/runs?filter=/seed1$/")
    assert rx["columns"]["run"] == ["exp/seed1"]


def test_tags_and_series(server):
    t = get_json(server.url, "api/v1/tags?kind=scalars")
    i = t["columns"]["tag"].index("loss")
    assert t["columns"]["runs"][i] == 2 and t["columns"]["points"][i] == 2 * LOSS_STEPS
    s = get_json(server.url, "api/v1/series?kind=pr_curves")
    assert s["columns"]["tag"] == ["pr", "pr"]
    assert request(server.url, "api/v1/tags?kind=nope").status == 400


def test_scalars_downsampled_keeps_extremes_and_encodes_nan(server):
    r = get_json(server.url, "api/v1/scalars?tag=loss&points=40&smoothing=0.6")
    by = {s["run"]: s for s in r["series"]}
    s0 = by["exp/seed0"]
    assert s0["total_points"] == LOSS_STEPS and len(s0["columns"]["step"]) <= 40
    assert 300 in s0["columns"]["step"] and 50.0 in s0["columns"]["value"]
    assert "NaN" in s0["columns"]["value"]
    assert "Infinity" in by["exp/seed1"]["columns"]["value"]
    # Smoothing is over the whole series, then taken at the kept points.
    full = tbscope.read_scalars(server.store.sources[0].source.path, runs="exp/seed1", tags="loss")["value"].to_numpy()
    want = tbscope.ema(full, 0.6)
    got = by["exp/seed1"]["columns"]
    for step, sm in zip(got["step"], got["smoothed"]):
        w = want[step]
        assert sm == ("Infinity" if w == math.inf else w)


def test_scalars_smoothing_per_point_weight_near_one(server):
    # The dashboard smooths long runs with per-point weights such as 0.999 ** (1000 / 100_000):
    # any weight below 1 is TensorBoard's EMA over the whole series.
    w = 0.999 ** (1000 / 100_000)
    r = get_json(server.url, f"api/v1/scalars?tag=loss&run=exp/seed0&points=0&smoothing={w!r}")
    got = r["series"][0]["columns"]["smoothed"]
    full = tbscope.read_scalars(server.store.sources[0].source.path, runs="exp/seed0", tags="loss")["value"].to_numpy()
    want = tbscope.ema(full, w)
    assert [g if isinstance(g, str) else round(g, 9) for g in got] == [
        ("NaN" if math.isnan(x) else "Infinity" if x == math.inf else round(float(x), 9)) for x in want
    ]


def test_scalars_arrow_and_post(server):
    r = request(
        server.url, "api/v1/scalars?tag=loss&points=0", headers={"Accept": "application/vnd.apache.arrow.stream"}
    )
    assert r.status == 200 and r.headers["content-type"] == "application/vnd.apache.arrow.stream"
    t = pa.ipc.open_stream(r.body).read_all()
    assert t.num_rows == 2 * LOSS_STEPS
    assert t.schema.field("run").type == pa.dictionary(pa.int32(), pa.string())
    assert t.schema.metadata[b"tbscope.tag"] == b"loss"
    body = b'{"tag": "loss", "runs": ["exp/seed1"], "points": 10, "x": "wall_time"}'
    p = request(server.url, "api/v1/scalars", method="POST", headers={"Content-Type": "application/json"}, body=body)
    assert p.status == 200
    series = p.json()["series"]
    assert [s["run"] for s in series] == ["exp/seed1"] and len(series[0]["columns"]["step"]) <= 10


def test_scalars_window_and_relative(server):
    r = get_json(server.url, "api/v1/scalars?tag=loss&run=exp/seed0&step_min=100&step_max=199&points=20")
    cols = r["series"][0]["columns"]
    assert min(cols["step"]) == 100 and max(cols["step"]) == 199 and r["series"][0]["total_points"] == 100
    rel = get_json(server.url, "api/v1/scalars?tag=loss&run=exp/seed0&x=relative&points=0")["series"][0]["columns"]
    assert rel["relative"][0] == 0.0 and len(rel["relative"]) == LOSS_STEPS


def test_scalars_bad_parameters(server):
    for q in (
        "points=3",
        "points=-1",
        "points=100001",
        "smoothing=1.5",
        "smoothing=1",
        "x=time",
        "step_min=5&step_max=1",
    ):
        r = request(server.url, f"api/v1/scalars?tag=loss&{q}")
        assert r.status == 400, q
        assert r.json()["error"]["code"] == "bad_request" and "Traceback" not in r.body.decode()
    assert request(server.url, "api/v1/scalars").status == 400  # tag is required


def test_histograms_and_distributions(server):
    from tensorboard.plugins.distribution.compressor import compress_histogram

    h = get_json(server.url, "api/v1/histograms?tag=weights&run=exp/seed0&points=3")
    assert h["columns"]["step"] == [0, 200, 400]
    d = get_json(server.url, "api/v1/distributions?tag=weights&run=exp/seed0&points=0")
    assert d["basis_points"] == [0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000]
    full = get_json(server.url, "api/v1/histograms?tag=weights&run=exp/seed0&points=0")["columns"]
    for left, right, count, values in zip(full["left"], full["right"], full["count"], d["columns"]["values"]):
        want = [v[1] for v in compress_histogram([[a, b, c] for a, b, c in zip(left, right, count)])]
        np.testing.assert_allclose(values, want, rtol=1e-12)
    assert request(server.url, "api/v1/histograms?tag=nope&run=exp/seed0").status == 404


def test_images_audio_blobs(server, logdir):
    im = get_json(server.url, "api/v1/images?tag=pic&run=exp/seed0")["columns"]
    assert im["width"] == [8] and im["content_type"] == ["image/png"]
    key = im["key"][0]
    b = request(server.url, f"api/v1/blob/{key}")
    assert b.status == 200 and b.headers["content-type"] == "image/png" and b.body.startswith(b"\x89PNG")
    assert b.headers["cache-control"] == "private, max-age=31536000, immutable"
    assert b.headers["x-content-type-options"] == "nosniff"
    want = tbscope.read_images(logdir, runs="exp/seed0")["data"].iloc[0]
    assert b.body == want
    au = get_json(server.url, "api/v1/audio?tag=tone&run=exp/seed0")["columns"]
    clip = request(server.url, f"api/v1/blob/{au['key'][0]}")
    assert clip.status == 200 and clip.headers["content-type"] == "audio/wav" and clip.body[:4] == b"RIFF"
    # Keys are stable: a second server over the same logdir gives the same ones.
    with tbscope.serve(logdir, port=0, cache=False, reload_interval=0) as other:
        other.wait_loaded(60)
        assert get_json(other.url, "api/v1/images?tag=pic&run=exp/seed0")["columns"]["key"] == im["key"]
    for bad in ("0" * 32, "nothere", "..%2f..%2fetc%2fpasswd"):
        assert request(server.url, f"api/v1/blob/{bad}").status == 404


def test_text_is_raw(server):
    t = get_json(server.url, "api/v1/text?tag=note&run=exp/seed0")["columns"]
    assert t["text"] == ["**bold** <script>alert(1)</script>"] and t["shape"] == [[]]


@pytest.mark.parametrize(
    ("kind", "tag", "noun"),
    [
        ("images", "pic", "images"),
        ("audio", "tone", "audio"),
        ("text", "note", "text"),
        ("pr_curves", "pr", "PR curve"),
    ],
)
def test_series_answers_revalidate_and_name_a_missing_tag(server, kind, tag, noun):
    # One run and tag's rows: an ETag the client revalidates with, and a 404 that names the
    # kind and where to list its tags.
    r = request(server.url, f"api/v1/{kind}?tag={tag}&run=exp/seed0")
    assert r.status == 200 and r.json()["run"] == "exp/seed0" and r.json()["tag"] == tag
    again = request(server.url, f"api/v1/{kind}?tag={tag}&run=exp/seed0", headers={"If-None-Match": r.headers["etag"]})
    assert again.status == 304 and again.body == b""
    missing = request(server.url, f"api/v1/{kind}?tag=nope&run=exp/seed0")
    assert missing.status == 404
    assert missing.json()["error"]["message"] == (
        f"run 'exp/seed0' has no {noun} tag 'nope'; list them with api/v1/tags?kind={kind}"
    )
    assert request(server.url, "api/v1/tensors?tag=nope&run=exp/seed0").json()["error"]["message"] == (
        "run 'exp/seed0' has no tensor tag 'nope'; list them with api/v1/tags?kind=tensors"
    )


def test_tensors_pr_curves_custom_scalars(server):
    pr = get_json(server.url, "api/v1/pr_curves?tag=pr&run=exp/seed0")["columns"]
    assert len(pr["thresholds"][0]) == len(pr["precision"][0]) == len(pr["tp"][0])
    cs = get_json(server.url, "api/v1/custom_scalars")
    assert set(cs["layouts"]) == {"exp/seed0", "exp/seed1"}
    assert cs["merged"]["category"][0]["title"] == "Main"


def test_hparams_one_row_per_experiment(server):
    h = get_json(server.url, "api/v1/hparams")
    assert h["columns"]["run"] == ["exp/seed0", "exp/seed1"]
    assert h["columns"]["hp:seed"] == [0, 1] and h["columns"]["hp:lr"] == [0.1, 0.1]
    types = {i["name"]: i["type"] for i in h["hparams"]}
    assert types == {"lr": "float", "seed": "int"}
    cols = {m["tag"]: m["column"] for m in h["metrics"]}
    assert h["columns"][cols["hparam/final"]] == [0.5, 1.5]
    assert h["columns"][cols["loss"]][1] == pytest.approx(math.exp(-(LOSS_STEPS - 1) / 100) + 0.01)


def test_health(server):
    h = get_json(server.url, "api/v1/health")
    assert h["ok"] is True and set(h["columns"]) == {"file", "run", "offset", "end", "severity", "reason"}


def test_sql_locked_down(server, tmp_path):
    r = get_json(
        server.url,
        "api/v1/sql?q=SELECT%20run,%20count(*)%20AS%20n%20FROM%20scalars%20WHERE%20tag%3D'loss'%20GROUP%20BY%20run%20ORDER%20BY%20run",
    )
    assert r["columns"]["n"] == [LOSS_STEPS, LOSS_STEPS] and r["truncated"] is False
    lim = get_json(server.url, "api/v1/sql?q=SELECT%20*%20FROM%20scalars&limit=5")
    assert len(lim["columns"]["step"]) == 5 and lim["truncated"] is True
    target = tmp_path / "written.csv"
    from urllib.parse import quote

    for q in (
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM read_text('/etc/hostname')",
        f"COPY (SELECT 1) TO '{target}'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        f"ATTACH '{tmp_path / 'x.db'}'",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; SELECT 2",
    ):
        rr = request(server.url, "api/v1/sql?q=" + quote(q))
        assert rr.status == 400, q
        assert rr.json()["error"]["code"] == "bad_request"
        assert b"root:" not in rr.body
    assert not target.exists() and not (tmp_path / "x.db").exists()
    post = request(
        server.url,
        "api/v1/sql",
        method="POST",
        headers={"Content-Type": "application/json"},
        body=b'{"q": "SELECT 42 AS x"}',
    )
    assert post.json()["columns"]["x"] == [42]


def test_downloads(server):
    csv = request(server.url, "api/v1/download?kind=scalars&tag=loss&run=exp/seed0&format=csv")
    assert csv.status == 200 and 'filename="exp_seed0-loss.csv"' in csv.headers["content-disposition"]
    assert csv.body.count(b"\n") == LOSS_STEPS + 1
    pq = request(server.url, "api/v1/download/summary?format=parquet")
    import pyarrow.parquet as papq

    t = papq.read_table(io.BytesIO(pq.body))
    assert t.column("run").to_pylist() == ["exp/seed0", "exp/seed1"]


def test_errors_have_one_shape(server):
    for path, status in (
        ("api/v1/nope", 404),
        ("api/v1/scalars?tag=loss&points=x", 400),
        ("nowhere", 404),
        ("api/v1/histograms?tag=x&run=nope", 404),
    ):
        r = request(server.url, path)
        assert r.status == status, path
        err = r.json()["error"]
        assert err["status"] == status and err["code"] and err["message"]
        assert r.headers["content-security-policy"].startswith("default-src 'none'")
    r = request(server.url, "api/v1/runs", method="DELETE")
    assert r.status == 405 and r.json()["error"]["code"] == "method_not_allowed"


def test_answers_while_a_read_holds_the_reader(server):
    """Listing endpoints read snapshots: a reload in progress (which holds the reader) does not
    make them wait."""
    st = server.store.sources[0]
    with st.lock:
        for path in (
            "api/v1/status",
            "api/v1/runs",
            "api/v1/tags?kind=scalars",
            "api/v1/series",
            "api/v1/health",
            "api/v1/changes?since=0",
        ):
            assert request(server.url, path, timeout=5).status == 200, path


def test_etag_revalidation(server):
    r = request(server.url, "api/v1/runs")
    tag = r.headers["etag"]
    again = request(server.url, "api/v1/runs", headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b""


@pytest.mark.parametrize(
    "path",
    [
        "static/../../../../etc/passwd",
        "static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "static/..%2f..%2f..%2fetc%2fpasswd",
        "static//etc/passwd",
        "static/../app.py",
        "static/%2e%2e/app.py",
        "../../../etc/passwd",
        "api/v1/blob/..%2f..%2fetc%2fpasswd",
        "api/v1/images?tag=pic&run=../../etc",
    ],
)
def test_no_path_outside_the_logdir(server, path):
    r = request(server.url, path)
    assert r.status in (400, 404), (path, r.status)
    assert b"root:" not in r.body and b"def create_app" not in r.body


def test_status_totals_are_the_event_files_read(logdir):
    # Once loaded, the totals are the event files' own bytes, not what the process happened to read
    # meanwhile (imports, the cache): a small logdir reported megabytes before.
    with tbscope.serve(logdir, port=0, cache=False, reload_interval=0) as s:
        s.wait_loaded(60)
        loading = get_json(s.url, "api/v1/status")["loading"]
    files = [p for p in Path(logdir).rglob("*") if "tfevents" in p.name]
    assert loading["done"] is True
    assert loading["files_total"] == loading["files_done"] == len(files)
    assert loading["bytes_total"] == loading["bytes_done"] == sum(p.stat().st_size for p in files)


def test_load_totals_are_the_readers_discovery(tmp_path):
    """While loading, the totals come from the reader's own discovery: the same event files
    as the load (runs through symlinks too, as TensorBoard finds them; no other files)."""
    from tbscope.server import make_config
    from tbscope.server.store import Store

    outside = tmp_path / "outside"
    for run, steps in (("root/a", 3), ("root/b/c", 5), ("outside/linked", 7)):
        with tbscope.SummaryWriter(tmp_path / run) as w:
            for step in range(steps):
                w.add_scalar("loss", float(step), step)
    (tmp_path / "root" / "a" / "notes.txt").write_text("not an event file")
    (tmp_path / "root" / "link").symlink_to(outside, target_is_directory=True)
    store = Store(make_config(tmp_path / "root", cache=False, reload_interval=0))
    store._count_files()
    listed = store.progress.as_dict()
    runs = tbscope.scan(tmp_path / "root").run_info().to_arrow()
    assert "link/linked" in runs.column("run").to_pylist()
    assert listed["files_total"] == sum(runs.column("files").to_pylist()) == 3
    assert listed["bytes_total"] == sum(runs.column("bytes").to_pylist())


def test_big_bodies_refused(server):
    r = request(
        server.url,
        "api/v1/sql",
        method="POST",
        headers={"Content-Type": "application/json"},
        body=b'{"q": "' + b" " * (2 << 20) + b'"}',
    )
    assert r.status == 413 and r.json()["error"]["code"] == "too_large"


def test_host_header_allow_list(logdir):
    with tbscope.serve(logdir, port=0, cache=False, reload_interval=0, allowed_hosts=["tb.example.org"]) as s:
        assert request(s.url, "api/v1/status", headers={"Host": "evil.example.com"}).status == 400
        assert request(s.url, "api/v1/status", headers={"Host": f"localhost:{s.port}"}).status == 200
        assert request(s.url, "api/v1/status", headers={"Host": "tb.example.org"}).status == 200


def test_token(logdir):
    with pytest.raises(ValueError, match="token"):
        tbscope.serve(logdir, host="0.0.0.0", port=0, token=None)
    with tbscope.serve(logdir, port=0, cache=False, reload_interval=0, token="s3cret-token") as s:
        for path in (
            "api/v1/status",
            "api/openapi.json",
            "api/docs",
            "api/v1/blob/" + "0" * 32,
            "static/../api/v1/runs",
            "static/%2e%2e/api/v1/runs",
        ):
            r = request(s.url, path)
            assert r.status == 401 and r.json()["error"]["code"] == "unauthorized", path
        # The dashboard's page and assets are the public build: they load without the token, so the
        # page can ask for it. Writes to them stay guarded; nothing from the logdir is in them.
        page = request(s.url, "")
        assert page.status == 200 and page.headers["content-type"].startswith("text/html")
        assert str(logdir).encode() not in page.body and b"exp/seed0" not in page.body
        assert request(s.url, "static/no-such-asset.js").status == 404
        assert request(s.url, "", method="POST", body=b"").status == 401
        assert request(s.url, "api/v1/status", headers={"Authorization": "Bearer wrong"}).status == 401
        ok = request(s.url, "api/v1/status", headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status == 200 and ok.json()["token_required"] is True
        assert request(s.url, "api/v1/runs?token=nope").status == 401
        visit = request(s.url, "api/v1/runs?offset=0&token=s3cret-token")
        assert visit.status == 303 and visit.headers["location"].endswith("/api/v1/runs?offset=0")
        cookie = visit.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and cookie.startswith("tbscope_token=s3cret-token")
        jar = cookie.split(";")[0]
        assert request(s.url, "api/v1/runs", headers={"Cookie": jar}).status == 200
        assert request(s.url, "api/v1/runs", headers={"Cookie": "tbscope_token=wrong"}).status == 401


def test_path_prefix(logdir):
    with tbscope.serve(logdir, port=0, cache=False, reload_interval=0, path_prefix="/tb") as s:
        assert s.url.endswith("/tb/")
        base = s.url[: -len("tb/")]
        assert get_json(s.url, "api/v1/status")["loading"] is not None
        assert request(base, "api/v1/status").status == 404
        r = request(base, "tb")
        assert r.status == 303 and r.headers["location"] == "/tb/"
        spec = get_json(s.url, "api/openapi.json")
        assert spec.get("servers", [{}])[0].get("url") == "/tb"


def test_two_logdirs(logdir, tmp_path):
    with tbscope.SummaryWriter(tmp_path / "b" / "other") as w:
        w.add_scalar("loss", 1.0, 0)
    # Given out of order: the runs are listed sorted all the same.
    spec = f"b:{tmp_path / 'b'},a:{logdir}"
    with tbscope.serve(spec, port=0, cache=False, reload_interval=0) as s:
        s.wait_loaded(60)
        runs = get_json(s.url, "api/v1/runs")["columns"]["run"]
        assert "a/exp/seed0" in runs and "b/other" in runs and runs == sorted(runs)
        sc = get_json(s.url, "api/v1/scalars?tag=loss&points=0")
        assert [x["run"] for x in sc["series"]] == ["a/exp/seed0", "a/exp/seed1", "b/other"]
        assert get_json(s.url, "api/v1/images?tag=pic&run=a/exp/seed0")["columns"]["width"] == [8]
        q = get_json(
            s.url, "api/v1/sql?q=SELECT%20DISTINCT%20run%20FROM%20scalars%20WHERE%20tag%3D'loss'%20ORDER%20BY%20run"
        )
        assert q["columns"]["run"] == ["a/exp/seed0", "a/exp/seed1", "b/other"]


def test_waits_for_a_logdir_that_does_not_exist_yet(tmp_path):
    later = tmp_path / "later"
    with tbscope.serve(later, port=0, cache=False, reload_interval=0.2) as s:
        st = get_json(s.url, "api/v1/status")
        assert st["logdirs"][0]["exists"] is False
        assert get_json(s.url, "api/v1/runs")["total"] == 0
        with tbscope.SummaryWriter(later / "run") as w:
            w.add_scalar("x", 1.0, 0)
        deadline = time.time() + 20
        while time.time() < deadline and get_json(s.url, "api/v1/runs")["total"] == 0:
            time.sleep(0.1)
        assert get_json(s.url, "api/v1/runs")["columns"]["run"] == ["run"]


def test_live_append_is_announced(tmp_path):
    """A file grows: the change notice arrives over server-sent events, and the new points are
    served; the polling fallback says the same."""
    import http.client
    from urllib.parse import urlsplit

    w = tbscope.SummaryWriter(tmp_path / "live", flush_secs=3600)
    for step in range(10):
        w.add_scalar("loss", 1.0 / (step + 1), step)
    w.flush()
    with tbscope.serve(tmp_path, port=0, cache=False, reload_interval=0.2) as s:
        s.wait_loaded(60)
        gen = get_json(s.url, "api/v1/status")["generation"]
        u = urlsplit(s.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", "/api/v1/events")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("content-type").startswith("text/event-stream")
        events: list[bytes] = []

        def read() -> None:
            buf = b""
            while b"event: change" not in buf:
                line = resp.fp.readline()
                if not line:
                    return
                buf += line
            buf += resp.fp.readline()
            events.append(buf)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(0.5)
        for step in range(10, 25):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.flush()
        reader.join(20)
        conn.close()
        assert events, "no change notice arrived"
        assert b'"runs":["live"]' in events[0] and b'"kinds":["scalars"]' in events[0]
        ch = get_json(s.url, f"api/v1/changes?since={gen}")
        assert ch["runs"] == ["live"] and ch["generation"] > gen and ch["reset"] is False
        deadline = time.time() + 20
        steps: list[int] = []
        while time.time() < deadline and steps != list(range(25)):
            steps = get_json(s.url, "api/v1/scalars?tag=loss&points=0")["series"][0]["columns"]["step"]
            time.sleep(0.1)
        assert steps == list(range(25))
    w.close()


def test_cache_is_used_by_default(logdir, tmp_path, monkeypatch):
    """The first start writes the cache (after its read, in the background); a restart reads
    nothing from the logdir and serves the same answers."""
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        tags = get_json(s.url, "api/v1/tags?kind=scalars")["columns"]["tag"]
        first = get_json(s.url, "api/v1/scalars?tag=loss&points=0")
        assert tags and s.store.wait_cache_written(60)
        assert s.store.sources[0].logdir.cache_info.status == "miss"
    (cache,) = (tmp_path / "cache").iterdir()
    assert (cache / "CURRENT").exists()
    with tbscope.serve(logdir, port=0, reload_interval=0) as s:
        assert s.wait_loaded(60)
        assert s.store.sources[0].logdir.cache_info.status == "hit"
        assert get_json(s.url, "api/v1/tags?kind=scalars")["columns"]["tag"] == tags
        assert get_json(s.url, "api/v1/scalars?tag=loss&points=0")["series"] == first["series"]


def test_cli_serve_help_and_refusal(logdir):
    from click.testing import CliRunner
    from tbscope._cli.main import main

    r = CliRunner().invoke(main, ["serve", "--help"])
    assert r.exit_code == 0 and "--reload_interval" in r.output and "--path_prefix" in r.output
    env = {k: v for k, v in os.environ.items() if k != "TBSCOPE_TOKEN"}
    r = CliRunner(env=env).invoke(main, ["serve", str(logdir), "--bind_all", "--port", "0"])
    assert r.exit_code == 2 and "token" in r.output


def test_pandas_and_duckdb_stay_off_the_start_up_path(logdir):
    """Start-up and the first scalars answer import neither (a fresh process: other tests have
    imported them here)."""
    import subprocess
    import sys

    code = f"""
import sys, urllib.request, tbscope
s = tbscope.serve({str(logdir)!r}, port=0, cache=False, reload_interval=0)
s.wait_loaded(60)
for path in ("api/v1/status", "api/v1/runs", "api/v1/tags?kind=scalars"):
    urllib.request.urlopen(s.url + path).read()
req = urllib.request.Request(s.url + "api/v1/scalars?tag=loss&points=0", headers={{"Accept": "application/vnd.apache.arrow.stream"}})
urllib.request.urlopen(req).read()
s.stop()
print(sorted(m for m in ("pandas", "duckdb", "polars") if m in sys.modules))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_ctrl_c_stops_cleanly(logdir):
    """SIGINT stops `tbscope serve` at once, with an event stream still open, status 0."""
    import http.client
    import re
    import signal
    import subprocess
    import sys

    p = subprocess.Popen(
        [sys.executable, "-m", "tbscope", "serve", str(logdir), "--port", "0", "--no-cache"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        deadline = time.time() + 60
        while url is None and time.time() < deadline:
            line = p.stderr.readline()
            m = re.search(r"(http://127\.0\.0\.1:(\d+)/)", line)
            if m:
                url, port = m.group(1), int(m.group(2))
        assert url, "no URL printed"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", "/api/v1/events")
            assert conn.getresponse().status == 200
            p.send_signal(signal.SIGINT)
            assert p.wait(15) == 0
            assert "stopped" in p.stderr.read()
        finally:
            conn.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stderr.close()


def test_scalars_of_any_run_subset_are_the_tag_overview_sliced(tmp_path, monkeypatch):
    """A whole-series request is served from the tag's overview (every run downsampled once
    per data generation): any subset of runs, in any order, gets exactly what downsampling
    that run alone gives; a repeat is the same bytes; new data shows in the next answer."""
    rng = np.random.default_rng(5)
    lengths = {f"r{i}": n for i, n in enumerate([3, 40, 400, 1000, 17, 999, 250])}
    writers = {}
    for name, n in lengths.items():
        w = writers[name] = tbscope.SummaryWriter(tmp_path / name, flush_secs=3600)
        for step, v in enumerate(rng.standard_normal(n).cumsum()):
            w.add_scalar("loss", float(v), step * 3)
            w.add_scalar("other", float(-v), step * 3)
        w.flush()

    def expected(run: str, points: int) -> tuple[list[int], list[float]]:
        df = tbscope.read_scalars(tmp_path / run, tags="loss")
        steps, values = df["step"].to_numpy(), df["value"].to_numpy()
        keep = tbscope.downsample(steps, values, points)
        return steps[keep].tolist(), values[keep].tolist()

    from tbscope.server import scalars

    # Two overviews kept per snapshot: the third point count is downsampled directly.
    monkeypatch.setattr(scalars, "MAX_OVERVIEWS", 2)
    arrow = {"Accept": "application/vnd.apache.arrow.stream"}
    with tbscope.serve(tmp_path, port=0, cache=False, reload_interval=0.2) as s:
        assert s.wait_loaded(60)
        whole = get_json(s.url, "api/v1/scalars?tag=loss&points=20")
        assert [x["run"] for x in whole["series"]] == sorted(lengths)
        subset = ["r5", "r0", "r3"]
        part = get_json(s.url, "api/v1/scalars?tag=loss&points=20" + "".join(f"&run={r}" for r in subset))
        assert [x["run"] for x in part["series"]] == subset
        for answer in (whole, part):
            for series in answer["series"]:
                steps, values = expected(series["run"], 20)
                assert series["columns"]["step"] == steps and series["columns"]["value"] == values
                assert series["total_points"] == lengths[series["run"]]
        for points in (10, 30):
            for series in get_json(s.url, f"api/v1/scalars?tag=loss&points={points}&run=r3&run=r6")["series"]:
                assert series["columns"]["step"] == expected(series["run"], points)[0]
        kept = [k for k in s.store.snapshot.extras if isinstance(k, tuple) and k[0] == "scalars-overview"]
        assert sorted(k[3] for k in kept) == [10, 20]
        first = request(s.url, "api/v1/scalars?tag=loss&points=20&run=r2&run=r4", headers=arrow)
        again = request(s.url, "api/v1/scalars?tag=loss&points=20&run=r2&run=r4", headers=arrow)
        assert first.status == again.status == 200 and first.body == again.body
        t = pa.ipc.open_stream(first.body).read_all()
        runs = t.column("run").to_pylist()
        assert runs == sorted(runs, key=["r2", "r4"].index) and runs.count("r4") == 17
        assert t.column("step").to_pylist()[: runs.count("r2")] == expected("r2", 20)[0]
        # New points: the next answer has them (answers are kept per data generation).
        writers["r4"].add_scalar("loss", 123.0, 999)
        writers["r4"].flush()
        deadline = time.time() + 20
        while time.time() < deadline:
            t = pa.ipc.open_stream(
                request(s.url, "api/v1/scalars?tag=loss&points=20&run=r2&run=r4", headers=arrow).body
            ).read_all()
            if 999 in t.column("step").to_pylist():
                break
            time.sleep(0.1)
        assert t.column("run").to_pylist().count("r4") == 18 and 123.0 in t.column("value").to_pylist()
    for w in writers.values():
        w.close()


def test_sql_database_is_bounded_and_locked(server):
    """Server SQL runs with a memory limit and a few threads, in a database locked as the
    library's (no external access, settings locked), so no query can lift the bounds."""
    from urllib.parse import quote

    import duckdb
    from tbscope.server import config, sql

    q = (
        "SELECT current_setting('memory_limit') AS m, current_setting('threads') AS t,"
        " current_setting('enable_external_access') AS x, current_setting('lock_configuration') AS l"
    )
    got = get_json(server.url, "api/v1/sql?q=" + quote(q))["columns"]
    with duckdb.connect(config={"memory_limit": config.SQL_MEMORY_LIMIT}) as plain:
        want = plain.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    assert got == {"m": [want], "t": [config.SQL_THREADS], "x": [False], "l": [True]}
    con = sql._cursor()
    try:
        for setting in ("SET memory_limit = '100GB'", "SET threads = 64", "SET enable_external_access = true"):
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute(setting)
    finally:
        con.close()
    # The library's own database is untouched: still locked, without the server's bounds.
    import tbscope._query as query

    lib = query._cursor(external_access=False)
    try:
        assert lib.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0] is True
        assert lib.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] != want
    finally:
        lib.close()
