//! A scan of a logdir as the binding serves it: read directly ([`Reader`]) or through a cache
//! directory ([`crate::cache::CachedReader`]), behind one interface.
//!
//! Every method may need work the first time (a cached reader decodes what it restored only
//! when something asks for it), so every one takes `&mut self` and returns a `Result`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::cache::{CacheInfo, CacheWrite, CachedReader, WriteDone};
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::event_file::Cursor;
use crate::load::{LoadStats, Reader, ReportEntry};

/// Files with bytes to read, each with where to start (see [`Reader::plan`]).
pub type Work = Vec<(String, PathBuf, Cursor)>;

/// What the binding asks of a logdir being read.
pub trait Scan: Send {
    /// Reads everything new since the last call (everything, the first time) and keeps it.
    fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats>;
    /// The files to stream, in pieces of about `max_bytes` for [`Scan::read`] (see
    /// [`Reader::plan_pieces`]); a scan that cannot stream says so.
    fn plan_pieces(&mut self, max_bytes: u64) -> Result<Vec<Work>>;
    /// Reads `work` without keeping the rows (streaming).
    fn read(
        &mut self,
        work: Work,
        cancel: &AtomicBool,
    ) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)>;
    /// Everything read so far of `kind`, as the scan's filters and restart rule select it.
    fn table(&mut self, kind: Kind) -> Result<Vec<RecordBatch>>;
    /// The schema of `kind`'s table, even when it has no rows.
    fn schema(&mut self, kind: Kind) -> Result<SchemaRef>;
    fn series(&mut self) -> Result<RecordBatch>;
    /// TF1's SessionLog and LogMessage events, one row each.
    fn logs(&mut self) -> Result<RecordBatch>;
    fn hparams(&mut self) -> Result<RecordBatch>;
    fn runs_table(&mut self) -> Result<RecordBatch>;
    fn run_mtimes(&mut self) -> Result<RecordBatch>;
    fn run_facts(&mut self) -> Result<RecordBatch>;
    fn scalar_stats(&mut self) -> Result<RecordBatch>;
    fn summary_table(&mut self, stats: &[(String, String)]) -> Result<RecordBatch>;
    fn run_names(&mut self) -> Result<Vec<String>>;
    /// The health report of what the scan selects.
    fn report(&mut self) -> Result<Vec<ReportEntry>>;
    /// The absolute path of a file named in `file` / `blob_file` columns.
    fn file_path(&mut self, rel: &str) -> Result<Option<PathBuf>>;
    /// What the cache did on the last load (None without one).
    fn cache_info(&self) -> Option<CacheInfo>;
    /// Files being filled in and how many of their first bytes are there, for the loads from
    /// now on (see [`Reader::set_fetching`]). A cache is written from whole files only.
    fn set_fetching(&mut self, fetching: HashMap<PathBuf, u64>) -> Result<()> {
        if fetching.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidArgument(
            "a scan with a cache reads whole files only: let the fetch finish first".into(),
        ))
    }
    /// Loads leave the cache's generation to [`Scan::take_write`] (see `cache/deferred.rs`);
    /// a scan without a cache ignores it.
    fn defer_writes(&mut self, _on: bool) {}
    /// The generation loads left unwritten, to run without the reader (None: nothing to do).
    fn take_write(&mut self) -> Option<CacheWrite> {
        None
    }
    /// Takes back what a write taken by [`Scan::take_write`] did.
    fn finish_write(&mut self, _done: WriteDone) {}
}

impl Scan for Reader {
    fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        Reader::load(self, cancel)
    }
    fn set_fetching(&mut self, fetching: HashMap<PathBuf, u64>) -> Result<()> {
        Reader::set_fetching(self, fetching);
        Ok(())
    }
    fn plan_pieces(&mut self, max_bytes: u64) -> Result<Vec<Work>> {
        Reader::plan_pieces(self, max_bytes)
    }
    fn read(
        &mut self,
        work: Work,
        cancel: &AtomicBool,
    ) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        Reader::read(self, work, cancel)
    }
    fn table(&mut self, kind: Kind) -> Result<Vec<RecordBatch>> {
        Reader::table(self, kind)
    }
    fn schema(&mut self, kind: Kind) -> Result<SchemaRef> {
        Ok(Reader::schema(self, kind))
    }
    fn series(&mut self) -> Result<RecordBatch> {
        Ok(Reader::series(self))
    }
    fn logs(&mut self) -> Result<RecordBatch> {
        Ok(Reader::logs(self))
    }
    fn hparams(&mut self) -> Result<RecordBatch> {
        Reader::hparams(self)
    }
    fn runs_table(&mut self) -> Result<RecordBatch> {
        Ok(Reader::runs_table(self))
    }
    fn run_mtimes(&mut self) -> Result<RecordBatch> {
        Ok(Reader::run_mtimes(self))
    }
    fn run_facts(&mut self) -> Result<RecordBatch> {
        Reader::run_facts(self)
    }
    fn scalar_stats(&mut self) -> Result<RecordBatch> {
        Reader::scalar_stats(self)
    }
    fn summary_table(&mut self, stats: &[(String, String)]) -> Result<RecordBatch> {
        Reader::summary_table(self, stats)
    }
    fn run_names(&mut self) -> Result<Vec<String>> {
        Ok(Reader::run_names(self))
    }
    fn report(&mut self) -> Result<Vec<ReportEntry>> {
        Ok(Reader::report_entries(self).into_owned())
    }
    fn file_path(&mut self, rel: &str) -> Result<Option<PathBuf>> {
        Ok(Reader::file_path(self, rel))
    }
    fn cache_info(&self) -> Option<CacheInfo> {
        None
    }
}

impl Scan for CachedReader {
    fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        CachedReader::load(self, cancel)
    }
    fn plan_pieces(&mut self, _: u64) -> Result<Vec<Work>> {
        Err(not_streamed())
    }
    fn read(&mut self, _: Work, _: &AtomicBool) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        Err(not_streamed())
    }
    fn table(&mut self, kind: Kind) -> Result<Vec<RecordBatch>> {
        CachedReader::table(self, kind)
    }
    fn schema(&mut self, kind: Kind) -> Result<SchemaRef> {
        CachedReader::schema(self, kind)
    }
    fn series(&mut self) -> Result<RecordBatch> {
        CachedReader::series(self)
    }
    fn logs(&mut self) -> Result<RecordBatch> {
        CachedReader::logs(self)
    }
    fn hparams(&mut self) -> Result<RecordBatch> {
        CachedReader::hparams(self)
    }
    fn runs_table(&mut self) -> Result<RecordBatch> {
        CachedReader::runs_table(self)
    }
    fn run_mtimes(&mut self) -> Result<RecordBatch> {
        CachedReader::run_mtimes(self)
    }
    fn run_facts(&mut self) -> Result<RecordBatch> {
        CachedReader::run_facts(self)
    }
    fn scalar_stats(&mut self) -> Result<RecordBatch> {
        CachedReader::scalar_stats(self)
    }
    fn summary_table(&mut self, stats: &[(String, String)]) -> Result<RecordBatch> {
        CachedReader::summary_table(self, stats)
    }
    fn run_names(&mut self) -> Result<Vec<String>> {
        CachedReader::run_names(self)
    }
    fn report(&mut self) -> Result<Vec<ReportEntry>> {
        CachedReader::report(self)
    }
    fn file_path(&mut self, rel: &str) -> Result<Option<PathBuf>> {
        CachedReader::file_path(self, rel)
    }
    fn cache_info(&self) -> Option<CacheInfo> {
        Some(CachedReader::cache_info(self))
    }
    fn defer_writes(&mut self, on: bool) {
        CachedReader::defer_writes(self, on);
    }
    fn take_write(&mut self) -> Option<CacheWrite> {
        CachedReader::take_write(self)
    }
    fn finish_write(&mut self, done: WriteDone) {
        CachedReader::finish_write(self, done);
    }
}

/// A cached scan's rows come from the cache's files, held without a copy: there is nothing to
/// stream (the Python side reads the cached tables in batches instead).
fn not_streamed() -> Error {
    Error::InvalidArgument(
        "a scan through a cache is not streamed; read its tables (they are not copied)".into(),
    )
}
