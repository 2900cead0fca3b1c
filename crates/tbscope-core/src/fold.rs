//! A scan that keeps statistics of its scalars instead of their rows: what a `summary`
//! without a cache needs, in memory bounded by a piece of the logdir rather than all of it.
//!
//! [`FoldingReader`] loads like a [`Reader`] but in pieces of about [`PIECE_BYTES`] of event
//! file bytes, each read on the reader's worker threads, its scalar rows folded into one
//! [`StatsFold`] (the statistics' one implementation, the cache's stored statistics use it
//! too) and dropped. Rows of the other kinds are kept as a reader keeps them, and so is every
//! run's state, so the runs, series and hparams tables are the reader's own. Rows are folded
//! in the order a load would have kept them, so the statistics equal those of the columns to
//! the bit. The restart rule needs the rows a restart drops, so it is not offered here.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::cache::CacheInfo;
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::load::{cut_pieces, LoadStats, Reader, ReportEntry, Restarts};
use crate::runstats::{summary_of, StatsFold};
use crate::scan::{Scan, Work};

/// Event file bytes read per piece: large enough that starting the workers and merging are
/// a small part of a piece, small enough that its columns stay far below the logdir's.
pub const PIECE_BYTES: u64 = 32 << 20;

/// A [`Reader`] whose scalar rows are folded into statistics as they are read.
pub struct FoldingReader {
    reader: Reader,
    fold: StatsFold,
    piece_bytes: u64,
}

impl FoldingReader {
    /// Folds the scalars of `reader`'s loads (it must not have loaded yet, nor use the
    /// restart rule, which needs the rows it would drop), reading [`PIECE_BYTES`] at a time.
    pub fn new(reader: Reader) -> Result<FoldingReader> {
        FoldingReader::with_piece_bytes(reader, PIECE_BYTES)
    }

    /// [`FoldingReader::new`] reading at most about `piece_bytes` of event files at a time
    /// (tests cut a small logdir into many pieces with it).
    pub fn with_piece_bytes(reader: Reader, piece_bytes: u64) -> Result<FoldingReader> {
        if reader.opts.restarts != Restarts::All || reader.opts.step_lo.is_some() {
            return Err(Error::InvalidArgument(
                "statistics folded while reading keep no rows for restarts=\"preempt\" to drop; read the columns instead".into(),
            ));
        }
        if !reader.runs.is_empty() {
            return Err(Error::InvalidArgument(
                "a reader folds its scalars from its first load".into(),
            ));
        }
        Ok(FoldingReader {
            reader,
            fold: StatsFold::default(),
            piece_bytes: piece_bytes.max(1),
        })
    }

    /// What [`Reader::load`] does, the scalar rows folded piece by piece instead of kept.
    pub fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        let r = &mut self.reader;
        let t0 = std::time::Instant::now();
        // Discovery and the stats run on worker threads; each planned file's size comes with
        // the plan (what the pieces are cut by and the reads go by, without a second stat).
        let (work, sizes) = r.plan_sized()?;
        let planned = t0.elapsed();
        // The whole plan is what a progress display counts to, not one piece after another.
        crate::load::progress::planned(work.len());
        let mut total = LoadStats::default();
        let mut sizes = sizes.into_iter();
        let mut piece_sizes = Vec::new();
        let pieces = cut_pieces(work, self.piece_bytes, |_| {
            let size = sizes.next().unwrap_or(0);
            piece_sizes.push(size);
            size
        });
        let mut piece_sizes = piece_sizes.into_iter();
        // Each piece's scalars are folded on a thread of their own while the next piece is
        // read: the fold is serial, and so is much of a read (merging what the workers
        // found), so the two overlap on two CPUs. One piece waits at most.
        let fold = &mut self.fold;
        std::thread::scope(|s| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
            let folder = std::thread::Builder::new()
                .name("tbscope-fold".into())
                .spawn_scoped(s, move || -> Result<()> {
                    for b in rx {
                        fold.fold(&b)?;
                    }
                    Ok(())
                })
                .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?;
            let read = || -> Result<()> {
                for piece in pieces {
                    let sizes = piece_sizes.by_ref().take(piece.len()).collect();
                    let (st, batches) = r.read_planned(piece, cancel, Some(sizes))?;
                    total.files_read += st.files_read;
                    total.bytes_read += st.bytes_read;
                    total.records += st.records;
                    total.rows += st.rows;
                    total.crc_bytes += st.crc_bytes;
                    for (kind, b) in batches {
                        if kind != Kind::Scalars {
                            r.batches[kind as usize].push(b);
                        } else if tx.send(b).is_err() {
                            // The fold failed: its error is the one to give.
                            return Ok(());
                        }
                    }
                }
                Ok(())
            };
            let read = read();
            drop(tx);
            let folded = folder
                .join()
                .unwrap_or_else(|_| Err(Error::Other("the statistics thread panicked".into())));
            read.and(folded)
        })?;
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope fold: plan {planned:?}, read and fold {:?}",
                t0.elapsed() - planned
            );
        }
        Ok(total)
    }
}

/// Rows of scalars are what this scan does not keep.
fn no_rows() -> Error {
    Error::InvalidArgument(
        "this scan keeps statistics of its scalars, not their rows; scan the logdir again to read them".into(),
    )
}

impl Scan for FoldingReader {
    fn load(&mut self, cancel: &AtomicBool) -> Result<LoadStats> {
        FoldingReader::load(self, cancel)
    }
    fn set_fetching(&mut self, fetching: std::collections::HashMap<PathBuf, u64>) -> Result<()> {
        self.reader.set_fetching(fetching);
        Ok(())
    }
    fn plan_pieces(&mut self, _: u64) -> Result<Vec<Work>> {
        Err(no_rows())
    }
    fn read(&mut self, _: Work, _: &AtomicBool) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        Err(no_rows())
    }
    fn table(&mut self, kind: Kind) -> Result<Vec<RecordBatch>> {
        if kind == Kind::Scalars {
            return Err(no_rows());
        }
        self.reader.table(kind)
    }
    fn schema(&mut self, kind: Kind) -> Result<SchemaRef> {
        Ok(self.reader.schema(kind))
    }
    fn series(&mut self) -> Result<RecordBatch> {
        Ok(self.reader.series())
    }
    fn logs(&mut self) -> Result<RecordBatch> {
        Ok(self.reader.logs())
    }
    fn hparams(&mut self) -> Result<RecordBatch> {
        self.reader.hparams()
    }
    fn runs_table(&mut self) -> Result<RecordBatch> {
        Ok(self.reader.runs_table())
    }
    fn run_mtimes(&mut self) -> Result<RecordBatch> {
        Ok(self.reader.run_mtimes())
    }
    fn run_facts(&mut self) -> Result<RecordBatch> {
        self.reader.run_facts()
    }
    fn scalar_stats(&mut self) -> Result<RecordBatch> {
        Ok(self.fold.table())
    }
    fn summary_table(&mut self, stats: &[(String, String)]) -> Result<RecordBatch> {
        summary_of(&self.reader.runs_table(), &self.fold.table(), stats)
    }
    fn run_names(&mut self) -> Result<Vec<String>> {
        Ok(self.reader.run_names())
    }
    fn report(&mut self) -> Result<Vec<ReportEntry>> {
        Ok(self.reader.report_entries().into_owned())
    }
    fn file_path(&mut self, rel: &str) -> Result<Option<PathBuf>> {
        Ok(self.reader.file_path(rel))
    }
    fn cache_info(&self) -> Option<CacheInfo> {
        None
    }
}
