//! The event writer end to end: what it writes is read back by tbscope's own reader with the
//! same values, every record's framing checks out, and the background thread keeps its
//! promises (flush makes bytes visible, close is idempotent, back-pressure bounds memory, a
//! file removed or replaced under the writer is re-created without losing queued records).
//!
//! The byte-level oracle is `common::reference_frames` (a byte-at-a-time framing loop that does
//! not share code with the writer); values come back through `event_file::read_file`.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use common::{reference_frames, run_child_test, TempDir};
use tbscope_core::event_file::{read_file, Cursor, FileChunk, Options as ReadOptions, Until};
use tbscope_core::histogram::{self, Values};
use tbscope_core::proto::HistogramProto;
use tbscope_core::writer::{Backlog, EventWriter, Options, ScalarStyle, WriteError};

const FILE: &str = "events.out.tfevents.1700000000.host.1.0";

fn read(path: &Path) -> FileChunk {
    read_file(
        path,
        Cursor::default(),
        Until::Live,
        &ReadOptions::default(),
        &HashMap::new(),
        &AtomicBool::new(false),
    )
}

/// `(tag, step, wall, value)` of every scalar row, in file order.
fn scalars(c: &FileChunk) -> Vec<(String, i64, f64, f64)> {
    let s = &c.tables.as_ref().unwrap().scalars;
    (0..s.value.len())
        .map(|i| {
            (
                c.tags[s.c.tag[i] as usize].name.clone(),
                s.c.step[i],
                s.c.wall[i],
                s.value[i],
            )
        })
        .collect()
}

/// Every byte of the file is whole records with valid CRCs; returns how many.
fn assert_clean_framing(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let scan = reference_frames(&bytes, 1 << 30);
    assert!(scan.gaps.is_empty(), "corrupt bytes: {:?}", scan.gaps);
    assert_eq!(scan.tail, None, "file ends inside a record");
    scan.records.len()
}

/// A writer that only writes when asked (no timer, no max_queue wake-ups).
fn lazy() -> Options {
    Options {
        flush_every: Duration::from_secs(3600),
        max_queue: usize::MAX,
        max_pending_bytes: 1 << 30,
    }
}

/// Waits (up to 5 s) for `cond`.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn scalars_read_back_identically() {
    let dir = TempDir::new("w-scalars");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, Options::default()).unwrap();
    let mut want = Vec::new();
    for i in 0..200i64 {
        let x = (i as f64 * 0.37).sin() * 1e3;
        let wall = 1.7e9 + i as f64 * 0.5;
        w.scalar("loss", x, Some(i), Some(wall), ScalarStyle::Simple)
            .unwrap();
        // simple_value is float32 on the wire.
        want.push(("loss".to_string(), i, wall, f64::from(x as f32)));
    }
    // Steps beyond one varint byte, negative steps, and no step at all (reads as 0).
    for (tag, step, style, x) in [
        ("big", Some(1i64 << 40), ScalarStyle::Simple, 1.5),
        ("neg", Some(-7), ScalarStyle::Simple, -2.5),
        ("none", None, ScalarStyle::Simple, 3.25),
        ("tf2", Some(9), ScalarStyle::Tensor32, 0.1),
        ("exact", Some(10), ScalarStyle::Tensor64, 0.1),
    ] {
        w.scalar(tag, x, step, Some(5.0), style).unwrap();
        let x = if style == ScalarStyle::Tensor64 {
            x
        } else {
            f64::from(x as f32)
        };
        want.push((tag.to_string(), step.unwrap_or(0), 5.0, x));
    }
    // One event holding many values, with tags of all lengths (multi-byte length varints).
    let long = "t".repeat(300);
    let tags = ["a", "bb", long.as_str(), ""];
    let vals = [1.0, f64::NAN, f64::INFINITY, -0.0];
    w.scalars(&tags, &vals, Some(11), Some(6.0)).unwrap();
    for (t, v) in tags.iter().zip(vals) {
        want.push((t.to_string(), 11, 6.0, v));
    }
    w.close().unwrap();

    let c = read(&path);
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    assert_eq!(c.file_version.as_deref(), Some("brain.Event:2"));
    let got = scalars(&c);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, g.1, g.2), (&w.0, w.1, w.2));
        assert!(
            g.3 == w.3 || (g.3.is_nan() && w.3.is_nan()),
            "{}: {} != {}",
            w.0,
            g.3,
            w.3
        );
    }
    assert_eq!(assert_clean_framing(&path), 1 + 200 + 5 + 1);
    assert_eq!(
        w.bytes_written(),
        std::fs::metadata(&path).unwrap().len(),
        "bytes_written counts every byte, file_version included"
    );
    assert_eq!(w.records_written(), 1 + 200 + 5 + 1);
}

#[test]
fn summaries_of_simple_values_equal_scalars() {
    // What the bindings' batched path does: a Summary body built from `put_simple_value`,
    // queued with `summary()`, must be the very record `scalars()` writes.
    let long = "m".repeat(130);
    let tags = ["loss", long.as_str(), "", "acc/top1"];
    let vals = [0.25, -1e30, f64::NAN, 7.0];
    let a = EventWriter::memory(lazy()).unwrap();
    let b = EventWriter::memory(lazy()).unwrap();
    let _ = (a.take().unwrap(), b.take().unwrap());
    a.scalars(&tags, &vals, Some(3), Some(9.5)).unwrap();
    let mut body = Vec::new();
    for (t, v) in tags.iter().zip(vals) {
        tbscope_core::proto::encode::put_simple_value(&mut body, t, v);
    }
    b.summary(&body, Some(3), Some(9.5)).unwrap();
    assert_eq!(a.take().unwrap(), b.take().unwrap());
}

#[test]
fn a_million_float32_values_histogram_like_the_reference() {
    // Large enough for the table, the four count arrays and two threads; counted again here
    // by binary search over the float64 edges (numpy's rule, written out).
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let vals: Vec<f32> = (0..1_000_003)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            // Mostly a wide spread of magnitudes, some exact zeros and negative zeros.
            match i % 97 {
                0 => 0.0,
                1 => -0.0,
                _ => ((u - 0.5) * 40.0).exp2().copysign(u - 0.5) as f32,
            }
        })
        .collect();
    let h = histogram::histogram(Values::F32(&vals), None, None).unwrap();
    let e = histogram::default_edges().edges();
    let mut want = vec![0u64; e.len() - 1];
    for &v in &vals {
        let v = f64::from(v);
        let r = e.partition_point(|&b| b <= v);
        if r > 0 && r < e.len() {
            want[r - 1] += 1;
        }
    }
    let first = want.iter().position(|&c| c > 0).unwrap();
    let last = want.iter().rposition(|&c| c > 0).unwrap();
    let expect: Vec<f64> = want[first - 1..=last].iter().map(|&c| c as f64).collect();
    assert_eq!(h.bucket, expect);
    assert_eq!(h.bucket_limit, e[first..=last + 1].to_vec());
    assert_eq!(h.num, vals.len() as f64);
    let (lo, hi) = vals
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    assert_eq!((h.min, h.max), (f64::from(lo), f64::from(hi)));
}

#[test]
fn histograms_and_tensors_read_back() {
    let dir = TempDir::new("w-hist");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, Options::default()).unwrap();
    let vals: Vec<f64> = (0..10_000)
        .map(|i| ((i * 7919) % 1000) as f64 / 100.0 - 5.0)
        .collect();
    let h = histogram::histogram(Values::F64(&vals), None, None).unwrap();
    w.histogram("weights", &h, Some(3), Some(7.0)).unwrap();
    let raw = HistogramProto {
        min: -1.0,
        max: 2.0,
        num: 3.0,
        sum: 1.5,
        sum_squares: 5.25,
        bucket_limit: vec![-1.0, 0.5, 2.0],
        bucket: vec![0.0, 2.0, 1.0],
    };
    w.histogram("raw", &raw, Some(4), Some(8.0)).unwrap();

    // A [2, 3] int16 tensor with plugin metadata naming a plugin tbscope does not know, so
    // it reads as a plain tensor.
    let data: Vec<u8> = [1i16, -2, 3, -4, 5, 32767]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let mut meta = vec![0x0a, 0x08, 0x0a, 0x06];
    meta.extend_from_slice(b"custom");
    w.tensor("t", &data, 5, &[2, 3], Some(&meta), Some(5), Some(9.0))
        .unwrap();
    // Mismatched sizes and string tensors are refused up front, with a reason.
    let e = w.tensor("bad", &data, 5, &[2, 2], Some(&meta), None, None);
    assert!(matches!(e, Err(WriteError::InvalidArgument(ref m)) if m.contains("needs 8")));
    let e = w.tensor("bad", b"x", 7, &[1], None, None, None);
    assert!(matches!(e, Err(WriteError::InvalidArgument(ref m)) if m.contains("DT_STRING")));
    w.close().unwrap();

    let c = read(&path);
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let hs = &c.tables.as_ref().unwrap().histograms;
    assert_eq!(hs.c.step, vec![3, 4]);
    assert_eq!(hs.c.wall, vec![7.0, 8.0]);
    for (row, want) in [(0usize, &h), (1, &raw)] {
        let got: Vec<f64> = (0..5).map(|s| hs.stats[s][row]).collect();
        assert_eq!(
            got,
            [want.min, want.max, want.num, want.sum, want.sum_squares]
        );
        let counts =
            &hs.count[hs.buckets.offsets[row] as usize..hs.buckets.offsets[row + 1] as usize];
        assert_eq!(counts, &want.bucket[..]);
        let right =
            &hs.right[hs.buckets.offsets[row] as usize..hs.buckets.offsets[row + 1] as usize];
        // The reader uses max as the last right edge, as TensorBoard does.
        let k = want.bucket_limit.len();
        assert_eq!(&right[..k - 1], &want.bucket_limit[..k - 1]);
    }
    assert_eq!(h.bucket.iter().sum::<f64>(), 10_000.0);

    let ts = &c.tables.as_ref().unwrap().tensors;
    assert_eq!(ts.dtype, vec![5]);
    assert_eq!(ts.shape.get(0), &[2, 3]);
    assert_eq!(ts.content.get(0), &data[..]);
    assert_eq!(ts.c.step, vec![5]);
    let t = c.tags.iter().find(|t| t.name == "t").unwrap();
    assert_eq!(t.meta.as_ref().unwrap().plugin_name, "custom");
    assert_eq!(assert_clean_framing(&path), 4);
}

#[test]
fn raw_summaries_and_events_pass_through() {
    let dir = TempDir::new("w-raw");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, Options::default()).unwrap();
    // Summary { value { tag: "s", simple_value: 2.0 } }
    let mut value = vec![0x0a, 0x01, b's', 0x15];
    value.extend_from_slice(&2.0f32.to_le_bytes());
    let mut summary = vec![0x0a, value.len() as u8];
    summary.extend_from_slice(&value);
    w.summary(&summary, Some(12), Some(1.0)).unwrap();
    // Event { wall_time: 2.0, step: 13, summary } encoded by hand.
    let mut ev = vec![0x09];
    ev.extend_from_slice(&2.0f64.to_le_bytes());
    ev.extend_from_slice(&[0x10, 13, 0x2a, summary.len() as u8]);
    ev.extend_from_slice(&summary);
    w.event(&ev).unwrap();
    w.close().unwrap();
    let got = scalars(&read(&path));
    assert_eq!(
        got,
        vec![
            ("s".to_string(), 12, 1.0, 2.0),
            ("s".to_string(), 13, 2.0, 2.0)
        ]
    );
    // The event went out byte for byte.
    let bytes = std::fs::read(&path).unwrap();
    let last = reference_frames(&bytes, 1 << 20).records[2];
    assert_eq!(&bytes[last.0 + 12..last.0 + last.1 - 4], &ev[..]);
}

#[test]
fn never_overwrites_and_needs_the_directory() {
    let dir = TempDir::new("w-excl");
    let path = dir.write(FILE, b"precious");
    match EventWriter::create(&path, Options::default()) {
        Err(WriteError::Io {
            source, message, ..
        }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
            assert!(message.contains("never overwrite"), "{message}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    match EventWriter::create(&dir.path().join("missing/x.tfevents"), Options::default()) {
        Err(WriteError::Io {
            source, message, ..
        }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert!(message.contains("directory does not exist"), "{message}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn file_is_valid_from_the_start_and_flush_makes_bytes_visible() {
    let dir = TempDir::new("w-flush");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, lazy()).unwrap();
    // The file_version record is on disk before create returns.
    let first = std::fs::metadata(&path).unwrap().len();
    assert_eq!(first, w.bytes_written());
    assert_eq!(read(&path).file_version.as_deref(), Some("brain.Event:2"));
    for i in 0..100 {
        w.scalar("x", i as f64, Some(i), None, ScalarStyle::Simple)
            .unwrap();
    }
    // Nothing asked for a write yet.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first);
    assert!(w.pending_bytes() > 0);
    w.flush(false).unwrap();
    assert_eq!(w.pending_bytes(), 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.bytes_written());
    assert_eq!(scalars(&read(&path)).len(), 100);
    w.scalar("x", 1.0, Some(100), None, ScalarStyle::Simple)
        .unwrap();
    w.flush(true).unwrap();
    assert_eq!(scalars(&read(&path)).len(), 101);
    assert_eq!(w.records_written(), 102);
}

#[test]
fn max_queue_and_timer_wake_the_thread() {
    let dir = TempDir::new("w-wake");
    // max_queue: the fifth record wakes the thread, no flush needed.
    let path = dir.path().join("a.tfevents");
    let w = EventWriter::create(
        &path,
        Options {
            max_queue: 5,
            ..lazy()
        },
    )
    .unwrap();
    for i in 0..4 {
        w.scalar("x", 0.0, Some(i), None, ScalarStyle::Simple)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(w.records_written(), 1, "4 records are below max_queue");
    w.scalar("x", 0.0, Some(4), None, ScalarStyle::Simple)
        .unwrap();
    eventually("max_queue records on disk", || {
        scalars(&read(&path)).len() == 5
    });

    // flush_secs: one record, written by the timer alone.
    let path = dir.path().join("b.tfevents");
    let w = EventWriter::create(
        &path,
        Options {
            flush_every: Duration::from_millis(30),
            ..lazy()
        },
    )
    .unwrap();
    w.scalar("y", 0.0, Some(0), None, ScalarStyle::Simple)
        .unwrap();
    eventually("the timer's write", || scalars(&read(&path)).len() == 1);
}

#[test]
fn close_is_idempotent_and_final() {
    let dir = TempDir::new("w-close");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, lazy()).unwrap();
    w.scalar("x", 1.0, Some(0), None, ScalarStyle::Simple)
        .unwrap();
    assert!(!w.is_closed());
    w.close().unwrap();
    assert!(w.is_closed());
    w.close().unwrap();
    w.flush(false).unwrap();
    match w.scalar("x", 1.0, Some(1), None, ScalarStyle::Simple) {
        Err(WriteError::Closed(m)) => assert!(m.contains("writer is closed"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(scalars(&read(&path)).len(), 1);
    assert_eq!(assert_clean_framing(&path), 2);
}

#[test]
fn dropping_flushes() {
    let dir = TempDir::new("w-drop");
    let path = dir.path().join(FILE);
    {
        let w = EventWriter::create(&path, lazy()).unwrap();
        for i in 0..1000 {
            w.scalar("x", 1.0, Some(i), None, ScalarStyle::Simple)
                .unwrap();
        }
    }
    assert_eq!(scalars(&read(&path)).len(), 1000);
}

#[test]
fn back_pressure_bounds_what_waits() {
    let dir = TempDir::new("w-bp");
    let path = dir.path().join(FILE);
    let cap = 4096;
    let w = EventWriter::create(
        &path,
        Options {
            max_pending_bytes: cap,
            ..lazy()
        },
    )
    .unwrap();
    let mut full = 0;
    for i in 0..20_000 {
        if w.scalar("bp", i as f64, Some(i), None, ScalarStyle::Simple)
            .unwrap()
            == Backlog::Full
        {
            full += 1;
            w.relieve().unwrap();
        }
        // Never more than the cap plus the record that crossed it.
        assert!(
            w.pending_bytes() <= cap as u64 + 64,
            "{}",
            w.pending_bytes()
        );
    }
    assert!(full > 0, "20,000 records must cross a 4 KB cap");
    w.close().unwrap();
    let got = scalars(&read(&path));
    assert_eq!(got.len(), 20_000);
    assert!(got.iter().enumerate().all(|(i, r)| r.1 == i as i64));
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = TempDir::new("w-threads");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, Options::default()).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let w = &w;
            s.spawn(move || {
                for i in 0..5000 {
                    let tag = format!("thread{t}");
                    w.scalar(&tag, i as f64, Some(i), None, ScalarStyle::Simple)
                        .unwrap();
                }
            });
        }
    });
    w.close().unwrap();
    let got = scalars(&read(&path));
    assert_eq!(got.len(), 20_000);
    for t in 0..4 {
        let tag = format!("thread{t}");
        let steps: Vec<i64> = got.iter().filter(|r| r.0 == tag).map(|r| r.1).collect();
        assert_eq!(steps, (0..5000).collect::<Vec<_>>(), "{tag} in order");
    }
    assert_eq!(assert_clean_framing(&path), 20_001);
}

#[test]
fn removed_file_is_recreated_with_queued_records() {
    let dir = TempDir::new("w-rm");
    let run = dir.path().join("logs/run1");
    std::fs::create_dir_all(&run).unwrap();
    let path = run.join(FILE);
    let w = EventWriter::create(&path, lazy()).unwrap();
    w.scalar("x", 1.0, Some(0), None, ScalarStyle::Simple)
        .unwrap();
    w.flush(false).unwrap();
    // `rm -rf logs` while training runs.
    std::fs::remove_dir_all(dir.path().join("logs")).unwrap();
    w.scalar("x", 2.0, Some(1), None, ScalarStyle::Simple)
        .unwrap();
    w.scalar("x", 3.0, Some(2), None, ScalarStyle::Simple)
        .unwrap();
    match w.flush(false) {
        Err(WriteError::Replaced { message, .. }) => {
            assert!(message.contains("was removed"), "{message}");
            assert!(message.contains("re-created"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Reported once; the writer goes on.
    w.scalar("x", 4.0, Some(3), None, ScalarStyle::Simple)
        .unwrap();
    w.close().unwrap();
    let c = read(&path);
    assert_eq!(c.file_version.as_deref(), Some("brain.Event:2"));
    let steps: Vec<i64> = scalars(&c).iter().map(|r| r.1).collect();
    assert_eq!(steps, vec![1, 2, 3]);
    assert_eq!(assert_clean_framing(&path), 4);
    assert_eq!(w.path().unwrap(), path);
}

#[test]
fn replaced_file_is_left_alone() {
    let dir = TempDir::new("w-replaced");
    let path = dir.path().join(FILE);
    let w = EventWriter::create(&path, lazy()).unwrap();
    w.scalar("x", 1.0, Some(0), None, ScalarStyle::Simple)
        .unwrap();
    w.flush(false).unwrap();
    // Someone moves another file over ours.
    let other = dir.write("other", b"someone else's bytes");
    std::fs::rename(&other, &path).unwrap();
    w.scalar("x", 2.0, Some(1), None, ScalarStyle::Simple)
        .unwrap();
    let next = {
        let mut s = path.clone().into_os_string();
        s.push(".1");
        std::path::PathBuf::from(s)
    };
    match w.flush(false) {
        Err(WriteError::Replaced { message, .. }) => {
            assert!(message.contains("replaced by another file"), "{message}");
            assert!(message.contains(&next.display().to_string()), "{message}");
        }
        other => panic!("{other:?}"),
    }
    w.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's bytes");
    assert_eq!(w.path().unwrap(), next);
    let steps: Vec<i64> = scalars(&read(&next)).iter().map(|r| r.1).collect();
    assert_eq!(steps, vec![1]);
}

#[test]
fn memory_mode_takes_a_valid_file() {
    let dir = TempDir::new("w-mem");
    let w = EventWriter::memory(Options::default()).unwrap();
    w.scalar("m", 1.0, Some(0), Some(1.0), ScalarStyle::Simple)
        .unwrap();
    let mut all = w.take().unwrap();
    w.scalar("m", 2.0, Some(1), Some(2.0), ScalarStyle::Simple)
        .unwrap();
    all.extend(w.take().unwrap());
    assert!(w.take().unwrap().is_empty());
    assert_eq!(w.bytes_written(), all.len() as u64);
    assert_eq!(w.records_written(), 3);
    let path = dir.write(FILE, &all);
    assert_eq!(assert_clean_framing(&path), 3);
    let c = read(&path);
    assert_eq!(c.file_version.as_deref(), Some("brain.Event:2"));
    assert_eq!(
        scalars(&c),
        vec![("m".into(), 0, 1.0, 1.0), ("m".into(), 1, 2.0, 2.0)]
    );
    // take() on a file writer says what to do instead.
    let fw = EventWriter::create(&dir.path().join("f.tfevents"), lazy()).unwrap();
    assert!(matches!(fw.take(), Err(WriteError::InvalidArgument(m)) if m.contains("memory mode")));
}

/// Run by [`a_torn_write_is_cut_back`] in a child process: a file size limit makes a batch
/// write stop part-way (the limit is process-wide, so it must not touch the other tests).
#[cfg(target_os = "linux")]
#[test]
#[ignore = "runs only as the child of a_torn_write_is_cut_back"]
fn torn_write_child() {
    let Some(dir) = std::env::var_os("TBSCOPE_TORN_WRITE_DIR") else {
        return;
    };
    let path = Path::new(&dir).join(FILE);
    let w = EventWriter::create(&path, lazy()).unwrap();
    let first = w.bytes_written();
    for i in 0..100 {
        w.scalar("x", i as f64, Some(i), Some(1.0), ScalarStyle::Simple)
            .unwrap();
    }
    let queued = w.pending_bytes();
    let set_limit = |bytes: libc::rlim_t| {
        let lim = libc::rlimit {
            rlim_cur: bytes,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: plain system calls with valid arguments; SIGXFSZ would otherwise kill the
        // process instead of failing the write with EFBIG.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
        }
    };
    // Room for the file_version record and about half the batch.
    set_limit(first + queued / 2);
    match w.flush(false) {
        Err(WriteError::Io { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::EFBIG))
        }
        other => panic!("{other:?}"),
    }
    // The half-written batch is gone from the file, and all of it is still queued.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first);
    assert_eq!(w.pending_bytes(), queued);
    set_limit(libc::RLIM_INFINITY);
    w.close().unwrap();
    assert_eq!(assert_clean_framing(&path), 101);
    let steps: Vec<i64> = scalars(&read(&path)).iter().map(|r| r.1).collect();
    assert_eq!(steps, (0..100).collect::<Vec<_>>());
}

#[cfg(target_os = "linux")]
#[test]
fn a_torn_write_is_cut_back() {
    let dir = TempDir::new("w-torn");
    run_child_test(
        "torn_write_child",
        &[("TBSCOPE_TORN_WRITE_DIR", dir.path().as_os_str())],
    );
}

#[test]
fn removal_found_by_the_thread_is_still_reported_to_flush() {
    let dir = TempDir::new("w-rm-bg");
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let path = run.join(FILE);
    let w = EventWriter::create(
        &path,
        Options {
            max_queue: 1,
            ..lazy()
        },
    )
    .unwrap();
    std::fs::remove_dir_all(&run).unwrap();
    // max_queue = 1: the thread writes this record on its own and finds the file gone.
    w.scalar("x", 1.0, Some(0), None, ScalarStyle::Simple)
        .unwrap();
    // The re-created file's own file_version record, plus ours.
    eventually("the background write", || w.records_written() == 3);
    assert!(matches!(w.flush(false), Err(WriteError::Replaced { .. })));
    w.flush(false).unwrap();
    w.close().unwrap();
    assert_eq!(scalars(&read(&path)).len(), 1);
}
