//! Edges, thresholds and the lookup tables that place a value: a float's bits as a key that
//! sorts like the float, and per width (float32, float64) the tables that turn a key into
//! numpy's bucket position.

use super::*;

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
pub(super) fn key32(b: u32) -> u32 {
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

/// A float width that values are binned in: float32 or float64.
pub(super) trait Float: Copy + PartialOrd + Into<f64> + Send + Sync + 'static {
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
    #[cfg(test)]
    fn values(v: &[Self]) -> Values<'_>;
}

/// Next float32 up (`f32::next_up` needs a newer Rust than this crate's minimum). Only for
/// finite, non-NaN `x` below +inf.
pub(super) fn next_up32(x: f32) -> f32 {
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
    #[cfg(test)]
    fn values(v: &[f64]) -> Values<'_> {
        Values::F64(v)
    }
}

/// The thresholds of all edges in one width, and the lookup table over them (built when a
/// large input first needs it).
pub(super) struct Width<F: Float> {
    pub(super) thresholds: Vec<F::Key>,
    pub(super) table: OnceLock<Table<F>>,
}

pub(super) struct Table<F: Float> {
    pub(super) shift: u32,
    /// Per cell (plus one at the end): thresholds in lower cells.
    pub(super) below: Vec<u32>,
    /// When no cell holds more than one threshold: the entries ([`Float::entry`]).
    pub(super) one: Option<Vec<F::Entry>>,
}

impl<F: Float> Width<F> {
    pub(super) fn new(edges: &[f64]) -> Width<F> {
        Width {
            thresholds: edges.iter().map(|&e| F::threshold(e)).collect(),
            table: OnceLock::new(),
        }
    }

    /// Most thresholds sharing one cell at this shift (equal thresholds count apiece: the
    /// one-comparison lookup can only add one).
    pub(super) fn crowding(&self, shift: u32) -> usize {
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

    pub(super) fn table(&self) -> &Table<F> {
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
    pub(super) edges: Vec<f64>,
    pub(super) w32: OnceLock<Width<f32>>,
    pub(super) w64: OnceLock<Width<f64>>,
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
pub(super) enum Lookup<'a, F: Float> {
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
    pub(super) fn rank(&self, k: F::Key) -> usize {
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
