//! The record loop: reads a file's records with `pread` into a reused buffer and turns each
//! event into rows (CRCs checked in a fused loop, tags looked up without hashing).

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::append::{abs_offset, append};
use super::model::{
    lossy, Cursor, FileChunk, FxBuild, Known, LocalTag, Options, Problem, SeriesMeta, SessionEvent,
    Severity, Until, CHUNK, STOPPED_TAIL,
};
use crate::columns::Tables;
use crate::data_compat::{decide, legacy_plugin, plugin_names, Kind};
use crate::proto::{
    summary_values, DecodeError, Event, LogMessage, Metadata, SessionLog, SummaryValue,
    TaggedRunMetadata, ValueKind, What,
};
use crate::tf_record::{data_crc_ok, payload, Damage, End, Step, WalkOptions, Walker, HEADER_LEN};

#[cfg(target_arch = "x86_64")]
use super::fused::Sse42Crc;
use super::fused::{same_bytes, PortableCrc, RecordCrc};

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
    chunk.tables = Some(Box::new(tables));
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
        // Past `n` a file being filled in may hold holes: what is there ends at `n`.
        Ok(m) if m.is_file() => match until {
            Until::Upto(n) => m.len().min(n),
            _ => m.len(),
        },
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
    let (mut stop, mut end) = match until {
        Until::Cut(c) if c < size => (c, End::Cut),
        Until::Final => (size, End::Final),
        Until::Live | Until::Cut(_) | Until::Upto(_) => (size, End::Live),
    };
    let range_start = match opts.byte_range {
        Some((lo, hi)) => {
            if let Some(hi) = hi.filter(|&hi| hi < stop) {
                (stop, end) = (hi, End::Cut);
            }
            lo
        }
        None => 0,
    };
    if opts.kinds.contains(Kind::Scalars) && stop > start.offset.max(range_start) {
        // The smallest scalar record is about 40 bytes; reserving for that many rows means the
        // columns never reallocate. Untouched capacity costs address space, not memory.
        let rows = ((stop - start.offset.max(range_start)) / 40) as usize;
        p.tables.scalars.c.reserve_chunk(rows, opts.provenance);
        crate::mem::reserve(&mut p.tables.scalars.value, rows);
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
    // A piece of the file: records before its start belong to another piece.
    from = from.max(range_start);
    if opts.byte_range.is_some() && from >= stop {
        return p.out;
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
    /// instead of a page fault per 4 KiB (see [`crate::mem::prefault`]). Only as far as
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

    #[allow(
        clippy::too_many_arguments,
        reason = "the record loop's per-value state, as append()"
    )]
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
