//! A reader following files while writers append to them, as in a live training run.
//!
//! Writers flush at arbitrary byte positions (a buffered writer can cut a record anywhere, down
//! to one byte), so each test appends pieces of random size and calls `Reader::load` after some
//! or all of them. The invariants checked after every load:
//! - every record that is complete on disk has been returned exactly once, in file order, and no
//!   incomplete record has (union of rows across loads == the completed prefix);
//! - a file that currently ends inside a record has exactly one Truncated entry in the report,
//!   covering exactly the bytes of the unfinished record, and the entry disappears once the
//!   record is completed;
//! - no Corrupt/Warning/Error entries for clean data, and for damaged data the Corrupt entries
//!   tile exactly the damaged bytes, however the damage was split across loads.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use common::*;
use tbscope_core::event_file::Severity;
use tbscope_core::load::Reader;
use tbscope_core::Kind;

/// One file being written.
struct Source {
    /// Path relative to the logdir, as the reader reports it.
    rel: String,
    bytes: Vec<u8>,
    exp: Vec<Expected>,
    /// Bytes written so far (`None`: the file does not exist yet).
    written: Option<usize>,
    /// Damaged byte ranges (for the Corrupt check); records overlapping them are not expected.
    damage: Vec<(usize, usize)>,
}

impl Source {
    fn new(rel: &str, bytes: Vec<u8>, exp: Vec<Expected>) -> Source {
        Source {
            rel: rel.to_string(),
            bytes,
            exp,
            written: None,
            damage: Vec::new(),
        }
    }

    /// Appends up to `n` more bytes (creating the file on the first call).
    fn append(&mut self, root: &std::path::Path, n: usize) {
        let path: PathBuf = root.join(&self.rel);
        let from = self.written.unwrap_or(0);
        let to = from.saturating_add(n).min(self.bytes.len());
        if self.written.is_none() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&self.bytes[from..to]).unwrap();
        self.written = Some(to);
    }

    fn done(&self) -> bool {
        self.written == Some(self.bytes.len())
    }

    /// Rows of the records complete on disk, in order.
    fn completed_rows(&self) -> Vec<(String, i64, f64, i64)> {
        let w = self.written.unwrap_or(0);
        let whole: Vec<Expected> = self
            .exp
            .iter()
            .filter(|e| e.offset + e.span <= w)
            .cloned()
            .collect();
        expected_rows(&whole)
    }

    /// Where the unfinished record starts, if the file currently ends inside one.
    fn tail(&self) -> Option<(u64, u64)> {
        let w = self.written?;
        let last_end = self
            .exp
            .iter()
            .map(|e| e.offset + e.span)
            .filter(|&end| end <= w)
            .max();
        // The file_version record occupies [0, exp[0].offset).
        let fv_end = self.exp.first().map_or(self.bytes.len(), |e| e.offset);
        let end = last_end.unwrap_or(if w >= fv_end { fv_end } else { 0 });
        (w > end).then(|| (end as u64, (w - end) as u64))
    }
}

/// A piece size: mostly tiny (a byte to a header's worth), sometimes a record or several.
fn piece(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=3 => rng.range(1, 16),
        4..=7 => rng.range(1, 300),
        _ => rng.range(1, 4000),
    }
}

/// Scalar rows of the whole table, grouped by file, in table order.
fn rows_by_file(reader: &Reader) -> BTreeMap<String, Vec<(String, i64, f64, i64)>> {
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for r in scalar_rows(&reader.table(Kind::Scalars).unwrap()) {
        out.entry(r.file.clone().unwrap()).or_default().push((
            r.tag,
            r.step,
            r.value,
            r.offset.unwrap(),
        ));
    }
    out
}

/// Checks the invariants for clean sources after a load.
fn check_clean(reader: &Reader, sources: &[Source], ctx: &str) {
    let got = rows_by_file(reader);
    for s in sources {
        let want = s.completed_rows();
        let have = got.get(&s.rel).cloned().unwrap_or_default();
        assert_eq!(have, want, "{ctx}: rows of {}", s.rel);
    }
    let mut truncated = Vec::new();
    for e in reader.report() {
        match e.severity {
            Severity::Truncated => truncated.push((e.file.clone(), e.offset, e.length)),
            _ => panic!("{ctx}: unexpected report entry {e:?}"),
        }
    }
    truncated.sort();
    let mut want: Vec<_> = sources
        .iter()
        .filter_map(|s| s.tail().map(|(o, l)| (s.rel.clone(), o, l)))
        .collect();
    want.sort();
    assert_eq!(truncated, want, "{ctx}: truncated entries");
}

/// One file, appended in random pieces with a load after every piece.
#[test]
fn one_file_grows_piece_by_piece() {
    for seed in 0..12 {
        let mut rng = Rng::new(seed);
        let dir = TempDir::new("grow1");
        let (bytes, exp) = synth_file(&mut rng, 120);
        let mut src = vec![Source::new("run/events.out.tfevents.1.host", bytes, exp)];
        src[0].append(dir.path(), 0);
        let mut reader = Reader::new(dir.path(), opts(true, true)).unwrap();
        let mut loads = 0;
        let mut records = 0;
        while !src[0].done() {
            let n = piece(&mut rng);
            src[0].append(dir.path(), n);
            let stats = reader.load(&AtomicBool::new(false)).unwrap();
            records += stats.records;
            loads += 1;
            check_clean(
                &reader,
                &src,
                &format!(
                    "seed {seed}, load {loads}, {} bytes",
                    src[0].written.unwrap()
                ),
            );
        }
        // Every record, the file_version one included, was counted exactly once.
        assert_eq!(records, src[0].exp.len() as u64 + 1, "seed {seed}");
        // A load with nothing new adds nothing.
        let stats = reader.load(&AtomicBool::new(false)).unwrap();
        assert_eq!((stats.files_read, stats.records, stats.rows), (0, 0, 0));
        check_clean(&reader, &src, "final");
    }
}

/// Several runs and files, created and appended in random order, loads at random moments:
/// a new file appearing in a known run and a new run appearing between loads are both picked
/// up, and per-file row order is never disturbed by the other files.
#[test]
fn files_and_runs_appear_between_loads() {
    for seed in 100..110 {
        let mut rng = Rng::new(seed);
        let dir = TempDir::new("grow2");
        let mut src = Vec::new();
        for rel in [
            "a/events.out.tfevents.1.h",
            "a/events.out.tfevents.2.h",
            "b/events.out.tfevents.1.h",
            "c/d/events.out.tfevents.1.h",
            "c/d/events.out.tfevents.3.h",
        ] {
            let (bytes, exp) = synth_file(&mut rng, 40);
            src.push(Source::new(rel, bytes, exp));
        }
        // Run "a" exists from the start so the logdir is not empty.
        src[0].append(dir.path(), 1);
        let mut reader = Reader::new(dir.path(), opts(true, true)).unwrap();
        reader.load(&AtomicBool::new(false)).unwrap();
        check_clean(&reader, &src, "first load");
        let mut step = 0;
        while !src.iter().all(Source::done) {
            let i = rng.below(src.len() as u64) as usize;
            let n = piece(&mut rng);
            src[i].append(dir.path(), n);
            step += 1;
            if rng.below(3) == 0 {
                reader.load(&AtomicBool::new(false)).unwrap();
                check_clean(&reader, &src, &format!("seed {seed}, step {step}"));
            }
        }
        reader.load(&AtomicBool::new(false)).unwrap();
        check_clean(&reader, &src, &format!("seed {seed}, final"));
        assert_eq!(reader.run_names(), vec!["a", "b", "c/d"]);
    }
}

/// The deterministic version of the above, spelling out the scenario: a run with one growing
/// file; a second file appears in the same run; then a second run appears; then everything
/// completes. Rows of each load come in (run, file, record) order.
#[test]
fn new_file_then_new_run_scripted() {
    let mut rng = Rng::new(1);
    let dir = TempDir::new("grow3");
    let mk = |rng: &mut Rng, rel: &str| {
        let (b, e) = synth_file(rng, 10);
        Source::new(rel, b, e)
    };
    let mut src = vec![
        mk(&mut rng, "train/events.out.tfevents.1.h"),
        mk(&mut rng, "train/events.out.tfevents.2.h"),
        mk(&mut rng, "eval/events.out.tfevents.1.h"),
    ];
    let half = |s: &Source| s.exp[5].offset + 3; // inside record 5
    let h0 = half(&src[0]);
    src[0].append(dir.path(), h0);
    let mut reader = Reader::new(dir.path(), opts(true, true)).unwrap();
    reader.load(&AtomicBool::new(false)).unwrap();
    check_clean(&reader, &src, "train/1 half written");
    assert_eq!(reader.report().len(), 1);

    let h1 = half(&src[1]);
    src[1].append(dir.path(), h1);
    reader.load(&AtomicBool::new(false)).unwrap();
    check_clean(&reader, &src, "train/2 appeared");
    assert_eq!(reader.run_names(), vec!["train"]);

    src[2].append(dir.path(), usize::MAX);
    src[0].append(dir.path(), usize::MAX);
    let before = scalar_rows(&reader.table(Kind::Scalars).unwrap()).len();
    reader.load(&AtomicBool::new(false)).unwrap();
    check_clean(&reader, &src, "eval appeared, train/1 done");
    assert_eq!(reader.run_names(), vec!["eval", "train"]);
    // This load's rows: all of eval (run order), then the rest of train/1.
    let new: Vec<_> = scalar_rows(&reader.table(Kind::Scalars).unwrap())[before..]
        .iter()
        .map(|r| r.file.clone().unwrap())
        .collect();
    let mut dedup = new.clone();
    dedup.dedup();
    assert_eq!(
        dedup,
        vec![
            "eval/events.out.tfevents.1.h",
            "train/events.out.tfevents.1.h"
        ]
    );

    src[1].append(dir.path(), usize::MAX);
    reader.load(&AtomicBool::new(false)).unwrap();
    check_clean(&reader, &src, "all done");
    assert!(
        reader.report().is_empty(),
        "truncated entries must be gone: {:?}",
        reader.report()
    );
}

/// A growing file with damage in it: garbage between records, a record with a bad data CRC,
/// and a zero-filled hole. Whatever load boundaries split them, the rows are the undamaged
/// records exactly once, and the Corrupt entries are disjoint and cover exactly the damaged
/// bytes (they may be split in several entries; the last <12 bytes seen at a load's EOF are
/// Truncated until more bytes decide them).
#[test]
fn damaged_growing_file() {
    for seed in 200..215 {
        let mut rng = Rng::new(seed);
        let dir = TempDir::new("grow4");
        let (clean_bytes, clean_exp) = synth_file(&mut rng, 60);
        // Build the damaged file and remember what was damaged and where records moved.
        let mut bytes = clean_bytes[..clean_exp[0].offset].to_vec();
        let mut exp = Vec::new();
        let mut damage = Vec::new();
        let mut hole_pending = false;
        for (i, e) in clean_exp.iter().enumerate() {
            let rec = &clean_bytes[e.offset..e.offset + e.span];
            match i % 15 {
                4 => {
                    // Garbage before this record.
                    let n = rng.range(1, 60);
                    damage.push((bytes.len(), bytes.len() + n));
                    bytes.extend(rng.bytes(n));
                }
                9 => {
                    // This record's payload damaged: bad data CRC.
                    let at = bytes.len();
                    let mut r = rec.to_vec();
                    let k = rng.range(12, r.len() - 5);
                    r[k] ^= 0x41;
                    bytes.extend_from_slice(&r);
                    damage.push((at, at + r.len()));
                    continue;
                }
                12 => {
                    // A zero-filled hole from the middle of this record into the next one.
                    let at = bytes.len();
                    let mut r = rec.to_vec();
                    // Keep at least the footer in the zeroed part so the record changes.
                    let k = rng.range(1, r.len() - 4);
                    r[k..].fill(0);
                    bytes.extend_from_slice(&r);
                    damage.push((at, at + r.len()));
                    hole_pending = true;
                    continue;
                }
                _ => {}
            }
            if hole_pending {
                // The hole's second half: the start of this record is zeroed too.
                hole_pending = false;
                let at = bytes.len();
                let mut r = rec.to_vec();
                // At least the whole header, so no record can start here any more.
                let k = rng.range(12, r.len() - 1);
                r[..k].fill(0);
                bytes.extend_from_slice(&r);
                damage.last_mut().unwrap().1 = at + r.len();
                continue;
            }
            let mut moved = e.clone();
            moved.offset = bytes.len();
            exp.push(moved);
            bytes.extend_from_slice(rec);
        }
        let mut src = Source::new("run/events.out.tfevents.9.h", bytes, exp);
        src.damage = damage.clone();
        src.append(dir.path(), 0);
        let mut reader = Reader::new(dir.path(), opts(true, true)).unwrap();
        while !src.done() {
            let n = piece(&mut rng);
            src.append(dir.path(), n);
            reader.load(&AtomicBool::new(false)).unwrap();
            let got = rows_by_file(&reader).remove(&src.rel).unwrap_or_default();
            assert_eq!(
                got,
                src.completed_rows(),
                "seed {seed} at {} bytes",
                src.written.unwrap()
            );
        }
        // Corrupt entries: disjoint, and their union (plus nothing else) is the damage.
        let mut corrupt: Vec<(u64, u64)> = reader
            .report()
            .iter()
            .inspect(|e| {
                assert!(
                    matches!(e.severity, Severity::Corrupt | Severity::Truncated),
                    "{e:?}"
                )
            })
            .filter(|e| e.severity == Severity::Corrupt)
            .map(|e| (e.offset, e.offset + e.length))
            .collect();
        corrupt.sort();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (a, b) in corrupt {
            match merged.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                Some(last) => {
                    assert!(
                        last.1 < a,
                        "seed {seed}: overlapping corrupt entries {last:?} and {:?}",
                        (a, b)
                    );
                    merged.push((a, b));
                }
                None => merged.push((a, b)),
            }
        }
        let want: Vec<(u64, u64)> = damage.iter().map(|&(a, b)| (a as u64, b as u64)).collect();
        assert_eq!(merged, want, "seed {seed}");
        assert!(
            reader
                .report()
                .iter()
                .all(|e| e.severity != Severity::Truncated),
            "seed {seed}: {:?}",
            reader.report()
        );
    }
}

/// A file that is empty at one load (created, nothing flushed yet) and has records at the next:
/// whatever the report said about it being empty must not outlive the emptiness, exactly as
/// Truncated entries are replaced when a file is read again.
///
/// FAILS at the time of writing: `read_file` adds a note "empty file (0 bytes): no events yet"
/// (severity Info) for a 0-byte file, and `Reader::merge` only drops stale *Truncated* entries
/// of a file it reads again, so the note stays in the report forever after the file has data.
/// Suggested fix: drop a re-read file's stale Info entries too (they describe the file's state,
/// like Truncated ones), e.g. `retain(|e| !(e.file == rel && matches!(e.severity, Truncated |
/// Info)))`.
#[test]
fn empty_file_note_goes_away_once_the_file_has_data() {
    let dir = TempDir::new("grow-empty");
    let (bytes, exp) = synth_file(&mut Rng::new(9), 5);
    let mut src = vec![Source::new("run/events.out.tfevents.1.h", bytes, exp)];
    src[0].append(dir.path(), 0);
    let mut reader = Reader::new(dir.path(), opts(true, true)).unwrap();
    reader.load(&AtomicBool::new(false)).unwrap();
    assert!(
        reader.report().iter().all(|e| !matches!(
            e.severity,
            Severity::Corrupt | Severity::Truncated | Severity::Error
        )),
        "{:?}",
        reader.report()
    );
    src[0].append(dir.path(), usize::MAX);
    reader.load(&AtomicBool::new(false)).unwrap();
    check_clean(&reader, &src, "after the empty file got its records");
}
