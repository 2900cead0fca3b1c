//! The incremental cache: a reader's state and rows kept in a directory of their own, so that
//! opening a logdir again reads only the bytes written since.
//!
//! [`CachedReader`] wraps a [`Reader`] that holds the **unfiltered** load; the scan's filters
//! are applied to what it returns (`view`): rows are selected through their run and tag
//! dictionaries and step column, and the series and runs tables are derived from the saved
//! per-tag state (or, with a step range, from the rows). The `Reader` knows nothing of this.
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
//! By concept:
//!
//! - `generation`: writing a generation into a temporary directory and publishing it under
//!   the lock, restoring the current one, removing what dead writers left.
//! - `manifest`: our binary encoding of everything a reload continues from (per run its files,
//!   tags, facts and report lines), checksummed; `pending`: a restored manifest whose runs'
//!   state is still encoded.
//! - `segments`: the rows. A generation is immutable; its rows live in *segments*, one Arrow
//!   IPC file per kind per load that added rows. A new generation hard-links the segments it
//!   keeps and writes only new rows, so re-opening a logdir that grew costs the new rows. The
//!   *pieces* say which rows of which segment belong to which run, in output order; dropping a
//!   run (its file was replaced, truncated or deleted) drops its pieces, and rows nobody points
//!   at go when the segments are compacted.
//! - `files`, `lease`: a cache file in memory, checked against the CRC-32C its manifest records
//!   before it is used, and mapped only under a read lease (or read), so that no truncation
//!   can take a mapped page away (SIGBUS).
//! - `carry`: a change to a few runs of a large logdir: only their state is decoded, the new
//!   generation takes the others' encoded parts and stored rows from the previous one.
//! - `check`: what changed in the logdir since the generation was written: the warm open's
//!   stat-only check, the discovery that lists only directories that changed, stale runs.
//! - `reload`: which runs a load looks at and which cached runs it drops: the runs the check
//!   after a restore found moved, or (a reload of a decoded state) those the reader's own check
//!   found moved, the directories that changed listed again, or a discovery's.
//! - `view`: a scan's filters on the unfiltered load.
//!
//! A warm open of a logdir that did not change is the common case, and on a logdir of many runs
//! decoding every run's state would cost more than everything else. So the manifest keeps what
//! the change check needs (run names, file identities, directory listings) apart from the
//! runs' state, and a generation also stores, for the unfiltered load, each run's facts and
//! each scalar series' statistics (`runstats.rs`). An open whose check finds nothing changed
//! leaves the state encoded ("pending") and serves the runs table, the facts and the
//! statistics from those tables; anything else decodes the state first, when it is first
//! needed (`Cache::ready`).

mod carry;
mod check;
mod deferred;
mod files;
mod generation;
mod ipc;
mod lease;
mod manifest;
mod pending;
mod relist;
mod reload;
mod segments;
mod stamp;
mod view;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::load::{
    empty_schema, hparams_of, thread_count, LoadStats, Reader, ReaderOptions, ReportEntry,
};
use crate::runstats::{merge_stats, scalar_stats_of, summary_of};

pub use self::deferred::{CacheWrite, WriteDone};

use self::carry::{Carried, Partial, Written};
use self::check::Checked;
use self::files::{read_ipc_file, RestoreError};
use self::generation::{clean_tmp, segment_file, Restore};
use self::manifest::{DirListing, Kept};
use self::pending::{decode_state, Pending};
use self::segments::{merge_pieces, run_pieces, Piece, Segment};
use self::view::View;

/// `TBSCOPE_TRACE=1`: the time between successive `marks` (each an elapsed time since the
/// start of `what`), as one line `tbscope cache <what>: <mark> <time>, ...` on stderr.
fn trace_marks(what: &str, marks: &[(&str, Duration)]) {
    if std::env::var_os("TBSCOPE_TRACE").is_none() {
        return;
    }
    let mut last = Duration::ZERO;
    let parts: Vec<String> = marks
        .iter()
        .map(|(mark, at)| {
            let d = *at - last;
            last = *at;
            format!("{mark} {d:?}")
        })
        .collect();
    eprintln!("tbscope cache {what}: {}", parts.join(", "));
}

/// A name no other file of the cache has: time, process, and a counter.
fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{now:016x}-{:x}-{n:x}", std::process::id())
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
    /// Runs whose files the last load looked at past the change check: only those that moved
    /// or whose directory was listed again, every run after a discovery.
    pub runs_rechecked: usize,
    /// Directories the last load listed (read): after a warm open's check only those that
    /// changed and new ones, after a discovery those whose listing could not be reused.
    pub dirs_listed: usize,
    /// Why the cache could not be used or written, one line each (never an error: the data
    /// then comes from the logdir).
    pub warnings: Vec<String>,
}

/// A logdir read through a cache directory: the first load restores what the cache holds and
/// reads only what changed since; every load that changed something publishes a new
/// generation. Every method answers as a [`Reader`] with the same options would, decoding
/// what it needs of a restored generation when first asked; a cache found unusable on the way
/// is a warning in [`CachedReader::cache_info`] and the logdir is read instead.
pub struct CachedReader {
    /// The unfiltered load (the scan's restart rule and lower step bound are kept: they apply
    /// to the rows the view selects).
    reader: Reader,
    cache: Cache,
}

impl CachedReader {
    /// Prepares to read `root` through the cache in `dir` with the scan options `opts`; fails
    /// if `root` does not exist.
    pub fn new(root: &Path, opts: ReaderOptions, dir: &Path) -> Result<CachedReader> {
        let (base, view) = view::split_options(opts);
        Ok(CachedReader {
            reader: Reader::new(root, base)?,
            cache: Cache::new(dir, view),
        })
    }

    /// What the cache did.
    pub fn cache_info(&self) -> CacheInfo {
        self.cache.info.clone()
    }

    /// Whether the runs' state of the restored generation is still encoded: after a warm open
    /// that found nothing changed, until something needs more than the generation's stored
    /// tables.
    pub fn state_pending(&self) -> bool {
        self.cache.pending.is_some()
    }

    /// Reads everything new since the last call (everything, the first time).
    pub fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        let mut stats = self.cache.load(&mut self.reader, cancel)?;
        stats.dirs_listed = self.cache.info.dirs_listed;
        Ok(stats)
    }

    fn ready(&mut self, need: Need) -> Result<()> {
        self.cache.ready(&mut self.reader, need)
    }

    /// Everything read so far of `kind`, as the scan selects it (filters, restart rule).
    pub fn table(&mut self, kind: Kind) -> Result<Vec<RecordBatch>> {
        self.ready(Need::Rows(kind))?;
        self.cache.table(&self.reader, kind)
    }

    /// The schema of `kind`'s table, even when it has no rows.
    pub fn schema(&mut self, kind: Kind) -> Result<SchemaRef> {
        self.ready(Need::Rows(kind))?;
        self.cache.schema(kind)
    }

    /// One row per (run, tag) the scan selects: kind and metadata.
    pub fn series(&mut self) -> Result<RecordBatch> {
        self.ready(Need::State)?;
        self.cache.series(&self.reader)
    }

    /// TF1's SessionLog and LogMessage events of the selected runs and steps, one row each
    /// (`Reader::logs`).
    pub fn logs(&mut self) -> Result<RecordBatch> {
        self.ready(Need::State)?;
        self.cache.logs(&self.reader)
    }

    /// One row per selected run that has hparams records.
    pub fn hparams(&mut self) -> Result<RecordBatch> {
        self.ready(Need::Rows(Kind::Hparams))?;
        // Like a read: the filters apply, preemption does not (hparams are run facts).
        hparams_of(&self.cache.filtered(Kind::Hparams)?)
    }

    /// One row per selected run: files, bytes, time range, steps, per-kind points, data loss.
    pub fn runs_table(&mut self) -> Result<RecordBatch> {
        self.ready(Need::RunsTable)?;
        self.cache.runs_table(&self.reader)
    }

    /// Per selected run, the newest modification time of its event files (seconds).
    pub fn run_mtimes(&mut self) -> Result<RecordBatch> {
        self.ready(Need::State)?;
        let names = self.cache.run_names(&self.reader)?;
        Ok(self.reader.run_mtimes_of(names))
    }

    /// What `Reader::run_facts` gives, for the scan.
    pub fn run_facts(&mut self) -> Result<RecordBatch> {
        self.ready(Need::RunFacts)?;
        self.cache.run_facts(&self.reader)
    }

    /// What `Reader::scalar_stats` gives, for the scan.
    pub fn scalar_stats(&mut self) -> Result<RecordBatch> {
        self.ready(Need::ScalarStats)?;
        self.cache.scalar_stats(&self.reader)
    }

    /// What `Reader::summary_table` gives, for the scan.
    pub fn summary_table(&mut self, stats: &[(String, String)]) -> Result<RecordBatch> {
        // Both made ready first: should one of them read the logdir again, both tables come
        // from that read.
        self.ready(Need::RunsTable)?;
        self.ready(Need::ScalarStats)?;
        let runs = self.cache.runs_table(&self.reader)?;
        summary_of(&runs, &self.cache.scalar_stats(&self.reader)?, stats)
    }

    /// The runs the scan selects, in name order.
    pub fn run_names(&mut self) -> Result<Vec<String>> {
        self.ready(Need::Names)?;
        self.cache.run_names(&self.reader)
    }

    /// The health report of what the scan selects (the cache's own covers the whole logdir).
    pub fn report(&mut self) -> Result<Vec<ReportEntry>> {
        self.ready(Need::Names)?;
        self.cache.report(&self.reader)
    }

    /// The absolute path of a file named in `file` / `blob_file` columns.
    pub fn file_path(&mut self, rel: &str) -> Result<Option<PathBuf>> {
        self.ready(Need::State)?;
        Ok(self.reader.file_path(rel))
    }
}

/// The cache side of a [`CachedReader`]: what was restored or written, and the scan's view.
struct Cache {
    dir: PathBuf,
    view: View,
    segments: Vec<Segment>,
    /// Per kind, the rows in output order (run name, then load order within a run).
    pieces: [Vec<Piece>; 8],
    /// Directory listings as of the last discovery, keyed by path below the root.
    dirs: HashMap<PathBuf, DirListing>,
    /// The restored generation's runs' state, not decoded yet; `Reader::runs` is empty (and
    /// `Reader::run_names` complete once decoded) while it is here.
    pending: Option<Box<Pending>>,
    /// What the restored generation's stamp file says was verified already (see `stamp`).
    stamps: Option<Arc<stamp::Stamps>>,
    /// The restored generation's stored tables and the runs the load read again, when it
    /// read only some (`load`): the next generation's tables are the stored rows of every
    /// other run and those runs' own.
    carried: Option<Carried>,
    /// A load decoded the state of only the runs that moved (`carry.rs`); resolved before the
    /// load returns.
    partial: Option<Partial>,
    /// What the last publish wrote, kept while a load is partial (`Cache::repend`).
    written: Option<Written>,
    /// The restored generation's encoded runs, once decoded (`materialise`): a load that read
    /// only some runs again keeps the others' encoded parts in the next manifest (`load`).
    kept: Option<Kept>,
    /// The next load reads everything and reports a miss (the cache was found unusable).
    force_miss: bool,
    opened: bool,
    info: CacheInfo,
    /// Loads leave the generation to a [`CacheWrite`] (`deferred.rs`) instead of writing it.
    deferred: bool,
    /// A load changed something that no generation holds yet (deferred writes only).
    behind: bool,
    /// A [`CacheWrite`] was taken and not finished yet.
    writing: bool,
}

/// What a method of [`CachedReader`] needs of a restored generation (`Cache::ready`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Everything: the runs' state, for `series`, `logs`, `run_mtimes`, `file_path`.
    State,
    /// `runs_table`.
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

impl Cache {
    fn new(dir: &Path, view: View) -> Cache {
        Cache {
            dir: dir.to_path_buf(),
            view,
            segments: Vec::new(),
            pieces: Default::default(),
            dirs: HashMap::new(),
            pending: None,
            stamps: None,
            carried: None,
            partial: None,
            written: None,
            kept: None,
            force_miss: false,
            opened: false,
            deferred: false,
            behind: false,
            writing: false,
            info: CacheInfo {
                dir: dir.to_path_buf(),
                status: "unread",
                ..Default::default()
            },
        }
    }

    fn warn(&mut self, msg: String) {
        self.info.warnings.push(msg);
    }

    /// The warning for a cache that cannot be used, and why.
    fn not_used(&mut self, why: impl std::fmt::Display) {
        let msg = format!(
            "cache {} not used ({why}); reading the logdir and rewriting the cache",
            self.dir.display()
        );
        self.warn(msg);
    }

    /// A load through the cache: restore (the first time), drop what changed under us, read
    /// what is new, publish a generation when anything changed.
    fn load(&mut self, r: &mut Reader, cancel: &AtomicBool) -> Result<LoadStats> {
        let out = self.load_once(r, cancel);
        if self.partial.is_none() {
            return out;
        }
        // Not published (or failed on the way): the reader takes the other runs' state too.
        if let Err(e) = self.complete_partial(r) {
            self.not_used(e);
            self.reset(r);
            self.force_miss = true;
            return self.load_once(r, cancel);
        }
        out
    }

    fn load_once(&mut self, r: &mut Reader, cancel: &AtomicBool) -> Result<LoadStats> {
        self.info.written = false;
        self.info.runs_dropped = 0;
        self.info.runs_rechecked = 0;
        self.info.dirs_listed = 0;
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
                    self.not_used(why);
                    rebuilt = true;
                }
            }
        }
        marks.push(("restore", t0.elapsed()));
        // Stats are most of a warm open on a logdir of many runs: spread them over threads.
        let threads = thread_count(r.opts.threads);
        // Every directory as listed (or listed again, `relisted`) and only these runs' files
        // moved: discovery is not needed.
        let mut moved: Option<Vec<u32>> = None;
        let mut relisted: Option<relist::Relisted> = None;
        self.carried = None;
        let mut stored = (None, None);
        if self.pending.is_some() {
            // (The restored generation is what the check goes by.)
            r.tree = None;
            stored = self
                .pending
                .as_ref()
                .map_or((None, None), |p| (p.facts.clone(), p.stats.clone()));
            let checked = self.changes(r, threads);
            marks.push(("check", t0.elapsed()));
            if let Checked::Moved { runs, dirs } = checked {
                let nothing = if !dirs.is_empty() {
                    // Only the directories that changed are listed again.
                    let p = self.pending.as_deref().expect("checked above");
                    relisted = relist::relist(p, &r.root, runs, &dirs);
                    marks.push(("relist", t0.elapsed()));
                    moved = relisted.as_ref().map(|rl| rl.decode.clone());
                    relisted.as_ref().is_some_and(|rl| {
                        rl.decode.is_empty() && rl.listed.is_empty() && !rl.differs
                    })
                } else if runs.is_empty() {
                    true
                } else {
                    moved = Some(runs);
                    false
                };
                if nothing {
                    // The state stays encoded until something asks for it.
                    self.info.status = "hit";
                    self.trace(&marks);
                    return Ok(LoadStats::default());
                }
            }
            // With only some runs moved, only their state is decoded (`carry.rs`); a deferred
            // write takes the whole reader, so it needs every run's.
            let decoded = match &moved {
                Some(runs) if !self.deferred => self.materialise_some(r, runs),
                _ => Ok(false),
            };
            if let Err(e) = decoded.and_then(|some| if some { Ok(()) } else { self.materialise(r) })
            {
                self.not_used(e);
                self.reset(r);
                rebuilt = true;
                moved = None;
                relisted = None;
            }
            marks.push(("state", t0.elapsed()));
        }
        let reload::Looked {
            found,
            errors,
            stale,
            listings_differ,
        } = self.look(r, threads, moved, relisted, stored, (t0, &mut marks))?;
        for run in &stale {
            r.forget_run(run);
            for p in self.pieces.iter_mut() {
                p.retain(|x| &*x.run != run.as_str());
            }
        }
        self.info.runs_dropped = stale.len();
        let report_len = r.report.len();
        let work = r.plan_found(&found, errors)?;
        drop(found);
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
        if (changed || listings_differ) && self.deferred {
            self.behind = true;
        } else if changed || listings_differ {
            if let Err(e) = self.compact_if_needed() {
                self.warn(format!("cache segments could not be compacted: {e}"));
            }
            if self.partial.is_some() && !self.partial_publishable(r) {
                // (Cannot happen when no directory changed; decoded whole to be sure.)
                if let Err(e) = self.complete_partial(r) {
                    self.warn(format!("cache: {e}"));
                }
            }
            match self.publish(r) {
                Ok(generation) => {
                    self.info.generation = Some(generation);
                    self.info.written = true;
                    if let Some(w) = self.written.take().filter(|_| self.partial.is_some()) {
                        if let Err(e) = self.repend(r, w) {
                            // The state is then decoded whole instead (`load`).
                            self.warn(format!("cache: {e}"));
                        }
                    }
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

    /// The scalar statistics of the unfiltered load, for the generation's stored table: the
    /// carried ones of every run the load did not read again and those runs' own, or all of
    /// them folded from the rows.
    fn stats_to_store(&self) -> Result<RecordBatch> {
        match self
            .carried
            .as_ref()
            .and_then(|c| Some((c.stats.as_ref()?, &c.again)))
        {
            Some((stored, again)) => {
                let again = |run: &str| again.contains(run);
                let fresh = scalar_stats_of(&self.served_of(Kind::Scalars, &again)?)?;
                match carry::splice_stats(stored, &fresh, &again) {
                    Some(b) => Ok(b),
                    None => merge_stats(stored, &fresh, &again),
                }
            }
            None => scalar_stats_of(&self.served(Kind::Scalars)?),
        }
    }

    /// `TBSCOPE_TRACE=1`: where the load spent its time.
    fn trace(&self, marks: &[(&str, Duration)]) {
        trace_marks(self.info.status, marks);
    }

    /// Forgets everything restored (a generation that turned out unusable): the load then
    /// reads the logdir whole.
    fn reset(&mut self, r: &mut Reader) {
        self.pending = None;
        self.carried = None;
        self.partial = None;
        self.written = None;
        self.kept = None;
        self.stamps = None;
        self.segments.clear();
        self.pieces = Default::default();
        self.dirs.clear();
        r.tree = None;
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

    /// Makes what `need` uses ready: decodes a pending state unless the generation's stored
    /// tables answer `need` for this scan's filters, and the rows of a kind before they are
    /// used. Should the cache turn out unusable here (a damaged segment), it is dropped with a
    /// warning and the logdir read again, as a load does.
    fn ready(&mut self, r: &mut Reader, need: Need) -> Result<()> {
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
        self.not_used(why);
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
        let Some(p) = self.pending.as_deref_mut() else {
            return Ok(());
        };
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
        let stamps = self.stamps.clone();
        for s in &mut self.segments {
            let k = kind as usize;
            let Some(f) = s.unread[k].take() else {
                continue;
            };
            let path = s
                .home
                .as_ref()
                .map_or_else(PathBuf::new, |h| h.join(segment_file(&s.name, kind)));
            let Some(sum) = s.files[k] else {
                return Err(Error::Other(format!(
                    "{}: not in the manifest",
                    path.display()
                )));
            };
            // Stamps speak for the files of their own generation only.
            let st = stamps
                .as_deref()
                .filter(|st| s.home.as_deref() == Some(st.dir()));
            let b = read_ipc_file(f, &path, sum, &schema, threads, st).map_err(|e| match e {
                RestoreError::Gone => Error::Other(format!("{} vanished", path.display())),
                RestoreError::Bad(why) => Error::Other(why),
            })?;
            s.batches[k] = Some(b);
        }
        if let Some(st) = &stamps {
            st.flush();
        }
        Ok(())
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
            Ok(((runs, file_names, state_at), dirs)) => {
                r.runs = runs;
                r.file_names = file_names;
                self.dirs = dirs;
                let p = *p;
                self.kept = Some(Kept {
                    manifest: p.manifest,
                    partial: false,
                    nruns: r.run_names.len(),
                    index_at: p.index.at,
                    state_at,
                    strings: p.strings,
                    metas: p.metas,
                    again: Default::default(),
                    dirs_at: p.dirs_at,
                    dirs_same: false,
                });
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
}
