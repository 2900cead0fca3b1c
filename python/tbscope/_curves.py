"""Curves for drawing: downsampling that keeps extremes, and TensorBoard's smoothing.

Both run in Rust over numpy columns and take many series at once (``offsets``), so one tag
across a thousand runs is one call. The server uses them for every chart it serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tbscope import _core

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MIN_POINTS", "downsample", "ema"]

#: The smallest ``n`` of :func:`downsample` other than 0: one bucket's five points.
MIN_POINTS = 5


def _bounds(offsets: npt.ArrayLike | None, n: int) -> tuple[memoryview | None, memoryview | None]:
    import numpy as np

    if offsets is None:
        return None, None
    o = np.ascontiguousarray(offsets, dtype=np.int64)
    if o.ndim != 1 or len(o) < 1:
        raise ValueError(
            "offsets must be a one-dimensional list of series boundaries, e.g. [0, 100, 250] for two series"
        )
    if o[0] != 0 or o[-1] != n or (len(o) > 1 and (np.diff(o) < 0).any()):
        raise ValueError(f"offsets must start at 0, never decrease and end at the number of points ({n})")
    return np.ascontiguousarray(o[:-1]).data, np.ascontiguousarray(o[1:]).data


def downsample(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    n: int,
    *,
    offsets: npt.ArrayLike | None = None,
    x_range: tuple[float | None, float | None] | None = None,
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The positions of the points to draw so a chart of at most ``n`` points per series looks
    like a chart of all of them.

    ``x`` (steps or wall times) and ``y`` (values) are the points of one series, or of several
    side by side with ``offsets`` (series ``i`` is ``offsets[i]:offsets[i+1]``). Each series
    is cut into ``n // 4`` buckets of equal width along x, and each bucket keeps its first, last,
    lowest and highest point (M4). A series holding a NaN value gets ``n // 5`` buckets, each
    keeping its first NaN too, so a divergence stays visible. So the first, last, minimum and
    maximum of every series are always kept; a series of at most ``n`` points (or ``n=0``)
    is kept whole; ``n`` is 0 or at least 5. ``x_range=(lo, hi)`` keeps only points with ``lo <= x <= hi`` (a zoom), and
    downsamples those.

    Returns the positions (int64) into ``x``/``y``, increasing within each series, series after
    series. Rows with ``x`` going back (a restarted run) are fine: buckets follow x.

    >>> import numpy as np, tbscope
    >>> steps = np.arange(10_000)
    >>> loss = np.exp(-steps / 2000.0)
    >>> loss[7_777] = 5.0                              # a spike
    >>> keep = tbscope.downsample(steps, loss, 100)
    >>> len(keep) <= 100, 7_777 in keep
    (True, True)
    """
    import numpy as np

    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0 or 0 < n < MIN_POINTS:
        raise ValueError(
            f"n must be 0 (every point) or at least {MIN_POINTS} (a bucket's first, last, lowest, highest and NaN point); got {n!r}"
        )
    xa = np.asarray(x)
    xa = np.ascontiguousarray(xa, dtype=np.int64 if xa.dtype.kind in "iub" else np.float64)
    ya = np.ascontiguousarray(y, dtype=np.float64)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError(
            f"x and y must be one-dimensional and of the same length; got shapes {xa.shape} and {ya.shape}"
        )
    starts, ends = _bounds(offsets, len(xa))
    lo, hi = x_range if x_range is not None else (None, None)
    rows, _counts, _, _totals = _core.downsample(xa.data, ya.data, int(n), starts=starts, ends=ends, x_lo=lo, x_hi=hi)
    return np.frombuffer(rows, dtype=np.int64)


def ema(
    values: npt.ArrayLike,
    weight: float,
    *,
    offsets: npt.ArrayLike | None = None,
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """TensorBoard's smoothing (its "Smoothing" slider) of ``values``, exactly.

    A zero-initialised exponential moving average with bias correction: from ``last = 0``,
    each finite value ``v`` makes ``last = last * weight + (1 - weight) * v`` and is shown as
    ``last / (1 - weight ** k)`` (``k`` finite values so far), so the first point keeps its
    value. NaN and infinite values are passed through and do not move the average. A series
    whose values are all equal is returned unchanged; ``weight`` is clamped to [0, 1] (a
    non-finite weight is 0). Points are weighted by position, not by their step spacing.
    With ``offsets``, each series ``offsets[i]:offsets[i+1]`` is smoothed on its own.

    >>> import tbscope
    >>> tbscope.ema([1.0, 2.0, 3.0], 0.5).round(4).tolist()
    [1.0, 1.6667, 2.4286]
    """
    import numpy as np

    ya = np.ascontiguousarray(values, dtype=np.float64)
    if ya.ndim != 1:
        raise ValueError(f"values must be one-dimensional; got shape {ya.shape}")
    w = float(weight)
    starts, ends = _bounds(offsets, len(ya))
    out = np.empty_like(ya)
    _core.ema(ya.data, w, out.data, starts=starts, ends=ends)
    return out
