//! Log surgery: a new logdir from an old one, with tags, step ranges or records a restart
//! superseded left out, and each run's files merged into one. The input is only ever read.
//!
//! Records are read with the reader's own framing ([`Walker`], which `event_file` uses too, with
//! the same decision about each file's end), so the output holds exactly the records a scan of
//! the input returns, minus what was asked to go. A record goes out byte for byte
//! unless part of it is dropped: an Event whose Summary loses some of its values is re-encoded
//! with the kept values copied as raw bytes, every other field of the Event untouched.
//!
//! Order: a run's files are concatenated in name order, records in file order. That is the
//! order every TensorBoard loader and `tbscope.scan` read them in, so per-tag arrival order,
//! which decides duplicate steps and restarts, is the same in the output. (Sorting by wall time
//! would not be: clocks differ between ranks, and a restart's records would interleave with
//! the ones they replace.)
//!
//! Metadata: a series' kind and description come from its first metadata. When the value that
//! carried it is dropped, the first kept value of that tag gets it instead, so the output's
//! series look like the input's.
//!
//! Safety: the output is written into a staging directory next to it and renamed into place by
//! [`commit`]; an interrupted rewrite leaves nothing under the final name.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use rayon::prelude::*;
use regex::Regex;

use crate::data_compat::{legacy_plugin, Kind};
use crate::error::{Error, Result};
use crate::event_file::{self, Severity};
use crate::load::{thread_count, ReaderOptions, ReportEntry, Restarts};
use crate::logdir::discover;
use crate::proto::{
    read_varint, summary_values, DecodeError, Event, SessionLog, SummaryValue, TaggedRunMetadata,
    ValueKind, What,
};
use crate::tf_record::{payload, write_record, End, Step, WalkOptions, Walker};
use crate::writer::put_varint;

/// Tags are short and trusted: the reader's fast hasher.
type FxBuild = std::hash::BuildHasherDefault<event_file::FxHasher>;

/// Tags the reader gives events that are not summaries (see `event_file`).
const GRAPH_TAG: &str = "__run_graph__";
const META_GRAPH_TAG: &str = "__meta_graph__";

/// The smallest read; longer records grow the buffer.
const CHUNK: usize = 4 << 20;

/// What to leave out and how to lay the output out.
#[derive(Debug, Clone)]
pub struct RewriteOptions {
    /// Only runs whose name matches (others are not written at all).
    pub runs: Option<Regex>,
    /// Keep only tags that match (graph records count as `__run_graph__`/`__meta_graph__`).
    pub tags: Option<Regex>,
    /// Drop tags that match.
    pub drop_tags: Option<Regex>,
    /// Drop records with `lo <= step < hi`; an open end is None.
    pub drop_steps: Option<(Option<i64>, Option<i64>)>,
    /// Drop what TensorBoard's preemption rule drops (see [`superseded`]).
    pub preempt: bool,
    /// One output file per run (true) or one per input file, under the input file's name.
    pub merge: bool,
    /// Records longer than this are corruption (the reader's cap).
    pub max_len: u64,
    /// Worker threads (0: automatic); runs are rewritten in parallel.
    pub threads: usize,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        RewriteOptions {
            runs: None,
            tags: None,
            drop_tags: None,
            drop_steps: None,
            preempt: false,
            merge: true,
            max_len: 256 << 20,
            threads: 0,
        }
    }
}

impl RewriteOptions {
    fn step_dropped(&self, step: i64) -> bool {
        self.drop_steps
            .is_some_and(|(lo, hi)| lo.is_none_or(|lo| step >= lo) && hi.is_none_or(|hi| step < hi))
    }

    fn tag_wanted(&self, tag: &str) -> bool {
        self.tags.as_ref().is_none_or(|re| re.is_match(tag))
            && !self.drop_tags.as_ref().is_some_and(|re| re.is_match(tag))
    }
}

/// What a rewrite read, wrote and skipped.
#[derive(Debug, Clone, Default)]
pub struct RewriteStats {
    /// Runs written (a run with nothing left to write is not created).
    pub runs: usize,
    pub files_in: usize,
    /// Files written, relative to the output directory, `/`-separated.
    pub files_out: Vec<String>,
    /// Whole, valid records read.
    pub records_in: u64,
    pub records_out: u64,
    /// Records left out entirely (every value dropped, or a graph record dropped).
    pub records_dropped: u64,
    /// Records written re-encoded (some values dropped, or metadata moved onto them).
    pub records_rewritten: u64,
    pub values_dropped: u64,
    /// Values that received the first metadata of their tag from a dropped value.
    pub metadata_moved: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Bytes not copied because they were corrupt, undecodable or a truncated tail.
    pub bytes_skipped: u64,
    pub problems: Vec<ReportEntry>,
}

impl RewriteStats {
    fn add(&mut self, o: RewriteStats) {
        self.runs += o.runs;
        self.files_in += o.files_in;
        self.files_out.extend(o.files_out);
        self.records_in += o.records_in;
        self.records_out += o.records_out;
        self.records_dropped += o.records_dropped;
        self.records_rewritten += o.records_rewritten;
        self.values_dropped += o.values_dropped;
        self.metadata_moved += o.metadata_moved;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.bytes_skipped += o.bytes_skipped;
        self.problems.extend(o.problems);
    }
}

// ------------------------------------------------------------------------------------------
// Records on the wire, field by field.

/// One field of a message as it sits on the wire.
struct RawField<'a> {
    number: u32,
    /// The whole field, key included: what is copied when the field is kept.
    whole: &'a [u8],
    /// The payload of a length-delimited field.
    bytes: Option<&'a [u8]>,
}

/// The fields of `buf` with their exact byte spans (`proto::Fields` gives payloads only).
fn raw_fields(buf: &[u8]) -> impl Iterator<Item = std::result::Result<RawField<'_>, DecodeError>> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        let start = pos;
        let field = (|| {
            let key = read_varint(buf, &mut pos)?;
            let number =
                u32::try_from(key >> 3).map_err(|_| DecodeError("invalid field number"))?;
            if number == 0 {
                return Err(DecodeError("invalid field number"));
            }
            let mut bytes = None;
            let skip = match key & 7 {
                0 => {
                    read_varint(buf, &mut pos)?;
                    0
                }
                1 => 8,
                2 => {
                    let n = read_varint(buf, &mut pos)?;
                    let n = usize::try_from(n).map_err(|_| DecodeError("length overflows"))?;
                    let end = pos
                        .checked_add(n)
                        .filter(|&e| e <= buf.len())
                        .ok_or(DecodeError("field runs past the end of its message"))?;
                    bytes = Some(&buf[pos..end]);
                    n
                }
                5 => 4,
                _ => return Err(DecodeError("unsupported wire type")),
            };
            pos = pos
                .checked_add(skip)
                .filter(|&e| e <= buf.len())
                .ok_or(DecodeError("field runs past the end of its message"))?;
            Ok(RawField {
                number,
                whole: &buf[start..pos],
                bytes,
            })
        })();
        if field.is_err() {
            pos = buf.len();
        }
        Some(field)
    })
}

/// Appends a length-delimited field (`number` <= 15, so its key is one byte).
fn put_len_field(out: &mut Vec<u8>, number: u8, body: &[u8]) {
    out.push((number << 3) | 2);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

const EVENT_SUMMARY: u32 = 5;
const SUMMARY_VALUE: u32 = 1;
const VALUE_METADATA: u32 = 9;

/// How a kept value goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ValueEdit {
    Keep,
    Drop,
    /// Carry this SummaryMetadata instead of its own.
    SetMeta(Vec<u8>),
    /// Carry no metadata (its series was decided by a legacy value without any).
    StripMeta,
}

/// A Summary.Value with its metadata replaced (or removed); every other field as it was.
fn edit_value(value: &[u8], meta: Option<&[u8]>) -> std::result::Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(value.len() + meta.map_or(0, |m| m.len() + 6));
    for f in raw_fields(value) {
        let f = f?;
        if f.number != VALUE_METADATA {
            out.extend_from_slice(f.whole);
        }
    }
    if let Some(m) = meta {
        put_len_field(&mut out, VALUE_METADATA as u8, m);
    }
    Ok(out)
}

/// The Event `data` with the values of its Summary edited as `edits` says (one per value, in
/// order). The Summary that decoders use is the last one on the wire; any other field of the
/// Event, that Summary's non-value fields included, is copied as it was.
fn edit_event(data: &[u8], edits: &[ValueEdit]) -> std::result::Result<Vec<u8>, DecodeError> {
    let last_summary = raw_fields(data)
        .enumerate()
        .filter(|(_, f)| f.as_ref().is_ok_and(|f| f.number == EVENT_SUMMARY))
        .map(|(i, _)| i)
        .last();
    let mut out = Vec::with_capacity(data.len());
    for (i, f) in raw_fields(data).enumerate() {
        let f = f?;
        if Some(i) != last_summary {
            out.extend_from_slice(f.whole);
            continue;
        }
        let summary = f
            .bytes
            .ok_or(DecodeError("expected a length-delimited field"))?;
        let mut body = Vec::with_capacity(summary.len());
        let mut edit = edits.iter();
        for g in raw_fields(summary) {
            let g = g?;
            if g.number != SUMMARY_VALUE {
                body.extend_from_slice(g.whole);
                continue;
            }
            let value = g
                .bytes
                .ok_or(DecodeError("expected a length-delimited field"))?;
            match edit.next().unwrap_or(&ValueEdit::Keep) {
                ValueEdit::Keep => body.extend_from_slice(g.whole),
                ValueEdit::Drop => {}
                ValueEdit::SetMeta(m) => {
                    put_len_field(&mut body, SUMMARY_VALUE as u8, &edit_value(value, Some(m))?)
                }
                ValueEdit::StripMeta => {
                    put_len_field(&mut body, SUMMARY_VALUE as u8, &edit_value(value, None)?)
                }
            }
        }
        put_len_field(&mut out, EVENT_SUMMARY as u8, &body);
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// Decisions, record by record.

/// What happens to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Copied byte for byte.
    Keep,
    /// Left out.
    Drop,
    /// Written as this Event instead (some values dropped or given metadata).
    Replace(Vec<u8>),
}

/// What decides a series' metadata, as the reader sees it: a legacy value (its plugin, plus
/// display name and description from metadata it may carry) or a value with metadata.
/// `Some(None)`: a legacy value without metadata.
type Decider = Option<Option<Vec<u8>>>;

#[derive(Debug, Default)]
struct TagState {
    wanted: bool,
    /// The first decider of this tag in the input, once seen.
    first: Decider,
    /// The output already holds a value that decides the same way.
    out_decided: bool,
}

/// Per-run state: filters are matched once per tag, and each tag's first metadata is followed
/// so that dropping the value holding it does not change the output's series.
pub struct Editor<'o> {
    opts: &'o RewriteOptions,
    tags: HashMap<Vec<u8>, TagState, FxBuild>,
    pub values_dropped: u64,
    pub metadata_moved: u64,
}

impl<'o> Editor<'o> {
    pub fn new(opts: &'o RewriteOptions) -> Self {
        Editor {
            opts,
            tags: HashMap::default(),
            values_dropped: 0,
            metadata_moved: 0,
        }
    }

    fn state(&mut self, tag: &[u8]) -> &mut TagState {
        if !self.tags.contains_key(tag) {
            let wanted = self.opts.tag_wanted(&String::from_utf8_lossy(tag));
            self.tags.insert(
                tag.to_vec(),
                TagState {
                    wanted,
                    ..Default::default()
                },
            );
        }
        self.tags.get_mut(tag).expect("inserted above")
    }

    /// Decides one record. `superseded(tag, k)` says whether the `k`-th value of `tag` in this
    /// record is one that preemption drops. An error means the record is not a valid Event in
    /// the reader's eyes (it skips such records whole, so the rewrite drops them too).
    pub fn decide(
        &mut self,
        data: &[u8],
        superseded: &dyn Fn(&[u8], u32) -> bool,
    ) -> std::result::Result<Decision, DecodeError> {
        if let Some(d) = self.simple(data, superseded) {
            return Ok(d);
        }
        let ev = Event::decode(data)?;
        // The same validation as the reader's: a record is used whole or not at all.
        match ev.what {
            What::TaggedRunMetadata(t) => {
                TaggedRunMetadata::decode(t)?;
            }
            What::SessionLog(b) => {
                SessionLog::decode(b)?;
            }
            _ => {}
        }
        let step_dropped = self.opts.step_dropped(ev.step);
        let blob_tag: &[u8] = match ev.what {
            What::Summary(s) => return self.summary(data, s, step_dropped, superseded),
            What::GraphDef(_) => GRAPH_TAG.as_bytes(),
            What::MetaGraphDef(_) => META_GRAPH_TAG.as_bytes(),
            What::TaggedRunMetadata(t) => TaggedRunMetadata::decode(t)?.tag,
            // file_version, session logs, log messages: not data of any series, always kept.
            _ => return Ok(Decision::Keep),
        };
        let wanted = self.state(blob_tag).wanted;
        if wanted && !step_dropped && !superseded(blob_tag, 0) {
            Ok(Decision::Keep)
        } else {
            self.values_dropped += 1;
            Ok(Decision::Drop)
        }
    }

    /// The commonest record (one `simple_value`, nothing else; see `proto::simple_scalar`)
    /// without the general path's allocations. None: take the general path (not that layout,
    /// or the value is the first kept one of a tag whose first metadata must move onto it).
    fn simple(&mut self, data: &[u8], superseded: &dyn Fn(&[u8], u32) -> bool) -> Option<Decision> {
        let s = crate::proto::simple_scalar(data)?;
        let step_dropped = self.opts.step_dropped(s.step);
        let st = self.state(s.tag);
        // A legacy value without metadata decides its series by itself.
        if st.first.is_none() {
            st.first = Some(None);
        }
        if !st.wanted || step_dropped || superseded(s.tag, 0) {
            self.values_dropped += 1;
            return Some(Decision::Drop);
        }
        if !st.out_decided {
            if matches!(st.first, Some(Some(_))) {
                return None;
            }
            st.out_decided = true;
        }
        Some(Decision::Keep)
    }

    fn summary(
        &mut self,
        data: &[u8],
        summary: &[u8],
        step_dropped: bool,
        superseded: &dyn Fn(&[u8], u32) -> bool,
    ) -> std::result::Result<Decision, DecodeError> {
        let values = summary_values(summary).collect::<std::result::Result<Vec<_>, _>>()?;
        let decoded = values
            .iter()
            .map(|v| SummaryValue::decode(v))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut edits = Vec::with_capacity(decoded.len());
        for (i, sv) in decoded.iter().enumerate() {
            let tag = sv.effective_tag();
            let k = decoded[..i]
                .iter()
                .filter(|o| o.effective_tag() == tag)
                .count() as u32;
            let legacy = legacy_plugin(&sv.value).is_some();
            let decider: Decider =
                if legacy || (sv.metadata.is_some() && sv.value != ValueKind::ObsoleteHisto) {
                    Some(sv.metadata.map(<[u8]>::to_vec))
                } else {
                    None
                };
            let st = self.state(tag);
            if st.first.is_none() {
                st.first.clone_from(&decider);
            }
            let kept = st.wanted && !step_dropped && !superseded(tag, k);
            if !kept {
                edits.push(ValueEdit::Drop);
                continue;
            }
            let mut edit = ValueEdit::Keep;
            if !st.out_decided {
                if let Some(first) = &st.first {
                    // The input has decided this series by now; the output's first deciding
                    // value must decide the same way.
                    st.out_decided = true;
                    match first {
                        Some(m) if sv.metadata != Some(m.as_slice()) => {
                            edit = ValueEdit::SetMeta(m.clone())
                        }
                        // Only a legacy value can lose its metadata and still decide its kind.
                        None if sv.metadata.is_some() && legacy => edit = ValueEdit::StripMeta,
                        _ => {}
                    }
                }
            }
            edits.push(edit);
        }
        let dropped = edits.iter().filter(|e| **e == ValueEdit::Drop).count();
        self.values_dropped += dropped as u64;
        self.metadata_moved += edits
            .iter()
            .filter(|e| matches!(e, ValueEdit::SetMeta(_) | ValueEdit::StripMeta))
            .count() as u64;
        if edits.iter().all(|e| *e == ValueEdit::Keep) {
            Ok(Decision::Keep)
        } else if dropped == edits.len() {
            Ok(Decision::Drop)
        } else {
            Ok(Decision::Replace(edit_event(data, &edits)?))
        }
    }
}

// ------------------------------------------------------------------------------------------
// Preemption, decided by the reader itself.

/// Values preemption drops, per input file (by its name relative to the input, as the
/// reader's `file` column has it) and record offset: each as (tag, k), the `k`-th value of
/// that tag in the record.
pub type Superseded = HashMap<String, HashMap<u64, Vec<(String, u32)>, FxBuild>>;

/// Which values TensorBoard's preemption rule drops (a record at step s drops the earlier
/// records of its tag with step >= s), decided on the rows the reader files, so the output is
/// exactly what `scan(restarts="preempt")` returns: which values count as points (kinds decided
/// across files, values unusable as their kind) is the reader's call, not a copy of it here.
/// Costs one read of the input with provenance, memory as for a scan of it.
pub fn superseded(
    src: &Path,
    runs: Option<&Regex>,
    max_len: u64,
    threads: usize,
    cancel: &AtomicBool,
) -> Result<Superseded> {
    // Data CRCs checked, as the rewrite's own reading does.
    let file = event_file::Options {
        provenance: true,
        max_len,
        verify: true,
        ..Default::default()
    };
    let opts = ReaderOptions {
        file,
        runs: runs.cloned(),
        restarts: Restarts::All,
        threads,
        step_lo: None,
        ..Default::default()
    };
    let mut reader = crate::load::Reader::new(src, opts)?;
    reader.load(cancel)?;
    let mut out = Superseded::new();
    for kind in Kind::ALL {
        preempt_kind(&reader.table(kind)?, &mut out)?;
    }
    Ok(out)
}

/// Names of a dictionary column's rows as ids shared across batches.
fn name_ids(col: &dyn Array, names: &mut HashMap<String, usize>) -> Result<Vec<usize>> {
    let dict = col
        .as_dictionary_opt::<Int32Type>()
        .ok_or_else(|| Error::Other("expected a dictionary column".into()))?;
    let values = dict.values().as_string::<i32>();
    let local: Vec<usize> = (0..values.len())
        .map(|i| {
            let n = names.len();
            *names.entry(values.value(i).to_string()).or_insert(n)
        })
        .collect();
    Ok(dict
        .keys()
        .values()
        .iter()
        .map(|&k| local[k as usize])
        .collect())
}

/// The preemption rule over one kind's rows, as `restarts::apply` runs it; dropped values are
/// added to `out`.
fn preempt_kind(batches: &[RecordBatch], out: &mut Superseded) -> Result<()> {
    let mut names: HashMap<String, usize> = HashMap::new();
    struct Rows {
        run: Vec<usize>,
        tag: Vec<usize>,
        file: Vec<usize>,
        step: Vec<i64>,
        offset: Vec<i64>,
        index: Option<Vec<i32>>,
    }
    let mut all = Vec::with_capacity(batches.len());
    for b in batches {
        let col = |name: &str| {
            b.schema()
                .index_of(name)
                .map(|i| b.column(i).clone())
                .map_err(|_| Error::Other(format!("the reader's table has no {name} column")))
        };
        all.push(Rows {
            run: name_ids(col("run")?.as_ref(), &mut names)?,
            tag: name_ids(col("tag")?.as_ref(), &mut names)?,
            file: name_ids(col("file")?.as_ref(), &mut names)?,
            step: col("step")?.as_primitive::<Int64Type>().values().to_vec(),
            offset: col("offset")?.as_primitive::<Int64Type>().values().to_vec(),
            index: col("index")
                .ok()
                .map(|c| c.as_primitive::<Int32Type>().values().to_vec()),
        });
    }
    let mut dropped: Vec<Vec<bool>> = all.iter().map(|r| vec![false; r.step.len()]).collect();
    // Per (run, tag): the kept rows as (batch, row, step), steps increasing.
    type Stack = Vec<(usize, usize, i64)>;
    let mut stacks: HashMap<(usize, usize), Stack, FxBuild> = HashMap::default();
    for (bi, r) in all.iter().enumerate() {
        for i in 0..r.step.len() {
            let s = r.step[i];
            // Further rows of one value (images of one summary, text elements) do not
            // preempt their own siblings.
            let continuation = r.index.as_ref().is_some_and(|ix| ix[i] > 0);
            let stack = stacks.entry((r.run[i], r.tag[i])).or_default();
            while let Some(&(pb, pi, ps)) = stack.last() {
                if continuation || ps < s {
                    break;
                }
                dropped[pb][pi] = true;
                stack.pop();
            }
            stack.push((bi, i, s));
        }
    }
    // A row's value is the k-th of its tag in its record; a record's rows are contiguous.
    // Ids first, names once per file and tag at the end.
    type ById = HashMap<usize, HashMap<u64, Vec<(usize, u32)>, FxBuild>, FxBuild>;
    let mut found: ById = HashMap::default();
    for (r, d) in all.iter().zip(&dropped) {
        let mut record: Option<(usize, i64)> = None;
        // Values of this record so far, per tag: records hold a handful, a Vec beats a map.
        let mut seen: Vec<(usize, u32)> = Vec::new();
        for i in 0..r.step.len() {
            if r.index.as_ref().is_some_and(|ix| ix[i] > 0) {
                continue;
            }
            if record != Some((r.file[i], r.offset[i])) {
                record = Some((r.file[i], r.offset[i]));
                seen.clear();
            }
            let k = match seen.iter_mut().find(|(t, _)| *t == r.tag[i]) {
                Some((_, n)) => {
                    *n += 1;
                    *n - 1
                }
                None => {
                    seen.push((r.tag[i], 1));
                    0
                }
            };
            if d[i] {
                found
                    .entry(r.file[i])
                    .or_default()
                    .entry(r.offset[i] as u64)
                    .or_default()
                    .push((r.tag[i], k));
            }
        }
    }
    let by_id: Vec<&String> = {
        let mut v: Vec<(&String, &usize)> = names.iter().collect();
        v.sort_by_key(|(_, &i)| i);
        v.into_iter().map(|(n, _)| n).collect()
    };
    for (file, records) in found {
        let dst = out.entry(by_id[file].clone()).or_default();
        for (offset, values) in records {
            dst.entry(offset)
                .or_default()
                .extend(values.into_iter().map(|(t, k)| (by_id[t].clone(), k)));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Writing.

/// One output file, created on its first record (a file with nothing to hold is not made).
struct Output {
    path: PathBuf,
    rel: String,
    file: Option<File>,
    buf: Vec<u8>,
    bytes: u64,
}

impl Output {
    fn new(path: PathBuf, rel: String) -> Self {
        Output {
            path,
            rel,
            file: None,
            buf: Vec::new(),
            bytes: 0,
        }
    }

    fn write(&mut self, framed: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(framed);
        self.bytes += framed.len() as u64;
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(e, dir))?;
            }
            // create_new: two inputs can never end up in one output file by a name clash.
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.path)
                .map_err(|e| Error::io(e, &self.path))?;
            self.file = Some(f);
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all(&self.buf)
            .map_err(|e| Error::io(e, &self.path))?;
        self.buf.clear();
        Ok(())
    }

    /// Flushes and syncs; returns the file's name relative to the output and its size when
    /// one was made.
    fn finish(mut self) -> Result<Option<(String, u64)>> {
        if self.bytes == 0 {
            return Ok(None);
        }
        self.flush()?;
        if let Some(f) = &self.file {
            // Durable before the rename that publishes it.
            f.sync_all().map_err(|e| Error::io(e, &self.path))?;
        }
        Ok(Some((self.rel, self.bytes)))
    }
}

/// `path` relative to the input, as the reader names files (`/`-separated; the file name when
/// the input is one file).
fn rel_name(root: &Path, path: &Path) -> String {
    if root.is_file() {
        return path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    }
    path.strip_prefix(root).map_or_else(
        |_| path.to_string_lossy().into_owned(),
        |p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        },
    )
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // fails.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = if ok {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    // A slash in the name would make it a path.
    let clean: String = name
        .chars()
        .map(|c| if c == '/' { '_' } else { c })
        .collect();
    if clean.is_empty() {
        "localhost".into()
    } else {
        clean
    }
}

/// The merged file's name: TensorBoard's `events.out.tfevents.<time>.<host>...` pattern, with
/// `tbscope-rewrite` where a writer puts its process id.
pub fn merged_file_name(time: u64, host: &str) -> String {
    format!("events.out.tfevents.{time:010}.{host}.tbscope-rewrite.0")
}

struct RunJob<'a> {
    run: &'a str,
    files: &'a [PathBuf],
}

/// Rewrites one run into `out_dir`.
fn rewrite_run(
    root: &Path,
    job: &RunJob<'_>,
    out_dir: &Path,
    merged_name: &str,
    opts: &RewriteOptions,
    preempted: Option<&Superseded>,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let mut st = RewriteStats {
        files_in: job.files.len(),
        ..Default::default()
    };
    let run_dir = if job.run == "." {
        out_dir.to_path_buf()
    } else {
        out_dir.join(job.run)
    };
    let rel_out = |name: &str| {
        if job.run == "." {
            name.to_string()
        } else {
            format!("{}/{name}", job.run)
        }
    };
    let mut editor = Editor::new(opts);
    let mut out: Option<Output> = None;
    let mut scratch = Vec::new();
    let mut since_check = 0u32;
    let no_map = HashMap::default();
    let mut buf = Vec::new();
    // Whether each file may still be written: the reader's decision (see `load::may_grow`).
    let now = SystemTime::now();
    let stats: Vec<(&Path, Option<SystemTime>)> = job
        .files
        .iter()
        .map(|p| {
            let mtime = std::fs::metadata(p).and_then(|m| m.modified()).ok();
            (p.as_path(), mtime)
        })
        .collect();
    let live: Vec<(&PathBuf, bool)> = job
        .files
        .iter()
        .zip(crate::load::may_grow(
            &stats,
            now,
            crate::load::TAIL_TIMEOUT,
        ))
        .collect();
    for path in job.files {
        let rel = rel_name(root, path);
        let dropped = preempted.and_then(|p| p.get(&rel)).unwrap_or(&no_map);
        if !opts.merge || out.is_none() {
            let name = if opts.merge {
                merged_name.to_string()
            } else {
                path.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            };
            out = Some(Output::new(run_dir.join(&name), rel_out(&name)));
        }
        let o = out.as_mut().expect("set above");
        let file = File::open(path).map_err(|e| Error::io(e, path))?;
        let meta = file.metadata().map_err(|e| Error::io(e, path))?;
        if !meta.is_file() {
            return Err(Error::io(io::Error::other("not a regular file"), path));
        }
        st.bytes_in += meta.len();
        let end = if live.iter().any(|(p, l)| *p == path && *l) {
            End::Live
        } else {
            End::Final
        };
        let walk = WalkOptions {
            max_len: opts.max_len,
            verify: true,
            min_read: CHUNK,
        };
        let mut records = Walker::new(&file, 0, meta.len(), end, walk, std::mem::take(&mut buf));
        let problem =
            |st: &mut RewriteStats, sev: Severity, offset: u64, length: u64, why: String| {
                st.problems.push(ReportEntry {
                    run: job.run.to_string(),
                    file: rel.clone(),
                    severity: sev,
                    offset,
                    length,
                    reason: why,
                })
            };
        loop {
            let item = records.next();
            since_check += 1;
            if since_check >= 4096 {
                since_check = 0;
                if cancel.load(Ordering::Relaxed) {
                    return Err(Error::Interrupted);
                }
            }
            match item {
                Step::End => break,
                Step::ReadError { error, .. } => return Err(Error::io(error, path)),
                Step::Record { offset, framed } => {
                    let data = payload(framed);
                    st.records_in += 1;
                    let here = dropped.get(&offset);
                    // The reader's tags are the lossy UTF-8 of the bytes.
                    let sup = |tag: &[u8], k: u32| {
                        here.is_some_and(|v| {
                            v.iter().any(|(t, kk)| {
                                *kk == k && String::from_utf8_lossy(tag) == t.as_str()
                            })
                        })
                    };
                    match editor.decide(data, &sup) {
                        Ok(Decision::Keep) => {
                            o.write(framed)?;
                            st.records_out += 1;
                        }
                        Ok(Decision::Drop) => st.records_dropped += 1,
                        Ok(Decision::Replace(event)) => {
                            scratch.clear();
                            write_record(&mut scratch, &event);
                            o.write(&scratch)?;
                            st.records_out += 1;
                            st.records_rewritten += 1;
                        }
                        Err(e) => {
                            st.bytes_skipped += framed.len() as u64;
                            problem(
                                &mut st,
                                Severity::Corrupt,
                                offset,
                                framed.len() as u64,
                                format!("record is not a valid Event: {e}; left out"),
                            );
                        }
                    }
                }
                Step::Damage {
                    offset,
                    length,
                    why,
                } => {
                    st.bytes_skipped += length;
                    problem(
                        &mut st,
                        Severity::Corrupt,
                        offset,
                        length,
                        format!("{why}; skipped to the next valid record, not copied"),
                    );
                }
                Step::Tail {
                    offset,
                    length,
                    stopped,
                } => {
                    st.bytes_skipped += length;
                    let (sev, why) = if stopped {
                        (Severity::Warning, format!("{}: the file ends inside a record and is no longer written (a writer stopped mid-record); not copied", event_file::STOPPED_TAIL))
                    } else {
                        (Severity::Truncated, "file ends inside a record still being written (a pending tail); not copied".into())
                    };
                    problem(&mut st, sev, offset, length, why);
                }
            }
        }
        buf = records.into_buf();
        if !opts.merge {
            if let Some((name, bytes)) = out.take().expect("set above").finish()? {
                st.files_out.push(name);
                st.bytes_out += bytes;
            }
        }
    }
    if let Some(o) = out.take() {
        if let Some((name, bytes)) = o.finish()? {
            st.files_out.push(name);
            st.bytes_out += bytes;
        }
    }
    st.values_dropped = editor.values_dropped;
    st.metadata_moved = editor.metadata_moved;
    st.runs = usize::from(!st.files_out.is_empty());
    Ok(st)
}

/// Writes the rewritten logdir into `out_dir`, an existing empty directory (a staging
/// directory from [`stage`], normally). Runs are written in parallel; the stats and problems
/// come in run order.
pub fn write(
    src: &Path,
    out_dir: &Path,
    opts: &RewriteOptions,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let (found, errors) = discover(src, opts.runs.as_ref()).map_err(|e| Error::io(e, src))?;
    if let Some((path, e)) = errors.into_iter().next() {
        // A run that cannot be listed would silently be missing from the output.
        return Err(Error::Io {
            path: path.display().to_string(),
            source: io::Error::new(e.kind(), format!("{e}; the rewrite would miss its data")),
        });
    }
    let threads = thread_count(opts.threads);
    let preempted = if opts.preempt {
        Some(superseded(
            src,
            opts.runs.as_ref(),
            opts.max_len,
            threads,
            cancel,
        )?)
    } else {
        None
    };
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let merged_name = merged_file_name(time, &hostname());
    let jobs: Vec<RunJob<'_>> = found
        .iter()
        .map(|(run, files)| RunJob { run, files })
        .collect();
    let one = |job: &RunJob<'_>| {
        rewrite_run(
            src,
            job,
            out_dir,
            &merged_name,
            opts,
            preempted.as_ref(),
            cancel,
        )
    };
    let results: Vec<Result<RewriteStats>> = if threads <= 1 || jobs.len() <= 1 {
        jobs.iter().map(one).collect()
    } else {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tbscope-rewrite-{i}"))
            .build()
            .map_err(|e| Error::Other(format!("cannot start worker threads: {e}")))?;
        pool.install(|| jobs.par_iter().map(one).collect())
    };
    let mut total = RewriteStats::default();
    for r in results {
        total.add(r?);
    }
    sync_dir(out_dir);
    Ok(total)
}

// ------------------------------------------------------------------------------------------
// Where the output goes: checks, staging, publishing.

/// `p` made absolute with symlinks resolved as far as it exists (the rest appended as given).
fn resolve(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io(e, p))?;
    let mut existing = abs.clone();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(_)) => {
                rest.push(name.to_os_string());
                existing.pop();
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "cannot resolve {}; give a plain directory path",
                    p.display()
                )))
            }
        }
    }
    let mut out = existing
        .canonicalize()
        .map_err(|e| Error::io(e, &existing))?;
    for r in rest.into_iter().rev() {
        out.push(r);
    }
    Ok(out)
}

fn is_empty_dir(p: &Path) -> Result<bool> {
    let mut it = std::fs::read_dir(p).map_err(|e| Error::io(e, p))?;
    Ok(it.next().is_none())
}

fn exists_error(path: &Path, why: &str) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: io::Error::new(io::ErrorKind::AlreadyExists, why.to_string()),
    }
}

/// Checks that writing `dst` cannot touch `src`; returns both resolved.
fn check_paths(src: &Path, dst: &Path, force: bool) -> Result<(PathBuf, PathBuf)> {
    let src_real = src.canonicalize().map_err(|e| Error::io(e, src))?;
    let dst_real = resolve(dst)?;
    if dst_real == src_real {
        return Err(Error::InvalidArgument(format!(
            "the output {} is the input; rewrite never changes its input: choose a new directory",
            dst.display()
        )));
    }
    if dst_real.starts_with(&src_real) {
        return Err(Error::InvalidArgument(format!(
            "the output {} is inside the input {} (it would be read as runs of it); choose a directory outside it",
            dst.display(),
            src.display()
        )));
    }
    if src_real.starts_with(&dst_real) {
        return Err(Error::InvalidArgument(format!(
            "the input {} is inside the output {}, which replacing would delete; choose another output",
            src.display(),
            dst.display()
        )));
    }
    match std::fs::metadata(&dst_real) {
        Ok(m) if !m.is_dir() => {
            return Err(exists_error(
                dst,
                "exists and is not a directory; choose a directory path for the new logdir",
            ))
        }
        Ok(_) if !is_empty_dir(&dst_real)? => {
            if !force {
                return Err(exists_error(
                    dst,
                    "exists and is not empty; choose a new or empty directory",
                ));
            }
            // force replaces a logdir (an earlier output, typically), never a directory that
            // holds anything else: a mistyped path must not cost someone their files.
            if let Some(other) = not_a_logdir(&dst_real)? {
                return Err(Error::InvalidArgument(format!(
                    "{} holds {}, which is not an event file; force replaces only a logdir \
                     (event files and directories of them): choose another output",
                    dst.display(),
                    other.display()
                )));
            }
        }
        _ => {}
    }
    Ok((src_real, dst_real))
}

/// The first entry under `dir` that is neither a directory nor an event file (symlinks
/// included: removing the tree would not follow them, but what they stand for is unknown).
fn not_a_logdir(dir: &Path) -> Result<Option<PathBuf>> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(e, dir))? {
        let entry = entry.map_err(|e| Error::io(e, dir))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| Error::io(e, &path))?;
        if ft.is_dir() {
            if let Some(p) = not_a_logdir(&path)? {
                return Ok(Some(p));
            }
        } else if !(ft.is_file()
            && crate::logdir::is_event_file_name(&entry.file_name().to_string_lossy()))
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}.{nanos}", std::process::id())
}

fn sibling(dst: &Path, what: &str) -> PathBuf {
    let name = dst
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    dst.with_file_name(format!(".{name}.tbscope-{what}.{}", unique_suffix()))
}

fn sync_dir(dir: &Path) {
    // Best effort: some filesystems refuse fsync on directories.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Checks the paths and creates the staging directory next to `dst`, where [`write`] goes.
///
/// Refused: an output that is the input, inside it or contains it (even with `force`); an
/// existing file; an existing non-empty directory unless `force`.
pub fn stage(src: &Path, dst: &Path, force: bool) -> Result<PathBuf> {
    let (_, dst_real) = check_paths(src, dst, force)?;
    if let Some(parent) = dst_real.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(e, parent))?;
    }
    let staging = sibling(&dst_real, "rewrite");
    std::fs::create_dir(&staging).map_err(|e| Error::io(e, &staging))?;
    Ok(staging)
}

/// Publishes `staging` as `dst`: one rename, or with `force` and a non-empty `dst`, the old
/// directory moved aside, the new one renamed in and the old one removed. The paths are
/// checked again (something may have appeared at `dst` since [`stage`]).
pub fn commit(src: &Path, staging: &Path, dst: &Path, force: bool) -> Result<()> {
    let (_, dst_real) = check_paths(src, dst, force)?;
    let staging_real = staging.canonicalize().map_err(|e| Error::io(e, staging))?;
    let ours = staging_real.parent() == dst_real.parent()
        && staging_real
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(".tbscope-rewrite."));
    if !ours {
        return Err(Error::InvalidArgument(format!(
            "{} is not a staging directory of {}",
            staging.display(),
            dst.display()
        )));
    }
    let occupied = dst_real.is_dir() && !is_empty_dir(&dst_real)?;
    if !occupied {
        // rename(2) replaces an empty directory, and fails on a non-empty one that appeared
        // in between, which is then reported rather than overwritten.
        std::fs::rename(&staging_real, &dst_real).map_err(|e| Error::io(e, &dst_real))?;
    } else {
        let old = sibling(&dst_real, "old");
        std::fs::rename(&dst_real, &old).map_err(|e| Error::io(e, &dst_real))?;
        if let Err(e) = std::fs::rename(&staging_real, &dst_real) {
            let _ = std::fs::rename(&old, &dst_real);
            return Err(Error::io(e, &dst_real));
        }
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(e, &old))?;
    }
    if let Some(parent) = dst_real.parent() {
        sync_dir(parent);
    }
    Ok(())
}

/// Stages, writes and commits: the whole rewrite for callers that do not verify in between.
/// The staging directory is removed when writing fails.
pub fn rewrite(
    src: &Path,
    dst: &Path,
    opts: &RewriteOptions,
    force: bool,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let staging = stage(src, dst, force)?;
    match write(src, &staging, opts, cancel) {
        Ok(stats) => {
            commit(src, &staging, dst, force)?;
            Ok(stats)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Metadata;
    use crate::tf_record::HEADER_LEN;

    // Hand-built protobuf, so the tests do not lean on the writer under test elsewhere.
    fn event(wall: f64, step: i64, what: &[u8]) -> Vec<u8> {
        let mut e = vec![0x09];
        e.extend_from_slice(&wall.to_le_bytes());
        e.push(0x10);
        put_varint(&mut e, step as u64);
        e.extend_from_slice(what);
        e
    }

    fn summary(values: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        for v in values {
            put_len_field(&mut body, 1, v);
        }
        let mut what = Vec::new();
        put_len_field(&mut what, 5, &body);
        what
    }

    fn simple(tag: &str, x: f32, meta: Option<&[u8]>) -> Vec<u8> {
        let mut v = Vec::new();
        put_len_field(&mut v, 1, tag.as_bytes());
        v.push(0x15);
        v.extend_from_slice(&x.to_le_bytes());
        if let Some(m) = meta {
            put_len_field(&mut v, 9, m);
        }
        v
    }

    /// A rank-0 float tensor value, with the metadata given.
    fn tensor(tag: &str, x: f32, meta: Option<&[u8]>) -> Vec<u8> {
        let mut t = vec![0x08, 0x01, 0x12, 0x00];
        put_len_field(&mut t, 4, &x.to_le_bytes());
        let mut v = Vec::new();
        put_len_field(&mut v, 1, tag.as_bytes());
        put_len_field(&mut v, 8, &t);
        if let Some(m) = meta {
            put_len_field(&mut v, 9, m);
        }
        v
    }

    fn plugin_meta(plugin: &str, display: &str) -> Vec<u8> {
        let mut pd = Vec::new();
        put_len_field(&mut pd, 1, plugin.as_bytes());
        let mut m = Vec::new();
        put_len_field(&mut m, 1, &pd);
        if !display.is_empty() {
            put_len_field(&mut m, 2, display.as_bytes());
        }
        m
    }

    fn file_version(wall: f64) -> Vec<u8> {
        let mut e = vec![0x09];
        e.extend_from_slice(&wall.to_le_bytes());
        put_len_field(&mut e, 3, b"brain.Event:2");
        e
    }

    fn frame_all(events: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            write_record(&mut out, e);
        }
        out
    }

    fn none(_: &[u8], _: u32) -> bool {
        false
    }

    fn values_of(ev: &[u8]) -> Vec<Vec<u8>> {
        let What::Summary(s) = Event::decode(ev).unwrap().what else {
            panic!("not a summary")
        };
        summary_values(s).map(|v| v.unwrap().to_vec()).collect()
    }

    fn tmp(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tbscope-rewrite-{label}-{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn untouched_records_are_kept_byte_for_byte() {
        let opts = RewriteOptions {
            drop_tags: Some(Regex::new("^other$").unwrap()),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let ev = event(1.5, 3, &summary(&[simple("loss", 0.5, None)]));
        assert_eq!(ed.decide(&ev, &none).unwrap(), Decision::Keep);
        assert_eq!(
            ed.decide(&file_version(1.0), &none).unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn dropping_some_values_reencodes_with_the_rest_as_raw_bytes() {
        let opts = RewriteOptions {
            drop_tags: Some(Regex::new("^b$").unwrap()),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let (a, b, c) = (
            simple("a", 1.0, None),
            simple("b", 2.0, None),
            tensor("c", 3.0, Some(&plugin_meta("scalars", ""))),
        );
        let mut ev = event(7.25, 1 << 40, &summary(&[a.clone(), b, c.clone()]));
        // An unknown Event field must survive the re-encoding.
        ev.extend_from_slice(&[0xf8, 0x01, 0x2a]);
        let Decision::Replace(out) = ed.decide(&ev, &none).unwrap() else {
            panic!("expected a re-encoded event")
        };
        assert_eq!(values_of(&out), vec![a, c]);
        let d = Event::decode(&out).unwrap();
        assert_eq!((d.wall_time, d.step), (7.25, 1 << 40));
        assert!(out.ends_with(&[0xf8, 0x01, 0x2a]));
        assert_eq!(ed.values_dropped, 1);
        // Every value dropped: the record goes.
        let only_b = event(1.0, 2, &summary(&[simple("b", 1.0, None)]));
        assert_eq!(ed.decide(&only_b, &none).unwrap(), Decision::Drop);
    }

    #[test]
    fn step_ranges_drop_data_records_only() {
        let opts = RewriteOptions {
            drop_steps: Some((Some(10), Some(20))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        for (step, want) in [
            (9, Decision::Keep),
            (10, Decision::Drop),
            (19, Decision::Drop),
            (20, Decision::Keep),
        ] {
            let ev = event(1.0, step, &summary(&[simple("x", 1.0, None)]));
            assert_eq!(ed.decide(&ev, &none).unwrap(), want, "step {step}");
        }
        // A SessionLog START at a dropped step stays: it is not a point of any series.
        let mut session = Vec::new();
        put_len_field(&mut session, 7, &[0x08, 0x01]);
        assert_eq!(
            ed.decide(&event(1.0, 15, &session), &none).unwrap(),
            Decision::Keep
        );
        // Graphs are series of their own tag, so the range applies to them.
        let mut graph = Vec::new();
        put_len_field(&mut graph, 4, b"graph bytes");
        assert_eq!(
            ed.decide(&event(1.0, 15, &graph), &none).unwrap(),
            Decision::Drop
        );
        assert_eq!(
            ed.decide(&event(1.0, 5, &graph), &none).unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn graph_records_follow_tag_filters() {
        let mut graph = Vec::new();
        put_len_field(&mut graph, 4, b"graph bytes");
        let ev = event(1.0, 0, &graph);
        let drop = RewriteOptions {
            drop_tags: Some(Regex::new("^__run_graph__$").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            Editor::new(&drop).decide(&ev, &none).unwrap(),
            Decision::Drop
        );
        let keep_loss = RewriteOptions {
            tags: Some(Regex::new("^loss$").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            Editor::new(&keep_loss).decide(&ev, &none).unwrap(),
            Decision::Drop
        );
        assert_eq!(
            Editor::new(&RewriteOptions::default())
                .decide(&ev, &none)
                .unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn first_metadata_moves_to_the_first_kept_value() {
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let md = plugin_meta("scalars", "Loss");
        let first = event(1.0, 0, &summary(&[tensor("t", 1.0, Some(&md))]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let bare = tensor("t", 2.0, None);
        let Decision::Replace(out) = ed
            .decide(&event(2.0, 1, &summary(std::slice::from_ref(&bare))), &none)
            .unwrap()
        else {
            panic!("expected the metadata to move")
        };
        let v = values_of(&out);
        let sv = SummaryValue::decode(&v[0]).unwrap();
        assert_eq!(sv.metadata, Some(md.as_slice()));
        assert_eq!(
            Metadata::decode(sv.metadata.unwrap()).unwrap().display_name,
            b"Loss"
        );
        assert_eq!(sv.value, SummaryValue::decode(&bare).unwrap().value);
        assert_eq!(ed.metadata_moved, 1);
        // Later values are left as they are.
        let later = event(3.0, 2, &summary(&[bare]));
        assert_eq!(ed.decide(&later, &none).unwrap(), Decision::Keep);
    }

    #[test]
    fn the_fast_path_hands_over_when_metadata_must_move() {
        // A one-simple_value record (the fast path's layout) that is the first kept value of a
        // tag whose first metadata was on a dropped value.
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let md = plugin_meta("scalars", "Shown");
        let first = event(1.0, 0, &summary(&[simple("s", 1.0, Some(&md))]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let bare = event(2.0, 1, &summary(&[simple("s", 2.0, None)]));
        assert!(crate::proto::simple_scalar(&bare).is_some());
        let Decision::Replace(out) = ed.decide(&bare, &none).unwrap() else {
            panic!("expected the metadata to move")
        };
        assert_eq!(values_of(&out), vec![simple("s", 2.0, Some(&md))]);
        assert_eq!(ed.decide(&bare, &none).unwrap(), Decision::Keep);
        // Superseded fast-path values are dropped.
        assert_eq!(ed.decide(&bare, &|_, _| true).unwrap(), Decision::Drop);
    }

    #[test]
    fn a_legacy_series_without_metadata_stays_without() {
        // The first (dropped) value decides with no display name; a later one carrying a
        // display name must not change the output's series.
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let first = event(1.0, 0, &summary(&[simple("s", 1.0, None)]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let with = simple("s", 2.0, Some(&plugin_meta("scalars", "Shown")));
        let Decision::Replace(out) = ed.decide(&event(2.0, 1, &summary(&[with])), &none).unwrap()
        else {
            panic!("expected the metadata to go")
        };
        assert_eq!(values_of(&out), vec![simple("s", 2.0, None)]);
    }

    #[test]
    fn superseded_values_are_dropped_by_tag_and_position() {
        let opts = RewriteOptions::default();
        let mut ed = Editor::new(&opts);
        let ev = event(
            1.0,
            5,
            &summary(&[
                simple("a", 1.0, None),
                simple("a", 2.0, None),
                simple("b", 3.0, None),
            ]),
        );
        let second_a = |tag: &[u8], k: u32| tag == b"a" && k == 1;
        let Decision::Replace(out) = ed.decide(&ev, &second_a).unwrap() else {
            panic!("expected a re-encoded event")
        };
        assert_eq!(
            values_of(&out),
            vec![simple("a", 1.0, None), simple("b", 3.0, None)]
        );
    }

    #[test]
    fn invalid_events_are_errors() {
        let opts = RewriteOptions::default();
        let mut ed = Editor::new(&opts);
        assert!(ed.decide(&[0x0b], &none).is_err());
        // A summary whose value does not decode makes the whole record invalid, as for the
        // reader.
        let mut bad = Vec::new();
        put_len_field(&mut bad, 5, &[0x0a, 0x02, 0x0b, 0x00]);
        assert!(ed.decide(&event(1.0, 0, &bad), &none).is_err());
    }

    #[test]
    fn corrupt_and_truncated_bytes_are_reported_and_not_copied() {
        let src = tmp("corrupt-src");
        let run = src.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let good: Vec<Vec<u8>> = (0..5)
            .map(|i| {
                event(
                    f64::from(i),
                    i64::from(i),
                    &summary(&[simple("x", i as f32, None)]),
                )
            })
            .collect();
        let mut bytes = frame_all(&[file_version(0.5)]);
        bytes.extend(frame_all(&good[..2]));
        let bad_at = bytes.len();
        let mut damaged = frame_all(&good[2..3]);
        damaged[HEADER_LEN + 3] ^= 0x40; // data CRC no longer holds
        bytes.extend(&damaged);
        bytes.extend(b"garbage between records");
        bytes.extend(frame_all(&good[3..]));
        let tail = frame_all(&[good[0].clone()]);
        bytes.extend(&tail[..tail.len() - 3]);
        std::fs::write(run.join("events.out.tfevents.1.h"), &bytes).unwrap();

        let dst = tmp("corrupt-dst").join("out");
        let cancel = AtomicBool::new(false);
        let stats = rewrite(&src, &dst, &RewriteOptions::default(), false, &cancel).unwrap();
        assert_eq!(stats.files_out.len(), 1);
        assert!(stats.files_out[0].starts_with("run/events.out.tfevents."));
        assert!(stats.files_out[0].ends_with(".tbscope-rewrite.0"));
        let written = std::fs::read(dst.join(&stats.files_out[0])).unwrap();
        let mut want = frame_all(&[file_version(0.5)]);
        want.extend(frame_all(&good[..2]));
        want.extend(frame_all(&good[3..]));
        assert_eq!(written, want);
        let kinds: Vec<_> = stats
            .problems
            .iter()
            .map(|p| (p.severity, p.offset))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Severity::Corrupt, bad_at as u64),
                (Severity::Truncated, (bytes.len() - (tail.len() - 3)) as u64)
            ]
        );
        assert_eq!((stats.records_in, stats.records_out), (5, 5));
        assert_eq!(
            stats.bytes_skipped,
            (damaged.len() + b"garbage between records".len() + tail.len() - 3) as u64
        );
        std::fs::remove_dir_all(&src).unwrap();
        std::fs::remove_dir_all(dst.parent().unwrap()).unwrap();
    }

    #[test]
    fn merging_concatenates_files_in_name_order_and_preempt_matches_the_reader() {
        let src = tmp("merge-src");
        let run = src.join("r");
        std::fs::create_dir_all(&run).unwrap();
        // A restart: steps 0..6, then again from 3 (the first file's 3..6 are superseded), in
        // two files; tag b only in the first.
        let first: Vec<Vec<u8>> = (0..6)
            .map(|s| {
                event(
                    f64::from(s),
                    i64::from(s),
                    &summary(&[simple("a", s as f32, None), simple("b", 1.0, None)]),
                )
            })
            .collect();
        let second: Vec<Vec<u8>> = (3..8)
            .map(|s| {
                event(
                    100.0 + f64::from(s),
                    i64::from(s),
                    &summary(&[simple("a", 100.0 + s as f32, None)]),
                )
            })
            .collect();
        let f1 = frame_all(&[vec![file_version(0.0)], first].concat());
        let f2 = frame_all(&[vec![file_version(99.0)], second].concat());
        std::fs::write(run.join("events.out.tfevents.1.h"), &f1).unwrap();
        std::fs::write(run.join("events.out.tfevents.2.h"), &f2).unwrap();
        let cancel = AtomicBool::new(false);

        let plain = tmp("merge-dst").join("plain");
        let stats = rewrite(&src, &plain, &RewriteOptions::default(), false, &cancel).unwrap();
        assert_eq!(stats.files_out.len(), 1);
        assert_eq!(
            std::fs::read(plain.join(&stats.files_out[0])).unwrap(),
            [f1.clone(), f2.clone()].concat()
        );
        assert_eq!(
            (stats.records_in, stats.records_out, stats.records_rewritten),
            (13, 13, 0)
        );

        let opts = RewriteOptions {
            preempt: true,
            ..Default::default()
        };
        let trimmed = plain.with_file_name("trimmed");
        let stats = rewrite(&src, &trimmed, &opts, false, &cancel).unwrap();
        // Records at steps 3..6 of the first file lose a (re-encoded), b stays.
        assert_eq!(stats.records_rewritten, 3);
        assert_eq!(stats.values_dropped, 3);
        let read = |root: &Path, restarts: Restarts| {
            let mut r = crate::load::Reader::new(
                root,
                ReaderOptions {
                    restarts,
                    threads: 1,
                    ..Default::default()
                },
            )
            .unwrap();
            r.load(&cancel).unwrap();
            let mut rows = Vec::new();
            for b in r.table(Kind::Scalars).unwrap() {
                let tag = b.column(1).as_dictionary::<Int32Type>();
                let names = tag.values().as_string::<i32>();
                let steps = b.column(2).as_primitive::<Int64Type>();
                let values = b
                    .column(b.schema().index_of("value").unwrap())
                    .as_primitive::<arrow_array::types::Float64Type>();
                for i in 0..b.num_rows() {
                    rows.push((
                        names.value(tag.keys().value(i) as usize).to_string(),
                        steps.value(i),
                        values.value(i),
                    ));
                }
            }
            rows
        };
        let want = read(&src, Restarts::Preempt);
        assert_eq!(read(&trimmed, Restarts::All), want);
        assert_eq!(want.iter().filter(|r| r.0 == "a").count(), 8);

        // One output file per input file, under the input's name.
        let split = plain.with_file_name("split");
        let opts = RewriteOptions {
            merge: false,
            ..Default::default()
        };
        let stats = rewrite(&src, &split, &opts, false, &cancel).unwrap();
        assert_eq!(
            stats.files_out,
            vec!["r/events.out.tfevents.1.h", "r/events.out.tfevents.2.h"]
        );
        assert_eq!(
            std::fs::read(split.join("r/events.out.tfevents.2.h")).unwrap(),
            f2
        );
        std::fs::remove_dir_all(&src).unwrap();
        std::fs::remove_dir_all(plain.parent().unwrap()).unwrap();
    }

    #[test]
    fn unsafe_outputs_are_refused_and_force_replaces() {
        let base = tmp("paths");
        let src = base.join("in");
        std::fs::create_dir_all(src.join("run")).unwrap();
        std::fs::write(
            src.join("run/events.out.tfevents.1.h"),
            frame_all(&[file_version(1.0)]),
        )
        .unwrap();
        let cancel = AtomicBool::new(false);
        let opts = RewriteOptions::default();
        for bad in [
            src.clone(),
            src.join("run"),
            src.join("new/deeper"),
            base.clone(),
        ] {
            let e = rewrite(&src, &bad, &opts, true, &cancel).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        }
        let dst = base.join("out");
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("keep.txt"), b"x").unwrap();
        let e = rewrite(&src, &dst, &opts, false, &cancel).unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
            "{e}"
        );
        // force replaces logdirs only.
        let e = rewrite(&src, &dst, &opts, true, &cancel).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("keep.txt")),
            "{e}"
        );
        assert!(dst.join("keep.txt").exists());
        std::fs::remove_file(dst.join("keep.txt")).unwrap();
        std::fs::create_dir_all(dst.join("old/run")).unwrap();
        std::fs::write(dst.join("old/run/events.out.tfevents.0.h"), b"").unwrap();
        rewrite(&src, &dst, &opts, true, &cancel).unwrap();
        assert!(!dst.join("old").exists());
        assert!(dst.join("run").is_dir());
        // Nothing left next to it: no staging or old directory.
        let names: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // An empty existing directory is fine without force.
        let empty = base.join("empty");
        std::fs::create_dir(&empty).unwrap();
        rewrite(&src, &empty, &opts, false, &cancel).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_output() {
        let base = tmp("fail");
        let src = base.join("in");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("events.out.tfevents.1.h"),
            frame_all(&[file_version(1.0)]),
        )
        .unwrap();
        let cancel = AtomicBool::new(true);
        // Cancelled before the first record check: nothing under the name, no staging left.
        let many: Vec<Vec<u8>> = (0..5000).map(|i| file_version(f64::from(i))).collect();
        std::fs::write(src.join("events.out.tfevents.1.h"), frame_all(&many)).unwrap();
        let e = rewrite(
            &src,
            &base.join("out"),
            &RewriteOptions::default(),
            false,
            &cancel,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Interrupted));
        let names: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("in")]);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
