"""tbscope.downsample and tbscope.ema against brute-force references written from their rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tbscope


def reference_m4(x, y, n, lo=None, hi=None):
    """The documented rule, one point at a time, in plain Python."""
    bounded = lo is not None or hi is not None

    def inside(v):
        if math.isnan(v):
            return not bounded
        return (lo is None or v >= lo) and (hi is None or v <= hi)

    cand = [i for i in range(len(x)) if inside(float(x[i]))]
    if n == 0 or len(cand) <= n:
        return cand
    has_nan = any(math.isnan(y[i]) for i in cand)
    b = max(1, n // (5 if has_nan else 4))
    finite = [float(x[i]) for i in cand if math.isfinite(float(x[i]))]
    x0, x1 = (min(finite), max(finite)) if finite else (math.inf, -math.inf)
    buckets: dict[int, list[int]] = {}
    prev = 0
    for i in cand:
        xv = float(x[i])
        if not math.isfinite(xv):
            k = prev
        elif x1 - x0 > 0:
            k = min(b - 1, math.floor((xv - x0) * b / (x1 - x0)))
        else:
            k = 0
        prev = k
        buckets.setdefault(k, []).append(i)
    keep = set()
    for rows in buckets.values():
        keep.add(rows[0])
        keep.add(rows[-1])
        vals = [(y[i], i) for i in rows if not math.isnan(y[i])]
        if vals:
            lowest = min(v for v, _ in vals)
            highest = max(v for v, _ in vals)
            keep.add(next(i for v, i in vals if v == lowest))
            keep.add(next(i for v, i in vals if v == highest))
        nans = [i for i in rows if math.isnan(y[i])]
        if nans:
            keep.add(nans[0])
    return sorted(keep)


def reference_ema(y, w):
    if not math.isfinite(w):
        w = 0.0
    w = min(max(w, 0.0), 1.0)
    if len(y) == 0 or all(v == y[0] for v in y):
        return list(y)
    out, last, k = [], 0.0, 0
    for v in y:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * w + (1 - w) * v
        k += 1
        out.append(last / (1.0 if w == 1 else 1 - math.pow(w, k)))
    return out


def random_series(rng, size, specials=True):
    y = rng.standard_normal(size).cumsum()
    if specials and size:
        for v in (np.nan, np.inf, -np.inf):
            for _ in range(rng.integers(0, 4)):
                y[rng.integers(0, size)] = v
        # Plateaus: ties for the minimum and maximum.
        if size > 10:
            y[rng.integers(0, size, 5)] = y.max()
    return y


@pytest.mark.parametrize("seed", range(40))
def test_downsample_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(0, 3000))
    y = random_series(rng, size)
    if seed % 3 == 0:
        x = np.sort(rng.integers(0, 10**6, size))  # steps with gaps
    elif seed % 3 == 1:
        x = np.arange(size, dtype=np.int64)
        if size > 20:
            x[size // 2 :] -= size // 4  # a restart: steps go back
    else:
        x = 1.7e9 + np.sort(rng.random(size)) * 1e5  # wall times
        if size:
            x[rng.integers(0, size)] = np.nan
    for n in (0, 5, 7, 50, 1000):
        got = tbscope.downsample(x, y, n)
        assert got.tolist() == reference_m4(x, y, n), (seed, n)
        if n:
            assert len(got) <= n


@pytest.mark.parametrize("seed", range(20))
def test_downsample_keeps_every_series_extremes(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = rng.integers(0, 5000, 30)
    y = np.concatenate([random_series(rng, int(s)) for s in sizes])
    x = np.concatenate([np.arange(s) for s in sizes])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    got = tbscope.downsample(x, y, 40, offsets=offsets)
    start = 0
    for a, b in zip(offsets[:-1], offsets[1:]):
        mine = got[(got >= a) & (got < b)]
        assert np.all(np.diff(mine) > 0)
        ref = [a + i for i in reference_m4(x[a:b], y[a:b], 40)]
        assert mine.tolist() == ref
        if b > a:
            seg = y[a:b]
            finite = ~np.isnan(seg)
            assert a in mine and b - 1 in mine
            if finite.any():
                assert a + int(np.nanargmin(seg)) in mine and a + int(np.nanargmax(seg)) in mine
            if np.isnan(seg).any():
                assert np.isnan(y[mine]).any()
        start += len(mine)
    assert start == len(got)


def test_downsample_window():
    x = np.arange(1000)
    y = np.sin(x / 10.0)
    got = tbscope.downsample(x, y, 20, x_range=(100, 399))
    assert got.tolist() == reference_m4(x, y, 20, 100, 399)
    assert got.min() == 100 and got.max() == 399 and len(got) <= 20
    assert tbscope.downsample(x, y, 0, x_range=(None, 9)).tolist() == list(range(10))


def test_downsample_refuses_bad_arguments():
    for n in (-1, 1, 4):
        with pytest.raises(ValueError, match="n must be"):
            tbscope.downsample([1, 2], [1.0, 2.0], n)
    with pytest.raises(ValueError, match="same length"):
        tbscope.downsample([1, 2], [1.0], 5)
    with pytest.raises(ValueError, match="offsets"):
        tbscope.downsample([1, 2], [1.0, 2.0], 5, offsets=[0, 3])


@pytest.mark.parametrize("w", [0.0, 0.3, 0.6, 0.95, 0.999, 1.0, -1.0, 2.0, float("nan")])
def test_ema_matches_tensorboards_formula(w):
    rng = np.random.default_rng(7)
    y = random_series(rng, 500)
    got = tbscope.ema(y, w)
    ref = reference_ema(y.tolist(), w)
    np.testing.assert_array_equal(got, np.array(ref))


def test_ema_constant_series_and_offsets():
    assert tbscope.ema([3.0, 3.0, 3.0], 0.9).tolist() == [3.0, 3.0, 3.0]
    assert len(tbscope.ema([], 0.5)) == 0
    a, b = [1.0, 5.0, 2.0], [10.0, 0.0]
    got = tbscope.ema(a + b, 0.6, offsets=[0, 3, 5])
    np.testing.assert_array_equal(got, np.array(reference_ema(a, 0.6) + reference_ema(b, 0.6)))
