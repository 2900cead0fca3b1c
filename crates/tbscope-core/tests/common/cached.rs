//! The cache tests' fixtures (`tests/cache.rs`, `tests/cache_reload.rs`): small logdirs of
//! scalar runs, a cache directory beside them, and what a reader returns as comparable values.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::{file_version_event, opts, record, scalar_event, scalar_rows};
use tbscope_core::{CachedReader, Kind, Reader, Scan};

/// A fresh directory of this test's own: tests run in parallel threads of one process, so the
/// name alone (two tests may pick the same) is not enough.
pub fn tmp(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tbscope-cache-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn events(run: &str, steps: std::ops::Range<i64>, header: bool) -> Vec<u8> {
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
pub fn snapshot(r: &mut dyn Scan) -> (Vec<String>, String, String) {
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

pub fn fresh(root: &Path) -> Reader {
    let mut r = Reader::new(root, opts(false, true)).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    r
}

pub fn cached(root: &Path, dir: &Path) -> CachedReader {
    let mut r = CachedReader::new(root, opts(false, true), dir).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    r
}

/// Every directory's mtime an hour back: listings taken now are settled, and a warm open can
/// tell "nothing changed" from stats alone.
pub fn settle(root: &Path) {
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

/// A cached open's runs' facts and scalar statistics against a cold read's (a warm open that
/// found nothing changed answers them from the generation's stored tables).
pub fn tables_agree(r: &mut CachedReader, plain: &mut Reader, what: &str) {
    let same = |a: arrow_array::RecordBatch, b: arrow_array::RecordBatch, table: &str| {
        assert_eq!(a.num_rows(), b.num_rows(), "{what}: {table}");
        assert_eq!(
            format!("{:?}", a.columns()),
            format!("{:?}", b.columns()),
            "{what}: {table}"
        );
    };
    same(r.run_facts().unwrap(), plain.run_facts().unwrap(), "facts");
    same(
        r.scalar_stats().unwrap(),
        plain.scalar_stats().unwrap(),
        "statistics",
    );
}

/// The event file each run of [`five_runs`] holds.
pub const EVENT_FILE: &str = "events.out.tfevents.1.x";

/// A logdir of five runs in two directories (40 steps each, settled) and a cache directory
/// beside it, under a fresh `tmp(name)`: (that directory, the logdir, the cache).
pub fn five_runs(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let base = tmp(name);
    let root = base.join("logdir");
    for run in ["s0/t0", "s0/t1", "s0/t2", "s1/t0", "s1/t1"] {
        std::fs::create_dir_all(root.join(run)).unwrap();
        std::fs::write(root.join(run).join(EVENT_FILE), events(run, 0..40, true)).unwrap();
    }
    settle(&root);
    let cache = base.join("cache");
    (base, root, cache)
}

/// Appends `steps` of `run` (no file version record) to its event file in a [`five_runs`]
/// logdir, as its writer would.
pub fn append_steps(root: &Path, run: &str, steps: std::ops::Range<i64>) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join(run).join(EVENT_FILE))
        .unwrap();
    f.write_all(&events(run, steps, false)).unwrap();
}
