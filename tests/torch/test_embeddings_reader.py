"""torch's ``add_embedding`` read back by tbscope (``Logdir.embeddings()``/``embedding()``) as
TensorBoard's projector plugin serves it: tensor, metadata columns and rows, sprite thumbnails."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter as TorchWriter

import tbscope
from tensorboard_view import projector


def metadata_columns(text: str) -> dict[str, list[str]]:
    """The projector's rule: a header exactly when the first line has a tab."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lines and "\t" in lines[0]:
        return {h: [line.split("\t")[i] for line in lines[1:]] for i, h in enumerate(lines[0].split("\t"))}
    return {"label": lines}


def test_torch_add_embedding_round_trip(tmp_path):
    g = torch.Generator().manual_seed(0)
    with TorchWriter(str(tmp_path / "run")) as w:
        w.add_scalar("loss", 1.0, 0)
        w.add_embedding(torch.randn(16, 7, generator=g), metadata=[f"p{i}" for i in range(16)], global_step=2)
        w.add_embedding(torch.randn(5, 3, generator=g, dtype=torch.float64), metadata=[["a", 1], ["b", 2], ["c", 3], ["d", 4], ["e", 5]],
                        metadata_header=["name", "n"], label_img=torch.rand(5, 3, 6, 6, generator=g), tag="with/sprite")
        w.add_embedding(torch.arange(12.0).reshape(4, 3), tag="bare")
    want = projector(tmp_path)
    ld = tbscope.scan(tmp_path)
    listed = ld.embeddings().to_pandas()
    assert listed["error"].isna().all(), listed["error"].tolist()
    assert sorted(zip(listed["run"], listed["tag"])) == sorted((r, t) for r, names in want.items() for t in names)
    for run, names in want.items():
        for name, tb in names.items():
            emb = ld.embedding(run, name)
            np.testing.assert_array_equal(emb.values.astype(np.float32), tb.tensor)
            row = listed[(listed["run"] == run) & (listed["tag"] == name)].iloc[0]
            assert (row["points"], row["dimensions"]) == tb.tensor.shape
            if tb.metadata is None:
                assert emb.metadata is None
            else:
                expect = metadata_columns(tb.metadata)
                assert list(row["metadata_columns"]) == list(expect)
                assert {c: emb.metadata[c].tolist() for c in emb.metadata.columns} == expect
            assert bool(row["sprite"]) == (tb.sprite is not None)
            if tb.sprite is not None:
                sheet = tb.sprite.frames[0]
                thumbs = emb.images()
                w_, h_ = int(row["sprite_width"]), int(row["sprite_height"])
                per_row = sheet.shape[1] // w_
                for i, t in enumerate(thumbs):
                    r, c = divmod(i, per_row)
                    np.testing.assert_array_equal(t, sheet[r * h_ : (r + 1) * h_, c * w_ : (c + 1) * w_, : t.shape[2]])
    # The projection of torch's tensor is numpy's PCA of the values TensorBoard serves.
    df = ld.embedding("run", "default:00002").project(3)
    assert list(df.columns) == ["x", "y", "z", "label"] and len(df) == 16
