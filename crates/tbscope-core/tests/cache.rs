//! The cache from the Rust side: a reader restored from a cache directory returns what a fresh
//! reader returns, reads only what was appended, and drops a run whose file was replaced.
//! (tests/python/test_cache.py covers every kind, filters, processes and damage.)

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use common::{file_version_event, opts, record, scalar_event, scalar_rows};
use tbscope_core::{CachedReader, Kind, Reader, Scan};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tbscope-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn events(run: &str, steps: std::ops::Range<i64>, header: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if header {
        out.extend(record(&file_version_event(1.0)));
    }
    for s in steps {
        let v = s as f32 * 0.5;
        out.extend(record(&scalar_event(
            1000.0 + s as f64,
            s,
            &[("loss", v), (run, -v)],
        )));
    }
    out
}

/// What a reader returns, as comparable values.
fn snapshot(r: &mut dyn Scan) -> (Vec<String>, String, String) {
    let rows = scalar_rows(&r.table(Kind::Scalars).unwrap());
    let rows = rows
        .iter()
        .map(|x| format!("{} {} {} {}", x.run, x.tag, x.step, x.value))
        .collect();
    (
        rows,
        format!("{:?}", r.series().unwrap()),
        format!("{:?}", r.runs_table().unwrap()),
    )
}

fn fresh(root: &Path) -> Reader {
    let mut r = Reader::new(root, opts(false, true)).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    r
}

fn cached(root: &Path, dir: &Path) -> CachedReader {
    let mut r = CachedReader::new(root, opts(false, true), dir).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    r
}

#[test]
fn restored_equals_fresh_and_follows_changes() {
    let base = tmp("follow");
    let root = base.join("logdir");
    let cache = base.join("cache");
    for run in ["a", "b/c"] {
        std::fs::create_dir_all(root.join(run)).unwrap();
        std::fs::write(
            root.join(run).join("events.out.tfevents.1.x"),
            events(run, 0..50, true),
        )
        .unwrap();
    }
    let mut first = cached(&root, &cache);
    assert_eq!(first.cache_info().status, "miss");
    assert_eq!(snapshot(&mut first), snapshot(&mut fresh(&root)));

    let mut warm = cached(&root, &cache);
    let info = warm.cache_info();
    assert_eq!(info.status, "hit");
    assert!(info.warnings.is_empty(), "{:?}", info.warnings);
    assert_eq!(snapshot(&mut warm), snapshot(&mut fresh(&root)));

    // Appended: read alone, rows in order after the cached ones.
    let f = root.join("a").join("events.out.tfevents.1.x");
    let mut bytes = std::fs::read(&f).unwrap();
    let more = events("a", 50..60, false);
    bytes.extend(&more);
    std::fs::write(&f, &bytes).unwrap();
    let mut r = CachedReader::new(&root, opts(false, true), &cache).unwrap();
    let stats = r.load(&AtomicBool::new(false)).unwrap();
    assert_eq!(stats.bytes_read, more.len() as u64);
    assert_eq!(r.cache_info().status, "updated");
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)));

    // Replaced by another file (new inode, larger): the run is read again from the start.
    let new = root.join("b/c").join("tmp");
    std::fs::write(&new, events("b/c", 100..200, true)).unwrap();
    std::fs::rename(&new, root.join("b/c").join("events.out.tfevents.1.x")).unwrap();
    let mut r = cached(&root, &cache);
    let info = r.cache_info();
    assert_eq!((info.status, info.runs_dropped), ("updated", 1));
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)));
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn damaged_manifest_is_a_warning_and_rewritten() {
    let base = tmp("damaged");
    let root = base.join("logdir");
    let cache = base.join("cache");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("events.out.tfevents.1.x"),
        events(".", 0..20, true),
    )
    .unwrap();
    cached(&root, &cache);
    let current = std::fs::read_to_string(cache.join("CURRENT")).unwrap();
    let manifest = cache.join(current.trim()).join("manifest");
    let mut m = std::fs::read(&manifest).unwrap();
    let mid = m.len() / 2;
    m[mid] ^= 0x55;
    std::fs::write(&manifest, m).unwrap();
    let mut r = cached(&root, &cache);
    let info = r.cache_info();
    assert_eq!(info.status, "miss");
    assert!(info.written);
    assert!(
        info.warnings.iter().any(|w| w.contains("checksum")),
        "{:?}",
        info.warnings
    );
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)));
    assert_eq!(cached(&root, &cache).cache_info().status, "hit");
    std::fs::remove_dir_all(&base).unwrap();
}

/// Every directory's mtime an hour back: listings taken now are settled, and a warm open can
/// tell "nothing changed" from stats alone.
fn settle(root: &Path) {
    let back = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            }
        }
        let times = std::fs::FileTimes::new().set_modified(back);
        std::fs::File::open(&d).unwrap().set_times(times).unwrap();
    }
}

/// A warm open that finds nothing changed leaves the runs' state encoded and answers the runs'
/// facts and the scalar statistics from the generation's stored tables; whatever needs more
/// decodes it on the way, in any order (no call must come first).
#[test]
fn deferred_state_is_decoded_for_what_needs_it() {
    let base = tmp("deferred");
    let root = base.join("logdir");
    let cache = base.join("cache");
    for run in ["a", "b/c", "b/d"] {
        std::fs::create_dir_all(root.join(run)).unwrap();
        std::fs::write(
            root.join(run).join("events.out.tfevents.1.x"),
            events(run, 0..30, true),
        )
        .unwrap();
    }
    settle(&root);
    cached(&root, &cache);
    let mut plain = fresh(&root);
    // (Columns and names: a table read back from Arrow IPC numbers its dictionaries.)
    let same = |a: arrow_array::RecordBatch, b: arrow_array::RecordBatch| {
        let names = |x: &arrow_array::RecordBatch| -> Vec<String> {
            x.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        };
        assert_eq!(names(&a), names(&b));
        assert_eq!(a.columns(), b.columns());
    };

    let mut r = cached(&root, &cache);
    assert_eq!(r.cache_info().status, "hit");
    assert!(r.state_pending());
    same(r.run_facts().unwrap(), plain.run_facts().unwrap());
    same(r.scalar_stats().unwrap(), plain.scalar_stats().unwrap());
    same(r.runs_table().unwrap(), plain.runs_table());
    assert!(r.state_pending(), "answered from the stored tables");
    // The series need the state: decoded then, and everything is as a fresh reader has it.
    assert_eq!(
        format!("{:?}", r.series().unwrap()),
        format!("{:?}", plain.series())
    );
    assert!(!r.state_pending());
    assert_eq!(snapshot(&mut r), snapshot(&mut plain));

    // The other way round: rows first, then the rest.
    let mut r = cached(&root, &cache);
    assert!(r.state_pending());
    assert_eq!(snapshot(&mut r), snapshot(&mut plain));
    same(r.run_facts().unwrap(), plain.run_facts().unwrap());
    std::fs::remove_dir_all(&base).unwrap();
}
