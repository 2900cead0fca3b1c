//! Loading a logdir: discovery, parallel per-file parsing, merging in TensorBoard's order, and
//! reloading only the bytes written since.
//!
//! Files are parsed in parallel into per-file chunks with file-local tag ids; merging walks runs
//! in name order and files in name order, so rows come out in (run, file, record) order and the
//! first metadata of a tag in that order decides its kind, as in TensorBoard.
//!
//! One concept a module: the reader's options and state (here), which files to read and from
//! where ([`plan`]), parsing them on worker threads and merging what they found ([`read`],
//! with paired workers sharing scalar columns in [`pairs`]), and the tables a reader answers
//! from its state and rows ([`tables`]).

pub(crate) mod changes;
mod pairs;
mod plan;
pub mod progress;
mod read;
mod tables;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use arrow_array::RecordBatch;
use regex::Regex;

use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::event_file::{Cursor, Options, SeriesMeta, SessionEvent, Severity, Until};

pub use plan::file_may_grow;
// The one path-to-name rule lives in `logdir`; the cache and rewrites take it from here too.
pub(crate) use crate::logdir::rel_name;
// Worker threads live in `pool`; these names stay for the binding and `plan`, which use them.
pub(crate) use crate::pool::worker_pool;
pub use crate::pool::{thread_count, MAX_THREADS};
pub(crate) use plan::{cut_pieces, may_grow, stat_found};
pub(crate) use tables::{empty_schema, hparams_of, kind_counts, no_runs_entry, SeriesPick};

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
    /// Directories the load listed (read): every one on a discovery, none on a reload whose
    /// change check found no directory changed (`changes`).
    pub dirs_listed: usize,
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
    /// What the last discovery of [`Reader::load`] saw: the next load checks the logdir
    /// against it instead of discovering it again (`changes`).
    pub(crate) tree: Option<changes::Tree>,
    /// Files still being filled in (a remote mirror's first fetch), with how many of their
    /// first bytes are there: loads read them [`Until::Upto`] that many.
    pub(crate) fetching: HashMap<PathBuf, u64>,
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
            tree: None,
            fetching: HashMap::new(),
        })
    }

    /// Files being filled in, not in order, and how many of their first bytes are there,
    /// for the loads from now on (empty: every file is whole). A record past that point is
    /// read by a later load, as a live file's tail is.
    pub fn set_fetching(&mut self, fetching: HashMap<PathBuf, u64>) {
        self.fetching = fetching;
    }

    pub(crate) fn rel(&self, path: &Path) -> String {
        rel_name(&self.root, self.root.is_file(), path)
    }

    /// Reads everything new since the last call (everything, the first time) and keeps it.
    pub fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        let (work, sizes, listed) = self.plan_checked()?;
        progress::planned(work.len());
        let (mut stats, batches) = self.read_planned(work, cancel, Some(sizes))?;
        stats.dirs_listed = listed;
        for (kind, b) in batches {
            self.batches[kind as usize].push(b);
        }
        Ok(stats)
    }
}
