//! Large files cut into segments at record boundaries and parsed by several threads
//! (`Reader::load` → `split_points` + `read_file(.., Until::Cut(cut), ..)`).
//!
//! Splitting must be invisible: the rows, their order and the health report must be exactly what
//! one sequential read gives, on clean files and on damaged ones. Splitting only happens above
//! `TBSCOPE_SPLIT_BYTES` (64 MiB by default) and with more than one thread, so this test binary
//! sets that variable to a few hundred bytes for all its tests (it is process-wide, which is why
//! these tests live in their own binary) and compares `threads: 3` against `threads: 1` (which
//! never splits).

mod common;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Once;

use common::oracle::*;
use common::*;
use tbscope_core::data_compat::Kind;
use tbscope_core::event_file::{read_file, split_points, Cursor, Options, Severity, Until};
use tbscope_core::load::{Reader, ReaderOptions};

static SPLIT: Once = Once::new();

/// Options that split every file above 256 bytes into pieces of at least 64 bytes.
fn split_opts(provenance: bool, verify: bool) -> ReaderOptions {
    SPLIT.call_once(|| std::env::set_var("TBSCOPE_SPLIT_BYTES", "256"));
    let mut o = opts(provenance, verify);
    o.threads = 3;
    o
}

/// Clean files: same rows in the same order, same (empty) report, split or not.
#[test]
fn split_reads_equal_sequential_reads() {
    let seq = opts(true, true);
    let par = split_opts(true, true);
    let mut files: Vec<(String, Vec<u8>)> = (0..4)
        .map(|s| {
            let (b, _) = synth_file(&mut Rng::new(300 + s), 50 + 100 * s as usize);
            (format!("generated-{s}"), b)
        })
        .collect();
    for s in wild(&seq) {
        files.push((s.name, s.bytes));
    }
    for (name, bytes) in files {
        let dir = TempDir::new("split-eq");
        let path = dir.write(FILE, &bytes);
        let (a, rows_a, rep_a) = load_once(&path, seq.clone());
        let (b, rows_b, rep_b) = load_once(&path, par.clone());
        assert_eq!(rows_a, rows_b, "{name}: scalar rows");
        assert_eq!(
            rows_by_record(&a),
            rows_by_record(&b),
            "{name}: rows per record"
        );
        assert_eq!(rep_a, rep_b, "{name}: report");
        assert_eq!(a.series(), b.series(), "{name}: series");
    }
}

/// The mutation oracle of `mutation.rs`, with splitting on.
#[test]
fn split_mutants() {
    let o = split_opts(true, true);
    let seq = opts(true, true);
    let srcs: Vec<Source> = (0..5)
        .map(|s| generated(7000 + s, 40 + 60 * s as usize, &seq))
        .collect();
    run(&srcs, 70_000, BUDGET / 4, &o);
    let small = [generated(71, 12, &seq), generated(72, 6, &seq)];
    let pair = [&small[0], &small[1]];
    for seed in 0..300 {
        let mut rng = Rng::new(80_000 + seed);
        let m = mutate(&mut rng, &pair);
        check(&m, &pair, &o);
    }
}

/// A segment whose last record has a bad data CRC. Read alone, the resync scan runs into the
/// segment's end and the last 11 bytes are left as a "tail", exactly as at the end of a file;
/// but a segment end is a known record boundary, not a writer still writing, so the whole
/// record should be one Corrupt entry and there should be no Truncated entry.
///
/// FAILS at the time of writing (`read_file` treats `end` like EOF): Corrupt `[r, c - 11)` plus
/// Truncated `[c - 11, c)`. Through `Reader::load` the Truncated entry is then deleted by the
/// next segment's merge (`report.retain(..Truncated..)` for the same file), so the report is
/// left 11 bytes short: `split_damaged_record_before_a_cut_is_reported_whole` shows that.
#[test]
fn segment_ending_in_a_damaged_record() {
    let (mut bytes, exp) = synth_file(&mut Rng::new(5), 10);
    let r = &exp[4];
    bytes[r.offset + r.span / 2] ^= 0x20;
    let dir = TempDir::new("split-seg");
    let path = dir.write(FILE, &bytes);
    let o = Options::default();
    let cut = (r.offset + r.span) as u64;
    let seg = read_file(
        &path,
        Cursor::default(),
        Until::Cut(cut),
        &o,
        &HashMap::new(),
        &AtomicBool::new(false),
    );
    let got: Vec<_> = seg
        .problems
        .iter()
        .map(|p| (p.severity, p.offset, p.length))
        .collect();
    assert_eq!(
        got,
        vec![(Severity::Corrupt, r.offset as u64, r.span as u64)]
    );
    assert_eq!(seg.end.offset, cut);
}

/// The same through `Reader::load`: damage a record at every position of a file in turn, so
/// that some damaged record ends exactly at one of the cuts `split_points` chooses, and compare
/// the report with a sequential read.
#[test]
fn split_damaged_record_before_a_cut_is_reported_whole() {
    let (bytes, exp) = synth_file(&mut Rng::new(6), 40);
    let dir = TempDir::new("split-cut");
    let path = dir.write(FILE, &bytes);
    // Where the reader will cut this file (same arithmetic as `split_large`, 3 threads).
    let split_above = 256u64;
    let piece = (bytes.len() as u64 / 12).max(split_above / 4).max(1);
    let cuts = split_points(&path, 0, piece, Options::default().max_len);
    assert!(!cuts.is_empty());
    let mut hit = 0;
    for e in &exp {
        if !cuts.contains(&((e.offset + e.span) as u64)) {
            continue;
        }
        hit += 1;
        let mut b = bytes.clone();
        b[e.offset + e.span / 2] ^= 0x20;
        std::fs::write(&path, &b).unwrap();
        let (_, rows_seq, rep_seq) = load_once(&path, opts(true, true));
        let (_, rows_par, rep_par) = load_once(&path, split_opts(true, true));
        assert_eq!(rows_par, rows_seq, "record at {}", e.offset);
        let ranges = |r: &[tbscope_core::load::ReportEntry]| {
            r.iter()
                .map(|e| (e.severity, e.offset, e.length))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ranges(&rep_par),
            ranges(&rep_seq),
            "damaged record at {} ends at a cut",
            e.offset
        );
    }
    assert!(hit > 0, "no record ends at a cut: {cuts:?}");
}

/// A damaged record whose (intact) header claims a span that now holds other data: a few whole
/// records and then a torn record whose header runs past the end of the file, e.g. after a
/// splice. Read sequentially, the damaged record is skipped by resync, the inner records are
/// read, and the torn header makes everything from it to the end an unfinished tail. Split
/// reading hops over the damaged record by its claimed length and cuts the file right there,
/// so the segment after the cut is read on its own: it returns records the sequential read
/// does not, and the tail entry of the segment before is dropped, so the bytes from the torn
/// header to the cut are reported nowhere. Splitting must not change results.
///
/// FAILS at the time of writing. Suggested fix (also for the 11-byte gap of
/// `segment_ending_in_a_damaged_record`): treat segments as speculative. Segment k's result is
/// valid only if its scan ended exactly at its cut, in the clean state (last thing parsed a
/// record ending at the cut, no corruption or tail pending); by induction the sequential reader
/// then passes every cut in the same state. If a segment does not end cleanly, discard the
/// segments after it and read sequentially from its start (or from where it went wrong) to
/// the end. Also, `split_points` pushes a cut before checking the header at the cut; checking
/// first avoids most fallbacks.
#[test]
fn split_and_sequential_agree_when_a_damaged_record_hides_a_torn_one() {
    let mut b = record(&file_version_event(1.7e9));
    let r_at = b.len();
    // The inner content: 3 whole records, then a torn header claiming 10 000 bytes.
    let mut inner = Vec::new();
    for i in 0..3 {
        inner.extend_from_slice(&record(&scalar_event(1.7e9, i, &[("inner", i as f32)])));
    }
    let torn_in_inner = inner.len();
    let big = record(&scalar_event(1.7e9, 9, &[(&"z".repeat(10_000), 0.0)]));
    inner.extend_from_slice(&big[..40]);
    inner.resize(3000, 0);
    // The damaged record R: a valid header for a 2996-byte payload, so it claims exactly `inner`.
    let len = ((inner.len() - 16) as u64).to_le_bytes();
    b.extend_from_slice(&len);
    b.extend_from_slice(&tbscope_core::masked_crc::masked_crc32c(&len).to_le_bytes());
    b.extend_from_slice(&inner[..inner.len() - 12]);
    let cut = b.len();
    assert_eq!(cut, r_at + inner.len());
    // After R: 20 whole records.
    for i in 0..20 {
        b.extend_from_slice(&record(&scalar_event(
            1.8e9,
            100 + i,
            &[("after", i as f32)],
        )));
    }
    assert!(
        b.len() < r_at + 12 + torn_in_inner + big.len(),
        "the torn record must run past EOF"
    );
    let dir = TempDir::new("split-torn");
    let path = dir.write(FILE, &b);
    let piece = (b.len() as u64 / 12).max(64);
    assert!(
        split_points(&path, 0, piece, Options::default().max_len).contains(&(cut as u64)),
        "the file is cut after R"
    );
    let (_, rows_seq, rep_seq) = load_once(&path, opts(true, true));
    let (_, rows_par, rep_par) = load_once(&path, split_opts(true, true));
    let ranges = |r: &[tbscope_core::load::ReportEntry]| {
        r.iter()
            .map(|e| (e.severity, e.offset, e.length))
            .collect::<Vec<_>>()
    };
    assert_eq!(ranges(&rep_par), ranges(&rep_seq));
    assert_eq!(row_keys(&rows_par), row_keys(&rows_seq));
}

/// A growing file read with splitting: each load splits from the saved cursor. The union of rows
/// across loads is every record once, in order.
#[test]
fn split_growing_file() {
    for seed in 0..4 {
        let mut rng = Rng::new(400 + seed);
        let (bytes, exp) = synth_file(&mut rng, 150);
        let dir = TempDir::new("split-grow");
        let path = dir.path().join("run/events.out.tfevents.1.h");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"").unwrap();
        let mut reader = Reader::new(dir.path(), split_opts(true, true)).unwrap();
        let mut written = 0;
        while written < bytes.len() {
            written = (written + rng.range(1, 3000)).min(bytes.len());
            std::fs::write(&path, &bytes[..written]).unwrap();
            reader.load(&AtomicBool::new(false)).unwrap();
            let rows = scalar_rows(&reader.table(tbscope_core::Kind::Scalars).unwrap());
            let whole: Vec<Expected> = exp
                .iter()
                .filter(|e| e.offset + e.span <= written)
                .cloned()
                .collect();
            assert_eq!(
                row_keys(&rows),
                expected_rows(&whole),
                "seed {seed} at {written} bytes"
            );
            assert!(
                reader
                    .report()
                    .iter()
                    .all(|e| e.severity == Severity::Truncated),
                "{:?}",
                reader.report()
            );
        }
        assert!(reader.report().is_empty(), "{:?}", reader.report());
    }
}

/// Every kind's table, batch for batch, after one load.
fn all_tables(
    dir: &std::path::Path,
    o: ReaderOptions,
) -> Vec<(Kind, Vec<arrow_array::RecordBatch>)> {
    let mut r = Reader::new(dir, o).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    Kind::ALL
        .into_iter()
        .map(|k| (k, r.table(k).unwrap()))
        .collect()
}

/// Workers in pairs write scalar rows into shared columns, the first of a pair downwards
/// from its segments' last to first. Two logdirs of several runs: one with files of every
/// kind (wild files, when present), one with a file whose rows are far smaller than the 40
/// bytes the shared columns are sized for (twenty one-letter values per record, so the pair
/// falls back to copying). Each must give the very same tables on 2, 3 and 4 threads as on
/// one, with and without provenance.
#[test]
fn paired_workers_give_the_tables_of_one() {
    SPLIT.call_once(|| std::env::set_var("TBSCOPE_SPLIT_BYTES", "256"));
    for dense in [false, true] {
        paired_case(dense);
    }
}

fn paired_case(with_dense: bool) {
    let dir = TempDir::new("pairs");
    for s in 0..3u64 {
        let (b, _) = synth_file(&mut Rng::new(900 + s), 80 + 40 * s as usize);
        dir.write(&format!("run{s}/events.out.tfevents.{s}.gen"), &b);
    }
    let names: Vec<String> = (b'a'..=b't').map(|c| (c as char).to_string()).collect();
    let mut dense = record(&file_version_event(1.0));
    for step in 0..400i64 {
        let values: Vec<(&str, f32)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), step as f32 + i as f32 / 32.0))
            .collect();
        dense.extend(record(&scalar_event(2.0 + step as f64, step, &values)));
    }
    if with_dense {
        dir.write("dense/events.out.tfevents.9.dense", &dense);
    }
    // Wild files (of every kind) only without the dense file: their bytes would give the
    // shared columns room enough for it.
    if !with_dense {
        for (i, s) in wild(&opts(true, true)).into_iter().enumerate() {
            dir.write(&format!("wild{i}/{}", FILE), &s.bytes);
        }
    }
    for provenance in [false, true] {
        let one = all_tables(dir.path(), opts(provenance, true));
        let scalars = one.iter().find(|(k, _)| *k == Kind::Scalars).unwrap();
        let dense_rows: usize = scalars.1.iter().map(|b| b.num_rows()).sum();
        assert!(
            dense_rows >= if with_dense { 8000 } else { 100 },
            "{dense_rows} scalar rows"
        );
        for threads in [2, 3, 4] {
            let mut o = opts(provenance, true);
            o.threads = threads;
            let many = all_tables(dir.path(), o);
            for ((k, a), (_, b)) in one.iter().zip(&many) {
                let cat = |bs: &[arrow_array::RecordBatch]| {
                    bs.first()
                        .map(|f| arrow_select::concat::concat_batches(&f.schema(), bs).unwrap())
                };
                assert_eq!(
                    cat(a),
                    cat(b),
                    "{k:?}, {threads} threads, provenance {provenance}, dense {with_dense}"
                );
            }
        }
    }
}

/// A load's worker pools when the system refuses threads (the child below runs in a process
/// where every new thread fails: no address space holds the stack `RUST_MIN_STACK` asks for,
/// and libtest then runs the test on its main thread). Discovery's pool falls back to the
/// caller's thread, so a one-file logdir (whose read needs no pool) loads on two threads; the
/// read's pool is an error that says why, leaving the reader as it was; one thread needs no
/// pool at all.
#[cfg(target_os = "linux")]
#[test]
fn pools_the_system_refuses() {
    let stack = (1u64 << 47).to_string();
    run_child_test(
        "pools_the_system_refuses_child",
        &[("RUST_MIN_STACK", stack.as_ref())],
    );
}

#[test]
#[ignore = "run by pools_the_system_refuses, in a process that cannot start threads"]
fn pools_the_system_refuses_child() {
    assert!(
        std::thread::Builder::new().spawn(|| ()).is_err(),
        "threads still start: the test would prove nothing"
    );
    let dir = TempDir::new("no-threads");
    for (run, step) in [("one/a", 1), ("two/a", 1), ("two/b", 2)] {
        let mut b = record(&file_version_event(1.0));
        b.extend(record(&scalar_event(2.0, step, &[("x", 0.5)])));
        dir.write(&format!("{run}/events.out.tfevents.1.x"), &b);
    }
    let load = |logdir: &str, threads: usize| {
        let mut o = opts(false, true);
        o.threads = threads;
        let mut r = Reader::new(&dir.path().join(logdir), o).unwrap();
        let loaded = r.load(&AtomicBool::new(false)).map(|s| s.rows);
        (r, loaded)
    };
    assert_eq!(load("one", 2).1.unwrap(), 1);
    let (r, refused) = load("two", 2);
    let why = refused.unwrap_err().to_string();
    assert!(why.contains("cannot start worker threads"), "{why}");
    assert!(r
        .table(Kind::Scalars)
        .unwrap()
        .iter()
        .all(|b| b.num_rows() == 0));
    assert_eq!(load("two", 1).1.unwrap(), 2);
}
