//! Reads one event file (from a saved offset) into per-kind columns.
//!
//! Files are read with `pread` into a reused buffer, never mapped: a file truncated under a
//! mapping kills the process with SIGBUS. Bytes past the size seen at the start are left for the
//! next reload, so a file that keeps growing cannot keep a read going forever.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use regex::Regex;

use crate::columns::{sniff_image, Tables};
use crate::data_compat::{decide, legacy_plugin, plugin_names, Kind, KindSet};
use crate::proto::{
    summary_values, Audio, DecodeError, Event, HistogramProto, Image, LogMessage, Metadata,
    SessionLog, SummaryValue, TaggedRunMetadata, ValueKind, What,
};
use crate::tensor::{base_dtype, element_f64, Elements, Tensor, DT_FLOAT, DT_STRING};
use crate::tf_record::{data_crc_ok, payload, Damage, End, Step, WalkOptions, Walker, HEADER_LEN};

/// How a stopped tail's report line starts (a reload that finds the file grown replaces it).
pub const STOPPED_TAIL: &str = "stopped tail";

/// The smallest read; larger records grow the buffer. Small enough that the buffer stays in a
/// core's L2 cache: the kernel's copy into it and the parse reading it back then never go
/// through main memory (4 MiB was 10% slower).
const CHUNK: usize = 256 << 10;

/// What to read and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Check data CRCs (length CRCs are always checked).
    pub verify: bool,
    /// Records longer than this are corruption, not a truncated tail.
    pub max_len: u64,
    /// Keep each row's record offset.
    pub provenance: bool,
    pub kinds: KindSet,
    pub tags: Option<Regex>,
    /// Steps outside `[lo, hi)` are skipped before their summaries are decoded.
    pub step_lo: Option<i64>,
    pub step_hi: Option<i64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            verify: true,
            max_len: 256 << 20,
            provenance: false,
            kinds: KindSet::ALL,
            tags: None,
            step_lo: None,
            step_hi: None,
        }
    }
}

/// How serious a reported problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Bytes that could not be read as records: skipped.
    Corrupt,
    /// A record read fine but a value in it could not be used as its series' kind.
    Warning,
    /// The file ends inside a record: normal while a writer is still writing.
    Truncated,
    /// The file could not be read at all.
    Error,
    /// Worth knowing, nothing lost: an empty file (a writer that has not written yet).
    Info,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Corrupt => "corrupt",
            Severity::Warning => "warning",
            Severity::Truncated => "truncated",
            Severity::Error => "error",
            Severity::Info => "info",
        }
    }
}

/// One entry of the health report: where, how many bytes, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub severity: Severity,
    pub offset: u64,
    pub length: u64,
    pub reason: String,
}

/// Metadata of a series, owned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesMeta {
    pub plugin_name: String,
    pub plugin_content: Vec<u8>,
    pub display_name: String,
    pub description: String,
    pub data_class: i32,
}

impl SeriesMeta {
    fn from_proto(m: &Metadata<'_>) -> Self {
        SeriesMeta {
            plugin_name: lossy(m.plugin_name),
            plugin_content: m.plugin_content.to_vec(),
            display_name: lossy(m.display_name),
            description: lossy(m.description),
            data_class: m.data_class,
        }
    }
    fn plugin(name: &str) -> Self {
        SeriesMeta {
            plugin_name: name.to_string(),
            ..Default::default()
        }
    }
}

/// What a run already knows about a tag before this file is read.
#[derive(Debug, Clone)]
pub struct Known {
    pub kind: Kind,
}

/// A tag as seen in one file.
#[derive(Debug, Clone)]
pub struct LocalTag {
    pub name: String,
    pub wanted: bool,
    pub kind: Option<Kind>,
    /// First metadata seen in this file (legacy values synthesise their plugin's).
    pub meta: Option<SeriesMeta>,
    pub points: u64,
    pub first_step: i64,
    pub last_step: i64,
    pub last_wall: f64,
}

/// A SessionLog event (restarts, checkpoints) or a LogMessage event: the `logs` table.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub step: i64,
    pub wall: f64,
    /// `SessionLog.status` ([`SessionEvent::SESSION_LOG`]) or `LogMessage.level`.
    pub status: i32,
    pub offset: u64,
    /// Which event: [`SessionEvent::SESSION_LOG`] or [`SessionEvent::LOG_MESSAGE`].
    pub source: u8,
    /// `SessionLog.msg` or `LogMessage.message`.
    pub message: String,
    /// `SessionLog.checkpoint_path` (empty for log messages).
    pub checkpoint_path: String,
}

impl SessionEvent {
    pub const SESSION_LOG: u8 = 0;
    pub const LOG_MESSAGE: u8 = 1;

    /// A SessionLog START: a (re)start of the writing job.
    pub fn is_start(&self) -> bool {
        self.source == Self::SESSION_LOG && self.status == 1
    }
}

/// Where a read of a file ends, and what a record running past that end is
/// ([`crate::tf_record::End`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The file's current size; the file may still be written, so a record running past it is
    /// a pending tail: no rows, read again on a reload.
    Live,
    /// The file's current size; nothing more will be written to the file, so a record running
    /// past it is torn: damage when whole records follow, a stopped tail otherwise.
    Final,
    /// A record boundary inside the file, from [`split_points`].
    Cut(u64),
}

/// Where to resume reading a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub offset: u64,
}

/// Everything read from one file in one pass.
#[derive(Debug, Default)]
pub struct FileChunk {
    pub tags: Vec<LocalTag>,
    /// The rows, when the file was read into tables of its own ([`read_file`]).
    pub tables: Tables,
    /// Per kind, the range of rows this file added to the tables it was read into.
    pub rows: [(usize, usize); 8],
    /// Values skipped because their series' kind was not known yet (a tensor before any
    /// metadata). The loader reads such a file again once the run has decided the kind.
    pub deferred: u64,
    pub problems: Vec<Problem>,
    pub sessions: Vec<SessionEvent>,
    pub end: Cursor,
    /// Bytes of an incomplete record at the end (0 when the file ends on a record boundary).
    pub tail: u64,
    /// The tail is pending (the file may still be written), not a stopped one.
    pub tail_pending: bool,
    /// Bytes fed to CRC-32C by the framing (see `tf_record::Walker::crc_bytes`).
    pub crc_bytes: u64,
    /// The read stopped exactly at its end on a record boundary, not inside damage.
    pub clean_end: bool,
    pub size: u64,
    pub records: u64,
    pub bytes_read: u64,
    pub first_wall: Option<f64>,
    pub last_wall: Option<f64>,
    pub max_step: Option<i64>,
    pub file_version: Option<String>,
    pub writer: Option<String>,
}

pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// FxHash (rustc's hasher): tags are short and trusted, so SipHash's DoS resistance only costs.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// Per-file parser state.
struct Parser<'o> {
    opts: &'o Options,
    known: &'o HashMap<String, Known>,
    index: HashMap<Vec<u8>, i32, FxBuild>,
    /// Raw tag bytes by id, and for each id the id that followed it last time: loggers write
    /// tags in the same order every step, so the guess usually hits without hashing.
    raw: Vec<Vec<u8>>,
    next: Vec<i32>,
    last: i32,
    out: FileChunk,
    /// Where rows go: this file's own tables, or a worker's shared ones.
    tables: &'o mut Tables,
}

/// Reads `path` from `start` up to `until` (the size the file has now, or a record boundary
/// from [`split_points`]) into tables of its own (`FileChunk::tables`).
pub fn read_file(
    path: &Path,
    start: Cursor,
    until: Until,
    opts: &Options,
    known: &HashMap<String, Known>,
    cancel: &AtomicBool,
) -> FileChunk {
    let mut tables = Tables::default();
    let mut chunk = read_file_into(path, start, until, opts, known, cancel, &mut tables);
    chunk.tables = tables;
    chunk
}

/// As [`read_file`], but appends rows to `tables` (tag ids local to this file; run and file
/// columns left for the caller) and records in `FileChunk::rows` which rows are this file's.
/// A worker reading many files into one set of tables saves copying them all once more.
pub fn read_file_into(
    path: &Path,
    start: Cursor,
    until: Until,
    opts: &Options,
    known: &HashMap<String, Known>,
    cancel: &AtomicBool,
    tables: &mut Tables,
) -> FileChunk {
    let before = tables.rows();
    let mut p = Parser {
        opts,
        known,
        index: HashMap::default(),
        raw: Vec::new(),
        next: Vec::new(),
        last: -1,
        out: FileChunk::default(),
        tables,
    };
    // Empty ranges until the read ends, so the early returns below report no rows.
    p.out.rows = before.map(|b| (b, b));
    p.out.end = start;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            p.problem(
                Severity::Error,
                start.offset,
                0,
                format!("cannot open: {e}"),
            );
            return p.out;
        }
    };
    let size = match file.metadata() {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => {
            p.problem(Severity::Error, 0, 0, "not a regular file".into());
            return p.out;
        }
        Err(e) => {
            p.problem(Severity::Error, 0, 0, format!("cannot stat: {e}"));
            return p.out;
        }
    };
    p.out.size = size;
    // A cut at or past the end (the file shrank since it was split) is the end itself.
    let (stop, end) = match until {
        Until::Cut(c) if c < size => (c, End::Cut),
        Until::Final => (size, End::Final),
        Until::Live | Until::Cut(_) => (size, End::Live),
    };
    if opts.kinds.contains(Kind::Scalars) && stop > start.offset {
        // The smallest scalar record is about 40 bytes; reserving for that many rows means the
        // columns never reallocate. Untouched capacity costs address space, not memory.
        let rows = ((stop - start.offset) / 40) as usize;
        p.tables.scalars.c.reserve_chunk(rows, opts.provenance);
        crate::columns::reserve(&mut p.tables.scalars.value, rows);
    }
    if size == 0 {
        p.problem(
            Severity::Info,
            0,
            0,
            "empty file (0 bytes): no events yet".into(),
        );
    }
    let mut from = start.offset;
    if size < from {
        p.problem(
            Severity::Warning,
            size,
            from - size,
            format!("file shrank from at least {from} to {size} bytes since the last read; read again from the start"),
        );
        from = 0;
    }
    BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        p.scan(&file, from, stop, end, &mut buf, cancel);
        if buf.capacity() > 4 * CHUNK {
            // Don't keep a one-off giant record's buffer alive in every worker thread.
            *buf = Vec::new();
        }
    });
    let after = p.tables.rows();
    p.out.rows = std::array::from_fn(|i| (before[i], after[i]));
    p.out
}

/// Payloads of whole records of one file (both CRCs good), with their offsets, read with the
/// reader's framing: for callers that decode records themselves (the Python compat layer).
/// With `offsets`, the records starting there, in that order (an error if one does not: the
/// file changed since the offset was read); otherwise every record of the file, or only those
/// whose payload contains `containing`. Whether the file may still be written is decided as a
/// load decides it, with its directory as its run ([`crate::load::file_may_grow`]).
pub fn raw_records(
    path: &Path,
    offsets: Option<&[u64]>,
    containing: Option<&[u8]>,
    max_len: u64,
) -> std::io::Result<Vec<(u64, Vec<u8>)>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let Some(offsets) = offsets else {
        let end = if crate::load::file_may_grow(path) {
            End::Live
        } else {
            End::Final
        };
        let opts = WalkOptions {
            max_len,
            ..WalkOptions::default()
        };
        let mut w = Walker::new(&file, 0, size, end, opts, buf);
        loop {
            match w.next() {
                Step::Record { offset, framed } => {
                    let data = payload(framed);
                    if containing.is_none_or(|c| c.is_empty() || contains(data, c)) {
                        out.push((offset, data.to_vec()));
                    }
                }
                Step::ReadError { error, .. } => return Err(error),
                Step::End => return Ok(out),
                Step::Damage { .. } | Step::Tail { .. } => {}
            }
        }
    };
    // One record each: small reads (a record longer than that grows the buffer).
    let opts = WalkOptions {
        max_len,
        verify: true,
        min_read: 4096,
    };
    for &at in offsets {
        let mut w = Walker::new(&file, at, size, End::Final, opts, buf);
        match w.next() {
            Step::Record { offset, framed } if offset == at => {
                out.push((offset, payload(framed).to_vec()));
            }
            Step::ReadError { error, .. } => return Err(error),
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("no whole record at offset {at}; the file changed since it was read"),
                ))
            }
        }
        buf = w.into_buf();
    }
    Ok(out)
}

/// One whole record of an event file as TensorBoard's accumulators see it: where it starts, its
/// step and wall time, which `Event.what` field it carries and the little they read from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordHead {
    pub offset: u64,
    pub step: i64,
    pub wall_time: f64,
    /// The `Event` field number of `what` (3 file_version, 4 graph_def, 5 summary, 6
    /// log_message, 7 session_log, 8 tagged_run_metadata, 9 meta_graph_def), 0 for none.
    pub what: u8,
    /// `SessionLog.status` of a session_log event (1 = START), else 0.
    pub status: i32,
    /// `file_version` of a file_version event.
    pub file_version: Option<String>,
    /// `source_metadata.writer`, when the event has source metadata.
    pub writer: Option<String>,
}

/// The head of every whole, decodable record of one file, in file order, read with the
/// reader's framing (both CRCs checked; damage is skipped as the reader skips it). For the
/// Python compat layer, which replays TensorBoard's accumulators (purges, most recent step,
/// source writer) over these without decoding the records in Python.
pub fn record_heads(path: &Path, max_len: u64) -> std::io::Result<Vec<RecordHead>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let end = if crate::load::file_may_grow(path) {
        End::Live
    } else {
        End::Final
    };
    let opts = WalkOptions {
        max_len,
        ..WalkOptions::default()
    };
    let mut w = Walker::new(&file, 0, size, end, opts, Vec::new());
    let mut out = Vec::new();
    loop {
        match w.next() {
            Step::Record { offset, framed } => {
                let Ok(ev) = Event::decode(payload(framed)) else {
                    continue;
                };
                let mut head = RecordHead {
                    offset,
                    step: ev.step,
                    wall_time: ev.wall_time,
                    writer: ev.source_metadata.map(|m| {
                        let writer = crate::proto::Fields::new(m).find_map(|f| match f {
                            Ok((1, crate::proto::Wire::Bytes(b))) => Some(b),
                            _ => None,
                        });
                        lossy(writer.unwrap_or_default())
                    }),
                    ..RecordHead::default()
                };
                match ev.what {
                    What::Nothing => {}
                    What::FileVersion(v) => {
                        head.what = 3;
                        head.file_version = Some(lossy(v));
                    }
                    What::GraphDef(_) => head.what = 4,
                    What::Summary(_) => head.what = 5,
                    What::LogMessage(_) => head.what = 6,
                    What::SessionLog(b) => {
                        head.what = 7;
                        head.status = SessionLog::decode(b).map(|s| s.status).unwrap_or(0);
                    }
                    What::TaggedRunMetadata(_) => head.what = 8,
                    What::MetaGraphDef(_) => head.what = 9,
                }
                out.push(head);
            }
            Step::ReadError { error, .. } => return Err(error),
            Step::End => return Ok(out),
            Step::Damage { .. } | Step::Tail { .. } => {}
        }
    }
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let first = needle[0];
    hay.iter().enumerate().any(|(i, &b)| {
        b == first && hay.len() - i >= needle.len() && &hay[i..i + needle.len()] == needle
    })
}

/// Record boundaries after `from`, about `piece` bytes apart, found by hopping from header to
/// header (length and its CRC only; payloads are not decoded), so one large file can be parsed
/// by several threads. Stops early at a header that does not check out: from there on the
/// single reader that takes the last piece handles corruption as usual.
pub fn split_points(path: &Path, from: u64, piece: u64, max_len: u64) -> Vec<u64> {
    let mut cuts = Vec::new();
    let Ok(file) = File::open(path) else {
        return cuts;
    };
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return cuts;
    };
    let mut buf = vec![0u8; CHUNK];
    let (mut win_start, mut win_len) = (0u64, 0usize);
    let mut pos = from;
    let mut next_cut = from.saturating_add(piece);
    while pos + HEADER_LEN as u64 <= size {
        if !(pos >= win_start && pos + HEADER_LEN as u64 <= win_start + win_len as u64) {
            // Refill at the header; payloads of records longer than the window are never read.
            let want = (size - pos).min(CHUNK as u64) as usize;
            win_start = pos;
            win_len = 0;
            while win_len < want {
                match file.read_at(&mut buf[win_len..want], pos + win_len as u64) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => win_len += n,
                }
            }
            if win_len < HEADER_LEN {
                break;
            }
        }
        let h = &buf[(pos - win_start) as usize..][..HEADER_LEN];
        let len = u64::from_le_bytes(h[..8].try_into().unwrap());
        if len > max_len
            || crate::masked_crc::masked_crc32c(&h[..8])
                != u32::from_le_bytes(h[8..12].try_into().unwrap())
        {
            break;
        }
        // A cut goes only where a header has just checked out.
        if pos >= next_cut && pos > from {
            cuts.push(pos);
            next_cut = pos.saturating_add(piece);
        }
        let next = pos + crate::tf_record::OVERHEAD as u64 + len;
        if next >= size {
            break;
        }
        pos = next;
    }
    cuts
}

/// How the fused record loop computes masked CRCs: the portable dispatch, or SSE 4.2
/// instructions inlined into a loop compiled for them.
trait RecordCrc {
    fn length(len: u64) -> u32;
    fn data(data: &[u8]) -> u32;
}

struct PortableCrc;

impl RecordCrc for PortableCrc {
    #[inline(always)]
    fn length(len: u64) -> u32 {
        crate::masked_crc::masked_crc32c(&len.to_le_bytes())
    }
    #[inline(always)]
    fn data(data: &[u8]) -> u32 {
        crate::masked_crc::masked_crc32c(data)
    }
}

/// Only used inside functions compiled for SSE 4.2 (see `Parser::fast_records`).
#[cfg(target_arch = "x86_64")]
struct Sse42Crc;

#[cfg(target_arch = "x86_64")]
impl RecordCrc for Sse42Crc {
    #[inline(always)]
    fn length(len: u64) -> u32 {
        // SAFETY: only instantiated in `fast_records_sse42`, reached after the CPU check.
        unsafe { crate::masked_crc::masked_crc_u64_sse42(len) }
    }
    #[inline(always)]
    fn data(data: &[u8]) -> u32 {
        // SAFETY: as above.
        unsafe { crate::masked_crc::mask(crate::masked_crc::crc32c_short_sse42(data)) }
    }
}

/// Byte equality for short strings (tags) without a libc call: eight bytes at a time, the last
/// word overlapping. Tag lookups run once per record, and a `memcmp` call was a tenth of a read.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap());
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<'o> Parser<'o> {
    fn problem(&mut self, severity: Severity, offset: u64, length: u64, reason: String) {
        self.out.problems.push(Problem {
            severity,
            offset,
            length,
            reason,
        });
    }

    /// The record loop: whole records from the walker (or, for runs of plain scalar records,
    /// the fused loop over its window), and its damage and tails as problems.
    fn scan(
        &mut self,
        file: &File,
        from: u64,
        size: u64,
        end: End,
        buf: &mut Vec<u8>,
        cancel: &AtomicBool,
    ) {
        let opts = WalkOptions {
            max_len: self.opts.max_len,
            verify: self.opts.verify,
            min_read: CHUNK,
        };
        let mut w =
            Walker::new(file, from, size, end, opts, std::mem::take(buf)).with_cancel(cancel);
        let mut records_since_check = 0u32;
        let mut refills = 0;
        loop {
            records_since_check += 1;
            if records_since_check >= 4096 {
                records_since_check = 0;
                if cancel.load(Ordering::Relaxed) {
                    break;
                }
            }
            // Runs of plain scalar records take the fused loop; it stops at the first record it
            // cannot take whole, which the walker then decides about.
            if let Some((win, base)) = w.window() {
                if w.refills() != refills {
                    refills = w.refills();
                    // Scalar rows this buffer may hold get their memory now, in bulk.
                    let n = win.len();
                    self.populate_ahead(n);
                }
                let (used, n) = self.fast_records(win, base);
                if n > 0 {
                    w.advance(used);
                    self.out.records += u64::from(n);
                    records_since_check += n;
                    continue;
                }
            }
            match w.next() {
                Step::Record { offset, framed } => {
                    let data_offset = offset + HEADER_LEN as u64;
                    if let Err(e) = self.record(payload(framed), offset, data_offset) {
                        if !self.opts.verify && !data_crc_ok(framed, framed.len()) {
                            w.reject();
                            continue;
                        }
                        let span = framed.len() as u64;
                        self.problem(
                            Severity::Corrupt,
                            offset,
                            span,
                            format!("record is not a valid Event: {e}"),
                        );
                    }
                    self.out.records += 1;
                }
                Step::Damage {
                    offset,
                    length,
                    why,
                } => {
                    let reason = match why {
                        Damage::PastCut => why.to_string(),
                        _ => format!("{why}; skipped to the next valid record"),
                    };
                    self.problem(Severity::Corrupt, offset, length, reason);
                }
                Step::Tail {
                    offset,
                    length,
                    stopped,
                } => {
                    self.out.tail = length;
                    self.out.tail_pending = !stopped;
                    if stopped {
                        self.problem(
                            Severity::Warning,
                            offset,
                            length,
                            format!("{STOPPED_TAIL}: the file ends inside a record and is no longer written (a writer stopped mid-record); that record is lost"),
                        );
                    } else {
                        self.problem(
                            Severity::Truncated,
                            offset,
                            length,
                            "file ends inside a record still being written (a pending tail); read again on reload".into(),
                        );
                    }
                }
                Step::ReadError { offset, error } => {
                    self.problem(Severity::Error, offset, 0, format!("read failed: {error}"));
                }
                Step::End => break,
            }
        }
        self.out.end = Cursor { offset: w.cursor() };
        self.out.clean_end = w.clean_end();
        self.out.bytes_read = w.bytes_read();
        self.out.crc_bytes = w.crc_bytes();
        *buf = w.into_buf();
    }

    /// Files the plain scalar records at the front of `buf` (whole, both CRCs good, of tags
    /// already known as wanted scalar series) in one tight loop. Returns the bytes and records
    /// it took; anything else, from the first record it cannot take on, is left to the general
    /// path, which checks it again from scratch.
    #[inline]
    fn fast_records(&mut self, buf: &[u8], base: u64) -> (usize, u32) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("sse4.2") {
                // SAFETY: the CPU supports SSE 4.2, checked just above.
                return unsafe { self.fast_records_sse42(buf, base) };
            }
        }
        self.fast_records_with::<PortableCrc>(buf, base)
    }

    /// [`Parser::fast_records`] compiled for SSE 4.2, so the CRC instructions inline into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    unsafe fn fast_records_sse42(&mut self, buf: &[u8], base: u64) -> (usize, u32) {
        self.fast_records_with::<Sse42Crc>(buf, base)
    }

    /// The loop of [`Parser::fast_records`], with the CRC implementation `C`. At most 8192
    /// records per call, so the caller's cancellation check stays frequent.
    #[inline(always)]
    fn fast_records_with<C: RecordCrc>(&mut self, buf: &[u8], base: u64) -> (usize, u32) {
        let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let opts = self.opts;
        let (max_len, verify, provenance) = (opts.max_len, opts.verify, opts.provenance);
        let (lo, hi) = (
            opts.step_lo.unwrap_or(i64::MIN),
            opts.step_hi.unwrap_or(i64::MAX),
        );
        let scalars_wanted = opts.kinds.contains(Kind::Scalars);
        // The columns move into locals for the loop: unaliased, their lengths stay in
        // registers instead of being reloaded and stored back for every row.
        let sc = &mut self.tables.scalars;
        let mut tag = std::mem::take(&mut sc.c.tag);
        let mut step = std::mem::take(&mut sc.c.step);
        let mut wall = std::mem::take(&mut sc.c.wall);
        let mut value = std::mem::take(&mut sc.value);
        let mut offset = std::mem::take(&mut sc.c.offset);
        // The run's latest wall time and step, folded into the chunk once at the end.
        let (mut first_wall, mut last_wall, mut max_step) = (0.0, f64::NEG_INFINITY, i64::MIN);
        let (mut cur, mut n) = (0usize, 0u32);
        while n < 8192 && buf.len() - cur >= HEADER_LEN {
            let rest = &buf[cur..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap());
            // Whole records only: a record the window cuts short is the general path's.
            let room = rest.len().saturating_sub(crate::tf_record::OVERHEAD) as u64;
            if len > max_len || len > room || C::length(len) != word(rest, 8) {
                break;
            }
            let len = len as usize;
            let data = &rest[HEADER_LEN..HEADER_LEN + len];
            // Shape first: records of other kinds leave before paying for their data CRC.
            let Some(s) = crate::proto::simple_scalar(data) else {
                break;
            };
            if verify && C::data(data) != word(rest, HEADER_LEN + len) {
                break;
            }
            // Non-finite wall times (reported) and steps outside the range (which still
            // decide kinds) are the general path's.
            if !s.wall_time.is_finite() || s.step < lo || s.step >= hi {
                break;
            }
            let id = self.tag_id(s.tag);
            let t = &mut self.out.tags[id as usize];
            let known_scalar = t.kind == Some(Kind::Scalars) && t.meta.is_some();
            if !t.wanted || (known_scalar && !scalars_wanted) {
                // Left out by the filters: it still dates the run, as in the general path,
                // and costs no decoding (a one-tag query skips the other 99% this way).
            } else if known_scalar {
                t.points += 1;
                t.first_step = t.first_step.min(s.step);
                t.last_step = t.last_step.max(s.step);
                t.last_wall = s.wall_time;
                tag.push(id);
                step.push(s.step);
                wall.push(s.wall_time);
                value.push(f64::from(s.value));
                if provenance {
                    offset.push((base + cur as u64) as i64);
                }
            } else {
                // A tag's first value (its kind and metadata) goes through the general path.
                break;
            }
            if n == 0 {
                first_wall = s.wall_time;
            }
            last_wall = last_wall.max(s.wall_time);
            max_step = max_step.max(s.step);
            cur += len + crate::tf_record::OVERHEAD;
            n += 1;
        }
        let sc = &mut self.tables.scalars;
        sc.c.tag = tag;
        sc.c.step = step;
        sc.c.wall = wall;
        sc.value = value;
        sc.c.offset = offset;
        if n > 0 {
            let out = &mut self.out;
            // Every record taken here has a finite wall time: the first one dates the file
            // if nothing before it in this read did (its tag's first record may have had none).
            out.first_wall.get_or_insert(first_wall);
            out.last_wall = Some(out.last_wall.map_or(last_wall, |w: f64| w.max(last_wall)));
            out.max_step = Some(out.max_step.map_or(max_step, |m| m.max(max_step)));
        }
        (cur, n)
    }

    /// Backs the scalar columns with memory for the rows `bytes` more bytes could hold (rows
    /// are at least 40 bytes), ahead of writing them: one system call per column per step
    /// instead of a page fault per 4 KiB (see [`crate::columns::prefault`]). Only as far as
    /// the bytes read so far can reach, so a file of images backs almost nothing.
    fn populate_ahead(&mut self, bytes: usize) {
        if !self.opts.kinds.contains(Kind::Scalars) {
            return;
        }
        let sc = &mut self.tables.scalars;
        let want = sc.c.len() + bytes / 40;
        if want <= sc.populated {
            return;
        }
        // Steps of at least 64k rows (512 KiB of a 64-bit column): few system calls.
        let upto = want.max(sc.populated + (64 << 10));
        sc.prefault_rows(upto);
    }

    /// Decodes one record's Event and files its values.
    fn record(
        &mut self,
        data: &[u8],
        record_offset: u64,
        data_offset: u64,
    ) -> Result<(), DecodeError> {
        let ev = Event::decode(data)?;
        // Check every value decodes before filing any: a record is kept whole or not at all.
        match ev.what {
            What::Summary(s) => {
                for v in summary_values(s) {
                    SummaryValue::decode(v?)?;
                }
            }
            What::TaggedRunMetadata(t) => {
                TaggedRunMetadata::decode(t)?;
            }
            What::SessionLog(b) => {
                SessionLog::decode(b)?;
            }
            What::LogMessage(b) => {
                LogMessage::decode(b)?;
            }
            _ => {}
        }
        let wall = ev.wall_time;
        if !wall.is_finite() {
            self.problem(
                Severity::Warning,
                record_offset,
                0,
                format!("wall time is {wall}; kept the point with a null wall time"),
            );
        } else {
            if self.out.first_wall.is_none() {
                self.out.first_wall = Some(wall);
            }
            self.out.last_wall = Some(self.out.last_wall.map_or(wall, |w: f64| w.max(wall)));
        }
        let step = ev.step;
        if let Some(w) = ev.source_metadata {
            let writer = crate::proto::Fields::new(w).find_map(|f| match f {
                Ok((1, crate::proto::Wire::Bytes(b))) => Some(b),
                _ => None,
            });
            self.out.writer = Some(lossy(writer.unwrap_or_default()));
        }
        let in_range = self.opts.step_lo.is_none_or(|lo| step >= lo)
            && self.opts.step_hi.is_none_or(|hi| step < hi);
        let prov = self.opts.provenance.then_some(record_offset as i64);
        match ev.what {
            What::Summary(s) => {
                if !in_range {
                    // No rows, but the series' kinds still come from their first metadata.
                    for v in summary_values(s) {
                        let sv = SummaryValue::decode(v?)?;
                        self.learn(&sv, data, data_offset);
                    }
                    return Ok(());
                }
                self.out.max_step = Some(self.out.max_step.map_or(step, |m| m.max(step)));
                for v in summary_values(s) {
                    let v = v?;
                    let sv = SummaryValue::decode(v)?;
                    self.value(&sv, step, wall, prov, data, data_offset);
                }
            }
            What::FileVersion(v) => self.out.file_version = Some(lossy(v)),
            What::GraphDef(g) if in_range => {
                self.blob_event(
                    "__run_graph__",
                    plugin_names::GRAPHS,
                    g,
                    step,
                    wall,
                    prov,
                    data,
                    data_offset,
                );
            }
            What::MetaGraphDef(g) if in_range => {
                self.blob_event(
                    "__meta_graph__",
                    "meta_graph",
                    g,
                    step,
                    wall,
                    prov,
                    data,
                    data_offset,
                );
            }
            What::TaggedRunMetadata(t) if in_range => {
                let t = TaggedRunMetadata::decode(t)?;
                let tag = lossy(t.tag);
                self.blob_event(
                    &tag,
                    plugin_names::GRAPH_TAGGED_RUN_METADATA,
                    t.run_metadata,
                    step,
                    wall,
                    prov,
                    data,
                    data_offset,
                );
            }
            What::SessionLog(b) => {
                let s = SessionLog::decode(b)?;
                self.out.sessions.push(SessionEvent {
                    step,
                    wall,
                    status: s.status,
                    offset: record_offset,
                    source: SessionEvent::SESSION_LOG,
                    message: lossy(s.msg),
                    checkpoint_path: lossy(s.checkpoint_path),
                });
            }
            What::LogMessage(b) => {
                let m = LogMessage::decode(b)?;
                self.out.sessions.push(SessionEvent {
                    step,
                    wall,
                    status: m.level,
                    offset: record_offset,
                    source: SessionEvent::LOG_MESSAGE,
                    message: lossy(m.message),
                    checkpoint_path: String::new(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// Looks up or creates the file-local id of a tag.
    #[inline(always)]
    fn tag_id(&mut self, tag: &[u8]) -> i32 {
        if self.last >= 0 {
            let guess = self.next[self.last as usize];
            if guess >= 0 && same_bytes(&self.raw[guess as usize], tag) {
                self.last = guess;
                return guess;
            }
        }
        let id = self.tag_id_slow(tag);
        if self.last >= 0 {
            self.next[self.last as usize] = id;
        }
        self.last = id;
        id
    }

    fn tag_id_slow(&mut self, tag: &[u8]) -> i32 {
        if let Some(&id) = self.index.get(tag) {
            return id;
        }
        let name = lossy(tag);
        let wanted = self.opts.tags.as_ref().is_none_or(|re| re.is_match(&name));
        let kind = self.known.get(&name).map(|k| k.kind);
        let id = self.out.tags.len() as i32;
        self.out.tags.push(LocalTag {
            name,
            wanted,
            kind,
            meta: None,
            points: 0,
            first_step: i64::MAX,
            last_step: i64::MIN,
            last_wall: f64::NAN,
        });
        self.index.insert(tag.to_vec(), id);
        self.raw.push(tag.to_vec());
        self.next.push(-1);
        id
    }

    #[allow(clippy::too_many_arguments)]
    fn blob_event(
        &mut self,
        tag: &str,
        plugin: &str,
        blob: &[u8],
        step: i64,
        wall: f64,
        prov: Option<i64>,
        data: &[u8],
        data_offset: u64,
    ) {
        let id = self.tag_id(tag.as_bytes());
        let t = &mut self.out.tags[id as usize];
        if !t.wanted {
            return;
        }
        if t.meta.is_none() {
            t.meta = Some(SeriesMeta::plugin(plugin));
        }
        let kind = *t.kind.get_or_insert(Kind::Blobs);
        if kind != Kind::Blobs || !self.opts.kinds.contains(Kind::Blobs) {
            return;
        }
        self.count(id, step, wall);
        let b = &mut self.tables.blobs.b;
        b.c.push(id, step, wall, prov);
        b.push_blob(0, abs_offset(data, blob, data_offset), blob.len());
    }

    fn count(&mut self, id: i32, step: i64, wall: f64) {
        let t = &mut self.out.tags[id as usize];
        t.points += 1;
        t.first_step = t.first_step.min(step);
        t.last_step = t.last_step.max(step);
        t.last_wall = wall;
    }

    fn value(
        &mut self,
        sv: &SummaryValue<'_>,
        step: i64,
        wall: f64,
        prov: Option<i64>,
        data: &[u8],
        data_offset: u64,
    ) {
        let Some(id) = self.learn(sv, data, data_offset) else {
            return;
        };
        let Some(kind) = self.out.tags[id as usize].kind else {
            self.out.deferred += 1;
            return;
        };
        if !self.opts.kinds.contains(kind) {
            return;
        }
        let record_offset = data_offset - HEADER_LEN as u64;
        let meta = self.out.tags[id as usize].meta.as_ref();
        match append(
            self.tables,
            kind,
            id,
            step,
            wall,
            prov,
            sv,
            data,
            data_offset,
            meta,
        ) {
            Ok(()) => self.count(id, step, wall),
            Err(why) => {
                let name = self.out.tags[id as usize].name.clone();
                // The point is lost, so it counts as corruption, not as a warning.
                self.problem(
                    Severity::Corrupt,
                    record_offset,
                    0,
                    format!(
                        "value of tag {name:?} at step {step} skipped: not usable as {}: {why}",
                        kind.name()
                    ),
                );
            }
        }
    }

    /// What a value tells about its series (its metadata, hence its kind), whether or not the
    /// value itself is kept: a step filter must not change a series' kind, which its first
    /// metadata decides even when that record lies outside the steps asked for. Returns the
    /// tag's file-local id when the value is of a wanted series.
    fn learn(&mut self, sv: &SummaryValue<'_>, data: &[u8], data_offset: u64) -> Option<i32> {
        let id = self.tag_id(sv.effective_tag());
        let t = &mut self.out.tags[id as usize];
        if !t.wanted || matches!(sv.value, ValueKind::ObsoleteHisto) {
            return None;
        }
        // The first metadata seen decides; legacy values stand for their plugin's.
        if t.meta.is_none() {
            if let Some(p) = legacy_plugin(&sv.value) {
                t.meta = Some(SeriesMeta::plugin(p));
                if let Some(md) = sv.metadata.and_then(|m| Metadata::decode(m).ok()) {
                    let m = t.meta.as_mut().unwrap();
                    m.display_name = lossy(md.display_name);
                    m.description = lossy(md.description);
                }
            } else if let Some(m) = sv.metadata {
                match Metadata::decode(m) {
                    Ok(md) => t.meta = Some(SeriesMeta::from_proto(&md)),
                    Err(e) => {
                        let off = abs_offset(data, m, data_offset);
                        self.problem(
                            Severity::Warning,
                            off as u64,
                            m.len() as u64,
                            format!("summary metadata is not valid: {e}"),
                        );
                    }
                }
            }
        }
        let t = &mut self.out.tags[id as usize];
        if t.kind.is_none() {
            let md = sv.metadata.and_then(|m| Metadata::decode(m).ok());
            t.kind = decide(&sv.value, md.as_ref());
        }
        Some(id)
    }
}

/// Absolute file offset of `part`, a sub-slice of `whole` (which starts at `whole_offset`).
#[inline]
fn abs_offset(whole: &[u8], part: &[u8], whole_offset: u64) -> i64 {
    (whole_offset + (part.as_ptr() as usize - whole.as_ptr() as usize) as u64) as i64
}

/// Appends one value to its kind's table.
#[allow(clippy::too_many_arguments)]
pub fn append(
    tables: &mut Tables,
    kind: Kind,
    tag: i32,
    step: i64,
    wall: f64,
    prov: Option<i64>,
    sv: &SummaryValue<'_>,
    data: &[u8],
    data_offset: u64,
    meta: Option<&SeriesMeta>,
) -> Result<(), &'static str> {
    match (kind, &sv.value) {
        (Kind::Scalars, ValueKind::Simple(x)) => {
            tables.scalars.c.push(tag, step, wall, prov);
            tables.scalars.value.push(f64::from(*x));
        }
        (Kind::Histograms, ValueKind::Histo(h)) => {
            let h = HistogramProto::decode(h).map_err(|e| e.0)?;
            if h.bucket.len() != h.bucket_limit.len() {
                return Err("histogram has different numbers of buckets and limits");
            }
            let k = h.bucket.len();
            let hs = &mut tables.histograms;
            hs.c.push(tag, step, wall, prov);
            // TensorBoard's edges: the first left edge is min, the last right edge is max.
            // Writers keep an empty bucket before the data (tensorboardX, so that its left
            // limit is on record) whose limit lies below min, and an empty last bucket may
            // start above max: there TensorBoard's edges would run backwards (its Python
            // reader drops such end buckets), so the outer edge is clamped to the inner one.
            // Every bucket is kept, and no bucket has left > right.
            let right = |i: usize| {
                if i + 1 < k {
                    h.bucket_limit[i]
                } else if k > 1 && h.max < h.bucket_limit[k - 2] {
                    h.bucket_limit[k - 2]
                } else {
                    h.max
                }
            };
            let left = |i: usize| {
                let edge = if i == 0 { h.min } else { h.bucket_limit[i - 1] };
                if i == 0 && edge > right(0) {
                    right(0)
                } else {
                    edge
                }
            };
            hs.buckets.push_with(|v| v.extend((0..k).map(left)));
            hs.right.extend((0..k).map(right));
            hs.count.extend_from_slice(&h.bucket);
            for (col, x) in hs
                .stats
                .iter_mut()
                .zip([h.min, h.max, h.num, h.sum, h.sum_squares])
            {
                col.push(x);
            }
            hs.legacy.push(true);
        }
        (Kind::Images, ValueKind::Image(b)) => {
            let im = Image::decode(b).map_err(|e| e.0)?;
            let t = &mut tables.images;
            t.b.c.push(tag, step, wall, prov);
            t.b.push_blob(
                0,
                abs_offset(data, im.encoded, data_offset),
                im.encoded.len(),
            );
            t.width.push(im.width);
            t.height.push(im.height);
            t.colorspace.push(im.colorspace);
            t.content_type.push(sniff_image(im.encoded));
        }
        (Kind::Audio, ValueKind::Audio(b)) => {
            let a = Audio::decode(b).map_err(|e| e.0)?;
            let t = &mut tables.audio;
            t.b.c.push(tag, step, wall, prov);
            t.b.push_blob(0, abs_offset(data, a.encoded, data_offset), a.encoded.len());
            t.sample_rate.push(f64::from(a.sample_rate));
            t.num_channels.push(a.num_channels);
            t.length_frames.push(a.length_frames);
            let ct = if a.content_type.is_empty() {
                b"audio/wav".as_slice()
            } else {
                a.content_type
            };
            t.content_type.push(lossy(ct).as_bytes());
            t.label.push(b"");
        }
        (Kind::Hparams, _) => {
            let content = sv
                .metadata
                .and_then(|m| Metadata::decode(m).ok())
                .map(|m| m.plugin_content)
                .unwrap_or_default();
            tables.hparams.c.push(tag, step, wall, prov);
            tables.hparams.content.push(content);
        }
        (_, ValueKind::Tensor(_)) | (Kind::Tensors, ValueKind::Nothing) => {
            let t = match sv.value {
                ValueKind::Tensor(tb) => Tensor::decode(tb).map_err(|e| e.0)?,
                // TensorBoard gives a value with no payload a null tensor: float32, shape [0].
                _ => Tensor {
                    dtype: DT_FLOAT,
                    shape: vec![0],
                    ..Default::default()
                },
            };
            append_tensor(
                tables,
                kind,
                tag,
                step,
                wall,
                prov,
                &t,
                data,
                data_offset,
                meta,
            )?;
        }
        (_, ValueKind::Nothing) => return Err("the value is empty"),
        _ => return Err("the value's type does not match the series' kind"),
    }
    Ok(())
}

/// Appends a tensor-form value to its kind's table.
#[allow(clippy::too_many_arguments)]
pub fn append_tensor(
    tables: &mut Tables,
    kind: Kind,
    tag: i32,
    step: i64,
    wall: f64,
    prov: Option<i64>,
    t: &Tensor<'_>,
    data: &[u8],
    data_offset: u64,
    meta: Option<&SeriesMeta>,
) -> Result<(), &'static str> {
    let dtype = base_dtype(t.dtype);
    match kind {
        Kind::Scalars => {
            let x = t.scalar_f64().ok_or("not a rank-0 real-valued tensor")?;
            tables.scalars.c.push(tag, step, wall, prov);
            tables.scalars.value.push(x);
        }
        Kind::Histograms => {
            let rows = match t.shape.as_slice() {
                [k, 3] => *k as usize,
                [0] | [0, _] => 0,
                _ => return Err("histogram tensor is not of shape [k, 3]"),
            };
            let Elements::Numeric(b) = t.elements().map_err(|e| e.0)? else {
                return Err("histogram tensor holds strings");
            };
            let size = crate::tensor::element_size(dtype).ok_or("histogram dtype")?;
            let val = |i: usize| element_f64(dtype, &b[i * size..]).unwrap_or(f64::NAN);
            let hs = &mut tables.histograms;
            hs.c.push(tag, step, wall, prov);
            hs.buckets
                .push_with(|v| v.extend((0..rows).map(|r| val(r * 3))));
            hs.right.extend((0..rows).map(|r| val(r * 3 + 1)));
            hs.count.extend((0..rows).map(|r| val(r * 3 + 2)));
            for col in hs.stats.iter_mut() {
                col.push(f64::NAN);
            }
            hs.legacy.push(false);
        }
        Kind::Images => {
            let s = strings(t)?;
            if s.len() < 2 {
                return Err("image tensor has fewer than 2 elements");
            }
            let dim = |b: &[u8]| {
                std::str::from_utf8(b)
                    .ok()
                    .and_then(|x| x.trim().parse::<i32>().ok())
                    .unwrap_or(0)
            };
            let (w, h) = (dim(s[0]), dim(s[1]));
            let tb = &mut tables.images;
            for (i, img) in s[2..].iter().enumerate() {
                tb.b.c.push(tag, step, wall, prov);
                tb.b.push_blob(i as i32, abs_offset(data, img, data_offset), img.len());
                tb.width.push(w);
                tb.height.push(h);
                tb.colorspace.push(0);
                tb.content_type.push(sniff_image(img));
            }
        }
        Kind::Audio => {
            let s = strings(t)?;
            let stride = match t.shape.as_slice() {
                [_, 2] => 2,
                [_] => 1,
                _ => return Err("audio tensor is not of shape [k, 2] or [k]"),
            };
            let content_type = audio_content_type(meta);
            let ta = &mut tables.audio;
            for (i, row) in s.chunks(stride).enumerate() {
                let wav = row[0];
                let (rate, channels, frames) = wav_info(wav);
                ta.b.c.push(tag, step, wall, prov);
                ta.b.push_blob(i as i32, abs_offset(data, wav, data_offset), wav.len());
                ta.sample_rate.push(rate);
                ta.num_channels.push(channels);
                ta.length_frames.push(frames);
                ta.content_type.push(content_type);
                let label = row.get(1).copied().unwrap_or(b"");
                ta.label.push(String::from_utf8_lossy(label).as_bytes());
            }
        }
        Kind::Text => {
            let s = strings(t)?;
            let tx = &mut tables.text;
            for (i, el) in s.iter().enumerate() {
                tx.c.push(tag, step, wall, prov);
                tx.index.push(i as i32);
                tx.text.push(String::from_utf8_lossy(el).as_bytes());
                tx.shape.push(&t.shape);
            }
        }
        Kind::Blobs => {
            let s = strings(t)?;
            let b = &mut tables.blobs.b;
            for (i, el) in s.iter().enumerate() {
                b.c.push(tag, step, wall, prov);
                b.push_blob(i as i32, abs_offset(data, el, data_offset), el.len());
            }
        }
        Kind::Hparams => unreachable!("hparams values are filed from their metadata"),
        Kind::Tensors => {
            let els = t.elements().map_err(|e| e.0)?;
            let tt = &mut tables.tensors;
            tt.c.push(tag, step, wall, prov);
            tt.dtype.push(t.dtype);
            tt.shape.push(&t.shape);
            match els {
                Elements::Numeric(b) => {
                    tt.content.push(&b);
                    tt.content_valid.push(true);
                    tt.string_rows.push(tt.strings.len() as i64);
                    tt.strings_valid.push(false);
                }
                Elements::Strings(s) => {
                    tt.content.push(&[]);
                    tt.content_valid.push(false);
                    for el in s {
                        tt.strings.push(el);
                    }
                    tt.string_rows.push(tt.strings.len() as i64);
                    tt.strings_valid.push(true);
                }
            }
        }
    }
    Ok(())
}

/// The MIME type TensorBoard serves tensor-form audio as: from `AudioPluginData.encoding`.
fn audio_content_type(meta: Option<&SeriesMeta>) -> &'static [u8] {
    const WAV: u64 = 11;
    let encoding = meta.and_then(|m| {
        crate::proto::Fields::new(&m.plugin_content).find_map(|f| match f {
            Ok((2, crate::proto::Wire::Varint(v))) => Some(v),
            _ => None,
        })
    });
    if encoding == Some(WAV) {
        b"audio/wav"
    } else {
        b"application/octet-stream"
    }
}

fn strings<'a>(t: &Tensor<'a>) -> Result<Vec<&'a [u8]>, &'static str> {
    if base_dtype(t.dtype) != DT_STRING {
        return Err("expected a string tensor");
    }
    match t.elements().map_err(|e| e.0)? {
        Elements::Strings(s) => Ok(s),
        Elements::Numeric(_) => Err("expected a string tensor"),
    }
}

/// Sample rate, channels and frame count from a WAV header; zeros when it is not one.
fn wav_info(b: &[u8]) -> (f64, i64, i64) {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return (0.0, 0, 0);
    }
    let (mut rate, mut channels, mut block, mut frames) = (0u32, 0u16, 0u16, 0i64);
    let mut pos = 12;
    while pos + 8 <= b.len() {
        let id = &b[pos..pos + 4];
        let size = u32::from_le_bytes(b[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let body = &b[pos + 8..(pos + 8).saturating_add(size).min(b.len())];
        if id == b"fmt " && body.len() >= 14 {
            channels = u16::from_le_bytes([body[2], body[3]]);
            rate = u32::from_le_bytes(body[4..8].try_into().unwrap());
            block = u16::from_le_bytes([body[12], body[13]]);
        } else if id == b"data" && block > 0 {
            frames = (size / block as usize) as i64;
        }
        pos = pos.saturating_add(8 + size + (size & 1));
    }
    (f64::from(rate), i64::from(channels), frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused loop's two CRC flavours must agree byte for byte (only one runs on a given
    /// machine, so the portable one is otherwise untested on x86).
    #[test]
    fn record_crc_flavours_agree() {
        let data: Vec<u8> = (0..600u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for n in 0..data.len() {
            let want = crate::masked_crc::masked_crc32c(&data[..n]);
            assert_eq!(PortableCrc::data(&data[..n]), want, "length {n}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                assert_eq!(Sse42Crc::data(&data[..n]), want, "length {n}");
            }
        }
        for len in [0u64, 1, 57, 255, 1 << 20, u64::MAX] {
            let want = crate::masked_crc::masked_crc32c(&len.to_le_bytes());
            assert_eq!(PortableCrc::length(len), want);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                assert_eq!(Sse42Crc::length(len), want);
            }
        }
    }

    /// `record_heads`: each whole record's offset, step, wall time, `Event.what` field,
    /// SessionLog status, file version and source writer, in file order; bytes that are not a
    /// record are skipped as the reader skips them.
    #[test]
    fn record_heads_reports_each_record() {
        fn len_field(out: &mut Vec<u8>, number: u8, body: &[u8]) {
            out.push((number << 3) | 2);
            let mut n = body.len();
            while n >= 0x80 {
                out.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(body);
        }
        fn event(wall: f64, step: u8) -> Vec<u8> {
            let mut e = vec![0x09];
            e.extend_from_slice(&wall.to_le_bytes());
            e.extend_from_slice(&[0x10, step]);
            e
        }
        let mut version = event(1.5, 0);
        len_field(&mut version, 3, b"brain.Event:1");
        let mut start = event(2.5, 3);
        len_field(&mut start, 7, &[0x08, 0x01]); // SessionLog { status: START }
        let mut writer = Vec::new();
        len_field(&mut writer, 1, b"w1");
        len_field(&mut start, 10, &writer); // source_metadata
        let mut summary = event(3.5, 4);
        len_field(&mut summary, 5, b"");
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for (i, e) in [&version, &start, &summary].into_iter().enumerate() {
            if i == 2 {
                data.extend_from_slice(b"not a record at all");
            }
            offsets.push(data.len() as u64);
            crate::tf_record::write_record(&mut data, e);
        }
        let path = std::env::temp_dir().join(format!(
            "tbscope-record-heads-{}.tfevents",
            std::process::id()
        ));
        std::fs::write(&path, &data).unwrap();
        let heads = record_heads(&path, 1 << 20).unwrap();
        std::fs::remove_file(&path).unwrap();
        let got: Vec<_> = heads
            .iter()
            .map(|h| {
                (
                    h.offset,
                    h.step,
                    h.wall_time,
                    h.what,
                    h.status,
                    h.file_version.clone(),
                    h.writer.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    offsets[0],
                    0,
                    1.5,
                    3,
                    0,
                    Some("brain.Event:1".to_string()),
                    None
                ),
                (offsets[1], 3, 2.5, 7, 1, None, Some("w1".to_string())),
                (offsets[2], 4, 3.5, 5, 0, None, None),
            ]
        );
    }

    #[test]
    fn same_bytes_is_equality() {
        let a: Vec<u8> = (0..40u8).collect();
        for n in 0..a.len() {
            for m in 0..a.len() {
                assert_eq!(same_bytes(&a[..n], &a[..m]), n == m);
            }
            for flip in 0..n {
                let mut b = a[..n].to_vec();
                b[flip] ^= 0x80;
                assert!(!same_bytes(&a[..n], &b), "{n} {flip}");
            }
        }
    }
}
