//! The incremental cache: a reader's state and rows kept in a directory of their own, so that
//! opening a logdir again reads only the bytes written since.
//!
//! A cache directory holds:
//!
//! ```text
//! CURRENT        the name of the published generation; replaced by an atomic rename
//! gen-*/         a published generation: `manifest` and `<segment>.<kind>.arrow` files
//! tmp-*/         a generation being written (named after its host and process)
//! .lock          flock()ed while a generation is published and old ones are removed
//! ```
//!
//! A generation is immutable. Its rows live in *segments*: one Arrow IPC file per kind per
//! load that added rows, uncompressed so that opening maps it and copies nothing (mapped under
//! a lease, or read: see "Cache files in memory" below; every file is checked against the
//! CRC-32C its manifest records before it is used). A new
//! generation hard-links the segments it keeps from the one it started from and writes only new
//! rows, so re-opening a logdir that grew costs the new rows, not the whole cache. The manifest
//! (our own binary encoding, checksummed) holds everything a reload continues from: per run its
//! files (device, inode, size, mtime, cursor), tags (kind, first metadata, points, steps), facts
//! and report lines, plus the *pieces*: which rows of which segment belong to which run, in
//! output order. Dropping a run (its file was replaced, truncated or deleted) drops its pieces;
//! rows nobody points at go when the segments are compacted.
//!
//! The cache always holds the unfiltered load. A scan's filters are applied to what it returns:
//! rows are selected through their run and tag dictionaries and step column, and the series and
//! runs tables are derived from the saved per-tag state (or, with a step range, from the rows).
//!
//! A warm open of a logdir that did not change is the common case, and on a logdir of many runs
//! decoding every run's state would cost more than everything else. So the manifest keeps what
//! the change check needs (run names, file identities, directory listings) apart from the
//! runs' state, and a generation also stores, for the unfiltered load, each run's facts and
//! each scalar series' statistics (`runstats.rs`). An open whose check finds nothing changed
//! leaves the state encoded ("pending") and serves the runs table, the facts and the
//! statistics from those tables; anything else decodes the state first (`Reader::prepare`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array, RecordBatch};
use arrow_array::{RecordBatchOptions, StringArray};
use arrow_buffer::Buffer;
use arrow_schema::{DataType, Schema, SchemaRef};
use regex::Regex;

use crate::data_compat::{plugin_names, Kind, KindSet};
use crate::error::{Error, Result};
use crate::event_file::{Cursor, Options, SeriesMeta, SessionEvent, Severity};
use crate::load::{
    empty_schema, rel_name, stat_found, thread_count, FileState, Found, LoadStats, Reader,
    ReaderOptions, ReportEntry, RunState, TagState,
};
use crate::logdir::discover;
use crate::runstats::{runs_table_of_facts, scalar_stats_of, stats_schema};

/// Bump when the manifest or segment layout changes: older caches are then read again.
/// 2: the runs' state apart from the change-check index; facts and statistics tables.
/// 3: every file's size and CRC-32C in the manifest.
const FORMAT_VERSION: u32 = 3;
const MAGIC: &[u8; 8] = b"TBSCACHE";
/// Past this many segments the small ones are merged (see `compact_if_needed`).
const MAX_SEGMENTS: usize = 8;
/// A table in more slices than this is compacted whole: every consumer that wants one array
/// (pandas) concatenates slices, and a slice per run of a large logdir would cost more than the
/// rewrite. Runs that grow add a slice each (their new rows sit in a newer segment).
const MAX_SLICES: usize = 4096;
/// Temporary directories of a process on another host (whose liveness cannot be checked) are
/// removed once they are this old.
const STALE_TMP: Duration = Duration::from_secs(24 * 3600);

/// A scan's filters, applied to what the cache returns.
#[derive(Debug, Clone)]
pub(crate) struct View {
    runs: Option<Regex>,
    tags: Option<Regex>,
    kinds: KindSet,
    /// The step range as the native read applies it (with `preempt`, only the upper bound; the
    /// lower one is applied after preemption by `Reader::table`).
    step_lo: Option<i64>,
    step_hi: Option<i64>,
    provenance: bool,
    /// Tables go through `restarts::apply` (preemption, or its lower step bound).
    restarts: bool,
}

impl View {
    fn run_ok(&self, run: &str) -> bool {
        self.runs.as_ref().is_none_or(|re| re.is_match(run))
    }
    fn tag_ok(&self, tag: &str) -> bool {
        self.tags.as_ref().is_none_or(|re| re.is_match(tag))
    }
    fn has_steps(&self) -> bool {
        self.step_lo.is_some() || self.step_hi.is_some()
    }
    fn step_ok(&self, s: i64) -> bool {
        self.step_lo.is_none_or(|lo| s >= lo) && self.step_hi.is_none_or(|hi| s < hi)
    }
}

/// The options of the load the cache holds (everything, unfiltered) and the scan's filters.
pub(crate) fn split_options(opts: ReaderOptions) -> (ReaderOptions, View) {
    let view = View {
        runs: opts.runs.clone(),
        tags: opts.file.tags.clone(),
        kinds: opts.file.kinds,
        step_lo: opts.file.step_lo,
        step_hi: opts.file.step_hi,
        provenance: opts.file.provenance,
        restarts: opts.restarts == crate::load::Restarts::Preempt || opts.step_lo.is_some(),
    };
    let base = ReaderOptions {
        file: Options {
            verify: opts.file.verify,
            max_len: opts.file.max_len,
            provenance: opts.file.provenance,
            kinds: KindSet::ALL,
            tags: None,
            step_lo: None,
            step_hi: None,
        },
        runs: None,
        // Applied to the view's rows by `table`, as for a reader without a cache.
        restarts: opts.restarts,
        threads: opts.threads,
        step_lo: opts.step_lo,
    };
    (base, view)
}

/// What the cache did on the last load.
#[derive(Debug, Clone, Default)]
pub struct CacheInfo {
    pub dir: PathBuf,
    /// "unread" (no load yet), "miss" (no usable cache: everything was read from the logdir),
    /// "hit" (nothing changed since the cache was written) or "updated" (new bytes read, or
    /// runs read again because their files were replaced, truncated or deleted).
    pub status: &'static str,
    /// The generation in use (restored or published).
    pub generation: Option<String>,
    /// The last load published a new generation.
    pub written: bool,
    /// Runs dropped from the cache on the last load (files replaced, truncated or deleted, or
    /// the run gone); those still in the logdir were read again.
    pub runs_dropped: usize,
    /// Why the cache could not be used or written, one line each (never an error: the data
    /// then comes from the logdir).
    pub warnings: Vec<String>,
}

/// Rows added by one load, one batch per kind.
struct Segment {
    name: String,
    batches: [Option<RecordBatch>; 8],
    /// Files of a restored generation opened but not read yet: `batches[k]` is filled from
    /// `unread[k]` (read, checked against `files[k]`, decoded) when a table of that kind is
    /// first needed (`Cached::decode_kind`). A warm `ls` or `summary` never reads the rows.
    unread: [Option<File>; 8],
    /// What the manifest says about this segment's file of each kind in `home`.
    files: [Option<FileSum>; 8],
    /// A published generation holding this segment's files, to hard-link them from.
    home: Option<PathBuf>,
}

impl Segment {
    fn new(name: String, home: Option<PathBuf>) -> Segment {
        Segment {
            name,
            batches: Default::default(),
            unread: Default::default(),
            files: Default::default(),
            home,
        }
    }

    /// Rows of `kind`, decoded or not.
    fn rows(&self, kind: Kind) -> usize {
        let k = kind as usize;
        match (&self.batches[k], &self.unread[k], &self.files[k]) {
            (Some(b), _, _) => b.num_rows(),
            (None, Some(_), Some(f)) => f.rows as usize,
            _ => 0,
        }
    }

    fn has(&self, kind: Kind) -> bool {
        self.batches[kind as usize].is_some() || self.unread[kind as usize].is_some()
    }
}

/// Rows `start..start + len` of a segment's table, all of one run.
#[derive(Debug, Clone)]
struct Piece {
    seg: usize,
    start: usize,
    len: usize,
    run: Arc<str>,
}

/// The cache side of a [`Reader`] created with [`Reader::with_cache`].
pub struct Cached {
    dir: PathBuf,
    view: View,
    segments: Vec<Segment>,
    /// Per kind, the rows in output order (run name, then load order within a run).
    pieces: [Vec<Piece>; 8],
    /// Directory listings as of the last discovery, keyed by path below the root.
    dirs: HashMap<PathBuf, DirListing>,
    /// The restored generation's runs' state, not decoded yet; `Reader::runs` is empty (and
    /// `Reader::run_names` complete) while it is here.
    pending: Option<Box<Pending>>,
    /// Leave the state pending after a load that found nothing changed (the caller promises to
    /// call `Reader::prepare` before using it); otherwise every load decodes it.
    lazy: bool,
    /// The next load reads everything and reports a miss (the cache was found unusable).
    force_miss: bool,
    opened: bool,
    info: CacheInfo,
}

/// What [`Reader::prepare`] gets ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Everything: the runs' state, for `series`, `run_mtimes`, `file_path`, `plan`.
    State,
    /// `runs_table` (and `run_names`, `report`).
    RunsTable,
    /// `run_facts`.
    RunFacts,
    /// `scalar_stats`.
    ScalarStats,
    /// The rows of one kind: `table`, `schema`, `hparams`.
    Rows(Kind),
    /// The runs' names: `run_names`, `report`.
    Names,
}

impl Reader {
    /// A reader with a cache may leave the runs' state of a restored generation undecoded after
    /// a load that found nothing changed (see the module docs). The caller must then call
    /// [`Reader::prepare`] with what it is about to use. Without this, loads decode it.
    pub fn defer_cache_state(&mut self) {
        if let Some(c) = self.cached.as_mut() {
            c.lazy = true;
        }
    }

    /// Makes what `need` uses ready: decodes a pending state unless the generation's stored
    /// tables answer `need` for this scan's filters, and the rows of a kind before they are
    /// used. A no-op without a cache. Should the cache turn out unusable here (a damaged
    /// segment), it is dropped with a warning and the logdir read again, as a load does.
    pub fn prepare(&mut self, need: Need) -> Result<()> {
        let Some(mut c) = self.cached.take() else {
            return Ok(());
        };
        let out = c.prepare(self, need);
        self.cached = Some(c);
        out
    }
}

impl Cached {
    pub(crate) fn new(dir: &Path, view: View) -> Cached {
        Cached {
            dir: dir.to_path_buf(),
            view,
            segments: Vec::new(),
            pieces: Default::default(),
            dirs: HashMap::new(),
            pending: None,
            lazy: false,
            force_miss: false,
            opened: false,
            info: CacheInfo {
                dir: dir.to_path_buf(),
                status: "unread",
                ..Default::default()
            },
        }
    }

    pub(crate) fn info(&self) -> CacheInfo {
        self.info.clone()
    }

    fn warn(&mut self, msg: String) {
        self.info.warnings.push(msg);
    }
}

/// A load through the cache: restore (the first time), drop what changed under us, read what
/// is new, publish a generation when anything changed.
pub(crate) fn load(r: &mut Reader, cancel: &AtomicBool) -> Result<LoadStats> {
    let mut c = r.cached.take().expect("a reader with a cache");
    let out = c.load(r, cancel);
    r.cached = Some(c);
    out
}

impl Cached {
    fn load(&mut self, r: &mut Reader, cancel: &AtomicBool) -> Result<LoadStats> {
        self.info.written = false;
        self.info.runs_dropped = 0;
        let mut rebuilt = std::mem::take(&mut self.force_miss);
        let t0 = std::time::Instant::now();
        let mut marks: Vec<(&str, Duration)> = Vec::new();
        if !self.opened {
            self.opened = true;
            clean_tmp(&self.dir);
            match self.restore(r) {
                Ok(Restore::Restored) => {}
                Ok(Restore::Missing) => rebuilt = true,
                Err(why) => {
                    let msg = format!(
                        "cache {} not used ({why}); reading the logdir and rewriting the cache",
                        self.dir.display()
                    );
                    self.warn(msg);
                    rebuilt = true;
                }
            }
        }
        marks.push(("restore", t0.elapsed()));
        // Stats are most of a warm open on a logdir of many runs: spread them over threads.
        let threads = thread_count(r.opts.threads);
        if self.pending.is_some() {
            let same = self.unchanged(r, threads);
            marks.push(("check", t0.elapsed()));
            if same {
                self.info.status = "hit";
                if !self.lazy {
                    self.materialise(r)?;
                    marks.push(("state", t0.elapsed()));
                }
                self.trace(&marks);
                return Ok(LoadStats::default());
            }
            if let Err(e) = self.materialise(r) {
                let msg = format!(
                    "cache {} not used ({e}); reading the logdir and rewriting the cache",
                    self.dir.display()
                );
                self.warn(msg);
                self.reset(r);
                rebuilt = true;
            }
            marks.push(("state", t0.elapsed()));
        }
        let pool = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("tbscope-stat-{i}"))
                .build()
                .ok()
        } else {
            None
        };
        let (found, errors, dirs) =
            discover_with(r, &self.dirs, pool.as_ref()).map_err(|e| Error::io(e, &r.root))?;
        marks.push(("discover", t0.elapsed()));
        let found = stat_found_with(found, pool.as_ref());
        drop(pool);
        marks.push(("stat", t0.elapsed()));
        let relisted = dirs.len() != self.dirs.len()
            || dirs
                .iter()
                .any(|(k, v)| self.dirs.get(k).is_none_or(|o| !same_listing(o, v)));
        self.dirs = dirs;
        let (stale, untouched) = stale_runs(r, &found);
        marks.push(("validate", t0.elapsed()));
        let found: Found = found
            .into_iter()
            .zip(untouched)
            .filter(|(_, same)| !same)
            .map(|(f, _)| f)
            .collect();
        for run in &stale {
            r.forget_run(run);
            for p in self.pieces.iter_mut() {
                p.retain(|x| &*x.run != run.as_str());
            }
        }
        self.info.runs_dropped = stale.len();
        let report_len = r.report.len();
        let work = r.plan_found(found, errors)?;
        let changed =
            rebuilt || !stale.is_empty() || !work.is_empty() || r.report.len() != report_len;
        marks.push(("plan", t0.elapsed()));
        let (stats, batches) = r.read(work, cancel)?;
        if !batches.is_empty() {
            self.add_segment(batches);
        }
        marks.push(("read", t0.elapsed()));
        self.info.status = if rebuilt {
            "miss"
        } else if changed {
            "updated"
        } else {
            "hit"
        };
        // A listing that changed without changing the data (a directory settled, an entry
        // that is not an event file) is still worth keeping: the next open skips listing it.
        if changed || relisted {
            if let Err(e) = self.compact_if_needed() {
                self.warn(format!("cache segments could not be compacted: {e}"));
            }
            match self.publish(r) {
                Ok(generation) => {
                    self.info.generation = Some(generation);
                    self.info.written = true;
                }
                Err(e) => {
                    let msg = format!(
                        "cache {} not written ({e}); the next scan reads the logdir again",
                        self.dir.display()
                    );
                    self.warn(msg);
                }
            }
            marks.push(("publish", t0.elapsed()));
        }
        self.trace(&marks);
        Ok(stats)
    }

    /// `TBSCOPE_TRACE=1`: where the load spent its time.
    fn trace(&self, marks: &[(&str, Duration)]) {
        if std::env::var_os("TBSCOPE_TRACE").is_none() {
            return;
        }
        let mut last = Duration::ZERO;
        let parts: Vec<String> = marks
            .iter()
            .map(|(what, at)| {
                let d = *at - last;
                last = *at;
                format!("{what} {d:?}")
            })
            .collect();
        eprintln!("tbscope cache {}: {}", self.info.status, parts.join(", "));
    }

    /// Forgets everything restored (a generation that turned out unusable): the load then
    /// reads the logdir whole.
    fn reset(&mut self, r: &mut Reader) {
        self.pending = None;
        self.segments.clear();
        self.pieces = Default::default();
        self.dirs.clear();
        r.runs.clear();
        r.run_names.clear();
        r.file_names.clear();
        r.report.clear();
    }

    /// Adds one load's batches as a segment; its rows are in run order, each run contiguous.
    fn add_segment(&mut self, batches: Vec<(Kind, RecordBatch)>) {
        let seg = self.segments.len();
        let mut s = Segment::new(unique_name("s"), None);
        for (kind, b) in batches {
            let mut fresh = run_pieces(seg, &b);
            // Stable: a run's earlier rows (older segments) stay first.
            fresh.sort_by(|a, b| a.run.cmp(&b.run));
            let old = std::mem::take(&mut self.pieces[kind as usize]);
            self.pieces[kind as usize] = merge_pieces(old, fresh);
            s.batches[kind as usize] = Some(b);
        }
        self.segments.push(s);
    }

    /// The rows of `kind` in output order, as slices of the segments (no copies).
    fn served(&self, kind: Kind) -> Vec<RecordBatch> {
        self.expect_decoded(kind);
        let mut out = Vec::new();
        let mut cur: Option<(usize, usize, usize)> = None;
        let flush = |c: Option<(usize, usize, usize)>, out: &mut Vec<RecordBatch>| {
            if let Some((seg, start, len)) = c {
                let b = self.segments[seg].batches[kind as usize]
                    .as_ref()
                    .expect("pieces point at batches");
                out.push(if start == 0 && len == b.num_rows() {
                    b.clone()
                } else {
                    b.slice(start, len)
                });
            }
        };
        for p in &self.pieces[kind as usize] {
            match cur {
                Some((s, st, l)) if s == p.seg && st + l == p.start => {
                    cur = Some((s, st, l + p.len));
                }
                _ => {
                    flush(cur, &mut out);
                    cur = Some((p.seg, p.start, p.len));
                }
            }
        }
        flush(cur, &mut out);
        out
    }

    /// Keeps the segment count bounded without rewriting the bulk of the cache on every open
    /// of a growing logdir: past MAX_SEGMENTS, the small segments (all but the largest) are
    /// merged into one; everything is merged into one when they have grown to half the largest,
    /// when a quarter of the rows belong to dropped runs, or when a table has become more than
    /// MAX_SLICES slices.
    fn compact_if_needed(&mut self) -> Result<()> {
        let mut live = 0usize;
        let mut slices = 0usize;
        for k in Kind::ALL {
            live += self.pieces[k as usize].iter().map(|p| p.len).sum::<usize>();
            slices = slices.max(self.served(k).len());
        }
        let rows: Vec<usize> = self
            .segments
            .iter()
            .map(|s| Kind::ALL.iter().map(|&k| s.rows(k)).sum())
            .collect();
        let total: usize = rows.iter().sum();
        let used: HashSet<usize> = self.pieces.iter().flatten().map(|p| p.seg).collect();
        if used.len() < self.segments.len() {
            // Forget segments no piece points at.
            self.keep_segments(&used);
            return self.compact_if_needed();
        }
        let full = slices > MAX_SLICES || (total - live) * 4 > live.max(1);
        if !full && self.segments.len() <= MAX_SEGMENTS {
            return Ok(());
        }
        let largest = (0..rows.len()).max_by_key(|&i| rows[i]).unwrap_or(0);
        let big = rows.get(largest).copied().unwrap_or(0);
        let merge: HashSet<usize> = if full || (total - big) * 2 > big {
            (0..self.segments.len()).collect()
        } else {
            (0..self.segments.len()).filter(|&i| i != largest).collect()
        };
        self.merge_segments(&merge)
    }

    /// Replaces the segments in `merge` by one holding their live rows, in output order.
    fn merge_segments(&mut self, merge: &HashSet<usize>) -> Result<()> {
        let new_seg = self.segments.len();
        let mut merged = Segment::new(unique_name("s"), None);
        for k in Kind::ALL {
            let mut parts = Vec::new();
            let mut at = 0;
            for p in self.pieces[k as usize].iter_mut() {
                if !merge.contains(&p.seg) {
                    continue;
                }
                let b = self.segments[p.seg].batches[k as usize]
                    .as_ref()
                    .expect("pieces point at batches");
                parts.push(b.slice(p.start, p.len));
                *p = Piece {
                    seg: new_seg,
                    start: at,
                    len: p.len,
                    run: p.run.clone(),
                };
                at += p.len;
            }
            if !parts.is_empty() {
                merged.batches[k as usize] = Some(concat_compact(&parts)?);
            }
        }
        self.segments.push(merged);
        let used: HashSet<usize> = self.pieces.iter().flatten().map(|p| p.seg).collect();
        self.keep_segments(&used);
        Ok(())
    }

    fn keep_segments(&mut self, used: &HashSet<usize>) {
        let mut new_index = vec![usize::MAX; self.segments.len()];
        let mut kept = Vec::new();
        for (i, s) in std::mem::take(&mut self.segments).into_iter().enumerate() {
            if used.contains(&i) {
                new_index[i] = kept.len();
                kept.push(s);
            }
        }
        self.segments = kept;
        for p in self.pieces.iter_mut().flatten() {
            p.seg = new_index[p.seg];
        }
    }
}

/// Maximal row ranges of one run in a batch (its run column is a dictionary).
fn run_pieces(seg: usize, b: &RecordBatch) -> Vec<Piece> {
    let runs = b.column(0).as_dictionary::<Int32Type>();
    let names = runs.values().as_string::<i32>();
    let names: Vec<Arc<str>> = (0..names.len())
        .map(|i| Arc::from(names.value(i)))
        .collect();
    let keys = runs.keys().values();
    let mut out: Vec<Piece> = Vec::new();
    let mut start = 0;
    for i in 1..=keys.len() {
        if i == keys.len() || keys[i] != keys[start] {
            out.push(Piece {
                seg,
                start,
                len: i - start,
                run: names[keys[start] as usize].clone(),
            });
            start = i;
        }
    }
    out
}

/// Merges two run-ordered piece lists; for one run, `old` comes first.
fn merge_pieces(old: Vec<Piece>, fresh: Vec<Piece>) -> Vec<Piece> {
    let mut out = Vec::with_capacity(old.len() + fresh.len());
    let mut a = old.into_iter().peekable();
    let mut b = fresh.into_iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => {
                if x.run <= y.run {
                    out.push(a.next().unwrap());
                } else {
                    out.push(b.next().unwrap());
                }
            }
            (Some(_), None) => out.push(a.next().unwrap()),
            (None, Some(_)) => out.push(b.next().unwrap()),
            (None, None) => break,
        }
    }
    out
}

/// Runs whose cached rows cannot be continued: gone from the logdir, or with a file that was
/// deleted, replaced (another inode), truncated, or that grew while a later file exists (its
/// new rows would come after rows they precede); also runs with a new file sorting before one
/// already read. Everything else is continued from the saved cursors, as a reload does.
///
/// Also says, per entry of `found`, whether the run is untouched (every file as it was): the
/// plan can skip those, which is most of a warm open of a logdir of many runs.
fn stale_runs(r: &Reader, found: &Found) -> (Vec<String>, Vec<bool>) {
    let mut stale = Vec::new();
    let mut untouched = vec![false; found.len()];
    // Both in run-name order.
    let mut found_iter = found.iter().enumerate().peekable();
    for (run, state) in &r.runs {
        while found_iter.next_if(|(_, (f, _))| f < run).is_some() {}
        let Some((i, (_, files))) = found_iter.next_if(|(_, (f, _))| f == run) else {
            stale.push(run.clone());
            continue;
        };
        match run_change(state, files) {
            Change::None => untouched[i] = true,
            Change::Appended => {}
            Change::Stale => stale.push(run.clone()),
        }
    }
    (stale, untouched)
}

enum Change {
    None,
    /// New bytes or new files that continue the run in order.
    Appended,
    Stale,
}

fn run_change(state: &RunState, files: &[(PathBuf, Option<fs::Metadata>)]) -> Change {
    let last = state.files.keys().next_back();
    // Both in path order: every cached file must still be there.
    let mut found_paths = files.iter().map(|(p, _)| p).peekable();
    for p in state.files.keys() {
        while found_paths.next_if(|f| *f < p).is_some() {}
        if found_paths.next_if(|f| *f == p).is_none() {
            return Change::Stale;
        }
    }
    let mut change = Change::None;
    for (path, meta) in files {
        match (state.files.get(path), meta) {
            (None, _) => {
                if last.is_some_and(|l| path < l) {
                    return Change::Stale;
                }
                change = Change::Appended;
            }
            (Some(_), None) => return Change::Stale,
            (Some(f), Some(m)) => {
                let grew = m.len() != f.size;
                if (m.dev(), m.ino()) != (f.dev, f.ino)
                    || m.len() < f.size
                    || (grew && Some(path) != last)
                {
                    return Change::Stale;
                }
                if grew || f.failed || m.modified().ok() != f.mtime {
                    change = Change::Appended;
                }
            }
        }
    }
    change
}

// ---------------------------------------------------------------------------------------------
// The scan's view of the cached load

impl Cached {
    /// `kind`'s rows that the view selects, before restart handling.
    pub(crate) fn filtered(&self, kind: Kind) -> Result<Vec<RecordBatch>> {
        if !self.view.kinds.contains(kind) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for b in self.served(kind) {
            if let Some(b) = self.select(&b)? {
                out.push(b);
            }
        }
        Ok(out)
    }

    pub(crate) fn table(&self, r: &Reader, kind: Kind) -> Result<Vec<RecordBatch>> {
        let batches = self.filtered(kind)?;
        if r.opts.restarts == crate::load::Restarts::All && r.opts.step_lo.is_none() {
            return Ok(batches);
        }
        crate::restarts::apply(
            &batches,
            r.opts.restarts == crate::load::Restarts::Preempt,
            r.opts.step_lo,
        )
    }

    pub(crate) fn schema(&self, kind: Kind) -> SchemaRef {
        self.expect_decoded(kind);
        let first = self
            .segments
            .iter()
            .find_map(|s| s.batches[kind as usize].as_ref());
        match first {
            Some(b) => self.project(b.schema().as_ref()).0,
            None => empty_schema(kind, self.view.provenance),
        }
    }

    /// The schema without the provenance columns when the cache has them and the view does not
    /// want them, with the indices of the columns kept.
    fn project(&self, schema: &Schema) -> (SchemaRef, Option<Vec<usize>>) {
        if self.view.provenance || schema.index_of("offset").is_err() {
            return (Arc::new(schema.clone()), None);
        }
        let keep: Vec<usize> = (0..schema.fields().len())
            .filter(|&i| !matches!(schema.field(i).name().as_str(), "file" | "offset"))
            .collect();
        (
            Arc::new(schema.project(&keep).expect("indices are in range")),
            Some(keep),
        )
    }

    /// Which rows of a batch keyed by (run, tag) dictionaries (columns 0 and 1) the view's run
    /// and tag filters keep, each pattern matched once per dictionary value; None when no
    /// filter leaves anything out.
    fn run_tag_mask(&self, b: &RecordBatch) -> Option<Vec<bool>> {
        let v = &self.view;
        let mut mask: Option<Vec<bool>> = None;
        for (col, re) in [(0, &v.runs), (1, &v.tags)] {
            let Some(re) = re else { continue };
            let dict = b.column(col).as_dictionary::<Int32Type>();
            let values = dict.values().as_string::<i32>();
            let ok: Vec<bool> = (0..values.len())
                .map(|i| re.is_match(values.value(i)))
                .collect();
            if ok.iter().all(|&x| x) {
                continue;
            }
            let keys = dict.keys().values();
            match &mut mask {
                None => mask = Some(keys.iter().map(|&k| ok[k as usize]).collect()),
                Some(m) => {
                    for (x, &k) in m.iter_mut().zip(keys.iter()) {
                        *x &= ok[k as usize];
                    }
                }
            }
        }
        mask
    }

    /// The rows of one batch the view selects: run and tag through their dictionaries, then
    /// the step range. Filtered batches get compacted dictionaries, as a filtered read has.
    fn select(&self, b: &RecordBatch) -> Result<Option<RecordBatch>> {
        let v = &self.view;
        let mut mask = self.run_tag_mask(b);
        if v.has_steps() {
            let steps = b.column(2).as_primitive::<Int64Type>().values();
            match &mut mask {
                None => mask = Some(steps.iter().map(|&s| v.step_ok(s)).collect()),
                Some(m) => {
                    for (x, &s) in m.iter_mut().zip(steps.iter()) {
                        *x &= v.step_ok(s);
                    }
                }
            }
        }
        let b = match mask {
            Some(m) if !m.iter().all(|&x| x) => {
                if !m.iter().any(|&x| x) {
                    return Ok(None);
                }
                let f = arrow_select::filter::filter_record_batch(b, &BooleanArray::from(m))
                    .map_err(|e| Error::Other(format!("filtering cached rows failed: {e}")))?;
                compact_dicts(&f)?
            }
            _ => b.clone(),
        };
        let (schema, keep) = self.project(b.schema().as_ref());
        Ok(Some(match keep {
            None => b,
            Some(keep) => {
                let cols = keep.iter().map(|&i| b.column(i).clone()).collect();
                RecordBatch::try_new(schema, cols)
                    .map_err(|e| Error::Other(format!("projecting cached rows failed: {e}")))?
            }
        }))
    }

    /// Every run's name in order: the state's, or while it is pending the restored list (a
    /// generation's runs are its state's, in name order).
    fn all_run_names<'a>(&'a self, r: &'a Reader) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        if let Some(p) = &self.pending {
            assert!(
                p.names.is_none(),
                "the cache's run names are not decoded: call Reader::prepare(Need::Names) first"
            );
            Box::new(r.run_names.iter())
        } else {
            Box::new(r.runs.keys())
        }
    }

    pub(crate) fn run_names(&self, r: &Reader) -> Vec<String> {
        self.all_run_names(r)
            .filter(|n| self.view.run_ok(n))
            .cloned()
            .collect()
    }

    pub(crate) fn report(&self, r: &Reader) -> Vec<ReportEntry> {
        // Lines about a file or directory outside any run (discovery) stay, as in a filtered
        // read; lines of runs the view leaves out go.
        let mut out: Vec<ReportEntry> = r
            .report
            .iter()
            .filter(|e| e.run.is_empty() || e.file.is_empty() || self.view.run_ok(&e.run))
            .cloned()
            .collect();
        // A read whose runs filter matches nothing says so, when it has nothing else to say.
        if out.is_empty() && !self.all_run_names(r).any(|n| self.view.run_ok(n)) {
            out.push(crate::load::no_runs_entry(&r.root));
        }
        out
    }

    pub(crate) fn series(&self, r: &Reader) -> RecordBatch {
        self.with_series_pick(|pick| r.series_with(pick))
    }

    /// Calls `f` with what decides the view's series rows (see `Reader::series_with`).
    fn with_series_pick<T>(&self, f: impl FnOnce(crate::runstats::SeriesPick<'_>) -> T) -> T {
        self.expect_state();
        let v = &self.view;
        if !v.has_steps() {
            return f(&|run, tag, ts, k| {
                (v.run_ok(run) && v.tag_ok(tag) && v.kinds.contains(k)).then_some((
                    ts.points,
                    ts.first_step,
                    ts.last_step,
                ))
            });
        }
        let stats = self.step_stats();
        f(&|run, tag, _, k| {
            if !(v.run_ok(run) && v.tag_ok(tag) && v.kinds.contains(k)) {
                return None;
            }
            stats
                .get(&(run.to_string(), tag.to_string(), k))
                .map(|s| (s.points, s.first, s.last))
        })
    }

    fn prepare(&mut self, r: &mut Reader, need: Need) -> Result<()> {
        let ready = match need {
            Need::Rows(kind) => self
                .decode_kind(kind, r)
                .and_then(|()| self.decode_pieces(r, kind)),
            Need::Names => self.decode_names(r),
            _ if self.pending.is_some() && !self.serves(need) => self.materialise(r),
            _ => Ok(()),
        };
        let Err(why) = ready else {
            return Ok(());
        };
        let msg = format!(
            "cache {} not used ({why}); reading the logdir and rewriting the cache",
            self.dir.display()
        );
        self.warn(msg);
        self.reset(r);
        self.force_miss = true;
        self.load(r, &AtomicBool::new(false)).map(|_| ())
    }

    /// Decodes the runs' names a restore left encoded into `Reader::run_names`.
    fn decode_names(&mut self, r: &mut Reader) -> Result<()> {
        let Some(p) = self.pending.as_deref_mut() else {
            return Ok(());
        };
        let Some(at) = p.names else {
            return Ok(());
        };
        r.run_names = p
            .decode_names(at)
            .map_err(|e| Error::Other(format!("manifest: {e}")))?;
        p.names = None;
        Ok(())
    }

    /// Decodes the pieces of `kind` a restore left encoded (and the names they need).
    fn decode_pieces(&mut self, r: &mut Reader, kind: Kind) -> Result<()> {
        let Some(at) = self
            .pending
            .as_deref()
            .and_then(|p| p.pieces[kind as usize])
        else {
            return Ok(());
        };
        // A kind without rows (hparams, on most logdirs: the section is its count, 0) needs
        // no names.
        let empty = at.1 <= 1;
        if !empty {
            self.decode_names(r)?;
        }
        let p = self.pending.as_deref_mut().expect("pending");
        if p.run_arcs.is_none() && !empty {
            p.run_arcs = Some(r.run_names.iter().map(|n| Arc::from(n.as_str())).collect());
        }
        let runs = p.run_arcs.as_deref().unwrap_or_default();
        self.pieces[kind as usize] = p
            .decode_pieces(kind, at, runs, &self.segments)
            .map_err(|e| Error::Other(format!("manifest: {e}")))?;
        p.pieces[kind as usize] = None;
        Ok(())
    }

    /// Reads, checks and decodes the segment files of `kind` a restore left unread.
    fn decode_kind(&mut self, kind: Kind, r: &Reader) -> Result<()> {
        // The cache's own columns (a restore set the reader's provenance to the cache's).
        let schema = empty_schema(kind, r.opts.file.provenance);
        let threads = thread_count(r.opts.threads);
        for s in &mut self.segments {
            let k = kind as usize;
            let Some(f) = s.unread[k].take() else {
                continue;
            };
            let path = s
                .home
                .as_ref()
                .map_or_else(PathBuf::new, |h| h.join(segment_file(&s.name, kind)));
            let sum = s.files[k].expect("an unread file has its manifest entry");
            let b = read_ipc_file(f, &path, sum, &schema, threads).map_err(|e| match e {
                RestoreError::Gone => Error::Other(format!("{} vanished", path.display())),
                RestoreError::Bad(why) => Error::Other(why),
            })?;
            s.batches[k] = Some(b);
        }
        Ok(())
    }

    /// Rows of `kind` used before `Reader::prepare(Need::Rows(kind))`: a programming error.
    fn expect_decoded(&self, kind: Kind) {
        assert!(
            self.segments
                .iter()
                .all(|s| s.unread[kind as usize].is_none())
                && self
                    .pending
                    .as_ref()
                    .is_none_or(|p| p.pieces[kind as usize].is_none()),
            "the cache's {} rows are not decoded: call Reader::prepare(Need::Rows) first",
            kind.name()
        );
    }

    /// A use of the state while it is pending is a missing `Reader::prepare`: better a loud
    /// failure than tables that silently leave every run out.
    fn expect_state(&self) {
        assert!(
            self.pending.is_none(),
            "the cache's run state is not decoded: call Reader::prepare(Need::State) first"
        );
    }

    /// Whether the generation's stored tables answer `need` for this scan's filters.
    fn serves(&self, need: Need) -> bool {
        let Some(p) = &self.pending else {
            return false;
        };
        let v = &self.view;
        match need {
            Need::State => false,
            // Counts per kind are the sums over the kinds kept; a tag filter changes them.
            Need::RunsTable => p.facts.is_some() && v.tags.is_none() && !v.has_steps(),
            // The series counted depend on the kinds kept too.
            Need::RunFacts => {
                p.facts.is_some() && v.tags.is_none() && !v.has_steps() && v.kinds.0 == 0xff
            }
            // Statistics per series: a tag filter selects series, a step range changes them.
            Need::ScalarStats => p.stats.is_some() && !v.has_steps() && !v.restarts,
            Need::Rows(_) | Need::Names => true,
        }
    }

    /// The stored facts of the runs the view selects (pending state, `serves(RunFacts)`).
    fn stored_facts(&self) -> Result<RecordBatch> {
        let p = self.pending.as_ref().expect("pending state");
        let facts = p.facts.as_ref().expect("served only with facts");
        let Some(re) = &self.view.runs else {
            return Ok(facts.clone());
        };
        let names = facts.column(0).as_string::<i32>();
        let keep: BooleanArray = (0..names.len())
            .map(|i| Some(re.is_match(names.value(i))))
            .collect();
        arrow_select::filter::filter_record_batch(facts, &keep)
            .map_err(|e| Error::Other(format!("filtering cached facts failed: {e}")))
    }

    pub(crate) fn run_facts(&self, r: &Reader) -> Result<RecordBatch> {
        if self.pending.is_some() {
            assert!(
                self.serves(Need::RunFacts),
                "call Reader::prepare(Need::RunFacts) first"
            );
            return self.stored_facts();
        }
        let table = self.runs_table(r);
        Ok(self.with_series_pick(|pick| r.facts_from(table, pick)))
    }

    pub(crate) fn scalar_stats(&self, r: &Reader) -> Result<RecordBatch> {
        if self.pending.is_none() || !self.view.kinds.contains(Kind::Scalars) {
            return scalar_stats_of(&self.table(r, Kind::Scalars)?);
        }
        assert!(
            self.serves(Need::ScalarStats),
            "call Reader::prepare(Need::ScalarStats) first"
        );
        let p = self.pending.as_ref().expect("pending state");
        let stats = p.stats.as_ref().expect("served only with statistics");
        Ok(self
            .select_series(stats)?
            .unwrap_or_else(|| stats.slice(0, 0)))
    }

    /// The rows of a table keyed by (run, tag) dictionaries that the view's run and tag
    /// filters select, dictionaries compacted; None when no row is selected.
    fn select_series(&self, b: &RecordBatch) -> Result<Option<RecordBatch>> {
        let Some(m) = self.run_tag_mask(b) else {
            return Ok(Some(b.clone()));
        };
        if !m.iter().any(|&x| x) {
            return Ok(None);
        }
        let f = arrow_select::filter::filter_record_batch(b, &BooleanArray::from(m))
            .map_err(|e| Error::Other(format!("filtering cached statistics failed: {e}")))?;
        compact_dicts(&f).map(Some)
    }

    pub(crate) fn runs_table(&self, r: &Reader) -> RecordBatch {
        let v = &self.view;
        if self.pending.is_some() {
            assert!(
                self.serves(Need::RunsTable),
                "call Reader::prepare(Need::RunsTable) first"
            );
            let table = runs_table_of_facts(&self.stored_facts().expect("facts filter"));
            return self.zero_kinds_left_out(table);
        }
        if !v.has_steps() {
            return r.runs_table_with(&|run, s| {
                if !v.run_ok(run) {
                    return None;
                }
                let mut counts = [0i64; 8];
                for (t, ts) in &s.tags {
                    if let Some(k) = ts.kind {
                        if v.tag_ok(t) && v.kinds.contains(k) {
                            counts[k as usize] += ts.points as i64;
                        }
                    }
                }
                Some((s.max_step, counts))
            });
        }
        // With a step range, a read counts only points in range and dates the run by the
        // summaries in range (of any tag): derive both from the rows.
        let stats = self.step_stats();
        let mut per_run: HashMap<&str, (Option<i64>, [i64; 8])> = HashMap::new();
        for ((run, tag, k), s) in &stats {
            let Some(state) = r.runs.get(run) else {
                continue;
            };
            let ts = state.tags.get(tag.as_str());
            let e = per_run.entry(run.as_str()).or_insert((None, [0; 8]));
            if !event_blob(tag, ts, *k) {
                e.0 = Some(e.0.map_or(s.last, |m: i64| m.max(s.last)));
            }
            if v.tag_ok(tag) && v.kinds.contains(*k) && ts.and_then(|t| t.kind) == Some(*k) {
                e.1[*k as usize] += s.points as i64;
            }
        }
        r.runs_table_with(&|run, _| {
            if !v.run_ok(run) {
                return None;
            }
            Some(per_run.get(run).copied().unwrap_or((None, [0; 8])))
        })
    }

    /// Points and step range per (run, tag, table) within the view's runs and step range (all
    /// tags and kinds: the runs table needs the others too).
    fn step_stats(&self) -> HashMap<(String, String, Kind), StepStats> {
        let v = &self.view;
        let mut out: HashMap<(String, String, Kind), StepStats> = HashMap::new();
        for k in Kind::ALL {
            for b in self.served(k) {
                let runs = b.column(0).as_dictionary::<Int32Type>();
                let tags = b.column(1).as_dictionary::<Int32Type>();
                let run_names = runs.values().as_string::<i32>();
                let tag_names = tags.values().as_string::<i32>();
                let run_ok: Vec<bool> = (0..run_names.len())
                    .map(|i| v.run_ok(run_names.value(i)))
                    .collect();
                let steps = b.column(2).as_primitive::<Int64Type>().values();
                let mut local: HashMap<(i32, i32), StepStats> = HashMap::new();
                for ((&r, &t), &s) in runs
                    .keys()
                    .values()
                    .iter()
                    .zip(tags.keys().values().iter())
                    .zip(steps.iter())
                {
                    if !run_ok[r as usize] || !v.step_ok(s) {
                        continue;
                    }
                    local.entry((r, t)).or_default().add(s);
                }
                for ((r, t), s) in local {
                    let key = (
                        run_names.value(r as usize).to_string(),
                        tag_names.value(t as usize).to_string(),
                        k,
                    );
                    out.entry(key).or_default().merge(&s);
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy)]
struct StepStats {
    points: u64,
    first: i64,
    last: i64,
}

impl Default for StepStats {
    fn default() -> Self {
        StepStats {
            points: 0,
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl StepStats {
    fn add(&mut self, s: i64) {
        self.points += 1;
        self.first = self.first.min(s);
        self.last = self.last.max(s);
    }
    fn merge(&mut self, o: &StepStats) {
        self.points += o.points;
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// Blob rows that come from an Event's graph fields rather than a summary: those do not date a
/// run's max step.
fn event_blob(tag: &str, ts: Option<&TagState>, k: Kind) -> bool {
    k == Kind::Blobs
        && (tag == "__run_graph__"
            || tag == "__meta_graph__"
            || ts
                .and_then(|t| t.meta.as_ref())
                .is_some_and(|m| m.plugin_name == plugin_names::GRAPH_TAGGED_RUN_METADATA))
}

fn is_string_dict(t: &DataType) -> bool {
    matches!(t, DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8)
}

/// Drops dictionary values no row uses (a filtered read's dictionaries hold only its values).
fn compact_dicts(b: &RecordBatch) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(b.num_columns());
    for (i, f) in b.schema().fields().iter().enumerate() {
        let col = b.column(i);
        if !is_string_dict(f.data_type()) || col.null_count() > 0 {
            cols.push(col.clone());
            continue;
        }
        let dict = col.as_dictionary::<Int32Type>();
        let values = dict.values().as_string::<i32>();
        let mut remap = vec![-1i32; values.len()];
        for &k in dict.keys().values().iter() {
            remap[k as usize] = 0;
        }
        let mut used = Vec::new();
        for (j, r) in remap.iter_mut().enumerate() {
            if *r == 0 {
                *r = used.len() as i32;
                used.push(values.value(j));
            }
        }
        if used.len() == values.len() {
            cols.push(col.clone());
            continue;
        }
        let keys: Int32Array = dict
            .keys()
            .values()
            .iter()
            .map(|&k| remap[k as usize])
            .collect();
        let values = Arc::new(StringArray::from_iter_values(used));
        cols.push(Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, values)
                .map_err(|e| Error::Other(format!("compacting a dictionary failed: {e}")))?,
        ));
    }
    RecordBatch::try_new_with_options(
        b.schema(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )
    .map_err(|e| Error::Other(format!("compacting dictionaries failed: {e}")))
}

/// One batch from several of the same schema; string dictionaries are merged (values in order
/// of first use), other columns concatenated.
fn concat_compact(parts: &[RecordBatch]) -> Result<RecordBatch> {
    if parts.len() == 1 {
        return compact_dicts(&parts[0]);
    }
    let schema = parts[0].schema();
    let err =
        |e: arrow_schema::ArrowError| Error::Other(format!("compacting the cache failed: {e}"));
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, f) in schema.fields().iter().enumerate() {
        let arrays: Vec<&dyn Array> = parts.iter().map(|b| b.column(i).as_ref()).collect();
        if !is_string_dict(f.data_type()) || arrays.iter().any(|a| a.null_count() > 0) {
            cols.push(arrow_select::concat::concat(&arrays).map_err(err)?);
            continue;
        }
        let mut index: HashMap<&str, i32> = HashMap::new();
        let mut values: Vec<&str> = Vec::new();
        let mut keys: Vec<i32> = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
        for a in &arrays {
            let d = a.as_dictionary::<Int32Type>();
            let v = d.values().as_string::<i32>();
            let mut map = vec![-1i32; v.len()];
            for &k in d.keys().values().iter() {
                let m = &mut map[k as usize];
                if *m < 0 {
                    let s = v.value(k as usize);
                    *m = *index.entry(s).or_insert_with(|| {
                        values.push(s);
                        values.len() as i32 - 1
                    });
                }
                keys.push(*m);
            }
        }
        let values = Arc::new(StringArray::from_iter_values(values));
        cols.push(Arc::new(
            DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values).map_err(err)?,
        ));
    }
    RecordBatch::try_new(schema, cols).map_err(err)
}

// ---------------------------------------------------------------------------------------------
// Generations on disk

enum Restore {
    Restored,
    /// No cache yet, or one that cannot serve this scan: read everything.
    Missing,
}

fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{now:016x}-{:x}-{n:x}", std::process::id())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    // Only characters that are safe in a file name and cannot be confused with the separator.
    String::from_utf8_lossy(&buf[..end])
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn valid_generation(name: &str) -> bool {
    name.starts_with("gen-")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Test hook: `TBSCOPE_CACHE_TEST_STALL=<phase>:<seconds>` sleeps at `written` (a generation
/// complete in its temporary directory) or `renamed` (renamed, not yet current), so tests can
/// kill a writer or race two of them at a known point.
fn stall(phase: &str) {
    if let Ok(v) = std::env::var("TBSCOPE_CACHE_TEST_STALL") {
        if let Some((p, secs)) = v.split_once(':') {
            if p == phase {
                if let Ok(s) = secs.parse::<f64>() {
                    std::thread::sleep(Duration::from_secs_f64(s.max(0.0)));
                }
            }
        }
    }
}

/// Removes temporary directories left by processes that died while writing (this host's, by
/// process id; others' once a day old). A live writer's directory is never touched.
fn clean_tmp(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let host = hostname();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("tmp-") else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (h, pid) = (parts.next(), parts.next());
        let dead = match (h, pid.and_then(|p| p.parse::<i32>().ok())) {
            (Some(h), Some(pid)) if h == host => {
                // SAFETY: kill with signal 0 only checks whether the process exists.
                let rc = unsafe { libc::kill(pid, 0) };
                rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            }
            _ => e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP),
        };
        if dead {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// An exclusive flock on `<dir>/.lock`, released on drop (and by the kernel if we die).
struct Lock(File);

impl Lock {
    fn take(dir: &Path) -> std::io::Result<Lock> {
        use std::os::fd::AsRawFd;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Lock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking a descriptor we own; closing it would release it anyway.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn segment_file(seg: &str, kind: Kind) -> String {
    format!("{seg}.{}.arrow", kind.name())
}

/// The stored tables of a generation: the runs' facts and the scalar series' statistics.
const FACTS: &str = "facts.arrow";
const STATS: &str = "stats.arrow";

impl Cached {
    /// Writes a generation into a temporary directory, then makes it current: a rename of the
    /// directory and an atomic replacement of CURRENT, under the lock. Readers see the old
    /// generation or the new one, never a part of one.
    fn publish(&mut self, r: &Reader) -> std::result::Result<String, String> {
        let io = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
        fs::create_dir_all(&self.dir).map_err(|e| io("cannot create", &self.dir, e))?;
        // tmp-<host>-<pid>-<nonce>: the host (no dashes in it) and the process tell a later
        // run whether the writer is dead (see clean_tmp).
        let tmp = self.dir.join(format!(
            "tmp-{}-{}-{}",
            hostname(),
            std::process::id(),
            unique_name("").replace('-', "")
        ));
        fs::create_dir(&tmp).map_err(|e| io("cannot create", &tmp, e))?;
        let files = match self.write_into(r, &tmp) {
            Ok(files) => files,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        stall("written");
        let generation = unique_name("gen-");
        let gdir = self.dir.join(&generation);
        let published = (|| {
            let _lock = Lock::take(&self.dir).map_err(|e| io("cannot lock", &self.dir, e))?;
            let previous = fs::read_to_string(self.dir.join("CURRENT"))
                .ok()
                .map(|s| s.trim().to_string());
            fs::rename(&tmp, &gdir).map_err(|e| io("cannot rename", &tmp, e))?;
            stall("renamed");
            let pointer = self.dir.join(format!("CURRENT.{}", unique_name("tmp-")));
            let written = (|| {
                let mut f = File::create(&pointer)?;
                f.write_all(format!("{generation}\n").as_bytes())?;
                f.sync_all()?;
                fs::rename(&pointer, self.dir.join("CURRENT"))?;
                sync_dir(&self.dir)
            })();
            if let Err(e) = written {
                let _ = fs::remove_file(&pointer);
                let _ = fs::remove_dir_all(&gdir);
                return Err(io("cannot publish in", &self.dir, e));
            }
            // Older generations go, except the one that was current until now: a reader may
            // have just read its name and not opened it yet.
            if let Ok(entries) = fs::read_dir(&self.dir) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("gen-")
                        && name != generation
                        && previous.as_deref() != Some(name.as_str())
                    {
                        let _ = fs::remove_dir_all(e.path());
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = published {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        for (s, files) in self.segments.iter_mut().zip(files) {
            s.home = Some(gdir.clone());
            s.files = files;
        }
        Ok(generation)
    }

    /// Writes the generation's files into `tmp` (segments kept from the generation they live
    /// in are hard-linked, with the size and checksum recorded there); returns what the
    /// manifest says about each segment's files.
    fn write_into(
        &self,
        r: &Reader,
        tmp: &Path,
    ) -> std::result::Result<Vec<[Option<FileSum>; 8]>, String> {
        let mut sums: Vec<[Option<FileSum>; 8]> = Vec::with_capacity(self.segments.len());
        for s in &self.segments {
            let mut files: [Option<FileSum>; 8] = Default::default();
            for k in Kind::ALL {
                if !s.has(k) {
                    continue;
                }
                let name = segment_file(&s.name, k);
                let dest = tmp.join(&name);
                let linked = match (&s.home, s.files[k as usize]) {
                    (Some(h), Some(sum)) => {
                        fs::hard_link(h.join(&name), &dest).is_ok().then_some(sum)
                    }
                    _ => None,
                };
                files[k as usize] = Some(match linked {
                    Some(sum) => sum,
                    None => {
                        let b = s.batches[k as usize]
                            .as_ref()
                            .ok_or_else(|| format!("segment {} was not decoded", s.name))?;
                        write_ipc(&dest, b)
                            .map_err(|e| format!("cannot write {}: {e}", dest.display()))?
                    }
                });
            }
            sums.push(files);
        }
        // The stored tables answer a warm open that finds nothing changed (see the module
        // docs): computed here with the cache taken out of the reader, so for the unfiltered load.
        let facts = r
            .run_facts()
            .map_err(|e| format!("cannot compute the runs' facts: {e}"))?;
        let stats = scalar_stats_of(&self.served(Kind::Scalars))
            .map_err(|e| format!("cannot compute scalar statistics: {e}"))?;
        let mut derived = [None; 2];
        for (slot, (name, b)) in derived.iter_mut().zip([(FACTS, &facts), (STATS, &stats)]) {
            let dest = tmp.join(name);
            *slot = Some(
                write_ipc(&dest, b).map_err(|e| format!("cannot write {}: {e}", dest.display()))?,
            );
        }
        let manifest =
            encode_manifest(r, &self.segments, &sums, &self.pieces, &self.dirs, derived)?;
        let path = tmp.join("manifest");
        (|| {
            let mut f = File::create_new(&path)?;
            f.write_all(&manifest)?;
            f.sync_all()?;
            sync_dir(tmp)
        })()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(sums)
    }

    /// Restores the reader from the current generation.
    fn restore(&mut self, r: &mut Reader) -> std::result::Result<Restore, String> {
        for attempt in 0..2 {
            let current = match fs::read_to_string(self.dir.join("CURRENT")) {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Restore::Missing),
                Err(e) => return Err(format!("cannot read CURRENT: {e}")),
            };
            let generation = current.trim();
            if !valid_generation(generation) {
                return Err("CURRENT does not name a generation".into());
            }
            let gdir = self.dir.join(generation);
            match self.restore_from(r, &gdir) {
                // Removed between reading CURRENT and opening it (two newer generations were
                // published meanwhile): read CURRENT again.
                Err(RestoreError::Gone) if attempt == 0 => continue,
                Err(RestoreError::Gone) => return Err(format!("generation {generation} vanished")),
                Err(RestoreError::Bad(why)) => return Err(why),
                Ok(Restore::Restored) => {
                    self.info.generation = Some(generation.to_string());
                    return Ok(Restore::Restored);
                }
                Ok(other) => return Ok(other),
            }
        }
        Ok(Restore::Missing)
    }

    fn restore_from(
        &mut self,
        r: &mut Reader,
        gdir: &Path,
    ) -> std::result::Result<Restore, RestoreError> {
        let t0 = std::time::Instant::now();
        // Held whole and checked (its checksum covers every byte) before anything in it is
        // used; only the change check's part of it is decoded unless something changed.
        let path = gdir.join("manifest");
        let (manifest, _) = hold(
            File::open(&path).map_err(RestoreError::io)?,
            &path,
            map_bytes(),
        )?;
        let bad = |e: String| RestoreError::Bad(format!("manifest: {e}"));
        if manifest.is_empty() {
            return Err(bad("empty".into()));
        }
        let (h, body) = decode_header(&manifest).map_err(bad)?;
        if h.tbscope != env!("CARGO_PKG_VERSION") {
            return Err(RestoreError::Bad(format!(
                "written by tbscope {}, this is {}",
                h.tbscope,
                env!("CARGO_PKG_VERSION")
            )));
        }
        let root = fs::canonicalize(&r.root).map_err(|e| RestoreError::Bad(e.to_string()))?;
        if h.root != root.as_os_str().as_bytes() {
            return Err(RestoreError::Bad(format!(
                "it belongs to {}",
                String::from_utf8_lossy(&h.root)
            )));
        }
        let o = &r.opts.file;
        if h.verify != o.verify || h.max_len != o.max_len {
            return Err(RestoreError::Bad(format!(
                "written with verify={} max_record_bytes={}, this scan uses verify={} max_record_bytes={}",
                h.verify, h.max_len, o.verify, o.max_len
            )));
        }
        if self.view.provenance && !h.provenance {
            // Not a problem, just a cache without the columns asked for: build one with them.
            return Ok(Restore::Missing);
        }
        let t_read = t0.elapsed();
        let m = decode_body(body).map_err(bad)?;
        let t_decode = t0.elapsed();
        let mut segments = Vec::with_capacity(m.segments.len());
        for (name, files) in &m.segments {
            // Opened (so that a writer removing this generation takes nothing away) and
            // checked for size here; read, checked and decoded when first needed.
            let mut s = Segment::new(name.clone(), Some(gdir.to_path_buf()));
            for k in Kind::ALL {
                let Some(sum) = files[k as usize] else {
                    continue;
                };
                let path = gdir.join(segment_file(name, k));
                let f = File::open(&path).map_err(RestoreError::io)?;
                let len = f.metadata().map_err(RestoreError::io)?.len();
                if len != sum.bytes {
                    return Err(RestoreError::Bad(format!(
                        "{} is {len} bytes, the manifest says {}",
                        path.display(),
                        sum.bytes
                    )));
                }
                s.unread[k as usize] = Some(f);
                s.files[k as usize] = Some(sum);
            }
            segments.push(s);
        }
        // The stored tables are small: read and checked now.
        let facts_schema = r
            .facts_from(r.runs_table_with(&|_, _| None), &|_, _, _, _| None)
            .schema();
        let threads = thread_count(r.opts.threads);
        let mut derived: [Option<RecordBatch>; 2] = [None, None];
        for ((slot, sum), (name, schema)) in derived
            .iter_mut()
            .zip(m.derived)
            .zip([(FACTS, facts_schema), (STATS, stats_schema())])
        {
            let Some(sum) = sum else { continue };
            let path = gdir.join(name);
            let f = File::open(&path).map_err(RestoreError::io)?;
            *slot = Some(read_ipc_file(f, &path, sum, &schema, threads)?);
        }
        if let Some(f) = &derived[0] {
            if f.num_rows() != m.nruns {
                return Err(RestoreError::Bad("facts of other runs".into()));
            }
        }
        let t_segments = t0.elapsed();
        // Everything checked: take it. The runs' state stays encoded until it is needed.
        let [facts, stats] = derived;
        r.opts.file.provenance = h.provenance;
        r.runs.clear();
        // Names and pieces too are decoded when first needed.
        r.run_names.clear();
        r.file_names.clear();
        r.report = m.report;
        self.segments = segments;
        self.pieces = Default::default();
        // Kept as the pending index until discovery needs them as a map.
        self.dirs.clear();
        self.pending = Some(Box::new(Pending {
            manifest,
            nruns: m.nruns,
            names: Some(m.names),
            pieces: m.pieces.map(Some),
            run_arcs: None,
            state: m.state,
            strings: m.strings,
            metas: m.metas,
            index: m.index,
            dirs: m.dirs,
            facts,
            stats,
        }));
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope cache restore: read {t_read:?}, decode {:?}, segments {:?}",
                t_decode - t_read,
                t_segments - t_decode,
            );
        }
        Ok(Restore::Restored)
    }
}

impl Cached {
    /// Decodes a pending state into the reader, and every segment (a no-op once done).
    fn materialise(&mut self, r: &mut Reader) -> Result<()> {
        for k in Kind::ALL {
            self.decode_kind(k, r)?;
            self.decode_pieces(r, k)?;
        }
        self.decode_names(r)?;
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        match decode_state(&p, &r.run_names, &r.root).and_then(|x| Ok((x, p.listings()?))) {
            Ok(((runs, file_names), dirs)) => {
                r.runs = runs;
                r.file_names = file_names;
                self.dirs = dirs;
                Ok(())
            }
            Err(e) => {
                self.pending = Some(p);
                Err(Error::Other(format!(
                    "cache {}: the runs' state cannot be decoded: {e}",
                    self.dir.display()
                )))
            }
        }
    }

    /// A runs table from the stored facts, with the counts of kinds the view leaves out at 0
    /// (as `runs_table` counts only the kinds kept).
    fn zero_kinds_left_out(&self, table: RecordBatch) -> RecordBatch {
        if self.view.kinds.0 == 0xff {
            return table;
        }
        let schema = table.schema();
        let cols: Vec<ArrayRef> = (0..table.num_columns())
            .map(|i| {
                let kept = Kind::from_name(schema.field(i).name())
                    .is_none_or(|k| self.view.kinds.contains(k));
                if kept {
                    table.column(i).clone()
                } else {
                    Arc::new(arrow_array::Int64Array::from(vec![0i64; table.num_rows()]))
                        as ArrayRef
                }
            })
            .collect();
        RecordBatch::try_new(schema, cols).expect("same columns")
    }

    /// Whether nothing changed since the pending generation was written, decided with one
    /// stat per directory and per event file and nothing else: every directory listing settled
    /// and still current (same device, inode and mtime: no entry added, removed or renamed),
    /// every event file where it was with the same identity, size and mtime. False when any of
    /// that does not hold or cannot be told this way (a single-file logdir, symlinks, a file
    /// that failed); the full discovery then decides what changed.
    ///
    /// Paths are stat'ed relative to their parent directory (one `open` per directory that has
    /// subdirectories) rather than from the root: on a logdir of many runs the kernel's walk
    /// down the full path is most of a stat.
    fn unchanged(&self, r: &Reader, threads: usize) -> bool {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let Some(p) = self.pending.as_deref() else {
            return false;
        };
        // A single-file logdir, or a root that could not be listed: leave it to discovery.
        if p.dirs.first().is_none_or(|d| d.parent != u32::MAX) {
            return false;
        }
        let open_dir = |at: Option<i32>, path: &[u8]| -> Option<OwnedFd> {
            let c = std::ffi::CString::new(path).ok()?;
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
            // SAFETY: a valid NUL-terminated path and (for openat) a descriptor we hold open.
            let fd = unsafe {
                match at {
                    None => libc::open(c.as_ptr(), flags),
                    Some(dirfd) => libc::openat(dirfd, c.as_ptr(), flags),
                }
            };
            // SAFETY: `fd` is a descriptor we just opened (checked non-negative).
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        };
        const NONE: i32 = -1;
        let t0 = std::time::Instant::now();
        // First pass: what the listings promise (settled, complete, every run in its
        // directory).
        let mut children: Vec<u32> = vec![0; p.dirs.len()];
        let mut seen = vec![false; p.nruns];
        for (i, d) in p.dirs.iter().enumerate() {
            if d.unsure || d.odd.1 > 0 {
                return false;
            }
            if i > 0 {
                children[d.parent as usize] += 1;
            }
            if d.has_files {
                // (Its files are looked at in the second pass.)
                if d.run == u32::MAX || std::mem::replace(&mut seen[d.run as usize], true) {
                    return false;
                }
            }
        }
        if p.dirs.iter().zip(&children).any(|(d, &n)| d.subdirs.1 != n) || seen.contains(&false) {
            return false;
        }
        let Some(root_fd) = open_dir(None, r.root.as_os_str().as_bytes()) else {
            return false;
        };
        let mut fd_of: Vec<i32> = vec![NONE; p.dirs.len()];
        fd_of[0] = root_fd.as_raw_fd();
        let mut opened_total = 1usize;
        // Second pass, on `threads` threads over contiguous ranges of directories: one stat
        // of each directory and of each of its event files, relative to the nearest descriptor.
        let same = AtomicBool::new(true);
        let stat_is =
            |fd: i32, path: &[u8], dev: u64, ino: u64, mtime: (i64, u64), size: Option<u64>| {
                // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: the descriptor is open for the whole check; `path` ends with a NUL.
                let rc = unsafe { libc::fstatat(fd, path.as_ptr().cast(), &mut st, 0) };
                rc == 0
                    && st.st_dev as u64 == dev
                    && st.st_ino as u64 == ino
                    && (st.st_mtime as i64, st.st_mtime_nsec as u64) == mtime
                    && size.is_none_or(|n| st.st_size as u64 == n)
            };
        let check = |range: std::ops::Range<usize>, fd_of: &[i32]| {
            let mut buf: Vec<u8> = Vec::with_capacity(512);
            for i in range {
                if !same.load(Ordering::Relaxed) {
                    return;
                }
                let d = &p.dirs[i];
                let name = p.bytes(d.name);
                let own = fd_of[i];
                let parent = if i == 0 {
                    NONE
                } else {
                    fd_of[d.parent as usize]
                };
                buf.clear();
                let fd = if own != NONE {
                    buf.push(b'.');
                    own
                } else {
                    buf.extend_from_slice(name);
                    parent
                };
                buf.push(0);
                if !stat_is(fd, &buf, d.dev, d.ino, d.mtime, None) {
                    same.store(false, Ordering::Relaxed);
                    return;
                }
                if !d.has_files {
                    continue;
                }
                let files = p.run_files(d.run as usize);
                // Only a run's own files, each stat'ed last time (a file that failed, or one
                // found elsewhere, is discovery's business).
                if files.is_empty()
                    || files
                        .iter()
                        .any(|f| f.code != 1 || f.failed || f.mtime.is_none())
                {
                    same.store(false, Ordering::Relaxed);
                    return;
                }
                for f in files {
                    buf.clear();
                    if own == NONE {
                        buf.extend_from_slice(name);
                        buf.push(b'/');
                    }
                    buf.extend_from_slice(p.bytes(f.path));
                    buf.push(0);
                    let mtime = f.mtime.expect("checked above");
                    if !stat_is(fd, &buf, f.dev, f.ino, mtime, Some(f.size)) {
                        same.store(false, Ordering::Relaxed);
                        return;
                    }
                }
            }
        };
        let total = p.dirs.len() + p.index.files.len();
        let threads = if total < 4096 { 1 } else { threads.clamp(1, 8) };
        let t1 = std::time::Instant::now();
        // Directories in windows of consecutive ones (the listings are depth first) that hold at
        // most FD_BUDGET descriptors at a time: a logdir of thousands of sweep directories must
        // not run into the process's limit on open files.
        const FD_BUDGET: usize = 256;
        let parent_of = |i: usize| p.dirs[i].parent as usize;
        let mut a = 1usize.min(p.dirs.len());
        // The root first, alone (its descriptor is open throughout).
        check(0..a, &fd_of);
        while a < p.dirs.len() && same.load(Ordering::Relaxed) {
            let mut held: Vec<(usize, OwnedFd)> = Vec::new();
            // The window's first directory's ancestors (below the root), from the top down: its
            // directories' parents are among them or in the window.
            let mut chain = Vec::new();
            let mut x = parent_of(a);
            while x != 0 {
                chain.push(x);
                x = parent_of(x);
            }
            let mut ok = true;
            let open_at = |i: usize, fd_of: &[i32]| -> Option<OwnedFd> {
                open_dir(Some(fd_of[parent_of(i)]), p.bytes(p.dirs[i].name))
            };
            for &anc in chain.iter().rev() {
                match open_at(anc, &fd_of) {
                    Some(fd) => {
                        fd_of[anc] = fd.as_raw_fd();
                        held.push((anc, fd));
                    }
                    None => ok = false,
                }
            }
            let mut budget = FD_BUDGET.saturating_sub(chain.len()).max(1);
            let mut b = a;
            while ok && b < p.dirs.len() {
                if p.dirs[b].subdirs.1 > 0 {
                    if budget == 0 {
                        break;
                    }
                    budget -= 1;
                    match open_at(b, &fd_of) {
                        Some(fd) => {
                            fd_of[b] = fd.as_raw_fd();
                            held.push((b, fd));
                        }
                        None => ok = false,
                    }
                }
                b += 1;
            }
            if !ok {
                return false;
            }
            opened_total += held.len();
            if threads == 1 || b - a < 1024 {
                check(a..b, &fd_of);
            } else {
                // Equal ranges of directories (run directories hold a file or a few each).
                let per = (b - a).div_ceil(threads);
                let (fds, check) = (&fd_of, &check);
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let range = (a + t * per).min(b)..(a + (t + 1) * per).min(b);
                        s.spawn(move || check(range, fds));
                    }
                });
            }
            for (i, _) in &held {
                fd_of[*i] = NONE;
            }
            drop(held);
            a = b;
        }
        drop(root_fd);
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope cache check: {total} stats on {threads} threads, {} directories opened; \
                 listings {:?}, stats {:?}",
                opened_total,
                t1 - t0,
                t1.elapsed()
            );
        }
        same.load(Ordering::Relaxed)
    }
}

/// Two listings that say the same (the reader's state need not be written again for them).
fn same_listing(a: &DirListing, b: &DirListing) -> bool {
    (a.dev, a.ino, a.mtime, a.unsure, a.has_files) == (b.dev, b.ino, b.mtime, b.unsure, b.has_files)
        && a.subdirs == b.subdirs
        && a.odd == b.odd
}

enum RestoreError {
    /// A file of the generation is missing: it was removed as we read it.
    Gone,
    Bad(String),
}

impl RestoreError {
    fn io(e: std::io::Error) -> RestoreError {
        if e.kind() == std::io::ErrorKind::NotFound {
            RestoreError::Gone
        } else {
            RestoreError::Bad(e.to_string())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cache files in memory: read, or mapped under a lease, and checked
//
// A file truncated under a mapping kills the process (SIGBUS) on the next access, and no
// checksum verified earlier protects against that. So a cache file is held in memory nobody
// can change under us, then its size and CRC-32C are checked against the manifest, and only
// then is it decoded:
//
// - a file of at least MAP_BYTES is mapped when the kernel grants us a read lease on it
//   (fcntl F_SETLEASE). While we hold it, whoever opens the file for writing or truncates it
//   is held back, and the kernel signals our watcher thread (`lease`), which copies the
//   mapping into memory of our own, puts that memory in its place at the same address
//   (mremap), and only then gives the lease up. Buffers pointing into the mapping keep their
//   bytes, and a warm open still copies nothing.
// - anything else (small files, and files the kernel grants no lease on: another user's, a
//   network filesystem, a file someone has open for writing) is read (pread) into a buffer of
//   our own.

/// What the manifest says about one file of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileSum {
    rows: u64,
    bytes: u64,
    crc: u32,
}

/// Mappings under a read lease, and the thread that answers lease breaks.
///
/// The watcher is one thread per process that blocks its signal and waits for it
/// (`sigwaitinfo`); every lease names that thread as the one to signal (`F_SETOWN_EX` with
/// `F_OWNER_TID`), so no other thread ever sees the signal and no signal handler is installed.
/// The kernel holds back whoever breaks a lease for `/proc/sys/fs/lease-break-time` seconds
/// (45 by default) or until we give it up; the watcher makes the mapping private (a copy) in
/// well under that. Only a process that cannot run for that long (stopped, frozen) loses the
/// guarantee.
mod lease {
    use std::fs::File;
    use std::os::fd::{AsRawFd, RawFd};
    use std::ptr::NonNull;
    use std::sync::{Arc, Mutex, OnceLock};

    use arrow_buffer::Buffer;

    // Not in the libc crate for every target; values from <fcntl.h> on Linux.
    const F_SETSIG: libc::c_int = 10;
    const F_SETOWN_EX: libc::c_int = 15;
    const F_OWNER_TID: libc::c_int = 0;

    /// The mappings under a lease: (descriptor, address, length, made private already).
    static MAPS: Mutex<Vec<(RawFd, usize, usize, bool)>> = Mutex::new(Vec::new());

    struct Watcher {
        tid: libc::pid_t,
        sig: libc::c_int,
        /// The process it runs in: a child forked since has no watcher, and reads instead.
        pid: u32,
    }

    static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();

    fn watcher() -> Option<&'static Watcher> {
        WATCHER.get_or_init(start).as_ref()
    }

    fn start() -> Option<Watcher> {
        // A real-time signal nothing else in a Python process uses; the kernel queues them
        // (with the descriptor in `si_fd`) rather than merging them.
        let sig = libc::SIGRTMIN() + 6;
        if sig > libc::SIGRTMAX() {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("tbscope-lease".into())
            .spawn(move || {
                // SAFETY: sigset operations on a local set; the mask is this thread's own.
                let set = unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, sig);
                    // The kernel sends SIGIO instead when the queue of real-time signals is
                    // full: then every lease is answered.
                    libc::sigaddset(&mut set, libc::SIGIO);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    set
                };
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() });
                loop {
                    // SAFETY: an all-zero siginfo is a valid value for sigwaitinfo to fill.
                    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                    // SAFETY: `set` holds signals this thread blocks.
                    let got = unsafe { libc::sigwaitinfo(&set, &mut info) };
                    if got == sig {
                        make_private(Some(si_fd(&info)));
                    } else if got == libc::SIGIO {
                        make_private(None);
                    }
                }
            })
            .ok()?;
        let tid = rx.recv().ok()?;
        Some(Watcher {
            tid,
            sig,
            pid: std::process::id(),
        })
    }

    /// The descriptor of a lease-break signal (`si_fd`, after `si_band` in the SIGPOLL part of
    /// siginfo, which the libc crate does not name).
    fn si_fd(info: &libc::siginfo_t) -> RawFd {
        #[repr(C)]
        struct Poll {
            signo: libc::c_int,
            errno: libc::c_int,
            code: libc::c_int,
            band: libc::c_long,
            fd: libc::c_int,
        }
        // SAFETY: siginfo_t is larger than this prefix, which is its layout for SIGPOLL-style
        // signals on Linux (the union starts after the three ints, aligned for a long).
        unsafe { (*(info as *const libc::siginfo_t as *const Poll)).fd }
    }

    /// Copies the mappings of `fd` (every mapping: None) into memory of our own put in their
    /// place, then gives their leases up.
    fn make_private(fd: Option<RawFd>) {
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        for (f, addr, len, private) in maps.iter_mut() {
            if fd.is_some_and(|fd| fd != *f) {
                continue;
            }
            if !*private {
                // SAFETY: a fresh anonymous mapping, filled from ours (whose file nobody can
                // change while we hold the lease), then moved over ours in one step: a reader
                // faulting meanwhile waits for the move and finds the copy.
                unsafe {
                    let copy = libc::mmap(
                        std::ptr::null_mut(),
                        *len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if copy == libc::MAP_FAILED {
                        // Keep the lease: the other process waits for the kernel to break it.
                        continue;
                    }
                    std::ptr::copy_nonoverlapping(*addr as *const u8, copy.cast::<u8>(), *len);
                    libc::mprotect(copy, *len, libc::PROT_READ);
                    let moved = libc::mremap(
                        copy,
                        *len,
                        *len,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        *addr as *mut libc::c_void,
                    );
                    if moved == libc::MAP_FAILED {
                        libc::munmap(copy, *len);
                        continue;
                    }
                }
                *private = true;
            }
            // SAFETY: giving up a lease on a descriptor we hold open.
            unsafe { libc::fcntl(*f, libc::F_SETLEASE, libc::F_UNLCK) };
        }
    }

    /// A read-only mapping of a whole file under a lease (see the module docs), unmapped when
    /// the last buffer using it goes.
    struct LeasedMap {
        ptr: NonNull<u8>,
        len: usize,
        /// Held open for the lease (closing it gives the lease up).
        file: File,
    }

    // SAFETY: the mapping is read-only and lives until drop; the watcher replaces its pages
    // by identical ones under the registry's lock.
    unsafe impl Send for LeasedMap {}
    unsafe impl Sync for LeasedMap {}
    impl std::panic::RefUnwindSafe for LeasedMap {}

    impl Drop for LeasedMap {
        fn drop(&mut self) {
            let fd = self.file.as_raw_fd();
            // (In a forked child the registry may be locked by a thread that does not exist
            // there; it never maps, so it has nothing to take out.)
            if watcher().is_some_and(|w| w.pid == std::process::id()) {
                let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
                maps.retain(|m| m.0 != fd);
            }
            // SAFETY: ptr/len are exactly what mmap returned (or what the watcher moved there).
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        }
    }

    /// `len` bytes of `f` (its whole size, `len > 0`) mapped under a lease; the file back when
    /// the kernel grants no lease (another user's file, a filesystem without leases, a file
    /// open for writing, a forked child) or the mapping fails.
    pub(super) fn map(f: File, len: usize) -> Result<Buffer, File> {
        let Some(w) = watcher().filter(|w| w.pid == std::process::id()) else {
            return Err(f);
        };
        let fd = f.as_raw_fd();
        // Held from the lease to the registration: a break arriving meanwhile waits for it.
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        let owner: [libc::c_int; 2] = [F_OWNER_TID, w.tid];
        // SAFETY: fcntl on a descriptor we own, with the argument each command takes.
        let leased = unsafe {
            libc::fcntl(fd, F_SETSIG, w.sig) == 0
                && libc::fcntl(fd, F_SETOWN_EX, owner.as_ptr()) == 0
                && libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) == 0
        };
        if !leased {
            return Err(f);
        }
        // SAFETY: a fresh read-only private mapping of an open file; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        let Some(ptr) = NonNull::new(p.cast::<u8>()).filter(|_| p != libc::MAP_FAILED) else {
            // SAFETY: as above.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return Err(f);
        };
        maps.push((fd, ptr.as_ptr() as usize, len, false));
        drop(maps);
        let map = LeasedMap { ptr, len, file: f };
        // SAFETY: `len` readable bytes at `ptr` for as long as the owner (the mapping) lives.
        Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(map)) })
    }
}

/// Counts and checksums what goes through it.
struct Summing<W> {
    inner: W,
    bytes: u64,
    crc: u32,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `b` as a new IPC file (one record batch), fsynced; returns its rows, size and
/// checksum for the manifest.
fn write_ipc(path: &Path, b: &RecordBatch) -> std::result::Result<FileSum, String> {
    let f = File::create_new(path).map_err(|e| e.to_string())?;
    let out = Summing {
        inner: BufWriter::with_capacity(1 << 20, f),
        bytes: 0,
        crc: 0,
    };
    let mut w =
        arrow_ipc::writer::FileWriter::try_new(out, &b.schema()).map_err(|e| e.to_string())?;
    w.write(b).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    let out = w.into_inner().map_err(|e| e.to_string())?;
    let (bytes, crc) = (out.bytes, out.crc);
    let f = out.inner.into_inner().map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    Ok(FileSum {
        rows: b.num_rows() as u64,
        bytes,
        crc,
    })
}

/// Files at least this large are mapped (under a lease) rather than read; the environment
/// variable `TBSCOPE_CACHE_MAP_BYTES` changes it (tests map small files).
const MAP_BYTES: u64 = 1 << 20;

fn map_bytes() -> u64 {
    std::env::var("TBSCOPE_CACHE_MAP_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(MAP_BYTES)
}

/// The whole of `f` (`path` names it in errors) in memory nobody can change under us: mapped
/// under a lease when it has at least `map_at` bytes and the kernel grants one, else read into
/// a 64-byte aligned buffer of our own (says which). A file that ends before its size said
/// (truncated meanwhile) is damaged.
fn hold(
    f: File,
    path: &Path,
    map_at: u64,
) -> std::result::Result<(Buffer, &'static str), RestoreError> {
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let len = f.metadata().map_err(RestoreError::io)?.len();
    let len = usize::try_from(len).map_err(|_| bad("too large".into()))?;
    let f = if len > 0 && len as u64 >= map_at {
        match lease::map(f, len) {
            Ok(buf) => return Ok((buf, "mapped")),
            Err(back) => back,
        }
    } else {
        f
    };
    let buf = read_into(&f, len).map_err(|e| bad(e.to_string()))?;
    Ok((buf, "read"))
}

/// `len` bytes of `f` from its start, read into a buffer of our own.
fn read_into(f: &File, len: usize) -> std::io::Result<Buffer> {
    use std::os::unix::fs::FileExt;
    // Zeroed memory from the allocator is fresh pages; backed in bulk before the kernel copies
    // the file into them.
    let mut buf = arrow_buffer::MutableBuffer::from_len_zeroed(len);
    let bytes = buf.as_slice_mut();
    crate::columns::populate(bytes.as_mut_ptr() as usize, len);
    let mut at = 0;
    while at < len {
        match f.read_at(&mut bytes[at..], at as u64) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("ends at byte {at} of {len} (truncated)"),
                ))
            }
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf.into())
}

/// CRC-32C of `bytes`, in shares on up to `threads` threads when it is large.
fn crc32c_of(bytes: &[u8], threads: usize) -> u32 {
    const SHARE: usize = 16 << 20;
    let shares = threads.clamp(1, bytes.len().div_ceil(SHARE).max(1));
    if shares == 1 {
        return crc32c::crc32c(bytes);
    }
    let per = bytes.len().div_ceil(shares);
    let crcs: Vec<(u32, usize)> = std::thread::scope(|s| {
        let running: Vec<_> = bytes
            .chunks(per)
            .map(|c| (s.spawn(move || crc32c::crc32c(c)), c.len()))
            .collect();
        running
            .into_iter()
            // (A thread that cannot start or panics gets its share checked here.)
            .map(|(h, n)| (h.join().unwrap_or(u32::MAX), n))
            .collect()
    });
    let mut crc = crcs[0].0;
    for &(c, n) in &crcs[1..] {
        crc = crc32c::crc32c_combine(crc, c, n);
    }
    crc
}

/// `f` held ([`hold`]) and checked against what the manifest says: its size, then its
/// CRC-32C.
fn read_checked(
    f: File,
    path: &Path,
    sum: FileSum,
    threads: usize,
    map_at: u64,
) -> std::result::Result<(Buffer, &'static str), RestoreError> {
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let on_disk = f.metadata().map_err(RestoreError::io)?.len();
    if on_disk != sum.bytes {
        return Err(bad(format!(
            "{on_disk} bytes, the manifest says {} (damaged)",
            sum.bytes
        )));
    }
    let (buf, how) = hold(f, path, map_at)?;
    if buf.len() as u64 != sum.bytes || crc32c_of(&buf, threads) != sum.crc {
        return Err(bad("checksum mismatch (damaged)".into()));
    }
    Ok((buf, how))
}

/// The one record batch of the IPC file `f` (`path` names it in errors), read and checked
/// against `sum` ([`read_checked`]), decoded with Arrow's full validation, and held to the
/// schema its consumers take for granted and the rows the manifest says.
fn read_ipc_file(
    f: File,
    path: &Path,
    sum: FileSum,
    schema: &Schema,
    threads: usize,
) -> std::result::Result<RecordBatch, RestoreError> {
    let t0 = std::time::Instant::now();
    let (buf, how) = read_checked(f, path, sum, threads, map_bytes())?;
    let t_read = t0.elapsed();
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let len = buf.len();
    if len < 16 {
        return Err(bad("too short for an Arrow file".into()));
    }
    let trailer: [u8; 10] = buf[len - 10..].try_into().expect("10 bytes");
    let footer_len =
        arrow_ipc::reader::read_footer_length(trailer).map_err(|e| bad(e.to_string()))?;
    if footer_len + 10 > len {
        return Err(bad("footer runs past the start".into()));
    }
    let footer = arrow_ipc::root_as_footer(&buf[len - 10 - footer_len..len - 10])
        .map_err(|e| bad(e.to_string()))?;
    let stored = footer
        .schema()
        .ok_or_else(|| bad("no schema".into()))
        .and_then(|s| arrow_ipc::convert::try_fb_to_schema(s).map_err(|e| bad(e.to_string())))?;
    if stored.fields() != schema.fields() {
        return Err(bad(format!(
            "columns {stored} where {schema} were expected"
        )));
    }
    let mut decoder = arrow_ipc::reader::FileDecoder::new(Arc::new(stored), footer.version());
    let block_data = |b: &arrow_ipc::Block| -> std::result::Result<Buffer, RestoreError> {
        let start = b.offset() as usize;
        let n = b.metaDataLength() as usize + b.bodyLength() as usize;
        if b.offset() < 0 || start.checked_add(n).is_none_or(|end| end > len) {
            return Err(bad("a block runs past the end".into()));
        }
        Ok(buf.slice_with_length(start, n))
    };
    for block in footer.dictionaries().iter().flatten() {
        let data = block_data(block)?;
        decoder
            .read_dictionary(block, &data)
            .map_err(|e| bad(e.to_string()))?;
    }
    let batches = footer
        .recordBatches()
        .ok_or_else(|| bad("no record batch".into()))?;
    if batches.len() != 1 {
        return Err(bad(format!("{} record batches, expected 1", batches.len())));
    }
    let block = batches.get(0);
    let data = block_data(block)?;
    let b = decoder
        .read_record_batch(block, &data)
        .map_err(|e| bad(e.to_string()))?
        .ok_or_else(|| bad("empty record batch message".into()))?;
    if std::env::var_os("TBSCOPE_TRACE").is_some() {
        eprintln!(
            "tbscope cache file {}: {len} bytes {how} and checked in {t_read:?}, decoded in {:?}",
            path.display(),
            t0.elapsed() - t_read
        );
    }
    if b.num_rows() as u64 != sum.rows {
        return Err(bad(format!(
            "{} rows, the manifest says {}",
            b.num_rows(),
            sum.rows
        )));
    }
    Ok(b)
}

// ---------------------------------------------------------------------------------------------
// The manifest: a small binary encoding (varints, length-prefixed bytes) with a CRC-32C, read in
// one pass. Repeated strings (tag names, metadata, file versions) are stored once; file paths as
// names within their run's directory. A logdir of 100,000 small runs has a manifest of ~20 MB.

#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }
    fn f(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn b(&mut self, v: &[u8]) {
        self.u(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    fn s(&mut self, v: &str) {
        self.b(v.as_bytes());
    }
    fn flag(&mut self, v: bool) {
        self.u(v as u64);
    }
    fn opt_f(&mut self, v: Option<f64>) {
        self.flag(v.is_some());
        if let Some(v) = v {
            self.f(v);
        }
    }
    /// A file of a generation: 0 for none, else 1 + rows, size, checksum.
    fn file_sum(&mut self, f: Option<FileSum>) {
        match f {
            None => self.u(0),
            Some(f) => {
                self.u(f.rows + 1);
                self.u(f.bytes);
                self.u(u64::from(f.crc));
            }
        }
    }
    /// `v` after the bytes it shares with `prev` (sorted names share long prefixes).
    fn prefixed(&mut self, prev: &[u8], v: &[u8]) {
        let shared = prev.iter().zip(v).take_while(|(a, b)| a == b).count();
        self.u(shared as u64);
        self.b(&v[shared..]);
    }
}

struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

type DResult<T> = std::result::Result<T, String>;

impl<'a> Dec<'a> {
    #[inline]
    fn u(&mut self) -> DResult<u64> {
        // A manifest of many runs is millions of varints: with ten bytes left (a varint's
        // most), one bounds check for the whole of it.
        if let Some(w) = self.buf.get(self.pos..self.pos + 10) {
            let mut v = 0u64;
            for (i, &b) in w.iter().enumerate() {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
            return Err("bad varint".into());
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("ends early")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("bad varint".into())
    }
    /// A count or length: never more than the bytes left, so a damaged one cannot make us
    /// allocate much.
    fn n(&mut self) -> DResult<usize> {
        let v = self.u()?;
        if v > (self.buf.len() - self.pos) as u64 {
            return Err("count past the end".into());
        }
        Ok(v as usize)
    }
    fn i(&mut self) -> DResult<i64> {
        let v = self.u()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }
    fn f(&mut self) -> DResult<f64> {
        let b = self.buf.get(self.pos..self.pos + 8).ok_or("ends early")?;
        self.pos += 8;
        Ok(f64::from_le_bytes(b.try_into().unwrap()))
    }
    fn b(&mut self) -> DResult<&'a [u8]> {
        let n = self.n()?;
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }
    /// Length-prefixed bytes as (start, length) in the buffer.
    fn range(&mut self) -> DResult<(u32, u32)> {
        let n = self.n()?;
        let at = self.pos;
        self.pos += n;
        Ok((at as u32, n as u32))
    }
    fn s(&mut self) -> DResult<String> {
        String::from_utf8(self.b()?.to_vec()).map_err(|_| "bad UTF-8".to_string())
    }
    fn flag(&mut self) -> DResult<bool> {
        Ok(self.u()? != 0)
    }
    fn opt_f(&mut self) -> DResult<Option<f64>> {
        Ok(if self.flag()? { Some(self.f()?) } else { None })
    }
    fn file_sum(&mut self) -> DResult<Option<FileSum>> {
        let rows = match self.u()? {
            0 => return Ok(None),
            n => n - 1,
        };
        let bytes = self.u()?;
        let crc = u32::try_from(self.u()?).map_err(|_| "bad checksum".to_string())?;
        Ok(Some(FileSum { rows, bytes, crc }))
    }
    /// Replaces `buf` (the previous value) by the next one, which shares a prefix with it.
    fn prefixed_into(&mut self, buf: &mut Vec<u8>) -> DResult<()> {
        let shared = self.u()? as usize;
        if shared > buf.len() {
            return Err("bad shared prefix".into());
        }
        buf.truncate(shared);
        buf.extend_from_slice(self.b()?);
        Ok(())
    }
    /// An index into a table of `len` entries.
    fn index(&mut self, len: usize) -> DResult<usize> {
        let i = self.u()? as usize;
        if i >= len {
            return Err("index out of range".into());
        }
        Ok(i)
    }
}

fn severity_code(s: Severity) -> u64 {
    match s {
        Severity::Corrupt => 0,
        Severity::Warning => 1,
        Severity::Truncated => 2,
        Severity::Error => 3,
        Severity::Info => 4,
    }
}

fn severity_of(c: u64) -> DResult<Severity> {
    Ok(match c {
        0 => Severity::Corrupt,
        1 => Severity::Warning,
        2 => Severity::Truncated,
        3 => Severity::Error,
        4 => Severity::Info,
        _ => return Err("bad severity".into()),
    })
}

/// Seconds and nanoseconds since the epoch, for times before it too.
fn time_parts(t: SystemTime) -> (i64, u64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, u64::from(d.subsec_nanos())),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, u64::from(d.subsec_nanos()));
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

fn time_of(secs: i64, nanos: u64) -> SystemTime {
    let base = if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    };
    base + Duration::from_nanos(nanos)
}

/// The directory of a run: the root for ".", else the run name below it.
fn run_dir(root: &Path, run: &str) -> PathBuf {
    if run == "." {
        root.to_path_buf()
    } else {
        root.join(run)
    }
}

/// A string table: each distinct string once, referenced by index.
#[derive(Default)]
struct Strings<'a> {
    index: HashMap<&'a str, u64>,
    list: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.index.insert(s, i);
        self.list.push(s);
        i
    }
}

type MetaKey<'a> = (&'a str, &'a [u8], &'a str, &'a str, i32);

fn encode_manifest(
    r: &Reader,
    segments: &[Segment],
    files: &[[Option<FileSum>; 8]],
    pieces: &[Vec<Piece>; 8],
    dirs: &HashMap<PathBuf, DirListing>,
    derived: [Option<FileSum>; 2],
) -> std::result::Result<Vec<u8>, String> {
    let mut e = Enc::default();
    e.0.extend_from_slice(MAGIC);
    e.0.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    e.s(env!("CARGO_PKG_VERSION"));
    let root = fs::canonicalize(&r.root).map_err(|err| format!("{}: {err}", r.root.display()))?;
    e.b(root.as_os_str().as_bytes());
    e.flag(r.opts.file.verify);
    e.u(r.opts.file.max_len);
    e.flag(r.opts.file.provenance);
    e.u(segments.len() as u64);
    for (s, files) in segments.iter().zip(files) {
        e.s(&s.name);
        for f in files {
            e.file_sum(*f);
        }
    }
    // Tables of repeated strings and metadata, then runs referring to them.
    let mut strings = Strings::default();
    let mut metas: HashMap<MetaKey<'_>, u64> = HashMap::new();
    let mut meta_list: Vec<&SeriesMeta> = Vec::new();
    for st in r.runs.values() {
        for (t, ts) in &st.tags {
            strings.id(t);
            if let Some(m) = &ts.meta {
                let key = (
                    m.plugin_name.as_str(),
                    m.plugin_content.as_slice(),
                    m.display_name.as_str(),
                    m.description.as_str(),
                    m.data_class,
                );
                if let std::collections::hash_map::Entry::Vacant(slot) = metas.entry(key) {
                    slot.insert(meta_list.len() as u64);
                    meta_list.push(m);
                }
            }
        }
        for f in st.files.values() {
            for v in [&f.file_version, &f.writer].into_iter().flatten() {
                strings.id(v);
            }
        }
    }
    e.u(strings.list.len() as u64);
    for s in &strings.list {
        e.s(s);
    }
    e.u(meta_list.len() as u64);
    for m in &meta_list {
        e.s(&m.plugin_name);
        e.b(&m.plugin_content);
        e.s(&m.display_name);
        e.s(&m.description);
        e.i(i64::from(m.data_class));
    }
    let root_is_file = r.root.is_file();
    let mut run_index: HashMap<&str, u64> = HashMap::with_capacity(r.runs.len());
    // The runs' names, one length-prefixed section (a warm open that finds nothing changed
    // needs none of them); then the change-check index: per run its files' identities. The
    // state follows as one more section, so that a warm open can leave it undecoded.
    e.u(r.runs.len() as u64);
    let mut names = Enc::default();
    let mut prev: &[u8] = b"";
    for name in r.runs.keys() {
        run_index.insert(name.as_str(), run_index.len() as u64);
        names.prefixed(prev, name.as_bytes());
        prev = name.as_bytes();
    }
    e.b(&names.0);
    for (name, st) in &r.runs {
        let dir = run_dir(&r.root, name);
        e.u(st.files.len() as u64);
        for f in st.files.values() {
            let path = &f.path;
            if root_is_file {
                e.u(2);
            } else if path.parent() == Some(dir.as_path()) {
                e.u(1);
                e.b(path.file_name().unwrap_or_default().as_bytes());
            } else {
                e.u(0);
                e.b(path
                    .strip_prefix(&r.root)
                    .map_err(|_| format!("{} is outside the logdir", path.display()))?
                    .as_os_str()
                    .as_bytes());
            }
            let display = &r.file_names[f.id as usize];
            let usual = *display == rel_name(&r.root, root_is_file, path);
            e.flag(!usual);
            if !usual {
                e.s(display);
            }
            e.u(f.dev);
            e.u(f.ino);
            e.u(f.size);
            e.flag(f.mtime.is_some());
            let (secs, nanos) = f.mtime.map_or((0, 0), time_parts);
            e.i(secs);
            e.u(nanos);
            e.flag(f.failed);
        }
    }
    let mut st_enc = Enc::default();
    for st in r.runs.values() {
        let e = &mut st_enc;
        e.opt_f(st.first_wall);
        e.opt_f(st.last_wall);
        e.flag(st.max_step.is_some());
        e.i(st.max_step.unwrap_or(0));
        e.u(st.corrupt);
        e.u(st.sessions.len() as u64);
        for s in &st.sessions {
            e.i(s.step);
            e.f(s.wall);
            e.i(i64::from(s.status));
            e.u(s.offset);
        }
        for f in st.files.values() {
            e.u(f.cursor.offset);
            e.u(f.records);
            e.u(f.tail);
            for v in [&f.file_version, &f.writer] {
                e.u(v.as_deref().map_or(0, |s| strings.id(s) + 1));
            }
        }
        e.u(st.tag_order.len() as u64);
        for t in &st.tag_order {
            let ts = &st.tags[t];
            e.u(strings.id(t));
            e.u(ts.kind.map_or(0, |k| k as u64 + 1));
            let meta = ts.meta.as_ref().map_or(0, |m| {
                let key = (
                    m.plugin_name.as_str(),
                    m.plugin_content.as_slice(),
                    m.display_name.as_str(),
                    m.description.as_str(),
                    m.data_class,
                );
                metas[&key] + 1
            });
            e.u(meta);
            e.u(ts.points);
            e.i(ts.first_step);
            e.i(ts.last_step);
        }
    }
    e.b(&st_enc.0);
    // Each kind's pieces length-prefixed: decoded when a table of that kind is asked for.
    for kind in pieces {
        let mut k = Enc::default();
        k.u(kind.len() as u64);
        for p in kind {
            k.u(p.seg as u64);
            k.u(p.start as u64);
            k.u(p.len as u64);
            let run = run_index
                .get(&*p.run)
                .ok_or_else(|| format!("rows of run {} without its state", p.run))?;
            k.u(*run);
        }
        e.b(&k.0);
    }
    e.u(r.report.len() as u64);
    for x in &r.report {
        e.s(&x.run);
        e.s(&x.file);
        e.u(severity_code(x.severity));
        e.u(x.offset);
        e.u(x.length);
        e.s(&x.reason);
    }
    // Directories in path order, which is a depth-first walk (a parent, then its subtrees in
    // name order), each with its parent's index and its run's: the change check of a warm
    // open walks them without building a path or looking anything up.
    let mut dir_list: Vec<(&PathBuf, &DirListing)> = dirs.iter().collect();
    dir_list.sort_by(|a, b| a.0.cmp(b.0));
    let dir_index: HashMap<&Path, u64> = dir_list
        .iter()
        .enumerate()
        .map(|(i, (rel, _))| (rel.as_path(), i as u64))
        .collect();
    e.u(dir_list.len() as u64);
    for (rel, d) in dir_list {
        let parent = match rel.parent() {
            None => 0,
            Some(p) => dir_index
                .get(p)
                .map(|i| i + 1)
                .ok_or_else(|| format!("directory {} listed without its parent", rel.display()))?,
        };
        e.u(parent);
        e.b(rel.file_name().map_or(&[][..], |n| n.as_bytes()));
        let run = d
            .has_files
            .then(|| run_index.get(rel_run_name(rel).as_str()));
        e.u(run.flatten().map_or(0, |i| i + 1));
        e.u(d.dev);
        e.u(d.ino);
        e.i(d.mtime.0);
        e.u(d.mtime.1);
        e.flag(d.unsure);
        e.flag(d.has_files);
        for names in [&d.subdirs, &d.odd] {
            e.u(names.len() as u64);
            for n in names {
                e.b(n.as_bytes());
            }
        }
    }
    // The stored facts and statistics tables.
    for f in derived {
        e.file_sum(f);
    }
    let crc = crc32c::crc32c(&e.0);
    e.0.extend_from_slice(&crc.to_le_bytes());
    Ok(e.0)
}

/// The options a cache was written with.
struct Header {
    tbscope: String,
    root: Vec<u8>,
    verify: bool,
    max_len: u64,
    provenance: bool,
}

/// A decoded manifest, with file paths rebuilt below the reader's root.
struct Manifest {
    /// Per segment: its name and (rows, bytes) of its file of each kind.
    segments: Vec<(String, [Option<FileSum>; 8])>,
    nruns: usize,
    /// Where the runs' names lie (decoded by `Pending::names`).
    names: (u32, u32),
    index: RunIndex,
    strings: Vec<Arc<str>>,
    metas: Vec<Arc<SeriesMeta>>,
    /// Where the runs' state section lies in the manifest.
    state: (usize, usize),
    /// Where each kind's pieces lie (decoded by `Pending::pieces`).
    pieces: [(u32, u32); 8],
    report: Vec<ReportEntry>,
    dirs: Vec<DirIndex>,
    /// Rows of the stored facts and statistics tables, when the generation has them.
    derived: [Option<FileSum>; 2],
}

/// The runs' files as the change check needs them: run `i` has `files[start[i]..start[i + 1]]`.
struct RunIndex {
    start: Vec<u32>,
    files: Vec<FileIndex>,
}

/// One event file of a restored run. Names are ranges of the manifest: a warm open of many
/// runs allocates nothing per file.
struct FileIndex {
    /// 2: the logdir is this file; 1: `path` is a name in the run's directory; 0: `path` is
    /// below the root.
    code: u8,
    path: (u32, u32),
    /// Its name in `file` columns when that is not the usual one (`rel_name`).
    display: Option<String>,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: Option<(i64, u64)>,
    failed: bool,
}

/// One directory of a restored generation's listings: a tree in depth-first order.
struct DirIndex {
    /// Index of the parent directory (`u32::MAX` for the root).
    parent: u32,
    name: (u32, u32),
    /// The run whose files it holds (`u32::MAX`: none).
    run: u32,
    dev: u64,
    ino: u64,
    mtime: (i64, u64),
    unsure: bool,
    has_files: bool,
    /// (offset, count) of its subdirectory and odd-entry names, length-prefixed in the manifest.
    subdirs: (u32, u32),
    odd: (u32, u32),
}

/// A restored generation whose runs' state is still encoded (see the module docs).
struct Pending {
    /// The manifest, held ([`hold`]) and checked.
    manifest: Buffer,
    nruns: usize,
    /// The runs' names, until decoded into `Reader::run_names`.
    names: Option<(u32, u32)>,
    /// Each kind's pieces, until decoded into `Cached::pieces`.
    pieces: [Option<(u32, u32)>; 8],
    /// The runs' names as pieces hold them, once needed.
    run_arcs: Option<Vec<Arc<str>>>,
    state: (usize, usize),
    strings: Vec<Arc<str>>,
    metas: Vec<Arc<SeriesMeta>>,
    index: RunIndex,
    dirs: Vec<DirIndex>,
    /// The generation's facts (`Reader::run_facts`, unfiltered) and scalar statistics.
    facts: Option<RecordBatch>,
    stats: Option<RecordBatch>,
}

impl Pending {
    /// The runs' names, in order.
    fn decode_names(&self, (at, n): (u32, u32)) -> DResult<Vec<String>> {
        let mut d = Dec {
            buf: &self.manifest[..(at + n) as usize],
            pos: at as usize,
        };
        let mut names: Vec<String> = Vec::with_capacity(self.nruns);
        let mut prev: Vec<u8> = Vec::new();
        for _ in 0..self.nruns {
            d.prefixed_into(&mut prev)?;
            let name = std::str::from_utf8(&prev).map_err(|_| "bad UTF-8".to_string())?;
            if names.last().is_some_and(|p| p.as_str() >= name) {
                return Err("runs out of order".into());
            }
            names.push(name.to_string());
        }
        if d.pos != d.buf.len() {
            return Err("names section has trailing bytes".into());
        }
        Ok(names)
    }

    /// One kind's pieces, checked against the segments' rows.
    fn decode_pieces(
        &self,
        kind: Kind,
        (at, n): (u32, u32),
        runs: &[Arc<str>],
        segments: &[Segment],
    ) -> DResult<Vec<Piece>> {
        let mut d = Dec {
            buf: &self.manifest[..(at + n) as usize],
            pos: at as usize,
        };
        let count = d.n()?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let seg = d.index(segments.len())?;
            let start = d.u()? as usize;
            let len = d.u()? as usize;
            let run = runs[d.index(runs.len())?].clone();
            let rows = segments[seg].rows(kind);
            if start.checked_add(len).is_none_or(|end| end > rows) {
                return Err("a piece points past its segment".into());
            }
            out.push(Piece {
                seg,
                start,
                len,
                run,
            });
        }
        if d.pos != d.buf.len() {
            return Err("pieces section has trailing bytes".into());
        }
        Ok(out)
    }

    fn run_files(&self, run: usize) -> &[FileIndex] {
        &self.index.files[self.index.start[run] as usize..self.index.start[run + 1] as usize]
    }

    fn bytes(&self, (at, n): (u32, u32)) -> &[u8] {
        &self.manifest[at as usize..(at + n) as usize]
    }

    /// The `n` length-prefixed names at `at`.
    fn names(&self, (at, n): (u32, u32)) -> DResult<Vec<std::ffi::OsString>> {
        let mut d = Dec {
            buf: &self.manifest,
            pos: at as usize,
        };
        (0..n)
            .map(|_| Ok(std::ffi::OsStr::from_bytes(d.b()?).to_os_string()))
            .collect()
    }

    /// The path of a file of run `run` (whose directory is `dir`).
    fn file_path(&self, root: &Path, dir: &Path, f: &FileIndex) -> PathBuf {
        let rel = std::ffi::OsStr::from_bytes(self.bytes(f.path));
        match f.code {
            2 => root.to_path_buf(),
            1 => dir.join(rel),
            _ => root.join(rel),
        }
    }

    /// The directory listings as discovery keeps them, keyed by path below the root.
    fn listings(&self) -> DResult<HashMap<PathBuf, DirListing>> {
        let mut rels: Vec<PathBuf> = Vec::with_capacity(self.dirs.len());
        let mut out = HashMap::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let rel = if d.parent == u32::MAX {
                PathBuf::new()
            } else {
                rels[d.parent as usize].join(std::ffi::OsStr::from_bytes(self.bytes(d.name)))
            };
            let listing = DirListing {
                dev: d.dev,
                ino: d.ino,
                mtime: d.mtime,
                unsure: d.unsure,
                has_files: d.has_files,
                subdirs: self.names(d.subdirs)?,
                odd: self.names(d.odd)?,
            };
            out.insert(rel.clone(), listing);
            rels.push(rel);
        }
        Ok(out)
    }
}

/// Checks magic, checksum and format version; returns the header and where the body starts.
fn decode_header(buf: &[u8]) -> DResult<(Header, Dec<'_>)> {
    if buf.len() < MAGIC.len() + 8 || &buf[..MAGIC.len()] != MAGIC {
        return Err("not a tbscope cache manifest".into());
    }
    let (body, crc) = buf.split_at(buf.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err("checksum mismatch (damaged)".into());
    }
    let version = u32::from_le_bytes(body[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(format!(
            "cache format {version}, this tbscope reads format {FORMAT_VERSION}"
        ));
    }
    let mut d = Dec { buf: body, pos: 12 };
    let h = Header {
        tbscope: d.s()?,
        root: d.b()?.to_vec(),
        verify: d.flag()?,
        max_len: d.u()?,
        provenance: d.flag()?,
    };
    Ok((h, d))
}

fn decode_body(mut d: Dec<'_>) -> DResult<Manifest> {
    if d.buf.len() > u32::MAX as usize {
        return Err("manifest too large".into());
    }
    let nseg = d.n()?;
    let mut segments = Vec::with_capacity(nseg);
    for _ in 0..nseg {
        let name = d.s()?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err("bad segment name".into());
        }
        let mut files = [None; 8];
        for f in files.iter_mut() {
            *f = d.file_sum()?;
        }
        segments.push((name, files));
    }
    let nstr = d.n()?;
    let mut strings: Vec<Arc<str>> = Vec::with_capacity(nstr);
    for _ in 0..nstr {
        strings.push(Arc::from(d.s()?.as_str()));
    }
    let nmeta = d.n()?;
    let mut metas: Vec<Arc<SeriesMeta>> = Vec::with_capacity(nmeta);
    for _ in 0..nmeta {
        metas.push(Arc::new(SeriesMeta {
            plugin_name: d.s()?,
            plugin_content: d.b()?.to_vec(),
            display_name: d.s()?,
            description: d.s()?,
            data_class: d.i()? as i32,
        }));
    }
    let nruns = d.n()?;
    let names = d.range()?;
    let mut index = RunIndex {
        start: Vec::with_capacity(nruns + 1),
        files: Vec::with_capacity(nruns),
    };
    for _ in 0..nruns {
        index.start.push(index.files.len() as u32);
        let nf = d.n()?;
        for _ in 0..nf {
            let code = d.u()?;
            let path = match code {
                2 => (0, 0),
                0 | 1 => d.range()?,
                _ => return Err("bad file path".into()),
            };
            let display = if d.flag()? { Some(d.s()?) } else { None };
            let dev = d.u()?;
            let ino = d.u()?;
            let size = d.u()?;
            let has_mtime = d.flag()?;
            let secs = d.i()?;
            let nanos = d.u()?;
            if nanos >= 1_000_000_000 {
                return Err("bad mtime".into());
            }
            index.files.push(FileIndex {
                code: code as u8,
                path,
                display,
                dev,
                ino,
                size,
                mtime: has_mtime.then_some((secs, nanos)),
                failed: d.flag()?,
            });
        }
    }
    index.start.push(index.files.len() as u32);
    let state_len = d.n()?;
    let state = (d.pos, d.pos + state_len);
    d.pos += state_len;
    let mut pieces = [(0u32, 0u32); 8];
    for kind in pieces.iter_mut() {
        *kind = d.range()?;
    }
    let nrep = d.n()?;
    let mut report = Vec::with_capacity(nrep);
    for _ in 0..nrep {
        report.push(ReportEntry {
            run: d.s()?,
            file: d.s()?,
            severity: severity_of(d.u()?)?,
            offset: d.u()?,
            length: d.u()?,
            reason: d.s()?,
        });
    }
    let ndirs = d.n()?;
    let mut dirs = Vec::with_capacity(ndirs);
    for i in 0..ndirs {
        let parent = match d.u()? {
            0 if i == 0 => u32::MAX,
            p if p > 0 && (p as usize) <= i => p as u32 - 1,
            _ => return Err("bad directory parent".into()),
        };
        let name = d.range()?;
        let run = match d.u()? {
            0 => u32::MAX,
            r if (r as usize) <= nruns => r as u32 - 1,
            _ => return Err("bad directory run".into()),
        };
        let dev = d.u()?;
        let ino = d.u()?;
        let mtime = (d.i()?, d.u()?);
        let unsure = d.flag()?;
        let has_files = d.flag()?;
        let mut lists = [(0u32, 0u32); 2];
        for list in lists.iter_mut() {
            let n = d.n()?;
            *list = (d.pos as u32, n as u32);
            for _ in 0..n {
                d.b()?;
            }
        }
        dirs.push(DirIndex {
            parent,
            name,
            run,
            dev,
            ino,
            mtime,
            unsure,
            has_files,
            subdirs: lists[0],
            odd: lists[1],
        });
    }
    let mut derived = [None; 2];
    for f in derived.iter_mut() {
        *f = d.file_sum()?;
    }
    if d.pos != d.buf.len() {
        return Err("trailing bytes".into());
    }
    Ok(Manifest {
        segments,
        nruns,
        names,
        index,
        strings,
        metas,
        state,
        pieces,
        report,
        dirs,
        derived,
    })
}

/// Decodes the runs' state section of a pending generation: the runs as a load left them,
/// with their file names (file ids in manifest order, as `decode` always numbered them).
fn decode_state(
    p: &Pending,
    run_names: &[String],
    root: &Path,
) -> DResult<(BTreeMap<String, RunState>, Vec<String>)> {
    let root_is_file = root.is_file();
    let mut d = Dec {
        buf: &p.manifest[..p.state.1],
        pos: p.state.0,
    };
    let (strings, metas) = (&p.strings, &p.metas);
    let mut runs = BTreeMap::new();
    let mut file_names = Vec::with_capacity(p.index.files.len());
    for (id, name) in run_names.iter().enumerate() {
        let (a, b) = (p.index.start[id] as usize, p.index.start[id + 1] as usize);
        let index = &p.index.files[a..b];
        let dir = run_dir(root, name);
        let first_wall = d.opt_f()?;
        let last_wall = d.opt_f()?;
        let has_max = d.flag()?;
        let max = d.i()?;
        let corrupt = d.u()?;
        let ns = d.n()?;
        let mut sessions = Vec::with_capacity(ns);
        for _ in 0..ns {
            sessions.push(SessionEvent {
                step: d.i()?,
                wall: d.f()?,
                status: d.i()? as i32,
                offset: d.u()?,
            });
        }
        let mut files = crate::load::FileMap::with_capacity(index.len());
        for f in index {
            let cursor = Cursor { offset: d.u()? };
            let records = d.u()?;
            let tail = d.u()?;
            let mut opt: [Option<Arc<str>>; 2] = [None, None];
            for v in opt.iter_mut() {
                let i = d.index(strings.len() + 1)?;
                if i > 0 {
                    *v = Some(strings[i - 1].clone());
                }
            }
            let [file_version, writer] = opt;
            let fid = file_names.len() as i32;
            let path = p.file_path(root, &dir, f);
            file_names.push(
                f.display
                    .clone()
                    .unwrap_or_else(|| rel_name(root, root_is_file, &path)),
            );
            files.insert(FileState {
                path,
                id: fid,
                cursor,
                size: f.size,
                mtime: f.mtime.map(|(s, n)| time_of(s, n)),
                dev: f.dev,
                ino: f.ino,
                records,
                tail,
                file_version,
                writer,
                failed: f.failed,
            });
        }
        let nt = d.n()?;
        let mut tags = HashMap::with_capacity(nt);
        let mut tag_order = Vec::with_capacity(nt);
        for _ in 0..nt {
            let t = strings[d.index(strings.len())?].clone();
            let kind = match d.u()? {
                0 => None,
                k => Some(*Kind::ALL.get(k as usize - 1).ok_or("bad kind")?),
            };
            let meta = match d.index(metas.len() + 1)? {
                0 => None,
                i => Some(metas[i - 1].clone()),
            };
            let ts = TagState {
                kind,
                meta,
                points: d.u()?,
                first_step: d.i()?,
                last_step: d.i()?,
            };
            tags.insert(t.clone(), ts);
            tag_order.push(t);
        }
        let state = RunState {
            id: id as i32,
            files,
            tags,
            tag_order,
            first_wall,
            last_wall,
            max_step: has_max.then_some(max),
            sessions,
            corrupt,
        };
        runs.insert(name.clone(), state);
    }
    if d.pos != p.state.1 {
        return Err("state section has trailing bytes".into());
    }
    Ok((runs, file_names))
}

// ---------------------------------------------------------------------------------------------
// Discovery that lists only directories that changed

/// What a directory held when it was last listed. A directory's mtime moves whenever an entry
/// is added, removed or renamed in it, so while (device, inode, mtime) stay the same its listing
/// does too and only a stat is needed; the event files themselves are still stat'ed every time
/// (appending to a file does not touch its directory).
#[derive(Debug, Clone)]
pub(crate) struct DirListing {
    dev: u64,
    ino: u64,
    mtime: (i64, u64),
    /// Listed within a few seconds of its last change (a change in the same clock tick would
    /// not move the mtime), or holding symlinks (their targets change without the directory
    /// knowing): list it again next time.
    unsure: bool,
    /// It holds event files: the files of the run named after it, as the reader has them.
    has_files: bool,
    subdirs: Vec<std::ffi::OsString>,
    /// Entries named like event files that are not regular files (reported, not read).
    odd: Vec<std::ffi::OsString>,
}

/// A directory listed this long after its mtime is taken as settled.
const SETTLED: Duration = Duration::from_secs(2);
const ODD: &str = "named like an event file but not a regular file; skipped";

type Discovery = (
    crate::logdir::Discovered,
    Vec<(PathBuf, std::io::Error)>,
    HashMap<PathBuf, DirListing>,
);

/// TensorBoard's run discovery (as `logdir::discover`, unfiltered), reusing the listings of
/// directories that did not change since `prev` was taken.
fn discover_with(
    r: &Reader,
    prev: &HashMap<PathBuf, DirListing>,
    pool: Option<&rayon::ThreadPool>,
) -> std::io::Result<Discovery> {
    let root = &r.root;
    if fs::metadata(root)?.is_file() {
        let (found, errors) = discover(root, None)?;
        return Ok((found, errors, HashMap::new()));
    }
    // Every known directory's stat up front, in parallel: most of them will only need that.
    let known: Vec<&PathBuf> = prev.keys().collect();
    let stat = |rel: &&PathBuf| ((*rel).clone(), fs::metadata(root.join(rel)));
    let stats: HashMap<PathBuf, std::io::Result<fs::Metadata>> = match pool {
        Some(p) => {
            use rayon::prelude::*;
            p.install(|| known.par_iter().with_min_len(256).map(stat).collect())
        }
        None => known.iter().map(stat).collect(),
    };
    let mut w = Walk {
        root,
        prev,
        stats,
        runs: &r.runs,
        found: Default::default(),
        errors: Vec::new(),
        next: HashMap::with_capacity(prev.len()),
        seen: HashSet::new(),
    };
    w.walk(PathBuf::new());
    Ok((w.found, w.errors, w.next))
}

struct Walk<'a> {
    root: &'a Path,
    prev: &'a HashMap<PathBuf, DirListing>,
    stats: HashMap<PathBuf, std::io::Result<fs::Metadata>>,
    runs: &'a std::collections::BTreeMap<String, RunState>,
    found: crate::logdir::Discovered,
    errors: Vec<(PathBuf, std::io::Error)>,
    next: HashMap<PathBuf, DirListing>,
    seen: HashSet<(u64, u64)>,
}

impl Walk<'_> {
    fn walk(&mut self, rel: PathBuf) {
        let dir = if rel.as_os_str().is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(&rel)
        };
        // Symlinks are followed (as TensorBoard does); a directory seen twice is a cycle.
        let meta = match self.stats.remove(&rel) {
            Some(m) => m,
            None => fs::metadata(&dir),
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                self.errors.push((dir, e));
                return;
            }
        };
        if !self.seen.insert((meta.dev(), meta.ino())) {
            return;
        }
        let mtime = meta.modified().map_or((0, 0), time_parts);
        let name = rel_run_name(&rel);
        let same = self.prev.get(&rel).filter(|l| {
            !l.unsure
                && (l.dev, l.ino, l.mtime) == (meta.dev(), meta.ino(), mtime)
                && (!l.has_files || self.runs.get(&name).is_some_and(|s| !s.files.is_empty()))
        });
        let (listing, files) = match same {
            Some(l) => {
                let files: Vec<PathBuf> = if l.has_files {
                    self.runs[&name].files.keys().cloned().collect()
                } else {
                    Vec::new()
                };
                (l.clone(), files)
            }
            None => match self.list(&dir, &meta, mtime) {
                Some(x) => x,
                None => return,
            },
        };
        for odd in &listing.odd {
            self.errors
                .push((dir.join(odd), std::io::Error::other(ODD)));
        }
        if !files.is_empty() {
            self.found.insert(name, files);
        }
        let subs: Vec<PathBuf> = listing.subdirs.iter().map(|s| rel.join(s)).collect();
        self.next.insert(rel, listing);
        for sub in subs {
            self.walk(sub);
        }
    }

    /// Lists `dir` as `logdir::walk` does; None when it cannot be listed (reported).
    fn list(
        &mut self,
        dir: &Path,
        meta: &fs::Metadata,
        mtime: (i64, u64),
    ) -> Option<(DirListing, Vec<PathBuf>)> {
        let listed_at = SystemTime::now();
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.errors.push((dir.to_path_buf(), e));
                return None;
            }
        };
        let mut files = Vec::new();
        let mut subdirs = Vec::new();
        let mut odd = Vec::new();
        let mut links = false;
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            links |= ft.is_symlink();
            let is_dir = ft.is_dir() || (ft.is_symlink() && path.is_dir());
            if is_dir {
                subdirs.push(entry.file_name());
            } else if crate::logdir::is_event_file_name(&entry.file_name().to_string_lossy()) {
                // Only regular files (or links to them); a dangling link is kept: reading it
                // fails and is reported against the file.
                let dangling = ft.is_symlink() && fs::metadata(&path).is_err();
                if ft.is_file() || path.is_file() || dangling {
                    files.push(path);
                } else {
                    odd.push(entry.file_name());
                }
            }
        }
        files.sort();
        subdirs.sort();
        odd.sort();
        let settled = meta
            .modified()
            .ok()
            .and_then(|m| listed_at.duration_since(m).ok())
            .is_some_and(|age| age >= SETTLED);
        let listing = DirListing {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime,
            unsure: links || !settled,
            has_files: !files.is_empty(),
            subdirs,
            odd,
        };
        Some((listing, files))
    }
}

/// A run's name from its directory below the root ("." for the root), as `logdir` names it.
fn rel_run_name(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        return ".".into();
    }
    // Built by joining names: already in normal form.
    if let Some(s) = rel.to_str() {
        return s.to_string();
    }
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Stats the discovered event files, in parallel when a pool is given.
fn stat_found_with(found: crate::logdir::Discovered, pool: Option<&rayon::ThreadPool>) -> Found {
    let Some(p) = pool else {
        return stat_found(found);
    };
    use rayon::prelude::*;
    let flat: Vec<&PathBuf> = found.values().flatten().collect();
    let mut metas = p
        .install(|| {
            flat.par_iter()
                .with_min_len(256)
                .map(|f| fs::metadata(f).ok())
                .collect::<Vec<_>>()
        })
        .into_iter();
    found
        .into_iter()
        .map(|(run, files)| {
            let files = files
                .into_iter()
                .map(|f| (f, metas.next().expect("one stat per file")))
                .collect();
            (run, files)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes that are not all alike, with its checksum.
    fn pattern_file(name: &str, len: usize) -> (PathBuf, Vec<u8>, FileSum) {
        let path =
            std::env::temp_dir().join(format!("tbscope-lease-{name}-{}", std::process::id()));
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        fs::write(&path, &bytes).unwrap();
        let sum = FileSum {
            rows: 0,
            bytes: len as u64,
            crc: crc32c::crc32c(&bytes),
        };
        (path, bytes, sum)
    }

    /// The kernel grants this process leases on its own files in the temporary directory
    /// (not every filesystem has leases; where it has none, files are read and this is moot).
    fn leases_here(path: &Path) -> bool {
        lease::map(File::open(path).unwrap(), 1).is_ok()
    }

    /// A mapped cache file truncated, or rewritten in place, by someone else keeps its bytes in
    /// the buffers pointing into it: the lease holds the other side back until the watcher has
    /// put a private copy in the mapping's place. (Before leases, touching the buffer after the
    /// truncation killed the process with SIGBUS.)
    #[test]
    fn a_mapped_file_changed_under_us_keeps_its_bytes() {
        for change in ["truncate", "open_truncate", "write_in_place"] {
            let (path, want, sum) = pattern_file(change, 3 << 20);
            if !leases_here(&path) {
                eprintln!("no leases on {}: skipped", path.display());
                return;
            }
            let Ok((buf, how)) = read_checked(File::open(&path).unwrap(), &path, sum, 2, 0) else {
                panic!("{change}: not taken");
            };
            assert_eq!(how, "mapped");
            let other = {
                let path = path.clone();
                std::thread::spawn(move || match change {
                    "truncate" => fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_len(0)
                        .unwrap(),
                    "open_truncate" => {
                        File::create(&path).unwrap();
                    }
                    _ => {
                        use std::os::unix::fs::FileExt;
                        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
                        f.write_all_at(b"changed", 1000).unwrap();
                    }
                })
            };
            other.join().unwrap();
            assert!(
                fs::metadata(&path).unwrap().len() < want.len() as u64
                    || change == "write_in_place"
            );
            assert!(
                buf.as_slice() == want.as_slice(),
                "{change}: the mapped bytes changed"
            );
            drop(buf);
            fs::remove_file(&path).unwrap();
        }
    }

    /// A file truncated before it is held is damaged, not a crash; one whose bytes differ from
    /// the manifest's checksum too.
    #[test]
    fn short_or_changed_files_are_damaged() {
        let (path, _, sum) = pattern_file("damaged", 2 << 20);
        for map_at in [0, u64::MAX] {
            let short = FileSum {
                bytes: sum.bytes + 1,
                ..sum
            };
            let other = FileSum {
                crc: sum.crc ^ 1,
                ..sum
            };
            for s in [short, other] {
                match read_checked(File::open(&path).unwrap(), &path, s, 2, map_at) {
                    Err(RestoreError::Bad(why)) => assert!(why.contains("damaged"), "{why}"),
                    _ => panic!("a damaged file was taken"),
                }
            }
            assert!(read_checked(File::open(&path).unwrap(), &path, sum, 2, map_at).is_ok());
        }
        fs::remove_file(&path).unwrap();
    }
}
