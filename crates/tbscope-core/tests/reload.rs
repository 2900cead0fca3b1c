//! A reader's reload checks the logdir against what its last discovery saw and lists only the
//! directories that changed (`load/changes.rs`): each kind of change still reads what a
//! discovery would, and a reload that changed nothing lists nothing.

mod common;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{file_version_event, opts, record, scalar_event, scalar_rows, TempDir};
use tbscope_core::load::LoadStats;
use tbscope_core::{Kind, Reader, ReaderOptions};

fn events(run: &str, steps: std::ops::Range<i64>, header: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if header {
        out.extend(record(&file_version_event(1.0)));
    }
    for s in steps {
        out.extend(record(&scalar_event(
            1000.0 + s as f64,
            s,
            &[("loss", s as f32 * 0.5), (run, -(s as f32))],
        )));
    }
    out
}

/// Rows (sorted: a reload adds the rows it read after those read before) and report of a
/// reader, comparable.
fn snapshot(r: &Reader) -> (Vec<String>, Vec<String>, Vec<String>) {
    let rows = scalar_rows(&r.table(Kind::Scalars).unwrap());
    let mut rows: Vec<String> = rows
        .iter()
        .map(|x| format!("{} {} {} {} {:?}", x.run, x.tag, x.step, x.value, x.file))
        .collect();
    rows.sort();
    let report = r.report().iter().map(|e| format!("{e:?}")).collect();
    (rows, report, r.run_names())
}

fn reader(root: &Path, threads: usize) -> Reader {
    let o = ReaderOptions {
        threads,
        // Files read as final: what a reload sees does not depend on the clock.
        tail_timeout: Duration::ZERO,
        ..opts(true, true)
    };
    Reader::new(root, o).unwrap()
}

fn load(r: &mut Reader) -> LoadStats {
    r.load(&AtomicBool::new(false)).unwrap()
}

/// A fresh reader's load of `root`.
fn fresh(root: &Path, threads: usize) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut r = reader(root, threads);
    load(&mut r);
    snapshot(&r)
}

const SWEEPS: usize = 3;
const RUNS: usize = 4;

/// Three sweeps of four runs, one event file each.
fn logdir(t: &TempDir) {
    for s in 0..SWEEPS {
        for r in 0..RUNS {
            let run = format!("s{s}/r{r}");
            t.write(
                &format!("{run}/events.out.tfevents.{}.h", 100 + r),
                &events(&run, 0..5, true),
            );
        }
    }
}

/// Directories changed less than `SETTLED` (2 s) ago are listed again on every reload (a change
/// in the same clock tick would not move their mtime): wait until the layout is settled.
fn settle() {
    std::thread::sleep(Duration::from_millis(2100));
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_reload_lists_only_the_directories_that_changed() {
    for threads in [1, 2] {
        let t = TempDir::new("reload");
        let root = t.path();
        logdir(&t);
        settle();
        let mut r = reader(root, threads);
        let dirs = 1 + SWEEPS + SWEEPS * RUNS;
        assert_eq!(load(&mut r).dirs_listed, dirs);

        // Nothing changed: nothing listed, nothing read.
        let s = load(&mut r);
        assert_eq!((s.dirs_listed, s.files_read, s.rows), (0, 0, 0));
        assert_eq!(snapshot(&r), fresh(root, threads));

        // One run appended to: its file read from where it stopped, no directory listed.
        let file = root.join("s1/r2/events.out.tfevents.102.h");
        append(&file, &events("s1/r2", 5..8, false));
        let s = load(&mut r);
        assert_eq!((s.dirs_listed, s.files_read, s.rows), (0, 1, 6));
        assert_eq!(snapshot(&r), fresh(root, threads));

        // A new file in a known run, a new run: only the directories that moved are listed
        // again (s0/r1, s2), and the new one (s2/new).
        t.write(
            "s0/r1/events.out.tfevents.200.h",
            &events("s0/r1", 10..12, true),
        );
        t.write(
            "s2/new/events.out.tfevents.300.h",
            &events("s2/new", 0..3, true),
        );
        let s = load(&mut r);
        assert_eq!((s.dirs_listed, s.files_read), (3, 2));
        assert_eq!(snapshot(&r), fresh(root, threads));
        // Listed again until they settle (a change in the same clock tick would not move
        // their mtime), then nothing.
        assert_eq!(load(&mut r).dirs_listed, 3);
        settle();
        load(&mut r);
        assert_eq!(load(&mut r).dirs_listed, 0);
        assert_eq!(snapshot(&r), fresh(root, threads));

        // A run removed: a reload keeps what it read of it (as it always did), and finds
        // what is new elsewhere as a fresh reader does.
        let before = snapshot(&r);
        std::fs::remove_dir_all(root.join("s0/r3")).unwrap();
        let s = load(&mut r);
        assert_eq!(s.dirs_listed, 1);
        assert_eq!(snapshot(&r), before);
        // A new subtree, walked whole.
        t.write(
            "s1/deep/a/events.out.tfevents.1.h",
            &events("s1/deep/a", 0..2, true),
        );
        t.write(
            "s1/deep/b/c/events.out.tfevents.1.h",
            &events("s1/deep/b/c", 0..2, true),
        );
        // (s0, listed too soon after the removal, is listed again too.)
        assert_eq!(load(&mut r).dirs_listed, 1 + 1 + 4);
        let mut want = fresh(root, threads);
        let mut kept = before.0.clone();
        // (The removed run's rows are still the reader's.)
        kept.retain(|row| row.starts_with("s0/r3 "));
        want.0.extend(kept);
        want.0.sort();
        want.2.push("s0/r3".into());
        want.2.sort();
        let mut got = snapshot(&r);
        got.2.sort();
        assert_eq!(got, want);
        settle();
        load(&mut r);
        assert_eq!(load(&mut r).dirs_listed, 0);

        // A file truncated: the check stats each known file, so it is looked at without any
        // directory listed.
        let cut = root.join("s2/r0/events.out.tfevents.100.h");
        let bytes = std::fs::read(&cut).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&cut)
            .unwrap()
            .set_len((bytes.len() / 2) as u64)
            .unwrap();
        let s = load(&mut r);
        assert_eq!(s.dirs_listed, 0);
        // (As a discovery plans it: again from its cursor, past its end now.)
        assert_eq!(s.files_read, 1);
    }
}

#[test]
fn a_file_added_where_the_directory_mtime_was_set_back_is_found() {
    // Some platforms' and tools' mtimes cannot be trusted (a `utime` after the change, a
    // restore from an archive): a directory's ctime, which nothing but the kernel sets, moves
    // with every change and with every utime.
    let t = TempDir::new("reload-utime");
    let root = t.path();
    logdir(&t);
    settle();
    let mut r = reader(root, 2);
    load(&mut r);
    assert_eq!(load(&mut r).dirs_listed, 0);
    let dir = root.join("s1/r1");
    let mtime = std::fs::metadata(&dir).unwrap().modified().unwrap();
    t.write(
        "s1/r1/events.out.tfevents.500.h",
        &events("s1/r1", 20..22, true),
    );
    std::fs::File::open(&dir)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_modified(mtime))
        .unwrap();
    assert_eq!(std::fs::metadata(&dir).unwrap().modified().unwrap(), mtime);
    let s = load(&mut r);
    assert_eq!(s.dirs_listed, 1);
    assert_eq!(snapshot(&r), fresh(root, 2));
}

#[test]
fn a_run_filter_leaves_the_other_runs_unlooked_at() {
    let t = TempDir::new("reload-filter");
    let root = t.path();
    logdir(&t);
    settle();
    let o = ReaderOptions {
        runs: Some(regex::Regex::new("^s1/").unwrap()),
        tail_timeout: Duration::ZERO,
        ..opts(true, true)
    };
    let mut r = Reader::new(root, o.clone()).unwrap();
    load(&mut r);
    // An append to a run the filter leaves out reads nothing; to one it keeps, that file.
    append(
        &root.join("s0/r0/events.out.tfevents.100.h"),
        &events("s0/r0", 5..7, false),
    );
    let s = load(&mut r);
    assert_eq!((s.dirs_listed, s.files_read), (0, 0));
    append(
        &root.join("s1/r0/events.out.tfevents.100.h"),
        &events("s1/r0", 5..7, false),
    );
    let s = load(&mut r);
    assert_eq!((s.dirs_listed, s.files_read), (0, 1));
    let mut f = Reader::new(root, o).unwrap();
    load(&mut f);
    assert_eq!(snapshot(&r), snapshot(&f));
}

#[test]
fn a_cached_reader_reloads_by_the_same_check() {
    // Through a cache, a reload after the state was decoded (what `tbscope serve` does every
    // interval) checks against its last discovery too, and drops a run whose file was
    // truncated as a discovery would.
    use tbscope_core::{CachedReader, Scan};
    let t = TempDir::new("reload-cached");
    let root = t.path().join("logdir");
    std::fs::create_dir_all(&root).unwrap();
    for s in 0..SWEEPS {
        for r in 0..RUNS {
            let run = format!("s{s}/r{r}");
            let p = root.join(&run);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(
                p.join(format!("events.out.tfevents.{}.h", 100 + r)),
                events(&run, 0..5, true),
            )
            .unwrap();
        }
    }
    settle();
    let o = ReaderOptions {
        threads: 2,
        tail_timeout: Duration::ZERO,
        ..opts(true, true)
    };
    let mut c = CachedReader::new(&root, o, &t.path().join("cache")).unwrap();
    let cancel = AtomicBool::new(false);
    c.load(&cancel).unwrap();
    let rows = |c: &mut CachedReader| {
        let mut v: Vec<String> = scalar_rows(&Scan::table(c, Kind::Scalars).unwrap())
            .iter()
            .map(|x| format!("{} {} {} {}", x.run, x.tag, x.step, x.value))
            .collect();
        v.sort();
        v
    };
    let fresh_rows = |root: &Path| {
        let mut v: Vec<String> = fresh(root, 2)
            .0
            .iter()
            .map(|r| r.rsplit_once(' ').unwrap().0.to_string())
            .collect();
        v.sort();
        v
    };
    rows(&mut c);
    // The first reload after the state was decoded discovers (and keeps what it saw); the
    // next ones list nothing.
    c.load(&cancel).unwrap();
    let s = c.load(&cancel).unwrap();
    assert_eq!((s.dirs_listed, s.files_read), (0, 0));
    // (A discovery that reuses every listing lists none either, but looks at every run.)
    assert_eq!(c.cache_info().runs_rechecked, 0);
    assert_eq!(c.cache_info().status, "hit");
    append(
        &root.join("s2/r1/events.out.tfevents.101.h"),
        &events("s2/r1", 5..9, false),
    );
    let s = c.load(&cancel).unwrap();
    assert_eq!((s.dirs_listed, s.files_read, s.rows), (0, 1, 8));
    assert_eq!(c.cache_info().runs_rechecked, 1);
    assert_eq!(c.cache_info().status, "updated");
    assert_eq!(rows(&mut c), fresh_rows(&root));
    let cut = root.join("s0/r2/events.out.tfevents.102.h");
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let s = c.load(&cancel).unwrap();
    assert_eq!(s.dirs_listed, 0);
    assert_eq!(c.cache_info().runs_dropped, 1);
    assert_eq!(rows(&mut c), fresh_rows(&root));
}
