//! A cached reader reloading in one process (what `tbscope serve` does each reload interval),
//! once its state is decoded: a change the directories show (a run added, nested or not; an
//! event file added to a run; a run removed or renamed; a sweep renamed) lists again only the
//! directories that changed and looks only at their runs, as a reader's own reload does, not a
//! discovery of the logdir (issue 15). The rows are a cold read's, and the generation it
//! publishes keeps listings that let the next open prove "nothing changed" from stats alone.

mod common;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::cached::{
    append_steps, cached, events, five_runs, fresh, snapshot, tables_agree, EVENT_FILE,
};
use tbscope_core::CachedReader;

/// Past `logdir::SETTLED`: a directory changed before this is listed for good (neither its
/// mtime nor its ctime recent), so what each reload lists is the change's alone.
fn wait_settled() {
    std::thread::sleep(Duration::from_millis(2100));
}

fn add_run(root: &Path, run: &str, steps: std::ops::Range<i64>) {
    std::fs::create_dir_all(root.join(run)).unwrap();
    std::fs::write(root.join(run).join(EVENT_FILE), events(run, steps, true)).unwrap();
}

/// Reloads `r` after a change and checks it: `want` is (runs looked at, runs dropped,
/// directories listed); the answer equals a cold read's, and a new reader opening the cache
/// finds nothing changed without listing a directory or looking at a run (the published
/// listings are the logdir's as it is).
fn reload_and_check(
    r: &mut CachedReader,
    root: &Path,
    cache: &Path,
    what: &str,
    want: (usize, usize, usize),
) {
    r.load(&AtomicBool::new(false)).unwrap();
    let info = r.cache_info();
    assert!(info.warnings.is_empty(), "{what}: {:?}", info.warnings);
    assert!(!r.state_pending(), "{what}: the state is decoded");
    assert_eq!((info.status, info.written), ("updated", true), "{what}");
    assert_eq!(
        (info.runs_rechecked, info.runs_dropped, info.dirs_listed),
        want,
        "{what}: (runs looked at, dropped, directories listed)"
    );
    let mut plain = fresh(root);
    tables_agree(r, &mut plain, what);
    assert_eq!(snapshot(r), snapshot(&mut plain), "{what}");
    assert_eq!(
        format!("{:?}", r.report().unwrap()),
        format!("{:?}", plain.report()),
        "{what}: report"
    );
    let mut warm = cached(root, cache);
    let info = warm.cache_info();
    assert!(info.warnings.is_empty(), "{what}: {:?}", info.warnings);
    assert_eq!(
        (info.status, info.runs_rechecked, info.dirs_listed),
        ("hit", 0, 0),
        "{what}: next open"
    );
    assert!(
        warm.state_pending(),
        "{what}: answered from the stored tables"
    );
    tables_agree(&mut warm, &mut plain, what);
    assert_eq!(
        snapshot(&mut warm),
        snapshot(&mut plain),
        "{what}: next open"
    );
}

/// A cached reader on a settled [`five_runs`] logdir, read once (state decoded, its tree
/// taken): `(base, root, cache, reader)`.
fn first_read(
    name: &str,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    CachedReader,
) {
    let (base, root, cache) = five_runs(name);
    // (`five_runs` set the mtimes back, which moved the ctimes: those settle too.)
    wait_settled();
    let r = cached(&root, &cache);
    assert_eq!(r.cache_info().status, "miss");
    (base, root, cache, r)
}

#[test]
fn reload_lists_only_directories_with_runs_added() {
    let (base, root, cache, mut r) = first_read("reload-added");
    let mut step = |what: &str, change: &dyn Fn(&Path), want| {
        change(&root);
        wait_settled();
        reload_and_check(&mut r, &root, &cache, what, want);
    };
    // The root listed again, the new directory walked.
    step(
        "new run in a new directory",
        &|root| add_run(root, "s2", 0..9),
        (1, 0, 2),
    );
    // The root listed again, three new directories walked.
    step(
        "new nested run",
        &|root| add_run(root, "s3/a/b", 3..8),
        (1, 0, 4),
    );
    step(
        "new run beside others",
        &|root| add_run(root, "s1/t5", 0..7),
        (1, 0, 2),
    );
    // A second event file in a run (a restart): only that run's directory.
    let second = |root: &Path| {
        let f = root.join("s0/t1/events.out.tfevents.2.x");
        std::fs::write(f, events("s0/t1", 40..60, true)).unwrap();
    };
    step("new file in a run", &second, (1, 0, 1));
    // Renamed: the old name dropped, the new one read whole.
    let rename = |root: &Path| std::fs::rename(root.join("s1/t0"), root.join("s1/t7")).unwrap();
    step("run renamed", &rename, (1, 1, 2));
    // A sweep renamed with its runs, and a run appended to elsewhere, at once.
    let sweep = |root: &Path| {
        std::fs::rename(root.join("s0"), root.join("s9")).unwrap();
        append_steps(root, "s1/t1", 40..44);
    };
    step("sweep renamed", &sweep, (4, 3, 5));
    // A symlink: its target may change without its directory showing it, so the discovery.
    std::os::unix::fs::symlink(root.join("s1/t7"), root.join("s1/link")).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    let n = r.run_names().unwrap().len();
    assert_eq!(r.cache_info().runs_rechecked, n, "a symlink: every run");
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)), "a symlink");
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn reload_drops_runs_removed() {
    let (base, root, cache, mut r) = first_read("reload-removed");
    add_run(&root, "s3/a/b", 0..5);
    wait_settled();
    r.load(&AtomicBool::new(false)).unwrap();
    let mut step = |what: &str, change: &dyn Fn(&Path), want| {
        change(&root);
        wait_settled();
        reload_and_check(&mut r, &root, &cache, what, want);
    };
    // Its rows and facts dropped, nothing read: its sweep listed again.
    let rm = |root: &Path| std::fs::remove_dir_all(root.join("s0/t2")).unwrap();
    step("run removed", &rm, (0, 1, 1));
    // A subtree three directories deep: the root listed again.
    let rm = |root: &Path| std::fs::remove_dir_all(root.join("s3")).unwrap();
    step("nested run removed", &rm, (0, 1, 1));
    // The directory stays, its event file goes: the run goes.
    let rm = |root: &Path| std::fs::remove_file(root.join("s1/t0").join(EVENT_FILE)).unwrap();
    step("event file removed", &rm, (0, 1, 1));
    // A run removed and another appended to, in one sweep.
    let both = |root: &Path| {
        std::fs::remove_dir_all(root.join("s0/t0")).unwrap();
        append_steps(root, "s0/t1", 40..50);
    };
    step("removed beside an append", &both, (1, 1, 1));
    std::fs::remove_dir_all(&base).unwrap();
}

/// As `tbscope serve` has it: the reload leaves the generation to a deferred write, which
/// takes the listings the reload put in place (a warm open of what it publishes proves
/// "nothing changed" from stats alone).
#[test]
fn deferred_write_keeps_the_listings_a_reload_took() {
    let (base, root, cache, mut r) = first_read("reload-deferred");
    r.defer_writes(true);
    add_run(&root, "s2", 0..9);
    std::fs::remove_dir_all(root.join("s0/t2")).unwrap();
    wait_settled();
    let no = AtomicBool::new(false);
    r.load(&no).unwrap();
    let info = r.cache_info();
    assert!(info.warnings.is_empty(), "{:?}", info.warnings);
    assert_eq!((info.status, info.written), ("updated", false));
    // (s2 read; s0/t2 dropped; the root, s0 and s2 listed.)
    assert_eq!(
        (info.runs_rechecked, info.runs_dropped, info.dirs_listed),
        (1, 1, 3)
    );
    let write = r.take_write().expect("the reload left the cache behind");
    let done = write.run(&no);
    assert!(done.generation().is_some(), "published");
    r.finish_write(done);
    let mut plain = fresh(&root);
    assert_eq!(snapshot(&mut r), snapshot(&mut plain));
    let mut warm = cached(&root, &cache);
    let info = warm.cache_info();
    assert!(info.warnings.is_empty(), "{:?}", info.warnings);
    assert_eq!(
        (info.status, info.runs_rechecked, info.dirs_listed),
        ("hit", 0, 0)
    );
    tables_agree(&mut warm, &mut plain, "deferred");
    assert_eq!(snapshot(&mut warm), snapshot(&mut plain));
    std::fs::remove_dir_all(&base).unwrap();
}
