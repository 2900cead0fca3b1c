//! A record that runs past the end of its file, told apart by what can still change (issue 10
//! item 1): while the file may still be written (the newest of its run, grown within
//! `tail_timeout`) it is a pending tail that yields nothing; once the file is final (a newer
//! file in the run, or the timeout passed) it is a torn record: corruption when whole records
//! follow it (they are read, exactly once), a stopped tail (a warning) when none does.
//!
//! Two stories, each through reloads and through a cache reopened from disk:
//! - silent loss: a torn record with whole records after it, and another fault further on.
//!   Before, the fault broke the "whole records chain to the end" test, so everything after
//!   the torn record was kept as a tail forever, with nothing reported as lost;
//! - phantom rows: the record still being written embeds event records (an event file logged
//!   as a string tensor). Before, its partial payload chained cleanly, so the embedded records
//!   came back as rows of their own and the real record was later lost as "bad data crc".

mod common;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::*;
use tbscope_core::event_file::Severity;
use tbscope_core::load::{ReaderOptions, ReportEntry};
use tbscope_core::{CachedReader, Kind, Reader, Scan};

const F: &str = "events.out.tfevents.1700000000.host.1.0.v2";
/// A file started later than any test file last grew: it makes the others final.
const NEWER: &str = "events.out.tfevents.4000000000.host.2.0.v2";

// Helpers take either reader: the cached stories run through `CachedReader`, the others
// through `Reader`.
fn scalars(r: &mut dyn Scan) -> Vec<(String, i64, f64)> {
    scalar_rows(&r.table(Kind::Scalars).unwrap())
        .into_iter()
        .map(|x| (x.tag, x.step, x.value))
        .collect()
}

fn rows(r: &mut dyn Scan, kind: Kind) -> usize {
    r.table(kind).unwrap().iter().map(|b| b.num_rows()).sum()
}

fn report(r: &mut dyn Scan) -> Vec<(Severity, u64, u64)> {
    r.report()
        .unwrap()
        .iter()
        .filter(|e| e.file.ends_with(F))
        .map(|e| (e.severity, e.offset, e.length))
        .collect()
}

fn reasons(r: &mut dyn Scan) -> Vec<ReportEntry> {
    r.report().unwrap()
}

fn load(r: &mut dyn Scan) {
    r.load(&AtomicBool::new(false)).unwrap();
}

fn steps(n: std::ops::Range<i64>, tag: &str) -> Vec<u8> {
    let mut b = Vec::new();
    for s in n {
        b.extend(record(&scalar_event(
            1000.0 + s as f64,
            s,
            &[(tag, s as f32)],
        )));
    }
    b
}

/// The silent-loss file: 5 records, a torn record (a big record cut after 60 bytes), 40
/// records, one with a bad data CRC, 20 more. Returns the bytes, the torn range, the bad
/// record's range.
fn torn_file() -> (Vec<u8>, (u64, u64), (u64, u64)) {
    let mut b = record(&file_version_event(999.0));
    b.extend(steps(0..5, "loss"));
    let torn_at = b.len();
    let big = record(&scalar_event(1005.0, 5, &[(&"t".repeat(50_000), 5.0)]));
    b.extend_from_slice(&big[..60]);
    let after = b.len();
    b.extend(steps(6..46, "loss"));
    let bad_at = b.len();
    let mut bad = record(&scalar_event(1046.0, 46, &[("loss", 46.0)]));
    let n = bad.len();
    bad[n - 6] ^= 0x10; // inside the payload: bad data crc
    b.extend(&bad);
    b.extend(steps(47..67, "loss"));
    (
        b,
        (torn_at as u64, (after - torn_at) as u64),
        (bad_at as u64, n as u64),
    )
}

/// Steps the silent-loss file's scalars should end with.
fn all_but(missing: &[i64]) -> Vec<i64> {
    (0..67).filter(|s| !missing.contains(s)).collect()
}

fn step_list(r: &mut dyn Scan) -> Vec<i64> {
    scalars(r).into_iter().map(|x| x.1).collect()
}

/// The torn file once final: every step but the torn record's (5) and the bad one's (46), and
/// both reported as corruption.
fn assert_read_as_final(r: &mut dyn Scan, torn: (u64, u64), bad: (u64, u64), what: &str) {
    assert_eq!(step_list(r), all_but(&[5, 46]), "{what}");
    assert_eq!(
        report(r),
        vec![
            (Severity::Corrupt, torn.0, torn.1),
            (Severity::Corrupt, bad.0, bad.1)
        ],
        "{what}"
    );
}

fn logdir(name: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(name);
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    (dir, run)
}

fn opts_with(timeout: Duration) -> ReaderOptions {
    let mut o = opts(false, true);
    o.tail_timeout = timeout;
    o
}

/// Silent loss, reloads: pending while the file is the newest of its run, then, once a newer
/// file appears (the file itself unchanged), the torn range and the later fault are reported
/// and every whole record after them is read, once.
#[test]
fn torn_record_is_pending_then_corruption_once_a_newer_file_appears() {
    let (b, torn, bad) = torn_file();
    let (dir, run) = logdir("tails-newer");
    std::fs::write(run.join(F), &b).unwrap();
    let mut r = Reader::new(dir.path(), opts(false, true)).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
    let tail = b.len() as u64 - torn.0;
    assert_eq!(report(&mut r), vec![(Severity::Truncated, torn.0, tail)]);
    // Nothing changed: still pending, nothing read again.
    let s = r.load(&AtomicBool::new(false)).unwrap();
    assert_eq!(s.files_read, 0);
    std::fs::write(run.join(NEWER), steps(100..102, "next")).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), {
        let mut v = all_but(&[5, 46]);
        v.extend([100, 101]);
        v
    });
    assert_eq!(
        report(&mut r),
        vec![
            (Severity::Corrupt, torn.0, torn.1),
            (Severity::Corrupt, bad.0, bad.1)
        ]
    );
    assert!(
        reasons(&mut r)[0].reason.starts_with("torn record"),
        "{:?}",
        reasons(&mut r)
    );
    // And again: nothing new, nothing reported twice.
    let s = r.load(&AtomicBool::new(false)).unwrap();
    assert_eq!(s.files_read, 0);
    assert_eq!(report(&mut r).len(), 2);
    assert_eq!(step_list(&mut r).len(), all_but(&[5, 46]).len() + 2);
}

/// Silent loss, the timeout: the only file of its run, unchanged, becomes final once
/// `tail_timeout` has passed since it last grew.
#[test]
fn torn_record_is_corruption_once_the_timeout_passes() {
    let (b, torn, bad) = torn_file();
    let (dir, run) = logdir("tails-timeout");
    std::fs::write(run.join(F), &b).unwrap();
    let mut r = Reader::new(dir.path(), opts_with(Duration::from_millis(1500))).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(1600));
    load(&mut r);
    assert_read_as_final(&mut r, torn, bad, "");
}

/// Silent loss through the cache: a cache written while the tail was pending, reopened once
/// the file is final, both when a newer file appeared and when only time passed (nothing on
/// disk changed, so the cache's "nothing changed" check must not answer from the old state).
#[test]
fn cached_reopen_reads_a_pending_tail_again_once_final() {
    for newer in [true, false] {
        let (b, torn, bad) = torn_file();
        let (dir, run) = logdir(if newer {
            "tails-cache-newer"
        } else {
            "tails-cache-age"
        });
        std::fs::write(run.join(F), &b).unwrap();
        let cache = dir.path().join("cache");
        let o = opts_with(Duration::from_millis(if newer { 600_000 } else { 1500 }));
        let mut r = CachedReader::new(&dir.path().join("run"), o.clone(), &cache).unwrap();
        load(&mut r);
        assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
        drop(r);
        // Reopened before anything changed: the same answer, from the cache.
        let mut r = CachedReader::new(&dir.path().join("run"), o.clone(), &cache).unwrap();
        load(&mut r);
        assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
        assert_eq!(report(&mut r).len(), 1);
        drop(r);
        if newer {
            std::fs::write(run.join(NEWER), b"").unwrap();
        } else {
            std::thread::sleep(Duration::from_millis(1600));
        }
        let mut r = CachedReader::new(&dir.path().join("run"), o.clone(), &cache).unwrap();
        load(&mut r);
        assert_read_as_final(&mut r, torn, bad, &format!("newer file: {newer}"));
        drop(r);
        // And once more: the final answer is kept.
        let mut r = CachedReader::new(&dir.path().join("run"), o, &cache).unwrap();
        load(&mut r);
        assert_eq!(step_list(&mut r), all_but(&[5, 46]));
        assert_eq!(report(&mut r).len(), 2);
    }
}

fn set_mtime(p: &std::path::Path, t: std::time::SystemTime) {
    std::fs::File::open(p).unwrap().set_modified(t).unwrap();
}

/// A cache reopened while nothing changed answers without listing or reading (its fast check),
/// and still notices a pending tail's timeout passing: the run's directory settled, the file
/// unchanged, the tail becomes final and the records after it are read.
#[test]
fn fast_cached_reopen_sees_a_pending_tail_expire() {
    let (b, torn, bad) = torn_file();
    let (dir, run) = logdir("tails-cache-fast");
    let path = run.join(F);
    std::fs::write(&path, &b).unwrap();
    let now = std::time::SystemTime::now();
    set_mtime(&path, now - Duration::from_secs(1));
    set_mtime(&run, now - Duration::from_secs(3600));
    let cache = dir.path().join("cache");
    let o = opts_with(Duration::from_secs(3));
    let open = || {
        let mut r = CachedReader::new(&run, o.clone(), &cache).unwrap();
        load(&mut r);
        r
    };
    let mut r = open();
    assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
    drop(r);
    let mut r = open();
    assert_eq!(r.cache_info().status, "hit");
    assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
    assert_eq!(report(&mut r).len(), 1);
    drop(r);
    std::thread::sleep(Duration::from_millis(2200));
    let mut r = open();
    assert_read_as_final(&mut r, torn, bad, "");
}

/// A writer killed inside its last record: once final, a stopped tail (a warning, the record's
/// bytes), no corruption, and the rows before it.
#[test]
fn stopped_tail_is_a_warning() {
    let mut b = record(&file_version_event(999.0));
    b.extend(steps(0..5, "loss"));
    let at = b.len() as u64;
    let last = record(&scalar_event(1005.0, 5, &[("loss", 5.0)]));
    b.extend_from_slice(&last[..20]);
    let (dir, run) = logdir("tails-stopped");
    std::fs::write(run.join(F), &b).unwrap();
    let mut r = Reader::new(dir.path(), opts_with(Duration::ZERO)).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..5).collect::<Vec<_>>());
    assert_eq!(report(&mut r), vec![(Severity::Warning, at, 20)]);
    assert!(reasons(&mut r)[0].reason.starts_with("stopped tail"));
    // Should the writer finish it after all, the record is read and the warning goes.
    std::fs::write(run.join(F), [&b[..], &last[20..]].concat()).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..6).collect::<Vec<_>>());
    assert!(report(&mut r).is_empty(), "{:?}", reasons(&mut r));
}

/// `Event { wall_time, step, summary { value { tag, tensor: string tensor [payload], metadata:
/// text plugin } } }`: an event file logged as a string.
fn string_event(step: i64, tag: &str, payload: &[u8]) -> Vec<u8> {
    let mut tensor = Vec::new();
    key(&mut tensor, 1, 0);
    varint(&mut tensor, 7); // DT_STRING
    bytes_field(&mut tensor, 8, payload);
    let mut plugin = Vec::new();
    bytes_field(&mut plugin, 1, b"text");
    let mut meta = Vec::new();
    bytes_field(&mut meta, 1, &plugin);
    let mut value = Vec::new();
    bytes_field(&mut value, 1, tag.as_bytes());
    bytes_field(&mut value, 8, &tensor);
    bytes_field(&mut value, 9, &meta);
    let mut summary = Vec::new();
    bytes_field(&mut summary, 1, &value);
    let mut ev = Vec::new();
    key(&mut ev, 1, 1);
    ev.extend_from_slice(&(2000.0 + step as f64).to_le_bytes());
    key(&mut ev, 2, 0);
    varint(&mut ev, step as u64);
    bytes_field(&mut ev, 5, &summary);
    ev
}

/// The phantom-rows file: 6 scalar records, then a record whose payload is an event file of
/// 50 scalar records and 10 images' worth of records. Returns the whole bytes and where to cut
/// it so that the cut lands inside an embedded record (the partial payload chains cleanly).
fn embedding_file() -> (Vec<u8>, usize) {
    let mut b = record(&file_version_event(999.0));
    b.extend(steps(0..6, "loss"));
    let mut inner = record(&file_version_event(1.0));
    inner.extend(steps(0..50, "inner"));
    let cut_inner = inner.len() - 30;
    let outer = record(&string_event(6, "logged_file", &inner));
    let start = b.len();
    b.extend(&outer);
    // Inside the outer record: its header, the event's fields, then the inner bytes.
    let payload_at = start + outer.len() - 4 - inner.len();
    (b, payload_at + cut_inner)
}

/// Phantom rows, reloads: the record still being written yields nothing (not its embedded
/// records); once it completes, it is read exactly once and nothing is reported.
#[test]
fn embedded_records_are_never_rows_across_the_completion() {
    let (b, cut) = embedding_file();
    let (dir, run) = logdir("tails-embedded");
    let path = run.join(F);
    std::fs::write(&path, &b[..cut]).unwrap();
    let mut r = Reader::new(dir.path(), opts(false, true)).unwrap();
    load(&mut r);
    assert_eq!(
        step_list(&mut r),
        (0..6).collect::<Vec<_>>(),
        "no phantom rows"
    );
    assert_eq!(rows(&mut r, Kind::Text), 0);
    assert_eq!(report(&mut r).len(), 1);
    assert_eq!(report(&mut r)[0].0, Severity::Truncated);
    std::fs::write(&path, &b).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..6).collect::<Vec<_>>());
    assert_eq!(rows(&mut r, Kind::Text), 1, "the logged file, once");
    assert!(report(&mut r).is_empty(), "{:?}", reasons(&mut r));
}

/// Phantom rows through the cache: the pending state is what the cache keeps, and a reopen
/// after the record completed reads it exactly once.
#[test]
fn embedded_records_through_a_cached_reopen() {
    let (b, cut) = embedding_file();
    let (dir, run) = logdir("tails-embedded-cache");
    let path = run.join(F);
    std::fs::write(&path, &b[..cut]).unwrap();
    let cache = dir.path().join("cache");
    let root = dir.path().join("run");
    let mut r = CachedReader::new(&root, opts(false, true), &cache).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..6).collect::<Vec<_>>());
    drop(r);
    std::fs::write(&path, &b).unwrap();
    let mut r = CachedReader::new(&root, opts(false, true), &cache).unwrap();
    load(&mut r);
    assert_eq!(step_list(&mut r), (0..6).collect::<Vec<_>>());
    assert_eq!(rows(&mut r, Kind::Text), 1);
    assert!(report(&mut r).is_empty(), "{:?}", reasons(&mut r));
}

/// A final file whose last record embeds records and was cut short: final means final, so the
/// whole embedded records are read as records (there is no telling them from appended ones),
/// and the cut bytes are reported; this is what `check --final` / `strict=True` ask for.
#[test]
fn final_file_with_a_cut_embedding_record_is_reported() {
    let (b, cut) = embedding_file();
    let (dir, run) = logdir("tails-embedded-final");
    std::fs::write(run.join(F), &b[..cut]).unwrap();
    let mut r = Reader::new(dir.path(), opts_with(Duration::ZERO)).unwrap();
    load(&mut r);
    let sev: Vec<Severity> = report(&mut r).iter().map(|e| e.0).collect();
    assert!(sev.contains(&Severity::Corrupt), "{:?}", reasons(&mut r));
    assert!(!sev.contains(&Severity::Truncated), "{:?}", reasons(&mut r));
}
