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

mod binning;
mod helper;
mod kernels;
mod make;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use binning::*;
pub use binning::{default_edges, key, Edges};
use helper::*;
use kernels::*;
pub use make::histogram;

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

fn tally<F: Kernel>(vals: &[F], edges: &Edges) -> Tally {
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

    fn check_width<F: Kernel>(vals: &[F], e: &[f64]) {
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
        assert_eq!(h.bucket.iter().sum::<f64>(), inside as f64);
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
}
