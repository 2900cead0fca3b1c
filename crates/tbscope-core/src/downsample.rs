//! Reducing a series to a few points for drawing, and TensorBoard's scalar smoothing.
//!
//! [`m4`] keeps, in each of `b` buckets of equal width along x, the bucket's first, last,
//! minimum and maximum point (the "M4" rule), so a chart of the kept points has the same
//! envelope as a chart of every point: a loss spike can never fall between samples, as it can
//! with TensorBoard's random sampling. A NaN is kept as well (one per bucket), so a diverged run
//! shows where it diverged.
//!
//! [`ema`] is TensorBoard's smoothing: a zero-initialised exponential moving average with
//! Adam-style debiasing, skipping non-finite values, and leaving constant series alone
//! (`webapp/widgets/line_chart_v2/data_transformer.ts`).
//!
//! Both work on one series at a time, given as a range of rows of shared columns, so a caller
//! holding many series side by side (one tag across many runs) reduces them in one call.

/// An x coordinate: steps (int64) or wall times (float64).
pub trait XValue: Copy + Send + Sync {
    fn get(self) -> f64;
}

impl XValue for i64 {
    #[inline]
    fn get(self) -> f64 {
        self as f64
    }
}

impl XValue for f64 {
    #[inline]
    fn get(self) -> f64 {
        self
    }
}

/// The rows of one series kept by [`m4`].
///
/// Rules, for the rows `start..end` of `x` and `y` (the series) and a target of `n` points:
///
/// 1. The candidates are the rows whose x lies in `[lo, hi]` (either bound may be absent; a row
///    whose x is NaN is a candidate only when there is no bound).
/// 2. If `n == 0` or there are at most `n` candidates, every candidate is kept.
/// 3. Otherwise there are `b = max(1, n / 4)` buckets, or `max(1, n / 5)` when some candidate's
///    y is NaN. With `x0`, `x1` the smallest and largest finite x of the candidates, a row goes
///    into bucket `min(b - 1, floor((x - x0) * b / (x1 - x0)))` (bucket 0 when `x1 == x0`); a row
///    whose x is not finite goes into the bucket of the candidate before it (bucket 0 if none).
/// 4. Each bucket keeps its first and last row, the first row holding its smallest y and the
///    first holding its largest (NaN ignored; -inf and +inf count), and its first NaN row.
///
/// Rows are appended to `out` in increasing order; at most `n` of them when `n >= 5` (rule 3:
/// below that, one bucket may keep more).
#[allow(clippy::too_many_arguments)]
pub fn m4<X: XValue>(
    x: &[X],
    y: &[f64],
    start: usize,
    end: usize,
    n: usize,
    lo: Option<f64>,
    hi: Option<f64>,
    out: &mut Vec<usize>,
) {
    let bounded = lo.is_some() || hi.is_some();
    let inside = |v: f64| -> bool {
        if v.is_nan() {
            return !bounded;
        }
        lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h)
    };
    if !bounded && (n == 0 || end - start <= n) {
        out.extend(start..end);
        return;
    }
    // One pass for the count, the x range and whether there is a NaN value.
    let (mut count, mut x0, mut x1, mut nan) = (0usize, f64::INFINITY, f64::NEG_INFINITY, false);
    for i in start..end {
        let xv = x[i].get();
        if bounded && !inside(xv) {
            continue;
        }
        count += 1;
        if xv.is_finite() {
            x0 = x0.min(xv);
            x1 = x1.max(xv);
        }
        nan |= y[i].is_nan();
    }
    if n == 0 || count <= n {
        out.extend((start..end).filter(|&i| inside(x[i].get())));
        return;
    }
    let b = (n / if nan { 5 } else { 4 }).max(1);
    let width = x1 - x0;
    let bf = b as f64;
    let bucket_of = |xv: f64, prev: usize| -> usize {
        if !xv.is_finite() {
            return prev;
        }
        if width > 0.0 {
            // The exact expression of the rule (a multiply by b / width can round the other
            // way at a bucket edge).
            (((xv - x0) * bf / width).floor() as usize).min(b - 1)
        } else {
            0
        }
    };
    // Per bucket: first, last, argmin, argmax, first NaN (usize::MAX = none yet).
    const NONE: usize = usize::MAX;
    let mut keep = vec![[NONE; 5]; b];
    let mut lows = vec![f64::INFINITY; b];
    let mut highs = vec![f64::NEG_INFINITY; b];
    let mut prev = 0usize;
    for i in start..end {
        let xv = x[i].get();
        if bounded && !inside(xv) {
            continue;
        }
        let k = bucket_of(xv, prev);
        prev = k;
        let slot = &mut keep[k];
        if slot[0] == NONE {
            slot[0] = i;
        }
        slot[1] = i;
        let v = y[i];
        if v.is_nan() {
            if slot[4] == NONE {
                slot[4] = i;
            }
            continue;
        }
        // `<=`/`>=` on the first value of a bucket: an all-infinite bucket still has extremes.
        if v < lows[k] || (slot[2] == NONE && v <= lows[k]) {
            lows[k] = v;
            slot[2] = i;
        }
        if v > highs[k] || (slot[3] == NONE && v >= highs[k]) {
            highs[k] = v;
            slot[3] = i;
        }
    }
    let first = out.len();
    for slot in &keep {
        out.extend(slot.iter().copied().filter(|&i| i != NONE));
    }
    // Buckets follow x, not row order, when x goes back (a restarted run): sort, then drop the
    // rows a bucket kept twice (its first row being its minimum, say).
    out[first..].sort_unstable();
    let mut w = first;
    for r in first..out.len() {
        if w == first || out[w - 1] != out[r] {
            out[w] = out[r];
            w += 1;
        }
    }
    out.truncate(w);
}

/// [`m4`] of many series (`ranges` of rows) on up to `threads` threads: the kept rows of each
/// series, in the order of `ranges`.
#[allow(clippy::too_many_arguments)]
pub fn m4_many<X: XValue>(
    x: &[X],
    y: &[f64],
    ranges: &[(usize, usize)],
    n: usize,
    lo: Option<f64>,
    hi: Option<f64>,
    threads: usize,
) -> Vec<Vec<usize>> {
    let one = |&(a, b): &(usize, usize)| {
        let mut v = Vec::new();
        m4(x, y, a, b, n, lo, hi, &mut v);
        v
    };
    let points: usize = ranges.iter().map(|(a, b)| b - a).sum();
    // A pool per call (as the reader does: nothing outlives it, so fork stays safe); only
    // worth its start-up for many points.
    if threads > 1 && ranges.len() > 1 && points > 1 << 16 {
        if let Ok(pool) = rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
            use rayon::prelude::*;
            return pool.install(|| ranges.par_iter().map(one).collect());
        }
    }
    ranges.iter().map(one).collect()
}

/// TensorBoard's smoothing of `y` with `weight` into `out` (same length).
///
/// A non-finite weight is 0, and weights are clamped to [0, 1]. A series whose values all equal
/// the first (NaN is never equal) is copied unchanged. Otherwise, from `last = 0` and `k = 0`: a
/// non-finite value is copied and changes nothing; a finite value `v` makes
/// `last = last * weight + (1 - weight) * v`, `k += 1`, and is output as
/// `last / (1 - weight^k)` (`last` when `weight == 1`).
pub fn ema(y: &[f64], weight: f64, out: &mut [f64]) {
    assert_eq!(y.len(), out.len(), "ema: output length differs from input");
    let w = if weight.is_finite() {
        weight.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let Some(&y0) = y.first() else {
        return;
    };
    // `==` is false for NaN, as `===` is in TypeScript.
    #[allow(clippy::float_cmp)]
    let constant = y.iter().all(|&v| v == y0);
    if constant {
        out.copy_from_slice(y);
        return;
    }
    let mut last = 0.0f64;
    let mut k = 0i32;
    for (o, &v) in out.iter_mut().zip(y) {
        if !v.is_finite() {
            *o = v;
            continue;
        }
        last = last * w + (1.0 - w) * v;
        k = k.saturating_add(1);
        // `powf` is the C library's pow, as JavaScript's Math.pow is a correctly rounded pow in
        // practice; `powi` would round differently for large k.
        #[allow(clippy::float_cmp)]
        let debias = if w == 1.0 {
            1.0
        } else {
            1.0 - w.powf(k as f64)
        };
        *o = last / debias;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(x: &[i64], y: &[f64], n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        m4(x, y, 0, x.len(), n, None, None, &mut out);
        out
    }

    #[test]
    fn short_series_are_kept_whole() {
        let x: Vec<i64> = (0..10).collect();
        let y: Vec<f64> = (0..10).map(|v| v as f64).collect();
        assert_eq!(keep(&x, &y, 10), (0..10).collect::<Vec<_>>());
        assert_eq!(keep(&x, &y, 0), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_spike_survives() {
        let x: Vec<i64> = (0..10_000).collect();
        let mut y: Vec<f64> = (0..10_000).map(|v| (v as f64 * 0.01).sin()).collect();
        y[6_543] = 1e9;
        y[1_234] = -1e9;
        let kept = keep(&x, &y, 100);
        assert!(kept.len() <= 100);
        assert!(kept.contains(&6_543) && kept.contains(&1_234));
        assert_eq!(kept.first(), Some(&0));
        assert_eq!(kept.last(), Some(&9_999));
    }

    #[test]
    fn nan_is_kept_and_budget_holds() {
        let x: Vec<i64> = (0..1000).collect();
        let mut y: Vec<f64> = vec![1.0; 1000];
        y[500] = f64::NAN;
        let kept = keep(&x, &y, 20);
        assert!(kept.contains(&500));
        assert!(kept.len() <= 20, "{}", kept.len());
    }

    #[test]
    fn window_limits_candidates() {
        let x: Vec<f64> = (0..100).map(|v| v as f64).collect();
        let y: Vec<f64> = x.clone();
        let mut out = Vec::new();
        m4(&x, &y, 0, 100, 8, Some(10.0), Some(19.0), &mut out);
        assert!(out.len() <= 8 && out.iter().all(|&i| (10..=19).contains(&i)));
        assert!(out.contains(&10) && out.contains(&19));
    }

    #[test]
    fn ema_matches_the_formula() {
        let y = [1.0, f64::NAN, 3.0, f64::INFINITY, 2.0];
        let mut out = [0.0; 5];
        ema(&y, 0.6, &mut out);
        assert_eq!(out[0], 1.0);
        assert!(out[1].is_nan());
        let last2 = 0.4 * 0.6 + 0.4 * 3.0;
        assert!((out[2] - last2 / (1.0 - 0.36)).abs() < 1e-15);
        assert_eq!(out[3], f64::INFINITY);
        let mut c = [0.0; 3];
        ema(&[2.5, 2.5, 2.5], 0.9, &mut c);
        assert_eq!(c, [2.5, 2.5, 2.5]);
        ema(&[1.0, 2.0, 3.0], 1.0, &mut c);
        assert_eq!(c, [0.0, 0.0, 0.0]);
    }
}
