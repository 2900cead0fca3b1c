//! The cache from the Rust side: a reader restored from a cache directory returns what a fresh
//! reader returns, reads only what was appended, and drops a run whose file was replaced.
//! (tests/python/test_cache.py covers every kind, filters, processes and damage.)

mod common;

use std::sync::atomic::AtomicBool;

use common::cached::{
    append_steps, cached, events, five_runs, fresh, settle, snapshot, tables_agree, tmp, EVENT_FILE,
};
use common::{opts, record};
use tbscope_core::{CachedReader, Reader, Scan};

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

/// `Event { wall_time, step, session_log = 7 { status, checkpoint_path, msg } }`.
fn session_log_event(wall: f64, step: i64, status: u64, path: &str, msg: &str) -> Vec<u8> {
    let mut log = Vec::new();
    common::key(&mut log, 1, 0);
    common::varint(&mut log, status);
    common::bytes_field(&mut log, 2, path.as_bytes());
    common::bytes_field(&mut log, 3, msg.as_bytes());
    let mut ev = Vec::new();
    common::key(&mut ev, 1, 1);
    ev.extend_from_slice(&wall.to_le_bytes());
    common::key(&mut ev, 2, 0);
    common::varint(&mut ev, step as u64);
    common::bytes_field(&mut ev, 7, &log);
    ev
}

/// `Event { wall_time, step, log_message = 6 { level, message } }`.
fn log_message_event(wall: f64, step: i64, level: u64, message: &str) -> Vec<u8> {
    let mut m = Vec::new();
    common::key(&mut m, 1, 0);
    common::varint(&mut m, level);
    common::bytes_field(&mut m, 2, message.as_bytes());
    let mut ev = Vec::new();
    common::key(&mut ev, 1, 1);
    ev.extend_from_slice(&wall.to_le_bytes());
    common::key(&mut ev, 2, 0);
    common::varint(&mut ev, step as u64);
    common::bytes_field(&mut ev, 6, &m);
    ev
}

fn logs_of(r: &mut dyn Scan) -> String {
    format!("{:?}", r.logs().unwrap())
}

/// TF1's session logs and log messages live in the runs' state, not in rows: a restored
/// generation (state still encoded, then decoded) and an update that appends more give the
/// logs table a fresh read gives, messages and checkpoint paths included; the scan's run and
/// step filters apply to it.
#[test]
fn session_logs_and_log_messages_survive_the_cache() {
    let base = tmp("logs");
    let root = base.join("logdir");
    let cache = base.join("cache");
    let mut bytes = events("train", 0..5, true);
    bytes.extend(record(&session_log_event(1000.0, 0, 1, "", "started")));
    bytes.extend(record(&log_message_event(
        1001.0,
        2,
        30,
        "slow input — ünïcode",
    )));
    bytes.extend(record(&session_log_event(
        1002.0,
        4,
        3,
        "/ckpt/model-4",
        "",
    )));
    std::fs::create_dir_all(root.join("train")).unwrap();
    std::fs::create_dir_all(root.join("eval")).unwrap();
    let f = root.join("train").join("events.out.tfevents.1.x");
    std::fs::write(&f, &bytes).unwrap();
    let mut eval = events("eval", 0..3, true);
    eval.extend(record(&log_message_event(1003.0, 1, 40, "eval failed")));
    std::fs::write(root.join("eval").join("events.out.tfevents.1.x"), eval).unwrap();
    settle(&root);

    let mut cold = cached(&root, &cache);
    assert_eq!(cold.cache_info().status, "miss");
    let want = logs_of(&mut fresh(&root));
    assert!(want.contains("/ckpt/model-4") && want.contains("ünïcode") && want.contains("WARN"));
    assert_eq!(logs_of(&mut cold), want);

    let mut warm = cached(&root, &cache);
    assert_eq!(warm.cache_info().status, "hit");
    assert!(warm.state_pending());
    assert_eq!(logs_of(&mut warm), want);
    assert!(!warm.state_pending());

    // Filters: one run, a step range.
    let mut o = opts(false, true);
    o.runs = Some(regex::Regex::new("^train$").unwrap());
    o.file.step_lo = Some(1);
    o.file.step_hi = Some(5);
    let mut filtered = CachedReader::new(&root, o.clone(), &cache).unwrap();
    filtered.load(&AtomicBool::new(false)).unwrap();
    let mut plain = Reader::new(&root, o).unwrap();
    plain.load(&AtomicBool::new(false)).unwrap();
    let got = logs_of(&mut filtered);
    assert_eq!(got, logs_of(&mut plain));
    assert_eq!(filtered.logs().unwrap().num_rows(), 2);

    // Appended: the restored events and the new ones, in file order.
    bytes.extend(record(&session_log_event(1004.0, 6, 2, "", "stopped")));
    std::fs::write(&f, &bytes).unwrap();
    let mut r = cached(&root, &cache);
    assert_eq!(r.cache_info().status, "updated");
    let want = logs_of(&mut fresh(&root));
    assert!(want.contains("stopped"));
    assert_eq!(logs_of(&mut r), want);
    assert_eq!(logs_of(&mut cached(&root, &cache)), want);
    std::fs::remove_dir_all(&base).unwrap();
}

/// A cache written in another layout (main's single-file cache also numbered its layout 3) is
/// never decoded as this one: its manifest is refused by number and the logdir read again.
#[test]
fn manifest_of_another_format_is_read_again() {
    let base = tmp("format");
    let root = base.join("logdir");
    let cache = base.join("cache");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("events.out.tfevents.1.x"),
        events(".", 0..10, true),
    )
    .unwrap();
    cached(&root, &cache);
    let current = std::fs::read_to_string(cache.join("CURRENT")).unwrap();
    let manifest = cache.join(current.trim()).join("manifest");
    let mut m = std::fs::read(&manifest).unwrap();
    assert_eq!(u32::from_le_bytes(m[8..12].try_into().unwrap()), 4);
    m[8..12].copy_from_slice(&3u32.to_le_bytes());
    let n = m.len() - 4;
    let crc = crc32c::crc32c(&m[..n]);
    m[n..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&manifest, m).unwrap();
    let mut r = cached(&root, &cache);
    let info = r.cache_info();
    assert_eq!(info.status, "miss");
    assert!(
        info.warnings.iter().any(|w| w.contains("cache format 3")),
        "{:?}",
        info.warnings
    );
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)));
    assert_eq!(cached(&root, &cache).cache_info().status, "hit");
    std::fs::remove_dir_all(&base).unwrap();
}

/// A change to a few runs of a cached logdir whose directories did not change is found by the
/// stat check alone and re-reads only those runs (issue 15); a change the directories show (a
/// file or run added or deleted) goes through discovery. Either way the result is a cold
/// read's, and so is the next warm open's.
#[test]
fn incremental_refresh_equals_a_cold_read() {
    let (base, root, cache) = five_runs("incremental");
    let file = |run: &str| root.join(run).join(EVENT_FILE);
    let first = cached(&root, &cache);
    assert_eq!(first.cache_info().status, "miss");
    let check = |what: &str, status: &str, rechecked: Option<usize>, dropped: usize| {
        let mut plain = fresh(&root);
        let mut r = cached(&root, &cache);
        let info = r.cache_info();
        assert!(info.warnings.is_empty(), "{what}: {:?}", info.warnings);
        assert_eq!(
            (info.status, info.runs_dropped),
            (status, dropped),
            "{what}"
        );
        if let Some(n) = rechecked {
            assert_eq!(info.runs_rechecked, n, "{what}: runs looked at again");
        }
        tables_agree(&mut r, &mut plain, what);
        assert_eq!(snapshot(&mut r), snapshot(&mut plain), "{what}");
        // The generation it published answers the next open alone: when no directory changed,
        // from its stored tables (of which the statistics were carried over for the runs not
        // read again).
        let mut warm = cached(&root, &cache);
        assert_eq!(warm.cache_info().status, "hit", "{what}: next open");
        tables_agree(&mut warm, &mut plain, what);
        if rechecked.is_some() {
            assert!(
                warm.state_pending(),
                "{what}: answered from the stored tables"
            );
        }
        assert_eq!(
            snapshot(&mut warm),
            snapshot(&mut plain),
            "{what}: next open"
        );
    };
    let append = |run: &str, steps: std::ops::Range<i64>| append_steps(&root, run, steps);

    // Appended bytes in one run: only that run is looked at, only its new bytes read.
    append("s0/t1", 40..55);
    check("appended", "updated", Some(1), 0);
    // Two runs appended to.
    append("s0/t0", 40..45);
    append("s1/t1", 40..47);
    check("two appended", "updated", Some(2), 0);
    // Truncated in place (same inode, shorter): the run is read again from the start.
    std::fs::write(file("s0/t2"), events("s0/t2", 0..10, true)).unwrap();
    check("truncated", "updated", Some(1), 1);
    // The same bytes written again in place: the mtime moved, the size did not, so the run is
    // looked at and its file continued from the saved cursor (as a reload does).
    let f = file("s1/t0");
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::write(&f, events("s1/t0", 0..40, true)).unwrap();
    assert_eq!(std::fs::metadata(&f).unwrap().len(), len);
    check("rewritten, same size", "updated", Some(1), 0);
    // Replaced by another file (a rename: new inode, and the directory changed).
    let tmpf = root.join("s0/t0/tmp");
    std::fs::write(&tmpf, events("s0/t0", 100..130, true)).unwrap();
    std::fs::rename(&tmpf, file("s0/t0")).unwrap();
    check("replaced", "updated", None, 1);
    // A new file in an existing run, after the one it has.
    std::fs::write(
        root.join("s1/t1/events.out.tfevents.2.x"),
        events("s1/t1", 100..120, true),
    )
    .unwrap();
    check("new file", "updated", None, 0);
    // A new run.
    std::fs::create_dir_all(root.join("s1/t9")).unwrap();
    std::fs::write(file("s1/t9"), events("s1/t9", 0..12, true)).unwrap();
    check("new run", "updated", None, 0);
    // A deleted run.
    std::fs::remove_dir_all(root.join("s0/t1")).unwrap();
    check("deleted run", "updated", None, 1);
    std::fs::remove_dir_all(&base).unwrap();
}

/// A refresh that decodes only the runs that moved (issue 15) leaves a reader that answers as
/// a cold read does, whatever follows: another refresh of the same reader (from the generation
/// it just published), one whose generation cannot be published (the other runs' state is then
/// decoded from the generation it started from), several kinds of change at once, and every
/// table asked for afterwards.
#[test]
fn partial_refresh_follows_with_any_next_step() {
    let (base, root, cache) = five_runs("partial");
    let file = |run: &str| root.join(run).join(EVENT_FILE);
    assert_eq!(cached(&root, &cache).cache_info().status, "miss");
    let append = |run: &str, steps: std::ops::Range<i64>| append_steps(&root, run, steps);
    let agree = |r: &mut CachedReader, what: &str| {
        let mut plain = fresh(&root);
        tables_agree(r, &mut plain, what);
        assert_eq!(snapshot(r), snapshot(&mut plain), "{what}");
        assert_eq!(logs_of(r), logs_of(&mut plain), "{what}: logs");
        assert_eq!(
            format!("{:?}", r.report().unwrap()),
            format!("{:?}", plain.report()),
            "{what}: report"
        );
    };
    let reload = |r: &mut CachedReader| r.load(&AtomicBool::new(false)).unwrap();

    // One reader, refreshed twice: the second refresh continues from the generation the
    // first published (its state still encoded, its stored tables carried over again).
    let mut r = cached(&root, &cache);
    assert_eq!(r.cache_info().status, "hit");
    append("s0/t1", 40..55);
    reload(&mut r);
    let info = r.cache_info();
    assert_eq!(
        (info.status, info.written, info.runs_rechecked),
        ("updated", true, 1)
    );
    assert!(r.state_pending(), "answered from the generation it wrote");
    // New extremes and a new last value in two runs, a third truncated in place (read again
    // from its start), all in one refresh.
    append("s0/t0", 40..70);
    append("s1/t1", 40..42);
    std::fs::write(file("s0/t2"), events("s0/t2", 0..7, true)).unwrap();
    reload(&mut r);
    let info = r.cache_info();
    assert_eq!(
        (
            info.status,
            info.written,
            info.runs_rechecked,
            info.runs_dropped
        ),
        ("updated", true, 3, 1)
    );
    agree(&mut r, "two refreshes of one reader");
    let mut warm = cached(&root, &cache);
    assert_eq!(warm.cache_info().status, "hit");
    agree(&mut warm, "the next open");

    // A refresh whose generation cannot be written (the cache directory became a file): the
    // reader still answers as a cold read, every run's state taken from the old generation.
    let mut r = cached(&root, &cache);
    assert_eq!(r.cache_info().status, "hit");
    let aside = base.join("cache-aside");
    std::fs::rename(&cache, &aside).unwrap();
    std::fs::write(&cache, b"not a directory").unwrap();
    append("s1/t0", 40..60);
    append("s0/t1", 55..56);
    reload(&mut r);
    let info = r.cache_info();
    assert_eq!(
        (info.status, info.written, info.runs_rechecked),
        ("updated", false, 2)
    );
    assert!(
        info.warnings.iter().any(|w| w.contains("not written")),
        "{:?}",
        info.warnings
    );
    assert!(!r.state_pending());
    agree(&mut r, "not published");
    // Writable again: the next refresh (a full one: the state is decoded) publishes.
    std::fs::remove_file(&cache).unwrap();
    std::fs::rename(&aside, &cache).unwrap();
    append("s0/t2", 7..9);
    reload(&mut r);
    assert_eq!(r.cache_info().status, "updated");
    assert!(r.cache_info().written);
    agree(&mut r, "published again");
    let mut warm = cached(&root, &cache);
    assert_eq!(warm.cache_info().status, "hit");
    agree(&mut warm, "the next open, after the failed write");
    std::fs::remove_dir_all(&base).unwrap();
}

/// Deferred writes (`tbscope serve`): a load publishes nothing; the write taken afterwards
/// runs without the reader while the reader loads more, and each generation it publishes
/// restores to what a fresh reader of the logdir as of its take returns, later bytes read on
/// top. An abandoned write publishes nothing and leaves no temporary directory.
#[test]
fn deferred_write_runs_beside_loads() {
    let base = tmp("deferred-write");
    let root = base.join("logdir");
    let cache = base.join("cache");
    let file = root.join("a").join("events.out.tfevents.1.x");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(&file, events("a", 0..50, true)).unwrap();
    let no = AtomicBool::new(false);

    let mut r = CachedReader::new(&root, opts(false, true), &cache).unwrap();
    r.defer_writes(true);
    r.load(&no).unwrap();
    assert!(!r.cache_info().written && !cache.join("CURRENT").exists());
    let abandoned = r.take_write().expect("a write to take");
    let done = abandoned.run(&AtomicBool::new(true));
    assert!(done.generation().is_none());
    r.finish_write(done);
    assert!(!cache.join("CURRENT").exists());

    let write = r
        .take_write()
        .expect("the abandoned write left the cache behind");
    assert!(r.take_write().is_none(), "one write at a time");
    // The logdir grows and the reader reads it while the write is out.
    let mut more = events("a", 50..80, false);
    let mut all = std::fs::read(&file).unwrap();
    all.append(&mut more);
    std::fs::write(&file, &all).unwrap();
    r.load(&no).unwrap();
    let done = write.run(&no);
    let generation = done.generation().map(str::to_string).expect("published");
    r.finish_write(done);
    assert_eq!(
        r.cache_info().generation.as_deref(),
        Some(generation.as_str())
    );
    assert!(std::fs::read_dir(&cache).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("tmp-")));
    // That generation holds steps 0..50; a reader restored from it reads the rest.
    let mut restored = cached(&root, &cache);
    assert_eq!(restored.cache_info().status, "updated");
    assert_eq!(snapshot(&mut restored), snapshot(&mut fresh(&root)));
    // The load after the take left the cache behind again: the next write holds everything.
    let write = r.take_write().expect("behind again");
    let done = write.run(&no);
    assert!(done.generation().is_some());
    r.finish_write(done);
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)));
    let mut warm = cached(&root, &cache);
    assert_eq!(warm.cache_info().status, "hit");
    assert_eq!(snapshot(&mut warm), snapshot(&mut fresh(&root)));
    let _ = std::fs::remove_dir_all(&base);
}

/// A change the directories show (a run added, nested or not; an event file added to a run; a
/// run removed or renamed) lists again only the directories that changed and looks only at
/// their runs, not a discovery of the logdir (issue 15); the answer is a cold read's, and so
/// is the next open's. What cannot be told that way (a symlink) still takes the discovery.
#[test]
fn a_changed_directory_is_listed_again_alone() {
    let (base, root, cache) = five_runs("relist");
    assert_eq!(cached(&root, &cache).cache_info().status, "miss");
    let add_run = |run: &str, steps: std::ops::Range<i64>| {
        std::fs::create_dir_all(root.join(run)).unwrap();
        std::fs::write(root.join(run).join(EVENT_FILE), events(run, steps, true)).unwrap();
    };
    let runs = |r: &mut CachedReader| r.run_names().unwrap().len();
    // (rechecked, dropped, directories listed)
    let check = |what: &str, want: (usize, usize, usize)| {
        let mut plain = fresh(&root);
        let mut r = cached(&root, &cache);
        let info = r.cache_info();
        assert!(info.warnings.is_empty(), "{what}: {:?}", info.warnings);
        assert_eq!((info.status, info.written), ("updated", true), "{what}");
        assert_eq!(
            (info.runs_rechecked, info.runs_dropped, info.dirs_listed),
            want,
            "{what}: (runs looked at, dropped, directories listed)"
        );
        tables_agree(&mut r, &mut plain, what);
        assert_eq!(snapshot(&mut r), snapshot(&mut plain), "{what}");
        assert_eq!(logs_of(&mut r), logs_of(&mut plain), "{what}: logs");
        assert_eq!(
            format!("{:?}", r.report().unwrap()),
            format!("{:?}", plain.report()),
            "{what}: report"
        );
        // The directories just changed are listed again next time (a change in the same
        // clock tick would not show): nothing new, so nothing read.
        let mut again = cached(&root, &cache);
        let info = again.cache_info();
        assert_eq!((info.status, info.runs_rechecked), ("hit", 0), "{what}");
        tables_agree(&mut again, &mut plain, what);
        // Settled (every directory's mtime moved back: all listed again once, and kept).
        settle(&root);
        let info = cached(&root, &cache).cache_info();
        assert_eq!(
            (info.status, info.written),
            ("hit", true),
            "{what}: settled"
        );
        let mut warm = cached(&root, &cache);
        let info = warm.cache_info();
        assert_eq!((info.status, info.dirs_listed), ("hit", 0), "{what}: next");
        assert!(
            warm.state_pending(),
            "{what}: answered from the stored tables"
        );
        assert_eq!(runs(&mut warm), plain.run_names().len(), "{what}");
        assert_eq!(
            snapshot(&mut warm),
            snapshot(&mut plain),
            "{what}: next open"
        );
    };

    // A run in a new directory: the root listed again, the new one walked.
    add_run("s2", 0..9);
    check("new run in a new directory", (1, 0, 2));
    // A run in an existing sweep, and one three directories down a new one.
    add_run("s1/t5", 0..7);
    check("new run beside others", (1, 0, 2));
    add_run("s3/a/b", 3..8);
    check("new nested run", (1, 0, 4));
    // A second event file in a run (a restart): only that run's directory.
    std::fs::write(
        root.join("s0/t1/events.out.tfevents.2.x"),
        events("s0/t1", 40..60, true),
    )
    .unwrap();
    check("new file in a run", (1, 0, 1));
    // Removed: its rows and facts dropped, nothing read.
    std::fs::remove_dir_all(root.join("s0/t2")).unwrap();
    check("run removed", (0, 1, 1));
    // Renamed: the old name gone, the new one read.
    std::fs::rename(root.join("s1/t0"), root.join("s1/t7")).unwrap();
    check("run renamed", (1, 1, 2));
    // A sweep renamed with its runs, and a run appended to elsewhere, at once.
    std::fs::rename(root.join("s0"), root.join("s9")).unwrap();
    append_steps(&root, "s1/t1", 40..44);
    check("sweep renamed", (3, 2, 4));
    // A symlink: its target may change without its directory showing it; the full discovery.
    std::os::unix::fs::symlink(root.join("s1/t7"), root.join("s1/link")).unwrap();
    let mut r = cached(&root, &cache);
    let info = r.cache_info();
    assert_eq!(info.runs_rechecked, runs(&mut r), "a symlink: every run");
    assert_eq!(snapshot(&mut r), snapshot(&mut fresh(&root)), "a symlink");
    std::fs::remove_dir_all(&base).unwrap();
}
