//! Seeded mutation testing over real event files (shared/data/wild) and generated ones.
//!
//! Each case damages a file (bit flips, byte overwrites, truncation, deleted ranges, ranges
//! spliced in from another file, two files' pieces concatenated) and reads it with provenance.
//! The oracle does not trust the reader:
//! - The ORIGINAL files are framed with `common::reference_frames`, a byte-at-a-time loop.
//! - Every mutation keeps a list of segments "bytes [a, b) of the mutated file are bytes
//!   [s, s + b - a) of source file k". An original record whose whole byte range lies in one
//!   segment, and whose bytes are unchanged (bit flips and overwrites are checked byte by byte),
//!   is INTACT, at a known new offset.
//! - The mutated file is framed with the same reference loop, which spells out the reader's
//!   contract (records where both CRCs hold; a header that runs past EOF is an unfinished tail;
//!   everything else is skipped corruption). Sanity check of the oracle itself: every intact
//!   record is found by it, except inside an unfinished tail (the documented limitation that
//!   `records::torn_record_followed_by_whole_records` pins down).
//!
//! With verify=true the reader must then: return each intact record's rows (same number as in
//! the original, same (tag, step, value) for scalars); return rows only at offsets where the
//! reference found a valid record (nothing from bytes that fail a CRC); report Corrupt entries
//! that tile exactly the reference's gaps and a Truncated entry that is exactly its tail. With
//! verify=false (damaged payloads that still decode are accepted by design) it must not panic,
//! must terminate, must recover the untouched prefix, and may only return rows at positions
//! where a record header with a valid length CRC starts.
//!
//! The machinery lives in `common/oracle.rs` (shared with `split.rs`, which runs the same
//! oracle with intra-file splitting on). Runtime is bounded (debug builds run `cargo test`): cases are spread over the files in
//! proportion to a byte budget, and every read must finish within a few seconds.

mod common;

use common::oracle::*;
use common::*;

#[test]
fn mutated_wild_files() {
    let o = opts(true, true);
    let srcs = wild(&o);
    run(&srcs, 1, BUDGET, &o);
}

#[test]
fn mutated_generated_files() {
    let o = opts(true, true);
    let srcs: Vec<Source> = (0..6)
        .map(|s| generated(1000 + s, 30 + 40 * s as usize, &o))
        .collect();
    run(&srcs, 5000, BUDGET / 2, &o);
}

/// The same oracle for files read as final (a zero tail timeout): every intact record is read,
/// also after a torn record (see `common::reference_frames_final`).
#[test]
fn mutated_generated_files_final() {
    let mut o = opts(true, true);
    o.tail_timeout = std::time::Duration::ZERO;
    let srcs: Vec<Source> = (0..6)
        .map(|s| generated(1000 + s, 30 + 40 * s as usize, &o))
        .collect();
    run(&srcs, 7000, BUDGET / 2, &o);
    let pair = [&srcs[0], &srcs[1]];
    for seed in 0..600 {
        let mut rng = Rng::new(95_000 + seed);
        let m = mutate(&mut rng, &pair);
        check(&m, &pair, &o);
    }
}

#[test]
fn mutated_wild_files_final() {
    let mut o = opts(true, true);
    o.tail_timeout = std::time::Duration::ZERO;
    let srcs = wild(&o);
    run(&srcs, 11, BUDGET / 2, &o);
}

/// Many small mutations of one small generated file: dense coverage of the framing edge cases
/// (damage on header bytes, CRC bytes, at the first/last record) at negligible cost.
#[test]
fn mutated_small_file_dense() {
    let o = opts(true, true);
    let srcs = [generated(77, 8, &o), generated(78, 5, &o)];
    let pair = [&srcs[0], &srcs[1]];
    for seed in 0..600 {
        let mut rng = Rng::new(90_000 + seed);
        let m = mutate(&mut rng, &pair);
        check(&m, &pair, &o);
        if seed % 3 == 0 {
            check(&m, &pair, &unverified(&o));
        }
    }
}
