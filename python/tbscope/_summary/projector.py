"""Projector files: ``add_embedding`` writes tensors, metadata, sprites and the projector
config as files beside the events, the layout torch writes (the projector plugin reads files,
not events)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from tbscope._summary.builders import to_numpy
from tbscope._summary.codecs import _grid, _to_uint8, encode_png


# ------------------------------------------------------------------------------------------------
# Embeddings (the projector plugin reads files, not events)


def _encode_path_part(tag: str) -> str:
    # torch's escaping, so a tag with '/' stays one directory and the paths match torch's.
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _pbtxt_string(s: str) -> str:
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def _tsv_cell(value: object) -> str:
    # A tab or newline inside a label would shift every later cell: the projector splits on them.
    return str(value).replace("\t", " ").replace("\r", " ").replace("\n", " ")


def write_embedding(
    logdir: str | os.PathLike[str],
    mat: object,
    metadata: Sequence[Any] | None = None,
    label_img: object = None,
    global_step: int | None = None,
    tag: str = "default",
    metadata_header: Sequence[str] | None = None,
) -> None:
    """Projector files as torch writes them: ``<logdir>/<step:05d>/<tag>/tensors.tsv`` (one row
    per point), ``metadata.tsv`` (labels; a header row when ``metadata_header`` is given),
    ``sprite.png`` (``label_img`` [N, C, H, W] tiled in a ceil(sqrt(N))-wide grid), and an
    ``embeddings`` entry appended to ``<logdir>/projector_config.pbtxt`` (once per step and tag:
    writing the same step and tag again replaces the files)."""
    arr = to_numpy(mat)
    if arr.ndim != 2 or arr.dtype.kind not in "biuf":
        raise ValueError(f"write_embedding: mat must be a 2-D array of numbers [points, dimensions], got shape {arr.shape} dtype {arr.dtype}")
    n = arr.shape[0]
    step = 0 if global_step is None else int(global_step)
    subdir = f"{step:05d}/{_encode_path_part(tag)}"
    save_path = os.path.join(os.fspath(logdir), *subdir.split("/"))
    if os.path.exists(save_path) and not os.path.isdir(save_path):
        raise NotADirectoryError(f"write_embedding: {save_path} exists and is a file; remove it or use another tag/step")
    rows: list[str] | None = None
    if metadata is not None:
        labels = list(metadata)
        if len(labels) != n:
            raise ValueError(f"write_embedding: metadata has {len(labels)} labels for {n} points; give one per row of mat")
        if metadata_header:
            header = [_tsv_cell(h) for h in metadata_header]
            for label in labels:
                if isinstance(label, (str, bytes)) or not hasattr(label, "__len__") or len(label) != len(header):
                    raise ValueError(
                        f"write_embedding: with metadata_header {list(metadata_header)!r} each label must be "
                        f"a list of {len(header)} columns, got {label!r}"
                    )
            rows = ["\t".join(header)] + ["\t".join(_tsv_cell(c) for c in label) for label in labels]
        else:
            rows = [_tsv_cell(label) for label in labels]
    sprite: bytes | None = None
    if label_img is not None:
        imgs = to_numpy(label_img)
        if imgs.ndim != 4 or imgs.shape[0] != n:
            raise ValueError(f"write_embedding: label_img must be [N, C, H, W] with N = {n} points, got shape {imgs.shape}")
        if imgs.shape[1] not in (1, 3, 4) or 0 in imgs.shape:
            raise ValueError(f"write_embedding: label_img needs 1, 3 or 4 channels on axis 1 and non-empty images, got shape {imgs.shape}")
        side = math.ceil(math.sqrt(n))
        tiles = _grid(_to_uint8(imgs, "write_embedding"), ncols=side)
        # A square grid of side x side cells, as torch makes it; the projector finds each
        # point's picture from single_image_dim and the sprite's width.
        sprite_hwc = np.zeros((side * imgs.shape[2], side * imgs.shape[3], imgs.shape[1]), dtype=np.uint8)
        sprite_hwc[: tiles.shape[0], : tiles.shape[1]] = tiles
        sprite = encode_png(sprite_hwc)
    os.makedirs(save_path, exist_ok=True)
    with open(os.path.join(save_path, "tensors.tsv"), "w", encoding="utf-8", newline="\n") as f:
        # repr of Python floats (what torch's str(x.item()) gives) round-trips every value exactly.
        f.writelines("\t".join(map(str, row)) + "\n" for row in arr.tolist())
    if rows is not None:
        with open(os.path.join(save_path, "metadata.tsv"), "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(rows) + "\n")
    if sprite is not None:
        with open(os.path.join(save_path, "sprite.png"), "wb") as fb:
            fb.write(sprite)
    entry = [
        "embeddings {",
        f"  tensor_name: {_pbtxt_string(f'{tag}:{step:05d}')}",
        f"  tensor_path: {_pbtxt_string(subdir + '/tensors.tsv')}",
    ]
    if rows is not None:
        entry.append(f"  metadata_path: {_pbtxt_string(subdir + '/metadata.tsv')}")
    if sprite is not None:
        imgs_shape = to_numpy(label_img).shape
        entry += [
            "  sprite {",
            f"    image_path: {_pbtxt_string(subdir + '/sprite.png')}",
            f"    single_image_dim: {imgs_shape[3]}",
            f"    single_image_dim: {imgs_shape[2]}",
            "  }",
        ]
    entry.append("}")
    config_path = os.path.join(os.fspath(logdir), "projector_config.pbtxt")
    tensor_path_line = f"  tensor_path: {_pbtxt_string(subdir + '/tensors.tsv')}"
    try:
        with open(config_path, encoding="utf-8") as f:
            existing = f.read()
    except FileNotFoundError:
        existing = ""
    blocks = _pbtxt_blocks(existing)
    # Replace this step and tag's entry if it exists (it may have gained metadata or a sprite).
    blocks = [b for b in blocks if tensor_path_line.strip() not in (line.strip() for line in b.splitlines())]
    blocks.append("\n".join(entry) + "\n")
    tmp = config_path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(blocks))
    os.replace(tmp, config_path)  # a reader never sees half a config


def _pbtxt_blocks(text: str) -> list[str]:
    """The top-level entries of a projector config (``embeddings { ... }`` blocks, one-line
    fields such as ``model_checkpoint_path: "..."``), each kept verbatim, split at brace depth 0."""
    blocks: list[str] = []
    depth = 0
    start = 0
    in_string = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\n" and depth == 0 and not in_string:
            line = text[start : i + 1]
            # A finished one-line field is an entry of its own; a bare `embeddings` (or
            # `embeddings:`) line waits for the block that follows it.
            if line.strip() and not re.fullmatch(r"\s*\w+\s*:?\s*", line):
                blocks.append(line)
                start = i + 1
        elif in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = text.find("\n", i)
                end = len(text) if end == -1 else end + 1
                blocks.append(text[start:end])
                start = end
                i = end
                continue
        i += 1
    if text[start:].strip():
        blocks.append(text[start:] if text.endswith("\n") else text[start:] + "\n")
    return blocks
