//! Histograms the way PyTorch's and tensorboardX's `add_histogram` build them, much faster.
//!
//! The reference is `torch.utils.tensorboard.summary.make_histogram`: `np.histogram(values,
//! bins=edges)`, optional subsampling to `max_bins`, trimming to the support with one empty
//! bucket on the left, and a legacy `HistogramProto`. Counts here equal numpy's bit for bit;
//! only the work differs. numpy sorts the values (O(n log n)); here each value is placed by a
//! table lookup and one comparison, all in integers:
//!
//! - A float's bits map to an integer *key* that sorts like the float ([`key`]), in the
//!   value's own width: float32 input is never widened to float64 for binning.
//! - Each edge becomes a *threshold*: the key of the least value of that width that is `>=`
//!   the edge. A value lies at or above the edge exactly when its key is at or above the
//!   threshold, so the number of thresholds at or below a key is numpy's bucket position.
//! - The top bits of a key pick a *cell* (a fixed fraction of an octave). A table gives, per
//!   cell, how many thresholds lie in lower cells and the cell's own threshold. With at most
//!   one threshold per cell (TensorFlow's edges are 10% apart, cells 1/16 of an octave) the
//!   position is that count plus one comparison, and the comparison is a carry: for float32
//!   an entry is `count << 32 | (2^32 - threshold)`, so adding the key carries into the count
//!   exactly when the key is at or above the threshold (`Float::rank`: an add and a shift;
//!   float64 does the same with the key's low bits). Crowded cells (dense or repeated
//!   edges) fall back to a short search inside the cell; inputs too short to pay for a table
//!   use a binary search.
//! - Work goes in chunks that stay in L1: a first pass (AVX2 when the CPU has it, else code
//!   the compiler vectorises as it can) computes keys, sums, min and max; a second pass looks
//!   the keys up and counts into four count arrays taken in turn, so values that land in the
//!   same bucket one after another do not wait on each other's increment.
//! - From [`PARALLEL_MIN`] values on, the calling thread and one helper thread take pieces
//!   from a shared counter; the caller never waits for a helper that has not started, so a
//!   busy machine costs nothing but the offer. On Linux the helper may run on every CPU but
//!   the caller's (`Steer`): otherwise, with the other CPU busy, it is woken on the caller's
//!   and takes it over, and two threads take as long as one.
//!
//! Sums: `sum` and `sum_squares` are float64 sums over 8 independent accumulators
//! per [`PIECE`] values, pieces added in order, where numpy uses pairwise summation. The
//! results agree with numpy's to rounding (relative error ~1e-15 for well-conditioned data;
//! the tests hold them to 1e-13 of a compensated sum), do not depend on the machine or on
//! which thread binned which piece, and are not bit-identical to numpy's. Counts, min, max
//! and num are exact.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

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

/// The values to bin: float64, or float32 (compared as their exact float64 values, as numpy
/// does once `astype(float)` has run).
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
/// set, negative ones are flipped entirely. `-0.0` sorts just below `+0.0`; NaNs land beyond
/// the infinities (positive NaNs above +inf, negative NaNs below -inf).
#[inline(always)]
pub fn key(v: f64) -> u64 {
    let b = v.to_bits();
    // All ones for negative floats, else only the sign bit: one shift, one or, one xor.
    b ^ (((b as i64) >> 63) as u64 | (1 << 63))
}

#[inline(always)]
fn key32(b: u32) -> u32 {
    b ^ (((b as i32) >> 31) as u32 | (1 << 31))
}

/// TensorFlow's default bucket edges, exactly as PyTorch's `SummaryWriter` builds them:
/// `v = 1e-12; while v < 1e20: v *= 1.1` (in float64), mirrored, with 0 in the middle.
/// Built once, with its lookup tables, and shared.
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

/// Inputs shorter than this are binned by binary search unless the table exists already:
/// building one costs about as much as binning this many values.
const TABLE_MIN_VALUES: usize = 4096;
/// Values per piece (the unit two threads share out): sums restart per piece and pieces are
/// added in order, so the result does not depend on which thread binned which piece. Small,
/// so a caller that runs out of pieces waits little for the helper's last one.
pub const PIECE: usize = 1 << 14;
/// Values per chunk: a chunk, its keys and the hot part of the tables stay in L1.
const CHUNK: usize = 1024;
/// Inputs shorter than this count into one array, not four (see [`pass_two`]).
const SHORT: usize = 4 * CHUNK;
/// Accumulator lanes for sums, min and max: two AVX2 registers of float64 each, so the
/// chains of float adds overlap.
const LANES: usize = 8;
/// From this many values on, a second thread is offered a share. Below it, waking one costs
/// more than it saves (measured on the 2-core bench machine: at 2^17 values two threads took
/// 0.12 ms against 0.16 ms for one, at 2^16 they broke even).
pub const PARALLEL_MIN: usize = 1 << 17;

/// A float width that values are binned in: float32 or float64.
trait Float: Copy + PartialOrd + Into<f64> + Send + Sync + 'static {
    const INFINITY: Self;
    const NEG_INFINITY: Self;
    /// The integer [`key`] of this width.
    type Key: Copy + Ord + Default + Send + Sync + std::fmt::Debug;
    /// A table cell's entry in the one-threshold-per-cell form.
    type Entry: Copy + Send + Sync;
    /// Cell shifts to try, coarsest first: a cell is `key >> shift`.
    const SHIFTS: &'static [u32];
    fn key(self) -> Self::Key;
    fn cell(k: Self::Key, shift: u32) -> usize;
    /// The key of the least value of this width (in key order) that is `>= e`.
    fn threshold(e: f64) -> Self::Key;
    /// The entry of a cell with `below` thresholds in lower cells and `own` in itself, for
    /// cells of `shift` bits: `below` shifted up plus, with a threshold `t`, the distance from
    /// `t` to the next power of two above the part of the key that is added, so that adding
    /// the key carries into `below` exactly when the key is at or above `t`. float32 adds its
    /// whole key to a 64-bit entry (`below << 32`); float64 adds the key's low `shift` bits
    /// (`below << shift`), which needs `(n + 1) << shift` to fit in 64 bits (`n` thresholds).
    fn entry(below: u32, own: Option<Self::Key>, shift: u32) -> Self::Entry;
    /// How many thresholds are at or below `k`, for a key in the entry's cell: an add and a
    /// shift (float64: and an and), no comparison.
    fn rank(e: Self::Entry, k: Self::Key, shift: u32) -> usize;
    /// Whether entries for `n` thresholds at this shift fit their integer (see `entry`).
    fn fits(n: usize, shift: u32) -> bool;
    fn edges(e: &Edges) -> &Width<Self>;
    /// [`pass_one`] in AVX2 instructions: the same arithmetic in the same lanes, so the
    /// same results to the bit.
    ///
    /// # Safety
    /// Only on a CPU with AVX2; `keys` as long as `x`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn pass_one_avx2(x: &[Self], keys: &mut [Self::Key], m: &mut Lanes<Self>);
    #[cfg(test)]
    fn values(v: &[Self]) -> Values<'_>;
}

/// Next float32 up (`f32::next_up` needs a newer Rust than this crate's minimum). Only for
/// finite, non-NaN `x` below +inf.
fn next_up32(x: f32) -> f32 {
    let b = x.to_bits();
    if x == 0.0 {
        f32::from_bits(1)
    } else if b >> 31 == 0 {
        f32::from_bits(b + 1)
    } else {
        f32::from_bits(b - 1)
    }
}

impl Float for f32 {
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    type Key = u32;
    type Entry = u64;
    // 1 cell per octave (23) down to 128 (16): at 16 cells per octave (19) TensorFlow's
    // edges have one cell each, and the table is 8192 entries.
    const SHIFTS: &'static [u32] = &[23, 22, 21, 20, 19, 18, 17, 16];
    #[inline(always)]
    fn key(self) -> u32 {
        key32(self.to_bits())
    }
    #[inline(always)]
    fn cell(k: u32, shift: u32) -> usize {
        (k >> shift) as usize
    }
    fn threshold(e: f64) -> u32 {
        // Round to nearest, then step up if that fell below the edge: the least float32
        // that is >= e (e > f32::MAX gives +inf, which is >= every edge).
        let mut x = e as f32;
        if f64::from(x) < e {
            x = next_up32(x);
        }
        // -0.0 sorts below +0.0 and compares equal to it: it is the least one >= any edge
        // in [-0.0, +0.0], and also >= any negative edge that rounded to zero.
        if x == 0.0 {
            x = -0.0;
        }
        key32(x.to_bits())
    }
    /// The whole key is added: one operation less than masking its low bits.
    fn entry(below: u32, own: Option<u32>, _shift: u32) -> u64 {
        (u64::from(below) << 32) + own.map_or(0, |t| (1u64 << 32) - u64::from(t))
    }
    #[inline(always)]
    fn rank(e: u64, k: u32, _shift: u32) -> usize {
        ((e + u64::from(k)) >> 32) as usize
    }
    fn fits(n: usize, _shift: u32) -> bool {
        // Below `(n + 1) << 32`: `Edges::new` keeps n under 2^32.
        n < u32::MAX as usize
    }
    fn edges(e: &Edges) -> &Width<f32> {
        e.w32.get_or_init(|| Width::new(&e.edges))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pass_one_avx2(x: &[f32], keys: &mut [u32], m: &mut Lanes<f32>) {
        avx2::pass_one_f32(x, keys, m)
    }
    #[cfg(test)]
    fn values(v: &[f32]) -> Values<'_> {
        Values::F32(v)
    }
}

impl Float for f64 {
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    type Key = u64;
    type Entry = u64;
    // 1 cell per octave down to 16 per octave (65536 cells); finer tables would not fit a
    // cache.
    const SHIFTS: &'static [u32] = &[52, 51, 50, 49, 48];
    #[inline(always)]
    fn key(self) -> u64 {
        key(self)
    }
    #[inline(always)]
    fn cell(k: u64, shift: u32) -> usize {
        (k >> shift) as usize
    }
    fn threshold(e: f64) -> u64 {
        key(if e == 0.0 { -0.0 } else { e })
    }
    fn entry(below: u32, own: Option<u64>, shift: u32) -> u64 {
        let low = (1u64 << shift) - 1;
        (u64::from(below) << shift) + own.map_or(0, |t| (1 << shift) - (t & low))
    }
    #[inline(always)]
    fn rank(e: u64, k: u64, shift: u32) -> usize {
        ((e + (k & ((1 << shift) - 1))) >> shift) as usize
    }
    fn fits(n: usize, shift: u32) -> bool {
        // An entry plus a key's low bits stays below `(n + 1) << shift`.
        n < 1usize << (64 - shift)
    }
    fn edges(e: &Edges) -> &Width<f64> {
        e.w64.get_or_init(|| Width::new(&e.edges))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pass_one_avx2(x: &[f64], keys: &mut [u64], m: &mut Lanes<f64>) {
        avx2::pass_one_f64(x, keys, m)
    }
    #[cfg(test)]
    fn values(v: &[f64]) -> Values<'_> {
        Values::F64(v)
    }
}

/// The thresholds of all edges in one width, and the lookup table over them (built when a
/// large input first needs it).
struct Width<F: Float> {
    thresholds: Vec<F::Key>,
    table: OnceLock<Table<F>>,
}

struct Table<F: Float> {
    shift: u32,
    /// Per cell (plus one at the end): thresholds in lower cells.
    below: Vec<u32>,
    /// When no cell holds more than one threshold: the entries ([`Float::entry`]).
    one: Option<Vec<F::Entry>>,
}

impl<F: Float> Width<F> {
    fn new(edges: &[f64]) -> Width<F> {
        Width {
            thresholds: edges.iter().map(|&e| F::threshold(e)).collect(),
            table: OnceLock::new(),
        }
    }

    /// Most thresholds sharing one cell at this shift (equal thresholds count apiece: the
    /// one-comparison lookup can only add one).
    fn crowding(&self, shift: u32) -> usize {
        let mut worst = 0;
        let mut run = 0;
        let mut prev = usize::MAX;
        for &t in &self.thresholds {
            let c = F::cell(t, shift);
            run = if c == prev { run + 1 } else { 1 };
            prev = c;
            worst = worst.max(run);
        }
        worst
    }

    fn table(&self) -> &Table<F> {
        self.table.get_or_init(|| {
            // The coarsest cells that give every threshold a cell of its own; else the
            // finest, searched within.
            let bits = std::mem::size_of::<F::Key>() as u32 * 8;
            let n = self.thresholds.len();
            let fits = |s: u32| F::fits(n, s);
            let shift = F::SHIFTS
                .iter()
                .copied()
                .find(|&s| fits(s) && self.crowding(s) <= 1)
                .unwrap_or(F::SHIFTS[F::SHIFTS.len() - 1]);
            let cells = 1usize << (bits - shift);
            let mut below = Vec::with_capacity(cells + 1);
            let mut j = 0usize;
            for c in 0..=cells {
                while j < self.thresholds.len() && F::cell(self.thresholds[j], shift) < c {
                    j += 1;
                }
                below.push(j as u32);
            }
            let one: Option<Vec<F::Entry>> =
                (fits(shift) && self.crowding(shift) <= 1).then(|| {
                    below
                        .windows(2)
                        .map(|w| {
                            let own = (w[1] > w[0]).then(|| self.thresholds[w[0] as usize]);
                            F::entry(w[0], own, shift)
                        })
                        .collect()
                });
            if let Some(one) = &one {
                // What makes the unchecked lookups in `pass_two` sound: a cell for every key,
                // and no position beyond the last slot.
                assert_eq!(one.len(), cells);
                assert!(fits(shift) && below.iter().all(|&b| b as usize <= n));
                assert!(below.windows(2).all(|w| w[1] - w[0] <= 1));
            }
            Table { shift, below, one }
        })
    }
}

/// Sorted bucket edges, with their thresholds and lookup tables (built on first use).
pub struct Edges {
    edges: Vec<f64>,
    w32: OnceLock<Width<f32>>,
    w64: OnceLock<Width<f64>>,
}

impl std::fmt::Debug for Edges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edges").field("edges", &self.edges).finish()
    }
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
        if edges.len() >= u32::MAX as usize {
            return Err("too many bucket edges".into());
        }
        Ok(Edges {
            edges: edges.to_vec(),
            w32: OnceLock::new(),
            w64: OnceLock::new(),
        })
    }

    pub fn edges(&self) -> &[f64] {
        &self.edges
    }

    /// Number of buckets.
    pub fn bins(&self) -> usize {
        self.edges.len() - 1
    }
}

/// How pass two finds a key's position (number of thresholds at or below it).
#[derive(Clone, Copy)]
enum Lookup<'a, F: Float> {
    /// One threshold per cell at most: a load and an add.
    One { shift: u32, entries: &'a [F::Entry] },
    /// Crowded cells: the count below the cell plus a search among the cell's thresholds.
    Cells {
        shift: u32,
        below: &'a [u32],
        thresholds: &'a [F::Key],
    },
    /// No table: binary search among all thresholds.
    Search { thresholds: &'a [F::Key] },
}

impl<F: Float> Lookup<'_, F> {
    #[inline(always)]
    fn rank(&self, k: F::Key) -> usize {
        match *self {
            Lookup::One { shift, entries } => F::rank(entries[F::cell(k, shift)], k, shift),
            Lookup::Cells {
                shift,
                below,
                thresholds,
            } => {
                let c = F::cell(k, shift);
                let (mut i, end) = (below[c] as usize, below[c + 1] as usize);
                if end - i <= 4 {
                    while i < end && thresholds[i] <= k {
                        i += 1;
                    }
                    i
                } else {
                    i + thresholds[i..end].partition_point(|&t| t <= k)
                }
            }
            Lookup::Search { thresholds } => thresholds.partition_point(|&t| t <= k),
        }
    }
}

/// Sums, squares, min and max of some values, in [`LANES`] independent lanes. Min and max
/// stay in the values' own width (twice as many per SIMD register for float32).
#[derive(Clone, Copy)]
struct Lanes<F> {
    s: [f64; LANES],
    q: [f64; LANES],
    lo: [F; LANES],
    hi: [F; LANES],
}

impl<F: Float> Lanes<F> {
    fn new() -> Lanes<F> {
        Lanes {
            s: [0.0; LANES],
            q: [0.0; LANES],
            lo: [F::INFINITY; LANES],
            hi: [F::NEG_INFINITY; LANES],
        }
    }

    /// Lane `l` takes value `v` (NaN leaves min and max alone; it is found afterwards).
    #[inline(always)]
    fn add(&mut self, l: usize, v: F) {
        let x: f64 = v.into();
        self.s[l] += x;
        self.q[l] += x * x;
        // `<` is false for NaN: these are exactly the SIMD min/max instructions.
        self.lo[l] = if v < self.lo[l] { v } else { self.lo[l] };
        self.hi[l] = if v > self.hi[l] { v } else { self.hi[l] };
    }

    /// Sum and sum of squares, lanes added in a fixed tree.
    fn sums(&self) -> (f64, f64) {
        fn tree(v: &[f64; LANES]) -> f64 {
            let mut w = *v;
            let mut n = LANES;
            while n > 1 {
                n /= 2;
                for i in 0..n {
                    w[i] += w[i + n];
                }
            }
            w[0]
        }
        (tree(&self.s), tree(&self.q))
    }

    fn min_max(&self) -> (f64, f64) {
        let lo = self.lo.iter().fold(f64::INFINITY, |a, &b| a.min(b.into()));
        let hi = self
            .hi
            .iter()
            .fold(f64::NEG_INFINITY, |a, &b| a.max(b.into()));
        (lo, hi)
    }
}

/// What one contiguous part of the input (a whole number of pieces, except at the end)
/// comes to.
struct Part {
    /// Values per position: `slots[r]` = values with exactly `r` thresholds at or below
    /// them. Slot 0 is below the first edge (or a negative NaN), slot `n` at or above the
    /// last edge (or a positive NaN).
    slots: Vec<u64>,
    /// Values equal to the last edge, which numpy counts in the last bucket.
    at_last: u64,
    /// (piece, (sum, sum of squares)) per piece binned.
    sums: Vec<(usize, (f64, f64))>,
    lo: f64,
    hi: f64,
}

/// Pass one over a chunk: keys, and the lanes' sums, min and max. Written lane by lane so
/// the compiler vectorises it; the lanes are copied into locals so they live in registers.
#[inline(always)]
fn pass_one<F: Float>(x: &[F], keys: &mut [F::Key], m: &mut Lanes<F>) {
    let mut a = *m;
    let mut xs = x.chunks_exact(LANES);
    let mut ks = keys.chunks_exact_mut(LANES);
    for (xv, kv) in (&mut xs).zip(&mut ks) {
        for l in 0..LANES {
            kv[l] = xv[l].key();
            a.add(l, xv[l]);
        }
    }
    for (l, (&v, k)) in xs.remainder().iter().zip(ks.into_remainder()).enumerate() {
        *k = v.key();
        a.add(l, v);
    }
    *m = a;
}

/// Pass two over a chunk's keys: counts per position into four count arrays (`counts` holds
/// them one after another, `stride` apart), one per value in turn, so that runs of values in
/// one bucket do not serialise on one counter's load-add-store. (Or into one, when `counts`
/// is one array long.)
#[inline(always)]
fn pass_two<F: Float>(keys: &[F::Key], how: Lookup<'_, F>, counts: &mut [u32], stride: usize) {
    if counts.len() == stride {
        // A short input: one array (less to clear and add up).
        for &k in keys {
            counts[how.rank(k)] += 1;
        }
        return;
    }
    let (c0, rest) = counts.split_at_mut(stride);
    let (c1, rest) = rest.split_at_mut(stride);
    let (c2, c3) = rest.split_at_mut(stride);
    let mut q = keys.chunks_exact(4);
    match how {
        Lookup::One { shift, entries } => {
            // The hot loop, without bounds checks: the table's build checked that it has a
            // cell for every key and that no entry yields a position beyond the last slot.
            debug_assert_eq!(
                entries.len(),
                1usize << (8 * std::mem::size_of::<F::Key>() as u32 - shift)
            );
            let rank = |k: F::Key| {
                // SAFETY: `cell(k, shift) = k >> shift < 2^(bits - shift) = entries.len()`.
                F::rank(
                    unsafe { *entries.get_unchecked(F::cell(k, shift)) },
                    k,
                    shift,
                )
            };
            for k in &mut q {
                let r = [rank(k[0]), rank(k[1]), rank(k[2]), rank(k[3])];
                debug_assert!(r.iter().all(|&r| r < stride));
                // SAFETY: every entry's position is at most `n` (checked at build), and
                // each array has `n + 1` slots.
                unsafe {
                    *c0.get_unchecked_mut(r[0]) += 1;
                    *c1.get_unchecked_mut(r[1]) += 1;
                    *c2.get_unchecked_mut(r[2]) += 1;
                    *c3.get_unchecked_mut(r[3]) += 1;
                }
            }
            for &k in q.remainder() {
                c0[rank(k)] += 1;
            }
        }
        _ => {
            for k in &mut q {
                c0[how.rank(k[0])] += 1;
                c1[how.rank(k[1])] += 1;
                c2[how.rank(k[2])] += 1;
                c3[how.rank(k[3])] += 1;
            }
            for &k in q.remainder() {
                c0[how.rank(k)] += 1;
            }
        }
    }
}

/// Bins the pieces that `claim` hands out (piece `i` is `vals[i * PIECE..][..PIECE]`):
/// chunks through both passes, sums restarted per piece.
#[inline(always)]
fn part_body<F: Float, const AVX2: bool>(
    vals: &[F],
    how: Lookup<'_, F>,
    edges: &[f64],
    claim: &dyn Fn() -> Option<usize>,
) -> Part {
    let n = edges.len();
    let stride = n + 1;
    let last = edges[n - 1];
    let copies = if vals.len() >= SHORT { 4 } else { 1 };
    let mut counts = vec![0u32; copies * stride];
    let mut slots = vec![0u64; stride];
    let mut keys = [F::Key::default(); CHUNK];
    let mut at_last = 0u64;
    let mut sums = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut unflushed = 0usize;
    let top = |c: &[u32]| {
        (0..copies)
            .map(|l| u64::from(c[l * stride + n]))
            .sum::<u64>()
    };
    while let Some(i) = claim() {
        let piece = &vals[i * PIECE..vals.len().min((i + 1) * PIECE)];
        let mut m = Lanes::new();
        for chunk in piece.chunks(CHUNK) {
            let ks = &mut keys[..chunk.len()];
            #[cfg(target_arch = "x86_64")]
            if AVX2 {
                // SAFETY: `AVX2` is only set by `part_avx2`, run only on AVX2 CPUs; `ks` is
                // as long as `chunk`.
                unsafe { F::pass_one_avx2(chunk, ks, &mut m) };
            } else {
                pass_one(chunk, ks, &mut m);
            }
            #[cfg(not(target_arch = "x86_64"))]
            pass_one(chunk, ks, &mut m);
            let before = top(&counts);
            pass_two(ks, how, &mut counts, stride);
            if top(&counts) != before {
                // Something at or above the last edge (or NaN): numpy counts the values
                // equal to it, which only a look at the floats can tell.
                at_last += chunk.iter().filter(|&&v| v.into() == last).count() as u64;
            }
        }
        sums.push((i, m.sums()));
        let (l, h) = m.min_max();
        lo = lo.min(l);
        hi = hi.max(h);
        unflushed += piece.len();
        // u32 counts: moved into u64 ones long before they could overflow.
        if unflushed > (u32::MAX as usize) - PIECE {
            flush(&mut counts, &mut slots);
            unflushed = 0;
        }
    }
    flush(&mut counts, &mut slots);
    Part {
        slots,
        at_last,
        sums,
        lo,
        hi,
    }
}

fn flush(counts: &mut [u32], slots: &mut [u64]) {
    for c in counts.chunks_exact_mut(slots.len()) {
        for (s, x) in slots.iter_mut().zip(c.iter_mut()) {
            *s += u64::from(std::mem::take(x));
        }
    }
}

/// [`part_body`] compiled for AVX2 (and BMI2's shifts), chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2")]
unsafe fn part_avx2<F: Float>(
    vals: &[F],
    how: Lookup<'_, F>,
    edges: &[f64],
    claim: &dyn Fn() -> Option<usize>,
) -> Part {
    part_body::<F, true>(vals, how, edges, claim)
}

fn part<F: Float>(
    vals: &[F],
    how: Lookup<'_, F>,
    edges: &[f64],
    claim: &dyn Fn() -> Option<usize>,
) -> Part {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi2")
        {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { part_avx2(vals, how, edges, claim) };
        }
    }
    part_body::<F, false>(vals, how, edges, claim)
}

/// Every piece of `vals` in order, on this thread.
fn one_part<F: Float>(vals: &[F], how: Lookup<'_, F>, edges: &[f64]) -> Part {
    let next = AtomicUsize::new(0);
    let pieces = vals.len().div_ceil(PIECE);
    part(vals, how, edges, &|| claim(&next, pieces))
}

fn claim(next: &AtomicUsize, pieces: usize) -> Option<usize> {
    let i = next.fetch_add(1, Ordering::Relaxed);
    (i < pieces).then_some(i)
}

/// The second thread's side of [`two_parts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Helper {
    /// Queued, not started.
    Waiting,
    /// Claiming pieces: the caller must wait for it.
    Running,
    /// Finished; its part is in `out`.
    Done,
    /// The caller finished first and left: the helper must touch nothing.
    Cancelled,
}

struct Job {
    next: AtomicUsize,
    state: Mutex<Helper>,
    done: Condvar,
    out: Mutex<Option<Part>>,
}

impl Job {
    fn state(&self) -> MutexGuard<'_, Helper> {
        // Only plain assignments happen under the lock: a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// On the caller's way out (normal or unwinding): cancel a helper that has not started, or
/// wait for one that has. What makes lending the helper borrowed data sound.
struct AwaitHelper<'j>(&'j Job);

impl Drop for AwaitHelper<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state();
        if *st == Helper::Waiting {
            *st = Helper::Cancelled;
            return;
        }
        while *st != Helper::Done {
            st = self.0.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Marks the helper done however it ends, so the caller never waits forever.
struct HelperDone<'j>(&'j Job);

impl Drop for HelperDone<'_> {
    fn drop(&mut self) {
        *self.0.state() = Helper::Done;
        self.0.done.notify_all();
    }
}

/// A job for the helper thread.
type Task = Box<dyn FnOnce() + Send + 'static>;

/// The helper thread's mailbox: at most one task waiting.
struct Mailbox {
    task: Mutex<Option<Task>>,
    posted: Condvar,
    /// Where the helper may run (see [`Steer`]).
    steer: Steer,
    /// Whether the helper is steered off its caller's CPU and asks for a short slice.
    tuned: bool,
}

/// How the helper thread runs, from `TBSCOPE_HISTOGRAM_HELPER` (read once, when the first
/// large histogram is binned): unset or `tuned`, kept off its caller's CPU ([`Steer`]) with
/// a short scheduler slice ([`short_slice`]), which is what reaches the histogram target on a
/// busy machine; `plain`, an ordinary thread the scheduler places as it likes (for
/// applications that manage CPU affinity or scheduling themselves); `off`, no helper at all
/// (the caller bins alone, as on one CPU).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum HelperMode {
    Tuned,
    Plain,
    Off,
}

fn helper_mode() -> HelperMode {
    match std::env::var("TBSCOPE_HISTOGRAM_HELPER")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "plain" => HelperMode::Plain,
        "off" | "0" | "no" | "false" => HelperMode::Off,
        _ => HelperMode::Tuned,
    }
}

/// Keeps the helper thread off the CPU its caller runs on (Linux; elsewhere it does nothing).
///
/// Why: when the other CPU is busy, the scheduler may wake the helper on the waker's CPU,
/// where it takes over from the caller instead of running beside it. Traced on the 2-CPU
/// bench VM while the other CPU ran someone else's build (1M values, tensorboardX's call
/// before each): in 7 calls of 15 the helper binned all 62 pieces and the caller none, so two
/// threads took as long as one; kept off the caller's CPU, in 0 of 12 (the caller binned
/// everything itself, or the two shared). The other CPU is also busy in the bench without
/// any build: tensorboardX's call leaves an OpenBLAS thread spinning (sched_yield) there for
/// ~60 ms. Allowed every CPU but the caller's, the helper runs beside the caller when another
/// CPU lets it, or not at all, and the caller keeps its own CPU.
struct Steer {
    #[cfg(target_os = "linux")]
    thread: OnceLock<libc::pthread_t>,
    /// The CPU the helper is kept off, or -1 for none yet.
    #[cfg(target_os = "linux")]
    off: std::sync::atomic::AtomicI32,
}

impl Steer {
    fn new() -> Steer {
        Steer {
            #[cfg(target_os = "linux")]
            thread: OnceLock::new(),
            #[cfg(target_os = "linux")]
            off: std::sync::atomic::AtomicI32::new(-1),
        }
    }

    #[cfg(target_os = "linux")]
    fn started(&self, handle: &std::thread::JoinHandle<()>) {
        use std::os::unix::thread::JoinHandleExt;
        let _ = self.thread.set(handle.as_pthread_t());
    }

    #[cfg(not(target_os = "linux"))]
    fn started(&self, _handle: &std::thread::JoinHandle<()>) {}

    /// Before waking the helper: keep it off the calling thread's CPU. A system call only
    /// when the caller has moved to another CPU since the last time; on any failure the
    /// helper keeps the CPUs it has.
    #[cfg(target_os = "linux")]
    fn away_from_caller(&self) {
        let Some(&thread) = self.thread.get() else {
            return;
        };
        // SAFETY: plain libc calls on a zeroed `cpu_set_t` of the right size; `thread` is
        // the helper's handle, and the helper thread never exits (its loop has no end).
        unsafe {
            let cpu = libc::sched_getcpu();
            if cpu < 0 || cpu == self.off.load(Ordering::Relaxed) {
                return;
            }
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut set) != 0 || (cpu as usize) >= 8 * size {
                return;
            }
            libc::CPU_CLR(cpu as usize, &mut set);
            // Only the caller's CPU to run on: the helper could only take turns with it.
            if libc::CPU_COUNT(&set) == 0 {
                return;
            }
            if libc::pthread_setaffinity_np(thread, size, &set) == 0 {
                self.off.store(cpu, Ordering::Relaxed);
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn away_from_caller(&self) {}
}

/// Hands `task` to the helper thread (started on first use), unless it is still busy with
/// an earlier one, or cannot be started: then the task is dropped and the caller bins alone.
///
/// Its own thread rather than rayon's pool: measured on the bench VM, a rayon worker that
/// had been idle for 10 ms took 1.8 ms (median) to pick up a spawned job, a thread blocked on
/// a condition variable 13 µs; histograms are logged after idle gaps (a training step).
fn offer(task: Task) {
    if let Some(m) = mailbox() {
        let mut t = m.task.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            if m.tuned {
                m.steer.away_from_caller();
            }
            *t = Some(task);
            m.posted.notify_one();
        }
    }
}

/// The helper thread's mailbox, the thread started on first use; `None` if it cannot start
/// or is turned off ([`HelperMode`]).
fn mailbox() -> Option<&'static Mailbox> {
    static MAILBOX: OnceLock<Option<&'static Mailbox>> = OnceLock::new();
    *MAILBOX.get_or_init(|| {
        let mode = helper_mode();
        if mode == HelperMode::Off {
            return None;
        }
        let m: &'static Mailbox = Box::leak(Box::new(Mailbox {
            task: Mutex::new(None),
            posted: Condvar::new(),
            steer: Steer::new(),
            tuned: mode == HelperMode::Tuned,
        }));
        let started = std::thread::Builder::new()
            .name("tbscope-histogram".into())
            .spawn(move || {
                if m.tuned {
                    short_slice();
                }
                helper_loop(m)
            });
        started.ok().map(|h| {
            m.steer.started(&h);
            m
        })
    })
}

/// Asks the scheduler for a short time slice for the calling (helper) thread (Linux 6.12+;
/// elsewhere, or if refused, nothing changes).
///
/// Why: the helper is woken onto the CPU its caller is not on, and that CPU is often busy, for
/// instance with the OpenBLAS thread that numpy's last dot product left spinning. The EEVDF
/// scheduler lets a running task finish its slice (1.4 ms by default on the 2-CPU bench VM)
/// before a woken one of the same slice preempts it; a task with a shorter slice preempts at
/// once. Traced on the bench VM (1M values right after tensorboardX's call), the helper
/// otherwise missed 10 calls of 60 entirely, the caller binning alone for 0.87-1.45 ms.
fn short_slice() {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr`, first version (48 bytes).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
        }
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: 0,
            nice: 0,
            priority: 0,
            // The shortest slice the kernel allows for normal tasks: 0.1 ms.
            runtime: 100_000,
            deadline: 0,
            period: 0,
        };
        // SAFETY: a valid, fully initialised sched_attr for this thread (pid 0); the call
        // only reads it.
        unsafe {
            libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0);
        }
    }
}

/// The helper thread's body: runs each task posted to the mailbox.
fn helper_loop(m: &'static Mailbox) -> ! {
    loop {
        let task = {
            let mut t = m.task.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(task) = t.take() {
                    break task;
                }
                t = m.posted.wait(t).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A failing task has told its caller (`HelperDone`); the thread carries on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
    }
}

/// Whether a second thread can run beside the caller at all.
fn helper_pays() -> bool {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) >= 2
}

/// Bins `vals` on the calling thread and a helper thread, which take pieces from a shared
/// counter. The caller starts at once and never waits for a helper that has not started
/// (on a busy machine it may start late, or never): it then does every piece itself. It
/// waits only for a piece the helper is in the middle of.
fn two_parts<F: Float>(vals: &[F], how: Lookup<'_, F>, edges: &[f64]) -> Vec<Part> {
    let pieces = vals.len().div_ceil(PIECE);
    let job = Arc::new(Job {
        next: AtomicUsize::new(0),
        state: Mutex::new(Helper::Waiting),
        done: Condvar::new(),
        out: Mutex::new(None),
    });
    let guard = AwaitHelper(&job);
    // SAFETY: the helper reads these only after moving `state` from Waiting to Running,
    // and `guard` keeps this function from returning or unwinding past them until the
    // state is Done (or was still Waiting, and is then Cancelled so the helper never reads
    // them). Only lifetimes change; `Lookup` is the same type.
    let (vals_h, how_h, edges_h): (&'static [F], Lookup<'static, F>, &'static [f64]) = unsafe {
        (
            &*(vals as *const [F]),
            std::mem::transmute::<Lookup<'_, F>, Lookup<'static, F>>(how),
            &*(edges as *const [f64]),
        )
    };
    let j = job.clone();
    offer(Box::new(move || {
        {
            let mut st = j.state();
            if *st != Helper::Waiting {
                return;
            }
            *st = Helper::Running;
        }
        let _done = HelperDone(&j);
        let p = part(vals_h, how_h, edges_h, &|| claim(&j.next, pieces));
        *j.out.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
    }));
    let mine = part(vals, how, edges, &|| claim(&job.next, pieces));
    drop(guard);
    let theirs = job.out.lock().unwrap_or_else(|p| p.into_inner()).take();
    // A helper that ran and left nothing panicked: its pieces are missing.
    let helped = *job.state() != Helper::Cancelled;
    assert!(
        !helped || theirs.is_some(),
        "the histogram helper thread failed"
    );
    std::iter::once(mine).chain(theirs).collect()
}

/// Pass one in AVX2 intrinsics: the compiler does not vectorise the float32-to-float64 sums
/// on its own. Lane `l` of [`Lanes`] is element `l` of the register pair, as in `pass_one`.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{pass_one, Lanes, LANES};
    use std::arch::x86_64::*;

    const _: () = assert!(LANES == 8);

    /// Bytes ahead of pass one to prefetch. Pass one streams the input and pass two only
    /// computes, so without this nothing is fetched while pass two runs, and an input that
    /// is not in cache (after a garbage collection, say) costs its memory time on top of the
    /// computing. Measured, calls with and without alternating, 1M values just evicted from
    /// cache, one thread: float32 1.39 against 1.23 ms, float64 1.83 against 1.53 ms (medians;
    /// another run: 3% apart; prefetching 16 or 64 KB ahead, or into L2, did no better).
    const AHEAD: usize = 8 << 10;

    /// # Safety
    /// AVX2 CPU; `keys.len() >= x.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pass_one_f32(x: &[f32], keys: &mut [u32], m: &mut Lanes<f32>) {
        debug_assert!(keys.len() >= x.len());
        let whole = x.len() / 8 * 8;
        let sign = _mm256_set1_epi32(i32::MIN);
        let mut s0 = _mm256_loadu_pd(m.s.as_ptr());
        let mut s1 = _mm256_loadu_pd(m.s.as_ptr().add(4));
        let mut q0 = _mm256_loadu_pd(m.q.as_ptr());
        let mut q1 = _mm256_loadu_pd(m.q.as_ptr().add(4));
        let mut lo = _mm256_loadu_ps(m.lo.as_ptr());
        let mut hi = _mm256_loadu_ps(m.hi.as_ptr());
        let mut i = 0;
        while i < whole {
            // (wrapping_add: an address past the end is only prefetched, never read.)
            _mm_prefetch::<_MM_HINT_T0>(x.as_ptr().wrapping_add(i + AHEAD / 4) as *const i8);
            let v = _mm256_loadu_ps(x.as_ptr().add(i));
            let b = _mm256_castps_si256(v);
            // key32: flip all bits of negatives, only the sign bit of the rest.
            let k = _mm256_xor_si256(b, _mm256_or_si256(_mm256_srai_epi32::<31>(b), sign));
            _mm256_storeu_si256(keys.as_mut_ptr().add(i) as *mut __m256i, k);
            // min(v, lo) is `v < lo ? v : lo`: NaN keeps lo, as in `Lanes::add`.
            lo = _mm256_min_ps(v, lo);
            hi = _mm256_max_ps(v, hi);
            let d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            let d1 = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v));
            s0 = _mm256_add_pd(s0, d0);
            s1 = _mm256_add_pd(s1, d1);
            // Multiply, then add: no fused multiply-add, which would round differently
            // from the portable code.
            q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
            q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
            i += 8;
        }
        _mm256_storeu_pd(m.s.as_mut_ptr(), s0);
        _mm256_storeu_pd(m.s.as_mut_ptr().add(4), s1);
        _mm256_storeu_pd(m.q.as_mut_ptr(), q0);
        _mm256_storeu_pd(m.q.as_mut_ptr().add(4), q1);
        _mm256_storeu_ps(m.lo.as_mut_ptr(), lo);
        _mm256_storeu_ps(m.hi.as_mut_ptr(), hi);
        pass_one(&x[whole..], &mut keys[whole..x.len()], m);
    }

    /// # Safety
    /// AVX2 CPU; `keys.len() >= x.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pass_one_f64(x: &[f64], keys: &mut [u64], m: &mut Lanes<f64>) {
        debug_assert!(keys.len() >= x.len());
        let whole = x.len() / 8 * 8;
        let sign = _mm256_set1_epi64x(i64::MIN);
        let zero = _mm256_setzero_si256();
        let mut s0 = _mm256_loadu_pd(m.s.as_ptr());
        let mut s1 = _mm256_loadu_pd(m.s.as_ptr().add(4));
        let mut q0 = _mm256_loadu_pd(m.q.as_ptr());
        let mut q1 = _mm256_loadu_pd(m.q.as_ptr().add(4));
        let mut lo0 = _mm256_loadu_pd(m.lo.as_ptr());
        let mut lo1 = _mm256_loadu_pd(m.lo.as_ptr().add(4));
        let mut hi0 = _mm256_loadu_pd(m.hi.as_ptr());
        let mut hi1 = _mm256_loadu_pd(m.hi.as_ptr().add(4));
        let key = |v: __m256d| {
            let b = _mm256_castpd_si256(v);
            // No 64-bit arithmetic shift in AVX2: a compare with zero gives the sign mask.
            _mm256_xor_si256(b, _mm256_or_si256(_mm256_cmpgt_epi64(zero, b), sign))
        };
        let mut i = 0;
        while i < whole {
            let ahead = x.as_ptr().wrapping_add(i + AHEAD / 8);
            _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(4) as *const i8);
            let v0 = _mm256_loadu_pd(x.as_ptr().add(i));
            let v1 = _mm256_loadu_pd(x.as_ptr().add(i + 4));
            let kp = keys.as_mut_ptr().add(i) as *mut __m256i;
            _mm256_storeu_si256(kp, key(v0));
            _mm256_storeu_si256(kp.add(1), key(v1));
            lo0 = _mm256_min_pd(v0, lo0);
            lo1 = _mm256_min_pd(v1, lo1);
            hi0 = _mm256_max_pd(v0, hi0);
            hi1 = _mm256_max_pd(v1, hi1);
            s0 = _mm256_add_pd(s0, v0);
            s1 = _mm256_add_pd(s1, v1);
            q0 = _mm256_add_pd(q0, _mm256_mul_pd(v0, v0));
            q1 = _mm256_add_pd(q1, _mm256_mul_pd(v1, v1));
            i += 8;
        }
        _mm256_storeu_pd(m.s.as_mut_ptr(), s0);
        _mm256_storeu_pd(m.s.as_mut_ptr().add(4), s1);
        _mm256_storeu_pd(m.q.as_mut_ptr(), q0);
        _mm256_storeu_pd(m.q.as_mut_ptr().add(4), q1);
        _mm256_storeu_pd(m.lo.as_mut_ptr(), lo0);
        _mm256_storeu_pd(m.lo.as_mut_ptr().add(4), lo1);
        _mm256_storeu_pd(m.hi.as_mut_ptr(), hi0);
        _mm256_storeu_pd(m.hi.as_mut_ptr().add(4), hi1);
        pass_one(&x[whole..], &mut keys[whole..x.len()], m);
    }
}

/// Everything about some values and edges that a histogram needs.
struct Tally {
    slots: Vec<u64>,
    at_last: u64,
    sum: f64,
    sum_squares: f64,
    min: f64,
    max: f64,
}

impl Tally {
    /// `np.histogram` counts: bucket `i` holds `edges[i] <= v < edges[i + 1]` (position
    /// `i + 1`), and the last bucket also `v == last`, as in numpy.
    fn counts(&self) -> Vec<u64> {
        let n = self.slots.len() - 1;
        let mut c = self.slots[1..n].to_vec();
        c[n - 2] += self.at_last;
        c
    }
}

fn tally<F: Float>(vals: &[F], edges: &Edges) -> Tally {
    let w = F::edges(edges);
    let how = if vals.len() >= TABLE_MIN_VALUES || w.table.get().is_some() {
        let t = w.table();
        match &t.one {
            Some(entries) => Lookup::One {
                shift: t.shift,
                entries,
            },
            None => Lookup::Cells {
                shift: t.shift,
                below: &t.below,
                thresholds: &w.thresholds,
            },
        }
    } else {
        Lookup::Search {
            thresholds: &w.thresholds,
        }
    };
    let e = &edges.edges[..];
    // (On one core a helper would only take turns with the caller.)
    let parts = if vals.len() >= PARALLEL_MIN && helper_pays() {
        two_parts(vals, how, e)
    } else {
        vec![one_part(vals, how, e)]
    };
    let mut t = Tally {
        slots: Vec::new(),
        at_last: 0,
        sum: 0.0,
        sum_squares: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
    };
    for p in &parts {
        if t.slots.is_empty() {
            t.slots.clone_from(&p.slots);
        } else {
            for (a, b) in t.slots.iter_mut().zip(&p.slots) {
                *a += b;
            }
        }
        t.at_last += p.at_last;
        t.min = t.min.min(p.lo);
        t.max = t.max.max(p.hi);
    }
    // Pieces added in order, whoever binned them.
    let mut sums: Vec<(usize, (f64, f64))> =
        parts.iter().flat_map(|p| p.sums.iter().copied()).collect();
    sums.sort_unstable_by_key(|&(i, _)| i);
    for (_, (s, q)) in sums {
        t.sum += s;
        t.sum_squares += q;
    }
    // A NaN anywhere makes the sum NaN (and so does inf - inf): only then look for one.
    if (t.sum.is_nan() || t.sum_squares.is_nan()) && vals.iter().any(|&v| v.into().is_nan()) {
        t.min = f64::NAN;
        t.max = f64::NAN;
    }
    t
}

fn tally_values(values: Values<'_>, edges: &Edges) -> Tally {
    match values {
        Values::F64(v) => tally(v, edges),
        Values::F32(v) => tally(v, edges),
    }
}

/// `np.histogram(values, bins=edges)[0]`: bucket counts only.
pub fn counts(values: Values<'_>, edges: &Edges) -> Vec<u64> {
    tally_values(values, edges).counts()
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
    let t = tally_values(values, edges);
    let mut counts = t.counts();
    // Borrowed unless grouping makes new ones: only the trimmed part is ever copied.
    let mut limits = std::borrow::Cow::Borrowed(edges.edges());
    if let Some(m) = max_bins {
        let bins = counts.len();
        if bins > m {
            // Buckets summed in groups, the last group padded with empty buckets; the left
            // edge of each group kept, plus the last edge.
            let group = bins / m;
            counts = counts.chunks(group).map(|c| c.iter().sum()).collect();
            let mut l: Vec<f64> = limits[..bins].iter().step_by(group).copied().collect();
            l.push(limits[bins]);
            limits = l.into();
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
    Ok(Histogram {
        min: t.min,
        max: t.max,
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
            let b = if v == last {
                e.len() - 2
            } else {
                position(v, e) - 1
            };
            c[b] += 1;
        }
        c
    }

    /// Number of edges `<= v`, floats compared as floats (so -0.0 == 0.0).
    fn position(v: f64, e: &[f64]) -> usize {
        let (mut lo, mut hi) = (0usize, e.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if e[mid] <= v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
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

    fn next_down32(x: f32) -> f32 {
        -next_up32(-x)
    }

    /// Values on, next to and between the edges, in both widths, plus every special value
    /// (NaNs of both signs and odd payloads, infinities, zeros, subnormals).
    fn nasty(e: &[f64]) -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7FF0_0000_0000_0001),
            f64::from_bits(0xFFF0_0000_0000_0001),
            f64::from_bits(u64::MAX),
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
            f64::from(f32::MAX),
            f64::from(f32::MIN),
            1e-45,
        ];
        for &x in e {
            v.extend([x, -x, x.next_up(), x.next_down(), x * 2.0, x / 2.0]);
            if x.is_finite() && x.abs() <= f64::from(f32::MAX) {
                let y = x as f32;
                for z in [y, next_up32(y), next_down32(y)] {
                    if z.is_finite() {
                        v.push(f64::from(z));
                        v.push(-f64::from(z));
                    }
                }
            }
        }
        v
    }

    fn nasty32(e: &[f64]) -> Vec<f32> {
        let mut v: Vec<f32> = nasty(e).iter().map(|&x| x as f32).collect();
        v.extend([
            f32::from_bits(0x7F80_0001),
            f32::from_bits(0xFF80_0001),
            f32::from_bits(u32::MAX),
            f32::from_bits(0x7FFF_FFFF),
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
        ]);
        v
    }

    fn edge_sets() -> Vec<Vec<f64>> {
        let lin: Vec<f64> = (0..=30).map(|i| -1.0 + i as f64 / 15.0).collect();
        // 1000 even buckets: crowds the float32 cells near the ends.
        let dense: Vec<f64> = (0..=1000).map(|i| -3.0 + i as f64 * 0.006).collect();
        let narrow: Vec<f64> = (0..=50).map(|i| 1000.0 + i as f64 * 1e-9).collect();
        let dup = vec![-1.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        let signed_zero = vec![-0.0, 1.0, 2.0];
        let ends_at_zero = vec![-2.0, -1.0, -0.0];
        let inf = vec![f64::NEG_INFINITY, -1.0, 0.0, 1.0, f64::INFINITY];
        let tiny = vec![5e-324, 1e-310, 1e-300];
        let beyond_f32 = vec![-1e300, -1e39, -1.0, 1.0, 1e39, 1e300];
        let two = vec![3.0, 3.0];
        let exact32: Vec<f64> = [-1.5f32, -0.1, 0.0, 1.0e-3, 0.1, 0.3, 2.0]
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        // Many edges in one cell of the table: forces the search inside a cell.
        let mut clustered: Vec<f64> = (0..200).map(|i| 1.0 + i as f64 * 1e-14).collect();
        clustered.push(1e10);
        vec![
            default_edges().edges().to_vec(),
            lin,
            dense,
            narrow,
            dup,
            signed_zero,
            ends_at_zero,
            inf,
            tiny,
            beyond_f32,
            two,
            exact32,
            clustered,
        ]
    }

    /// Every way pass two can look a key up that these edges allow.
    fn lookups<F: Float>(edges: &Edges) -> Vec<Lookup<'_, F>> {
        let w = F::edges(edges);
        let t = w.table();
        let mut out = vec![
            Lookup::Search {
                thresholds: &w.thresholds,
            },
            Lookup::Cells {
                shift: t.shift,
                below: &t.below,
                thresholds: &w.thresholds,
            },
        ];
        if let Some(entries) = &t.one {
            out.push(Lookup::One {
                shift: t.shift,
                entries,
            });
        }
        out
    }

    fn check_width<F: Float>(vals: &[F], e: &[f64]) {
        let edges = Edges::new(e).unwrap();
        let up: Vec<f64> = vals.iter().map(|&v| v.into()).collect();
        let want = reference(&up, e);
        assert_eq!(
            counts(F::values(vals), &edges),
            want,
            "edges {:?}..",
            &e[..2]
        );
        for how in lookups::<F>(&edges) {
            let p = one_part(vals, how, e);
            // The AVX2 build and the portable one agree to the bit (sums included).
            let next = AtomicUsize::new(0);
            let pieces = vals.len().div_ceil(PIECE);
            let q = part_body::<F, false>(vals, how, e, &|| claim(&next, pieces));
            // (Any NaN is the same NaN here: payloads depend on the instructions.)
            let bit = |x: f64| if x.is_nan() { 1 } else { x.to_bits() };
            let bits = |s: &[(usize, (f64, f64))]| -> Vec<(usize, u64, u64)> {
                s.iter().map(|&(i, (a, b))| (i, bit(a), bit(b))).collect()
            };
            assert_eq!((&p.slots, p.at_last), (&q.slots, q.at_last));
            assert_eq!(bits(&p.sums), bits(&q.sums));
            assert!(bit(p.lo) == bit(q.lo) && bit(p.hi) == bit(q.hi));
            let t = Tally {
                slots: p.slots,
                at_last: p.at_last,
                sum: 0.0,
                sum_squares: 0.0,
                min: 0.0,
                max: 0.0,
            };
            assert_eq!(t.counts(), want, "edges {:?}..", &e[..2]);
            // Every single value: its position, or an outside slot for NaN.
            for (&v, &x) in vals.iter().zip(&up) {
                let r = how.rank(v.key());
                if x.is_nan() {
                    assert!(r == 0 || r == e.len(), "{x}: {r}");
                } else {
                    assert_eq!(r, position(x, e), "{x} ({:?})", v.key());
                }
            }
        }
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
            let pool = nasty(&e);
            let pool32 = nasty32(&e);
            // Below TABLE_MIN_VALUES (binary search) and above (table), with a chunk
            // remainder.
            for n in [100usize, 5000] {
                let vals: Vec<f64> = (0..n).map(|_| rng.pick(&pool)).collect();
                check_width(&vals, &e);
                let vals: Vec<f32> = (0..n).map(|_| rng.pick(&pool32)).collect();
                check_width(&vals, &e);
            }
            // Every pool value at least once, in both widths.
            check_width(&pool, &e);
            check_width(&pool32, &e);
        }
    }

    #[test]
    fn thresholds_are_least_values_at_or_above_the_edge() {
        for e in edge_sets().concat() {
            let t = f32::from_bits(unkey32(<f32 as Float>::threshold(e)));
            assert!(f64::from(t) >= e, "{e}: {t}");
            let below = if t.to_bits() == 0x8000_0000 {
                -f32::from_bits(1)
            } else {
                next_down32(t)
            };
            assert!(t == f32::NEG_INFINITY || f64::from(below) < e, "{e}: {t}");
        }
    }

    fn unkey32(k: u32) -> u32 {
        if k >> 31 == 1 {
            k & !(1 << 31)
        } else {
            !k
        }
    }

    #[test]
    fn tables_suit_the_edges() {
        // TensorFlow's edges: one threshold per cell, 16 cells per octave in float32.
        let d = default_edges();
        let t32 = f32::edges(d).table();
        assert!(t32.one.is_some());
        assert_eq!(t32.shift, 19);
        assert!(f64::edges(d).table().one.is_some());
        // Evenly spaced edges fit too; repeated or crowded ones fall back to searching.
        let sets = edge_sets();
        let lin = Edges::new(&sets[1]).unwrap();
        assert!(f32::edges(&lin).table().one.is_some());
        assert!(f64::edges(&lin).table().one.is_some());
        let dup = Edges::new(&sets[4]).unwrap();
        assert!(f32::edges(&dup).table().one.is_none());
        let clustered = Edges::new(&sets[12]).unwrap();
        assert!(f64::edges(&clustered).table().one.is_none());
    }

    #[test]
    fn parallel_halves_sum_up_and_sums_do_not_depend_on_the_split() {
        let mut rng = Rng(11);
        let e = edge_sets()[1].clone();
        let edges = Edges::new(&e).unwrap();
        let n = PARALLEL_MIN + 3 * PIECE + 17;
        let vals: Vec<f64> = (0..n)
            .map(|_| (rng.next() % 4001) as f64 / 1000.0 - 2.0)
            .collect();
        assert_eq!(counts(Values::F64(&vals), &edges), reference(&vals, &e));
        let h = histogram(Values::F64(&vals), Some(&edges), None).unwrap();
        let inside = vals.iter().filter(|v| (-1.0..=1.0).contains(*v)).count();
        assert_eq!(h.counts.iter().sum::<f64>(), inside as f64);
        assert_eq!(h.num, vals.len() as f64);
        // One part over everything gives bit-identical sums.
        let w = f64::edges(&edges);
        let how = Lookup::Search {
            thresholds: &w.thresholds,
        };
        let whole = one_part(&vals, how, &e);
        let (s, q) = whole
            .sums
            .iter()
            .fold((0.0, 0.0), |(s, q), &(_, (a, b))| (s + a, q + b));
        assert_eq!((h.sum, h.sum_squares), (s, q));
        let v32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
        let up: Vec<f64> = v32.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(counts(Values::F32(&v32), &edges), reference(&up, &e));
    }

    #[test]
    fn two_threads_give_what_one_gives() {
        // Whether the helper starts, joins halfway or never runs, the result is the same.
        let mut rng = Rng(3);
        let vals: Vec<f32> = (0..20 * PIECE + 5)
            .map(|_| ((rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0) as f32)
            .collect();
        let e = default_edges();
        let w = f32::edges(e);
        let t = w.table();
        let how = Lookup::One {
            shift: t.shift,
            entries: t.one.as_deref().unwrap(),
        };
        let one = one_part(&vals, how, e.edges());
        for _ in 0..20 {
            let parts = two_parts(&vals, how, e.edges());
            let mut slots = vec![0u64; one.slots.len()];
            let mut sums = Vec::new();
            for p in &parts {
                for (a, b) in slots.iter_mut().zip(&p.slots) {
                    *a += b;
                }
                sums.extend_from_slice(&p.sums);
            }
            sums.sort_by_key(|&(i, _)| i);
            assert_eq!(slots, one.slots);
            assert_eq!(sums, one.sums);
        }
    }

    /// The helper is kept off the CPU of the thread that last offered it work, and may run
    /// on every other CPU this process may use.
    #[cfg(target_os = "linux")]
    #[test]
    fn helper_keeps_off_the_callers_cpu() {
        fn cpus(thread: libc::pthread_t) -> Vec<usize> {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: a zeroed set of the size passed; `thread` is alive (the helper never
            // exits, and `pthread_self` is this thread).
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::pthread_getaffinity_np(thread, size, &mut set), 0);
                (0..8 * size)
                    .filter(|&c| libc::CPU_ISSET(c, &set))
                    .collect()
            }
        }
        // SAFETY: `pthread_self` has no preconditions.
        let mine = cpus(unsafe { libc::pthread_self() });
        let vals = vec![0.5f32; PARALLEL_MIN + 1];
        let h = histogram(Values::F32(&vals), None, None).unwrap();
        assert_eq!(h.num, vals.len() as f64);
        let m = mailbox().expect("the helper thread starts");
        let helper = cpus(*m.steer.thread.get().unwrap());
        if mine.len() < 2 {
            // Nowhere else to go: left alone.
            assert_eq!(m.steer.off.load(Ordering::Relaxed), -1);
            return;
        }
        // (Other tests bin from other threads, which may run on other CPUs: which CPU is
        // left out can change at any moment, not how many.)
        let off = m.steer.off.load(Ordering::Relaxed);
        assert!(
            off >= 0 && mine.contains(&(off as usize)),
            "{off} in {mine:?}"
        );
        assert!(
            helper.iter().all(|c| mine.contains(c)),
            "{helper:?} in {mine:?}"
        );
        assert_eq!(helper.len(), mine.len() - 1, "{helper:?}");
    }

    /// The helper asks for the shortest time slice, so that it preempts a busy CPU's task
    /// when woken. Checked where the kernel shows slices (`se.slice` in /proc, Linux 6.12+).
    #[cfg(target_os = "linux")]
    #[test]
    fn helper_has_a_short_slice() {
        let vals = vec![0.5f32; PARALLEL_MIN + 1];
        histogram(Values::F32(&vals), None, None).unwrap();
        mailbox().expect("the helper thread starts");
        // The thread names itself and asks for its slice when it first runs, which on a busy
        // machine can be after the call above returned: look again until it has.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut seen = None;
            for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                if comm.trim() == "tbscope-histogr" {
                    seen =
                        Some(std::fs::read_to_string(t.path().join("sched")).unwrap_or_default());
                }
            }
            if let Some(sched) = seen {
                let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) else {
                    return; // an older kernel (or no sched debug file): nothing to check
                };
                let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
                if slice == 100_000 {
                    return;
                }
                assert!(std::time::Instant::now() < deadline, "{line}");
            } else {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no thread named tbscope-histogr"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn sums_are_accurate() {
        // Against a compensated (Neumaier) sum of the same float64 values.
        let mut rng = Rng(5);
        let vals: Vec<f32> = (0..1_000_003)
            .map(|_| ((rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 2.9) as f32)
            .collect();
        fn exact(it: impl Iterator<Item = f64>) -> f64 {
            let (mut s, mut c) = (0.0f64, 0.0f64);
            for x in it {
                let t = s + x;
                c += if s.abs() >= x.abs() {
                    (s - t) + x
                } else {
                    (x - t) + s
                };
                s = t;
            }
            s + c
        }
        let h = histogram(Values::F32(&vals), None, None).unwrap();
        let s = exact(vals.iter().map(|&v| f64::from(v)));
        let q = exact(vals.iter().map(|&v| f64::from(v) * f64::from(v)));
        assert!((h.sum - s).abs() <= 1e-13 * s.abs(), "{} vs {s}", h.sum);
        assert!(
            (h.sum_squares - q).abs() <= 1e-13 * q,
            "{} vs {q}",
            h.sum_squares
        );
        let lo = vals.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = vals.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!((h.min, h.max), (f64::from(lo), f64::from(hi)));
    }

    #[test]
    fn float32_upcast_landing_on_edges() {
        // Edges that are exactly float32 values: the f32 inputs equal to them must land in
        // the bucket to the right, like numpy on the upcast values.
        let mut e: Vec<f64> = [-1.5f32, -0.1, 0.0, 0.1, 0.3, 1.0e-3, 2.0]
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        e.sort_by(f64::total_cmp);
        let edges = Edges::new(&e).unwrap();
        let mut vals32: Vec<f32> = Vec::new();
        for &x in &e {
            let x = x as f32;
            vals32.extend([x, -x, next_up32(x), next_down32(x)]);
        }
        vals32.extend([f32::NAN, f32::INFINITY, -0.0, 1e-45]);
        let big: Vec<f32> = (0..3000).map(|i| vals32[i % vals32.len()]).collect();
        let up: Vec<f64> = big.iter().map(|&x| f64::from(x)).collect();
        assert_eq!(counts(Values::F32(&big), &edges), reference(&up, &e));
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
        // inf - inf is NaN too, but min and max stay what they are.
        let h = histogram(
            Values::F64(&[f64::INFINITY, 1.0, f64::NEG_INFINITY]),
            None,
            None,
        )
        .unwrap();
        assert!(h.sum.is_nan());
        assert_eq!((h.min, h.max), (f64::NEG_INFINITY, f64::INFINITY));
    }
}
