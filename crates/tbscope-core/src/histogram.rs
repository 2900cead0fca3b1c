//! Histograms the way PyTorch's and tensorboardX's `add_histogram` build them, much faster.
//!
//! The reference is `torch.utils.tensorboard.summary.make_histogram`: `np.histogram(values,
//! bins=edges)`, optional subsampling to `max_bins`, trimming to the support with one empty
//! bucket on the left, and a legacy `HistogramProto`. Counts here equal numpy's bit for bit;
//! only the work differs. numpy sorts the values (O(n log n)); here each value is placed by a
//! lookup: floats map to integers in the same order ([`key`]), a table indexed by the top bits
//! of that integer gives the first edge that can follow, and one or two comparisons finish.
//! Large inputs are split across threads; min, max, sum and sum of squares come from the same
//! pass.

use std::sync::OnceLock;

use rayon::prelude::*;

/// A legacy `HistogramProto`, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub min: f64,
    pub max: f64,
    pub num: f64,
    pub sum: f64,
    pub sum_squares: f64,
    /// Right edge of each bucket.
    pub limits: Vec<f64>,
    pub counts: Vec<f64>,
}

/// The values to bin: float64, or float32 (compared after an exact upcast, as numpy does once
/// `astype(float)` has run).
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
}

impl Values<'_> {
    pub fn len(&self) -> usize {
        match self {
            Values::F64(v) => v.len(),
            Values::F32(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A float's bits as an integer that sorts like the float: positive floats get the sign bit
/// set, negative ones are flipped entirely. NaNs land beyond the infinities (positive NaNs
/// above +inf, negative NaNs below -inf), so they fall outside any finite-or-infinite edges.
/// `-0.0` must be folded into `+0.0` by the caller (numpy compares them equal).
#[inline(always)]
pub fn key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// TensorFlow's default bucket edges, exactly as PyTorch's `SummaryWriter` builds them:
/// `v = 1e-12; while v < 1e20: v *= 1.1` (in float64), mirrored, with 0 in the middle.
pub fn default_edges() -> &'static Edges {
    static EDGES: OnceLock<Edges> = OnceLock::new();
    EDGES.get_or_init(|| {
        let mut pos = Vec::new();
        let mut v = 1e-12f64;
        while v < 1e20 {
            pos.push(v);
            v *= 1.1;
        }
        let mut e: Vec<f64> = pos.iter().rev().map(|x| -x).collect();
        e.push(0.0);
        e.extend_from_slice(&pos);
        Edges::new(&e).expect("the default edges are sorted")
    })
}

/// Inputs this short are binned by plain binary search: building the table would cost more.
const TABLE_MIN_VALUES: usize = 2048;
/// Values per parallel piece. Fixed (not per thread) so sums do not depend on the core count.
const PIECE: usize = 1 << 16;

/// How a value finds its cell of the lookup table. Both ways are monotone (a larger value
/// never gets a smaller cell), which is all the table needs to stay exact: edges in a lower
/// cell are below the value, edges in a higher cell above it, and only edges sharing its
/// cell are compared.
#[derive(Debug, Clone, Copy)]
enum Cells {
    /// By the top bits of the key, so each cell is a fixed fraction of an octave: suits
    /// log-spaced edges such as TensorFlow's.
    Key { first: u64, shift: u32 },
    /// By position between the outer edges: suits evenly spaced edges (np.histogram_bin_edges),
    /// which the key cells would crowd into a few octaves.
    Linear { lo: f64, scale: f64, last: usize },
}

#[inline(always)]
fn key_cell(k: u64, first: u64, shift: u32) -> usize {
    (k.wrapping_sub(first) >> shift) as usize
}

/// Only for values inside the outer edges (which are then finite: linear cells are only
/// built for finite edges).
#[inline(always)]
fn linear_cell(v: f64, lo: f64, scale: f64, last: usize) -> usize {
    let x = (v - lo) * scale;
    debug_assert!((0.0..=(last as f64 + 2.0)).contains(&x));
    // SAFETY: `lo <= v <= hi`, both finite, so `v - lo` is in `[0, hi - lo]` (rounding keeps
    // the sign and the bound), and `x` in `[0, cells]` up to rounding: far inside u32. The
    // checked conversion costs a third of the lookup. `min` caps rounding up to `cells`;
    // truncation and `min` are monotone, as the table needs.
    (unsafe { x.to_int_unchecked::<u32>() } as usize).min(last)
}

impl Cells {
    #[inline(always)]
    fn of(self, k: u64, v: f64) -> usize {
        match self {
            Cells::Key { first, shift } => key_cell(k, first, shift),
            Cells::Linear { lo, scale, last } => linear_cell(v, lo, scale, last),
        }
    }
}

/// The lookup table: `lut[c]` = how many edges lie in cells below `c`.
#[derive(Debug, Clone)]
struct Table {
    cells: Cells,
    lut: Vec<u32>,
    /// When no cell holds more than two edges (the usual case): per cell, the edges below it
    /// and the keys of its own edges, in one load and without branches (the outcome of each
    /// comparison is as random as the data, so branches would be mispredicted half the time).
    pairs: Option<Vec<Pair>>,
}

/// A cell holding at most two edges; absent edges are `u64::MAX` (never below a value inside
/// the outer edges, except the last edge itself, which is then present).
#[derive(Debug, Clone, Copy)]
struct Pair {
    below: u64,
    k1: u64,
    k2: u64,
}

/// Sorted bucket edges with a lookup table over them.
#[derive(Debug, Clone)]
pub struct Edges {
    edges: Vec<f64>,
    /// `key(edge + 0.0)`: compared instead of the floats.
    keys: Vec<u64>,
    /// Built when the first large input needs it.
    table: OnceLock<Table>,
}

impl Edges {
    /// Checks edges as numpy does (at least two, increasing; NaN is refused, which numpy
    /// would accept and then bin nonsensically).
    pub fn new(edges: &[f64]) -> Result<Edges, String> {
        if edges.len() < 2 {
            return Err(format!(
                "a histogram needs at least 2 bucket edges, got {}",
                edges.len()
            ));
        }
        if let Some(i) = edges.iter().position(|e| e.is_nan()) {
            return Err(format!("bucket edge {i} is NaN; edges must be numbers"));
        }
        if let Some(i) = edges.windows(2).position(|w| w[0] > w[1]) {
            return Err(format!(
                "bins must increase monotonically: edge {} ({}) is above edge {} ({}); sort them \
                 or build them with np.histogram_bin_edges",
                i,
                edges[i],
                i + 1,
                edges[i + 1]
            ));
        }
        if edges.len() > u32::MAX as usize {
            return Err("too many bucket edges".into());
        }
        Ok(Edges {
            edges: edges.to_vec(),
            keys: edges.iter().map(|&e| key(e + 0.0)).collect(),
            table: OnceLock::new(),
        })
    }

    pub fn edges(&self) -> &[f64] {
        &self.edges
    }

    /// Number of buckets.
    pub fn bins(&self) -> usize {
        self.edges.len() - 1
    }

    /// A table for `cells`, and its worst cell (most edges in one cell).
    fn build(&self, cells: Cells, n: usize) -> (Table, u32) {
        let mut lut = Vec::with_capacity(n + 1);
        let mut j = 0usize;
        let mut worst = 0u32;
        for c in 0..=n {
            let start = j;
            while j < self.edges.len() && cells.of(self.keys[j], self.edges[j] + 0.0) < c {
                j += 1;
            }
            if c > 0 {
                worst = worst.max((j - start) as u32);
            }
            lut.push(j as u32);
        }
        let pairs = (worst <= 2).then(|| {
            lut.windows(2)
                .map(|w| {
                    let (i, end) = (w[0] as usize, w[1] as usize);
                    let at = |j: usize| if j < end { self.keys[j] } else { u64::MAX };
                    Pair {
                        below: i as u64,
                        k1: at(i),
                        k2: at(i + 1),
                    }
                })
                .collect()
        });
        (Table { cells, lut, pairs }, worst)
    }

    fn table(&self) -> &Table {
        self.table.get_or_init(|| {
            let first = self.keys[0];
            let span = self.keys[self.edges.len() - 1] - first;
            // About 16 cells per edge (at least 1024, at most 65536): cells then hold at most
            // two of TensorFlow's edges (1.1 apart; a cell is an eighth of an octave), and the
            // table stays small enough for the cache.
            let want = (self.edges.len() * 16).clamp(1024, 1 << 16) as u64;
            let mut shift = 0u32;
            while (span >> shift) >= want {
                shift += 1;
            }
            let (by_key, worst_key) =
                self.build(Cells::Key { first, shift }, (span >> shift) as usize + 1);
            let lo = self.edges[0] + 0.0;
            let width = self.edges[self.edges.len() - 1] - lo;
            if worst_key <= 1 || !(width.is_finite() && width > 0.0) {
                return by_key;
            }
            // Evenly spaced edges need fewer: four cells per bucket keep one edge per cell.
            let want = (self.edges.len() * 4).clamp(256, 1 << 16);
            let last = want - 1;
            let scale = want as f64 / width;
            let (linear, worst_lin) = self.build(Cells::Linear { lo, scale, last }, last + 1);
            if worst_lin < worst_key {
                linear
            } else {
                by_key
            }
        })
    }

    /// Whether a value with key `k` lies within `[first, last]` (never true for NaN).
    #[inline(always)]
    fn inside(&self, k: u64) -> bool {
        let first = self.keys[0];
        k.wrapping_sub(first) <= self.keys[self.edges.len() - 1] - first
    }

    /// How many edges are at or below an inside value with key `k` (at least 1): searched
    /// among all edges. [`fold`] turns these positions into buckets.
    #[inline(always)]
    fn rank_searched(&self, k: u64) -> usize {
        self.keys.partition_point(|&e| e <= k)
    }

    /// The same, comparing only the edges of the value's cell.
    #[inline(always)]
    fn rank_in_cell(&self, lut: &[u32], c: usize, k: u64) -> usize {
        let mut i = lut[c] as usize;
        let end = lut[c + 1] as usize;
        if end - i <= 4 {
            while i < end && self.keys[i] <= k {
                i += 1;
            }
        } else {
            i += self.keys[i..end].partition_point(|&e| e <= k);
        }
        i
    }
}

/// The same for a cell of at most two edges, without branches.
#[inline(always)]
fn rank_in_pair(p: Pair, k: u64) -> usize {
    (p.below + u64::from(k >= p.k1) + u64::from(k >= p.k2)) as usize
}

/// Bucket counts from counts per rank (`ranks[r]`: values with exactly `r` of the `n` edges
/// at or below them). Bucket `i` holds `edges[i] <= v < edges[i + 1]` (rank `i + 1`), and the
/// last bucket also `v == last` (rank `n`), as in numpy.
fn fold(ranks: &[u64]) -> Vec<u64> {
    let n = ranks.len() - 1;
    let mut counts = ranks[1..n].to_vec();
    counts[n - 2] += ranks[n];
    counts
}

/// Counts per rank (see [`fold`]) and moments of some values.
#[derive(Debug, Clone)]
struct Tally {
    ranks: Vec<u64>,
    min: f64,
    max: f64,
    nan: bool,
    sum: f64,
    sum_squares: f64,
}

impl Tally {
    fn new(edges: usize) -> Tally {
        Tally {
            ranks: vec![0; edges + 1],
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            nan: false,
            sum: 0.0,
            sum_squares: 0.0,
        }
    }
    fn merge(&mut self, o: &Tally) {
        for (a, b) in self.ranks.iter_mut().zip(&o.ranks) {
            *a += b;
        }
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.nan |= o.nan;
        self.sum += o.sum;
        self.sum_squares += o.sum_squares;
    }
}

/// One pass over `vals`: counts per rank (`rank` is given a value's key and the value) plus
/// moments.
#[inline(always)]
fn run<T: Copy + Into<f64>>(vals: &[T], edges: &Edges, rank: impl Fn(u64, f64) -> usize) -> Tally {
    let mut t = Tally::new(edges.edges.len());
    let ranks = &mut t.ranks[..];
    // Min and max over keys (integers: one-cycle steps instead of NaN-aware float ones);
    // NaN is tracked on its own and overrides both at the end.
    let (mut lo, mut hi, mut nan) = (u64::MAX, 0u64, false);
    // Four lanes of sums, so the loop does not wait on one floating-point add chain.
    let (mut s0, mut s1, mut s2, mut s3) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let (mut q0, mut q1, mut q2, mut q3) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    // A macro rather than a closure: closures called four times per iteration were not
    // inlined, and the calls cost more than the work.
    macro_rules! one {
        ($v:expr, $s:ident, $q:ident) => {{
            let v: f64 = $v;
            // `+ 0.0` turns -0.0 into +0.0 (and nothing else), so both share a key.
            let z = v + 0.0;
            let k = key(z);
            if edges.inside(k) {
                ranks[rank(k, z)] += 1;
            }
            lo = lo.min(k);
            hi = hi.max(k);
            nan |= v.is_nan();
            $s += v;
            $q += v * v;
        }};
    }
    let mut quads = vals.chunks_exact(4);
    for c in &mut quads {
        one!(c[0].into(), s0, q0);
        one!(c[1].into(), s1, q1);
        one!(c[2].into(), s2, q2);
        one!(c[3].into(), s3, q3);
    }
    for &v in quads.remainder() {
        one!(v.into(), s0, q0);
    }
    t.sum = (s0 + s1) + (s2 + s3);
    t.sum_squares = (q0 + q1) + (q2 + q3);
    if !vals.is_empty() {
        t.min = unkey(lo);
        t.max = unkey(hi);
    }
    t.nan = nan;
    t
}

/// The float of a key (inverse of [`key`]).
fn unkey(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

fn tally<T: Copy + Into<f64>>(vals: &[T], edges: &Edges, use_table: bool) -> Tally {
    if !use_table {
        return run(vals, edges, |k, _| edges.rank_searched(k));
    }
    let t = edges.table();
    let lut = &t.lut[..];
    // One loop per way of finding cells, so the choice is not made per value.
    match (t.cells, &t.pairs) {
        (Cells::Key { first, shift }, Some(p)) => run(vals, edges, |k, _| {
            rank_in_pair(p[key_cell(k, first, shift)], k)
        }),
        (Cells::Linear { lo, scale, last }, Some(p)) => run(vals, edges, |k, v| {
            rank_in_pair(p[linear_cell(v, lo, scale, last)], k)
        }),
        (cells, None) => run(vals, edges, |k, v| {
            edges.rank_in_cell(lut, cells.of(k, v), k)
        }),
    }
}

fn tally_all<T: Copy + Into<f64> + Sync>(vals: &[T], edges: &Edges) -> Tally {
    if vals.len() <= PIECE {
        return tally(vals, edges, vals.len() >= TABLE_MIN_VALUES);
    }
    // Build the table once, before the threads race to.
    let _ = edges.table();
    let parts: Vec<Tally> = vals
        .par_chunks(PIECE)
        .map(|c| tally(c, edges, true))
        .collect();
    let mut total = Tally::new(edges.edges.len());
    for p in &parts {
        total.merge(p);
    }
    total
}

/// `np.histogram(values, bins=edges)[0]`: bucket counts only.
pub fn counts(values: Values<'_>, edges: &Edges) -> Vec<u64> {
    match values {
        Values::F64(v) => fold(&tally_all(v, edges).ranks),
        Values::F32(v) => fold(&tally_all(v, edges).ranks),
    }
}

/// What `make_histogram` in PyTorch returns for these values and edges (default: TensorFlow's
/// buckets), with the same errors.
pub fn histogram(
    values: Values<'_>,
    edges: Option<&Edges>,
    max_bins: Option<usize>,
) -> Result<Histogram, String> {
    if values.is_empty() {
        return Err("The input has no element.".into());
    }
    if max_bins == Some(0) {
        return Err("max_bins must be at least 1 (or None for no limit)".into());
    }
    let edges = edges.unwrap_or_else(|| default_edges());
    let t = match values {
        Values::F64(v) => tally_all(v, edges),
        Values::F32(v) => tally_all(v, edges),
    };
    let mut counts = fold(&t.ranks);
    let mut limits: Vec<f64> = edges.edges().to_vec();
    if let Some(m) = max_bins {
        let bins = counts.len();
        if bins > m {
            // Buckets summed in groups, the last group padded with empty buckets; the left
            // edge of each group kept, plus the last edge.
            let group = bins / m;
            counts = counts.chunks(group).map(|c| c.iter().sum()).collect();
            let mut l: Vec<f64> = limits[..bins].iter().step_by(group).copied().collect();
            l.push(limits[bins]);
            limits = l;
        }
    }
    // Trim to the support, keeping one empty bucket on the left (TensorBoard stores right
    // edges only, so that bucket's right edge is the support's left edge).
    let first = counts.iter().position(|&c| c > 0);
    let last = counts.iter().rposition(|&c| c > 0);
    let (out_counts, out_limits): (Vec<f64>, Vec<f64>) = match (first, last) {
        (Some(start), Some(last)) => {
            let end = last + 1;
            let c: Vec<f64> = if start > 0 {
                counts[start - 1..end].iter().map(|&c| c as f64).collect()
            } else {
                std::iter::once(0.0)
                    .chain(counts[..end].iter().map(|&c| c as f64))
                    .collect()
            };
            (c, limits[start..=end].to_vec())
        }
        _ => {
            // Nothing counted (every value NaN or outside the edges). numpy's searchsorted
            // then yields start = len, end = 1: a one-bucket histogram keeps its single
            // (empty) bucket, anything longer comes out empty and PyTorch raises.
            if counts.len() == 1 {
                (vec![0.0], vec![limits[1]])
            } else {
                return Err(format!(
                    "The histogram is empty: none of the {} values lies within the bucket edges \
                     [{}, {}] (NaN is never counted); pass edges that cover the values",
                    values.len(),
                    limits[0],
                    limits[limits.len() - 1]
                ));
            }
        }
    };
    let (min, max) = if t.nan {
        (f64::NAN, f64::NAN)
    } else {
        (t.min, t.max)
    };
    Ok(Histogram {
        min,
        max,
        num: values.len() as f64,
        sum: t.sum,
        sum_squares: t.sum_squares,
        limits: out_limits,
        counts: out_counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plainest possible np.histogram: a binary search per value over the raw floats,
    /// with numpy's rule written out (`e[i] <= v < e[i+1]`, last bucket closed).
    fn reference(vals: &[f64], e: &[f64]) -> Vec<u64> {
        let mut c = vec![0u64; e.len() - 1];
        let last = e[e.len() - 1];
        for &v in vals {
            if v.is_nan() || v < e[0] || v > last {
                continue;
            }
            // Number of edges <= v (floats compared as floats, so -0.0 == 0.0).
            let mut lo = 0usize;
            let mut hi = e.len();
            while lo < hi {
                let mid = (lo + hi) / 2;
                if e[mid] <= v {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let b = if v == last { e.len() - 2 } else { lo - 1 };
            c[b] += 1;
        }
        c
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn pick<T: Copy>(&mut self, v: &[T]) -> T {
            v[(self.next() % v.len() as u64) as usize]
        }
    }

    fn nasty(e: &[f64]) -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            1e-12,
            1e20,
            -1e20,
        ];
        for &x in e {
            v.extend([x, -x, x.next_up(), x.next_down(), x * 2.0, x / 2.0]);
        }
        v
    }

    fn edge_sets() -> Vec<Vec<f64>> {
        let lin: Vec<f64> = (0..=30).map(|i| -1.0 + i as f64 / 15.0).collect();
        let narrow: Vec<f64> = (0..=50).map(|i| 1000.0 + i as f64 * 1e-9).collect();
        let dup = vec![-1.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        let signed_zero = vec![-0.0, 1.0, 2.0];
        let inf = vec![f64::NEG_INFINITY, -1.0, 0.0, 1.0, f64::INFINITY];
        let tiny = vec![5e-324, 1e-310, 1e-300];
        let two = vec![3.0, 3.0];
        // Many edges in one cell of the table: forces the binary search inside a cell.
        let mut clustered: Vec<f64> = (0..200).map(|i| 1.0 + i as f64 * 1e-14).collect();
        clustered.push(1e10);
        vec![
            default_edges().edges().to_vec(),
            lin,
            narrow,
            dup,
            signed_zero,
            inf,
            tiny,
            two,
            clustered,
        ]
    }

    #[test]
    fn default_edges_match_torch() {
        let e = default_edges().edges();
        // 774 positive edges up to 1e20 in PyTorch's loop, mirrored, plus zero.
        assert_eq!(e.len() % 2, 1);
        let mid = e.len() / 2;
        assert_eq!(e[mid], 0.0);
        assert_eq!(e[mid + 1], 1e-12);
        assert_eq!(e[mid - 1], -1e-12);
        assert_eq!(e[mid + 2], 1e-12 * 1.1);
        assert!(e[e.len() - 1] < 1e20 && e[e.len() - 1] * 1.1 >= 1e20);
        assert!(e.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn counts_equal_reference_on_adversarial_values() {
        let mut rng = Rng(7);
        for e in edge_sets() {
            let edges = Edges::new(&e).unwrap();
            let pool = nasty(&e);
            // Above TABLE_MIN_VALUES so the table path runs, and a short input for the
            // binary-search path.
            for n in [100usize, 5000] {
                let vals: Vec<f64> = (0..n).map(|_| rng.pick(&pool)).collect();
                let want = reference(&vals, &e);
                assert_eq!(
                    counts(Values::F64(&vals), &edges),
                    want,
                    "edges {:?}",
                    &e[..2]
                );
                // Every single value through both lookups.
                let t = edges.table();
                for &v in &vals {
                    let z = v + 0.0;
                    let k = key(z);
                    if edges.inside(k) {
                        let c = t.cells.of(k, z);
                        let want = edges.rank_searched(k);
                        assert_eq!(edges.rank_in_cell(&t.lut, c, k), want, "{v}");
                        if let Some(p) = &t.pairs {
                            assert_eq!(rank_in_pair(p[c], k), want, "{v}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn table_kind_suits_the_edges() {
        assert!(matches!(default_edges().table().cells, Cells::Key { .. }));
        let lin = Edges::new(&edge_sets()[1]).unwrap();
        assert!(matches!(lin.table().cells, Cells::Linear { .. }));
        // Both tables: at most two edges share a cell, so lookups stay one or two compares.
        for e in [default_edges(), &lin] {
            let worst = e.table().lut.windows(2).map(|w| w[1] - w[0]).max().unwrap();
            assert!(worst <= 2, "{worst}");
        }
    }

    #[test]
    fn float32_upcast_landing_on_edges() {
        // Edges that are exactly float32 values: the f32 inputs equal to them must land in
        // the bucket to the right, like numpy on the upcast values.
        let e: Vec<f64> = [-1.5f32, -0.1, 0.0, 0.1, 0.3, 1.0e-3, 2.0]
            .iter()
            .map(|&x| f64::from(x))
            .collect::<Vec<_>>();
        let mut e = e;
        e.sort_by(f64::total_cmp);
        let edges = Edges::new(&e).unwrap();
        let mut vals32: Vec<f32> = Vec::new();
        for &x in &e {
            let x = x as f32;
            vals32.extend([x, -x, x.next_up(), x.next_down()]);
        }
        vals32.extend([f32::NAN, f32::INFINITY, -0.0, 1e-45]);
        let big: Vec<f32> = (0..3000).map(|i| vals32[i % vals32.len()]).collect();
        let up: Vec<f64> = big.iter().map(|&x| f64::from(x)).collect();
        assert_eq!(counts(Values::F32(&big), &edges), reference(&up, &e));
    }

    #[test]
    fn parallel_pieces_sum_up() {
        let mut rng = Rng(11);
        let e = edge_sets()[1].clone();
        let edges = Edges::new(&e).unwrap();
        let vals: Vec<f64> = (0..(3 * PIECE + 17))
            .map(|_| (rng.next() % 4001) as f64 / 1000.0 - 2.0)
            .collect();
        assert_eq!(counts(Values::F64(&vals), &edges), reference(&vals, &e));
        let h = histogram(Values::F64(&vals), Some(&edges), None).unwrap();
        let inside = vals.iter().filter(|v| (-1.0..=1.0).contains(*v)).count();
        assert_eq!(h.counts.iter().sum::<f64>(), inside as f64);
        assert_eq!(h.num, vals.len() as f64);
        let sum: f64 = vals.iter().sum();
        assert!((h.sum - sum).abs() < 1e-6 * sum.abs().max(1.0));
    }

    #[test]
    fn trimming_like_torch() {
        // Buckets [0,1) [1,2) [2,3) [3,4]; values in buckets 1 and 2 only.
        let edges = Edges::new(&[0.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
        let h = histogram(Values::F64(&[1.5, 2.5, 2.6]), Some(&edges), None).unwrap();
        // One empty bucket to the left (right edge 1.0), then the support.
        assert_eq!(h.limits, vec![1.0, 2.0, 3.0]);
        assert_eq!(h.counts, vec![0.0, 1.0, 2.0]);
        assert_eq!((h.min, h.max, h.num), (1.5, 2.6, 3.0));
        // Support starting at bucket 0: a zero bucket whose right edge is the first edge.
        let h = histogram(Values::F64(&[0.5, 4.0]), Some(&edges), None).unwrap();
        assert_eq!(h.limits, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(h.counts, vec![0.0, 1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn max_bins_groups_like_torch() {
        // 5 buckets, max 2: groups of 2, padded to 6: counts [a+b, c+d, e+0].
        let edges = Edges::new(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let vals = [0.5, 1.5, 1.6, 2.5, 4.5, 4.6, 4.7];
        let h = histogram(Values::F64(&vals), Some(&edges), Some(2)).unwrap();
        // Grouped limits [0, 2, 4, 5]; counts [3, 1, 3]; trimmed with a zero bucket first.
        assert_eq!(h.limits, vec![0.0, 2.0, 4.0, 5.0]);
        assert_eq!(h.counts, vec![0.0, 3.0, 1.0, 3.0]);
    }

    #[test]
    fn errors_like_torch() {
        assert_eq!(
            histogram(Values::F64(&[]), None, None).unwrap_err(),
            "The input has no element."
        );
        let e = histogram(Values::F64(&[f64::NAN, 1e30]), None, None).unwrap_err();
        assert!(e.starts_with("The histogram is empty"), "{e}");
        assert!(Edges::new(&[1.0, 0.0])
            .unwrap_err()
            .contains("monotonically"));
        assert!(Edges::new(&[1.0]).is_err());
        assert!(Edges::new(&[0.0, f64::NAN]).is_err());
        // One bucket and nothing in it: numpy's arithmetic keeps the empty bucket.
        let one = Edges::new(&[0.0, 1.0]).unwrap();
        let h = histogram(Values::F64(&[5.0]), Some(&one), None).unwrap();
        assert_eq!((h.limits.clone(), h.counts.clone()), (vec![1.0], vec![0.0]));
    }

    #[test]
    fn nan_makes_min_max_nan() {
        let h = histogram(Values::F32(&[1.0, f32::NAN, -2.0]), None, None).unwrap();
        assert!(h.min.is_nan() && h.max.is_nan() && h.sum.is_nan());
        assert_eq!(h.counts.iter().sum::<f64>(), 2.0);
    }
}
