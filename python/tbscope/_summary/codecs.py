"""Media codecs: arrays laid out as images and frames, and encoded as PNG and animated GIF by
small encoders of our own (Pillow and matplotlib only where the caller asks for resampling,
box labels or figures)."""

from __future__ import annotations

import math
import struct
import sys
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np


# ------------------------------------------------------------------------------------------------
# Images


def _check_formats(dataformats: object, ndim: int, shape: tuple[int, ...], what: str) -> str:
    if not isinstance(dataformats, str):
        raise TypeError(f"{what}: dataformats must be a string such as 'CHW', got {dataformats!r}")
    fmt = dataformats.upper()
    allowed = {4: {"N", "C", "H", "W"}, 3: {"C", "H", "W"}, 2: {"H", "W"}}
    if len(set(fmt)) != len(fmt) or allowed.get(len(fmt)) != set(fmt):
        raise ValueError(
            f"{what}: dataformats={dataformats!r} is not a layout; use each letter once, e.g. "
            "'NCHW' or 'NHWC' (4-D), 'CHW' or 'HWC' (3-D), 'HW' (2-D)"
        )
    if ndim != len(fmt):
        raise ValueError(f"{what}: dataformats={dataformats!r} describes a {len(fmt)}-D tensor, but the shape is {shape}")
    return fmt


def _grid(nchw: np.ndarray, ncols: int = 8) -> np.ndarray:
    """Images [N, C, H, W] side by side, ``ncols`` to a row, on a zero canvas → [H', W', C].

    The same layout as torch's ``make_grid`` for TensorBoard (no padding, row-major order)."""
    n, c, h, w = nchw.shape
    if n == 0:
        raise ValueError("images: the batch is empty (N == 0); pass at least one image")
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((nrows * h, ncols * w, c), dtype=nchw.dtype)
    for i in range(n):
        row, col = divmod(i, ncols)
        canvas[row * h : (row + 1) * h, col * w : (col + 1) * w] = nchw[i].transpose(1, 2, 0)
    return canvas


def _to_hwc(arr: np.ndarray, dataformats: str, what: str) -> np.ndarray:
    fmt = _check_formats(dataformats, arr.ndim, arr.shape, what)
    if len(fmt) == 4:
        hwc = _grid(arr.transpose([fmt.index(c) for c in "NCHW"]))
    elif len(fmt) == 3:
        hwc = arr.transpose([fmt.index(c) for c in "HWC"])
    else:
        hwc = arr.transpose([fmt.index(c) for c in "HW"])[:, :, None]
    if hwc.shape[2] not in (1, 2, 3, 4):
        raise ValueError(
            f"{what}: an image has 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels, but the "
            f"'C' axis of shape {arr.shape} (dataformats={dataformats!r}) has {hwc.shape[2]}; check dataformats"
        )
    if hwc.shape[0] == 0 or hwc.shape[1] == 0:
        raise ValueError(f"{what}: the image is empty (shape {arr.shape}, dataformats={dataformats!r})")
    return hwc


def _to_uint8(arr: np.ndarray, what: str) -> np.ndarray:
    """uint8 stays as it is; any other real dtype is taken to be in [0, 1]: x*255 in float32,
    clipped to [0, 255] and truncated, as torch does. NaN becomes 0."""
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected uint8 in [0, 255] or floats in [0, 1], got dtype {arr.dtype}")
    with np.errstate(all="ignore"):
        scaled = arr.astype(np.float32) * np.float32(255)
        scaled = np.nan_to_num(scaled, nan=0.0, posinf=255.0, neginf=0.0)
        np.clip(scaled, 0, 255, out=scaled)
    return np.asarray(scaled, dtype=np.uint8)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


_PNG_COLOR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}  # gray, gray+alpha, RGB, RGBA


def encode_png(hwc: np.ndarray) -> bytes:
    """PNG bytes of a uint8 [H, W, C] array (C = 1..4), 8 bits per sample, not interlaced."""
    h, w, c = hwc.shape
    rows = np.ascontiguousarray(hwc, dtype=np.uint8).reshape(h, w * c)
    # Every row uses filter 1 ("Sub": each byte minus the byte one pixel to its left, mod 256).
    # It is one vectorised subtraction and compresses smooth images and flat plots well.
    filtered = np.empty((h, w * c + 1), dtype=np.uint8)
    filtered[:, 0] = 1
    filtered[:, 1 : 1 + c] = rows[:, :c]
    filtered[:, 1 + c :] = rows[:, c:] - rows[:, :-c]
    header = struct.pack(">IIBBBBB", w, h, 8, _PNG_COLOR_TYPE[c], 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(filtered.tobytes(), 6))
        + _png_chunk(b"IEND", b"")
    )


def _rescale(u8: np.ndarray, rescale: float, what: str) -> np.ndarray:
    if rescale == 1:
        return u8
    if not isinstance(rescale, (int, float)) or not rescale > 0 or not math.isfinite(rescale):
        raise ValueError(f"{what}: rescale must be a positive number, got {rescale!r}")
    h, w, c = u8.shape
    new_h, new_w = int(h * rescale), int(w * rescale)
    if new_h < 1 or new_w < 1:
        raise ValueError(f"{what}: rescale={rescale} shrinks the {h}x{w} image to nothing")
    try:
        from PIL import Image
    except ImportError:
        # Without Pillow: nearest neighbour, sampling each output pixel's centre.
        ys = ((np.arange(new_h) + 0.5) * h / new_h).astype(np.intp)
        xs = ((np.arange(new_w) + 0.5) * w / new_w).astype(np.intp)
        return np.asarray(u8[ys[:, None], xs[None, :]])
    # With Pillow, the same Lanczos filter torch and tensorboardX use.
    picture = Image.fromarray(u8[:, :, 0] if c == 1 else u8)
    resized = np.asarray(picture.resize((new_w, new_h), Image.Resampling.LANCZOS))
    return resized.reshape(new_h, new_w, c)


_BOX_COLOR = (255, 0, 0)
_BOX_THICKNESS = 2


def _draw_boxes(rgb: np.ndarray, boxes: np.ndarray) -> None:
    """Outline each [x_min, y_min, x_max, y_max] box (pixels, rounded) in red, in place. The
    2-pixel outline lies inside the box, so a box never paints outside its own corners."""
    h, w, c = rgb.shape
    color = np.array(_BOX_COLOR + (255,) * (c - 3), dtype=np.uint8)
    for x0, y0, x1, y1 in np.rint(boxes).astype(np.int64).tolist():
        left, right = sorted((x0, x1))
        top, bottom = sorted((y0, y1))
        # Clip to the image; a box wholly outside leaves nothing to draw.
        cl, cr, ct, cb = max(left, 0), min(right, w - 1), max(top, 0), min(bottom, h - 1)
        if cl > cr or ct > cb:
            continue
        t = _BOX_THICKNESS
        for r0, r1 in ((top, top + t - 1), (bottom - t + 1, bottom)):  # horizontal bands
            r0, r1 = max(r0, ct), min(r1, cb)
            if r0 <= r1:
                rgb[r0 : r1 + 1, cl : cr + 1] = color
        for c0, c1 in ((left, left + t - 1), (right - t + 1, right)):  # vertical bands
            c0, c1 = max(c0, cl), min(c1, cr)
            if c0 <= c1:
                rgb[ct : cb + 1, c0 : c1 + 1] = color


def _draw_labels(rgb: np.ndarray, boxes: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """Each label in black on a red band at its box's bottom-left corner (where torch puts it)."""
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.fromarray(rgb)
    draw = ImageDraw.Draw(picture)
    font = ImageFont.load_default()
    fill = _BOX_COLOR + (255,) * (rgb.shape[2] - 3)
    for (x0, _y0, _x1, y1), label in zip(boxes.tolist(), labels):
        if not label:
            continue
        left, top, right, bottom = font.getbbox(label)
        width, height = right - left, bottom - top
        margin = math.ceil(0.05 * height)
        draw.rectangle([(x0, y1 - height - 2 * margin), (x0 + width, y1)], fill=fill)
        draw.text((x0 + margin, y1 - height - margin), label, fill=(0,) * len(fill), font=font)
    return np.asarray(picture).copy()


def _render_figure(fig: Any, close: bool) -> np.ndarray:
    if type(fig).__module__.split(".", 1)[0] != "matplotlib" or not hasattr(fig, "canvas"):
        raise TypeError(
            f"figure: expected a matplotlib Figure or a list of them, got {type(fig).__module__}.{type(fig).__qualname__}"
        )
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas: Any = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.array(canvas.buffer_rgba(), dtype=np.uint8)  # a copy, independent of the canvas
    if close:
        # Only figures made through pyplot are registered there; importing pyplot otherwise
        # would only pick a GUI backend for nothing.
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(fig)
    return rgba


# ------------------------------------------------------------------------------------------------
# Video (animated GIF)


def _video_grid(v: np.ndarray) -> np.ndarray:
    """[N, T, C, H, W] → [T, H', W', C]: the batch tiled into each frame, in torch's layout
    (N padded with black clips to a power of two; 2^floor(log2(N)/2) rows)."""
    n, t, c, h, w = v.shape
    padded = 1 << (n - 1).bit_length()
    if padded != n:
        v = np.concatenate([v, np.zeros((padded - n, t, c, h, w), dtype=v.dtype)])
    rows = 2 ** ((n.bit_length() - 1) // 2)
    cols = padded // rows
    v = v.reshape(rows, cols, t, c, h, w).transpose(2, 0, 4, 1, 5, 3)
    return v.reshape(t, rows * h, cols * w, c)


def _lzw(indices: bytes, min_code_size: int) -> bytes:
    """GIF's variable-width LZW of a sequence of palette indices."""
    clear = 1 << min_code_size
    end = clear + 1
    size = min_code_size + 1
    next_code = end + 1
    table: dict[int, int] = {}
    out = bytearray()
    acc = clear  # bit accumulator, least significant bits first; starts with a clear code
    nbits = size
    it = iter(indices)
    prefix = next(it)
    for px in it:
        k = (prefix << 8) | px
        code = table.get(k)
        if code is not None:
            prefix = code
            continue
        acc |= prefix << nbits
        nbits += size
        if next_code < 4096:
            table[k] = next_code
            next_code += 1
            # The decoder builds the same entry one code later, so it widens its reads once its
            # table reaches 2**size; that is when ours has gone one past it.
            if next_code > (1 << size) and size < 12:
                size += 1
        else:
            # Table full: start over, so long frames keep compressing what they see now.
            acc |= clear << nbits
            nbits += size
            table.clear()
            size = min_code_size + 1
            next_code = end + 1
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8
        prefix = px
    acc |= prefix << nbits
    nbits += size
    acc |= end << nbits
    nbits += size
    while nbits > 0:
        out.append(acc & 0xFF)
        acc >>= 8
        nbits -= 8
    return bytes(out)


def _sub_blocks(data: bytes) -> bytes:
    parts = [bytes([len(data[i : i + 255])]) + data[i : i + 255] for i in range(0, len(data), 255)]
    return b"".join(parts) + b"\x00"


def _palettize(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices [T, H, W] uint8, palette [K, 3] uint8) for frames [T, H, W, C].

    Exact when the whole clip uses at most 256 colours (always true for gray); otherwise each
    pixel goes to the nearest colour of a fixed 6x7x6 cube (GIF allows 256 colours)."""
    if frames.shape[3] == 1:
        return frames[..., 0], np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
    rgb = frames[..., :3].astype(np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    colours, inverse = np.unique(packed.ravel(), return_inverse=True)
    if len(colours) <= 256:
        palette = np.stack([(colours >> 16) & 255, (colours >> 8) & 255, colours & 255], axis=1)
        return inverse.reshape(packed.shape).astype(np.uint8), palette.astype(np.uint8)
    levels = np.array([6, 7, 6])
    q = np.rint(rgb * (levels - 1) / 255.0).astype(np.uint32)
    indices = (q[..., 0] * 7 + q[..., 1]) * 6 + q[..., 2]
    grid = np.stack(np.meshgrid(np.arange(6), np.arange(7), np.arange(6), indexing="ij"), axis=-1).reshape(-1, 3)
    palette = np.rint(grid * 255.0 / (levels - 1)).astype(np.uint8)
    return indices.astype(np.uint8), palette


def encode_gif(frames: np.ndarray, fps: float) -> bytes:
    """An endlessly looping animated GIF of uint8 frames [T, H, W, C] (C = 1, 3 or 4; alpha is
    dropped), one global palette, each frame shown for 1/fps s (GIF counts in 1/100 s)."""
    t, h, w, _ = frames.shape
    if h > 0xFFFF or w > 0xFFFF:
        raise ValueError(f"video: a GIF frame is at most 65535x65535 pixels, got {w}x{h}")
    indices, palette = _palettize(frames)
    bits = max(1, int(len(palette) - 1).bit_length())  # palette entries = 2**bits
    table = np.zeros((1 << bits, 3), dtype=np.uint8)
    table[: len(palette)] = palette
    delay = min(max(round(100 / fps), 1), 0xFFFF)
    out = [
        b"GIF89a",
        # Logical screen: size, global colour table present (0x80), 8-bit colour resolution (0x70).
        struct.pack("<HHBBB", w, h, 0x80 | 0x70 | (bits - 1), 0, 0),
        table.tobytes(),
        # NETSCAPE2.0 application extension: loop count 0 = forever.
        b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00",
    ]
    min_code_size = max(2, bits)
    for frame in indices:
        # Graphic control extension: disposal 1 (leave the frame in place), the frame's delay.
        out.append(struct.pack("<BBBBHBB", 0x21, 0xF9, 4, 0x04, delay, 0, 0))
        out.append(struct.pack("<BHHHHB", 0x2C, 0, 0, w, h, 0))
        out.append(bytes([min_code_size]) + _sub_blocks(_lzw(frame.tobytes(), min_code_size)))
    out.append(b"\x3b")
    return b"".join(out)
