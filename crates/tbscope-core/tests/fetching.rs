//! A file filled in out of order, as a remote mirror's concurrent ranged reads fill it: loads
//! told how many of its first bytes are there (`Reader::set_fetching`) read exactly the records
//! complete within them, never the bytes past them (holes, or bytes written early), and the
//! load after the last byte leaves the rows, the report and the file state of one whole read.
//!
//! Large files are cut for several threads only above `TBSCOPE_SPLIT_BYTES`: this binary sets
//! it to 256 bytes so the cuts are exercised too (with three threads).

mod common;

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Once;

use common::*;
use tbscope_core::event_file::Severity;
use tbscope_core::load::Reader;
use tbscope_core::Kind;

static SPLIT: Once = Once::new();

fn split_small_files() {
    SPLIT.call_once(|| std::env::set_var("TBSCOPE_SPLIT_BYTES", "256"));
}

fn rows_of(r: &Reader) -> Vec<(String, i64, f64, i64)> {
    row_keys(&scalar_rows(&r.table(Kind::Scalars).unwrap()))
}

/// Rows of the records complete within the first `n` bytes.
fn complete_within(exp: &[Expected], n: usize) -> Vec<(String, i64, f64, i64)> {
    let whole: Vec<Expected> = exp
        .iter()
        .filter(|e| e.offset + e.span <= n)
        .cloned()
        .collect();
    expected_rows(&whole)
}

fn no_damage(r: &Reader) {
    let bad: Vec<_> = r
        .report()
        .iter()
        .filter(|e| matches!(e.severity, Severity::Error | Severity::Warning))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// Fills `bytes` into `path` in pieces of `piece` bytes taken in a shuffled order, loading
/// after each with the contiguous prefix as what is there.
fn fill_out_of_order(seed: u64, threads: usize, piece: usize) {
    split_small_files();
    let mut rng = Rng::new(seed);
    let (bytes, exp) = synth_file(&mut rng, 400);
    let dir = TempDir::new("fetching");
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let path = run.join("events.out.tfevents.1700000000.host");
    let file = std::fs::File::create(&path).unwrap();
    let mut o = opts(true, true);
    o.threads = threads;
    let mut r = Reader::new(dir.path(), o.clone()).unwrap();
    let cancel = AtomicBool::new(false);

    let pieces: Vec<usize> = (0..bytes.len()).step_by(piece).collect();
    let mut order = pieces.clone();
    // Out of order, but not wildly: a piece lands at most a few places from its turn, as
    // ranged reads in flight together do.
    for i in 0..order.len() {
        let j = (i + rng.below(4) as usize).min(order.len() - 1);
        order.swap(i, j);
    }
    let mut filled = vec![false; pieces.len()];
    let mut prefix = 0usize;
    for start in order {
        let end = (start + piece).min(bytes.len());
        file.write_all_at(&bytes[start..end], start as u64).unwrap();
        filled[start / piece] = true;
        while prefix < bytes.len() && filled[prefix / piece] {
            prefix = (prefix / piece + 1) * piece;
        }
        let prefix = prefix.min(bytes.len());
        r.set_fetching(HashMap::from([(path.clone(), prefix as u64)]));
        r.load(&cancel).unwrap();
        assert_eq!(
            rows_of(&r),
            complete_within(&exp, prefix),
            "after filling {start}..{end}, {prefix} bytes there"
        );
        no_damage(&r);
    }
    // Whole: the load that follows reads as any load does, and leaves one read's outcome.
    r.set_fetching(HashMap::new());
    r.load(&cancel).unwrap();
    let (whole, whole_rows, whole_report) = load_once(dir.path(), o);
    assert_eq!(rows_of(&r), row_keys(&whole_rows));
    assert_eq!(rows_of(&r), expected_rows(&exp));
    assert_eq!(r.report(), &whole_report[..]);
    assert_eq!(r.runs_table(), whole.runs_table());
}

#[test]
fn out_of_order_pieces_one_thread() {
    for seed in 0..4 {
        fill_out_of_order(seed, 1, 509);
    }
}

#[test]
fn out_of_order_pieces_cut_for_threads() {
    for seed in 10..14 {
        fill_out_of_order(seed, 3, 1021);
    }
}

/// Bytes past the point given are never read, even when they are there and whole records:
/// neither by the parse nor by the cuts that share a file among threads.
fn nothing_past_the_point(threads: usize) {
    split_small_files();
    let mut rng = Rng::new(99);
    let (bytes, exp) = synth_file(&mut rng, 300);
    let dir = TempDir::new("fetching-point");
    let path = dir.path().join("events.out.tfevents.1700000000.host");
    std::fs::write(&path, &bytes).unwrap();
    let mut o = opts(true, true);
    o.threads = threads;
    let cancel = AtomicBool::new(false);
    for cut in [
        0,
        1,
        40,
        bytes.len() / 3,
        bytes.len() / 2 + 7,
        bytes.len() - 1,
    ] {
        let mut r = Reader::new(dir.path(), o.clone()).unwrap();
        r.set_fetching(HashMap::from([(path.clone(), cut as u64)]));
        r.load(&cancel).unwrap();
        assert_eq!(rows_of(&r), complete_within(&exp, cut), "{cut} bytes there");
        no_damage(&r);
    }
}

#[test]
fn nothing_past_the_point_one_thread() {
    nothing_past_the_point(1);
}

#[test]
fn nothing_past_the_point_cut_for_threads() {
    nothing_past_the_point(3);
}

/// A file that is not being fetched is read as always beside one that is.
#[test]
fn other_files_read_whole() {
    let mut rng = Rng::new(5);
    let (a, exp_a) = synth_file(&mut rng, 50);
    let (b, exp_b) = synth_file(&mut rng, 50);
    let dir = TempDir::new("fetching-other");
    let pa = dir.path().join("a");
    let pb = dir.path().join("b");
    for (p, bytes) in [(&pa, &a), (&pb, &b)] {
        std::fs::create_dir(p).unwrap();
        std::fs::write(p.join("events.out.tfevents.1700000000.host"), bytes).unwrap();
    }
    let mut r = Reader::new(dir.path(), opts(true, true)).unwrap();
    let half = b.len() / 2;
    r.set_fetching(HashMap::from([(
        pb.join("events.out.tfevents.1700000000.host"),
        half as u64,
    )]));
    r.load(&AtomicBool::new(false)).unwrap();
    let mut want = expected_rows(&exp_a);
    want.extend(complete_within(&exp_b, half));
    assert_eq!(rows_of(&r), want);
    assert!(Path::new(&pa).exists());
}
