"""tbparse's static helpers (``SummaryReader.tensor_to_histogram``, ``tensor_to_image``,
``tensor_to_audio``, ``histogram_to_cdf``, ``histogram_to_pdf``, ``histogram_to_bins``), written
for tbscope: the same results as tbparse 0.0.9's, with neither tbparse nor TensorFlow installed.

tbparse decodes images and audio with TensorFlow; here Pillow and the standard library's ``wave``
do it (``_decode_image``, ``_decode_wav``), returning the arrays TensorFlow returns.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from tbscope.compat._tbparse_frames import _decode_image, _decode_wav


def tensor_to_histogram(tensor: Any) -> dict[str, Any]:
    """A TF2 histogram tensor (``[[left, right, count], ...]``, each bucket ``[left, right)``) as
    tbparse's histogram dict: ``limits`` (the first left edge, then every right edge), ``counts``
    (0, then every count), ``min``/``max`` (the outer edges), ``num``; ``sum`` and
    ``sum_squares`` are NaN (the tensor does not carry them)."""
    rows = list(tensor)
    limits = np.array([rows[0][0], *(r[1] for r in rows)])
    counts = np.array([0, *(r[2] for r in rows)])
    return {
        "limits": limits,
        "counts": counts,
        "min": rows[0][0],
        "max": rows[-1][1],
        "num": np.sum(counts),
        "sum": np.nan,
        "sum_squares": np.nan,
    }


def buckets_to_histogram_dict(lst: Any) -> dict[str, Any]:
    """tbparse's deprecated name for :func:`tensor_to_histogram`."""
    return tensor_to_histogram(lst)


def tensor_to_image(tensor: Any) -> dict[str, Any]:
    """A TF2 image tensor (``[width, height, encoded image, ...]``) as tbparse's image dict: the
    decoded ``image`` (``uint8 [h, w, c]``, or ``[n, h, w, c]`` for several images), ``width``
    and ``height``. Decoded with Pillow, so TensorFlow is not needed."""
    images = np.stack([_decode_image(bytes(b)) for b in list(tensor)[2:]])
    if images.shape[0] == 1:
        images = images[0]
    return {"image": images, "width": int(tensor[0]), "height": int(tensor[1])}


def _wav_rate(data: bytes) -> int:
    import wave

    with wave.open(io.BytesIO(data)) as w:
        return int(w.getframerate())


def tensor_to_audio(tensor: Any) -> dict[str, Any]:
    """A TF2 audio tensor (``[[encoded WAV, label], ...]``, labels empty) as tbparse's audio
    dict: ``audio`` (``float32 [frames, channels]``, or ``[k, frames, channels]`` for several
    clips), ``content_type``, ``length_frames`` and ``sample_rate`` (int32). Decoded with the
    standard library, so TensorFlow is not needed."""
    arr = np.asarray(tensor, dtype=object)
    labels = arr[:, 1].tolist()
    if labels != [b""] * arr.shape[0]:
        raise AssertionError(f"tensor_to_audio expects empty labels, got {labels!r}")
    clips = [bytes(b) for b in arr[:, 0]]
    audio = np.stack([_decode_wav(c) for c in clips])
    rates = np.array([_wav_rate(c) for c in clips], dtype=np.int32)
    frames = audio.shape[1]
    out_audio: Any = audio[0] if audio.shape[0] == 1 else audio
    out_rate: Any = rates[0] if rates.shape[0] == 1 else rates
    return {"audio": out_audio, "content_type": "audio/wav", "length_frames": frames, "sample_rate": out_rate}


def histogram_to_cdf(counts: Any, limits: Any, x: Any) -> np.ndarray[Any, Any]:
    """The cumulative probability at each of ``x`` (strictly increasing), interpolated linearly
    inside the buckets of a tbparse histogram (``counts[0]`` is 0, ``limits[0]`` the left edge of
    the first bucket, ``limits[i]`` the right edge of bucket ``i``). 0 at or below the left
    edge, 1 above the last right edge."""
    c = np.asarray(counts)
    lim = np.asarray(limits)
    xs = np.asarray(x)
    if len(c) != len(lim):
        raise AssertionError(f"counts and limits differ in length ({len(c)} != {len(lim)})")
    if not np.all(np.diff(xs) > 0):
        raise AssertionError("x must be strictly increasing")
    total = np.sum(c)
    cum = np.cumsum(c)
    y = np.empty(len(xs), dtype=np.float64)
    # the bucket of each x: the first right edge at or past it (a zero-width bucket never holds x)
    right = np.searchsorted(lim, xs, side="left")
    inside = (xs > lim[0]) & (xs <= lim[-1])
    y[xs <= lim[0]] = 0
    y[xs > lim[-1]] = total
    r = right[inside]
    lo, hi, xi = lim[r - 1], lim[r], xs[inside]
    y[inside] = (cum[r - 1] * (hi - xi) + cum[r] * (xi - lo)) / (hi - lo)
    out: np.ndarray[Any, Any] = y / total
    return out


def histogram_to_pdf(counts: Any, limits: Any, x: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(centres, densities) between consecutive ``x``: the slope of :func:`histogram_to_cdf`."""
    xs = np.asarray(x)
    y = histogram_to_cdf(counts, limits, xs)
    return (xs[1:] + xs[:-1]) / 2, (y[1:] - y[:-1]) / (xs[1:] - xs[:-1])


def histogram_to_bins(
    counts: Any,
    limits: Any,
    lower_bound: float | None = None,
    upper_bound: float | None = None,
    n_bins: int = 30,
) -> tuple[list[Any], list[Any]]:
    """(bin centres, bin counts) of ``n_bins`` equal bins over ``[lower_bound, upper_bound]``,
    re-bucketed as TensorBoard's histogram dashboard does: each bucket (clipped to the range)
    gives each bin the share of its count that the bin overlaps; a bucket of zero width gives
    its whole count to the bin it starts in. Without both bounds, or with equal ones, the range
    is widened around the bound (to [-1, 1] without bounds), as tbparse does."""
    if len(counts) != len(limits):
        raise AssertionError(f"counts and limits differ in length ({len(counts)} != {len(limits)})")
    if counts[0] != 0:
        raise AssertionError("counts[0] must be 0 (limits[0] is the first bucket's left edge)")
    lo: Any = 0 if lower_bound is None or upper_bound is None else lower_bound
    hi: Any = 0 if lower_bound is None or upper_bound is None else upper_bound
    if lo == hi:
        lo, hi = lo / 1.1 - 1, lo * 1.1 + 1
    width = (hi - lo) / n_bins
    centres: list[Any] = []
    values: list[Any] = []
    b = 1  # the bucket the sweep is at; a bucket reaching past a bin stays for the next one
    for i in range(n_bins):
        left = lo + i * width
        right = left + width
        total: Any = 0
        while b < len(counts):
            b_right = min(hi, limits[b])
            b_left = max(lo, limits[b - 1])
            span = b_right - b_left
            if span > 0:
                overlap = min(b_right, right) - max(b_left, left)
                if overlap > 0:
                    total += overlap / span * counts[b]
            else:
                last_bin = right >= hi
                ends_in = b_right <= right if last_bin else b_right < right
                if left <= b_left and ends_in:
                    total += counts[b]
            if b_right > right:
                break
            b += 1
        centres.append(left + width / 2)
        values.append(total)
    return centres, values
