//! The binning loops: keys, sums, min and max in one pass, table lookups and counts in a
//! second, over chunks that stay in L1 (AVX2 where the CPU has it).

use super::*;

/// A width whose pass one also exists in AVX2 instructions (`avx2`), kept apart from
/// [`Float`] so the binning tables do not depend on the kernels.
pub(super) trait Kernel: Float {
    /// [`pass_one`] in AVX2 instructions: the same arithmetic in the same lanes, so the
    /// same results to the bit.
    ///
    /// # Safety
    /// Only on a CPU with AVX2; `keys` as long as `x`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn pass_one_avx2(x: &[Self], keys: &mut [Self::Key], m: &mut Lanes<Self>);
}

impl Kernel for f32 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pass_one_avx2(x: &[f32], keys: &mut [u32], m: &mut Lanes<f32>) {
        avx2::pass_one_f32(x, keys, m)
    }
}

impl Kernel for f64 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pass_one_avx2(x: &[f64], keys: &mut [u64], m: &mut Lanes<f64>) {
        avx2::pass_one_f64(x, keys, m)
    }
}

/// Sums, squares, min and max of some values, in [`LANES`] independent lanes. Min and max
/// stay in the values' own width (twice as many per SIMD register for float32).
#[derive(Clone, Copy)]
pub(super) struct Lanes<F> {
    pub(super) s: [f64; LANES],
    pub(super) q: [f64; LANES],
    pub(super) lo: [F; LANES],
    pub(super) hi: [F; LANES],
}

impl<F: Float> Lanes<F> {
    pub(super) fn new() -> Lanes<F> {
        Lanes {
            s: [0.0; LANES],
            q: [0.0; LANES],
            lo: [F::INFINITY; LANES],
            hi: [F::NEG_INFINITY; LANES],
        }
    }

    /// Lane `l` takes value `v` (NaN leaves min and max alone; it is found afterwards).
    #[inline(always)]
    pub(super) fn add(&mut self, l: usize, v: F) {
        let x: f64 = v.into();
        self.s[l] += x;
        self.q[l] += x * x;
        // `<` is false for NaN: these are exactly the SIMD min/max instructions.
        self.lo[l] = if v < self.lo[l] { v } else { self.lo[l] };
        self.hi[l] = if v > self.hi[l] { v } else { self.hi[l] };
    }

    /// Sum and sum of squares, lanes added in a fixed tree.
    pub(super) fn sums(&self) -> (f64, f64) {
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

    pub(super) fn min_max(&self) -> (f64, f64) {
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
pub(super) struct Part {
    /// Values per position: `slots[r]` = values with exactly `r` thresholds at or below
    /// them. Slot 0 is below the first edge (or a negative NaN), slot `n` at or above the
    /// last edge (or a positive NaN).
    pub(super) slots: Vec<u64>,
    /// Values equal to the last edge, which numpy counts in the last bucket.
    pub(super) at_last: u64,
    /// (piece, (sum, sum of squares)) per piece binned.
    pub(super) sums: Vec<(usize, (f64, f64))>,
    pub(super) lo: f64,
    pub(super) hi: f64,
}

/// Pass one over a chunk: keys, and the lanes' sums, min and max. Written lane by lane so
/// the compiler vectorises it; the lanes are copied into locals so they live in registers.
#[inline(always)]
pub(super) fn pass_one<F: Float>(x: &[F], keys: &mut [F::Key], m: &mut Lanes<F>) {
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
pub(super) fn pass_two<F: Float>(
    keys: &[F::Key],
    how: Lookup<'_, F>,
    counts: &mut [u32],
    stride: usize,
) {
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
pub(super) fn part_body<F: Kernel, const AVX2: bool>(
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

pub(super) fn flush(counts: &mut [u32], slots: &mut [u64]) {
    for c in counts.chunks_exact_mut(slots.len()) {
        for (s, x) in slots.iter_mut().zip(c.iter_mut()) {
            *s += u64::from(std::mem::take(x));
        }
    }
}

/// [`part_body`] compiled for AVX2 (and BMI2's shifts), chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2")]
pub(super) unsafe fn part_avx2<F: Kernel>(
    vals: &[F],
    how: Lookup<'_, F>,
    edges: &[f64],
    claim: &dyn Fn() -> Option<usize>,
) -> Part {
    part_body::<F, true>(vals, how, edges, claim)
}

pub(super) fn part<F: Kernel>(
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
pub(super) fn one_part<F: Kernel>(vals: &[F], how: Lookup<'_, F>, edges: &[f64]) -> Part {
    let next = AtomicUsize::new(0);
    let pieces = vals.len().div_ceil(PIECE);
    part(vals, how, edges, &|| claim(&next, pieces))
}

pub(super) fn claim(next: &AtomicUsize, pieces: usize) -> Option<usize> {
    let i = next.fetch_add(1, Ordering::Relaxed);
    (i < pieces).then_some(i)
}

/// Pass one in AVX2 intrinsics: the compiler does not vectorise the float32-to-float64 sums
/// on its own. Lane `l` of [`Lanes`] is element `l` of the register pair, as in `pass_one`.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
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
    pub(in crate::histogram) unsafe fn pass_one_f32(
        x: &[f32],
        keys: &mut [u32],
        m: &mut Lanes<f32>,
    ) {
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
    pub(in crate::histogram) unsafe fn pass_one_f64(
        x: &[f64],
        keys: &mut [u64],
        m: &mut Lanes<f64>,
    ) {
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
