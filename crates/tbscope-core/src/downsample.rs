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
    /// Whether every x is finite and none is below the one before, as f64. One pass without
    /// an early exit, so that it vectorises.
    fn ordered(xs: &[Self]) -> bool;
}

impl XValue for i64 {
    #[inline]
    fn get(self) -> f64 {
        self as f64
    }
    fn ordered(xs: &[i64]) -> bool {
        // Non-decreasing as integers is non-decreasing as f64 (the conversion is monotone).
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { ordered_i64_avx2(xs) };
        }
        ordered_i64(xs)
    }
}

#[inline(always)]
fn ordered_i64(xs: &[i64]) -> bool {
    let mut ok = true;
    for w in xs.windows(2) {
        ok &= w[0] <= w[1];
    }
    ok
}

/// [`ordered_i64`] compiled for AVX2, whose 64-bit compares let the loop vectorise (the
/// baseline x86-64 target has none). CPU features are detected at run time, as for CRCs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn ordered_i64_avx2(xs: &[i64]) -> bool {
    ordered_i64(xs)
}

impl XValue for f64 {
    #[inline]
    fn get(self) -> f64 {
        self
    }
    fn ordered(xs: &[f64]) -> bool {
        // `a <= b` is false when either is NaN; the infinities are ruled out on their own.
        let mut ok = xs.first().is_none_or(|v| v.is_finite());
        for w in xs.windows(2) {
            ok &= w[0] <= w[1] && w[1].abs() != f64::INFINITY;
        }
        ok
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
/// below that, one bucket may keep more). Returns the number of candidates.
///
/// A series whose x is finite and never goes back (the common case: steps, wall times) takes
/// a path that reads each x and y once: the window and the bucket edges are found by binary
/// search on x (buckets are then contiguous rows), and each bucket's extremes by one pass over
/// its values. Other series (a restart, a non-finite x) bucket row by row.
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
) -> usize {
    let bounded = lo.is_some() || hi.is_some();
    if !bounded && (n == 0 || end - start <= n) {
        out.extend(start..end);
        return end - start;
    }
    let q = Request {
        x,
        y,
        start,
        end,
        n,
        lo,
        hi,
    };
    if end > start && X::ordered(&x[start..end]) {
        m4_ordered(q, out)
    } else {
        m4_rows(q, out)
    }
}

/// What [`m4`] was asked for one series, passed down as one value: rows `start..end` of `x`
/// and `y`, a target of `n` rows, the window `[lo, hi]` of x.
struct Request<'a, X> {
    x: &'a [X],
    y: &'a [f64],
    start: usize,
    end: usize,
    n: usize,
    lo: Option<f64>,
    hi: Option<f64>,
}

// By hand: derived, they would ask `X: Copy` of the element type too.
impl<X> Clone for Request<'_, X> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<X> Copy for Request<'_, X> {}

/// Whether any value is NaN (one pass, vectorised).
#[inline(always)]
fn any_nan(y: &[f64]) -> bool {
    let mut nan = false;
    for &v in y {
        nan |= v.is_nan();
    }
    nan
}

/// Bucketing by rule 3: `x0`, the width `x1 - x0` and the bucket count.
#[derive(Clone, Copy)]
struct Buckets {
    x0: f64,
    width: f64,
    b: usize,
}

impl Buckets {
    /// The bucket of a finite x of the candidates (`x >= x0`): the cast truncates, which is
    /// `floor` for these non-negative quotients (and NaN, from an infinite width, goes to 0
    /// as `floor` would have it).
    #[inline]
    fn of(self, xv: f64) -> usize {
        if self.width > 0.0 {
            // The exact expression of the rule (a multiply by b / width can round the other
            // way at a bucket edge).
            (((xv - self.x0) * self.b as f64 / self.width) as usize).min(self.b - 1)
        } else {
            0
        }
    }
}

/// [`m4`] for a series whose x is finite and non-decreasing.
fn m4_ordered<X: XValue>(q: Request<'_, X>, out: &mut Vec<usize>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { m4_ordered_avx2(q, out) };
    }
    m4_ordered_body(q, out)
}

/// [`m4_ordered_body`] compiled for AVX2: the passes over values go twice as wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn m4_ordered_avx2<X: XValue>(q: Request<'_, X>, out: &mut Vec<usize>) -> usize {
    m4_ordered_body(q, out)
}

#[inline(always)]
fn m4_ordered_body<X: XValue>(q: Request<'_, X>, out: &mut Vec<usize>) -> usize {
    let (x, y, start, end, n, lo, hi) = (q.x, q.y, q.start, q.end, q.n, q.lo, q.hi);
    // The candidates are contiguous: the rows from the first x >= lo to the last x <= hi.
    let xs = &x[start..end];
    let a = start + lo.map_or(0, |l| xs.partition_point(|v| v.get() < l));
    let b = start + hi.map_or(xs.len(), |h| xs.partition_point(|v| v.get() <= h));
    if b <= a {
        return 0;
    }
    if n == 0 || b - a <= n {
        out.extend(a..b);
        return b - a;
    }
    let nan = any_nan(&y[a..b]);
    let buckets = Buckets {
        x0: x[a].get(),
        width: x[b - 1].get() - x[a].get(),
        b: (n / if nan { 5 } else { 4 }).max(1),
    };
    let per = (b - a) as f64 / buckets.b as f64;
    let mut s = a;
    let mut k = buckets.of(x[a].get());
    while s < b {
        // The end of bucket k: the first row past s in a later bucket. Evenly spaced x puts it
        // near `a + (k + 1) * per`; search outwards from there.
        let guess = (a + ((k + 1) as f64 * per) as usize).clamp(s + 1, b);
        let e = bucket_end(x, s, b, buckets, k, guess);
        keep_bucket(y, s, e, nan, out);
        s = e;
        if s < b {
            k = buckets.of(x[s].get());
        }
    }
    b - a
}

/// The first row in `from + 1..to` whose bucket is above `k` (`to` if none), given that
/// `from` is in bucket `k` and buckets never decrease along the rows: a galloping search from
/// `guess`.
fn bucket_end<X: XValue>(
    x: &[X],
    from: usize,
    to: usize,
    bk: Buckets,
    k: usize,
    guess: usize,
) -> usize {
    let past = |i: usize| bk.of(x[i].get()) > k;
    // Bracket the answer in (lo, hi]: rows <= lo are in bucket k, hi is `to` or past it.
    let (mut lo, mut hi);
    if guess >= to || past(guess) {
        hi = guess.min(to);
        let mut step = 1;
        lo = hi.saturating_sub(step).max(from);
        while lo > from && past(lo) {
            hi = lo;
            step *= 2;
            lo = hi.saturating_sub(step).max(from);
        }
    } else {
        lo = guess;
        let mut step = 1;
        hi = (lo + step).min(to);
        while hi < to && !past(hi) {
            lo = hi;
            step *= 2;
            hi = (lo + step).min(to);
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Appends the rows one bucket (rows `s..e`, not empty) keeps, in increasing order: first,
/// last, the first lowest and first highest value (NaN ignored), and with `nan`, its first NaN.
#[inline(always)]
fn keep_bucket(y: &[f64], s: usize, e: usize, nan: bool, out: &mut Vec<usize>) {
    const NONE: usize = usize::MAX;
    let (mut low, mut high, mut first_nan) = (NONE, NONE, NONE);
    if nan {
        let mut i = s;
        while i < e && y[i].is_nan() {
            i += 1;
        }
        if i > s {
            first_nan = s;
        }
        if i < e {
            let (mut lv, mut hv) = (y[i], y[i]);
            (low, high) = (i, i);
            for (j, &v) in y[i + 1..e].iter().enumerate() {
                if v < lv {
                    lv = v;
                    low = i + 1 + j;
                }
                if v > hv {
                    hv = v;
                    high = i + 1 + j;
                }
                if first_nan == NONE && v.is_nan() {
                    first_nan = i + 1 + j;
                }
            }
        }
    } else {
        // No NaN: the extreme values first (a branch-free pass), then where each first occurs.
        let (lv, hv) = extremes(&y[s..e]);
        low = s + first_equal(&y[s..e], lv);
        high = s + first_equal(&y[s..e], hv);
    }
    let mut rows = [s, e - 1, low, high, first_nan];
    rows.sort_unstable();
    let mut last = NONE;
    for r in rows {
        if r != NONE && r != last {
            out.push(r);
            last = r;
        }
    }
}

/// The smallest and largest of values that are not NaN (not empty). Four lanes of
/// compare-and-select (`minpd`/`maxpd`), so the pass runs at the speed of the loads; a zero's
/// sign may come from either lane, which does not matter to the `==` search that follows.
#[inline(always)]
fn extremes(y: &[f64]) -> (f64, f64) {
    let mut lo = [y[0]; 4];
    let mut hi = [y[0]; 4];
    let chunks = y.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..4 {
            lo[j] = if c[j] < lo[j] { c[j] } else { lo[j] };
            hi[j] = if c[j] > hi[j] { c[j] } else { hi[j] };
        }
    }
    for &v in rest {
        lo[0] = if v < lo[0] { v } else { lo[0] };
        hi[0] = if v > hi[0] { v } else { hi[0] };
    }
    let l = lo.iter().fold(lo[0], |a, &b| if b < a { b } else { a });
    let h = hi.iter().fold(hi[0], |a, &b| if b > a { b } else { a });
    (l, h)
}

/// The position of the first value equal to `v`, which is there: eight values compared at a
/// time (vectorised), then the one among them.
#[inline(always)]
fn first_equal(y: &[f64], v: f64) -> usize {
    let mut base = 0;
    let mut chunks = y.chunks_exact(8);
    for c in &mut chunks {
        let mut hit = false;
        for &u in c {
            hit |= u == v;
        }
        if hit {
            break;
        }
        base += 8;
    }
    base + y[base..]
        .iter()
        .position(|&u| u == v)
        .expect("the value is in the slice")
}

/// [`m4`] bucketing row by row: any x (going back, not finite).
fn m4_rows<X: XValue>(q: Request<'_, X>, out: &mut Vec<usize>) -> usize {
    let (x, y, start, end, n, lo, hi) = (q.x, q.y, q.start, q.end, q.n, q.lo, q.hi);
    let bounded = lo.is_some() || hi.is_some();
    let inside = |v: f64| -> bool {
        if v.is_nan() {
            return !bounded;
        }
        lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h)
    };
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
        return count;
    }
    let buckets = Buckets {
        x0,
        width: x1 - x0,
        b: (n / if nan { 5 } else { 4 }).max(1),
    };
    // Per bucket: first, last, argmin, argmax, first NaN (usize::MAX = none yet).
    const NONE: usize = usize::MAX;
    let b = buckets.b;
    let mut keep = vec![[NONE; 5]; b];
    let mut lows = vec![f64::INFINITY; b];
    let mut highs = vec![f64::NEG_INFINITY; b];
    let mut prev = 0usize;
    for i in start..end {
        let xv = x[i].get();
        if bounded && !inside(xv) {
            continue;
        }
        let k = if xv.is_finite() { buckets.of(xv) } else { prev };
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
    count
}

/// [`m4`] of many series (`ranges` of rows) on up to `threads` threads: the kept rows of each
/// series and its number of candidates, in the order of `ranges`.
#[allow(clippy::too_many_arguments)]
pub fn m4_many<X: XValue>(
    x: &[X],
    y: &[f64],
    ranges: &[(usize, usize)],
    n: usize,
    lo: Option<f64>,
    hi: Option<f64>,
    threads: usize,
) -> Vec<(Vec<usize>, usize)> {
    let one = |&(a, b): &(usize, usize)| {
        let mut v = Vec::new();
        let candidates = m4(x, y, a, b, n, lo, hi, &mut v);
        (v, candidates)
    };
    let points: usize = ranges.iter().map(|(a, b)| b - a).sum();
    // A pool per call (as the reader does: nothing outlives it, so fork stays safe); only
    // worth its start-up (a thread each) for millions of points, which one thread reduces in
    // milliseconds. Concurrent requests of a server then do not each start threads.
    if threads > 1 && ranges.len() > 1 && points >= 1 << 21 {
        // Refused threads: the ranges are reduced on this thread.
        if let Ok(Some(pool)) = crate::pool::worker_pool(threads, "m4-") {
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

    /// A small deterministic generator (xorshift), so the tests need no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// Values with NaN, infinities, ties and signed zeros sprinkled in.
    fn values(rng: &mut Rng, len: usize, specials: bool) -> Vec<f64> {
        let mut v = 0.0f64;
        let mut y: Vec<f64> = (0..len)
            .map(|_| {
                v += (rng.below(2001) as f64 - 1000.0) / 100.0;
                v
            })
            .collect();
        if specials && len > 0 {
            for special in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0] {
                for _ in 0..rng.below(4) {
                    y[rng.below(len as u64) as usize] = special;
                }
            }
            let top = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            for _ in 0..rng.below(5) {
                y[rng.below(len as u64) as usize] = top;
            }
        }
        y
    }

    #[test]
    fn the_ordered_path_keeps_what_bucketing_row_by_row_keeps() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..600 {
            let len = rng.below(if case % 10 == 0 { 20_000 } else { 600 }) as usize;
            let y = values(&mut rng, len, case % 3 != 0);
            // Steps: increasing with gaps and repeats (plateaus of equal x), or evenly spaced.
            let mut x: Vec<i64> = Vec::with_capacity(len);
            let mut s = rng.below(1000) as i64 - 500;
            for _ in 0..len {
                x.push(s);
                s += match case % 4 {
                    0 => 1,
                    1 => rng.below(3) as i64,
                    2 => rng.below(1000) as i64,
                    _ => (rng.below(10) == 0) as i64 * 7,
                };
            }
            let xf: Vec<f64> = x.iter().map(|&v| v as f64 * 0.25 + 1.7e9).collect();
            let span = (x.last().copied().unwrap_or(0) - x.first().copied().unwrap_or(0)).max(1);
            let windows = [
                (None, None),
                (
                    Some(x.first().copied().unwrap_or(0) as f64 + (rng.below(span as u64) as f64)),
                    None,
                ),
                (
                    None,
                    Some(x.first().copied().unwrap_or(0) as f64 + (rng.below(span as u64) as f64)),
                ),
                (Some(-1e18), Some(1e18)),
                (Some(5.0), Some(4.0)),
            ];
            for n in [0usize, 5, 7, 13, 40, 100, 1000] {
                for &(lo, hi) in &windows {
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let c = m4(&x, &y, 0, len, n, lo, hi, &mut got);
                    let d = m4_rows(
                        Request {
                            x: &x,
                            y: &y,
                            start: 0,
                            end: len,
                            n,
                            lo,
                            hi,
                        },
                        &mut want,
                    );
                    assert_eq!(got, want, "case {case}, n {n}, window {lo:?}..{hi:?}");
                    assert_eq!(
                        c, d,
                        "candidates: case {case}, n {n}, window {lo:?}..{hi:?}"
                    );
                    let (flo, fhi) = (lo.map(|v| v * 0.25 + 1.7e9), hi.map(|v| v * 0.25 + 1.7e9));
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let c = m4(&xf, &y, 0, len, n, flo, fhi, &mut got);
                    let d = m4_rows(
                        Request {
                            x: &xf,
                            y: &y,
                            start: 0,
                            end: len,
                            n,
                            lo: flo,
                            hi: fhi,
                        },
                        &mut want,
                    );
                    assert_eq!((got, c), (want, d), "wall times: case {case}, n {n}");
                }
            }
        }
    }

    #[test]
    fn series_that_are_not_ordered_go_row_by_row() {
        let x: Vec<i64> = vec![0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 8];
        let y: Vec<f64> = (0..12).map(|v| (v * 7 % 5) as f64).collect();
        assert!(!i64::ordered(&x));
        let (mut got, mut want) = (Vec::new(), Vec::new());
        m4(&x, &y, 0, 12, 8, None, None, &mut got);
        m4_rows(
            Request {
                x: &x,
                y: &y,
                start: 0,
                end: 12,
                n: 8,
                lo: None,
                hi: None,
            },
            &mut want,
        );
        assert_eq!(got, want);
        let xf = [0.0, 1.0, f64::NAN, 3.0];
        assert!(!f64::ordered(&xf));
        assert!(!f64::ordered(&[0.0, f64::INFINITY]));
        assert!(!f64::ordered(&[f64::NEG_INFINITY, 0.0]));
        assert!(f64::ordered(&[1.0, 1.0, 2.0]));
        assert!(i64::ordered(&[i64::MIN, 0, 0, i64::MAX]));
    }

    #[test]
    fn many_series_on_threads_match_one_thread() {
        let mut rng = Rng(7);
        let (mut x, mut y, mut ranges) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..300 {
            let len = 9_000 + rng.below(2_000) as usize;
            let start = x.len();
            x.extend(0..len as i64);
            y.extend(values(&mut rng, len, r % 2 == 0));
            ranges.push((start, x.len()));
        }
        assert!(x.len() >= 1 << 21);
        let one = m4_many(&x, &y, &ranges, 1000, None, None, 1);
        let two = m4_many(&x, &y, &ranges, 1000, None, None, 2);
        assert_eq!(one, two);
        assert!(one.iter().all(|(v, c)| v.len() <= 1000 && *c >= v.len()));
    }
}
