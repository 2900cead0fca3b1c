"""``api/v1/embeddings`` and ``embeddings/projection`` / ``embeddings/sprite``, through a real
uvicorn server: values against tbscope's reader (itself checked against TensorBoard's projector
in test_embeddings.py), sampling, errors, entity tags, the token, nothing outside the logdir."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import tbscope
from server_util import get_json, request
from tbscope import _projector


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    from tensorboardX import SummaryWriter as TbxWriter

    root = tmp_path_factory.mktemp("serve_emb")
    rng = np.random.default_rng(0)
    # A square number of sprite images: tensorboardX leaves the rest of its square sprite
    # uninitialised (np.ndarray), and casting that garbage warns.
    with TbxWriter(str(root / "tbx")) as w:
        w.add_scalar("loss", 1.0, 0)
        labels = [[f"w{i}", str(i % 4), f"{i * 0.5}" if i % 5 else ""] for i in range(36)]
        w.add_embedding(
            rng.normal(size=(36, 6)),
            metadata=labels,
            metadata_header=["word", "class", "score"],
            label_img=rng.random((36, 3, 4, 4)),
            global_step=1,
            tag="words",
        )
    with tbscope.SummaryWriter(str(root / "own")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(rng.normal(size=(6, 3)), metadata=list("abcdef"))
    (root / "outside.tsv").write_text("1\t2\n")
    with tbscope.SummaryWriter(str(root / "escape")) as w:
        w.add_scalar("loss", 1.0, 0)
    (root / "escape" / "projector_config.pbtxt").write_text(
        'embeddings { tensor_name: "leak" tensor_path: "../outside.tsv" }\n'
    )
    return root


@pytest.fixture(scope="module")
def server(logdir):
    s = tbscope.serve(logdir, port=0, cache=False, reload_interval=0.3)
    assert s.wait_loaded(60)
    yield s
    s.stop()


def test_listing_is_the_readers(server, logdir):
    got = get_json(server.url, "api/v1/embeddings")
    assert got["loading"] is False
    want = tbscope.scan(logdir).embeddings().to_arrow()
    cols = got["columns"]
    for c in ("run", "tag", "points", "dimensions", "metadata_columns", "sprite", "sprite_width", "sprite_height"):
        assert cols[c] == want.column(c).to_pylist(), c
    errors = dict(zip(zip(cols["run"], cols["tag"]), cols["error"]))
    assert errors[("tbx", "words:00001")] is None
    # The message says what is wrong without the server's own paths.
    assert (
        "outside the config's directory" in errors[("escape", "leak")] and str(logdir) not in errors[("escape", "leak")]
    )
    only = get_json(server.url, "api/v1/embeddings?run=own")["columns"]
    assert only["run"] == ["own"] and only["tag"] == ["default:00000"]
    assert get_json(server.url, "api/v1/embeddings?filter=t*")["columns"]["run"] == ["tbx"]


def test_projection_is_pca_of_the_reader_values(server, logdir):
    emb = tbscope.scan(logdir).embedding("tbx", "words:00001")
    for dims in (2, 3):
        got = get_json(server.url, f"api/v1/embeddings/projection?run=tbx&tag=words:00001&dims={dims}")
        coords, info = _projector.project(emb.values, dims)
        assert got["method"] == "pca" and got["dims"] == dims and got["total_points"] == 36 and got["dimensions"] == 6
        assert got["columns"]["index"] == list(range(36))
        for i, axis in enumerate("xyz"[:dims]):
            np.testing.assert_allclose(got["columns"][axis], coords[:, i], rtol=1e-12, atol=1e-12)
        assert ("z" in got["columns"]) == (dims == 3)
        np.testing.assert_allclose(got["explained_variance"], info["explained_variance"])
    assert got["metadata"] == [
        {"name": "word", "type": "string", "column": "meta:word"},
        {"name": "class", "type": "number", "column": "meta:class"},
        {"name": "score", "type": "number", "column": "meta:score"},
    ]
    assert got["columns"]["meta:word"] == emb.metadata["word"].tolist()
    assert got["columns"]["meta:class"] == [float(i % 4) for i in range(36)]
    assert got["columns"]["meta:score"] == [i * 0.5 if i % 5 else None for i in range(36)]  # empty cells are null
    assert got["sprite"] == {"width": 4, "height": 4}


def test_projection_sample_is_fixed_and_from_the_full_fit(server):
    full = get_json(server.url, "api/v1/embeddings/projection?run=tbx&tag=words:00001")["columns"]
    part = get_json(server.url, "api/v1/embeddings/projection?run=tbx&tag=words:00001&points=7")["columns"]
    again = get_json(server.url, "api/v1/embeddings/projection?run=tbx&tag=words:00001&points=7")["columns"]
    idx = part["index"]
    assert len(idx) == 7 and idx == sorted(set(idx)) and idx == again["index"]
    assert part["x"] == [full["x"][i] for i in idx] and part["meta:word"] == [full["meta:word"][i] for i in idx]


def test_projection_errors(server):
    def err(path: str) -> tuple[int, str]:
        r = request(server.url, path)
        body = r.json()["error"]
        return r.status, body["message"]

    status, msg = err("api/v1/embeddings/projection?run=nope&tag=x")
    assert status == 404 and "api/v1/embeddings" in msg
    status, msg = err("api/v1/embeddings/projection?run=tbx&tag=nope")
    assert status == 404 and "'words:00001'" in msg
    status, msg = err("api/v1/embeddings/projection?run=escape&tag=leak")
    assert status == 404 and "outside" in msg
    assert err("api/v1/embeddings/projection?run=tbx&tag=words:00001&dims=4")[0] == 400
    assert err("api/v1/embeddings/projection?run=tbx&tag=words:00001&method=mds")[0] == 400
    assert err("api/v1/embeddings/projection?run=tbx&tag=words:00001&points=0")[0] == 400
    try:
        import sklearn  # noqa: F401
    except ImportError:
        status, msg = err("api/v1/embeddings/projection?run=tbx&tag=words:00001&method=tsne")
        assert status == 400 and "pip install scikit-learn" in msg
    else:
        got = get_json(server.url, "api/v1/embeddings/projection?run=tbx&tag=words:00001&method=tsne&points=30")
        assert len(got["columns"]["x"]) == 30


def test_sprite(server, logdir):
    r = request(server.url, "api/v1/embeddings/sprite?run=tbx&tag=words:00001")
    assert r.status == 200 and r.headers["content-type"] == "image/png"
    assert r.body == (logdir / "tbx" / "00001" / "words" / "sprite.png").read_bytes()
    assert r.headers["x-content-type-options"] == "nosniff"
    assert request(server.url, "api/v1/embeddings/sprite?run=own&tag=default:00000").status == 404


def test_new_embedding_changes_listing_and_etag_without_new_events(server, logdir):
    from tbscope._summary import write_embedding

    first = request(server.url, "api/v1/embeddings")
    etag = first.headers["etag"]
    assert request(server.url, "api/v1/embeddings", headers={"If-None-Match": etag}).status == 304
    proj = request(server.url, "api/v1/embeddings/projection?run=own&tag=default:00000")
    assert (
        request(
            server.url,
            "api/v1/embeddings/projection?run=own&tag=default:00000",
            headers={"If-None-Match": proj.headers["etag"]},
        ).status
        == 304
    )
    # Only projector files change (write_embedding writes no event): the data generation stays.
    write_embedding(logdir / "own", np.eye(4), metadata=["p", "q", "r", "s"], global_step=7, tag="late")
    again = request(server.url, "api/v1/embeddings", headers={"If-None-Match": etag})
    assert again.status == 200 and "late:00007" in again.json()["columns"]["tag"]
    # The same step and tag written again replaces the tensor: the projection follows.
    new = np.random.default_rng(9).normal(size=(6, 3)) * 100
    write_embedding(logdir / "own", new, metadata=list("uvwxyz"))
    after = request(
        server.url,
        "api/v1/embeddings/projection?run=own&tag=default:00000",
        headers={"If-None-Match": proj.headers["etag"]},
    )
    assert after.status == 200
    np.testing.assert_allclose(after.json()["columns"]["x"], _projector.project(new, 2)[0][:, 0])
    assert after.json()["columns"]["meta:label"] == list("uvwxyz")


def test_token_and_prefixed_runs(logdir, tmp_path):
    spec = f"a:{logdir},b:{logdir / 'own'}"
    with tbscope.serve(spec, port=0, cache=False, reload_interval=0, token="tok-123") as s:
        assert s.wait_loaded(60)
        assert request(s.url, "api/v1/embeddings").status == 401
        auth = {"Authorization": "Bearer tok-123"}
        cols = get_json(s.url, "api/v1/embeddings", headers=auth)["columns"]
        assert ("a/tbx", "words:00001") in set(zip(cols["run"], cols["tag"]))
        assert ("b", "default:00000") in set(zip(cols["run"], cols["tag"]))
        got = get_json(s.url, "api/v1/embeddings/projection?run=b&tag=default:00000&dims=3", headers=auth)
        assert got["run"] == "b" and len(got["columns"]["z"]) == 6
        # The status counts the rows of the listing, over both logdirs.
        kinds = get_json(s.url, "api/v1/status", headers=auth)["kinds"]
        assert kinds["embeddings"] == len(cols["run"]) >= 4


def test_status_counts_embeddings(tmp_path):
    rng = np.random.default_rng(1)
    with tbscope.SummaryWriter(tmp_path / "plain") as w:
        w.add_scalar("loss", 1.0, 0)
    with tbscope.serve(tmp_path, port=0, cache=False, reload_interval=0.2) as s:
        assert s.wait_loaded(60)
        before = get_json(s.url, "api/v1/status")
        assert before["kinds"]["embeddings"] == 0 and before["kinds"]["scalars"] == 1
        # A run with events and two embeddings: counted once its events make a new generation.
        with tbscope.SummaryWriter(tmp_path / "emb") as w:
            w.add_scalar("loss", 1.0, 0)
            w.add_embedding(rng.normal(size=(5, 3)), global_step=0, tag="a")
            w.add_embedding(rng.normal(size=(4, 2)), global_step=0, tag="b")
        deadline = time.monotonic() + 30
        while get_json(s.url, "api/v1/status")["generation"] == before["generation"]:
            assert time.monotonic() < deadline, "the new run was not seen"
            time.sleep(0.1)
        after = get_json(s.url, "api/v1/status")["kinds"]
        listing = get_json(s.url, "api/v1/embeddings")["columns"]
        assert after["embeddings"] == len(listing["run"]) == 2 and set(listing["run"]) == {"emb"}


def test_embeddings_table_in_sql(server):
    got = get_json(
        server.url,
        "api/v1/sql?q="
        + "SELECT%20run,%20tag,%20points%20FROM%20embeddings%20WHERE%20error%20IS%20NULL%20AND%20run%20%3D%20'tbx'",
    )
    assert got["columns"] == {"run": ["tbx"], "tag": ["words:00001"], "points": [36]}
