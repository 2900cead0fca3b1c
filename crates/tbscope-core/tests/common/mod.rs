//! Helpers shared by the integration tests (each `tests/*.rs` is its own crate and pulls this
//! in with `mod common;`, so not every test uses every helper).
//!
//! Everything here is deliberately independent of the code under test except for the framing
//! writer: Event bytes are encoded by hand so the tests do not trust tbscope's decoder to
//! check itself, and [`reference_frames`] is a byte-at-a-time framing loop that spells out the
//! reader's contract in the simplest possible way, to compare the optimised reader against.
#![allow(dead_code)]

pub mod cached;
pub mod oracle;
mod rng;
pub use rng::Rng;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};

use tbscope_core::load::{Reader, ReaderOptions, ReportEntry};
use tbscope_core::masked_crc::masked_crc32c;
use tbscope_core::tf_record::write_record;
use tbscope_core::Kind;

// ------------------------------------------------------------------------------------------
// A test in a process of its own.

/// Runs the ignored test `name` of this test binary in a child process with `env` set, for a
/// condition that must hold for the whole process (a write torn by a signal, no thread able to
/// start), and checks that the child ran it and that it passed.
pub fn run_child_test(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--nocapture"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran no test: {text}");
}

// ------------------------------------------------------------------------------------------
// Protobuf encoding, by hand.

pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A field key: `field << 3 | wire_type`.
pub fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

pub fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// `Summary.Value { tag = 1; simple_value = 2 (fixed32) }`.
pub fn scalar_value(tag: &str, value: f32) -> Vec<u8> {
    let mut v = Vec::new();
    bytes_field(&mut v, 1, tag.as_bytes());
    key(&mut v, 2, 5);
    v.extend_from_slice(&value.to_le_bytes());
    v
}

/// `Event { wall_time = 1 (fixed64); step = 2 (varint); summary = 5 { value = 1 ... } }`.
pub fn scalar_event(wall: f64, step: i64, values: &[(&str, f32)]) -> Vec<u8> {
    let mut summary = Vec::new();
    for (tag, x) in values {
        bytes_field(&mut summary, 1, &scalar_value(tag, *x));
    }
    let mut ev = Vec::new();
    key(&mut ev, 1, 1);
    ev.extend_from_slice(&wall.to_le_bytes());
    key(&mut ev, 2, 0);
    varint(&mut ev, step as u64);
    bytes_field(&mut ev, 5, &summary);
    ev
}

/// The first event of every file: `Event { wall_time, file_version = 3: "brain.Event:2" }`.
pub fn file_version_event(wall: f64) -> Vec<u8> {
    let mut ev = Vec::new();
    key(&mut ev, 1, 1);
    ev.extend_from_slice(&wall.to_le_bytes());
    bytes_field(&mut ev, 3, b"brain.Event:2");
    ev
}

/// One framed record.
pub fn record(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_record(&mut out, payload);
    out
}

/// What the tests expect back from one scalar record.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// Byte offset of the record in its file.
    pub offset: usize,
    pub span: usize,
    pub step: i64,
    pub wall: f64,
    pub values: Vec<(String, f32)>,
}

/// A synthetic event file: a file_version record, then `n` scalar records with 1-3 values,
/// tags of varied length (so records have varied sizes) and now and then a big record (a
/// long tag) so "several records" and "one record" chunk sizes both occur.
pub fn synth_file(rng: &mut Rng, n: usize) -> (Vec<u8>, Vec<Expected>) {
    let mut bytes = record(&file_version_event(1.7e9));
    let mut expected = Vec::new();
    for i in 0..n {
        let step = i as i64 * 10 + rng.below(5) as i64;
        let wall = 1.7e9 + i as f64 * 0.25;
        let k = 1 + rng.below(3) as usize;
        let mut values = Vec::new();
        for j in 0..k {
            let tag = if rng.below(25) == 0 {
                // A record of a few hundred bytes to a few KB.
                format!("long/{}/{}", j, "x".repeat(200 + rng.below(3000) as usize))
            } else {
                format!("loss/{}", (i + j) % 7)
            };
            let x = (rng.below(1_000_000) as f32) / 1000.0 - 500.0;
            values.push((tag, x));
        }
        let refs: Vec<(&str, f32)> = values.iter().map(|(t, x)| (t.as_str(), *x)).collect();
        let rec = record(&scalar_event(wall, step, &refs));
        expected.push(Expected {
            offset: bytes.len(),
            span: rec.len(),
            step,
            wall,
            values,
        });
        bytes.extend_from_slice(&rec);
    }
    (bytes, expected)
}

/// The scalar rows [`Expected`] records stand for, in file order.
pub fn expected_rows(exp: &[Expected]) -> Vec<(String, i64, f64, i64)> {
    exp.iter()
        .flat_map(|e| {
            e.values
                .iter()
                .map(move |(t, x)| (t.clone(), e.step, f64::from(*x), e.offset as i64))
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Temp dirs and randomness.

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, removed on drop (also when a test panics, so
/// failed runs do not pile up files).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "tbscope-it-{label}-{}-{n}-{nanos}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Writes `bytes` to `rel` (creating parent dirs) and returns the full path.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ------------------------------------------------------------------------------------------
// Reference framing.

/// What [`reference_frames`] finds in a byte string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefScan {
    /// `(offset, span)` of every position where a whole record with both CRCs valid starts,
    /// taken greedily from the front (a found record's bytes are not searched again).
    pub records: Vec<(usize, usize)>,
    /// Byte ranges that are neither records nor the tail: what the reader must report corrupt.
    pub gaps: Vec<(usize, usize)>,
    /// Where the unfinished tail starts, if the bytes end inside what may be a record.
    pub tail: Option<usize>,
}

/// The reader's framing contract, one byte at a time, with no buffering, for a file that may
/// still be written (`Until::Live`, what a fresh file gets):
/// - a whole record whose length CRC and data CRC both hold is a record;
/// - a header whose length CRC holds and length is at most `max_len` but which runs past the
///   end, or fewer than 12 bytes left, is a pending tail: nothing from it on is looked at;
/// - anything else is skipped one byte at a time (corruption, reported as gaps).
pub fn reference_frames(b: &[u8], max_len: u64) -> RefScan {
    frames(b, max_len, false)
}

/// As [`reference_frames`] for a file nothing more will be written to (`Until::Final`): where
/// the live contract stops at a tail, a torn record starts instead; it is a gap up to the next
/// whole record after its first byte (searched whatever its bytes hold), or, when there is
/// none, the tail (a stopped one).
pub fn reference_frames_final(b: &[u8], max_len: u64) -> RefScan {
    frames(b, max_len, true)
}

fn frames(b: &[u8], max_len: u64, fin: bool) -> RefScan {
    let mut out = RefScan {
        records: Vec::new(),
        gaps: Vec::new(),
        tail: None,
    };
    // Whether a whole record starts at `p`.
    let whole = |p: usize| -> Option<usize> {
        if b.len() - p < 12 {
            return None;
        }
        let len = u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
        let len_ok =
            masked_crc32c(&b[p..p + 8]) == u32::from_le_bytes(b[p + 8..p + 12].try_into().unwrap());
        if !len_ok || len > max_len || b.len() - p < 16 + len as usize {
            return None;
        }
        let span = 16 + len as usize;
        let crc = u32::from_le_bytes(b[p + span - 4..p + span].try_into().unwrap());
        (masked_crc32c(&b[p + 12..p + span - 4]) == crc).then_some(span)
    };
    // Whether the bytes at `p` may be the start of a record that runs past the end.
    let unfinished = |p: usize| -> bool {
        if b.len() - p < 12 {
            return true;
        }
        let len = u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
        masked_crc32c(&b[p..p + 8]) == u32::from_le_bytes(b[p + 8..p + 12].try_into().unwrap())
            && len <= max_len
            && b.len() - p < 16 + len as usize
    };
    let mut pos = 0usize;
    // The gap being skipped, and whether it started at a torn record (whose bytes are searched
    // for a whole record, whatever they hold) rather than at bytes that are not a record.
    let mut gap: Option<(usize, bool)> = None;
    let close = |gap: &mut Option<(usize, bool)>, at: usize, gaps: &mut Vec<(usize, usize)>| {
        if let Some((g, _)) = gap.take() {
            gaps.push((g, at));
        }
    };
    while pos < b.len() {
        if let Some(span) = whole(pos) {
            close(&mut gap, pos, &mut out.gaps);
            out.records.push((pos, span));
            pos += span;
            continue;
        }
        if unfinished(pos) && !matches!(gap, Some((_, true))) {
            close(&mut gap, pos, &mut out.gaps);
            if !fin || !(pos + 1..b.len()).any(|q| whole(q).is_some()) {
                out.tail = Some(pos);
                break;
            }
            gap = Some((pos, true));
        }
        gap.get_or_insert((pos, false));
        pos += 1;
    }
    close(&mut gap, out.tail.unwrap_or(b.len()), &mut out.gaps);
    out
}

// ------------------------------------------------------------------------------------------
// Reading and extracting rows.

/// One scalar row, decoded from the Arrow table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub run: String,
    pub tag: String,
    pub step: i64,
    /// Null when the record's wall time was not finite.
    pub wall: Option<f64>,
    pub value: f64,
    /// Present with provenance.
    pub file: Option<String>,
    pub offset: Option<i64>,
}

fn dict_strings(b: &RecordBatch, name: &str) -> Option<Vec<String>> {
    let col = b.column_by_name(name)?;
    let d = col.as_dictionary::<Int32Type>();
    let values = d.values().as_string::<i32>();
    Some(
        d.keys()
            .iter()
            .map(|k| {
                values
                    .value(k.expect("dictionary keys are never null") as usize)
                    .to_string()
            })
            .collect(),
    )
}

/// Scalar rows of `batches`, in table order.
pub fn scalar_rows(batches: &[RecordBatch]) -> Vec<Row> {
    let mut rows = Vec::new();
    for b in batches {
        let runs = dict_strings(b, "run").unwrap();
        let tags = dict_strings(b, "tag").unwrap();
        let files = dict_strings(b, "file");
        let step = b
            .column_by_name("step")
            .unwrap()
            .as_primitive::<Int64Type>();
        let wall = b
            .column_by_name("wall_time")
            .unwrap()
            .as_primitive::<Float64Type>();
        let value = b
            .column_by_name("value")
            .unwrap()
            .as_primitive::<Float64Type>();
        let offset = b
            .column_by_name("offset")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        for i in 0..b.num_rows() {
            rows.push(Row {
                run: runs[i].clone(),
                tag: tags[i].clone(),
                step: step.value(i),
                wall: wall.is_valid(i).then(|| wall.value(i)),
                value: value.value(i),
                file: files.as_ref().map(|f| f[i].clone()),
                offset: offset.as_ref().map(|o| o.value(i)),
            });
        }
    }
    rows
}

/// `(file, record offset) -> rows` over every kind's table (needs provenance). Kind-agnostic on
/// purpose: damage can change which table a tag lands in (its first metadata may be gone).
pub fn rows_by_record(reader: &Reader) -> BTreeMap<(String, i64), usize> {
    let mut out = BTreeMap::new();
    for kind in Kind::ALL {
        for b in reader.table(kind).unwrap() {
            let files = dict_strings(&b, "file").expect("provenance is on");
            let off = b
                .column_by_name("offset")
                .unwrap()
                .as_primitive::<Int64Type>();
            for (i, file) in files.iter().enumerate().take(b.num_rows()) {
                *out.entry((file.clone(), off.value(i))).or_insert(0) += 1;
            }
        }
    }
    out
}

pub fn opts(provenance: bool, verify: bool) -> ReaderOptions {
    let mut o = ReaderOptions::default();
    o.file.provenance = provenance;
    o.file.verify = verify;
    // One thread: the tests run in parallel already, and it keeps the runtime predictable.
    o.threads = 1;
    o
}

/// Loads `path` once; returns the reader (for more tables), its scalar rows and its report.
pub fn load_once(path: &Path, o: ReaderOptions) -> (Reader, Vec<Row>, Vec<ReportEntry>) {
    let mut r = Reader::new(path, o).unwrap();
    r.load(&AtomicBool::new(false)).unwrap();
    let rows = scalar_rows(&r.table(Kind::Scalars).unwrap());
    let report = r.report().to_vec();
    (r, rows, report)
}

/// `(tag, step, value, offset)` of rows, for comparing with [`expected_rows`].
pub fn row_keys(rows: &[Row]) -> Vec<(String, i64, f64, i64)> {
    rows.iter()
        .map(|r| (r.tag.clone(), r.step, r.value, r.offset.unwrap_or(-1)))
        .collect()
}
