//! Python bindings for tbscope-core: a `Reader` and Arrow tables, the rewrite, CSV text and
//! the event writer (`writer.rs`), the object-store transport of the remote mirror (`remote.rs`).
//!
//! Every failure leaves through `funnel.rs` (one `From<Failure> for PyErr`; panics included);
//! every long call runs in its one interruptible runner, which releases the GIL and stays
//! interruptible (Ctrl-C cancels the read). The logic lives in the core: these are plumbing.

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::SchemaRef;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tbscope_core::event_file::Options;
use tbscope_core::fold::{FoldingReader, PIECE_BYTES};
use tbscope_core::{CachedReader, Kind, Reader, ReaderOptions, Restarts, Scan};

mod csv;
mod funnel;
mod records;
mod remote;
mod rewrite;
mod series;
mod writer;

use funnel::{detached, guarded, Failure, Outcome};

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";

/// How long a cancelled read may take to stop before Ctrl-C returns anyway (workers notice the
/// flag within a few thousand records; one may be stuck in a system call).
const READ_GRACE: Duration = Duration::from_secs(5);
/// How long a cancelled rewrite may take to remove its staging directory.
const REWRITE_GRACE: Duration = Duration::from_secs(30);

fn regex(pattern: Option<String>, what: &str) -> PyResult<Option<regex::Regex>> {
    pattern
        .map(|p| {
            regex::Regex::new(&p).map_err(|e| {
                // The regex crate's message spans lines with a caret diagram; one line is enough.
                let why = e
                    .to_string()
                    .lines()
                    .filter(|l| l.trim_start().starts_with("error:"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let why = if why.is_empty() {
                    "invalid pattern".to_string()
                } else {
                    why.trim().to_string()
                };
                PyValueError::new_err(format!(
                    "{what}= pattern {p:?} is not supported by the native matcher ({why}); \
                     use a glob or a regex without look-around or backreferences"
                ))
            })
        })
        .transpose()
}

/// The caller's open file descriptor as a `File` for the length of a call: `ManuallyDrop`
/// never closes it (the Python side owns it).
pub(crate) fn borrowed_file(fd: i32) -> std::mem::ManuallyDrop<std::fs::File> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: `fd` is a descriptor the caller keeps open during the call, and never closed here.
    std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) })
}

fn kind(name: &str) -> PyResult<Kind> {
    Kind::from_name(name).ok_or_else(|| {
        let all: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        PyValueError::new_err(format!(
            "unknown kind {name:?}; choose from {}",
            all.join(", ")
        ))
    })
}

/// A logdir being read (directly or through a cache directory).
type Inner = Box<dyn Scan>;

/// A reader's state, shared with its streams and the deferred cache writes that hold it.
type Shared = Arc<Mutex<Inner>>;

/// A logdir being read; keeps per-file offsets so `load()` again reads only new bytes.
#[pyclass(module = "tbscope._core", frozen)]
struct NativeReader {
    inner: Shared,
    /// Set by `abandon_cache_write`: a deferred cache write running or to come stops.
    abandon: Arc<AtomicBool>,
}

/// The state of a reader of a large logdir (per run and per file: 100,000 runs take a
/// quarter of a second to free) is freed on the process's freeing thread ([`free_later`]), so
/// that whoever lets go of the reader (a command about to exit, a notebook cell) does not wait
/// for it. If something else still holds the state (a stream, a deferred cache write), the
/// last holder frees it as before.
impl Drop for NativeReader {
    fn drop(&mut self) {
        if Arc::strong_count(&self.inner) == 1 {
            free_later(Arc::clone(&self.inner));
        }
    }
}

/// Hands a dropped reader's state to the process's one freeing thread (`tbscope_core::free`).
/// Its queue is bounded: when full, or when no thread can be started, the state is let go
/// here, and the reader frees it inline.
fn free_later(state: Shared) {
    tbscope_core::free::FREER.later(state);
}

#[pymethods]
impl NativeReader {
    #[new]
    #[pyo3(signature = (path, *, runs=None, tags=None, kinds=None, step_lo=None, step_hi=None,
                        restarts="all", verify=true, max_record_bytes=256 << 20, provenance=false, threads=0,
                        cache_dir=None, tail_timeout=600.0, byte_range=None, fold_scalars=false,
                        fold_piece_bytes=None))]
    #[allow(
        clippy::too_many_arguments,
        reason = "one parameter per Python keyword argument (pyo3 maps them)"
    )]
    fn new(
        path: PathBuf,
        runs: Option<String>,
        tags: Option<String>,
        kinds: Option<Vec<String>>,
        step_lo: Option<i64>,
        step_hi: Option<i64>,
        restarts: &str,
        verify: bool,
        max_record_bytes: u64,
        provenance: bool,
        threads: usize,
        cache_dir: Option<PathBuf>,
        tail_timeout: f64,
        byte_range: Option<(u64, Option<u64>)>,
        fold_scalars: bool,
        fold_piece_bytes: Option<u64>,
    ) -> Outcome<Self> {
        if fold_scalars && cache_dir.is_some() {
            return Err(Failure::Value(
                "fold_scalars= keeps statistics instead of rows, without a cache; a cache was given".into(),
            ));
        }
        if let Some((start, end)) = byte_range {
            if end.is_some_and(|end| end < start) {
                return Err(Failure::Value(format!(
                    "byte_range=({start}, {end:?}) ends before it starts; give (start, end) with start <= end, or (start, None)"
                )));
            }
            if cache_dir.is_some() || !path.is_file() {
                return Err(Failure::Value(format!(
                    "byte_range= reads a piece of one event file without a cache; {} is not one, or a cache was given",
                    path.display()
                )));
            }
        }
        let tail_timeout = if tail_timeout == f64::INFINITY {
            // Never final by age (a newer file in the run still makes it final).
            Ok(std::time::Duration::MAX)
        } else {
            std::time::Duration::try_from_secs_f64(tail_timeout)
        }
        .map_err(|_| {
            Failure::Value(format!(
                "tail_timeout={tail_timeout} is not a number of seconds >= 0; use 0 to read every file as finished"
            ))
        })?;
        let restarts = match restarts {
            "all" => Restarts::All,
            "preempt" => Restarts::Preempt,
            other => {
                return Err(Failure::Value(format!(
                    "restarts={other:?} is not a choice; use \"all\" (keep every record) or \"preempt\" (TensorBoard's rule)"
                )))
            }
        };
        let kinds = match kinds {
            None => tbscope_core::data_compat::KindSet::ALL,
            Some(v) => tbscope_core::data_compat::KindSet::of(
                &v.iter().map(|k| kind(k)).collect::<PyResult<Vec<_>>>()?,
            ),
        };
        let opts = ReaderOptions {
            file: Options {
                verify,
                max_len: max_record_bytes,
                provenance,
                kinds,
                tags: regex(tags, "tags")?,
                byte_range,
                ..Default::default()
            },
            runs: regex(runs, "runs")?,
            restarts,
            threads,
            tail_timeout,
            ..Default::default()
        }
        .with_steps(step_lo, step_hi);
        let reader: Inner = guarded(|| {
            Ok(match cache_dir {
                Some(dir) => Box::new(CachedReader::new(&path, opts, &dir)?) as Inner,
                None if fold_scalars => Box::new(FoldingReader::with_piece_bytes(
                    Reader::new(&path, opts)?,
                    fold_piece_bytes.unwrap_or(PIECE_BYTES),
                )?),
                None => Box::new(Reader::new(&path, opts)?),
            })
        })?;
        Ok(NativeReader {
            inner: Arc::new(Mutex::new(reader)),
            abandon: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Loads from now on publish their rows without writing the cache; `write_cache` writes
    /// it (`tbscope serve`: the first answer does not wait for the cache).
    fn defer_cache_writes(&self) -> Outcome<()> {
        self.with(|r| {
            r.defer_writes(true);
            Ok(())
        })
    }

    /// Writes the cache generation that loads left unwritten, holding the reader only to take
    /// a copy of its state and to hand the outcome back (requests and loads go on meanwhile;
    /// the GIL is released). Returns the generation published, None when there was nothing
    /// to write, another write was running, it failed (a warning in `cache_info`) or it was
    /// abandoned.
    fn write_cache(&self, py: Python<'_>) -> Outcome<Option<String>> {
        py.detach(|| {
            guarded(|| {
                let write = {
                    let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                    r.take_write()
                };
                let Some(write) = write else {
                    return Ok(None);
                };
                let done = write.run(&self.abandon);
                let generation = done.generation().map(str::to_string);
                let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                r.finish_write(done);
                Ok(generation)
            })
        })
    }

    /// Stops a deferred cache write: one running abandons before its next file (its temporary
    /// directory removed, nothing published), later ones do nothing.
    fn abandon_cache_write(&self) {
        self.abandon.store(true, Ordering::Relaxed);
    }

    /// Reads what is new; returns (files read, bytes read, records, rows, directories listed).
    /// `fetching`: files
    /// being filled in (a remote mirror's first fetch) and how many of their first bytes are
    /// there, for this load and the next ones (`{}`: all whole again; None: as before).
    #[pyo3(signature = (fetching=None))]
    fn load(
        &self,
        py: Python<'_>,
        fetching: Option<HashMap<PathBuf, u64>>,
    ) -> Outcome<(usize, u64, u64, usize, usize)> {
        let s = self.detached(py, move |r, cancel| {
            if let Some(f) = fetching {
                r.set_fetching(f)?;
            }
            r.load(cancel)
        })?;
        Ok((s.files_read, s.bytes_read, s.records, s.rows, s.dirs_listed))
    }

    /// Streams one kind in pieces of about `max_bytes` of event files, keeping nothing.
    fn stream(&self, kind_name: &str, max_bytes: u64) -> Outcome<Stream> {
        let k = kind(kind_name)?;
        let pieces = self.with(|r| r.plan_pieces(max_bytes))?;
        Ok(Stream {
            reader: self.inner.clone(),
            pieces: Mutex::new(pieces.into()),
            kind: k,
        })
    }

    /// All rows read so far of one kind.
    fn table(&self, py: Python<'_>, kind_name: &str) -> Outcome<Table> {
        let k = kind(kind_name)?;
        py.detach(|| {
            self.with(|r| {
                Ok(Table {
                    batches: r.table(k)?,
                    schema: r.schema(k)?,
                })
            })
        })
    }

    /// TF1's SessionLog and LogMessage events, one row each.
    fn logs(&self) -> Outcome<Table> {
        self.with(|r| r.logs().map(Table::one))
    }

    fn series(&self) -> Outcome<Table> {
        self.with(|r| r.series().map(Table::one))
    }

    /// One row per run with hparams records.
    fn hparams(&self) -> Outcome<Table> {
        self.with(|r| r.hparams().map(Table::one))
    }

    fn runs_table(&self) -> Outcome<Table> {
        self.with(|r| r.runs_table().map(Table::one))
    }

    /// Per run: the runs table's columns, last_modified, series, first_step, last_step.
    fn run_facts(&self) -> Outcome<Table> {
        self.with(|r| r.run_facts().map(Table::one))
    }

    /// One row per run of `runs_table()`; per tag with scalars (sorted) and per (statistic,
    /// suffix) of `stats`, a column `<tag>:<suffix>`.
    fn summary_table(&self, py: Python<'_>, stats: Vec<(String, String)>) -> Outcome<Table> {
        py.detach(|| self.with(|r| r.summary_table(&stats).map(Table::one)))
    }

    fn run_names(&self) -> Outcome<Vec<String>> {
        self.with(|r| r.run_names())
    }

    /// The health report: (run, file, severity, offset, length, reason) tuples.
    fn report(&self) -> Outcome<Vec<ReportTuple>> {
        self.with(|r| {
            Ok(r.report()?
                .iter()
                .map(|e| {
                    (
                        e.run.clone(),
                        e.file.clone(),
                        e.severity.name(),
                        e.offset,
                        e.length,
                        e.reason.clone(),
                    )
                })
                .collect())
        })
    }

    /// What the cache did on the last load: (dir, status, generation, written, runs dropped,
    /// warnings, runs rechecked, directories listed), or None without a cache.
    fn cache_info(&self) -> Option<CacheInfoTuple> {
        let r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        r.cache_info().map(|c| {
            (
                c.dir.to_string_lossy().into_owned(),
                c.status,
                c.generation,
                c.written,
                c.runs_dropped,
                c.warnings,
                c.runs_rechecked,
                c.dirs_listed,
            )
        })
    }

    /// The absolute path of a file named in `blob_file`/`file` columns.
    fn file_path(&self, rel: &str) -> Outcome<Option<PathBuf>> {
        self.with(|r| r.file_path(rel))
    }
}

impl NativeReader {
    /// The one way into the reader for the quick methods above: locks it, runs `f` (a cached
    /// reader decodes what `f` needs itself).
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> tbscope_core::Result<T>) -> Outcome<T> {
        guarded(|| {
            let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            Ok(f(&mut r)?)
        })
    }

    /// `f` on the reader in the interruptible runner (long calls: `load`).
    fn detached<T: Send + 'static>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner, &std::sync::atomic::AtomicBool) -> tbscope_core::Result<T>
            + Send
            + 'static,
    ) -> Outcome<T> {
        read_detached(py, &self.inner, f)
    }
}

/// `f` on `reader` in the interruptible runner.
fn read_detached<T: Send + 'static>(
    py: Python<'_>,
    reader: &Shared,
    f: impl FnOnce(&mut Inner, &std::sync::atomic::AtomicBool) -> tbscope_core::Result<T>
        + Send
        + 'static,
) -> Outcome<T> {
    let reader = reader.clone();
    detached(py, "tbscope-load", READ_GRACE, move |cancel| {
        let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
        Ok(f(&mut r, cancel)?)
    })
}

type Piece = tbscope_core::scan::Work;

/// `NativeReader.report()`: (run, file, severity, offset, length, reason).
type ReportTuple = (String, String, &'static str, u64, u64, String);

/// `NativeReader.cache_info()`: (dir, status, generation, written, runs dropped, warnings,
/// runs rechecked, directories listed).
type CacheInfoTuple = (
    String,
    &'static str,
    Option<String>,
    bool,
    usize,
    Vec<String>,
    usize,
    usize,
);

/// Pieces of a logdir read one at a time: each `next()` reads a group of files.
#[pyclass(module = "tbscope._core", frozen)]
struct Stream {
    reader: Shared,
    pieces: Mutex<VecDeque<Piece>>,
    kind: Kind,
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> Outcome<Option<Table>> {
        loop {
            let Some(piece) = self
                .pieces
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
            else {
                return Ok(None);
            };
            let kind = self.kind;
            let batches: Vec<RecordBatch> =
                read_detached(py, &self.reader, move |r, cancel| r.read(piece, cancel))?
                    .1
                    .into_iter()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, b)| b)
                    .collect();
            if let Some(first) = batches.first() {
                return Ok(Some(Table {
                    schema: first.schema(),
                    batches,
                }));
            }
        }
    }
}

/// Record batches that leave through the Arrow PyCapsule interface.
#[pyclass(module = "tbscope._core", frozen)]
struct Table {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl Table {
    fn one(b: RecordBatch) -> Table {
        Table {
            schema: b.schema(),
            batches: vec![b],
        }
    }
}

#[pymethods]
impl Table {
    /// A fresh stream on every call; batches are shared, not copied.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Py<PyAny>>,
    ) -> Outcome<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // The protocol lets a producer keep its own schema.
        let it = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(it));
        Ok(PyCapsule::new_with_value(py, stream, STREAM)?)
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> Outcome<Bound<'py, PyCapsule>> {
        let s = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| PyValueError::new_err(format!("cannot export schema: {e}")))?;
        Ok(PyCapsule::new_with_value(py, s, SCHEMA)?)
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

/// The run name of `rel`, a path relative to the logdir (`tbscope_core::logdir::run_name`, the
/// one rule), for Python code that lists files of a logdir itself (profiles).
#[pyfunction]
fn run_name(rel: PathBuf) -> String {
    tbscope_core::logdir::run_name(&rel)
}

/// The event files below `path` as the reader finds them (TensorBoard's run discovery, the
/// one `tbscope_core::logdir::discover`): (run, file, bytes) for each, runs and files by name.
/// A file that cannot be stat'ed counts 0 bytes; a directory that cannot be listed is
/// skipped, as the reader skips it.
#[pyfunction]
fn event_files(py: Python<'_>, path: PathBuf) -> Outcome<Vec<(String, std::ffi::OsString, u64)>> {
    py.detach(|| {
        guarded(|| {
            let (found, _skipped) = tbscope_core::logdir::discover(&path, None)
                .map_err(|e| tbscope_core::Error::io(e, &path))?;
            let mut out = Vec::new();
            for (run, files) in found {
                for file in files {
                    let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
                    // As str (os.fsdecode's), not pathlib objects: cheaper by far for many runs.
                    out.push((run.clone(), file.into_os_string(), bytes));
                }
            }
            Ok(out)
        })
    })
}

/// (pieces of event files read, pieces given to read) by every load of this process so far,
/// for a progress display: it keeps the counts from when its load started and shows what was
/// added since (`tbscope_core::load::progress`).
#[pyfunction]
fn load_progress() -> (u64, u64) {
    tbscope_core::load::progress::counts()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeReader>()?;
    m.add_class::<Table>()?;
    m.add_class::<Stream>()?;
    m.add_class::<writer::EventWriter>()?;
    m.add_class::<remote::S3Fetcher>()?;
    m.add_function(wrap_pyfunction!(rewrite::rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(rewrite::commit_rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(csv::to_csv, m)?)?;
    m.add_function(wrap_pyfunction!(records::read_records, m)?)?;
    m.add_function(wrap_pyfunction!(records::record_heads, m)?)?;
    m.add_function(wrap_pyfunction!(records::split_points, m)?)?;
    m.add_function(wrap_pyfunction!(records::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(event_files, m)?)?;
    m.add_function(wrap_pyfunction!(run_name, m)?)?;
    m.add_function(wrap_pyfunction!(load_progress, m)?)?;
    m.add_function(wrap_pyfunction!(series::downsample, m)?)?;
    m.add_function(wrap_pyfunction!(series::ema, m)?)?;
    m.add_function(wrap_pyfunction!(series::group_rows, m)?)?;
    Ok(())
}
