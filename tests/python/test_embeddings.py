"""Projector embeddings: ``Logdir.embeddings()``, ``Logdir.embedding()`` and projections.

Truth comes from TensorBoard's own projector plugin, asked through its HTTP routes (``/runs``,
``/info``, ``/tensor``, ``/metadata``, ``/sprite_image``) over logdirs that tensorboardX, tbscope's
writer and hand-written configs (TensorFlow's binary tensor form, the plugin-assets directory)
produce.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest

import tbscope
from tbscope import _projector

logging.getLogger("tensorboard").setLevel(logging.ERROR)


# ------------------------------------------------------------------------------------------------
# The oracle: TensorBoard's projector plugin


def tensorboard_projector(logdir: Path) -> dict[str, dict[str, dict]]:
    """run -> tensor name -> {"shape", "tensor" (float32), "metadata" (text or None), "sprite"
    (decoded pixels or None)} as TensorBoard's projector plugin serves them."""
    from PIL import Image
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.projector.projector_plugin import ProjectorPlugin
    from werkzeug.test import Client

    mux = pem.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    apps = ProjectorPlugin(base_plugin.TBContext(logdir=str(logdir), data_provider=provider)).get_plugin_apps()

    def get(route: str, **query: str) -> bytes:
        resp = Client(apps[route]).get(route, query_string=query)
        assert resp.status_code == 200, (route, query, resp.get_data(as_text=True))
        return resp.get_data()

    out: dict[str, dict[str, dict]] = {}
    for run in json.loads(get("/runs")):
        out[run] = {}
        for entry in json.loads(get("/info", run=run)).get("embeddings", []):
            name = entry["tensorName"]
            shape = [int(d) for d in entry["tensorShape"]]
            tensor = np.frombuffer(get("/tensor", run=run, name=name), dtype="<f4").reshape(shape)
            meta = get("/metadata", run=run, name=name).decode() if "metadataPath" in entry else None
            sprite = None
            if "sprite" in entry:
                sprite = np.asarray(Image.open(io.BytesIO(get("/sprite_image", run=run, name=name))))
            out[run][name] = {"shape": shape, "tensor": tensor, "metadata": meta, "sprite": sprite}
    return out


def metadata_as_tensorboard_parses(text: str) -> dict[str, list[str]]:
    """The projector's rule: the first line is a header when it has a tab."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lines and "\t" in lines[0]:
        header = lines[0].split("\t")
        return {h: [line.split("\t")[i] for line in lines[1:]] for i, h in enumerate(header)}
    return {"label": lines}


def assert_matches_tensorboard(logdir: Path) -> dict[str, dict[str, dict]]:
    want = tensorboard_projector(logdir)
    ld = tbscope.scan(logdir)
    listed = ld.embeddings().to_pandas()
    assert listed["error"].isna().all(), listed["error"].tolist()
    got_names = {(r, t) for r, t in zip(listed["run"], listed["tag"])}
    assert got_names == {(r, t) for r, names in want.items() for t in names}
    for run, names in want.items():
        for name, tb in names.items():
            row = listed[(listed["run"] == run) & (listed["tag"] == name)].iloc[0]
            assert [row["points"], row["dimensions"]] == tb["shape"]
            emb = ld.embedding(run, name)
            assert emb.values.shape == tuple(tb["shape"])
            # TensorBoard serves float32; tbscope keeps the text's values (float64).
            np.testing.assert_array_equal(emb.values.astype(np.float32), tb["tensor"])
            if tb["metadata"] is None:
                assert emb.metadata is None and list(row["metadata_columns"]) == []
            else:
                expect = metadata_as_tensorboard_parses(tb["metadata"])
                assert list(row["metadata_columns"]) == list(expect)
                assert {c: emb.metadata[c].tolist() for c in emb.metadata.columns} == expect
            assert bool(row["sprite"]) == (tb["sprite"] is not None)
            if tb["sprite"] is not None:
                thumbs = emb.images()
                w, h = int(row["sprite_width"]), int(row["sprite_height"])
                assert thumbs.shape[:3] == (tb["shape"][0], h, w)
                per_row = tb["sprite"].shape[1] // w
                for i in range(len(thumbs)):
                    r, c = divmod(i, per_row)
                    np.testing.assert_array_equal(thumbs[i], tb["sprite"][r * h : (r + 1) * h, c * w : (c + 1) * w].reshape(thumbs[i].shape))
    return want


# ------------------------------------------------------------------------------------------------
# Writers we did not write, and our own


def test_tensorboardx_add_embedding_reads_as_tensorboard_serves_it(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    rng = np.random.default_rng(0)
    # 36 sprite images: a full square (tensorboardX leaves the rest of its sprite uninitialised).
    with tbx.SummaryWriter(str(tmp_path / "run_a")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(rng.normal(size=(36, 6)).astype(np.float32), metadata=[f"p{i}" for i in range(36)],
                        label_img=rng.random((36, 3, 6, 6)), global_step=4)
        w.add_embedding(rng.normal(size=(9, 4)), metadata=[[f"w{i}", str(i % 3)] for i in range(9)],
                        metadata_header=["word", "class"], tag="layer/out")
        w.add_embedding(rng.normal(size=(5, 2)), tag="bare")
    with tbx.SummaryWriter(str(tmp_path / "nested" / "run_b")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(rng.normal(size=(12, 3)), metadata=list(range(12)), global_step=1)
    want = assert_matches_tensorboard(tmp_path)
    assert set(want) == {"run_a", "nested/run_b"} and len(want["run_a"]) == 3


def test_own_writer_add_embedding_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    mat = rng.normal(size=(10, 5))
    imgs = rng.integers(0, 256, (10, 3, 4, 7), dtype=np.uint8)
    with tbscope.SummaryWriter(str(tmp_path / "run")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(mat, metadata=[[f"n{i}", i] for i in range(10)], metadata_header=["name", "i"], label_img=imgs, global_step=2, tag="emb")
        w.add_embedding(rng.normal(size=(4, 3)), metadata=["a", "b", "c", "d"], label_img=rng.random((4, 1, 5, 5)), tag="gray")
    assert_matches_tensorboard(tmp_path)
    emb = tbscope.scan(tmp_path).embedding("run", "emb:00002")
    assert isinstance(emb, tbscope.Embedding) and emb.shape == (10, 5)
    np.testing.assert_array_equal(emb.values, mat)  # exactly: float64 from text
    np.testing.assert_array_equal(emb.images(), imgs.transpose(0, 2, 3, 1))
    assert emb.metadata["i"].tolist() == [str(i) for i in range(10)]


def _binary_logdir(root: Path) -> np.ndarray:
    """TensorFlow's binary form: raw float32 with tensor_shape, in the plugin-assets folder."""
    run = root / "run"
    assets = run / "plugins" / "org_tensorflow_tensorboard_projector"
    assets.mkdir(parents=True)
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(run)) as w:
        w.add_scalar("loss", 1.0, 0)
    mat = np.random.default_rng(2).normal(size=(8, 3)).astype("<f4")
    mat[0, 0] = 0.0
    mat.tofile(assets / "vectors.bytes")
    (assets / "labels.tsv").write_text("only\n" + "".join(f"x{i}\n" for i in range(7)))
    (assets / "projector_config.pbtxt").write_text(
        "# written by hand, as TensorFlow's projector docs describe\n"
        "embeddings <\n  tensor_name: 'word_embedding:0'\n  tensor_path: \"vectors.bytes\"\n"
        "  tensor_shape: [8, 3]\n  metadata_path: \"labels.tsv\"\n>\n"
    )
    return mat


def test_binary_tensor_and_plugin_assets_folder(tmp_path):
    pytest.importorskip("tensorboardX")
    mat = _binary_logdir(tmp_path)
    want = assert_matches_tensorboard(tmp_path)
    assert list(want["run"]) == ["word_embedding"]  # TensorBoard drops ":0"
    emb = tbscope.scan(tmp_path).embedding("run", "word_embedding:0")
    assert emb.values.dtype == np.float32
    np.testing.assert_array_equal(emb.values, mat)
    assert emb.metadata["label"].tolist() == ["only"] + [f"x{i}" for i in range(7)]  # one column: no header


def test_logdir_root_is_run_dot(tmp_path):
    with tbscope.SummaryWriter(str(tmp_path)) as w:
        w.add_embedding(np.eye(3), metadata=["a", "b", "c"])
    (tmp_path / "child").mkdir()
    with tbscope.SummaryWriter(str(tmp_path / "child")) as w:
        w.add_scalar("x", 1.0, 0)
    assert_matches_tensorboard(tmp_path)
    listed = tbscope.scan(tmp_path).embeddings().to_pandas()
    assert listed["run"].tolist() == ["."]


# ------------------------------------------------------------------------------------------------
# Bad input: reported per embedding, never fatal, never outside the config's folder


def test_bad_files_are_reported_and_the_rest_still_listed(tmp_path):
    good = tmp_path / "good"
    with tbscope.SummaryWriter(str(good)) as w:
        w.add_scalar("x", 1.0, 0)
        w.add_embedding(np.ones((2, 2)), tag="ok")
    broken = tmp_path / "broken"
    with tbscope.SummaryWriter(str(broken)) as w:
        w.add_scalar("x", 1.0, 0)
    (tmp_path / "secret.tsv").write_text("1\t2\n3\t4\n")
    (broken / "ragged.tsv").write_text("1\t2\n3\n")
    (broken / "projector_config.pbtxt").write_text(
        'embeddings { tensor_name: "escape" tensor_path: "../secret.tsv" }\n'
        'embeddings { tensor_name: "missing" tensor_path: "nope.tsv" }\n'
        'embeddings { tensor_name: "ragged" tensor_path: "ragged.tsv" }\n'
        'embeddings { tensor_name: "checkpoint_only" }\n'
    )
    unparsable = tmp_path / "unparsable"
    with tbscope.SummaryWriter(str(unparsable)) as w:
        w.add_scalar("x", 1.0, 0)
    (unparsable / "projector_config.pbtxt").write_text('embeddings {\n  tensor_path: "a.tsv"\n')
    ld = tbscope.scan(tmp_path)
    rows = {(r, t): e for r, t, e in zip(*(ld.embeddings().to_arrow().column(c).to_pylist() for c in ("run", "tag", "error")))}
    assert rows[("good", "ok:00000")] is None
    assert "outside the config's directory" in rows[("broken", "escape")]
    assert "nope.tsv" in rows[("broken", "missing")]
    assert ("broken", "checkpoint_only") not in rows  # needs TensorFlow's checkpoint reader
    assert "line 3" in rows[("unparsable", "")] and "missing '}'" in rows[("unparsable", "")]
    with pytest.raises(ValueError, match="outside"):
        ld.embedding("broken", "escape")
    with pytest.raises(ValueError, match=r"line 2: 1 values where the first line has 2"):
        ld.embedding("broken", "ragged")
    with pytest.raises(LookupError, match="'good' 'ok:00000'"):
        ld.embedding("good", "nothing")


def test_metadata_rows_must_match_points(tmp_path):
    (tmp_path / "t.tsv").write_text("1\t2\n3\t4\n")
    (tmp_path / "m.tsv").write_text("a\n")
    (tmp_path / "projector_config.pbtxt").write_text('embeddings { tensor_name: "t" tensor_path: "t.tsv" metadata_path: "m.tsv" }')
    ld = tbscope.scan(tmp_path)
    row = ld.embeddings().to_pandas().iloc[0]
    assert (row["points"], row["dimensions"]) == (2, 2) and "1 rows for 2 points" in row["error"]
    with pytest.raises(ValueError, match="1 rows for 2 points"):
        ld.embedding(".", "t")


@pytest.mark.parametrize(
    "text, lines, empty",
    [(b"", 0, 0), (b"a\n", 1, 0), (b"a", 1, 0), (b"\n\n\n", 3, 3), (b"a\r\n\r\nb\r\n", 3, 1), (b"\na\n\n", 3, 2), (b"a\n\r", 2, 1)],
)
def test_count_lines(tmp_path, text, lines, empty):
    (tmp_path / "f").write_bytes(text)
    assert _projector.count_lines(str(tmp_path / "f")) == (lines, empty)
    if b"\r" not in text:  # the same count as Python's own line split
        split = text.decode().split("\n")
        if split and split[-1] == "":
            split.pop()
        assert (len(split), sum(1 for x in split if x == "")) == (lines, empty)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 24])
def test_listing_counts_rows_across_blocks(tmp_path, monkeypatch, block):
    # Blocks shorter than a line, blank lines and CRLF must not change the shape.
    monkeypatch.setattr(_projector, "BLOCK", block)
    (tmp_path / "t.tsv").write_bytes(b"1.5\t2\t3\r\n\r\n4\t5\t6.25\n\n\n7\t8\t9")
    (tmp_path / "m.tsv").write_bytes(b"a\tb\n1\t2\n\t\n3\t4\n")
    (tmp_path / "projector_config.pbtxt").write_text('embeddings { tensor_name: "t" tensor_path: "t.tsv" metadata_path: "m.tsv" }')
    row = tbscope.scan(tmp_path).embeddings().to_arrow().to_pylist()[0]
    assert (row["points"], row["dimensions"], row["error"]) == (3, 3, None)
    assert row["metadata_columns"] == ["a", "b"]


def test_text_format_parser():
    msg = _projector.parse_text_proto(
        "# comment\nmodel_checkpoint_path: 'a' \"b\"  # adjacent strings join\n"
        'embeddings { tensor_name: "t\\t\\"q\\"\\101\\x42" tensor_shape: 3 tensor_shape: [4, 0x5] '
        "sprite < image_path: 's.png'; single_image_dim: [2, 3] > }\n"
        "embeddings: { unknown_field: 1.5e3 flag: true }"
    )
    assert msg["model_checkpoint_path"] == ["ab"]
    e = msg["embeddings"][0]
    assert e["tensor_name"] == ['t\t"q"AB'] and e["tensor_shape"] == [3, 4, 5]
    assert e["sprite"][0] == {"image_path": ["s.png"], "single_image_dim": [2, 3]}
    assert msg["embeddings"][1] == {"unknown_field": [1500.0], "flag": ["true"]}
    entries, ckpt = _projector.parse_config('embeddings { tensor_path: "x" }')
    assert entries[0].tensor_path == "x" and entries[0].tensor_name == "" and ckpt == ""
    for bad, where in (('embeddings { tensor_name "x" }', "line 1, column 26"), ("a: }", "line 1, column 4"), ("a: 'x\\q'", "unknown escape"), ("emb @", "line 1, column 5")):
        with pytest.raises(_projector.ConfigError, match=where):
            _projector.parse_text_proto(bad)
    with pytest.raises(_projector.ConfigError, match="non-negative integers"):
        _projector.parse_config('embeddings { tensor_path: "x" tensor_shape: -1 }')


# ------------------------------------------------------------------------------------------------
# Projections


def test_pca_keeps_a_plane_exactly_and_is_deterministic():
    rng = np.random.default_rng(3)
    plane = rng.normal(size=(200, 2)) * [5.0, 1.0]
    basis, _ = np.linalg.qr(rng.normal(size=(10, 2)))
    x = plane @ basis.T + rng.normal(size=10)  # a 2-D plane inside 10-D, shifted
    coords, info = _projector.project(x, 3)
    # The plane's pairwise distances survive; the third axis holds nothing.
    d_in = np.linalg.norm(x[:, None] - x[None], axis=-1)
    d_out = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    np.testing.assert_allclose(d_out, d_in, atol=1e-9)
    np.testing.assert_allclose(coords[:, 2], 0, atol=1e-9)
    assert info["explained_variance"][0] > info["explained_variance"][1] > 0
    np.testing.assert_allclose(sum(info["explained_variance"]), 1.0)
    # Same picture for the same data, whatever the points' order; the axes are the principal
    # ones (the variance along x is the largest eigenvalue of the covariance).
    perm = rng.permutation(200)
    again, _ = _projector.project(x[perm], 3)
    np.testing.assert_allclose(again, coords[perm], atol=1e-9)
    top = np.linalg.eigvalsh(np.cov(x.T))[-1]
    np.testing.assert_allclose(coords[:, 0].var(ddof=1), top)


def test_pca_of_few_points_and_low_dimensions():
    coords, info = _projector.project(np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]]), 3)
    assert coords.shape == (3, 3) and np.all(coords[:, 2] == 0)  # 2-D data asked for 3-D
    tall, _ = _projector.project(np.random.default_rng(4).normal(size=(3, 50)), 2)  # fewer points than dims
    assert tall.shape == (3, 2) and np.isfinite(tall).all()
    assert _projector.project(np.zeros((0, 4)), 2)[0].shape == (0, 2)


def test_projection_arguments_and_optional_methods(tmp_path):
    with tbscope.SummaryWriter(str(tmp_path)) as w:
        w.add_embedding(np.random.default_rng(5).normal(size=(20, 4)), metadata=[str(i % 2) for i in range(20)])
    emb = tbscope.scan(tmp_path).embedding(".", "default:00000")
    df = emb.project(2)
    assert list(df.columns) == ["x", "y", "label"] and df.attrs["method"] == "pca"
    with pytest.raises(ValueError, match="dims must be 2 or 3"):
        emb.project(4)
    with pytest.raises(ValueError, match="method must be one of pca, tsne, umap"):
        emb.project(2, method="mds")
    with pytest.raises(ValueError, match="NaN or infinite"):
        _projector.project(np.array([[np.nan, 1.0], [1.0, 2.0]]))
    for method, module, package in (("tsne", "sklearn", "scikit-learn"), ("umap", "umap", "umap-learn")):
        try:
            __import__(module)
        except ImportError:
            with pytest.raises(ImportError, match=f"pip install {package}"):
                emb.project(2, method=method)
        else:
            out = emb.project(3, method=method, seed=1)
            assert out[["x", "y", "z"]].notna().all().all() and out.attrs["explained_variance"] is None


def test_images_need_a_sprite(tmp_path):
    with tbscope.SummaryWriter(str(tmp_path)) as w:
        w.add_embedding(np.eye(2))
    with pytest.raises(LookupError, match="no sprite"):
        tbscope.scan(tmp_path).embedding(".", "default:00000").images()


def test_embeddings_table_in_sql(tmp_path):
    pytest.importorskip("duckdb")
    with tbscope.SummaryWriter(str(tmp_path / "a")) as w:
        w.add_scalar("x", 1.0, 0)
        w.add_embedding(np.ones((4, 3)), metadata=list("abcd"), tag="e")
    with tbscope.SummaryWriter(str(tmp_path / "b")) as w:
        w.add_scalar("x", 1.0, 0)
        w.add_embedding(np.ones((2, 5)), tag="f")
    got = tbscope.sql(tmp_path, "SELECT run, tag, points, dimensions, len(metadata_columns) AS cols FROM embeddings ORDER BY run").to_pandas()
    assert got.to_dict("records") == [
        {"run": "a", "tag": "e:00000", "points": 4, "dimensions": 3, "cols": 1},
        {"run": "b", "tag": "f:00000", "points": 2, "dimensions": 5, "cols": 0},
    ]
    only = tbscope.sql(tmp_path, "SELECT tag FROM embeddings WHERE run = 'b'").to_pandas()
    assert only["tag"].tolist() == ["f:00000"]


def test_config_parser_fuzz(tmp_path):
    """Mutated configs parse or raise ConfigError, never anything else; a listing never raises."""
    import random

    good = (
        '# c\nmodel_checkpoint_path: "m"\nembeddings {\n  tensor_name: "a:00001"\n  tensor_path: "t.tsv"\n'
        "  metadata_path: 'm.tsv'\n  tensor_shape: [2, 3]\n  sprite { image_path: \"s.png\" single_image_dim: 4 single_image_dim: 4 }\n}\n"
    )
    alphabet = '{}<>[]:;,"\'\\#\n\t 0x9.e-fAz_'
    rng = random.Random(14)
    for _ in range(3000):
        text = list(good)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(text) + 1)
            op = rng.random()
            if op < 0.4 and text:
                del text[min(i, len(text) - 1)]
            elif op < 0.8:
                text.insert(i, rng.choice(alphabet))
            else:
                text[i:i] = list(good[rng.randrange(len(good)) :][: rng.randint(1, 20)])
        try:
            _projector.parse_config("".join(text))
        except _projector.ConfigError:
            pass
    with pytest.raises(_projector.ConfigError, match="nested more than"):
        _projector.parse_text_proto("a {" * 5000 + "}" * 5000)
    (tmp_path / "projector_config.pbtxt").write_bytes(b"embeddings { tensor_path: \"\xff\xfe\" }")
    rows = tbscope.scan(tmp_path).embeddings().to_arrow().to_pylist()
    assert len(rows) == 1 and "projector_config.pbtxt" in rows[0]["error"]
