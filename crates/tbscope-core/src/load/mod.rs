//! Loading a logdir: discovery, parallel per-file parsing, merging in TensorBoard's order, and
//! reloading only the bytes written since.
//!
//! Files are parsed in parallel into per-file chunks with file-local tag ids; merging walks runs
//! in name order and files in name order, so rows come out in (run, file, record) order and the
//! first metadata of a tag in that order decides its kind, as in TensorBoard.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use rayon::prelude::*;
use regex::Regex;

use crate::columns::{
    binary_array, finish_placed, populate, string_array, to_batch, Dicts, FileRows, PlacedScalars,
    Scalars, Tables,
};
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::event_file::{
    read_file_into, split_points, Cursor, FileChunk, Known, Options, SeriesMeta, SessionEvent,
    Severity, Until, STOPPED_TAIL,
};
use crate::logdir::discover;

/// A piece of a file to parse: run, path, where to start, where to stop.
type Segment = (String, PathBuf, Cursor, Until);

/// What to do with steps a restarted job wrote again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restarts {
    /// Keep every record, in file order (lossless).
    All,
    /// TensorBoard's current rule: a record at step s removes earlier records of its series
    /// with step >= s.
    Preempt,
}

#[derive(Debug, Clone)]
pub struct ReaderOptions {
    pub file: Options,
    pub runs: Option<Regex>,
    pub restarts: Restarts,
    /// Worker threads; 0 means `TBSCOPE_NUM_THREADS` or the number of CPUs.
    pub threads: usize,
    /// Lower step bound applied after preemption (preemption must see earlier steps).
    pub step_lo: Option<i64>,
    /// How long after its last growth the newest event file of a run may still be written
    /// (see [`may_grow`]); zero reads every file as final.
    pub tail_timeout: std::time::Duration,
}

/// The default `tail_timeout`.
pub const TAIL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            file: Options::default(),
            runs: None,
            restarts: Restarts::All,
            threads: 0,
            step_lo: None,
            tail_timeout: TAIL_TIMEOUT,
        }
    }
}

impl ReaderOptions {
    /// Sets the step range `[lo, hi)`. Without preemption both bounds go to the file parser,
    /// which skips records outside them; with it, the lower bound is applied after
    /// preemption, which must see the steps below it (a restart at step 50 drops earlier
    /// records at steps >= 50 even when only steps >= 80 are asked for).
    pub fn with_steps(mut self, lo: Option<i64>, hi: Option<i64>) -> Self {
        let preempt = self.restarts == Restarts::Preempt;
        self.file.step_lo = if preempt { None } else { lo };
        self.file.step_hi = hi;
        self.step_lo = if preempt { lo } else { None };
        self
    }
}

/// One line of the health report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportEntry {
    pub run: String,
    pub file: String,
    pub severity: Severity,
    pub offset: u64,
    pub length: u64,
    pub reason: String,
}

// The state below is what a reload continues from; the cache (`cache`) saves and restores it.
#[derive(Debug, Clone)]
pub(crate) struct FileState {
    pub(crate) path: PathBuf,
    pub(crate) id: i32,
    pub(crate) cursor: Cursor,
    pub(crate) size: u64,
    pub(crate) mtime: Option<std::time::SystemTime>,
    /// Device and inode when last planned: a file replaced under the same name gets a new one.
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) records: u64,
    pub(crate) tail: u64,
    /// The tail was left pending (the file may still be written): the plan reads the file
    /// again once it is final, even if it has not changed.
    pub(crate) pending: bool,
    /// Shared, like tag names: every file of a logdir usually has the same ones.
    pub(crate) file_version: Option<Arc<str>>,
    pub(crate) writer: Option<Arc<str>>,
    /// The last read could not open or read it; try again next time.
    pub(crate) failed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct TagState {
    pub(crate) kind: Option<Kind>,
    /// Shared: a restored cache holds one copy per distinct metadata, not one per series.
    pub(crate) meta: Option<Arc<SeriesMeta>>,
    pub(crate) points: u64,
    pub(crate) first_step: i64,
    pub(crate) last_step: i64,
}

/// A run's files in path order (read order). Runs hold a few files, so a sorted vector serves
/// better than a tree: a B-tree node takes ~2 KB however few entries it holds, which a logdir of
/// 100,000 runs restored from the cache pays in page faults.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileMap(Vec<FileState>);

impl FileMap {
    pub(crate) fn with_capacity(n: usize) -> FileMap {
        FileMap(Vec::with_capacity(n))
    }
    fn find(&self, p: &Path) -> std::result::Result<usize, usize> {
        self.0.binary_search_by(|f| f.path.as_path().cmp(p))
    }
    pub(crate) fn get(&self, p: &Path) -> Option<&FileState> {
        self.find(p).ok().map(|i| &self.0[i])
    }
    pub(crate) fn get_mut(&mut self, p: &Path) -> Option<&mut FileState> {
        self.find(p).ok().map(|i| &mut self.0[i])
    }
    /// Adds (or replaces) the file at `f.path`; in-order insertion, the usual case, appends.
    pub(crate) fn insert(&mut self, f: FileState) {
        if self.0.last().is_none_or(|l| l.path < f.path) {
            self.0.push(f);
            return;
        }
        match self.find(&f.path) {
            Ok(i) => self.0[i] = f,
            Err(i) => self.0.insert(i, f),
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn values(&self) -> std::slice::Iter<'_, FileState> {
        self.0.iter()
    }
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = &PathBuf> {
        self.0.iter().map(|f| &f.path)
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct RunState {
    pub(crate) id: i32,
    pub(crate) files: FileMap,
    /// Tag names are shared between runs (and with `tag_order`) for the same reason.
    pub(crate) tags: HashMap<Arc<str>, TagState>,
    pub(crate) tag_order: Vec<Arc<str>>,
    pub(crate) first_wall: Option<f64>,
    pub(crate) last_wall: Option<f64>,
    pub(crate) max_step: Option<i64>,
    pub(crate) sessions: Vec<SessionEvent>,
    pub(crate) corrupt: u64,
}

/// Discovered runs with each event file's metadata (None: it could not be stat'ed).
pub(crate) type Found = Vec<(String, Vec<(PathBuf, Option<std::fs::Metadata>)>)>;

/// What one load or reload did.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadStats {
    pub files_read: usize,
    pub bytes_read: u64,
    pub records: u64,
    pub rows: usize,
    /// Bytes fed to CRC-32C by the framing (records' CRCs and resynchronisation).
    pub crc_bytes: u64,
}

/// A logdir being read, with everything read so far.
/// Per run: its (max step, per-kind point counts) row in the runs table, or `None` to leave the
/// run out, as `Reader::runs_table_with` takes it.
pub(crate) type RunFacts<'a> = &'a dyn Fn(&str, &RunState) -> Option<(Option<i64>, [i64; 8])>;

pub struct Reader {
    pub(crate) root: PathBuf,
    pub(crate) opts: ReaderOptions,
    pub(crate) runs: BTreeMap<String, RunState>,
    pub(crate) run_names: Vec<String>,
    pub(crate) tag_names: Vec<String>,
    pub(crate) tag_index: HashMap<String, i32>,
    pub(crate) file_names: Vec<String>,
    pub(crate) plugin_names: Vec<String>,
    pub(crate) plugin_index: HashMap<String, i32>,
    pub(crate) batches: [Vec<RecordBatch>; 8],
    pub(crate) report: Vec<ReportEntry>,
}

pub(crate) fn intern(names: &mut Vec<String>, index: &mut HashMap<String, i32>, s: &str) -> i32 {
    if let Some(&i) = index.get(s) {
        return i;
    }
    let i = names.len() as i32;
    names.push(s.to_string());
    index.insert(s.to_string(), i);
    i
}

/// A file's name in `file`/`blob_file` columns: its path below the logdir with `/`, or its
/// file name when the logdir is one file.
pub(crate) fn rel_name(root: &Path, root_is_file: bool, path: &Path) -> String {
    if root_is_file {
        return path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    }
    path.strip_prefix(root).map_or_else(
        |_| path.to_string_lossy().into_owned(),
        |p| {
            // Paths built by joining names (all of ours) are already in normal form.
            if let Some(s) = p.to_str() {
                if !s.contains("//") && !s.contains("./") && !s.ends_with('/') {
                    return s.to_string();
                }
            }
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        },
    )
}

/// Stats every discovered event file once (links followed, as reading does).
pub(crate) fn stat_found(found: crate::logdir::Discovered) -> Found {
    found
        .into_iter()
        .map(|(run, files)| {
            let files = files
                .into_iter()
                .map(|p| {
                    let m = std::fs::metadata(&p).ok();
                    (p, m)
                })
                .collect();
            (run, files)
        })
        .collect()
}

/// Most worker threads a read uses, whatever is asked: a pool is made per call, and asking for
/// a million threads (a typo, or a value from elsewhere) made that call spend minutes
/// starting them.
pub const MAX_THREADS: usize = 1024;

/// The number of worker threads for `requested` (0 = automatic), at most [`MAX_THREADS`].
pub fn thread_count(requested: usize) -> usize {
    if requested > 0 {
        return requested.min(MAX_THREADS);
    }
    if let Some(n) = std::env::var("TBSCOPE_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        if n > 0 {
            return n.min(MAX_THREADS);
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Reader {
    /// Prepares to read `root` (a logdir or one event file); fails if it does not exist.
    pub fn new(root: &Path, opts: ReaderOptions) -> Result<Reader> {
        std::fs::metadata(root).map_err(|e| Error::io(e, root))?;
        Ok(Reader {
            root: root.to_path_buf(),
            opts,
            runs: BTreeMap::new(),
            run_names: Vec::new(),
            tag_names: Vec::new(),
            tag_index: HashMap::new(),
            file_names: Vec::new(),
            plugin_names: Vec::new(),
            plugin_index: HashMap::new(),
            batches: Default::default(),
            report: Vec::new(),
        })
    }

    pub(crate) fn rel(&self, path: &Path) -> String {
        rel_name(&self.root, self.root.is_file(), path)
    }

    /// Reads everything new since the last call (everything, the first time) and keeps it.
    pub fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        let work = self.plan()?;
        let (stats, batches) = self.read(work, cancel)?;
        for (kind, b) in batches {
            self.batches[kind as usize].push(b);
        }
        Ok(stats)
    }

    /// The files with bytes to read, each with where to start: discovery plus change checks.
    /// With [`Reader::read`] on pieces of it, a logdir can be streamed in bounded memory.
    pub fn plan(&mut self) -> Result<Vec<(String, PathBuf, Cursor)>> {
        let (found, errors) =
            discover(&self.root, self.opts.runs.as_ref()).map_err(|e| Error::io(e, &self.root))?;
        self.plan_found(stat_found(found), errors)
    }

    /// [`Reader::plan`] cut into pieces of about `max_bytes` of event file bytes still to read
    /// (a piece holds at least one file), in plan order: [`Reader::read`] on each in turn
    /// streams a logdir in bounded memory.
    pub fn plan_pieces(&mut self, max_bytes: u64) -> Result<Vec<Vec<(String, PathBuf, Cursor)>>> {
        let mut pieces = Vec::new();
        let mut piece = Vec::new();
        let mut bytes = 0u64;
        for item in self.plan()? {
            let left = std::fs::metadata(&item.1)
                .map_or(0, |m| m.len())
                .saturating_sub(item.2.offset);
            if !piece.is_empty() && bytes.saturating_add(left) > max_bytes {
                pieces.push(std::mem::take(&mut piece));
                bytes = 0;
            }
            bytes = bytes.saturating_add(left);
            piece.push(item);
        }
        if !piece.is_empty() {
            pieces.push(piece);
        }
        Ok(pieces)
    }

    /// [`Reader::plan`] on runs already discovered and stat'ed (`found` possibly holding only
    /// those that may have changed).
    pub(crate) fn plan_found(
        &mut self,
        found: Found,
        errors: Vec<(PathBuf, std::io::Error)>,
    ) -> Result<Vec<(String, PathBuf, Cursor)>> {
        for (path, e) in errors {
            let rel = self.rel(&path);
            let (run, file, severity, reason) = if path.is_dir() {
                (
                    rel,
                    String::new(),
                    Severity::Error,
                    format!("cannot list directory: {e}"),
                )
            } else {
                (String::new(), rel, Severity::Warning, e.to_string())
            };
            let entry = ReportEntry {
                run,
                file,
                severity,
                offset: 0,
                length: 0,
                reason,
            };
            // Reloads find the same problem again; report it once.
            if !self.report.contains(&entry) {
                self.report.push(entry);
            }
        }
        // (A logdir without runs is not a problem found in it: `report_entries` says so while
        // it lasts.)
        // Which files changed: new ones, ones whose size or mtime moved, and ones left with a
        // pending tail that are final now.
        let mut work: Vec<(String, PathBuf, Cursor)> = Vec::new();
        let mut root_is_file: Option<bool> = None;
        let now = std::time::SystemTime::now();
        for (run, files) in &found {
            // This run's files to read, in order; `true`: only if no longer pending.
            let mut todo: Vec<(&PathBuf, Cursor, bool)> = Vec::new();
            if !self.runs.contains_key(run) {
                let id = self.run_names.len() as i32;
                self.run_names.push(run.clone());
                self.runs.insert(
                    run.clone(),
                    RunState {
                        id,
                        ..Default::default()
                    },
                );
            }
            for (path, meta) in files {
                use std::os::unix::fs::MetadataExt;
                let size = meta.as_ref().map_or(0, |m| m.len());
                let mtime = meta.as_ref().and_then(|m| m.modified().ok());
                let (dev, ino) = meta.as_ref().map_or((0, 0), |m| (m.dev(), m.ino()));
                let state = self.runs.get_mut(run).unwrap();
                match state.files.get(path) {
                    Some(f) if !f.failed && f.size == size && f.mtime == mtime => {
                        if f.pending {
                            todo.push((path, f.cursor, true));
                        }
                        continue;
                    }
                    Some(f) => todo.push((path, f.cursor, false)),
                    None => {
                        // Named only when new: a logdir of many runs re-planned through the
                        // cache would otherwise pay a stat (root.is_file) per known file.
                        let rel = rel_name(
                            &self.root,
                            *root_is_file.get_or_insert_with(|| self.root.is_file()),
                            path,
                        );
                        let id = self.file_names.len() as i32;
                        self.file_names.push(rel);
                        state.files.insert(FileState {
                            path: path.clone(),
                            id,
                            cursor: Cursor::default(),
                            size: 0,
                            mtime: None,
                            dev,
                            ino,
                            records: 0,
                            tail: 0,
                            pending: false,
                            file_version: None,
                            writer: None,
                            failed: false,
                        });
                        todo.push((path, Cursor::default(), false));
                    }
                }
                let f = state.files.get_mut(path).unwrap();
                f.mtime = mtime;
                f.dev = dev;
                f.ino = ino;
            }
            let live = if todo.iter().any(|t| t.2) {
                self.live_files(run, now)
            } else {
                Vec::new()
            };
            for (path, cursor, if_final) in todo {
                if !if_final || !live.iter().any(|(p, l)| *p == path && *l) {
                    work.push((run.clone(), path.clone(), cursor));
                }
            }
        }
        Ok(work)
    }

    /// Which of `run`'s files may still be written ([`may_grow`]), as of `now`.
    fn live_files(&self, run: &str, now: std::time::SystemTime) -> Vec<(&PathBuf, bool)> {
        let Some(state) = self.runs.get(run) else {
            return Vec::new();
        };
        let files: Vec<(&Path, Option<std::time::SystemTime>)> = state
            .files
            .values()
            .map(|f| (f.path.as_path(), f.mtime))
            .collect();
        let live = may_grow(&files, now, self.opts.tail_timeout);
        state.files.keys().zip(live).collect()
    }

    /// Reads `work` (from [`Reader::plan`]) and returns its rows as batches per kind, without
    /// keeping them. File offsets and series state advance as in a load.
    pub fn read(
        &mut self,
        work: Vec<(String, PathBuf, Cursor)>,
        cancel: &AtomicBool,
    ) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        // What each run already knows about its tags, so later files resolve at once.
        let known: HashMap<String, HashMap<String, Known>> = work
            .iter()
            .map(|(run, _, _)| run.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|run| {
                let k = self.runs[&run]
                    .tags
                    .iter()
                    .filter_map(|(t, s)| s.kind.map(|kind| (t.to_string(), Known { kind })))
                    .collect();
                (run, k)
            })
            .collect();
        let t0 = std::time::Instant::now();
        let threads = thread_count(self.opts.threads);
        // A pool per load: nothing outlives the call, so fork() in between is safe.
        let pool = if threads <= 1 || work.len() <= 1 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("tbscope-{i}"))
                    .build()
                    .map_err(|e| Error::Other(format!("cannot start worker threads: {e}")))?,
            )
        };
        // Whether each file may still be written decides what a record running past its end is.
        let now = std::time::SystemTime::now();
        let mut live: HashMap<&str, Vec<(&PathBuf, bool)>> = HashMap::new();
        let untils: Vec<Until> = work
            .iter()
            .map(|(run, path, _)| {
                let files = live
                    .entry(run.as_str())
                    .or_insert_with(|| self.live_files(run, now));
                match files.iter().find(|(p, _)| *p == path) {
                    Some((_, false)) => Until::Final,
                    _ => Until::Live,
                }
            })
            .collect();
        drop(live);
        let work: Vec<(String, PathBuf, Cursor, Until)> = work
            .into_iter()
            .zip(untils)
            .map(|((r, p, c), u)| (r, p, c, u))
            .collect();
        // Large files are cut at record boundaries so several threads can share them.
        let last_until: HashMap<PathBuf, Until> = work.iter().map(|w| (w.1.clone(), w.3)).collect();
        let work = self.split_large(work, threads, pool.as_ref());
        let mut groups = self.parse_groups(&work, threads, pool.as_ref(), &known, cancel);
        // Two rare cases need a second pass over the work, with what the first one learnt:
        // values of undecided kind (tensors before any metadata) are filed once every file of
        // their run has had its say, a tag no file decides being a tensor; and a file whose
        // split was not clean (damage near a cut) is read in one piece.
        let chunks = || groups.iter().flat_map(|(_, cs)| cs.iter());
        let deferred = chunks().any(|c| c.deferred > 0);
        let dirty: std::collections::HashSet<PathBuf> = work
            .iter()
            .zip(chunks())
            .filter(|((_, _, _, end), c)| matches!(end, Until::Cut(_)) && !c.clean_end)
            .map(|(seg, _)| seg.1.clone())
            .collect();
        let work = if deferred || !dirty.is_empty() {
            let mut known2 = known.clone();
            for ((run, _, _, _), c) in work.iter().zip(chunks()) {
                let k = known2.get_mut(run).unwrap();
                for t in &c.tags {
                    if let Some(kind) = t.kind {
                        k.entry(t.name.clone()).or_insert(Known { kind });
                    }
                }
            }
            for ((run, _, _, _), c) in work.iter().zip(chunks()) {
                let k = known2.get_mut(run).unwrap();
                for t in &c.tags {
                    k.entry(t.name.clone()).or_insert(Known {
                        kind: Kind::Tensors,
                    });
                }
            }
            let mut redo: Vec<Segment> = Vec::new();
            for seg in work {
                if !dirty.contains(&seg.1) {
                    redo.push(seg);
                } else if !redo.iter().any(|s| s.1 == seg.1) {
                    // The first segment of a file starts where its read starts.
                    let until = last_until[&seg.1];
                    redo.push((seg.0, seg.1, seg.2, until));
                }
            }
            groups = self.parse_groups(&redo, threads, pool.as_ref(), &known2, cancel);
            redo
        } else {
            work
        };
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        let parsed = t0.elapsed();
        let (stats, mut groups) = self.merge(work, groups);
        let merged = t0.elapsed();
        // One batch per kind: pandas would otherwise concatenate (and unify dictionaries) again.
        // On the pool, so that finishing rows, copying and Arrow conversion use every worker.
        let provenance = self.opts.file.provenance;
        let appended;
        let batches = {
            let finish = || {
                // Each worker's rows get their logdir-wide tag ids and run/file columns, the
                // workers' tables side by side.
                let fix = |(t, jobs): &mut (Tables, Vec<Finish>)| {
                    for j in jobs.iter() {
                        t.finish_rows(&j.rows, &j.tag_map, j.run, j.file, provenance);
                    }
                    // A pair's shared scalar columns: every file at once, side by side.
                    if let Some(p) = t.scalars.placed.as_mut() {
                        let js: Vec<FileRows> = jobs
                            .iter()
                            .map(|j| FileRows {
                                rows: j.rows[0],
                                tag_map: &j.tag_map,
                                run: j.run,
                                file: j.file,
                            })
                            .collect();
                        finish_placed(p, &js, provenance);
                    }
                };
                if rayon::current_thread_index().is_some() {
                    groups.par_iter_mut().for_each(fix);
                } else {
                    groups.iter_mut().for_each(fix);
                }
                let mut tables = groups.into_iter().map(|(t, _)| t);
                let mut all = tables.next().unwrap_or_default();
                for t in tables {
                    all.append(t);
                }
                let appended = t0.elapsed();
                (appended, self.take_batches(all))
            };
            let (a, b) = match &pool {
                Some(p) => p.install(finish),
                None => finish(),
            };
            appended = a;
            b
        };
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope: parse {parsed:?}, merge {:?}, append {:?}, arrow {:?}, crc {} bytes",
                merged - parsed,
                appended - merged,
                t0.elapsed() - appended,
                stats.crc_bytes
            );
        }
        Ok((stats, batches))
    }

    /// Parses segments on `threads` workers, each taking a contiguous run of them (balanced by
    /// bytes), so rows come out in file order. Workers in pairs share their scalar columns
    /// (see [`place`]); one pair's result per group, an unpaired worker's tables of its own.
    fn parse_groups(
        &self,
        work: &[Segment],
        threads: usize,
        pool: Option<&rayon::ThreadPool>,
        known: &HashMap<String, HashMap<String, Known>>,
        cancel: &AtomicBool,
    ) -> Vec<(Tables, Vec<FileChunk>)> {
        let opts = &self.opts.file;
        let bytes: Vec<u64> = work
            .iter()
            .map(|(_, path, cursor, end)| {
                match end {
                    Until::Cut(c) => *c,
                    Until::Live | Until::Final => std::fs::metadata(path).map_or(0, |m| m.len()),
                }
                .saturating_sub(cursor.offset)
            })
            .collect();
        let total: u64 = bytes.iter().sum();
        let n = threads.clamp(1, work.len().max(1));
        let mut ranges = Vec::with_capacity(n);
        let (mut start, mut acc) = (0usize, 0u64);
        for (i, b) in bytes.iter().enumerate() {
            acc += b;
            if ranges.len() + 1 < n && acc * n as u64 >= total * (ranges.len() as u64 + 1) {
                ranges.push((start, i + 1, acc));
                start = i + 1;
                acc = 0;
            }
        }
        ranges.push((start, work.len(), acc));
        // One segment may hold several shares of the bytes: fewer groups than threads then.
        let n = ranges.len();
        let one = |&(a, b, group_bytes): &(usize, usize, u64)| {
            let mut tables = Tables::default();
            if opts.kinds.contains(Kind::Scalars) {
                // Room for the smallest possible scalar records: the columns never reallocate,
                // and capacity never touched costs address space, not memory. The first group
                // gets room for all, since the others are appended to it.
                let rows = ((if a == 0 { total } else { group_bytes }) / 40) as usize;
                tables.scalars.c.reserve_chunk(rows, opts.provenance);
                crate::columns::reserve(&mut tables.scalars.value, rows);
            }
            let chunks: Vec<FileChunk> = work[a..b]
                .iter()
                .map(|(run, path, cursor, end)| {
                    read_file_into(path, *cursor, *end, opts, &known[run], cancel, &mut tables)
                })
                .collect();
            (tables, chunks)
        };
        // Workers in pairs share their scalar columns: the first of a pair fills them
        // downwards from a boundary (its segments last to first), the second upwards, so the
        // pair's rows end up contiguous without an appending copy, and no row's memory is
        // backed twice. Only where there is a pool (and a second worker).
        let pairs = if pool.is_some() && n >= 2 && opts.kinds.contains(Kind::Scalars) {
            (0..n / 2)
                .map(|p| {
                    // Rows are rarely under 40 bytes; a pair whose rows are smaller than that
                    // still reads right, through a copy (see `place`).
                    let below = (ranges[2 * p].2 / 40) as usize;
                    let above = (ranges[2 * p + 1].2 / 40) as usize;
                    PlacedScalars::with_capacity(below + above, opts.provenance)
                        .map(|cols| (cols, below))
                })
                .collect::<Option<Vec<_>>>()
        } else {
            None
        };
        let Some(mut pairs) = pairs else {
            return match pool {
                Some(p) => p.install(|| ranges.par_iter().map(one).collect()),
                None => ranges.iter().map(one).collect(),
            };
        };
        let dests: Vec<Dest> = pairs.iter_mut().map(|(c, s)| Dest::of(c, *s)).collect();
        let parse = |g: usize| -> Parsed {
            let (a, b, _) = ranges[g];
            match dests.get(g / 2) {
                Some(dest) => place(&work[a..b], g.is_multiple_of(2), dest, opts, known, cancel),
                None => {
                    let (t, cs) = one(&ranges[g]);
                    Parsed {
                        tables: t,
                        chunks: cs.into_iter().map(|c| (c, Piece::Own)).collect(),
                        cursor: 0,
                    }
                }
            }
        };
        let mut parsed: Vec<Parsed> = match pool {
            Some(p) => p.install(|| (0..n).into_par_iter().map(parse).collect()),
            None => (0..n).map(parse).collect(),
        };
        let mut out = Vec::with_capacity(n.div_ceil(2));
        let mut pairs = pairs.into_iter();
        let mut parsed_iter = parsed.drain(..);
        while let Some(first) = parsed_iter.next() {
            match pairs.next() {
                Some((cols, _)) => {
                    let second = parsed_iter.next().expect("workers come in pairs");
                    out.push(join_pair(first, second, cols, opts.provenance));
                }
                // The unpaired last worker of an odd count.
                None => out.push((
                    first.tables,
                    first.chunks.into_iter().map(|(c, _)| c).collect(),
                )),
            }
        }
        out
    }

    /// Splits files with much left to read into segments for parallel parsing.
    fn split_large(
        &self,
        work: Vec<Segment>,
        threads: usize,
        pool: Option<&rayon::ThreadPool>,
    ) -> Vec<Segment> {
        // Files smaller than this are not worth a header scan; TBSCOPE_SPLIT_BYTES overrides it
        // (tests use it to split small files).
        let split_above: u64 = std::env::var("TBSCOPE_SPLIT_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 << 20);
        let plan = |(run, path, cursor, until): Segment| -> Vec<Segment> {
            let left = std::fs::metadata(&path)
                .map_or(0, |m| m.len())
                .saturating_sub(cursor.offset);
            if threads <= 1 || left <= split_above {
                return vec![(run, path, cursor, until)];
            }
            let piece = (left / (threads as u64 * 4)).max(split_above / 4).max(1);
            let cuts = split_points(&path, cursor.offset, piece, self.opts.file.max_len);
            let mut out = Vec::with_capacity(cuts.len() + 1);
            let mut start = cursor.offset;
            for c in cuts {
                out.push((
                    run.clone(),
                    path.clone(),
                    Cursor { offset: start },
                    Until::Cut(c),
                ));
                start = c;
            }
            out.push((run, path, Cursor { offset: start }, until));
            out
        };
        match pool {
            Some(p) => p.install(|| work.into_par_iter().flat_map_iter(plan).collect()),
            None => work.into_iter().flat_map(plan).collect(),
        }
    }

    /// Bookkeeping for what was read, in file order: offsets, report, kinds decided, tags
    /// renumbered. Returns each worker's tables, ready for Arrow.
    fn merge(
        &mut self,
        work: Vec<Segment>,
        groups: Vec<(Tables, Vec<FileChunk>)>,
    ) -> (LoadStats, Vec<(Tables, Vec<Finish>)>) {
        let mut stats = LoadStats {
            files_read: work.len(),
            ..Default::default()
        };
        let mut work = work.into_iter();
        let mut out = Vec::with_capacity(groups.len());
        for (tables, chunks) in groups {
            let mut jobs = Vec::with_capacity(chunks.len());
            for chunk in chunks {
                let (run, path, _, _) = work.next().expect("a segment per chunk");
                stats.bytes_read += chunk.bytes_read;
                stats.records += chunk.records;
                stats.crc_bytes += chunk.crc_bytes;
                let rel;
                let file_id;
                {
                    let state = self.runs.get_mut(&run).unwrap();
                    let f = state.files.get_mut(&path).unwrap();
                    f.cursor = chunk.end;
                    f.size = chunk.size;
                    f.records += chunk.records;
                    f.tail = chunk.tail;
                    f.pending = chunk.tail_pending;
                    f.failed = chunk.problems.iter().any(|p| p.severity == Severity::Error);
                    if let Some(v) = &chunk.file_version {
                        f.file_version = Some(Arc::from(v.as_str()));
                    }
                    if let Some(v) = &chunk.writer {
                        f.writer = Some(Arc::from(v.as_str()));
                    }
                    file_id = f.id;
                    rel = self.file_names[f.id as usize].clone();
                    if let Some(w) = chunk.first_wall {
                        state.first_wall = Some(state.first_wall.map_or(w, |x| x.min(w)));
                    }
                    if let Some(w) = chunk.last_wall {
                        state.last_wall = Some(state.last_wall.map_or(w, |x| x.max(w)));
                    }
                    if let Some(s) = chunk.max_step {
                        state.max_step = Some(state.max_step.map_or(s, |x| x.max(s)));
                    }
                    state.sessions.extend(chunk.sessions.iter().cloned());
                    state.corrupt += chunk
                        .problems
                        .iter()
                        .filter(|p| p.severity == Severity::Corrupt)
                        .count() as u64;
                }
                // Stale notes about this file's end (a pending or stopped tail, an empty file)
                // are replaced by what this read found.
                self.report.retain(|e| {
                    !(e.file == rel
                        && (matches!(e.severity, Severity::Truncated | Severity::Info)
                            || (e.severity == Severity::Warning
                                && e.reason.starts_with(STOPPED_TAIL))))
                });
                for p in &chunk.problems {
                    self.report.push(ReportEntry {
                        run: run.clone(),
                        file: rel.clone(),
                        severity: p.severity,
                        offset: p.offset,
                        length: p.length,
                        reason: p.reason.clone(),
                    });
                }
                // File-local tags to logdir-wide ids, deciding kinds in file order.
                let run_id = self.runs[&run].id;
                let mut tag_map = Vec::with_capacity(chunk.tags.len());
                for lt in &chunk.tags {
                    let gid = intern(&mut self.tag_names, &mut self.tag_index, &lt.name);
                    tag_map.push(gid);
                    if !lt.wanted {
                        continue;
                    }
                    let state = self.runs.get_mut(&run).unwrap();
                    if !state.tags.contains_key(lt.name.as_str()) {
                        state.tags.insert(
                            Arc::from(lt.name.as_str()),
                            TagState {
                                kind: None,
                                meta: None,
                                points: 0,
                                first_step: i64::MAX,
                                last_step: i64::MIN,
                            },
                        );
                    }
                    let ts = state.tags.get_mut(lt.name.as_str()).unwrap();
                    if ts.points == 0
                        && ts.kind.is_none()
                        && !state.tag_order.iter().any(|t| **t == *lt.name)
                    {
                        state.tag_order.push(Arc::from(lt.name.as_str()));
                    }
                    if ts.meta.is_none() {
                        ts.meta = lt.meta.clone().map(Arc::new);
                    }
                    match (ts.kind, lt.kind) {
                    (None, k) => ts.kind = k,
                    (Some(a), Some(b)) if a != b => self.report.push(ReportEntry {
                        run: run.clone(),
                        file: rel.clone(),
                        severity: Severity::Warning,
                        offset: 0,
                        length: 0,
                        reason: format!(
                            "tag {:?} is {} in this file but {} before it; its points here are in the {} table",
                            lt.name, b.name(), a.name(), b.name()
                        ),
                    }),
                    _ => {}
                }
                    ts.points += lt.points;
                    if lt.points > 0 {
                        ts.first_step = ts.first_step.min(lt.first_step);
                        ts.last_step = ts.last_step.max(lt.last_step);
                    }
                }
                jobs.push(Finish {
                    rows: chunk.rows,
                    tag_map,
                    run: run_id,
                    file: file_id,
                });
            }
            stats.rows += tables.rows().iter().sum::<usize>();
            out.push((tables, jobs));
        }
        (stats, out)
    }

    fn plugin_id(&mut self, run: i32, tag: i32) -> i32 {
        let run_name = &self.run_names[run as usize];
        let tag_name = &self.tag_names[tag as usize];
        let plugin = self.runs[run_name]
            .tags
            .get(tag_name.as_str())
            .and_then(|t| t.meta.as_ref())
            .map_or(String::new(), |m| m.plugin_name.clone());
        intern(&mut self.plugin_names, &mut self.plugin_index, &plugin)
    }

    fn take_batches(&mut self, mut merged: Tables) -> Vec<(Kind, RecordBatch)> {
        let rows = merged.rows();
        // Plugin ids for every (run, tag) that the plugin-carrying tables use.
        let mut plugin_ids: HashMap<(i32, i32), i32> = HashMap::new();
        for c in [&merged.tensors.c, &merged.blobs.b.c] {
            for (&r, &t) in c.run.iter().zip(&c.tag) {
                plugin_ids.entry((r, t)).or_insert(-1);
            }
        }
        // Sorted, so plugin dictionaries come out the same on every scan.
        let mut keys: Vec<(i32, i32)> = plugin_ids.keys().copied().collect();
        keys.sort_unstable();
        for (r, t) in keys {
            let id = self.plugin_id(r, t);
            plugin_ids.insert((r, t), id);
        }
        let plugin_of = |r: i32, t: i32| plugin_ids[&(r, t)];
        let dicts = Dicts {
            runs: &self.run_names,
            tags: &self.tag_names,
            files: &self.file_names,
            plugin_of: &plugin_of,
            plugins: &self.plugin_names,
        };
        Kind::ALL
            .into_iter()
            .filter(|&k| rows[k as usize] > 0)
            .map(|k| {
                (
                    k,
                    to_batch(&mut merged, k, &dicts, self.opts.file.provenance),
                )
            })
            .collect()
    }

    /// Forgets everything read from `run` (its files, tags, facts and report lines), so the next
    /// plan reads it again from the start. The caller drops its rows.
    pub(crate) fn forget_run(&mut self, run: &str) {
        self.runs.remove(run);
        self.report.retain(|e| e.run != run);
    }

    /// Everything read so far for `kind`, with restart handling and the step bound applied.
    pub fn table(&self, kind: Kind) -> Result<Vec<RecordBatch>> {
        let batches = &self.batches[kind as usize];
        if self.opts.restarts == Restarts::All && self.opts.step_lo.is_none() {
            return Ok(batches.clone());
        }
        crate::restarts::apply(
            batches,
            self.opts.restarts == Restarts::Preempt,
            self.opts.step_lo,
        )
    }

    /// The schema of `kind`'s table even when it has no rows.
    pub fn schema(&self, kind: Kind) -> Arc<Schema> {
        if let Some(b) = self.batches[kind as usize].first() {
            return b.schema();
        }
        empty_schema(kind, self.opts.file.provenance)
    }

    pub fn run_names(&self) -> Vec<String> {
        self.runs.keys().cloned().collect()
    }

    /// One row per (run, tag): kind and metadata.
    pub fn series(&self) -> RecordBatch {
        self.series_with(&self.series_pick())
    }

    /// Which series an uncached scan shows, with their (points, first step, last step). With a
    /// step range, those with points in it: records outside the range still decide kinds, so a
    /// series seen only there is known but has nothing to show.
    pub(crate) fn series_pick(
        &self,
    ) -> impl Fn(&str, &str, &TagState, Kind) -> Option<(u64, i64, i64)> {
        let kinds = self.opts.file.kinds;
        let ranged = self.opts.file.step_lo.is_some() || self.opts.file.step_hi.is_some();
        move |_, _, ts, k| {
            (kinds.contains(k) && (ts.points > 0 || !ranged)).then_some((
                ts.points,
                ts.first_step,
                ts.last_step,
            ))
        }
    }

    /// The series table with `pick` deciding, per (run, tag, state, kind), whether the row is
    /// there and with which (points, first step, last step).
    pub(crate) fn series_with(&self, pick: crate::runstats::SeriesPick<'_>) -> RecordBatch {
        let mut run = Vec::new();
        let mut tag = Vec::new();
        let mut kind = Vec::new();
        let mut plugin = Vec::new();
        let mut content: Vec<Vec<u8>> = Vec::new();
        let mut display = Vec::new();
        let mut desc = Vec::new();
        let mut class = Vec::new();
        let mut points = Vec::new();
        let mut first = Vec::new();
        let mut last = Vec::new();
        for (rname, state) in &self.runs {
            for tname in &state.tag_order {
                let ts = &state.tags[tname];
                let Some(k) = ts.kind else { continue };
                let Some((n, lo, hi)) = pick(rname, tname, ts, k) else {
                    continue;
                };
                let m = ts.meta.as_deref().cloned().unwrap_or_default();
                run.push(rname.clone());
                tag.push(tname.to_string());
                kind.push(k.name().to_string());
                plugin.push(m.plugin_name);
                content.push(m.plugin_content);
                display.push(m.display_name);
                desc.push(m.description);
                class.push(m.data_class);
                points.push(n as i64);
                first.push((n > 0).then_some(lo));
                last.push((n > 0).then_some(hi));
            }
        }
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("run", string_array(run)),
            ("tag", string_array(tag)),
            ("kind", string_array(kind)),
            ("plugin", string_array(plugin)),
            (
                "plugin_content",
                binary_array(content.iter().map(|c| c.as_slice())),
            ),
            ("display_name", string_array(display)),
            ("description", string_array(desc)),
            ("data_class", Arc::new(Int32Array::from(class))),
            ("points", Arc::new(Int64Array::from(points))),
            ("first_step", Arc::new(Int64Array::from(first))),
            ("last_step", Arc::new(Int64Array::from(last))),
        ];
        batch(cols)
    }

    /// One row per run: files, bytes, time range, steps, per-kind points, data loss.
    pub fn runs_table(&self) -> RecordBatch {
        self.runs_table_with(&|_, s| {
            let mut counts = [0i64; 8];
            for t in s.tags.values() {
                if let Some(k) = t.kind {
                    counts[k as usize] += t.points as i64;
                }
            }
            Some((s.max_step, counts))
        })
    }

    /// The runs table with `facts` deciding, per run, whether its row is there and with which
    /// max step and per-kind point counts.
    pub(crate) fn runs_table_with(&self, facts: RunFacts<'_>) -> RecordBatch {
        let mut name = Vec::new();
        let mut files = Vec::new();
        let mut bytes = Vec::new();
        let mut first = Vec::new();
        let mut last = Vec::new();
        let mut max_step = Vec::new();
        let mut records = Vec::new();
        let mut corrupt = Vec::new();
        let mut tail = Vec::new();
        let mut restarts = Vec::new();
        let mut writer = Vec::new();
        let mut per_kind: Vec<Vec<i64>> = vec![Vec::new(); 8];
        for (rname, s) in &self.runs {
            let Some((ms, counts)) = facts(rname, s) else {
                continue;
            };
            name.push(rname.clone());
            files.push(s.files.len() as i64);
            bytes.push(s.files.values().map(|f| f.size).sum::<u64>());
            first.push(s.first_wall);
            last.push(s.last_wall);
            max_step.push(ms);
            records.push(s.files.values().map(|f| f.records).sum::<u64>());
            corrupt.push(s.corrupt);
            tail.push(s.files.values().map(|f| f.tail).sum::<u64>());
            // SessionLog START after the first one marks a restart (TF1 writers).
            restarts.push(
                s.sessions
                    .iter()
                    .filter(|e| e.is_start())
                    .count()
                    .saturating_sub(1) as i64,
            );
            writer.push(
                s.files
                    .values()
                    .find_map(|f| f.writer.as_deref().map(str::to_string))
                    .unwrap_or_default(),
            );
            for (v, c) in per_kind.iter_mut().zip(counts) {
                v.push(c);
            }
        }
        let mut cols: Vec<(&str, ArrayRef)> = vec![
            ("run", string_array(name)),
            ("files", Arc::new(Int64Array::from(files))),
            ("bytes", Arc::new(UInt64Array::from(bytes))),
            ("first_wall_time", Arc::new(Float64Array::from(first))),
            ("last_wall_time", Arc::new(Float64Array::from(last))),
            ("max_step", Arc::new(Int64Array::from(max_step))),
            ("records", Arc::new(UInt64Array::from(records))),
            ("corrupt_records", Arc::new(UInt64Array::from(corrupt))),
            ("truncated_bytes", Arc::new(UInt64Array::from(tail))),
            ("restarts", Arc::new(Int64Array::from(restarts))),
            ("writer", string_array(writer)),
        ];
        let names = [
            "scalars",
            "histograms",
            "images",
            "audio",
            "text",
            "hparams",
            "blobs",
            "tensors",
        ];
        for (n, v) in names.iter().zip(per_kind) {
            cols.push((n, Arc::new(Int64Array::from(v))));
        }
        batch(cols)
    }

    /// The `logs` table: TF1's SessionLog (start, stop, checkpoint) and LogMessage events,
    /// one row each, runs in name order and events in file order.
    pub fn logs(&self) -> RecordBatch {
        let (lo, hi) = (self.opts.file.step_lo, self.opts.file.step_hi);
        self.logs_with(&|_| true, &|s| {
            lo.is_none_or(|lo| s >= lo) && hi.is_none_or(|hi| s < hi)
        })
    }

    pub(crate) fn logs_with(
        &self,
        run_ok: &dyn Fn(&str) -> bool,
        step_ok: &dyn Fn(i64) -> bool,
    ) -> RecordBatch {
        const STATUS: [&str; 4] = ["STATUS_UNSPECIFIED", "START", "STOP", "CHECKPOINT"];
        let level_name = |l: i32| match l {
            0 => "UNKNOWN".to_string(),
            10 => "DEBUGGING".to_string(),
            20 => "INFO".to_string(),
            30 => "WARN".to_string(),
            40 => "ERROR".to_string(),
            50 => "FATAL".to_string(),
            other => other.to_string(),
        };
        let mut run = Vec::new();
        let mut step = Vec::new();
        let mut wall = Vec::new();
        let mut source = Vec::new();
        let mut status: Vec<Option<String>> = Vec::new();
        let mut level: Vec<Option<String>> = Vec::new();
        let mut message = Vec::new();
        let mut path: Vec<Option<String>> = Vec::new();
        for (name, s) in &self.runs {
            if !run_ok(name) {
                continue;
            }
            for e in s.sessions.iter().filter(|e| step_ok(e.step)) {
                run.push(name.as_str());
                step.push(e.step);
                wall.push(e.wall.is_finite().then_some(e.wall));
                if e.source == SessionEvent::LOG_MESSAGE {
                    source.push("log_message");
                    status.push(None);
                    level.push(Some(level_name(e.status)));
                    path.push(None);
                } else {
                    source.push("session_log");
                    status.push(Some(
                        usize::try_from(e.status)
                            .ok()
                            .and_then(|i| STATUS.get(i))
                            .map_or_else(|| e.status.to_string(), |s| s.to_string()),
                    ));
                    level.push(None);
                    path.push(Some(e.checkpoint_path.clone()));
                }
                message.push(e.message.clone());
            }
        }
        let dict = |v: Vec<&str>| -> ArrayRef {
            Arc::new(
                v.into_iter()
                    .collect::<arrow_array::DictionaryArray<arrow_array::types::Int32Type>>(),
            )
        };
        let ts: Vec<Option<i64>> = wall
            .iter()
            .map(|w| w.map(|w| (w * 1e9).round() as i64))
            .collect();
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("run", dict(run)),
            ("step", Arc::new(Int64Array::from(step))),
            ("wall_time", Arc::new(Float64Array::from(wall))),
            (
                "timestamp",
                Arc::new(arrow_array::TimestampNanosecondArray::from(ts).with_timezone("UTC")),
            ),
            ("source", dict(source)),
            ("status", Arc::new(StringArray::from(status))),
            ("level", Arc::new(StringArray::from(level))),
            ("message", string_array(message)),
            ("checkpoint_path", Arc::new(StringArray::from(path))),
        ];
        batch(cols)
    }

    /// Per run (as `run_names`), the newest modification time of its event files in seconds
    /// (null when none could be stat'ed), as of the last load.
    pub fn run_mtimes(&self) -> RecordBatch {
        self.run_mtimes_of(self.run_names())
    }

    /// [`Reader::run_mtimes`] of the runs `names` (known runs, in order).
    pub(crate) fn run_mtimes_of(&self, names: Vec<String>) -> RecordBatch {
        let newest: Vec<Option<f64>> = names
            .iter()
            .map(|n| {
                self.runs[n]
                    .files
                    .values()
                    .filter_map(|f| f.mtime)
                    .max()
                    .map(|t| match t.duration_since(std::time::UNIX_EPOCH) {
                        Ok(d) => d.as_secs_f64(),
                        Err(e) => -e.duration().as_secs_f64(),
                    })
            })
            .collect();
        batch(vec![
            ("run", string_array(names)),
            ("last_modified", Arc::new(Float64Array::from(newest))),
        ])
    }

    /// One row per run that has hparams records: session fields and a column per hparam.
    pub fn hparams(&self) -> Result<RecordBatch> {
        hparams_of(&self.batches[Kind::Hparams as usize])
    }

    /// The health report: one row per problem found so far.
    pub fn report(&self) -> &[ReportEntry] {
        &self.report
    }

    /// The report as a user sees it: while no run is known and nothing else is reported, one
    /// line says that no event files were found: derived, never stored, so it goes once files
    /// appear (and a cache never keeps it).
    pub fn report_entries(&self) -> std::borrow::Cow<'_, [ReportEntry]> {
        if self.report.is_empty() && self.runs.is_empty() {
            return std::borrow::Cow::Owned(vec![no_runs_entry(&self.root)]);
        }
        std::borrow::Cow::Borrowed(&self.report)
    }

    /// Absolute path of a file by its dictionary name (for lazy blob reads).
    pub fn file_path(&self, rel: &str) -> Option<PathBuf> {
        self.runs
            .values()
            .flat_map(|r| r.files.values())
            .find(|f| self.file_names[f.id as usize] == rel)
            .map(|f| f.path.clone())
    }
}

/// When an event file's writer created it: the seconds in its name
/// (`events.out.tfevents.<seconds>.<host>...`, what every writer names its files), if any.
fn started(path: &Path) -> Option<f64> {
    let name = path.file_name()?.to_str()?;
    let rest = &name[name.find("tfevents.")? + "tfevents.".len()..];
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse::<u64>().ok().map(|s| s as f64)
}

/// Which of a run's event files (path, mtime) may still be written, as of `now`.
///
/// Writers never append to an existing file after a restart (they start a new one), so a file
/// may still grow only while it is the newest of its run and it grew within `timeout`. "Newest"
/// is judged by when the others were started (the seconds in their names, rounded down): a file
/// is superseded once another file of its run was started after it last grew, so writers that
/// run side by side in one directory (several ranks) do not finalise each other's files. A
/// zero timeout makes every file final.
pub(crate) fn may_grow(
    files: &[(&Path, Option<std::time::SystemTime>)],
    now: std::time::SystemTime,
    timeout: std::time::Duration,
) -> Vec<bool> {
    if timeout.is_zero() {
        return vec![false; files.len()];
    }
    // The two latest starts, so each file compares with the latest of the others.
    let starts: Vec<Option<f64>> = files.iter().map(|(p, _)| started(p)).collect();
    let mut best: [(f64, usize); 2] = [(f64::NEG_INFINITY, usize::MAX); 2];
    for (i, s) in starts.iter().enumerate() {
        let Some(s) = *s else { continue };
        if s > best[0].0 {
            best = [(s, i), best[0]];
        } else if s > best[1].0 {
            best[1] = (s, i);
        }
    }
    files
        .iter()
        .enumerate()
        .map(|(i, (_, mtime))| {
            let Some(mtime) = mtime else {
                // Not stat'ed: nothing says it stopped.
                return true;
            };
            // A modification time ahead of the clock counts as just now.
            if now.duration_since(*mtime).is_ok_and(|age| age >= timeout) {
                return false;
            }
            let grew = match mtime.duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => d.as_secs_f64(),
                Err(e) => -e.duration().as_secs_f64(),
            };
            let newest_other = if best[0].1 == i { best[1].0 } else { best[0].0 };
            newest_other <= grew
        })
        .collect()
}

/// Whether one event file may still be written ([`may_grow`] with the default timeout), its
/// directory's event files taken as its run.
pub fn file_may_grow(path: &Path) -> bool {
    let siblings: Vec<PathBuf> = path
        .parent()
        .and_then(|d| std::fs::read_dir(d).ok())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().contains("tfevents"))
                        && p.as_path() != path
                })
                .collect()
        })
        .unwrap_or_default();
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut files: Vec<(&Path, Option<std::time::SystemTime>)> = vec![(path, mtime(path))];
    files.extend(siblings.iter().map(|p| (p.as_path(), mtime(p))));
    may_grow(&files, std::time::SystemTime::now(), TAIL_TIMEOUT)[0]
}

/// What turns one file's rows into logdir rows once the merge has numbered its tags (see
/// [`Tables::finish_rows`]).
pub(crate) struct Finish {
    rows: [(usize, usize); 8],
    tag_map: Vec<i32>,
    run: i32,
    file: i32,
}

/// The report line of a read that found no run.
pub(crate) fn no_runs_entry(root: &Path) -> ReportEntry {
    ReportEntry {
        run: String::new(),
        file: String::new(),
        severity: Severity::Warning,
        offset: 0,
        length: 0,
        reason: format!(
            "no event files under {} (a run is a directory holding files named *tfevents*)",
            root.display()
        ),
    }
}

/// The schema of `kind`'s table when it has no rows.
pub(crate) fn empty_schema(kind: Kind, provenance: bool) -> Arc<Schema> {
    let mut empty = Tables::default();
    let none = |_: i32, _: i32| 0;
    let dicts = Dicts {
        runs: &[],
        tags: &[],
        files: &[],
        plugin_of: &none,
        plugins: &[],
    };
    to_batch(&mut empty, kind, &dicts, provenance).schema()
}

/// The hparams table (one row per run with sessions) from hparams record batches.
pub(crate) fn hparams_of(batches: &[RecordBatch]) -> Result<RecordBatch> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    let mut sessions: BTreeMap<String, crate::hparams::Session> = BTreeMap::new();
    for b in batches {
        // Dictionaries are compacted per batch: go through the values, not global ids.
        let runs = b.column(0).as_dictionary::<Int32Type>();
        let run_values = runs.values().as_string::<i32>();
        let idx = b
            .schema()
            .index_of("plugin_content")
            .expect("hparams batches carry content");
        let content = b.column(idx).as_binary::<i64>();
        for i in 0..b.num_rows() {
            let run = run_values.value(runs.keys().value(i) as usize);
            let s = sessions.entry(run.to_string()).or_default();
            crate::hparams::apply(content.value(i), s).map_err(|e| {
                Error::Other(format!("run {run}: hparams record is not valid: {e}"))
            })?;
        }
    }
    Ok(crate::hparams::table(
        &sessions.into_iter().collect::<Vec<_>>(),
    ))
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, a)| {
            Field::new(
                *n,
                a.data_type().clone(),
                a.data_type() != &DataType::Utf8 || a.null_count() > 0,
            )
        })
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        cols.into_iter().map(|(_, a)| a).collect(),
    )
    .expect("columns match their schema")
}

/// Where a segment's scalar rows went in a pair's shared columns.
enum Piece {
    /// Rows `lo..hi` of the shared allocation.
    At(usize, usize),
    /// Left in the segment's own tables: they did not fit (or the worker is unpaired).
    Kept(Scalars),
    /// The worker is not paired; rows are in its own tables as before.
    Own,
}

/// One worker's result: its non-scalar tables (rows in file order), each segment's chunk
/// and where its scalar rows are, and where its cursor in the shared columns stopped.
struct Parsed {
    tables: Tables,
    chunks: Vec<(FileChunk, Piece)>,
    cursor: usize,
}

/// The shared columns of a pair, as raw pointers: the two workers write disjoint rows.
struct Dest {
    tag: *mut i32,
    step: *mut i64,
    wall: *mut f64,
    value: *mut f64,
    /// Null without provenance.
    offset: *mut i64,
    cap: usize,
    /// The boundary both workers start from.
    start: usize,
}

// SAFETY: the pointers are only written through by `place`, where the downward worker writes
// rows below `start` and the upward one rows at or above it; the allocation outlives both.
unsafe impl Send for Dest {}
unsafe impl Sync for Dest {}

impl Dest {
    fn of(c: &mut PlacedScalars, start: usize) -> Dest {
        Dest {
            tag: c.tag.base(),
            step: c.step.base(),
            wall: c.wall.base(),
            value: c.value.base(),
            offset: if c.offset.capacity() > 0 {
                c.offset.base()
            } else {
                std::ptr::null_mut()
            },
            cap: c.tag.capacity(),
            start,
        }
    }

    /// Copies `s`'s rows to rows `at..at + s.len()`, backing that memory first.
    ///
    /// # Safety
    /// `at + s.len() <= cap`, and no other thread touches those rows.
    unsafe fn copy(&self, s: &Scalars, at: usize) {
        unsafe fn one<T: Copy>(src: &[T], dst: *mut T, at: usize) {
            let d = dst.add(at);
            populate(d as usize, std::mem::size_of_val(src));
            std::ptr::copy_nonoverlapping(src.as_ptr(), d, src.len());
        }
        one(&s.c.tag, self.tag, at);
        one(&s.c.step, self.step, at);
        one(&s.c.wall, self.wall, at);
        one(&s.value, self.value, at);
        if !self.offset.is_null() {
            one(&s.c.offset, self.offset, at);
        }
    }
}

/// Parses `work` as one worker of a pair: each segment into a reused scratch table, whose
/// scalar rows are then copied into the shared columns, below the boundary when `down` (the
/// segments taken last to first) and from it upwards otherwise. The scratch stays in cache and
/// its memory is backed once; the copy is what the appending of a second worker's rows used
/// to cost, without backing those rows twice.
fn place(
    work: &[Segment],
    down: bool,
    dest: &Dest,
    opts: &Options,
    known: &HashMap<String, HashMap<String, Known>>,
    cancel: &AtomicBool,
) -> Parsed {
    let mut scratch = Scalars::default();
    let mut cursor = dest.start;
    // Upwards, non-scalar rows go straight into the worker's tables in file order;
    // downwards, each segment gets tables of its own, put in order at the end.
    let mut tables = Tables::default();
    let mut segs: Vec<(Tables, FileChunk, Piece)> = Vec::with_capacity(work.len());
    let mut put = |t: &mut Tables, scratch: &mut Scalars, chunk: &mut FileChunk| -> Piece {
        std::mem::swap(&mut t.scalars, scratch);
        let n = scratch.c.len();
        let fits = if down {
            n <= cursor
        } else {
            n <= dest.cap - cursor
        };
        if !fits {
            // Rows too small for the estimate: keep them, and let the pair copy them in.
            return Piece::Kept(std::mem::take(scratch));
        }
        let at = if down { cursor - n } else { cursor };
        // SAFETY: at..at + n is within the capacity (checked above) and on this worker's
        // side of the boundary, which the cursor only moves away from.
        unsafe { dest.copy(scratch, at) };
        scratch.clear();
        cursor = if down { at } else { at + n };
        chunk.rows[0] = (at, at + n);
        Piece::At(at, at + n)
    };
    if down {
        for (run, path, cur, end) in work.iter().rev() {
            let mut t = Tables::default();
            std::mem::swap(&mut t.scalars, &mut scratch);
            let mut chunk = read_file_into(path, *cur, *end, opts, &known[run], cancel, &mut t);
            let piece = put(&mut t, &mut scratch, &mut chunk);
            segs.push((t, chunk, piece));
        }
        segs.reverse();
        let mut chunks = Vec::with_capacity(segs.len());
        for (t, mut chunk, piece) in segs {
            let rows = t.rows();
            if rows[1..].iter().any(|&r| r > 0) {
                let base = tables.rows();
                rebase(&mut chunk.rows, &base);
                if base.iter().all(|&r| r == 0) {
                    tables = t;
                } else {
                    tables.append(t);
                }
            } else {
                let base = tables.rows();
                for (r, &b) in chunk.rows.iter_mut().zip(&base).skip(1) {
                    *r = (b, b);
                }
            }
            chunks.push((chunk, piece));
        }
        Parsed {
            tables,
            chunks,
            cursor,
        }
    } else {
        let mut chunks = Vec::with_capacity(work.len());
        for (run, path, cur, end) in work {
            std::mem::swap(&mut tables.scalars, &mut scratch);
            let mut chunk =
                read_file_into(path, *cur, *end, opts, &known[run], cancel, &mut tables);
            let piece = put(&mut tables, &mut scratch, &mut chunk);
            chunks.push((chunk, piece));
        }
        Parsed {
            tables,
            chunks,
            cursor,
        }
    }
}

/// Moves a chunk's row ranges of every kind but scalars (whose rows are placed) up by `base`,
/// the rows of those kinds before its tables.
fn rebase(rows: &mut [(usize, usize); 8], base: &[usize; 8]) {
    for (r, &b) in rows.iter_mut().zip(base).skip(1) {
        *r = (r.0 + b, r.1 + b);
    }
}

/// A pair's results as one group: the shared scalar columns (or, when some rows did not fit,
/// ordinary columns holding every row in order), the non-scalar tables of both, and the
/// chunks with row ranges into them.
fn join_pair(
    first: Parsed,
    second: Parsed,
    mut cols: PlacedScalars,
    provenance: bool,
) -> (Tables, Vec<FileChunk>) {
    let (lo, hi) = (first.cursor, second.cursor);
    let mut tables = first.tables;
    let mut chunks: Vec<FileChunk> = Vec::with_capacity(first.chunks.len() + second.chunks.len());
    let base = tables.rows();
    let pieces: Vec<(FileChunk, Piece)> = first
        .chunks
        .into_iter()
        .chain(second.chunks.into_iter().map(|(mut c, p)| {
            rebase(&mut c.rows, &base);
            (c, p)
        }))
        .collect();
    tables.append(second.tables);
    if pieces.iter().all(|(_, p)| matches!(p, Piece::At(..))) {
        // SAFETY: the downward worker wrote every row from its final cursor up to the
        // boundary, and the upward one every row from the boundary to its cursor.
        unsafe { cols.set_rows(lo, hi, provenance) };
        for (mut c, p) in pieces {
            if let Piece::At(a, b) = p {
                c.rows[0] = (a - lo, b - lo);
            }
            chunks.push(c);
        }
        tables.scalars = Scalars {
            placed: Some(Box::new(cols)),
            ..Default::default()
        };
    } else {
        // Some rows did not fit: gather all of them, in order, into ordinary columns.
        let mut s = Scalars::default();
        for (mut c, p) in pieces {
            let start = s.c.len();
            match p {
                // SAFETY: a placed piece's rows were all written (`place`).
                Piece::At(a, b) => unsafe {
                    s.c.tag.extend_from_slice(cols.tag.written(a, b));
                    s.c.step.extend_from_slice(cols.step.written(a, b));
                    s.c.wall.extend_from_slice(cols.wall.written(a, b));
                    s.value.extend_from_slice(cols.value.written(a, b));
                    if provenance {
                        s.c.offset.extend_from_slice(cols.offset.written(a, b));
                    }
                },
                Piece::Kept(k) => {
                    s.c.tag.extend_from_slice(&k.c.tag);
                    s.c.step.extend_from_slice(&k.c.step);
                    s.c.wall.extend_from_slice(&k.c.wall);
                    s.value.extend_from_slice(&k.value);
                    s.c.offset.extend_from_slice(&k.c.offset);
                }
                Piece::Own => unreachable!("paired workers place every piece"),
            }
            c.rows[0] = (start, s.c.len());
            chunks.push(c);
        }
        tables.scalars = s;
    }
    (tables, chunks)
}
